//! [`Upstream`], the handle calls go through: one `tools/call` on a server's shared session,
//! traced as an MCP client span, measured, given up after its timeout (restarted by progress
//! for a streaming call), and cancelled on the server when the caller goes away.

use std::{
    sync::Arc,
    time::{Duration, Instant},
};

use futures::future::Either;
use rmcp::{
    RoleClient,
    model::{
        CallToolRequest, CallToolRequestParams, CallToolResult, CancelledNotificationParam,
        ClientRequest, ErrorCode, RequestId, RequestMetaObject, ServerResult,
        SubscribeRequestParams, UnsubscribeRequestParams,
    },
    service::{Peer, PeerRequestOptions, ServiceError},
};
use serde_json::{Map, Value};
use tracing::{Instrument as _, Span, field};

use crate::upstream::{
    pool::Pool,
    pool::balance::{Replica, least_busy},
    pool::slots::Slots,
    session::classify::{classify, lacked_token, not_a_tool_result},
    session::interactions::Registration,
    session::link::Link,
    session::listen::Unconfirmed,
    session::rounds::{MAX_ROUNDS, Stateless},
    transport::stdio::call_lane::ServerAnswer,
};
use crate::{
    conversation::{Conversation, Pulse},
    domain::{
        call::Timing,
        caller::{CallerKey, CallerValues},
        names::{ServerName, ToolName},
        outcome::{OAuthFailure, StreamFault},
        request_error::{Aftermath, RequestError},
    },
    telemetry::{self, context::TraceHeaders, semconv},
};

/// How much of the arguments and result a span records (with `record_arguments`).
const RECORDED_CHARS: usize = 1024;

/// A cheap, cloneable handle for calling the tools of one connected server. Calls share the
/// sessions of its ready replicas (one, unless `replicas` says more), multiplexed by request id.
#[derive(Clone, Debug)]
pub struct Upstream {
    pub(in crate::upstream) server: ServerName,
    /// The ready replicas' sessions (never empty); each call goes to the least busy.
    pub(in crate::upstream) replicas: Arc<[Replica]>,
    pub(in crate::upstream) timeout: Duration,
    /// The longest a streaming call may be kept alive by progress.
    pub(in crate::upstream) max_timeout: Duration,
    /// What the client span says about the connection; replicas run the same program, so one
    /// replica's link describes them all.
    pub(in crate::upstream) link: Link,
    /// The server's call slots and queue, shared by its replicas (a per-caller server's
    /// callers have theirs in the pool).
    pub(in crate::upstream) slots: Arc<Slots>,
    /// A per-caller server's callers' sessions: calls go there, not to the replicas (which
    /// then hold the session that lists the tools).
    pub(in crate::upstream) pool: Option<Arc<Pool>>,
    /// `limits.max_result_bytes`, for messages.
    pub(in crate::upstream) max_result_bytes: usize,
}

impl Upstream {
    /// The server's configured call timeout.
    pub fn timeout(&self) -> Duration {
        self.timeout
    }

    /// The server's name.
    pub fn server(&self) -> &ServerName {
        &self.server
    }

    /// The server's configured `max_timeout`.
    pub fn max_timeout(&self) -> Duration {
        self.max_timeout
    }

    /// Whether the server announced the `resources` capability at initialize; `None` when
    /// its session does not say (then it is asked, and its answer tells).
    pub fn offers_resources(&self) -> Option<bool> {
        // Replicas run the same program: one's capabilities are all's.
        let info = self.replicas.first()?.peer.peer_info()?;
        Some(info.capabilities.resources.is_some())
    }

    /// How many per-caller sessions are open (none for a shared server).
    pub fn caller_sessions(&self) -> Option<usize> {
        self.pool.as_ref().map(|pool| pool.sessions())
    }

    /// Calls `tool` and waits as `timing` allows. When the time is up or this future is
    /// dropped (the caller went away), the server is sent `notifications/cancelled`. The
    /// request carries the trace context of its client span (or the caller's, see
    /// [`TraceHeaders::for_request`]). A streaming call's `conversation` receives what the
    /// server sends during the call.
    pub async fn call(
        &self,
        tool: &ToolName,
        arguments: Map<String, Value>,
        timing: Timing,
        trace: &TraceHeaders,
        caller: &dyn CallerValues,
        conversation: Option<Conversation>,
    ) -> Result<CallToolResult, RequestError> {
        let span = self.client_span(tool);
        if telemetry::recording_arguments() {
            span.record(
                "gen_ai.tool.call.arguments",
                truncated(&Value::Object(arguments.clone())),
            );
        }
        let mut meta = RequestMetaObject::default();
        TraceHeaders::for_request(trace, &span).write_to(&mut meta);
        let params = CallToolRequestParams::new(tool.as_str().to_owned()).with_arguments(arguments);
        let started = Instant::now();
        let result = self
            .on_replica(caller, async |replica: &Replica| {
                let _in_flight = InFlight::new(&self.server);
                let asked = Asked {
                    conversation,
                    caller: caller.key(),
                };
                let result = self.send(replica, params, meta, timing, asked, &span).await;
                if matches!(
                    &result,
                    Err(RequestError::SessionLost { .. }
                        | RequestError::ResultTooLarge {
                            aftermath: Aftermath::SessionDropped,
                            ..
                        }
                        | RequestError::Authorization {
                            failure: OAuthFailure::Refused { .. }
                                | OAuthFailure::Token { .. }
                                | OAuthFailure::Discovery(_)
                                | OAuthFailure::Key { .. }
                                | OAuthFailure::Store { .. }
                                | OAuthFailure::NotLoggedIn(_)
                                | OAuthFailure::LoginExpired { .. },
                            ..
                        })
                ) {
                    // The supervisor checks the session is alive (an HTTP server pings).
                    replica.suspect.notify_one();
                }
                result
            })
            .instrument(span.clone())
            .await;
        let error_type = match &result {
            Ok(result) if result.is_error == Some(true) => Some("tool_error"),
            Ok(_) => None,
            Err(error) => Some(error.class().label),
        };
        self.record(&span, tool, &result, error_type, started.elapsed());
        result
    }

    /// Sends one request other than a tool call (`resources/read`, `prompts/get`) on the
    /// session `caller`'s calls go to, taking a call slot, within `timeout`; the server is told
    /// to cancel it if this future is dropped or the time runs out.
    pub async fn request(
        &self,
        caller: &dyn CallerValues,
        request: ClientRequest,
        timeout: Duration,
    ) -> Result<ServerResult, RequestError> {
        self.on_replica(caller, async |replica: &Replica| {
            self.request_on(replica, caller.key(), request, timeout)
                .await
        })
        .await
    }

    /// Starts (`on`) or stops following the resource `uri` on the session `caller`'s requests
    /// go to: `resources/subscribe` or `unsubscribe` on a session before 2026-07-28, the
    /// session's listen stream on one after.
    #[expect(
        deprecated,
        reason = "servers before MCP 2026-07-28 take resources/subscribe"
    )]
    pub async fn follow_resource(
        &self,
        caller: &dyn CallerValues,
        uri: &str,
        on: bool,
    ) -> Result<(), RequestError> {
        self.on_replica(caller, async |replica: &Replica| {
            if let Some(stateless) = &replica.stateless {
                let Some(generation) = stateless.watched.set(uri, on).filter(|_| on) else {
                    return Ok(());
                };
                // Subscribed once the server acknowledged a stream asking for it.
                return match stateless.watched.confirmed(generation, self.timeout).await {
                    Ok(()) => Ok(()),
                    Err(Unconfirmed::Late) => Err(RequestError::Timeout {
                        server: self.server.clone(),
                        after: self.timeout,
                    }),
                    Err(Unconfirmed::Refused) => Err(RequestError::ServerError {
                        server: self.server.clone(),
                        code: ErrorCode::METHOD_NOT_FOUND.0,
                        message: "it takes no subscriptions/listen".into(),
                    }),
                };
            }
            let request = if on {
                ClientRequest::SubscribeRequest(rmcp::model::SubscribeRequest::new(
                    SubscribeRequestParams::new(uri),
                ))
            } else {
                ClientRequest::UnsubscribeRequest(rmcp::model::UnsubscribeRequest::new(
                    UnsubscribeRequestParams::new(uri),
                ))
            };
            self.request_on(replica, caller.key(), request, self.timeout)
                .await
                .map(drop)
        })
        .await
    }

    /// Sends `request` of `caller` on `replica` and waits `timeout` for its answer; the server
    /// is told to cancel it if this future is dropped or the time runs out.
    pub(super) async fn request_on(
        &self,
        replica: &Replica,
        caller: &CallerKey,
        request: ClientRequest,
        timeout: Duration,
    ) -> Result<ServerResult, RequestError> {
        // Counted before it goes out: what the server sends during it is not another
        // caller's streaming call's.
        let mut registration = replica.interactions.begin(None, Some(caller));
        let mut options = PeerRequestOptions::no_options();
        if let Some(stateless) = &replica.stateless {
            // No client to ask: the server must not count on one (it answers without, or
            // its `input_required` is not a result this request takes).
            let mut meta = RequestMetaObject::default();
            stateless.stamp(&mut meta, None);
            options = options.with_meta(meta);
        }
        let handle = replica
            .peer
            .send_request_with_option(request, options)
            .await
            .map_err(|e| self.classify(replica, None, e))?;
        let id = handle.id.clone();
        let mut guard = CancelOnDrop::new(&replica.peer, id.clone());
        let Ok(answer) = tokio::time::timeout(timeout, handle.await_response()).await else {
            return Err(RequestError::Timeout {
                server: self.server.clone(),
                after: timeout,
            });
        };
        guard.disarm();
        registration.answered();
        answer.map_err(|e| self.classify(replica, Some(&id), e))
    }

    /// Runs `send` on the session `caller`'s requests go to (the caller's own on a per-caller
    /// server, else the least busy replica) once one of the call slots is free (the server's,
    /// or on a per-caller server the caller's own); the replica is chosen only then, so queued
    /// calls count nowhere.
    async fn on_replica<T>(
        &self,
        caller: &dyn CallerValues,
        send: impl AsyncFnOnce(&Replica) -> Result<T, RequestError>,
    ) -> Result<T, RequestError> {
        let (_slot, _lease, owned);
        let replica = match &self.pool {
            Some(pool) => {
                // Boxed: it may start a session, a large future only per-caller calls need.
                (_lease, owned) = Box::pin(pool.replica_for(caller)).await?;
                least_busy(std::slice::from_ref(&owned))
            }
            None => {
                _slot = self.slots.take(&self.server).await?;
                least_busy(&self.replicas)
            }
        }
        .expect("a ready server has a replica");
        send(&replica).await
    }

    /// The MCP client span, named `{mcp.method.name} {target}` as the MCP semantic conventions
    /// say (https://opentelemetry.io/docs/specs/semconv/gen-ai/mcp/), with their attributes.
    fn client_span(&self, tool: &ToolName) -> Span {
        let span = tracing::info_span!(
            target: "toolbroker::mcp",
            "mcp",
            otel.name = format!("tools/call {tool}"),
            otel.kind = "client",
            otel.status_code = field::Empty,
            mcp.method.name = "tools/call",
            mcp.protocol.version = self.link.protocol.as_str(),
            jsonrpc.request.id = field::Empty,
            gen_ai.operation.name = "execute_tool",
            gen_ai.tool.name = tool.as_str(),
            gen_ai.tool.call.arguments = field::Empty,
            gen_ai.tool.call.result = field::Empty,
            network.transport = self.link.network,
            server.address = field::Empty,
            server.port = field::Empty,
            error.type = field::Empty,
            toolbroker.server = self.server.as_str(),
        );
        if let Some((host, port)) = &self.link.address {
            span.record("server.address", host.as_str());
            span.record("server.port", port);
        }
        span
    }

    /// Sends the request and waits for its answer, both within the call's timeout (a server
    /// that does not read its stdin holds the write up); the server is told to cancel it if
    /// this future is dropped or the time runs out once the request went out (the lane's
    /// [`Sent`](crate::upstream::transport::stdio::call_lane::Sent) does so itself, and withdraws a request not yet
    /// written). On 2026-07-28 the request declares what its client can answer, and a server
    /// that asks for input gets it in rounds ([`rounds`](super::rounds)).
    async fn send(
        &self,
        replica: &Replica,
        params: CallToolRequestParams,
        mut meta: RequestMetaObject,
        timing: Timing,
        asked: Asked<'_>,
        span: &Span,
    ) -> Result<CallToolResult, RequestError> {
        let Asked {
            conversation,
            caller,
        } = asked;
        let pulse = conversation.as_ref().map(|c| c.pulse_handle());
        // Registered before the request goes out: the server may ask back at once.
        let mut registration = replica
            .interactions
            .begin(conversation.clone(), Some(caller));
        let deadline = tokio::time::sleep(timing.timeout);
        tokio::pin!(deadline);
        let mut round = Round {
            replica,
            registration: &mut registration,
            deadline: deadline.as_mut(),
            pulse: pulse.as_deref(),
            timing,
            span,
        };
        let Some(stateless) = &replica.stateless else {
            let answer = self.round(&mut round, params, meta).await?;
            return self.tool_result(answer);
        };
        let hard = Instant::now() + timing.max;
        stateless.stamp(&mut meta, conversation.as_ref().map(Conversation::answers));
        let mut again = params.clone();
        let mut sending = params;
        for rounds in 1.. {
            let answer = self.round(&mut round, sending, meta.clone()).await?;
            let input = match answer {
                ServerResult::InputRequiredResult(input) => input,
                ServerResult::CreateTaskResult(created) => {
                    let following = Following {
                        replica,
                        stateless,
                        conversation: conversation.as_ref(),
                        caller,
                    };
                    let ends = Ends { hard, timing };
                    return self.follow_task(following, created, ends).await;
                }
                answer => return self.tool_result(answer),
            };
            if rounds > MAX_ROUNDS {
                return Err(RequestError::BadResult {
                    server: self.server.clone(),
                    reason: format!("it asked for input {rounds} times in one call"),
                });
            }
            let requests = input.input_requests.unwrap_or_default();
            let answering = stateless.answer(requests, conversation.as_ref());
            let answers = tokio::time::timeout_at(hard.into(), answering)
                .await
                .map_err(|_| self.timed_out(timing))?
                .map_err(|reason| RequestError::InputNotGiven {
                    server: self.server.clone(),
                    reason,
                })?;
            again.input_responses = (!answers.is_empty()).then_some(answers);
            // Echoed as it came, byte for byte (a `String` never re-encoded).
            again.request_state = input.request_state;
            sending = again.clone();
        }
        unreachable!("the rounds end by a return")
    }

    /// One request of a call and its answer (a result or a JSON-RPC error), within the call's
    /// time.
    async fn round(
        &self,
        round: &mut Round<'_, '_>,
        params: CallToolRequestParams,
        meta: RequestMetaObject,
    ) -> Result<ServerResult, RequestError> {
        let replica = round.replica;
        round.registration.resent();
        let sending = start(replica, params, meta, round.registration);
        let (id, response, mut guard) = tokio::select! {
            biased;
            sent = sending => sent.map_err(|e| self.classify(replica, None, e))?,
            () = &mut round.deadline => return Err(self.timed_out(round.timing)),
        };
        round.span.record("jsonrpc.request.id", field::display(&id));
        let answer = match round.pulse {
            None => tokio::select! {
                biased;
                answer = response => Some(answer),
                () = &mut round.deadline => None,
            },
            Some(pulse) => pulse.within(round.timing, response).await,
        };
        let Some(answer) = answer else {
            return Err(self.timed_out(round.timing));
        };
        if let Some(guard) = &mut guard {
            guard.disarm();
        }
        round.registration.answered();
        answer.map_err(|e| self.classify(replica, Some(&id), e))
    }

    /// The tool result a final answer holds.
    fn tool_result(&self, answer: ServerResult) -> Result<CallToolResult, RequestError> {
        match answer {
            ServerResult::CallToolResult(result) => Ok(result),
            // Some servers answer a tool with no output with `{}`.
            ServerResult::EmptyResult(_) => Ok(CallToolResult::default()),
            _ => Err(not_a_tool_result(&self.server)),
        }
    }

    /// The call's time ran out.
    pub(super) fn timed_out(&self, timing: Timing) -> RequestError {
        RequestError::Timeout {
            server: self.server.clone(),
            after: timing.timeout,
        }
    }

    /// What a failed request means, with what the session's transport knows of it: an answer
    /// refused for its size, or a session whose stream was cut for a message over the limit,
    /// is the result's fault (RESOURCE_EXHAUSTED), not just a lost connection.
    fn classify(
        &self,
        replica: &Replica,
        id: Option<&RequestId>,
        error: ServiceError,
    ) -> RequestError {
        let too_large = |aftermath| RequestError::ResultTooLarge {
            server: self.server.clone(),
            limit: self.max_result_bytes,
            aftermath,
        };
        if id.is_some_and(|id| replica.faults.oversized.take(id)) {
            return too_large(Aftermath::SessionGoesOn);
        }
        if lacked_token(&error)
            && let Some(failure) = replica.faults.auth.get()
        {
            return RequestError::Authorization {
                server: self.server.clone(),
                failure,
            };
        }
        match classify(&self.server, self.max_result_bytes, error) {
            RequestError::SessionLost { .. }
                if matches!(replica.faults.stream.fault(), Some(StreamFault::TooLong(_))) =>
            {
                too_large(Aftermath::SessionDropped)
            }
            other => other,
        }
    }

    /// Finishes the span and the `mcp.client.operation.duration` histogram.
    fn record(
        &self,
        span: &Span,
        tool: &ToolName,
        result: &Result<CallToolResult, RequestError>,
        error_type: Option<&'static str>,
        elapsed: Duration,
    ) {
        if let Some(kind) = error_type {
            span.record("error.type", kind);
            span.record("otel.status_code", "ERROR");
        }
        if telemetry::recording_arguments()
            && let Ok(result) = result
            && let Ok(json) = serde_json::to_value(result)
        {
            span.record("gen_ai.tool.call.result", truncated(&json));
        }
        let mut labels = vec![
            (semconv::MCP_METHOD_NAME, "tools/call".to_owned()),
            (semconv::GEN_AI_TOOL_NAME, tool.to_string()),
            (semconv::SERVER, self.server.to_string()),
        ];
        if let Some(kind) = error_type {
            labels.push((semconv::ERROR_TYPE, kind.to_owned()));
        }
        metrics::histogram!(semconv::MCP_CLIENT_OPERATION_DURATION, &labels)
            .record(elapsed.as_secs_f64());
    }
}

/// Sends the request on the replica's lane (a stdio session's) or through rmcp: its id, its
/// answer to come, and for rmcp a guard that cancels it if dropped (the lane's call does that
/// itself).
async fn start(
    replica: &Replica,
    params: CallToolRequestParams,
    meta: RequestMetaObject,
    registration: &Registration<'_>,
) -> Result<
    (
        RequestId,
        impl Future<Output = ServerAnswer>,
        Option<CancelOnDrop>,
    ),
    ServiceError,
> {
    Ok(match &replica.lane {
        Some(lane) => {
            let mut sent = lane.send(params, meta).await?;
            registration.sent(&sent.id, &sent.progress);
            let id = sent.id.clone();
            (id, Either::Left(async move { sent.answer().await }), None)
        }
        None => {
            let request = ClientRequest::CallToolRequest(CallToolRequest::new(params));
            // Given as the request's meta (not the params'), rmcp merges it with its own keys.
            let options = PeerRequestOptions::no_options().with_meta(meta);
            // rmcp's request futures are kilobytes: boxed, they are not copied at every await
            // of every future above this one (docs/performance.md, round one, "Large futures").
            let handle = Box::pin(replica.peer.send_request_with_option(request, options)).await?;
            registration.sent(&handle.id, &handle.progress_token);
            let id = handle.id.clone();
            let guard = CancelOnDrop::new(&replica.peer, id.clone());
            let response = Box::pin(handle.await_response());
            (id, Either::Right(response), Some(guard))
        }
    })
}

/// What every request of one call shares: its session, its registration, and its time.
struct Round<'r, 'a> {
    replica: &'r Replica,
    registration: &'r mut Registration<'a>,
    /// The unary call's timeout (a streaming call's is its pulse's).
    deadline: std::pin::Pin<&'r mut tokio::time::Sleep>,
    pulse: Option<&'r Pulse>,
    timing: Timing,
    span: &'r Span,
}

/// Where a task is followed from: the session it lives on and the call's client.
pub(super) struct Following<'a> {
    pub replica: &'a Replica,
    pub stateless: &'a Stateless,
    pub conversation: Option<&'a Conversation>,
    pub caller: &'a CallerKey,
}

/// When following must stop: the call's hard end, and its timing (for the error).
pub(super) struct Ends {
    pub hard: Instant,
    pub timing: Timing,
}

/// Who a call's server may ask back: the streaming call's client (if any), for `caller`.
struct Asked<'a> {
    conversation: Option<Conversation>,
    caller: &'a CallerKey,
}

/// JSON text cut to `RECORDED_CHARS` characters.
fn truncated(value: &Value) -> String {
    let mut text = value.to_string();
    if let Some((cut, _)) = text.char_indices().nth(RECORDED_CHARS) {
        text.truncate(cut);
        text.push('…');
    }
    text
}

/// Counts a call in `toolbroker_calls_in_flight` while it lives.
struct InFlight(metrics::Gauge);

impl InFlight {
    fn new(server: &ServerName) -> Self {
        let gauge =
            metrics::gauge!("toolbroker_calls_in_flight", semconv::SERVER => server.to_string());
        gauge.increment(1.0);
        Self(gauge)
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        self.0.decrement(1.0);
    }
}

/// Sends `notifications/cancelled` for a request whose answer nobody will read.
struct CancelOnDrop {
    peer: Peer<RoleClient>,
    id: Option<RequestId>,
}

impl CancelOnDrop {
    fn new(peer: &Peer<RoleClient>, id: RequestId) -> Self {
        Self {
            peer: peer.clone(),
            id: Some(id),
        }
    }

    fn disarm(&mut self) {
        self.id = None;
    }
}

impl Drop for CancelOnDrop {
    fn drop(&mut self) {
        let Some(id) = self.id.take() else {
            return;
        };
        let peer = self.peer.clone();
        let reason = Some(crate::upstream::transport::stdio::call_lane::GAVE_UP.to_owned());
        // Drop cannot await; the notification goes out from a short task of its own.
        tokio::spawn(async move {
            let _ = peer
                .notify_cancelled(CancelledNotificationParam::new(Some(id), reason))
                .await;
        });
    }
}
