//! One Watch stream: the snapshot it starts from, then every later event it may see, in order;
//! a fresh snapshot if it falls behind; the end at shutdown.

use std::sync::Arc;

use tokio::sync::broadcast::{self, error::RecvError};
use tokio_util::sync::CancellationToken;
use tonic::Status;

use super::{
    limit::ResponseLimit, messages, status::to_status, tool_cache::ToolCache,
    visibility::Visibility,
};
use crate::{
    auth::Caller,
    core::broker::{Broker, Snapshot, WatcherGuard},
    domain::{
        catalog::{Change, Event},
        request_error::RequestError,
    },
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
    /// For a stream of a view: its definition as the stream last sent it.
    view: Option<Vec<String>>,
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
        let (snapshot, events, guard) = feed.broker.subscribe();
        let visibility = Visibility::new(servers, view, caller, &snapshot)?;
        let view = visibility
            .view_name()
            .map(|name| snapshot.views.written(name).unwrap_or_default().to_vec());
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
                received = self.events.recv() => received,
            };
            match received {
                Ok(event) if event.revision <= self.seen => continue,
                Ok(event) if matches!(event.change, Change::Views) => {
                    if let Some(next) = self.view_redefined() {
                        return Some((next, self));
                    }
                }
                Ok(event) => {
                    self.seen = event.revision;
                    let broker = &self.feed.broker;
                    if let Some(visible) = self.visibility.event(&event, || broker.snapshot()) {
                        return Some((self.checked(visible), self));
                    }
                }
                Err(RecvError::Lagged(missed)) => {
                    tracing::debug!(missed, "a watcher fell behind; sending a fresh snapshot");
                    // What it missed may have redefined its view.
                    let snapshot = self.feed.broker.snapshot();
                    let next = match self.adopt_view(&snapshot) {
                        Ok(_) => self.fresh(&snapshot),
                        Err(gone) => Err(gone),
                    };
                    return Some((next, self));
                }
                Err(RecvError::Closed) => return None,
            }
        }
    }

    /// After a reload redefined the views: for a stream whose view changed, a fresh snapshot
    /// (its revision is at least the `Views` event's), or NOT_FOUND ending the stream when its
    /// view is gone; nothing for the others.
    fn view_redefined(&mut self) -> Option<Result<proto::WatchEvent, Status>> {
        let snapshot = self.feed.broker.snapshot();
        match self.adopt_view(&snapshot) {
            Ok(false) => None,
            Ok(true) => Some(self.fresh(&snapshot)),
            Err(gone) => Some(Err(gone)),
        }
    }

    /// Takes the stream's view as `snapshot` defines it: whether that changed it, or the
    /// status that ends the stream when the view is gone.
    fn adopt_view(&mut self, snapshot: &Snapshot) -> Result<bool, Status> {
        let Some(name) = self.visibility.view_name().map(str::to_owned) else {
            return Ok(false);
        };
        let Some(written) = snapshot.views.written(&name) else {
            self.ended = true;
            return Err(to_status(&snapshot.views.unknown(&name)));
        };
        if self.view.as_deref() == Some(written) {
            return Ok(false);
        }
        tracing::debug!(view = %name, "a Watch stream's view was redefined");
        self.view = Some(written.to_vec());
        self.visibility.set_view(&snapshot.views).map_err(|e| {
            self.ended = true;
            to_status(&e)
        })?;
        Ok(true)
    }

    /// A fresh snapshot event of `snapshot`, from which the stream goes on.
    fn fresh(&mut self, snapshot: &Snapshot) -> Result<proto::WatchEvent, Status> {
        self.seen = snapshot.catalog.revision();
        self.checked(snapshot_event(&self.feed.tools, snapshot, &self.visibility))
    }

    fn checked(&self, event: proto::WatchEvent) -> Result<proto::WatchEvent, Status> {
        self.feed.limit.check(event).map_err(|e| to_status(&e))
    }
}

/// The `Snapshot` event of `snapshot`, as `visibility` lets it be seen.
fn snapshot_event(
    tools: &ToolCache,
    snapshot: &Snapshot,
    visibility: &Visibility,
) -> proto::WatchEvent {
    let cached = tools.tools(snapshot);
    let keep = visibility.keep(&cached.exposed);
    let tools = (0..cached.exposed.len())
        .filter(|&i| keep(i))
        .map(|i| cached.encoded.tool(i))
        .collect();
    let servers = snapshot
        .catalog
        .servers()
        .filter(|view| visibility.server_status(view.name.as_str(), &snapshot.catalog))
        .map(|view| {
            messages::server_status(
                view,
                snapshot.caller_sessions(&view.name),
                snapshot.kept.get(&view.name),
            )
        })
        .collect();
    proto::WatchEvent {
        revision: snapshot.catalog.revision(),
        event: Some(proto::watch_event::Event::Snapshot(proto::Snapshot {
            tools,
            servers,
        })),
    }
}
