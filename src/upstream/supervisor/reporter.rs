//! The narrow port supervisors report through. The broker implements it; defining it here,
//! below the broker, keeps the MCP side from depending on what sits above it.

use crate::domain::{
    catalog::ServerPolicy,
    names::ServerName,
    offer::{PromptSpec, Resources},
    state::ServerCondition,
    tool::ToolSpec,
};
use crate::upstream::Upstream;

/// Where the condition, tools and call handle of every server go.
pub trait Reporter: Send + Sync + 'static {
    /// A server's new condition; `upstream` is its call handle while it is READY.
    fn condition(
        &self,
        server: &ServerName,
        condition: ServerCondition,
        upstream: Option<Upstream>,
    );

    /// The complete list of tools a server offers now.
    fn tools(&self, server: &ServerName, tools: Vec<ToolSpec>);

    /// The complete resources and templates a server offers now.
    fn resources(&self, server: &ServerName, resources: Resources);

    /// The complete list of prompts a server offers now.
    fn prompts(&self, server: &ServerName, prompts: Vec<PromptSpec>);

    /// A server said a resource it was subscribed to changed (`notifications/resources/updated`).
    fn resource_updated(&self, server: &ServerName, uri: String);

    /// The servers of a reloaded configuration, in its order, each with the condition it
    /// starts in; servers not in it are gone.
    fn configure(&self, servers: Vec<(ServerPolicy, ServerCondition)>);
}
