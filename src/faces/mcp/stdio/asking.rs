//! How the bridge puts what happens during a call to its MCP client ([`Asking`]): before
//! 2026-07-28 as requests and notifications on the session; on 2026-07-28 on the call's turns,
//! which become rounds (`input_required`, see [`rounds`](crate::faces::mcp::rounds)). A
//! question the client did not declare it can answer is declined without being asked.

// Sampling and logging are deprecated by MCP 2026-07-28 (SEP-2577) but are what clients use.
#![expect(
    deprecated,
    reason = "sampling and logging are what clients before MCP 2026-07-28 use"
)]

use rmcp::{
    RoleServer,
    model::{
        ClientCapabilities, ClientResult, CreateMessageRequest, CreateMessageRequestParams,
        ElicitRequest, ElicitResult, ElicitationAction, LoggingMessageNotificationParam,
        ProgressToken, ServerNotification, ServerRequest,
    },
    service::Peer,
};
use tokio::sync::mpsc;

use crate::{
    faces::mcp::rounds::{self, Turn},
    faces::mcp::stdio::from_proto,
    proto,
};

/// Where what happens during a call goes.
pub enum Asking<'a> {
    /// The session's client (before 2026-07-28), with what it declared at initialize.
    Peer(&'a Peer<RoleServer>),
    /// A 2026-07-28 client's call run in rounds, with what its request declared.
    Rounds(&'a mpsc::Sender<Turn>, Box<Option<ClientCapabilities>>),
}

impl Asking<'_> {
    /// What the client declared it can do.
    fn capabilities(&self) -> Option<ClientCapabilities> {
        match self {
            Asking::Peer(peer) => peer.peer_info().map(|info| info.capabilities.clone()),
            Asking::Rounds(_, capabilities) => (**capabilities).clone(),
        }
    }

    /// Asks the client `request`: its answer, or why there is none.
    async fn ask(&self, request: ServerRequest) -> Result<ClientResult, String> {
        match self {
            Asking::Peer(peer) => peer
                .send_request(request)
                .await
                .map_err(|error| error.to_string()),
            Asking::Rounds(turns, _) => rounds::ask(turns, request)
                .await
                .ok_or_else(|| "the client did not answer".to_owned()),
        }
    }

    /// Progress, for a client that asked for it (gave a `token`).
    pub async fn progress(&self, token: Option<&ProgressToken>, progress: proto::Progress) {
        let Some(token) = token else {
            return;
        };
        let notification = from_proto::progress(token.clone(), progress);
        match self {
            Asking::Peer(peer) => {
                if let Err(error) = peer.notify_progress(notification).await {
                    tracing::debug!(%error, "progress not relayed");
                }
            }
            // To the request the client waits on; lost while the call is parked on a question.
            Asking::Rounds(turns, _) => {
                let notification = ServerNotification::ProgressNotification(
                    rmcp::model::ProgressNotification::new(notification),
                );
                let _ = turns.try_send(Turn::Notify(notification));
            }
        }
    }

    /// A log message of the call (a 2026-07-28 client gets none: that version sends them
    /// only to a request that asked for a level).
    pub async fn log(&self, log: LoggingMessageNotificationParam) {
        if let Asking::Peer(peer) = self
            && let Err(error) = peer.notify_logging_message(log).await
        {
            tracing::debug!(%error, "log message not relayed");
        }
    }

    /// The broker's question put to the client; one it cannot answer (no elicitation
    /// capability, or not this mode) is declined without being asked.
    pub async fn elicit(&self, question: proto::ElicitationRequest) -> proto::ElicitationResponse {
        let decline = || ElicitResult::new(ElicitationAction::Decline);
        let capabilities = self.capabilities();
        let answer = match from_proto::elicit_params(&question) {
            Some(params) => {
                let request = ServerRequest::ElicitRequest(ElicitRequest::new(params));
                if !rounds::can_answer(capabilities.as_ref(), &request) {
                    tracing::debug!(mode = %question.mode, "a question the client cannot take; declined");
                    return from_proto::elicitation_response(question.id, decline());
                }
                match self.ask(request).await {
                    Ok(ClientResult::ElicitResult(result)) => result,
                    Ok(other) => {
                        tracing::warn!(answer = ?other, "an odd answer to a question; declined");
                        decline()
                    }
                    Err(error) => {
                        tracing::warn!(%error, "the client did not answer a question; declined");
                        decline()
                    }
                }
            }
            _ => {
                tracing::debug!(mode = %question.mode, "a question the client cannot take; declined");
                decline()
            }
        };
        from_proto::elicitation_response(question.id, answer)
    }

    /// The broker's sampling request put to the client; refused if it cannot sample.
    pub async fn sample(&self, request: proto::SamplingRequest) -> proto::SamplingResponse {
        let can_sample = rounds::answers(self.capabilities().as_ref()).sample;
        let answer = match serde_json::from_str::<CreateMessageRequestParams>(&request.params_json)
        {
            _ if !can_sample => Err("the MCP client does not support sampling".to_owned()),
            Err(error) => Err(format!("the sampling request is not MCP's: {error}")),
            Ok(params) => {
                let asked = ServerRequest::CreateMessageRequest(CreateMessageRequest::new(params));
                match self.ask(asked).await {
                    Ok(ClientResult::CreateMessageResult(result)) => {
                        serde_json::to_string(&result).map_err(|e| e.to_string())
                    }
                    Ok(other) => Err(format!("the client answered sampling with {other:?}")),
                    Err(error) => Err(error),
                }
            }
        };
        let (result_json, error) = match answer {
            Ok(json) => (json, String::new()),
            Err(error) => (String::new(), error),
        };
        proto::SamplingResponse {
            id: request.id,
            result_json,
            error,
        }
    }
}
