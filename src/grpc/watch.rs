//! One Watch stream: the snapshot it starts from, then every later event it may see, in order;
//! a fresh snapshot if it falls behind; the end at shutdown.

use std::sync::Arc;

use tokio::sync::{
    broadcast::{self, error::RecvError},
    watch,
};
use tokio_util::sync::CancellationToken;
use tonic::Status;

use super::{
    convert, limit::ResponseLimit, status::to_status, tool_cache::ToolCache, visibility::Visibility,
};
use crate::{
    auth::Caller,
    broker::{Broker, Snapshot, WatcherGuard},
    domain::{catalog::Event, grants::Patterns, request_error::RequestError, views::Views},
    proto,
};

/// What a Watch stream reads from and obeys.
#[derive(Clone)]
pub struct Feed {
    /// Where snapshots and events come from.
    pub broker: Broker,
    /// Cancelled at shutdown: every stream ends.
    pub shutdown: CancellationToken,
    /// The proto form of the tools, per revision.
    pub tools: Arc<ToolCache>,
    /// No event may be larger than this.
    pub limit: ResponseLimit,
}

/// A Watch stream's position: it has seen everything up to revision `seen`.
pub struct Watcher {
    feed: Feed,
    events: broadcast::Receiver<Arc<Event>>,
    visibility: Visibility,
    seen: u64,
    /// For a stream of a view: follows a reload's change of its definition.
    view: Option<ViewFollower>,
    /// Ended by an error: nothing more is sent.
    ended: bool,
    /// Counts this stream while tonic holds it: a client that goes away drops it.
    _guard: WatcherGuard,
}

impl Watcher {
    /// A stream of the servers asked for (all when none), as the caller may see them, and its
    /// first event: the snapshot it starts from.
    pub fn open(
        feed: Feed,
        servers: Vec<String>,
        view: String,
        caller: Caller,
    ) -> Result<(proto::WatchEvent, Self), RequestError> {
        // Subscribed first: a reload between here and the snapshot is seen as a change.
        let mut views = feed.broker.views();
        views.mark_unchanged();
        let (snapshot, events, guard) = feed.broker.subscribe();
        let visibility = Visibility::new(servers, view, caller, &snapshot)?;
        let view = visibility.view_name().map(|name| ViewFollower {
            views,
            name: name.to_owned(),
            written: snapshot.views.written(name).unwrap_or_default().to_vec(),
        });
        let first = feed
            .limit
            .check(snapshot_event(&feed.tools, &snapshot, &visibility))?;
        let watcher = Watcher {
            feed,
            events,
            visibility,
            seen: snapshot.catalog.revision(),
            view,
            ended: false,
            _guard: guard,
        };
        Ok((first, watcher))
    }

    /// The next event for this watcher; a fresh snapshot if it fell behind; none at shutdown.
    pub async fn next(mut self) -> Option<(Result<proto::WatchEvent, Status>, Self)> {
        if self.ended {
            return None;
        }
        loop {
            let received = tokio::select! {
                biased;
                _ = self.feed.shutdown.cancelled() => return None,
                redefined = redefined(&mut self.view) => {
                    return match redefined {
                        Ok(patterns) => {
                            tracing::debug!("a Watch stream's view was redefined; a fresh snapshot");
                            self.visibility.set_view(patterns);
                            let snapshot = self.feed.broker.snapshot();
                            self.seen = snapshot.catalog.revision();
                            let event =
                                snapshot_event(&self.feed.tools, &snapshot, &self.visibility);
                            Some((self.checked(event), self))
                        }
                        Err(gone) => {
                            self.ended = true;
                            Some((Err(to_status(&gone)), self))
                        }
                    };
                }
                received = self.events.recv() => received,
            };
            match received {
                Ok(event) if event.revision <= self.seen => continue,
                Ok(event) => {
                    self.seen = event.revision;
                    if let Some(visible) = self.visibility.event(&event) {
                        return Some((self.checked(visible), self));
                    }
                }
                Err(RecvError::Lagged(missed)) => {
                    tracing::debug!(missed, "a watcher fell behind; sending a fresh snapshot");
                    let snapshot = self.feed.broker.snapshot();
                    self.seen = snapshot.catalog.revision();
                    let event = snapshot_event(&self.feed.tools, &snapshot, &self.visibility);
                    return Some((self.checked(event), self));
                }
                Err(RecvError::Closed) => return None,
            }
        }
    }

    fn checked(&self, event: proto::WatchEvent) -> Result<proto::WatchEvent, Status> {
        self.feed.limit.check(event).map_err(|e| to_status(&e))
    }
}

/// Follows a reload's changes of the view a stream asked for.
struct ViewFollower {
    views: watch::Receiver<Arc<Views>>,
    name: String,
    /// Its definition as the stream last saw it.
    written: Vec<String>,
}

impl ViewFollower {
    /// The view's new patterns when a reload redefines it, or the error to end the stream
    /// with when a reload removes it.
    async fn redefined(&mut self) -> Result<Patterns, RequestError> {
        loop {
            if self.views.changed().await.is_err() {
                // The broker is gone; shutdown ends the stream.
                return std::future::pending().await;
            }
            let views = self.views.borrow_and_update().clone();
            match views.written(&self.name) {
                Some(written) if written == self.written => continue,
                Some(written) => {
                    self.written = written.to_vec();
                    return views.get(&self.name).cloned();
                }
                None => return Err(views.get(&self.name).unwrap_err()),
            }
        }
    }
}

/// [`ViewFollower::redefined`], or never for a stream of no view.
async fn redefined(follower: &mut Option<ViewFollower>) -> Result<Patterns, RequestError> {
    match follower {
        Some(follower) => follower.redefined().await,
        None => std::future::pending().await,
    }
}

/// The `Snapshot` event of `snapshot`, as `visibility` lets it be seen.
fn snapshot_event(
    tools: &ToolCache,
    snapshot: &Snapshot,
    visibility: &Visibility,
) -> proto::WatchEvent {
    let all = tools.tools(snapshot).tools;
    let tools = if visibility.everything() {
        all.as_ref().clone()
    } else {
        all.iter().filter(|t| visibility.tool(t)).cloned().collect()
    };
    let servers = snapshot
        .catalog
        .servers()
        .filter(|view| visibility.server(view.name.as_str()))
        .map(|view| convert::server_status(view, snapshot.caller_sessions(&view.name)))
        .collect();
    proto::WatchEvent {
        revision: snapshot.catalog.revision(),
        event: Some(proto::watch_event::Event::Snapshot(proto::Snapshot {
            tools,
            servers,
        })),
    }
}
