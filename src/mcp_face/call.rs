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

use std::{
    sync::atomic::Ordering,
    time::{Duration, Instant},
};

use rmcp::{
    ErrorData, RoleServer,
    model::{
        CallToolRequestParams, CallToolResponse, ClientResult, CreateMessageRequest, ElicitRequest,
        ElicitResult, ElicitationAction, ProgressNotificationParam, ProgressToken, ServerRequest,
    },
    service::RequestContext,
};
use serde_json::{Map, Value};

use super::{
    Face,
    request::{FaceCaller, refused_call},
};
use crate::{
    auth::Caller,
    broker::Called,
    conversation::{Conversation, Interaction},
    domain::{call::RawArguments, request_error::RequestError},
    grpc::call_audit::{Answered, Draft, Pending},
    telemetry::{context::TraceHeaders, semconv},
};

impl Face {
    /// One `tools/call`: checked, audited, run as a streaming broker call with what the
    /// server sends meanwhile relayed to the client.
    pub(super) async fn call(
        &self,
        request: CallToolRequestParams,
        context: &RequestContext<RoleServer>,
        incoming: &TraceHeaders,
        trace_id: Option<String>,
    ) -> Result<CallToolResponse, ErrorData> {
        let caller = self.caller(&context.extensions);
        let arguments = request.arguments.unwrap_or_default();
        let pending = self.audit.as_ref().map(|audit| Pending {
            draft: Some(Draft::of(
                Some(caller.key.id.clone()),
                request.name.to_string(),
                trace_id,
                audit
                    .with_arguments()
                    .then(|| Value::Object(arguments.clone())),
            )),
            audit,
            broker: &self.broker,
        });
        let started = Instant::now();
        let result = self
            .run(&request.name, arguments, &caller, context, incoming)
            .await;
        record(&result, started);
        if let Some(pending) = pending {
            pending.finish_with(result.as_ref().map(|called| Answered {
                is_error: called.result.is_error == Some(true),
                server: called.server.as_str(),
            }));
        }
        match result {
            Ok(called) => Ok(called.result.into()),
            Err(error) => refused_call(error),
        }
    }

    async fn run(
        &self,
        name: &str,
        arguments: Map<String, Value>,
        caller: &Caller,
        context: &RequestContext<RoleServer>,
        incoming: &TraceHeaders,
    ) -> Result<Called, RequestError> {
        if self.shutdown.is_cancelled() {
            return Err(RequestError::ShuttingDown);
        }
        if !caller.may_use(name) {
            return Err(RequestError::PermissionDenied {
                caller: caller.key.id.clone(),
                tool: name.to_owned(),
            });
        }
        let values = FaceCaller::of(caller, context);
        let arguments = RawArguments {
            structured: Some(arguments),
            json: String::new(),
        };
        let (conversation, mut events) = Conversation::new();
        let token = context.meta.get_progress_token();
        let call = self.broker.call(
            name,
            arguments,
            None,
            None,
            incoming,
            &values,
            Some(conversation),
        );
        tokio::pin!(call);
        let result = loop {
            tokio::select! {
                biased;
                result = &mut call => break result,
                Some(event) = events.recv() => self.relay(context, token.as_ref(), event).await,
            }
        };
        // Progress and logs sent just before the answer still go first.
        while let Ok(event @ (Interaction::Progress(_) | Interaction::Log(_))) = events.try_recv() {
            self.relay(context, token.as_ref(), event).await;
        }
        result
    }

    /// What the upstream server sent during a call, passed on to the MCP client that made it.
    async fn relay(
        &self,
        context: &RequestContext<RoleServer>,
        token: Option<&ProgressToken>,
        event: Interaction,
    ) {
        match event {
            Interaction::Log(log) => {
                if log.level as u8 >= self.session.level.load(Ordering::Relaxed) {
                    let _ = context.peer.notify_logging_message(log).await;
                }
            }
            other => relay(context, token, other).await,
        }
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

/// How long a question to the client may wait for its answer before it is declined; the
/// call's own timeout is paused meanwhile, its `max_timeout` still holds.
const QUESTION_TIMEOUT: Duration = Duration::from_secs(600);

/// Progress and the server's questions, passed on to the MCP client that made the call.
async fn relay(
    context: &RequestContext<RoleServer>,
    token: Option<&ProgressToken>,
    event: Interaction,
) {
    match event {
        Interaction::Progress(progress) => {
            if let Some(token) = token {
                let mut forwarded =
                    ProgressNotificationParam::new(token.clone(), progress.progress);
                forwarded.total = progress.total;
                forwarded.message = progress.message;
                let _ = context.peer.notify_progress(forwarded).await;
            }
        }
        Interaction::Elicit { params, answer } => {
            let request = ServerRequest::ElicitRequest(ElicitRequest::new(params));
            let result = match ask(context, request).await {
                Some(ClientResult::ElicitResult(result)) => result,
                _ => ElicitResult::new(ElicitationAction::Decline),
            };
            let _ = answer.send(result);
        }
        Interaction::Sample { params, answer } => {
            let request = ServerRequest::CreateMessageRequest(CreateMessageRequest::new(params));
            let result = match ask(context, request).await {
                Some(ClientResult::CreateMessageResult(result)) => Ok(*result),
                Some(other) => Err(format!("the client answered sampling with {other:?}")),
                None => Err("the client did not answer the sampling request".to_owned()),
            };
            let _ = answer.send(result);
        }
        Interaction::Log(_) => {}
    }
}

/// A request to the client, on the call's own answer stream; `None` if it could not be sent
/// or was not answered in time.
async fn ask(context: &RequestContext<RoleServer>, request: ServerRequest) -> Option<ClientResult> {
    let sent = context.peer.send_request(request);
    match tokio::time::timeout(QUESTION_TIMEOUT, sent).await {
        Ok(Ok(result)) => Some(result),
        Ok(Err(error)) => {
            tracing::debug!(%error, "the MCP client did not take the question");
            None
        }
        Err(_) => None,
    }
}
