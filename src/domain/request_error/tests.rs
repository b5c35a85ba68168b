use std::time::Duration;

use super::*;

fn server() -> ServerName {
    ServerName::parse("demo").unwrap()
}

/// Every error, with the code, level and label the contract and the metrics give it.
fn table() -> Vec<(RequestError, Code, Level, &'static str)> {
    use Code::*;
    use Level::{Debug, Warn};
    let server_error = |code| RequestError::ServerError {
        server: server(),
        code,
        message: "m".into(),
    };
    vec![
        (
            RequestError::Unauthenticated(AuthFailure::MissingToken),
            Unauthenticated,
            Debug,
            "unauthenticated",
        ),
        (
            RequestError::PermissionDenied {
                caller: "reader".into(),
                tool: "rm".into(),
            },
            PermissionDenied,
            Debug,
            "permission_denied",
        ),
        (
            RequestError::UnknownTool { name: "x".into() },
            NotFound,
            Debug,
            "unknown_tool",
        ),
        (
            RequestError::PromptDenied {
                caller: "reader".into(),
                prompt: "p".into(),
            },
            PermissionDenied,
            Debug,
            "permission_denied",
        ),
        (
            RequestError::ResourcesDenied {
                caller: "reader".into(),
                server: "fs".into(),
            },
            PermissionDenied,
            Debug,
            "permission_denied",
        ),
        (
            RequestError::UnknownPrompt { name: "x".into() },
            NotFound,
            Debug,
            "unknown_prompt",
        ),
        (
            RequestError::UnknownResource {
                server: server(),
                uri: "memo://x".into(),
                message: "m".into(),
            },
            NotFound,
            Debug,
            "unknown_resource",
        ),
        (
            RequestError::NoResources { server: server() },
            NotFound,
            Debug,
            "no_resources",
        ),
        (
            RequestError::UnknownServer { name: "x".into() },
            NotFound,
            Debug,
            "unknown_server",
        ),
        (
            RequestError::InvalidArguments("x".into()),
            InvalidArgument,
            Debug,
            "invalid_arguments",
        ),
        (
            RequestError::FirstMessageLate(Duration::from_secs(10)),
            DeadlineExceeded,
            Debug,
            "first_message_late",
        ),
        (
            RequestError::RequestTooLarge,
            ResourceExhausted,
            Debug,
            "request_too_large",
        ),
        (
            RequestError::ResponseTooLarge { size: 2, limit: 1 },
            ResourceExhausted,
            Debug,
            "response_too_large",
        ),
        (
            RequestError::ShuttingDown,
            Unavailable,
            Debug,
            "shutting_down",
        ),
        (
            RequestError::AuditUnavailable,
            Unavailable,
            Debug,
            "audit_unavailable",
        ),
        (
            RequestError::NotReady {
                server: server(),
                state: ServerState::Failed,
                message: "m".into(),
            },
            Unavailable,
            Warn,
            "not_ready",
        ),
        (
            RequestError::SessionLost {
                server: server(),
                cause: LostCall::Closed,
            },
            Unavailable,
            Warn,
            "session_lost",
        ),
        (
            RequestError::Timeout {
                server: server(),
                after: Duration::from_secs(1),
            },
            DeadlineExceeded,
            Warn,
            "timeout",
        ),
        (
            server_error(INVALID_PARAMS),
            InvalidArgument,
            Debug,
            "jsonrpc_error",
        ),
        (server_error(-32603), Internal, Warn, "jsonrpc_error"),
        (
            RequestError::Overloaded {
                server: server(),
                overload: Overload::QueueFull {
                    running: 1,
                    waiting: 1,
                },
            },
            ResourceExhausted,
            Warn,
            "overloaded",
        ),
        (
            RequestError::ResultTooLarge {
                server: server(),
                limit: 1,
                aftermath: Aftermath::SessionGoesOn,
            },
            ResourceExhausted,
            Warn,
            "result_too_large",
        ),
        (
            RequestError::BadResult {
                server: server(),
                reason: "r".into(),
            },
            Internal,
            Warn,
            "bad_result",
        ),
        (
            RequestError::InputNotGiven {
                server: server(),
                reason: "r".into(),
            },
            FailedPrecondition,
            Debug,
            "input_not_given",
        ),
        (
            RequestError::MissingCallerValue {
                server: server(),
                missing: MissingValue(crate::domain::caller::CallerRef::Token),
            },
            FailedPrecondition,
            Debug,
            "missing_caller_value",
        ),
        (
            RequestError::SessionsExhausted {
                server: server(),
                max: 2,
            },
            ResourceExhausted,
            Warn,
            "sessions_exhausted",
        ),
        (
            RequestError::CallerSessionsExhausted {
                server: server(),
                max: 2,
            },
            ResourceExhausted,
            Debug,
            "caller_sessions_exhausted",
        ),
        (
            RequestError::CallerSessionFailed {
                server: server(),
                reason: "r".into(),
            },
            Unavailable,
            Warn,
            "caller_session_failed",
        ),
        (
            RequestError::ExchangeRefused {
                server: server(),
                error: "invalid_grant".into(),
                description: None,
            },
            PermissionDenied,
            Debug,
            "exchange_refused",
        ),
        (
            RequestError::ExchangeUnavailable {
                server: server(),
                reason: "r".into(),
            },
            Unavailable,
            Warn,
            "exchange_unavailable",
        ),
        (
            RequestError::Unauthenticated(AuthFailure::Jwt(JwtFailure::Expired)),
            Unauthenticated,
            Debug,
            "unauthenticated",
        ),
    ]
}

#[test]
fn every_error_has_its_contract_code_level_and_label() {
    for (error, code, level, label) in table() {
        assert_eq!(error.class(), Class { code, level, label }, "{error:?}");
    }
}

#[test]
fn messages_name_what_is_at_fault_and_what_to_do() {
    let cases = [
        (
            RequestError::FirstMessageLate(Duration::from_secs(10)),
            "the request's first message did not come within 10s (limits.header_timeout)",
        ),
        (
            RequestError::Timeout {
                server: server(),
                after: Duration::from_millis(1500),
            },
            "the call to server \"demo\" did not finish within 1s 500ms",
        ),
        (
            RequestError::NotReady {
                server: server(),
                state: ServerState::Reconnecting,
                message: "session lost".into(),
            },
            "server \"demo\" is not ready (reconnecting): session lost",
        ),
        (
            RequestError::Overloaded {
                server: server(),
                overload: Overload::NoSlot {
                    waited: Duration::from_secs(1),
                    running: 8,
                },
            },
            "server \"demo\" is overloaded: no call slot freed up within 1s \
             (max_concurrent_calls 8, queue_timeout); retry later",
        ),
        (
            RequestError::ResultTooLarge {
                server: server(),
                limit: 100,
                aftermath: Aftermath::SessionDropped,
            },
            "server \"demo\" sent a result over the 100-byte limit (limits.max_result_bytes); \
             the session was dropped and is being restarted",
        ),
        (
            RequestError::SessionLost {
                server: server(),
                cause: LostCall::Cancelled(None),
            },
            "lost the connection to server \"demo\": the request was cancelled (no reason given)",
        ),
        (
            RequestError::Unauthenticated(AuthFailure::NotBearer),
            "the authorization header is not \"Bearer <token>\"",
        ),
    ];
    for (error, want) in cases {
        assert_eq!(error.to_string(), want);
    }
}

#[test]
fn refusals_are_the_errors_of_calls_that_never_reached_a_server() {
    let refused: Vec<bool> = table()
        .into_iter()
        .map(|(error, ..)| error.is_refusal())
        .collect();
    let names: Vec<&str> = table()
        .iter()
        .zip(&refused)
        .filter(|(_, refused)| **refused)
        .map(|((_, _, _, label), _)| *label)
        .collect();
    assert_eq!(
        names,
        [
            "unauthenticated",
            "permission_denied",
            "unknown_tool",
            "invalid_arguments",
            "request_too_large",
            "shutting_down",
            "audit_unavailable",
            "unauthenticated",
        ]
    );
    let limited = RequestError::RateLimited {
        limit: RateLimit::Caller(crate::domain::config::Rate::parse("1/s").unwrap()),
        retry_after: Duration::from_secs(1),
    };
    assert!(limited.is_refusal());
}
