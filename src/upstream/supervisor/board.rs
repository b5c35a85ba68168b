//! Where a server's replicas report: their conditions combined into the server's one
//! condition ([`combine`]), the tool list taken from the first replica ready, and a call handle
//! over the ready ones, all published to the broker.

use std::{
    sync::{Arc, Mutex},
    time::SystemTime,
};

use crate::{
    domain::{
        config::ServerSpec,
        names::ServerName,
        offer::{Listing, PromptSpec, Resources},
        outcome::Phase,
        replicas::combine,
        state::{ServerCondition, Transport},
        tool::ToolSpec,
    },
    upstream::{
        Reporter, Upstream, pool::Pool, pool::balance::Replica, pool::slots::Slots,
        session::link::Link,
    },
};

/// One server's replicas, as last reported.
pub(super) struct Board {
    name: ServerName,
    reporter: Arc<dyn Reporter>,
    /// What every call handle of the server is built with.
    template: Template,
    /// Held only to record a report and publish it; never across an await.
    replicas: Mutex<Replicas>,
}

/// The parts of the server's [`Upstream`] that do not depend on which replicas are ready.
struct Template {
    timeout: std::time::Duration,
    max_timeout: std::time::Duration,
    max_result_bytes: usize,
    /// Shared by all replicas and sessions: `max_concurrent_calls` is per server.
    slots: Arc<Slots>,
    /// The configured transport, for the final STOPPED status.
    transport: Transport,
    /// A per-caller server's callers' sessions.
    pool: Option<Arc<Pool>>,
}

struct Replicas {
    each: Vec<Entry>,
    /// The server's condition as last published.
    shown: ServerCondition,
}

struct Entry {
    condition: ServerCondition,
    /// The session's call side and link, while the replica is READY.
    serving: Option<(Replica, Link)>,
}

impl Board {
    /// A board for `spec`'s replicas, all starting.
    pub(super) fn new(
        spec: &ServerSpec,
        reporter: Arc<dyn Reporter>,
        pool: Option<Arc<Pool>>,
    ) -> Self {
        let initial = spec.initial_condition(SystemTime::now());
        let each = (0..spec.replicas)
            .map(|_| Entry {
                condition: initial.clone(),
                serving: None,
            })
            .collect();
        Self {
            name: spec.name.clone(),
            reporter,
            template: Template {
                timeout: spec.timeout,
                max_timeout: spec.max_timeout,
                max_result_bytes: spec.max_result_bytes,
                slots: Arc::new(Slots::new(spec.concurrency)),
                transport: initial.transport,
                pool,
            },
            replicas: Mutex::new(Replicas {
                each,
                shown: initial,
            }),
        }
    }

    /// Replica `index` is not serving: starting, lost, failed or waiting to restart.
    pub(super) fn report(&self, index: usize, condition: ServerCondition) {
        let mut replicas = self.lock();
        replicas.each[index] = Entry {
            condition,
            serving: None,
        };
        self.publish(&mut replicas);
    }

    /// Replica `index` is READY with a new session. Its lists become the server's if no other
    /// replica was serving; otherwise the server's lists stand (replicas run the same program).
    pub(super) fn ready(
        &self,
        index: usize,
        condition: ServerCondition,
        replica: Replica,
        link: Link,
        listing: Listing,
    ) {
        let mut replicas = self.lock();
        if replicas.each.iter().all(|entry| entry.serving.is_none()) {
            self.reporter.tools(&self.name, listing.tools);
            self.reporter.resources(&self.name, listing.resources);
            self.reporter.prompts(&self.name, listing.prompts);
        }
        replicas.each[index] = Entry {
            condition,
            serving: Some((replica, link)),
        };
        self.publish(&mut replicas);
    }

    /// A replica listed the server's tools again (after `tools/list_changed`).
    pub(super) fn tools(&self, tools: Vec<ToolSpec>) {
        // Under the lock, so that a list and a status reach the broker in the order they came.
        let _order = self.lock();
        self.reporter.tools(&self.name, tools);
    }

    /// A replica listed the server's resources again (after `resources/list_changed`).
    pub(super) fn resources(&self, resources: Resources) {
        let _order = self.lock();
        self.reporter.resources(&self.name, resources);
    }

    /// A replica listed the server's prompts again (after `prompts/list_changed`).
    pub(super) fn prompts(&self, prompts: Vec<PromptSpec>) {
        let _order = self.lock();
        self.reporter.prompts(&self.name, prompts);
    }

    /// A replica's server said a resource it was subscribed to changed.
    pub(super) fn resource_updated(&self, uri: String) {
        self.reporter.resource_updated(&self.name, uri);
    }

    /// Every replica has stopped: the server is STOPPED.
    pub(super) fn stopped(&self) {
        let mut replicas = self.lock();
        let restarts = replicas.each.iter().map(|e| e.condition.restarts).sum();
        let stopped =
            Phase::Stopped.condition(self.template.transport, restarts, SystemTime::now());
        for entry in &mut replicas.each {
            entry.serving = None;
        }
        replicas.shown = stopped.clone();
        self.reporter.condition(&self.name, stopped, None);
    }

    /// Tells the broker the server's condition and call handle as the replicas now stand.
    fn publish(&self, replicas: &mut Replicas) {
        let conditions: Vec<ServerCondition> =
            replicas.each.iter().map(|e| e.condition.clone()).collect();
        let combined = combine(&conditions, &replicas.shown);
        let serving: Vec<&(Replica, Link)> = replicas
            .each
            .iter()
            .filter_map(|entry| entry.serving.as_ref())
            .collect();
        let upstream = serving.first().map(|(_, link)| Upstream {
            server: self.name.clone(),
            replicas: serving.iter().map(|(replica, _)| replica.clone()).collect(),
            timeout: self.template.timeout,
            max_timeout: self.template.max_timeout,
            link: link.clone(),
            slots: self.template.slots.clone(),
            max_result_bytes: self.template.max_result_bytes,
            pool: self.template.pool.clone(),
        });
        replicas.shown = combined.clone();
        self.reporter.condition(&self.name, combined, upstream);
    }

    /// Poisoning is ignored: every critical section leaves the entries whole.
    fn lock(&self) -> std::sync::MutexGuard<'_, Replicas> {
        self.replicas.lock().unwrap_or_else(|e| e.into_inner())
    }
}
