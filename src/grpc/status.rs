//! Request errors as gRPC statuses: the code from the error's table (see
//! [`RequestError::class`]), the message from the error itself.

use tonic::Status;

use crate::domain::request_error::{Code, RequestError};

/// The gRPC status for a refused or failed request.
pub fn to_status(error: &RequestError) -> Status {
    Status::new(grpc_code(error.class().code), error.to_string())
}

/// tonic's name for a gRPC status code.
fn grpc_code(code: Code) -> tonic::Code {
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
}
