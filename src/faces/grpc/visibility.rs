//! What one request may see: the servers and the view it asked for, and the tools its caller's
//! token allows. Applied to ListTools, SearchTools, Watch snapshots and Watch events alike.

use std::sync::Arc;

use super::messages;
use crate::{
    auth::Caller,
    core::broker::Snapshot,
    domain::{
        catalog::{Catalog, Change, Event},
        grants::Access,
        request_error::RequestError,
        tool::ExposedTool,
        views::Views,
    },
    proto,
};

/// The servers asked for (all when none), the view asked for, and the caller's tools.
pub struct Visibility {
    servers: Vec<String>,
    /// The view's name, when one was asked for.
    view: Option<String>,
    caller: Caller,
    /// The tools the caller sees through the view ([`Views::narrow`](crate::domain::views::Views::narrow)).
    seen: Access,
}

impl Visibility {
    /// Checks that every named server, and the view (empty: none), exist.
    pub fn new(
        servers: Vec<String>,
        view: String,
        caller: Caller,
        snapshot: &Snapshot,
    ) -> Result<Self, RequestError> {
        let seen = snapshot.views.narrow(&caller.access, &view)?;
        let view = (!view.is_empty()).then_some(view);
        if let Some(unknown) = servers
            .iter()
            .find(|name| snapshot.catalog.server(name).is_none())
        {
            return Err(RequestError::UnknownServer {
                name: unknown.clone(),
            });
        }
        Ok(Self {
            servers,
            view,
            caller,
            seen,
        })
    }

    /// The view asked for, by name.
    pub fn view_name(&self) -> Option<&str> {
        self.view.as_deref()
    }

    /// The same request under its view's definition in `views` (NOT_FOUND when it is gone).
    pub fn set_view(&mut self, views: &Views) -> Result<(), RequestError> {
        self.seen = views.narrow(
            &self.caller.access,
            self.view.as_deref().unwrap_or_default(),
        )?;
        Ok(())
    }

    /// Whether everything is visible (no server filter, no view, no per-token allow-list).
    pub fn everything(&self) -> bool {
        self.servers.is_empty() && self.view.is_none() && self.caller.sees_all()
    }

    /// Whether the server is among those asked for.
    pub fn server(&self, server: &str) -> bool {
        self.servers.is_empty() || self.servers.iter().any(|s| s == server)
    }

    /// Whether the status of server `name` is visible: a server asked for and, for a caller
    /// that does not see every tool, one that offers a tool this request may see or whose
    /// resources its caller may read (the servers of others stay unnamed).
    pub fn server_status(&self, name: &str, catalog: &Catalog) -> bool {
        self.server(name)
            && (self.caller.sees_all()
                || self.caller.may_read(name)
                || catalog.server_offers(name, |tool| self.caller.may_use(tool)))
    }

    /// Whether a tool is visible.
    pub fn tool(&self, tool: &ExposedTool) -> bool {
        self.server(tool.server.as_str()) && self.name(tool.name.as_str())
    }

    /// Whether the tool at each position of `tools` is visible (with nothing to check for a
    /// request that sees everything).
    pub fn keep<'a>(&'a self, tools: &'a [Arc<ExposedTool>]) -> impl Fn(usize) -> bool + 'a {
        let everything = self.everything();
        move |i| everything || self.tool(&tools[i])
    }

    /// Whether the tool exposed as `name` is visible, whatever its server.
    fn name(&self, name: &str) -> bool {
        self.seen.may_use(name)
    }

    /// A catalog event as this request may see it, if it may see any of it (a `Views` event
    /// is the stream's to act on, not to pass on); `catalog` is asked for only to decide on a
    /// server's status.
    pub fn event(
        &self,
        event: &Event,
        catalog: impl FnOnce() -> Arc<Snapshot>,
    ) -> Option<proto::WatchEvent> {
        let server = event.server()?.as_str();
        if !self.server(server) {
            return None;
        }
        // A server's status needs the catalog: whether it may be seen, and where its rates
        // and tokens are kept.
        let snapshot = matches!(event.change, Change::Server(_)).then(catalog);
        if let Some(snapshot) = &snapshot
            && !self.caller.sees_all()
            && !self.server_status(server, &snapshot.catalog)
        {
            return None;
        }
        if let Change::Resources(server) = &event.change
            && !self.caller.may_read(server.as_str())
        {
            return None;
        }
        let kept = snapshot.as_ref().and_then(|snapshot| {
            event
                .server()
                .and_then(|server| snapshot.kept.get(server).cloned())
        });
        let mut converted = messages::watch_event(event, kept.as_ref());
        if let (Change::Tools(..), Some(proto::watch_event::Event::ToolsChanged(change))) =
            (&event.change, converted.event.as_mut())
        {
            change.added.retain(|t| self.name(&t.name));
            change.updated.retain(|t| self.name(&t.name));
            change.removed.retain(|name| self.name(name));
            if change.added.is_empty() && change.updated.is_empty() && change.removed.is_empty() {
                return None;
            }
        }
        Some(converted)
    }
}
