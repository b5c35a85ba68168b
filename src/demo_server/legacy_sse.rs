//! A legacy HTTP+SSE server transport (MCP 2024-11-05) for the demo server, which rmcp no longer
//! provides: `GET /sse` opens a session's event stream, whose first event names the endpoint
//! (`/message?sessionId=...`) that the client POSTs its JSON-RPC messages to; answers and
//! notifications come back as `message` events.

use std::{
    collections::HashMap,
    convert::Infallible,
    sync::{
        Arc, Mutex, PoisonError,
        atomic::{AtomicU64, Ordering},
    },
    time::{Duration, SystemTime},
};

use axum::{
    Json, Router,
    extract::{Query, State},
    http::StatusCode,
    response::sse::{Event, KeepAlive, Sse},
    routing::{get, post},
};
use futures::{Stream, StreamExt};
use rmcp::{
    ServiceExt,
    model::{ClientJsonRpcMessage, ServerJsonRpcMessage},
};
use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;
use tokio_util::sync::CancellationToken;

use super::DemoServer;

/// Messages queued per direction and session before the sender waits.
const QUEUE: usize = 64;

/// Open sessions: where each session's POSTed messages go.
#[derive(Clone)]
struct Sessions {
    server: DemoServer,
    /// Ends every event stream (server shutdown).
    stop: CancellationToken,
    open: Arc<Mutex<HashMap<String, mpsc::Sender<ClientJsonRpcMessage>>>>,
    next_id: Arc<AtomicU64>,
}

/// The routes `/sse` and `/message` serving `server`.
/// Cancelling `stop` ends every event stream.
pub fn router(server: DemoServer, stop: CancellationToken) -> Router {
    // Session ids need only be unique here and hard to guess across restarts.
    let seed = SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64);
    let sessions = Sessions {
        server,
        stop,
        open: Arc::default(),
        next_id: Arc::new(AtomicU64::new(seed)),
    };
    Router::new()
        .route("/sse", get(open_stream))
        .route("/message", post(receive))
        .with_state(sessions)
}

/// Removes a session when its event stream is dropped (the client went away), which ends the
/// session's MCP service.
struct Closer {
    sessions: Sessions,
    id: String,
}

impl Drop for Closer {
    fn drop(&mut self) {
        self.sessions.lock().remove(&self.id);
    }
}

impl Sessions {
    fn lock(
        &self,
    ) -> std::sync::MutexGuard<'_, HashMap<String, mpsc::Sender<ClientJsonRpcMessage>>> {
        self.open.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// `GET /sse`: starts a session and streams its endpoint, then its messages.
async fn open_stream(
    State(sessions): State<Sessions>,
) -> Sse<impl Stream<Item = Result<Event, Infallible>>> {
    let id = format!("{:016x}", sessions.next_id.fetch_add(1, Ordering::Relaxed));
    let (to_server, from_client) = mpsc::channel(QUEUE);
    let (to_client, from_server) = futures::channel::mpsc::channel::<ServerJsonRpcMessage>(QUEUE);
    sessions.lock().insert(id.clone(), to_server);
    let server = sessions.server.clone();
    tokio::spawn(async move {
        match server
            .serve((to_client, ReceiverStream::new(from_client)))
            .await
        {
            Ok(running) => {
                let _ = running.waiting().await;
            }
            Err(error) => tracing::info!(%error, "an SSE session ended before initializing"),
        }
    });
    let endpoint = Event::default()
        .event("endpoint")
        .data(format!("/message?sessionId={id}"));
    let stop = sessions.stop.clone().cancelled_owned();
    let closer = Closer { sessions, id };
    let messages = from_server.map(move |message| {
        let _keep_open_while_streaming = &closer;
        let json = serde_json::to_string(&message).unwrap_or_default();
        Ok(Event::default().event("message").data(json))
    });
    let stream = futures::stream::once(async { Ok(endpoint) })
        .chain(messages)
        .take_until(stop);
    Sse::new(stream).keep_alive(KeepAlive::new().interval(Duration::from_secs(15)))
}

/// The query of `POST /message`.
#[derive(serde::Deserialize)]
struct Target {
    #[serde(rename = "sessionId")]
    session_id: String,
}

/// `POST /message?sessionId=...`: hands one JSON-RPC message to its session.
async fn receive(
    State(sessions): State<Sessions>,
    Query(target): Query<Target>,
    Json(message): Json<ClientJsonRpcMessage>,
) -> StatusCode {
    let sender = sessions.lock().get(&target.session_id).cloned();
    match sender {
        Some(sender) if sender.send(message).await.is_ok() => StatusCode::ACCEPTED,
        _ => StatusCode::NOT_FOUND,
    }
}
