//! Where what an upstream server sends during a face call goes: to the client session's rmcp
//! peer when rmcp's service runs the call, or onto the call's own answer stream when the face
//! answers it directly (see [`direct_calls`](super::direct_calls)).

use std::sync::Arc;

use rmcp::{
    RoleServer,
    model::{ClientResult, RequestId, ServerJsonRpcMessage, ServerNotification, ServerRequest},
    service::Peer,
    transport::streamable_http_server::SessionId,
};
use tokio::sync::mpsc;

use super::directory::Directory;
use crate::faces::mcp::rounds::{self, Turn};

// How long a question to the client may wait for its answer before it is declined (the
// call's own timeout is paused meanwhile, its `max_timeout` still holds): one rule for
// questions in sessions and in rounds.
use crate::faces::mcp::rounds::QUESTION_TIMEOUT;

/// The way back to the client that made one call.
#[derive(Clone, Copy)]
pub enum Relay<'a> {
    /// The session's peer in rmcp's service, which routes by the originating request.
    Peer(&'a Peer<RoleServer>),
    /// The call's own answer stream.
    Stream(&'a AnswerStream),
    /// A 2026-07-28 client's call, which asks in rounds (see [`rounds`](super::rounds)).
    Rounds(&'a mpsc::Sender<Turn>),
}

impl Relay<'_> {
    /// Sends `notification` to the client; lost if the client is gone.
    pub async fn notify(self, notification: ServerNotification) {
        match self {
            Relay::Peer(peer) => {
                let _ = peer.send_notification(notification).await;
            }
            Relay::Stream(stream) => stream.notify(notification),
            // To the request the client is waiting on; lost while none is (the call is parked
            // on a question then, so it sends none).
            Relay::Rounds(turns) => {
                let _ = turns.try_send(Turn::Notify(notification));
            }
        }
    }

    /// Asks the client `request`; `None` if it could not be sent or was not answered in time.
    pub async fn ask(self, request: ServerRequest) -> Option<ClientResult> {
        let asked = async {
            match self {
                Relay::Peer(peer) => peer
                    .send_request(request)
                    .await
                    .map_err(|error| error.to_string()),
                Relay::Stream(stream) => stream.ask(request).await,
                Relay::Rounds(turns) => rounds::ask(turns, request)
                    .await
                    .ok_or_else(|| "the client did not answer".to_owned()),
            }
        };
        match tokio::time::timeout(QUESTION_TIMEOUT, asked).await {
            Ok(Ok(result)) => Some(result),
            Ok(Err(error)) => {
                tracing::debug!(%error, "the MCP client did not take the question");
                None
            }
            Err(_) => None,
        }
    }
}

/// The stream a direct call's answer and everything before it go out on.
pub struct AnswerStream {
    sender: mpsc::UnboundedSender<ServerJsonRpcMessage>,
    directory: Arc<Directory>,
    session: SessionId,
}

impl AnswerStream {
    /// A stream sending to `sender`, asking questions in session `session` of `directory`.
    pub fn new(
        sender: mpsc::UnboundedSender<ServerJsonRpcMessage>,
        directory: Arc<Directory>,
        session: SessionId,
    ) -> Self {
        Self {
            sender,
            directory,
            session,
        }
    }

    /// Sends the answer, last.
    pub fn finish(&self, answer: ServerJsonRpcMessage) {
        let _ = self.sender.send(answer);
    }

    /// Sends `notification` before the answer.
    pub fn notify(&self, notification: ServerNotification) {
        let _ = self
            .sender
            .send(ServerJsonRpcMessage::notification(notification));
    }

    /// Asks the client `request` and waits for its answer, which it POSTs to the session.
    pub async fn ask(&self, request: ServerRequest) -> Result<ClientResult, String> {
        let (id, answered) = self.directory.ask(&self.session);
        let _unanswered = Unanswered {
            directory: &self.directory,
            session: &self.session,
            request: id.clone(),
        };
        self.sender
            .send(ServerJsonRpcMessage::request(request, id))
            .map_err(|_| "the call's answer stream is closed".to_owned())?;
        answered
            .await
            .map_err(|_| "the session ended before the client answered".to_owned())?
    }
}

/// Forgets a question once nobody waits for its answer (answered, timed out, call dropped).
struct Unanswered<'a> {
    directory: &'a Directory,
    session: &'a SessionId,
    request: RequestId,
}

impl Drop for Unanswered<'_> {
    fn drop(&mut self) {
        self.directory.forget(self.session, &self.request);
    }
}
