//! Where a session's transport tells its calls why an answer did not come: a typed channel from
//! the layer that sees the fault (a stream guard, an HTTP client) to the call that suffers it,
//! so that nothing has to read it back out of an error's text.

use std::{
    collections::HashSet,
    sync::{Arc, Mutex, PoisonError},
};

use rmcp::model::RequestId;

use crate::domain::outcome::{OAuthFailure, StreamFault};

/// Why a transport cut a session's whole stream, once it has (stdio, legacy SSE).
#[derive(Debug, Clone, Default)]
pub struct Verdict(Arc<Mutex<Option<StreamFault>>>);

impl Verdict {
    /// The fault, if the stream was cut.
    pub fn fault(&self) -> Option<StreamFault> {
        self.0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// Records why the stream is cut.
    pub fn set(&self, fault: StreamFault) {
        *self.0.lock().unwrap_or_else(PoisonError::into_inner) = Some(fault);
    }
}

/// Requests whose answer was refused for its size while the session goes on (streamable HTTP:
/// one answer stream is cut, the session stays).
#[derive(Debug, Clone, Default)]
pub struct Oversized(Arc<Mutex<HashSet<RequestId>>>);

impl Oversized {
    /// Records that the answer to `id` went over the limit.
    pub fn insert(&self, id: RequestId) {
        self.0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(id);
    }

    /// Whether the answer to `id` went over the limit; forgets it (each call asks once).
    pub fn take(&self, id: &RequestId) -> bool {
        self.0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(id)
    }
}

/// Why the session's last request went without a usable OAuth token (or with one the server
/// refused): the HTTP client records it, the call or start-up that failed reads it. Cleared by
/// the next request that had a token.
#[derive(Debug, Clone, Default)]
pub struct AuthFault(Arc<Mutex<Option<OAuthFailure>>>);

impl AuthFault {
    /// Records why a request had no usable token.
    pub fn set(&self, failure: OAuthFailure) {
        *self.0.lock().unwrap_or_else(PoisonError::into_inner) = Some(failure);
    }

    /// A request had a token: whatever failed before is over.
    pub fn clear(&self) {
        let mut fault = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        if fault.is_some() {
            *fault = None;
        }
    }

    /// Why the last request had no usable token, if it had none.
    pub fn get(&self) -> Option<OAuthFailure> {
        self.0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }
}

/// Every channel of one session.
#[derive(Debug, Clone, Default)]
pub struct Faults {
    /// The whole stream was cut.
    pub stream: Verdict,
    /// One answer was refused.
    pub oversized: Oversized,
    /// The last request had no usable OAuth token.
    pub auth: AuthFault,
}
