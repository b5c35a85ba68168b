//! Request errors as gRPC statuses: the code from the error's table (see
//! [`RequestError::class`]), the message from the error itself; a rate limit adds when to
//! retry, as a `retry-after` trailer (whole seconds) and a `google.rpc.RetryInfo` detail.

use std::time::Duration;

use tonic::{Status, metadata::MetadataValue};
use tonic_types::{ErrorDetails, StatusExt as _};

use crate::domain::request_error::{Code, RequestError, whole_seconds};

/// The gRPC status for a refused or failed request.
pub fn to_status(error: &RequestError) -> Status {
    let code = grpc_code(error.class().code);
    match error {
        RequestError::RateLimited { retry_after, .. } => {
            let seconds = whole_seconds(*retry_after);
            let details = ErrorDetails::with_retry_info(Some(Duration::from_secs(seconds)));
            let mut status = Status::with_error_details(code, error.to_string(), details);
            status
                .metadata_mut()
                .insert("retry-after", MetadataValue::from(seconds));
            status
        }
        _ => Status::new(code, error.to_string()),
    }
}

/// tonic's name for a gRPC status code.
pub(super) fn grpc_code(code: Code) -> tonic::Code {
    match code {
        Code::NotFound => tonic::Code::NotFound,
        Code::InvalidArgument => tonic::Code::InvalidArgument,
        Code::Unavailable => tonic::Code::Unavailable,
        Code::DeadlineExceeded => tonic::Code::DeadlineExceeded,
        Code::Internal => tonic::Code::Internal,
        Code::ResourceExhausted => tonic::Code::ResourceExhausted,
        Code::Unauthenticated => tonic::Code::Unauthenticated,
        Code::PermissionDenied => tonic::Code::PermissionDenied,
        Code::FailedPrecondition => tonic::Code::FailedPrecondition,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::request_error::AuthFailure;

    #[test]
    fn statuses_carry_the_tables_code_and_the_errors_message() {
        let cases = [
            (
                RequestError::UnknownTool { name: "x".into() },
                tonic::Code::NotFound,
            ),
            (
                RequestError::RequestTooLarge,
                tonic::Code::ResourceExhausted,
            ),
            (RequestError::ShuttingDown, tonic::Code::Unavailable),
            (
                RequestError::Unauthenticated(AuthFailure::InvalidToken),
                tonic::Code::Unauthenticated,
            ),
            (
                RequestError::PermissionDenied {
                    caller: "c".into(),
                    tool: "t".into(),
                },
                tonic::Code::PermissionDenied,
            ),
        ];
        for (error, code) in cases {
            let status = to_status(&error);
            assert_eq!(status.code(), code, "{error:?}");
            assert_eq!(status.message(), error.to_string());
        }
    }

    #[test]
    fn a_rate_limit_says_when_to_retry_in_a_trailer_and_a_retry_info() {
        let error = RequestError::RateLimited {
            limit: crate::domain::request_error::RateLimit::Caller(
                crate::domain::config::Rate::parse("2/m").unwrap(),
            ),
            retry_after: Duration::from_millis(29_100),
        };
        let status = to_status(&error);
        assert_eq!(status.code(), tonic::Code::ResourceExhausted);
        assert_eq!(
            status.message(),
            "this caller's call rate (limits.caller_rate: 2/m) is used up; retry in 30 s"
        );
        assert_eq!(status.metadata().get("retry-after").unwrap(), "30");
        let retry = status.get_details_retry_info().expect("a RetryInfo detail");
        assert_eq!(retry.retry_delay, Some(Duration::from_secs(30)));
    }
}
