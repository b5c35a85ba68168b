//! `notifications/{tools,resources,prompts}/list_changed` for one connected MCP client: the
//! catalog's events, reduced to the lists this client sees that changed, a burst of events
//! sent as one notification per list.

use std::{future::Future, time::Duration};

use tokio::sync::broadcast::error::RecvError;
use tokio_util::sync::CancellationToken;

use crate::{
    auth::Caller,
    core::broker::Broker,
    domain::catalog::{Change, Event},
    faces::mcp::lists::Stale,
};

use super::request::Asker;

/// Adds to `stale` what `event` makes stale for `caller`.
pub fn add(stale: &mut Stale, event: &Event, caller: &Caller) {
    match &event.change {
        Change::Tools(_, change) => {
            stale.tools |= change
                .added
                .iter()
                .chain(&change.updated)
                .map(|tool| tool.name.as_str())
                .chain(change.removed.iter().map(|name| name.as_str()))
                .any(|name| caller.may_use(name));
        }
        Change::Resources(server) => stale.resources |= caller.may_read(server.as_str()),
        Change::Prompts(_) => stale.prompts = true,
        // Acted on by `follow`, which knows the view its client came through.
        Change::Views => {}
        // A server's state alone changes no list: its tools come and go as Tools events.
        Change::Server(_) => {}
    }
}

/// How often a quiet follower checks that its client is still there.
const GONE_CHECK: Duration = Duration::from_secs(15);

/// Sends `notify` what goes stale for `asker` as the catalog changes (and, for an asker
/// through a view, when a reload changes the views), until `stop`, until `gone` says the
/// client left, or until `notify` says it could not reach it.
pub async fn follow<F, Fut>(
    broker: &Broker,
    asker: &Asker,
    stop: CancellationToken,
    gone: impl Fn() -> bool,
    notify: F,
) where
    F: Fn(Stale) -> Fut,
    Fut: Future<Output = bool>,
{
    let mut events = broker.events();
    let mut caller = asker.caller(&broker.snapshot().views);
    // A reload's new views: the client's view may show other tools now.
    let mut apply = |stale: &mut Stale, event: &Event| {
        if !matches!(event.change, Change::Views) {
            add(stale, event, &caller);
        } else if asker.view.is_some() {
            caller = asker.caller(&broker.snapshot().views);
            stale.tools = true;
        }
    };
    let mut check = tokio::time::interval(GONE_CHECK);
    loop {
        let mut stale = Stale::default();
        tokio::select! {
            () = stop.cancelled() => return,
            _ = check.tick() => {
                if gone() {
                    return;
                }
                continue;
            }
            received = events.recv() => match received {
                Ok(event) => apply(&mut stale, &event),
                Err(RecvError::Lagged(_)) => stale = Stale::ALL,
                Err(RecvError::Closed) => return,
            },
        }
        // The rest of a burst (a server coming back changes tools, resources and prompts).
        loop {
            match events.try_recv() {
                Ok(event) => apply(&mut stale, &event),
                Err(tokio::sync::broadcast::error::TryRecvError::Lagged(_)) => stale = Stale::ALL,
                Err(_) => break,
            }
        }
        if stale.any() && !notify(stale).await {
            return;
        }
    }
}
