//! The face's session manager: rmcp's `LocalSessionManager`, with what the face needs for
//! the calls it answers directly (see [`direct_calls`](super::direct_calls)): each session
//! in the face's [`Directory`] once initialized, the client's answers to the questions of
//! those calls and its `notifications/cancelled` for them caught on their way to rmcp, and
//! idle sessions closed by the face, which sees all of a session's traffic where rmcp's
//! worker does not. Each session's caller is recorded as it is created, and the oldest idle
//! sessions are closed to keep the caps (see [`session_caps`](super::session_caps)).
//!
//! **What would let it go**: as for the [`Directory`]: rmcp's `LocalSessionManager` with a hook
//! for the client messages of calls answered outside it and a keep-alive that counts them. It
//! implements rmcp's public `SessionManager` trait; what it decides is in the directory
//! (property-tested) and the caps (`session_caps`).

use std::{
    sync::{Arc, Weak},
    time::{Duration, Instant},
};

use futures::{Stream, StreamExt as _};
use rmcp::{
    model::{
        ClientJsonRpcMessage, ClientNotification, GetExtensions as _, JsonRpcError,
        JsonRpcNotification, JsonRpcResponse, ServerJsonRpcMessage,
    },
    transport::streamable_http_server::{
        SessionId, SessionManager,
        session::{
            ServerSseMessage,
            local::{LocalSessionManager, LocalSessionManagerError, SessionConfig},
        },
    },
};
use tokio_util::sync::CancellationToken;

use super::{
    directory::{self, Directory},
    session_caps::{Caps, Full, Owners, Reservation},
};
use crate::domain::caller::CallerKey;

/// A session left with nothing open and nothing sent for this long is closed, as rmcp's own
/// keep-alive would (it counts only what passes through its worker, which direct calls do
/// not, so the face keeps time itself).
const IDLE: Duration = SessionConfig::DEFAULT_KEEP_ALIVE;

/// How often idle sessions are looked for.
const SWEEP: Duration = Duration::from_secs(30);

/// The session a client's `notifications/initialized` belongs to, put in its extensions for
/// the handler (which rmcp does not tell its session).
#[derive(Debug, Clone)]
pub struct SessionKey(pub SessionId);

/// rmcp's session manager, keeping the face's directory and the sessions' callers.
pub struct FaceSessions {
    inner: LocalSessionManager,
    directory: Arc<Directory>,
    owners: Arc<Owners>,
}

impl FaceSessions {
    /// Sessions recorded in `directory`, kept within `caps`, swept for idle ones until
    /// `closing`.
    pub fn new(directory: Arc<Directory>, caps: Caps, closing: CancellationToken) -> Arc<Self> {
        let mut inner = LocalSessionManager::default();
        inner.session_config.keep_alive = None;
        let owners = Owners::new(caps);
        let sessions = Arc::new(Self {
            inner,
            directory,
            owners,
        });
        tokio::spawn(sweep(Arc::downgrade(&sessions), closing));
        sessions
    }

    /// Whose each session is.
    pub fn owners(&self) -> &Owners {
        &self.owners
    }

    /// A place for a new session of `caller`, the oldest idle sessions closed to make it; or
    /// the cap that is full.
    pub async fn make_room(&self, caller: &CallerKey) -> Result<Reservation, Full> {
        let (reservation, victims) = self.owners.reserve(caller, &self.directory)?;
        for victim in victims {
            tracing::debug!(session = %victim, "MCP face session closed to make room");
            let _ = self.close_session(&victim).await;
        }
        Ok(reservation)
    }
}

/// Closes the sessions idle for [`IDLE`] every [`SWEEP`], until `closing` or the sessions are
/// dropped.
async fn sweep(sessions: Weak<FaceSessions>, closing: CancellationToken) {
    loop {
        tokio::select! {
            () = closing.cancelled() => return,
            () = tokio::time::sleep(SWEEP) => {}
        }
        let Some(sessions) = sessions.upgrade() else {
            return;
        };
        for id in sessions.directory.idle(Instant::now(), IDLE) {
            tracing::debug!(session = %id, "MCP face session idle: closed");
            let _ = sessions.close_session(&id).await;
        }
    }
}

/// Counts a stream of a session as open while it lives.
struct OpenStream {
    directory: Arc<Directory>,
    session: SessionId,
}

impl OpenStream {
    fn new(directory: &Arc<Directory>, session: &SessionId) -> Self {
        directory.stream(session, true);
        Self {
            directory: directory.clone(),
            session: session.clone(),
        }
    }
}

impl Drop for OpenStream {
    fn drop(&mut self) {
        self.directory.stream(&self.session, false);
    }
}

impl SessionManager for FaceSessions {
    type Error = LocalSessionManagerError;
    type Transport = <LocalSessionManager as SessionManager>::Transport;

    async fn create_session(&self) -> Result<(SessionId, Self::Transport), Self::Error> {
        let (id, transport) = self.inner.create_session().await?;
        self.directory.open(&id);
        self.owners.created(&id);
        Ok((id, transport))
    }

    async fn initialize_session(
        &self,
        id: &SessionId,
        message: ClientJsonRpcMessage,
    ) -> Result<ServerJsonRpcMessage, Self::Error> {
        self.directory.touch(id);
        self.inner.initialize_session(id, message).await
    }

    async fn has_session(&self, id: &SessionId) -> Result<bool, Self::Error> {
        self.inner.has_session(id).await
    }

    async fn close_session(&self, id: &SessionId) -> Result<(), Self::Error> {
        self.directory.close(id);
        self.owners.closed(id);
        self.inner.close_session(id).await
    }

    async fn create_stream(
        &self,
        id: &SessionId,
        message: ClientJsonRpcMessage,
    ) -> Result<impl Stream<Item = ServerSseMessage> + Send + Sync + 'static, Self::Error> {
        self.directory.touch(id);
        self.inner.create_stream(id, message).await
    }

    async fn accept_message(
        &self,
        id: &SessionId,
        message: ClientJsonRpcMessage,
    ) -> Result<(), Self::Error> {
        let directory = &self.directory;
        directory.touch(id);
        let message = match message {
            ClientJsonRpcMessage::Response(JsonRpcResponse {
                id: request,
                result,
                ..
            }) if directory::is_question(&request) => {
                directory.answer(id, &request, Ok(result));
                return Ok(());
            }
            ClientJsonRpcMessage::Error(JsonRpcError {
                id: Some(request),
                error,
                ..
            }) if directory::is_question(&request) => {
                directory.answer(id, &request, Err(error.message.into_owned()));
                return Ok(());
            }
            ClientJsonRpcMessage::Notification(JsonRpcNotification {
                notification: ClientNotification::CancelledNotification(cancelled),
                ..
            }) if cancelled
                .params
                .request_id
                .as_ref()
                .is_some_and(|request| directory.cancel_call(id, request)) =>
            {
                return Ok(());
            }
            ClientJsonRpcMessage::Notification(mut notification) => {
                if matches!(
                    notification.notification,
                    ClientNotification::InitializedNotification(_)
                ) {
                    let extensions = notification.notification.extensions_mut();
                    extensions.insert(SessionKey(id.clone()));
                }
                ClientJsonRpcMessage::Notification(notification)
            }
            other => other,
        };
        self.inner.accept_message(id, message).await
    }

    async fn create_standalone_stream(
        &self,
        id: &SessionId,
    ) -> Result<impl Stream<Item = ServerSseMessage> + Send + Sync + 'static, Self::Error> {
        let stream = self.inner.create_standalone_stream(id).await?;
        let open = OpenStream::new(&self.directory, id);
        Ok(stream.inspect(move |_| {
            let _ = &open;
        }))
    }

    async fn resume(
        &self,
        id: &SessionId,
        last_event_id: String,
    ) -> Result<impl Stream<Item = ServerSseMessage> + Send + Sync + 'static, Self::Error> {
        let stream = self.inner.resume(id, last_event_id).await?;
        let open = OpenStream::new(&self.directory, id);
        Ok(stream.inspect(move |_| {
            let _ = &open;
        }))
    }
}
