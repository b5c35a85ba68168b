//! One `tools/call` through the face: checked against the caller's grants, audited, run as a
//! streaming broker call (rates, per-caller sessions and timeouts as for gRPC), with what the
//! server sends meanwhile relayed to the client that made the call: progress with the
//! client's own token, log messages at the level it set, elicitation and sampling as
//! requests on the call's own answer stream.

// Sampling is deprecated by MCP 2026-07-28 (SEP-2577) but is what servers use today.
#![expect(
    deprecated,
    reason = "sampling and logging are what clients before MCP 2026-07-28 use"
)]

use std::{sync::atomic::Ordering, time::Instant};

use rmcp::service::RequestContext;
use rmcp::{
    ErrorData, RoleServer,
    model::{
        CallToolRequestParams, CallToolResponse, ClientResult, CreateMessageRequest, ElicitRequest,
        ElicitResult, ElicitationAction, Extensions, LoggingMessageNotification,
        ProgressNotification, ProgressNotificationParam, ProgressToken, RequestMetaObject,
        ServerNotification, ServerRequest,
    },
};
use serde_json::Value;
use tokio::sync::mpsc;
use tracing::Instrument as _;

use super::{
    Face,
    relay::Relay,
    request::{Asker, FaceCaller, incoming_trace, server_span},
};
use crate::{
    conversation::{Answers, Conversation, Interaction},
    core::{
        broker::Called,
        call_audit::{Answered, Draft},
        tool_call::ToolCall,
    },
    domain::{call::RawArguments, request_error::RequestError},
    faces::mcp::model::{
        cache,
        refusal::{Refusal, refused_call},
    },
    faces::mcp::rounds::{self, Running, Turn},
    telemetry::{context::TraceHeaders, semconv},
};

/// Where one call came from and where what happens during it goes.
#[derive(Clone, Copy)]
struct CallSource<'a> {
    /// The request's extensions: its HTTP parts, with the caller the gate admitted.
    extensions: &'a Extensions,
    /// The client's progress token, if it wants progress.
    progress: Option<&'a ProgressToken>,
    /// The way back to the client.
    relay: Relay<'a>,
    /// What the client can answer.
    answers: Answers,
}

impl Face {
    /// One `tools/call` with its `_meta` and the request's `extensions`, in its server span
    /// (continuing the client's trace), with what the server sends meanwhile going to `relay`.
    pub(super) async fn traced_call(
        &self,
        request: CallToolRequestParams,
        meta: &RequestMetaObject,
        extensions: &Extensions,
        relay: Relay<'_>,
        answers: Answers,
    ) -> Result<CallToolResponse, ErrorData> {
        let incoming = incoming_trace(meta, extensions);
        let (span, trace_id) = server_span("tools/call", &incoming);
        span.record("tool", &*request.name);
        let progress = meta.get_progress_token();
        let source = CallSource {
            extensions,
            progress: progress.as_ref(),
            relay,
            answers,
        };
        self.call(request, source, &incoming, trace_id)
            .instrument(span)
            .await
    }

    /// One `tools/call`: checked, audited, run as a streaming broker call with what the
    /// server sends meanwhile relayed to the client.
    async fn call(
        &self,
        request: CallToolRequestParams,
        source: CallSource<'_>,
        incoming: &TraceHeaders,
        trace_id: Option<String>,
    ) -> Result<CallToolResponse, ErrorData> {
        let started = Instant::now();
        let (conversation, mut events) = Conversation::new();
        let conversation = conversation.answering(source.answers);
        let call = self.checked_call(request, source.extensions, incoming, trace_id, conversation);
        tokio::pin!(call);
        let result = loop {
            tokio::select! {
                biased;
                result = &mut call => break result,
                Some(event) = events.recv() => self.relay(source, event).await,
            }
        };
        // Progress and logs sent just before the answer still go first.
        while let Ok(event @ (Interaction::Progress(_) | Interaction::Log(_))) = events.try_recv() {
            self.relay(source, event).await;
        }
        record(&result, started);
        answer_of(result)
    }

    /// One `tools/call` of the caller the request's `extensions` name, checked, run with
    /// `conversation` for what its server sends meanwhile, and audited (its line written before
    /// it returns): the path both a direct call and a task take.
    pub(super) async fn checked_call(
        &self,
        request: CallToolRequestParams,
        extensions: &Extensions,
        incoming: &TraceHeaders,
        trace_id: Option<String>,
        conversation: Conversation,
    ) -> Result<Called, RequestError> {
        let asker = Asker::of(extensions);
        let caller = asker.caller(&self.broker().snapshot().views);
        let arguments = request.arguments.unwrap_or_default();
        let pending = self.calls.audited(|with_arguments| {
            Draft::of(
                Some(caller.key.clone()),
                request.name.to_string(),
                trace_id,
                with_arguments.then(|| Value::Object(arguments.clone())),
            )
        });
        let values = FaceCaller::of(&caller, extensions);
        let result = self
            .calls
            .run(ToolCall {
                name: &request.name,
                arguments: RawArguments {
                    structured: Some(arguments),
                    json: String::new(),
                },
                view: asker.view.as_deref(),
                caller: &caller,
                values: &values,
                timeout: None,
                deadline: None,
                trace: incoming,
                conversation: Some(conversation),
            })
            .await;
        let Some(pending) = pending else {
            return result;
        };
        let commit = pending.commit(result.as_ref().map(|called| Answered {
            is_error: called.result.is_error == Some(true),
            server: called.server.as_str(),
        }));
        commit.settle(result).await
    }

    /// What the upstream server sent during a call, passed on to the MCP client that made it.
    async fn relay(&self, source: CallSource<'_>, event: Interaction) {
        match event {
            Interaction::Log(log) => {
                if log.level as u8 >= self.session.level.load(Ordering::Relaxed) {
                    let notification = LoggingMessageNotification::new(log);
                    source
                        .relay
                        .notify(ServerNotification::LoggingMessageNotification(notification))
                        .await;
                }
            }
            other => relay(source, other).await,
        }
    }
}

/// What a call's client is answered: the tool's result, or the refusal as the one table
/// says.
pub(super) fn answer_of(
    result: Result<Called, RequestError>,
) -> Result<CallToolResponse, ErrorData> {
    match result {
        Ok(mut called) => {
            cache::complete(&mut called.result.result_type, &mut called.result.meta);
            Ok(called.result.into())
        }
        Err(error) => refused_call(Refusal::from(&error)).map(Into::into),
    }
}

/// The call in `mcp.server.operation.duration`, with its `error.type` when it failed (as the
/// client's `CallTool` would be in `rpc.server.call.duration`).
fn record(result: &Result<Called, RequestError>, started: Instant) {
    let error_type = match result {
        Ok(called) if called.result.is_error == Some(true) => "tool_error",
        Ok(_) => "",
        Err(error) => error.class().label,
    };
    metrics::histogram!(
        semconv::MCP_SERVER_OPERATION_DURATION,
        semconv::MCP_METHOD_NAME => "tools/call",
        semconv::ERROR_TYPE => error_type,
    )
    .record(started.elapsed().as_secs_f64());
}

/// Progress and the server's questions, passed on to the MCP client that made the call.
async fn relay(source: CallSource<'_>, event: Interaction) {
    match event {
        Interaction::Progress(progress) => {
            if let Some(token) = source.progress {
                let mut forwarded =
                    ProgressNotificationParam::new(token.clone(), progress.progress);
                forwarded.total = progress.total;
                forwarded.message = progress.message;
                let notification = ProgressNotification::new(forwarded);
                source
                    .relay
                    .notify(ServerNotification::ProgressNotification(notification))
                    .await;
            }
        }
        Interaction::Elicit { params, answer } => {
            let request = ServerRequest::ElicitRequest(ElicitRequest::new(params));
            let result = match source.relay.ask(request).await {
                Some(ClientResult::ElicitResult(result)) => result,
                _ => ElicitResult::new(ElicitationAction::Decline),
            };
            let _ = answer.send(result);
        }
        Interaction::Sample { params, answer } => {
            let request = ServerRequest::CreateMessageRequest(CreateMessageRequest::new(params));
            let result = match source.relay.ask(request).await {
                Some(ClientResult::CreateMessageResult(result)) => Ok(*result),
                Some(other) => Err(format!("the client answered sampling with {other:?}")),
                None => Err("the client did not answer the sampling request".to_owned()),
            };
            let _ = answer.send(result);
        }
        Interaction::Log(_) => {}
    }
}

impl Face {
    /// One `tools/call` of a 2026-07-28 client: its call's questions asked in rounds (see
    /// [`rounds`]).
    pub(super) async fn call_in_rounds(
        &self,
        request: CallToolRequestParams,
        context: &RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let owner = Asker::of(&context.extensions).caller.key;
        let start = |request| self.start_in_rounds(request, context);
        rounds::call_in_rounds(&self.rounds, &owner, request, context, start).await
    }

    /// Starts `request` in a task of its own, which says what it does on the call's turns.
    fn start_in_rounds(
        &self,
        request: CallToolRequestParams,
        context: &RequestContext<RoleServer>,
    ) -> Running {
        let (sender, turns) = mpsc::channel(64);
        let face = self.clone();
        let meta = context.meta.clone();
        let extensions = context.extensions.clone();
        let answers = rounds::answers(context.client_capabilities().as_ref());
        let task = tokio::spawn(async move {
            let relay = Relay::Rounds(&sender);
            let answer = face
                .traced_call(request, &meta, &extensions, relay, answers)
                .await;
            let _ = sender.send(Turn::Done(answer)).await;
        });
        Running::new(turns, task.abort_handle())
    }
}
