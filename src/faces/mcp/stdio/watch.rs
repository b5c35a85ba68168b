//! The broker's Watch stream as MCP `list_changed` notifications, for as long as the MCP
//! client is there: a burst of events becomes one notification per list, and a broken stream
//! is opened again, with backoff.

use std::{future::Future, time::Duration};

use futures::FutureExt as _;

use super::from_proto::stale_by;
use crate::{
    client::Client,
    domain::backoff,
    faces::mcp::lists::Stale,
    proto::{self, watch_event::Event},
};

/// First and longest wait before opening the stream again.
const RETRY_FIRST: Duration = Duration::from_millis(500);
const RETRY_MAX: Duration = Duration::from_secs(30);

/// How following the stream ended.
enum Ended {
    /// The client is gone: nothing more to tell it.
    ClientGone,
    /// The stream broke (or could not be opened); `followed` if it had got as far as its
    /// snapshot.
    Broken { reason: String, followed: bool },
}

/// Tells `notify` which lists changed, until it answers `false` (the client is gone). The
/// caller stops it by dropping it.
pub(super) async fn follow<F, Fut>(broker: Client, view: &str, notify: F)
where
    F: Fn(Stale) -> Fut,
    Fut: Future<Output = bool>,
{
    let mut attempt = 0u32;
    let mut reconnecting = false;
    loop {
        match follow_once(broker.clone(), view, &notify, reconnecting).await {
            Ended::ClientGone => return,
            Ended::Broken { reason, followed } => {
                if followed {
                    attempt = 0;
                }
                let delay = backoff::delay(attempt, RETRY_FIRST, RETRY_MAX, fastrand::f64());
                attempt = attempt.saturating_add(1);
                tracing::warn!(%reason, retry_in = ?delay, "the broker's Watch stream broke");
                tokio::time::sleep(delay).await;
            }
        }
        reconnecting = true;
    }
}

/// Opens the stream and relays its events. After its snapshot, the lists are what the client
/// would list now: nothing to announce, unless this is a reconnection, when changes made in
/// the gap went unseen.
async fn follow_once<F, Fut>(
    mut broker: Client,
    view: &str,
    notify: &F,
    reconnecting: bool,
) -> Ended
where
    F: Fn(Stale) -> Fut,
    Fut: Future<Output = bool>,
{
    let broken = |reason: String, followed| Ended::Broken { reason, followed };
    let request = proto::WatchRequest {
        view: view.to_owned(),
        ..Default::default()
    };
    let mut stream = match broker.watch(request).await {
        Ok(response) => response.into_inner(),
        Err(status) => return broken(format!("{status:?}"), false),
    };
    match stream.message().await {
        Ok(Some(proto::WatchEvent {
            event: Some(Event::Snapshot(_)),
            ..
        })) => {}
        Ok(other) => return broken(format!("no snapshot first: {other:?}"), false),
        Err(status) => return broken(format!("{status:?}"), false),
    }
    tracing::info!("following the broker's Watch stream");
    if reconnecting && !notify(Stale::ALL).await {
        return Ended::ClientGone;
    }
    loop {
        let mut changed = match stream.message().await {
            Ok(Some(event)) => changed_by(&event),
            Ok(None) => return broken("the broker ended it".into(), true),
            Err(status) => return broken(format!("{status:?}"), true),
        };
        // The rest of a burst (a server coming back changes tools, resources and prompts) as
        // one notification per list; `message` is cancel-safe, so a poll that finds nothing
        // loses nothing.
        let mut ended = None;
        while let Some(next) = stream.message().now_or_never() {
            match next {
                Ok(Some(event)) => changed = changed.union(changed_by(&event)),
                Ok(None) => ended = Some(broken("the broker ended it".into(), true)),
                Err(status) => ended = Some(broken(format!("{status:?}"), true)),
            }
            if ended.is_some() {
                break;
            }
        }
        if changed.any() && !notify(changed).await {
            return Ended::ClientGone;
        }
        if let Some(ended) = ended {
            return ended;
        }
    }
}

fn changed_by(event: &proto::WatchEvent) -> Stale {
    event.event.as_ref().map(stale_by).unwrap_or_default()
}
