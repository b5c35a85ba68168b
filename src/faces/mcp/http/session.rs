//! One client session of the face: what it chose (log level, resource subscriptions), and
//! what it is told as the broker changes (list changes, updates of its resources).

use std::{
    collections::HashSet,
    future::Future,
    sync::{Mutex, MutexGuard, PoisonError, atomic::AtomicU8},
};

use rmcp::{
    RoleServer,
    model::{Extensions, ResourceUpdatedNotificationParam},
    service::Peer,
};
use tokio::sync::broadcast::error::RecvError;

use super::{
    Face, changes,
    request::{Asker, FaceCaller},
};
use crate::{auth::Caller, faces::mcp::lists, faces::mcp::model::resource};

/// What one client session chose.
#[derive(Default)]
pub struct Session {
    /// The least severe log level the client wants (`logging/setLevel`; a `LoggingLevel` as
    /// u8, debug until set: a server may send every level until then).
    pub level: AtomicU8,
    /// The resources it subscribed to: (server, URI).
    subscribed: Mutex<HashSet<(String, String)>>,
}

impl Session {
    /// Its subscriptions.
    pub fn subscribed(&self) -> MutexGuard<'_, HashSet<(String, String)>> {
        self.subscribed
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }
}

impl Face {
    /// Whether what a request is shown depends on who asks, as [`cache`](crate::faces::mcp::model::cache) reads it: its
    /// caller's grants keep something from it, or a server opens a session per caller.
    pub(super) fn depends_on_caller(&self, extensions: &Extensions) -> bool {
        Asker::of(extensions).caller.access.restricts()
            || self.broker().snapshot().has_per_caller_server()
    }

    /// The caller of a request, bound to the view of the URL it came to (if any) as the views
    /// stand now.
    pub(super) fn caller(&self, extensions: &Extensions) -> Caller {
        Asker::of(extensions).caller(&self.broker().snapshot().views)
    }

    /// The server whose resource `uri` is, of those `caller` may read, as
    /// [`resource::owner`] finds it.
    pub(super) fn server_of(&self, caller: &Caller, uri: &str) -> Option<String> {
        let snapshot = self.broker().snapshot();
        let readable = || {
            snapshot
                .catalog
                .resources()
                .filter(|(server, _)| caller.may_read(server.as_str()))
        };
        let listed = readable().flat_map(|(server, offered)| {
            let server = server.as_str();
            offered
                .resources
                .iter()
                .map(move |r| (server, r.uri.as_str()))
        });
        let templates = readable().flat_map(|(server, offered)| {
            let server = server.as_str();
            (offered.templates.iter()).map(move |t| (server, t.uri_template.as_str()))
        });
        resource::owner(listed, templates, uri).map(str::to_owned)
    }

    /// Follows the catalog for `caller`, telling `peer` which lists changed and which of its
    /// subscribed resources were updated, until the session ends; then drops its
    /// subscriptions.
    pub(super) fn follow_for(&self, asker: Asker, peer: Peer<RoleServer>) {
        let face = self.clone();
        tokio::spawn(async move {
            let stop = face.shutdown.child_token();
            let gone = || peer.is_transport_closed();
            let lists = changes::follow(face.broker(), &asker, stop, gone, |stale| {
                lists::announce(&peer, stale)
            });
            let updates = face.relay_updates(
                |key| face.session.subscribed().contains(key),
                |uri| async {
                    let params = ResourceUpdatedNotificationParam::new(uri);
                    peer.notify_resource_updated(params).await.is_ok()
                },
            );
            tokio::select! {
                () = lists => {}
                () = updates => {}
            }
            let subscribed: Vec<_> = face.session.subscribed().drain().collect();
            let values = FaceCaller {
                caller: &asker.caller,
                headers: None,
            };
            for (server, uri) in subscribed {
                face.broker()
                    .unsubscribe_resource(&server, &uri, &values)
                    .await;
            }
        });
    }

    /// Sends `notify` the URI of each update of a resource (server, URI) that `wanted`
    /// holds, until the broker stops or `notify` says the client is gone.
    pub(super) async fn relay_updates<F, Fut>(
        &self,
        wanted: impl Fn(&(String, String)) -> bool,
        notify: F,
    ) where
        F: Fn(String) -> Fut,
        Fut: Future<Output = bool>,
    {
        let mut updates = self.broker().resource_updates();
        loop {
            let update = match updates.recv().await {
                Ok(update) => update,
                Err(RecvError::Lagged(_)) => continue,
                Err(RecvError::Closed) => return,
            };
            let key = (update.server.to_string(), update.uri.clone());
            if wanted(&key) && !notify(update.uri.clone()).await {
                return;
            }
        }
    }

    /// Whether some server lists `uri` or has a template it fits (whoever asks).
    pub(super) fn is_known_resource(&self, uri: &str) -> bool {
        self.server_of(&Caller::anyone(), uri).is_some()
    }
}
