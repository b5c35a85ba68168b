//! What the broker tells an MCP server about itself (it handles elicitation and sampling, and
//! roots when configured), and how it reacts to the server's notifications and requests.

// MCP 2026-07-28 deprecates logging, sampling and roots (SEP-2577); servers on the earlier
// versions every server speaks today still use them.
#![expect(
    deprecated,
    reason = "servers before MCP 2026-07-28 log, sample and ask for roots"
)]

use std::sync::Arc;

use rmcp::model::{LoggingLevel, LoggingMessageNotificationParam};
use rmcp::{
    ClientHandler, ErrorData, RoleClient,
    model::{
        ClientCapabilities, ClientConfig, CreateMessageRequestParams, CreateMessageResult,
        ElicitRequestParams, ElicitResult, ElicitationCapability, FormElicitationCapability,
        Implementation, ListRootsResult, ProtocolVersion, ResourceUpdatedNotificationParam, Root,
        RootsCapabilities, SamplingCapability, UrlElicitationCapability,
    },
    service::{NotificationContext, RequestContext},
};

use crate::domain::names::ServerName;
use crate::upstream::session::{changes::Changes, interactions::Interactions, rounds::Stateless};

/// The client side of one session.
#[derive(Clone)]
pub struct Handler {
    server: ServerName,
    changes: Changes,
    interactions: Arc<Interactions>,
    roots: Arc<[String]>,
}

impl Handler {
    /// A handler that signals `changes` on list-changed notifications, routes the server's
    /// requests during calls by `interactions`, and answers `roots/list` with `roots`.
    pub fn new(
        server: ServerName,
        changes: Changes,
        interactions: Arc<Interactions>,
        roots: Arc<[String]>,
    ) -> Self {
        Self {
            server,
            changes,
            interactions,
            roots,
        }
    }
}

impl Handler {
    /// What a session of this handler on `version` (2026-07-28) declares and answers,
    /// request by request.
    pub fn stateless(&self, version: ProtocolVersion) -> Stateless {
        let client = self.get_info().client_info;
        Stateless::new(version, client, self.capabilities(), self.roots())
    }

    /// The server's name.
    pub fn server(&self) -> &ServerName {
        &self.server
    }

    fn roots(&self) -> ListRootsResult {
        let roots = self
            .roots
            .iter()
            .map(|uri| Root::new(uri.clone()))
            .collect();
        ListRootsResult::new(roots)
    }
}

impl ClientHandler for Handler {
    fn get_info(&self) -> ClientConfig {
        let implementation = Implementation::new("toolbroker", env!("CARGO_PKG_VERSION"));
        // The newest version that still has the initialize handshake every server speaks;
        // servers answer with the version they support and rmcp follows it.
        ClientConfig::new(self.capabilities(), implementation)
            .with_protocol_version(ProtocolVersion::LATEST_WITH_INITIALIZE)
    }

    async fn on_tool_list_changed(&self, _context: NotificationContext<RoleClient>) {
        // Notify keeps one permit, so a burst of notifications causes one re-list.
        self.changes.tools.notify_one();
    }

    async fn on_resource_list_changed(&self, _context: NotificationContext<RoleClient>) {
        self.changes.resources.notify_one();
    }

    async fn on_prompt_list_changed(&self, _context: NotificationContext<RoleClient>) {
        self.changes.prompts.notify_one();
    }

    async fn on_resource_updated(
        &self,
        params: ResourceUpdatedNotificationParam,
        _context: NotificationContext<RoleClient>,
    ) {
        self.changes.updated.push(params.uri);
    }

    async fn create_elicitation(
        &self,
        request: ElicitRequestParams,
        context: RequestContext<RoleClient>,
    ) -> Result<ElicitResult, ErrorData> {
        Ok(self.interactions.elicit(&context.id, request).await)
    }

    async fn create_message(
        &self,
        params: CreateMessageRequestParams,
        context: RequestContext<RoleClient>,
    ) -> Result<CreateMessageResult, ErrorData> {
        self.interactions
            .sample(&context.id, params)
            .await
            .map_err(|message| ErrorData::internal_error(message, None))
    }

    async fn list_roots(
        &self,
        _context: RequestContext<RoleClient>,
    ) -> Result<ListRootsResult, ErrorData> {
        Ok(self.roots())
    }

    // MCP 2026-07-28 deprecates logging (SEP-2577), but servers on earlier versions still send
    // it, and it belongs in our log with the server's name on it.
    async fn on_logging_message(
        &self,
        params: LoggingMessageNotificationParam,
        _context: NotificationContext<RoleClient>,
    ) {
        let logger = params.logger.as_deref().unwrap_or("");
        let data = &params.data;
        let server = &self.server;
        match params.level {
            LoggingLevel::Debug => tracing::debug!(%server, logger, %data, "server log"),
            LoggingLevel::Info | LoggingLevel::Notice => {
                tracing::info!(%server, logger, %data, "server log")
            }
            LoggingLevel::Warning => tracing::warn!(%server, logger, %data, "server log"),
            _ => tracing::error!(%server, logger, %data, "server log"),
        }
    }
}

impl Handler {
    /// Elicitation (form and URL) and sampling, relayed to the caller of a streaming call;
    /// roots when the server has any configured.
    fn capabilities(&self) -> ClientCapabilities {
        let mut capabilities = ClientCapabilities::default();
        capabilities.elicitation = Some(
            ElicitationCapability::new()
                .with_form(FormElicitationCapability::new())
                .with_url(UrlElicitationCapability::new()),
        );
        capabilities.sampling = Some(SamplingCapability::default());
        if !self.roots.is_empty() {
            capabilities.roots = Some(RootsCapabilities::default());
        }
        capabilities
    }
}
