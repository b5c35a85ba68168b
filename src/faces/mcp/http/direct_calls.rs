//! `tools/call` and `tools/list` answered by the face itself, on the task of the HTTP
//! connection they came on, for a plain POST in an initialized session (see
//! [`plain_request`](super::plain_request)); every other request goes on to rmcp's
//! streamable HTTP service. A `tools/list` is written straight from the catalog's schema
//! texts (see [`tool_list`]).
//!
//! Through rmcp a call's body is parsed into an untagged enum, the service (with its config)
//! is cloned, and the call passes from the HTTP task to the session's worker, to its service
//! loop, to a task spawned for the handler and back, its answer written as an SSE stream in
//! three writes: the face cost about twice the broker CPU of a gRPC call. Here the answer is
//! one `application/json` response when nothing comes before it; when the server sends
//! progress, a log or a question first, the response is an SSE stream from then on, with
//! the answer last, as rmcp would send it. The client's answers to the questions and its
//! `notifications/cancelled` come through rmcp's session, where
//! [`FaceSessions`](super::face_sessions::FaceSessions) catches them. A direct answer has no
//! event ids: a client that loses the connection cannot resume it, and the call is
//! cancelled, as a gRPC call is.
//!
//! **What would let it go**: rmcp's streamable HTTP service answering a plain call at about the
//! cost of a gRPC call (no per-call service clone, no hops between tasks, one JSON response);
//! re-measure with `loadgen face` after each rmcp upgrade (docs/performance.md, "the MCP face
//! answers its calls itself"). Its seams are property-tested where they decide: which POSTs it
//! takes ([`plain_request`](super::plain_request): what it takes is what rmcp reads), the list
//! it writes ([`tool_list`]: the JSON rmcp would send) and the sessions' record
//! ([`directory`](super::directory): a model of it); the MCP face's integration tests run every
//! path through rmcp's client and the Python and TypeScript SDKs.

use std::{convert::Infallible, pin::Pin, sync::Arc, task::Poll, time::Duration};

use axum::{
    body::Body,
    extract::{Request, State},
    http::{HeaderValue, Method, StatusCode, header, request::Parts},
    middleware::Next,
    response::{IntoResponse as _, Response},
};
use futures::{Stream, StreamExt as _};
use http_body_util::BodyExt as _;
use rmcp::{
    model::{CallToolResponse, Extensions, RequestId, ServerJsonRpcMessage, ServerResult},
    transport::streamable_http_server::SessionId,
};
use sse_stream::{KeepAlive, Sse, SseBody, Timer};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use crate::conversation::Answers;

use super::{
    Face,
    directory::Directory,
    plain_request::{self, PlainCall},
    relay::{AnswerStream, Relay},
    request::Asker,
    tool_list,
};

/// How often an SSE answer that is still running sends a comment, so that proxies keep it.
const KEEP_ALIVE: Duration = Duration::from_secs(15);

/// What the face needs to answer calls itself.
#[derive(Clone)]
pub struct DirectCalls {
    /// The face (its per-session state comes from the directory).
    pub face: Face,
    /// Cancelled when the face closes: running answers end.
    pub closing: CancellationToken,
    /// Whether the face is bound to loopback (only loopback hosts are accepted then).
    pub loopback: bool,
}

/// Answers a plain `tools/call` POST of an initialized session; passes anything else on.
pub async fn answer_directly(
    State(direct): State<DirectCalls>,
    request: Request,
    next: Next,
) -> Response {
    if request.method() != Method::POST {
        return next.run(request).await;
    }
    let Some(session) = plain_request::session_of(request.headers(), direct.loopback) else {
        return next.run(request).await;
    };
    let (parts, body) = request.into_parts();
    let body = match body.collect().await {
        Ok(body) => body.to_bytes(),
        Err(error) => {
            let message = format!("Bad Request: the body could not be read: {error}");
            return (StatusCode::BAD_REQUEST, message).into_response();
        }
    };
    let call = plain_request::call_of(&body);
    let started = call.as_ref().and_then(|call| {
        let directory = &direct.face.directory;
        directory.start_call(&session, &call.id)
    });
    match (call, started) {
        (Some(call), Some((state, cancel))) => {
            let mut extensions = Extensions::new();
            extensions.insert(parts);
            let face = direct.face.with_session(state);
            direct.answer(face, session, call, extensions, cancel).await
        }
        (Some(_), None) => next.run(Request::from_parts(parts, Body::from(body))).await,
        (None, _) => match direct.list(&session, &parts, &body) {
            Some(response) => response,
            None => next.run(Request::from_parts(parts, Body::from(body))).await,
        },
    }
}

impl DirectCalls {
    /// The answer to a POST of `session` whose `body` is a plain `tools/list`; `None` for
    /// rmcp to answer: not such a request, a session not initialized, or a cursor refused
    /// (rmcp's handler refuses it the same way).
    fn list(&self, session: &SessionId, parts: &Parts, body: &[u8]) -> Option<Response> {
        let list = plain_request::list_of(body)?;
        if !self.face.directory.in_session(session) {
            return None;
        }
        let snapshot = self.face.broker().snapshot();
        let caller = Asker::of_parts(Some(parts)).caller(&snapshot.views);
        let tools = snapshot.catalog.tools();
        let page = tool_list::page(tools, &caller, list.cursor(), tool_list::PAGE_BYTES).ok()?;
        Some(list_response(tool_list::ToolsListAnswer::new(
            page, &list.id,
        )))
    }

    /// Runs `call` of `session` for the request whose `extensions` these are, and answers it;
    /// `cancel` is cancelled by the client's `notifications/cancelled`.
    async fn answer(
        &self,
        face: Face,
        session: SessionId,
        call: PlainCall,
        extensions: Extensions,
        cancel: CancellationToken,
    ) -> Response {
        let (sender, mut receiver) = mpsc::unbounded_channel();
        let directory = face.directory.clone();
        let ended = CallEnd {
            directory: directory.clone(),
            session: session.clone(),
            request: call.id.clone(),
        };
        let answers = AnswerStream::new(sender, directory, session);
        let closing = self.closing.clone();
        let work = async move {
            let _ended = ended;
            let PlainCall { id, mut params, .. } = call;
            let meta = params.meta.take().unwrap_or_default();
            let relay = Relay::Stream(&answers);
            // The session's client is asked whatever it declared (its stream answers for it).
            let call = face.traced_call(params, &meta, &extensions, relay, Answers::ALL);
            // A call the client cancelled gets no answer, as the spec asks of its receiver;
            // one still running when the face closes gets none either.
            let answered = tokio::select! {
                () = cancel.cancelled() => None,
                () = closing.cancelled() => None,
                answer = call => Some(answer),
            };
            if let Some(answer) = answered {
                let message = match answer {
                    Ok(response) => ServerJsonRpcMessage::response(legacy(response), id),
                    Err(error) => ServerJsonRpcMessage::error(error, Some(id)),
                };
                answers.finish(message);
            }
        };
        let mut work = Box::pin(work);
        let mut done = false;
        // The first thing to send decides the response: the answer alone, or a stream.
        let first = loop {
            tokio::select! {
                message = receiver.recv() => break message,
                () = &mut work, if !done => done = true,
            }
        };
        match first {
            Some(answer @ (ServerJsonRpcMessage::Response(_) | ServerJsonRpcMessage::Error(_))) => {
                json_response(&answer)
            }
            first => {
                let messages = futures::stream::poll_fn(move |cx| receiver.poll_recv(cx));
                let running = futures::stream::once(async move {
                    if !done {
                        work.await;
                    }
                })
                .filter_map(|()| async { None });
                let rest = futures::stream::select(messages, running);
                let all = futures::stream::iter(first).chain(rest);
                sse_response(all.take_until(self.closing.clone().cancelled_owned()))
            }
        }
    }
}

/// A call's answer in the shape rmcp gives sessions of the protocol versions answered
/// directly (2025-06-18 and 2025-11-25, see [`plain_request`]): without 2026-07-28's
/// `resultType` and non-object structured output, so that a refusal reads the same whichever
/// way the face answers it.
fn legacy(response: CallToolResponse) -> ServerResult {
    let mut result = ServerResult::from(response);
    result.strip_result_type_for_legacy_peer();
    result.strip_non_object_output_for_legacy_peer();
    result
}

/// One JSON-RPC message as the whole response.
fn json_response(message: &ServerJsonRpcMessage) -> Response {
    match serde_json::to_vec(message) {
        Ok(json) => json_body(Body::from(json)),
        Err(error) => not_written(&error),
    }
}

/// A `tools/list` answer as the response: one body of known length if it is one piece (sent
/// with the headers in one write), else the pieces as the connection takes them.
fn list_response(answer: serde_json::Result<tool_list::ToolsListAnswer>) -> Response {
    let mut answer = match answer {
        Ok(answer) => answer,
        Err(error) => return not_written(&error),
    };
    match answer.next() {
        Some(Ok(first)) if answer.is_done() => json_body(Body::from(first)),
        Some(Ok(first)) => {
            let pieces = std::iter::once(Ok(first)).chain(answer);
            json_body(Body::from_stream(futures::stream::iter(pieces)))
        }
        Some(Err(error)) => not_written(&error),
        None => StatusCode::INTERNAL_SERVER_ERROR.into_response(),
    }
}

/// `body` as an `application/json` response.
fn json_body(body: Body) -> Response {
    let mut response = Response::new(body);
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    response
}

/// The answer to a request whose answer could not be serialized.
fn not_written(error: &serde_json::Error) -> Response {
    tracing::warn!(%error, "a face answer could not be serialized");
    StatusCode::INTERNAL_SERVER_ERROR.into_response()
}

/// JSON-RPC messages as an SSE stream, one event each, with keep-alive comments.
fn sse_response(messages: impl Stream<Item = ServerJsonRpcMessage> + Send + 'static) -> Response {
    let events = messages.map(|message| {
        let data = serde_json::to_string(&message).unwrap_or_default();
        Ok::<_, Infallible>(Sse::default().data(data))
    });
    let body = SseBody::new(events).with_keep_alive::<Tick>(KeepAlive::new().interval(KEEP_ALIVE));
    let mut response = Response::new(Body::new(body));
    let headers = response.headers_mut();
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/event-stream"),
    );
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    response
}

/// tokio's sleep as the SSE body's keep-alive timer.
struct Tick(Pin<Box<tokio::time::Sleep>>);

impl Future for Tick {
    type Output = ();

    fn poll(mut self: Pin<&mut Self>, cx: &mut std::task::Context<'_>) -> Poll<()> {
        self.0.as_mut().poll(cx)
    }
}

impl Timer for Tick {
    fn reset(mut self: Pin<&mut Self>, instant: std::time::Instant) {
        self.0.as_mut().reset(instant.into());
    }

    fn from_duration(duration: Duration) -> Self {
        Self(Box::pin(tokio::time::sleep(duration)))
    }
}

/// Ends a direct call in the directory however it ends (answered, cancelled, dropped).
struct CallEnd {
    directory: Arc<Directory>,
    session: SessionId,
    request: RequestId,
}

impl Drop for CallEnd {
    fn drop(&mut self) {
        self.directory.end_call(&self.session, &self.request);
    }
}
