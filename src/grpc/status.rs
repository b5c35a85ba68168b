//! The one table from call errors to gRPC statuses.

use tonic::Status;

use crate::domain::call::{CallError, INVALID_PARAMS};

/// The gRPC status for a failed call, as the contract's table says.
pub fn from_call_error(error: &CallError) -> Status {
    let message = error.to_string();
    match error {
        CallError::UnknownTool { .. } => Status::not_found(message),
        CallError::InvalidArguments(_) => Status::invalid_argument(message),
        CallError::NotReady { .. } | CallError::SessionLost { .. } => Status::unavailable(message),
        CallError::Timeout { .. } => Status::deadline_exceeded(message),
        CallError::ServerError { code, .. } if *code == INVALID_PARAMS => {
            Status::invalid_argument(message)
        }
        CallError::ServerError { .. } | CallError::BadResult { .. } => Status::internal(message),
        CallError::Overloaded { .. } | CallError::ResultTooLarge { .. } => {
            Status::resource_exhausted(message)
        }
    }
}

/// Whether the caller caused the error (logged at debug) rather than a server (logged at warn).
pub fn is_caller_mistake(error: &CallError) -> bool {
    match error {
        CallError::UnknownTool { .. } | CallError::InvalidArguments(_) => true,
        CallError::ServerError { code, .. } => *code == INVALID_PARAMS,
        CallError::NotReady { .. }
        | CallError::SessionLost { .. }
        | CallError::Timeout { .. }
        | CallError::BadResult { .. }
        | CallError::Overloaded { .. }
        | CallError::ResultTooLarge { .. } => false,
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use tonic::Code;

    use super::*;
    use crate::domain::names::ServerName;

    #[test]
    fn every_call_error_has_its_contract_status() {
        let server = ServerName::parse("s").unwrap();
        let server_error = |code| CallError::ServerError {
            server: server.clone(),
            code,
            message: "m".into(),
        };
        let cases = [
            (CallError::UnknownTool { name: "x".into() }, Code::NotFound),
            (
                CallError::InvalidArguments("x".into()),
                Code::InvalidArgument,
            ),
            (
                CallError::NotReady {
                    server: server.clone(),
                    state: "failed",
                    message: "m".into(),
                },
                Code::Unavailable,
            ),
            (
                CallError::SessionLost {
                    server: server.clone(),
                    detail: "d".into(),
                },
                Code::Unavailable,
            ),
            (
                CallError::Timeout {
                    server: server.clone(),
                    after: Duration::from_secs(1),
                },
                Code::DeadlineExceeded,
            ),
            (server_error(INVALID_PARAMS), Code::InvalidArgument),
            (server_error(-32603), Code::Internal),
            (
                CallError::BadResult {
                    server: server.clone(),
                    reason: "r".into(),
                },
                Code::Internal,
            ),
            (
                CallError::Overloaded {
                    server: server.clone(),
                    reason: "r".into(),
                },
                Code::ResourceExhausted,
            ),
            (
                CallError::ResultTooLarge {
                    server: server.clone(),
                    limit: 1,
                    consequence: "c",
                },
                Code::ResourceExhausted,
            ),
        ];
        for (error, code) in cases {
            let status = from_call_error(&error);
            assert_eq!(status.code(), code, "{error:?}");
            assert_eq!(status.message(), error.to_string());
        }
    }
}
