//! The one Watch helper: a Watch stream read event by event, each within a timeout, checking
//! that revisions increase along it; and the waits built on it.

use std::{collections::VecDeque, time::Duration};

use tokio::time::Instant;
use tonic::{Streaming, transport::Channel};
use toolbroker::proto::{
    self, ServerStatus, Snapshot, ToolsChanged, WatchEvent, tool_broker_client::ToolBrokerClient,
    watch_event::Event,
};

use super::{STARTUP, WAIT, broker::Broker};

/// An open Watch stream.
pub struct Watch {
    stream: Streaming<WatchEvent>,
    /// The revision of the last event read.
    revision: Option<u64>,
    /// Statuses of a snapshot that `next_status` has not returned yet.
    statuses: VecDeque<ServerStatus>,
}

impl Watch {
    /// Opens a Watch of `servers` (all when empty) with `client`.
    pub async fn open(
        mut client: ToolBrokerClient<Channel>,
        servers: &[&str],
    ) -> Result<Watch, tonic::Status> {
        let request = proto::WatchRequest {
            servers: servers.iter().map(|s| s.to_string()).collect(),
            ..Default::default()
        };
        Ok(Watch::new(client.watch(request).await?.into_inner()))
    }

    /// Follows a stream opened elsewhere (with credentials, say).
    pub fn new(stream: Streaming<WatchEvent>) -> Watch {
        Watch {
            stream,
            revision: None,
            statuses: VecDeque::new(),
        }
    }

    /// The revision of the last event read.
    pub fn revision(&self) -> u64 {
        self.revision.expect("an event was read")
    }

    /// The next event, within [`WAIT`].
    pub async fn next(&mut self) -> WatchEvent {
        self.next_before(Instant::now() + WAIT).await
    }

    /// The next event, before `deadline`; its revision must be above the last one's.
    async fn next_before(&mut self, deadline: Instant) -> WatchEvent {
        let event = tokio::time::timeout_at(deadline, self.stream.message())
            .await
            .expect("a Watch event in time")
            .expect("the Watch stream is healthy")
            .expect("the Watch stream is open");
        if let Some(last) = self.revision {
            assert!(
                event.revision > last,
                "revisions increase: {last} then {}",
                event.revision
            );
        }
        self.revision = Some(event.revision);
        event
    }

    /// The next event, which must be a snapshot.
    pub async fn snapshot(&mut self) -> Snapshot {
        match self.next().await.event {
            Some(Event::Snapshot(snapshot)) => snapshot,
            other => panic!("not a snapshot: {other:?}"),
        }
    }

    /// The next ToolsChanged event, skipping status events.
    pub async fn next_tools_change(&mut self) -> ToolsChanged {
        loop {
            if let Some(Event::ToolsChanged(change)) = self.next().await.event {
                return change;
            }
        }
    }

    /// The next event that `matches`, skipping the others, within [`WAIT`].
    pub async fn next_matching(&mut self, matches: impl Fn(&Event) -> bool) -> Event {
        let deadline = Instant::now() + WAIT;
        loop {
            if let Some(event) = self.next_before(deadline).await.event
                && matches(&event)
            {
                return event;
            }
        }
    }

    /// The next server status, skipping tool events; a snapshot gives each of its servers'
    /// statuses in turn. Within [`WAIT`].
    pub async fn next_status(&mut self) -> ServerStatus {
        self.next_status_before(Instant::now() + WAIT).await
    }

    async fn next_status_before(&mut self, deadline: Instant) -> ServerStatus {
        loop {
            if let Some(status) = self.statuses.pop_front() {
                return status;
            }
            match self.next_before(deadline).await.event {
                Some(Event::Snapshot(snapshot)) => self.statuses.extend(snapshot.servers),
                Some(Event::ServerStatus(status)) => return status,
                _ => {}
            }
        }
    }

    /// Follows statuses until one `matches` (`what` says which, for the failure message), within
    /// [`STARTUP`] in all: servers may take that long to start.
    pub async fn status_until(
        &mut self,
        what: &str,
        mut matches: impl FnMut(&ServerStatus) -> bool,
    ) -> ServerStatus {
        let deadline = Instant::now() + STARTUP;
        let follow = async {
            loop {
                // Later than the deadline, so that the timeout below says what was awaited.
                let status = self.next_status_before(deadline + WAIT).await;
                if matches(&status) {
                    return status;
                }
            }
        };
        tokio::time::timeout_at(deadline, follow)
            .await
            .unwrap_or_else(|_| panic!("no status {what} within {STARTUP:?}"))
    }

    /// Waits until the stream fails, skipping events, within [`WAIT`]; its status.
    pub async fn next_error(&mut self) -> tonic::Status {
        let failed = tokio::time::timeout(WAIT, async {
            loop {
                match self.stream.message().await {
                    Ok(Some(_)) => {}
                    Ok(None) => panic!("the Watch stream ended without an error"),
                    Err(status) => return status,
                }
            }
        })
        .await;
        failed.unwrap_or_else(|_| panic!("the Watch stream did not fail within {WAIT:?}"))
    }

    /// Waits until the stream ends (or fails), skipping events, within [`WAIT`].
    pub async fn end(&mut self) {
        let ended = tokio::time::timeout(WAIT, async {
            while let Ok(Some(_)) = self.stream.message().await {}
        })
        .await;
        assert!(ended.is_ok(), "the Watch stream still runs after {WAIT:?}");
    }

    /// Asserts that nothing arrives, and the stream does not end, for `period`.
    pub async fn stays_quiet_for(&mut self, period: Duration) {
        let quiet = tokio::time::timeout(period, self.stream.message()).await;
        assert!(
            quiet.is_err(),
            "the Watch stream stays open and quiet: {quiet:?}"
        );
    }
}

impl Broker {
    /// Opens a Watch of `servers` (all when empty).
    pub async fn watch(&self, servers: &[&str]) -> Watch {
        self.try_watch(servers).await.expect("Watch")
    }

    /// Opens a Watch of `servers`, or says why not.
    pub async fn try_watch(&self, servers: &[&str]) -> Result<Watch, tonic::Status> {
        Watch::open(self.client.clone(), servers).await
    }

    /// Waits, by watching, until server `name` is in `state`.
    pub async fn wait_for_state(&self, name: &str, state: proto::ServerState) -> ServerStatus {
        self.wait_for_status(name, &format!("{state:?}"), |s| s.state() == state)
            .await
    }

    /// Waits, by watching, until server `name` has a status that `matches` (`what` says which,
    /// for the failure message).
    pub async fn wait_for_status(
        &self,
        name: &str,
        what: &str,
        matches: impl Fn(&ServerStatus) -> bool,
    ) -> ServerStatus {
        let mut watch = self.watch(&[name]).await;
        watch.status_until(&format!("{name} {what}"), matches).await
    }
}
