//! A call's caller values, as the per-caller servers' templates read them: the caller the
//! gate admitted, and the request metadata it sent (`${caller.header.NAME}`).

use std::borrow::Cow;

use tonic::metadata::MetadataMap;

use crate::{
    auth::Caller,
    domain::caller::{CallerKey, CallerKind, CallerValues},
};

/// Who made a call, and what it sent with it.
pub struct CallContext {
    /// The caller.
    pub caller: Caller,
    /// The request's metadata (moved out of the request, not copied).
    pub metadata: MetadataMap,
}

impl CallerValues for CallContext {
    fn key(&self) -> &CallerKey {
        &self.caller.key
    }

    fn first_kind(&self) -> CallerKind {
        self.caller.first_kind()
    }

    fn token(&self) -> Option<&str> {
        self.caller.token()
    }

    fn header(&self, name: &str) -> Option<Cow<'_, str>> {
        let value = self.metadata.get(name)?.to_str().ok()?;
        Some(Cow::Borrowed(value))
    }

    fn claim(&self, name: &str) -> Option<Cow<'_, str>> {
        self.caller.claim(name)
    }
}
