//! What one request may see: the servers it asked for, and the tools its caller's token
//! allows. Applied to ListTools, Watch snapshots and Watch events alike.

use super::convert;
use crate::{
    auth::Caller,
    broker::Snapshot,
    domain::{
        catalog::{Change, Event},
        request_error::RequestError,
    },
    proto,
};

/// The servers asked for (all when none) and the caller's tools.
pub struct Visibility {
    servers: Vec<String>,
    caller: Caller,
}

impl Visibility {
    /// Checks that every named server exists.
    pub fn new(
        servers: Vec<String>,
        caller: Caller,
        snapshot: &Snapshot,
    ) -> Result<Self, RequestError> {
        if let Some(unknown) = servers
            .iter()
            .find(|name| snapshot.catalog.server(name).is_none())
        {
            return Err(RequestError::UnknownServer {
                name: unknown.clone(),
            });
        }
        Ok(Self { servers, caller })
    }

    /// Whether everything is visible (no server filter, no per-token allow-list).
    pub fn everything(&self) -> bool {
        self.servers.is_empty() && self.caller.sees_all()
    }

    /// Whether the server is among those asked for.
    pub fn server(&self, server: &str) -> bool {
        self.servers.is_empty() || self.servers.iter().any(|s| s == server)
    }

    /// Whether a tool is visible.
    pub fn tool(&self, tool: &proto::Tool) -> bool {
        self.server(&tool.server) && self.caller.may_use(&tool.name)
    }

    /// A catalog event as this request may see it, if it may see any of it.
    pub fn event(&self, event: &Event) -> Option<proto::WatchEvent> {
        if !self.server(event.server().as_str()) {
            return None;
        }
        if let Change::Resources(server) = &event.change
            && !self.caller.may_read(server.as_str())
        {
            return None;
        }
        let mut converted = convert::watch_event(event);
        if let (Change::Tools(..), Some(proto::watch_event::Event::ToolsChanged(change))) =
            (&event.change, converted.event.as_mut())
        {
            change.added.retain(|t| self.caller.may_use(&t.name));
            change.updated.retain(|t| self.caller.may_use(&t.name));
            change.removed.retain(|name| self.caller.may_use(name));
            if change.added.is_empty() && change.updated.is_empty() && change.removed.is_empty() {
                return None;
            }
        }
        Some(converted)
    }
}
