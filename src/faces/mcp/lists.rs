//! Which of an MCP client's lists went stale, and telling it so: shared by the MCP face and
//! `mcp-stdio`, over a session (`notifications/*/list_changed` to the peer) or a 2026-07-28
//! `subscriptions/listen` stream.

use rmcp::{
    RoleServer,
    service::{Peer, SubscriptionSink},
};

/// Which lists a client should fetch again.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Stale {
    /// `tools/list`.
    pub tools: bool,
    /// `resources/list` and `resources/templates/list`.
    pub resources: bool,
    /// `prompts/list`.
    pub prompts: bool,
}

impl Stale {
    /// Every list: after a gap in which changes may have been missed.
    pub const ALL: Stale = Stale {
        tools: true,
        resources: true,
        prompts: true,
    };

    /// Both sets of lists.
    pub fn union(self, other: Stale) -> Stale {
        Stale {
            tools: self.tools || other.tools,
            resources: self.resources || other.resources,
            prompts: self.prompts || other.prompts,
        }
    }

    /// Whether any list is stale.
    pub fn any(self) -> bool {
        self.tools || self.resources || self.prompts
    }
}

/// Where `list_changed` notifications go.
pub trait Notifier {
    /// `notifications/tools/list_changed`; false if the client is gone.
    fn tools_changed(&self) -> impl Future<Output = bool> + Send;
    /// `notifications/resources/list_changed`; false if the client is gone.
    fn resources_changed(&self) -> impl Future<Output = bool> + Send;
    /// `notifications/prompts/list_changed`; false if the client is gone.
    fn prompts_changed(&self) -> impl Future<Output = bool> + Send;
}

impl Notifier for Peer<RoleServer> {
    async fn tools_changed(&self) -> bool {
        self.notify_tool_list_changed().await.is_ok()
    }
    async fn resources_changed(&self) -> bool {
        self.notify_resource_list_changed().await.is_ok()
    }
    async fn prompts_changed(&self) -> bool {
        self.notify_prompt_list_changed().await.is_ok()
    }
}

impl Notifier for SubscriptionSink {
    async fn tools_changed(&self) -> bool {
        self.notify_tool_list_changed().await.is_ok()
    }
    async fn resources_changed(&self) -> bool {
        self.notify_resource_list_changed().await.is_ok()
    }
    async fn prompts_changed(&self) -> bool {
        self.notify_prompt_list_changed().await.is_ok()
    }
}

/// Tells `to` which lists went stale, one notification per list; false once it is gone.
pub async fn announce(to: &impl Notifier, stale: Stale) -> bool {
    (!stale.tools || to.tools_changed().await)
        && (!stale.resources || to.resources_changed().await)
        && (!stale.prompts || to.prompts_changed().await)
}
