//! One Watch stream: the snapshot it started from, then every later event it may see, in order;
//! a fresh snapshot if it falls behind; the end at shutdown.

use std::sync::Arc;

use tokio::sync::broadcast::{self, error::RecvError};
use tonic::Status;

use super::{service::BrokerService, visibility::Visibility};
use crate::{broker::WatcherGuard, domain::catalog::Event, proto};

/// A Watch stream's position: it has seen everything up to revision `seen`.
pub struct Watcher {
    pub(super) service: Arc<BrokerService>,
    pub(super) events: broadcast::Receiver<Arc<Event>>,
    pub(super) visibility: Visibility,
    pub(super) seen: u64,
    /// Counts this stream while tonic holds it: a client that goes away drops it.
    pub(super) _guard: WatcherGuard,
}

impl Watcher {
    /// The next event for this watcher; a fresh snapshot if it fell behind; none at shutdown.
    pub async fn next(mut self) -> Option<(Result<proto::WatchEvent, Status>, Self)> {
        loop {
            let received = tokio::select! {
                biased;
                _ = self.service.stopping() => return None,
                received = self.events.recv() => received,
            };
            match received {
                Ok(event) if event.revision <= self.seen => continue,
                Ok(event) => {
                    self.seen = event.revision;
                    if let Some(visible) = self.visibility.event(&event) {
                        let checked = self.service.within_limit(visible);
                        return Some((checked, self));
                    }
                }
                Err(RecvError::Lagged(missed)) => {
                    tracing::debug!(missed, "a watcher fell behind; sending a fresh snapshot");
                    let snapshot = self.service.broker().snapshot();
                    self.seen = snapshot.catalog.revision();
                    let event = self.service.snapshot_event(&snapshot, &self.visibility);
                    return Some((self.service.within_limit(event), self));
                }
                Err(RecvError::Closed) => return None,
            }
        }
    }
}
