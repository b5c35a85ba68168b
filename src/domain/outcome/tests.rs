use std::{io::ErrorKind, time::Duration};

use http::StatusCode;

use super::*;

fn lost(end: SessionEnd, stderr: Option<&str>) -> SessionLoss {
    SessionLoss {
        end,
        stderr: stderr.map(str::to_owned),
    }
}

#[test]
fn each_phase_has_its_state_and_message() {
    let exited = lost(SessionEnd::Exited(ProcessExit::Status(3)), Some("boom"));
    let spawn = StartError::from(StartFailure::Spawn {
        command: "/nope".into(),
        kind: ErrorKind::NotFound,
        detail: "No such file or directory (os error 2)".into(),
    });
    let peer = PeerInfo {
        server: Some(("demo".into(), "0.1.0".into())),
        protocol: Some("2025-11-25".into()),
        icons: Default::default(),
    };
    let cases = [
        (Phase::Starting, ServerState::Connecting, "starting"),
        (
            Phase::Reconnecting { attempt: 2 },
            ServerState::Reconnecting,
            "reconnecting (attempt 2)",
        ),
        (
            Phase::Ready(peer),
            ServerState::Ready,
            "connected to demo 0.1.0 (MCP 2025-11-25)",
        ),
        (
            Phase::Lost(exited.clone()),
            ServerState::Reconnecting,
            "session lost: the server exited with status 3; stderr: boom",
        ),
        (
            Phase::Retrying {
                setback: Setback::Lost(exited),
                delay: Duration::from_micros(1_500_700),
            },
            ServerState::Reconnecting,
            "session lost: the server exited with status 3; stderr: boom; next attempt in 1s 500ms",
        ),
        (
            Phase::Retrying {
                setback: Setback::StartFailed(spawn),
                delay: Duration::from_secs(2),
            },
            ServerState::Failed,
            "cannot start \"/nope\": No such file or directory (os error 2) (is it installed and \
             on PATH, or is cwd wrong?); next attempt in 2s",
        ),
        (Phase::Stopped, ServerState::Stopped, "stopped"),
    ];
    for (phase, state, message) in cases {
        let condition = phase.condition(Transport::Stdio, 1, SystemTime::UNIX_EPOCH);
        assert_eq!(
            (condition.state, condition.message.as_str()),
            (state, message)
        );
        assert_eq!(condition.restarts, 1);
    }
}

#[test]
fn start_errors_say_what_failed_and_what_the_server_showed() {
    let exit = ProcessExit::Status(7);
    let cases = [
        (
            StartError {
                failure: StartFailure::Initialize(TransportFailure::Other(
                    "connection closed: initialize response".into(),
                )),
                exit: Some(exit.clone()),
                stderr: Some("missing API key".into()),
            },
            "initialize failed: connection closed: initialize response; the server exited with \
             status 7; stderr: missing API key",
        ),
        (
            StartError::from(StartFailure::ExitedDuringInitialize(exit)),
            "exited with status 7 during initialize",
        ),
        (
            StartError {
                failure: StartFailure::InitTimeout(Duration::from_secs(2)),
                exit: None,
                stderr: Some("still loading".into()),
            },
            "did not finish starting within 2s (init_timeout); stderr: still loading",
        ),
        (
            StartError::from(StartFailure::Stream(StreamFault::NotJsonRpc(
                "Starting...".into(),
            ))),
            "the server wrote text that is not JSON-RPC to stdout (\"Starting...\"); MCP servers \
             must log to stderr",
        ),
        (
            StartError::from(StartFailure::Initialize(TransportFailure::Status(
                StatusCode::UNAUTHORIZED,
            ))),
            "initialize failed: HTTP 401 Unauthorized: the server refused the credentials; a \
             header or token is probably missing or wrong (set it under `headers`, e.g. \
             Authorization: \"Bearer ${TOKEN}\")",
        ),
        (
            StartError::from(StartFailure::NeitherTransport {
                status: StatusCode::NOT_FOUND,
                sse: Box::new(StartFailure::SseRefused {
                    url: "http://h/mcp".into(),
                    status: StatusCode::NOT_FOUND,
                }),
            }),
            "the URL serves neither MCP transport: POST initialize answered HTTP 404 Not Found \
             (not streamable HTTP), and as legacy SSE: GET http://h/mcp answered HTTP 404 Not \
             Found",
        ),
        (
            StartError::from(StartFailure::Listing(ListingFailure::RepeatedCursor(
                "p2".into(),
            ))),
            "tools/list repeated the cursor \"p2\"",
        ),
    ];
    for (error, want) in cases {
        assert_eq!(error.to_string(), want);
    }
}

#[test]
fn session_ends_read_after_session_lost() {
    let cases = [
        (SessionEnd::Closed, "the server closed the connection"),
        (
            SessionEnd::Exited(ProcessExit::Signal(9)),
            "the server was killed by signal 9",
        ),
        (
            SessionEnd::Stream(StreamFault::TooLong(100)),
            "the server wrote a message longer than 100 bytes (limits.max_result_bytes); the \
             session was dropped",
        ),
        (
            SessionEnd::PingFailed(TransportFailure::Refused),
            "the server did not answer a ping: connection refused: nothing listens at that \
             address (is the server running?)",
        ),
        (
            SessionEnd::PingUnanswered(Duration::from_secs(10)),
            "the server did not answer a ping within 10s",
        ),
    ];
    for (end, want) in cases {
        assert_eq!(end.to_string(), want);
    }
}

#[test]
fn oauth_failures_say_the_step_and_what_to_do() {
    let hint = LoginHint {
        server: crate::domain::names::ServerName::parse("notes").unwrap(),
        store: "/var/lib/tb/notes.json".into(),
    };
    let cases = [
        (
            OAuthFailure::Refused {
                error: Some("invalid_token".into()),
                description: Some("audience mismatch".into()),
            },
            "the server refused a freshly issued token (HTTP 401, invalid_token: audience \
             mismatch)",
        ),
        (
            OAuthFailure::Forbidden {
                error: None,
                description: None,
            },
            "the server refused the request (HTTP 403)",
        ),
        (
            OAuthFailure::Token {
                step: TokenStep::ClientCredentials,
                reason: "temporarily_unavailable".into(),
            },
            "the client credentials grant failed: temporarily_unavailable",
        ),
        (
            OAuthFailure::NotLoggedIn(hint.clone()),
            "not logged in yet: run `toolbroker login notes --config <this config file>` \
             (tokens go to /var/lib/tb/notes.json)",
        ),
        (
            OAuthFailure::InsufficientScope {
                required: Some("admin".into()),
                why: NoStepUp::Limit(3),
            },
            "the server needs more scope for this (\"admin\"); the broker asked for more scope \
             3 times already and stops there",
        ),
        (
            OAuthFailure::TimedOut(Duration::from_secs(30)),
            "getting a token took longer than 30 s: the authorization server (discovery or its \
             token endpoint) did not answer",
        ),
    ];
    for (failure, want) in cases {
        assert_eq!(failure.to_string(), want);
    }
    assert!(OAuthFailure::NotLoggedIn(hint).needs_person());
    assert!(!OAuthFailure::TimedOut(Duration::from_secs(30)).needs_person());
}
