//! What the broker tells an MCP server about itself, and how it reacts to the server's
//! notifications.

use std::sync::Arc;

#[expect(
    deprecated,
    reason = "servers on older protocol versions still log this way"
)]
use rmcp::model::{LoggingLevel, LoggingMessageNotificationParam};
use rmcp::{
    ClientHandler, RoleClient,
    model::{ClientCapabilities, ClientConfig, Implementation, ProtocolVersion},
    service::NotificationContext,
};
use tokio::sync::Notify;

use crate::domain::names::ServerName;

/// The client side of one session.
#[derive(Clone)]
pub struct Handler {
    server: ServerName,
    tools_changed: Arc<Notify>,
}

impl Handler {
    /// A handler that signals `tools_changed` on `notifications/tools/list_changed`.
    pub fn new(server: ServerName, tools_changed: Arc<Notify>) -> Self {
        Self {
            server,
            tools_changed,
        }
    }
}

impl ClientHandler for Handler {
    fn get_info(&self) -> ClientConfig {
        let implementation = Implementation::new("toolbroker", env!("CARGO_PKG_VERSION"));
        // The newest version that still has the initialize handshake every server speaks;
        // servers answer with the version they support and rmcp follows it.
        ClientConfig::new(ClientCapabilities::default(), implementation)
            .with_protocol_version(ProtocolVersion::LATEST_WITH_INITIALIZE)
    }

    async fn on_tool_list_changed(&self, _context: NotificationContext<RoleClient>) {
        // Notify keeps one permit, so a burst of notifications causes one re-list.
        self.tools_changed.notify_one();
    }

    // MCP 2026-07-28 deprecates logging (SEP-2577), but servers on earlier versions still send
    // it, and it belongs in our log with the server's name on it.
    #[expect(
        deprecated,
        reason = "servers on older protocol versions still log this way"
    )]
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
