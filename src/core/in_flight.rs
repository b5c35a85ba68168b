//! The calls running now, over gRPC and the MCP face alike: shutdown refuses new ones, then
//! waits (up to `shutdown_grace`) for these.

use std::sync::Arc;

use tokio::sync::watch;

/// How many calls are running; clones count the same calls.
#[derive(Clone, Debug)]
pub struct InFlight(Arc<watch::Sender<usize>>);

impl Default for InFlight {
    fn default() -> Self {
        Self(Arc::new(watch::Sender::new(0)))
    }
}

impl InFlight {
    /// Counts one call until the guard is dropped.
    pub fn start(&self) -> Counted<'_> {
        self.0.send_modify(|n| *n += 1);
        Counted(&self.0)
    }

    /// Counts one call until the guard is dropped, wherever it goes (e.g. with a response
    /// body, until it has been sent).
    pub fn hold(&self) -> Held {
        self.0.send_modify(|n| *n += 1);
        Held(self.0.clone())
    }

    /// Resolves once no call is running.
    pub async fn idle(&self) {
        let mut count = self.0.subscribe();
        let _ = count.wait_for(|n| *n == 0).await;
    }
}

/// One call counted while it lives.
pub struct Counted<'a>(&'a watch::Sender<usize>);

impl Drop for Counted<'_> {
    fn drop(&mut self) {
        self.0.send_modify(|n| *n -= 1);
    }
}

/// One call counted while it lives (owned).
pub struct Held(Arc<watch::Sender<usize>>);

impl Drop for Held {
    fn drop(&mut self) {
        self.0.send_modify(|n| *n -= 1);
    }
}
