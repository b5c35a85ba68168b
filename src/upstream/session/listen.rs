//! What a 2026-07-28 server tells of its changes. On that protocol nothing comes unasked: a
//! client learns of changed lists and updated resources only on a `subscriptions/listen`
//! stream. A session on it keeps one open for as long as it lives (opened again, after a
//! pause, if the server ends it), asking for its lists' changes and for the resources callers
//! subscribed to; what comes is passed to the supervisor as a 2025 server's notifications are.
//! One caller's session, which lists nothing, opens its stream at its caller's first
//! subscription: until then a stream would cost it memory (about 10 KiB of rmcp's channel, of
//! a session's 72; docs/performance.md, "Many callers, round two") for nothing.

use std::{collections::BTreeSet, time::Duration};

use rmcp::{
    RoleClient,
    model::{ServerNotification, SubscriptionFilter},
    service::{Peer, ServiceError},
};
use tokio::sync::watch;

use crate::domain::names::ServerName;
use crate::upstream::session::changes::Changes;

/// The pause before a stream the server ended is opened again.
const RELISTEN_AFTER: Duration = Duration::from_secs(1);

/// The resources a session's callers subscribed to, which its listen stream asks for, and how
/// far the server has acknowledged them.
#[derive(Debug)]
pub struct Watched {
    /// The set, with a generation counting its changes.
    uris: watch::Sender<(u64, BTreeSet<String>)>,
    /// The generation the open stream was acknowledged with.
    acked: watch::Sender<Acked>,
}

/// How far the server acknowledged the set.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Acked {
    /// Not yet.
    Nothing,
    /// The set of this generation (or a later one).
    Upto(u64),
    /// Never will: the server takes no subscriptions, or the session ended.
    Never,
}

impl Default for Watched {
    fn default() -> Self {
        Self {
            uris: watch::Sender::new((0, BTreeSet::new())),
            acked: watch::Sender::new(Acked::Nothing),
        }
    }
}

/// Why a subscription was not acknowledged.
#[derive(Debug, PartialEq, Eq)]
pub enum Unconfirmed {
    /// The server takes no subscriptions (or the session ended).
    Refused,
    /// Not within the time given.
    Late,
}

impl Watched {
    /// Starts (`on`) or stops following `uri`; the stream is opened again with the new set,
    /// whose generation this is (`None`: nothing changed).
    pub fn set(&self, uri: &str, on: bool) -> Option<u64> {
        let mut generation = None;
        self.uris.send_if_modified(|(count, uris)| {
            let changed = if on {
                uris.insert(uri.to_owned())
            } else {
                uris.remove(uri)
            };
            if changed {
                *count += 1;
                generation = Some(*count);
            }
            changed
        });
        generation
    }

    /// Waits until the server acknowledged a stream asking for the set of `generation`.
    pub async fn confirmed(&self, generation: u64, within: Duration) -> Result<(), Unconfirmed> {
        let mut acked = self.acked.subscribe();
        let waited = acked.wait_for(|acked| match acked {
            Acked::Nothing => false,
            Acked::Upto(upto) => *upto >= generation,
            Acked::Never => true,
        });
        match tokio::time::timeout(within, waited).await {
            Ok(Ok(acked)) if *acked != Acked::Never => Ok(()),
            Ok(_) => Err(Unconfirmed::Refused),
            Err(_) => Err(Unconfirmed::Late),
        }
    }

    fn follow(&self) -> watch::Receiver<(u64, BTreeSet<String>)> {
        self.uris.subscribe()
    }
}

/// What the stream asks for: every list's changes and the `uris`.
fn filter(uris: &BTreeSet<String>) -> SubscriptionFilter {
    let mut filter = SubscriptionFilter::builder()
        .tools_list_changed()
        .prompts_list_changed()
        .resources_list_changed()
        .build();
    if !uris.is_empty() {
        filter.resource_subscriptions = Some(uris.iter().cloned().collect());
    }
    filter
}

/// When a session's stream is first opened.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Opened {
    /// When the session starts: its lists' changes matter.
    AtOnce,
    /// When a resource is first followed: only its subscriptions matter.
    AtFirstSubscription,
}

/// Listens on `peer` until the session ends, passing what comes to `changes`. Run as the
/// session's task (aborted with it).
pub async fn listen(
    peer: Peer<RoleClient>,
    changes: Changes,
    watched: &Watched,
    server: ServerName,
    when: Opened,
) {
    let mut uris = watched.follow();
    if when == Opened::AtFirstSubscription
        && uris.wait_for(|(_, uris)| !uris.is_empty()).await.is_err()
    {
        watched.acked.send_replace(Acked::Never);
        return;
    }
    // The lists are read again after a stream the server ended (changes were missed while
    // none was open), not after one the broker reopened for another set of resources.
    let mut missed = false;
    let never = || watched.acked.send_replace(Acked::Never);
    loop {
        let (generation, asked) = {
            let current = uris.borrow_and_update();
            (current.0, filter(&current.1))
        };
        // Boxed: the task waits on the subscription far longer than on this request.
        let mut subscription = match Box::pin(peer.listen(asked)).await {
            Ok(subscription) => subscription,
            Err(ServiceError::McpError(error)) => {
                // A server that takes no subscriptions tells nothing; its lists stand.
                tracing::info!(%server, %error, "the server does not take subscriptions/listen");
                never();
                return;
            }
            Err(error) if peer.is_transport_closed() => {
                tracing::debug!(%server, %error, "listening ended with the session");
                never();
                return;
            }
            Err(error) => {
                tracing::debug!(%server, %error, "subscriptions/listen failed; trying again");
                missed = true;
                tokio::time::sleep(RELISTEN_AFTER).await;
                continue;
            }
        };
        watched.acked.send_replace(Acked::Upto(generation));
        if std::mem::take(&mut missed) {
            changes.tools.notify_one();
            changes.resources.notify_one();
            changes.prompts.notify_one();
        }
        let mut reopened = false;
        loop {
            tokio::select! {
                next = subscription.next() => match next {
                    Ok(Some(notification)) => pass(notification, &changes),
                    Ok(None) => break,
                    Err(error) => {
                        tracing::debug!(%server, %error, "the listen stream failed");
                        break;
                    }
                },
                changed = uris.changed() => {
                    if changed.is_err() {
                        never();
                        return;
                    }
                    // The set of resources changed: the stream is opened again with it.
                    let _ = subscription.cancel().await;
                    reopened = true;
                    break;
                }
            }
        }
        if peer.is_transport_closed() {
            never();
            return;
        }
        if reopened {
            continue;
        }
        missed = true;
        if subscription.end().is_some() && !uris.has_changed().unwrap_or(false) {
            tokio::time::sleep(RELISTEN_AFTER).await;
        }
    }
}

/// One notification of the stream, to the supervisor.
fn pass(notification: ServerNotification, changes: &Changes) {
    match notification {
        ServerNotification::ToolListChangedNotification(_) => changes.tools.notify_one(),
        ServerNotification::ResourceListChangedNotification(_) => changes.resources.notify_one(),
        ServerNotification::PromptListChangedNotification(_) => changes.prompts.notify_one(),
        ServerNotification::ResourceUpdatedNotification(updated) => {
            changes.updated.push(updated.params.uri);
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_stream_asks_for_every_list_and_the_watched_resources() {
        let watched = Watched::default();
        let mut uris = watched.follow();
        let none = filter(&uris.borrow_and_update().1);
        assert_eq!(none.tools_list_changed, Some(true));
        assert_eq!(none.prompts_list_changed, Some(true));
        assert_eq!(none.resources_list_changed, Some(true));
        assert_eq!(none.resource_subscriptions, None);

        assert_eq!(watched.set("memo://a", true), Some(1));
        assert_eq!(watched.set("memo://a", true), None);
        assert!(uris.has_changed().unwrap());
        let one = filter(&uris.borrow_and_update().1);
        assert_eq!(
            one.resource_subscriptions,
            Some(vec!["memo://a".to_owned()])
        );

        assert_eq!(
            watched.set("memo://b", false),
            None,
            "nothing to stop following"
        );
        assert!(!uris.has_changed().unwrap());
        assert_eq!(watched.set("memo://a", false), Some(2));
        assert_eq!(
            filter(&uris.borrow_and_update().1).resource_subscriptions,
            None
        );
    }

    #[tokio::test]
    async fn a_subscription_is_confirmed_by_the_acknowledgment_of_its_generation() {
        let watched = Watched::default();
        let generation = watched.set("memo://a", true).unwrap();
        let short = Duration::from_millis(20);
        assert_eq!(
            watched.confirmed(generation, short).await,
            Err(Unconfirmed::Late)
        );
        watched.acked.send_replace(Acked::Upto(generation - 1));
        assert_eq!(
            watched.confirmed(generation, short).await,
            Err(Unconfirmed::Late)
        );
        watched.acked.send_replace(Acked::Upto(generation));
        assert_eq!(watched.confirmed(generation, short).await, Ok(()));
        watched.acked.send_replace(Acked::Never);
        let later = watched.set("memo://b", true).unwrap();
        assert_eq!(
            watched.confirmed(later, short).await,
            Err(Unconfirmed::Refused)
        );
    }
}
