//! The response size limit (`limits.max_response_bytes`), checked before a message is sent so
//! that an over-large answer is refused with a message that says which limit, not cut off.

use crate::domain::request_error::RequestError;

/// No response may be larger than this many bytes.
#[derive(Debug, Clone, Copy)]
pub struct ResponseLimit(pub usize);

impl ResponseLimit {
    /// The message, or RESOURCE_EXHAUSTED when it is over the limit.
    pub fn check<M: prost::Message>(self, message: M) -> Result<M, RequestError> {
        let size = message.encoded_len();
        if size > self.0 {
            return Err(RequestError::ResponseTooLarge {
                size,
                limit: self.0,
            });
        }
        Ok(message)
    }
}
