//! What a session's server says changed, waiting for its supervisor: lists, and resources
//! updated. Filled by the client handler (a 2025 server's notifications) or by the listen
//! stream (a 2026-07-28 server's).

use std::sync::Arc;

use tokio::sync::Notify;

/// What a session's supervisor follows: a server's lists changed.
#[derive(Clone, Debug, Default)]
pub struct Changes {
    /// `notifications/tools/list_changed`.
    pub tools: Arc<Notify>,
    /// `notifications/resources/list_changed`.
    pub resources: Arc<Notify>,
    /// `notifications/prompts/list_changed`.
    pub prompts: Arc<Notify>,
    /// `notifications/resources/updated`: the URIs, in order.
    pub updated: Arc<Updated>,
}

/// Resources the server said were updated, waiting for the supervisor to pass them on.
#[derive(Debug, Default)]
pub struct Updated {
    uris: std::sync::Mutex<Vec<String>>,
    /// Signalled when a URI is added.
    pub signal: Notify,
}

impl Updated {
    /// Adds `uri`, and signals.
    pub(in crate::upstream) fn push(&self, uri: String) {
        self.uris
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .push(uri);
        self.signal.notify_one();
    }

    /// The URIs updated since the last take.
    pub fn take(&self) -> Vec<String> {
        std::mem::take(
            &mut *self
                .uris
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner),
        )
    }
}
