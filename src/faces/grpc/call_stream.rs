//! CallToolStream: a call whose client sees what happens during it (progress, the server's
//! elicitation and sampling requests, which it answers on the same stream) and then its result.
//! The call runs in a task of its own that ends when the result is sent or the client goes
//! away; dropping the call then cancels it on the server.

// Sampling is deprecated by MCP 2026-07-28 (SEP-2577) but is what servers use today.
#![expect(
    deprecated,
    reason = "sampling is what servers before MCP 2026-07-28 use"
)]

use std::{
    collections::HashMap,
    future::Future,
    pin::Pin,
    sync::Arc,
    task::{Context, Poll},
    time::Instant,
};

use futures::{Stream, StreamExt as _};
use rmcp::model::{
    CreateMessageRequestParams, CreateMessageResult, ElicitRequestParams, ElicitResult,
    ElicitationAction, LoggingMessageNotificationParam, ProgressNotificationParam,
};
use tokio::sync::{mpsc, oneshot};
use tonic::{Code, Request, Response, Status, Streaming};
use tracing::Instrument as _;

use super::{
    audit_draft,
    broker_service::{BrokerService, PreparedCall, refused},
    messages, observe,
};
use crate::{
    conversation::{Conversation, Interaction},
    domain::request_error::RequestError,
    proto::{
        self, call_tool_stream_request::Message as Inbound,
        call_tool_stream_response::Event as Outbound,
    },
};

/// The stream type of CallToolStream.
pub type CallStream =
    Pin<Box<dyn Stream<Item = Result<proto::CallToolStreamResponse, Status>> + Send>>;

/// The RPC's name, as metrics and spans give it.
const METHOD: &str = "CallToolStream";

/// Messages to the client that may wait to be sent; the call waits when the client is slower.
const OUTBOUND_BUFFER: usize = 16;

type Sent = Result<proto::CallToolStreamResponse, Status>;

/// Reads the call (the first message), checks it, and starts it; the response streams its
/// events and result.
pub async fn open(
    service: Arc<BrokerService>,
    request: Request<Streaming<proto::CallToolStreamRequest>>,
) -> Result<Response<CallStream>, Status> {
    let started = Instant::now();
    let (metadata, extensions, mut inbound) = request.into_parts();
    let within = service.first_message_timeout;
    let first = tokio::time::timeout(within, inbound.message()).await;
    let call = match first {
        Ok(Ok(Some(proto::CallToolStreamRequest {
            message: Some(Inbound::Call(call)),
        }))) => call,
        Ok(Err(status)) => return Err(status),
        late_or_wrong => {
            let error = match late_or_wrong {
                Err(_) => RequestError::FirstMessageLate(within),
                Ok(_) => RequestError::InvalidArguments(
                    "the first message of a CallToolStream must be `call` (a CallToolRequest)"
                        .into(),
                ),
            };
            let status = refused(error);
            observe::record(METHOD, status.code(), started);
            return Err(status);
        }
    };
    let draft = service
        .calls
        .audit()
        .map(|audit| audit_draft::draft(&call, &metadata, &extensions, audit.with_arguments()));
    let (out, receiver) = mpsc::channel(OUTBOUND_BUFFER);
    let driver = async move {
        let pending = draft.and_then(|draft| service.calls.audited(|_| draft));
        let result = match service.prepare(metadata, extensions, call) {
            Ok(prepared) => run(&service, prepared, inbound, &out).await,
            Err(error) => Some(Err(error)),
        };
        // None: the client went away; the audit line says CANCELLED (on drop).
        let Some(mut result) = result else {
            observe::record(METHOD, Code::Cancelled, started);
            return;
        };
        if let Some(pending) = pending {
            // Written before the result is sent.
            result = audit_draft::finish(pending, result).await;
        }
        let last = match result {
            Ok(response) => Ok(event(Outbound::Result(response))),
            Err(error) => Err(refused(error)),
        };
        let code = last.as_ref().map_or_else(Status::code, |_| Code::Ok);
        observe::record(METHOD, code, started);
        let _ = out.send(last).await;
    }
    .instrument(tracing::Span::current());
    // The response starts with its first event, so that its headers go out with it (one write
    // for a call with no events, as for CallTool); a refusal is the whole answer.
    let mut events = Driven {
        driver: Some(Box::pin(driver)),
        receiver,
    };
    match events.next().await {
        Some(Err(status)) => Err(status),
        Some(Ok(first)) => Ok(Response::new(Box::pin(
            futures::stream::once(async { Ok(first) }).chain(events),
        ))),
        None => Err(Status::cancelled("the call ended without an answer")),
    }
}

/// The call's events, with the call itself driven by whoever reads them (no task of its own:
/// one hand-off less per call). Dropping it drops the call, which cancels it on the server.
struct Driven {
    driver: Option<Pin<Box<dyn Future<Output = ()> + Send>>>,
    receiver: mpsc::Receiver<Sent>,
}

impl Stream for Driven {
    type Item = Sent;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Sent>> {
        if let Some(driver) = &mut self.driver
            && driver.as_mut().poll(cx).is_ready()
        {
            // It dropped its sender: the receiver ends once drained.
            self.driver = None;
        }
        self.receiver.poll_recv(cx)
    }
}

/// Runs the call, relaying what the server sends and what the client answers; its result, or
/// `None` if the client went away first.
async fn run(
    service: &BrokerService,
    mut prepared: PreparedCall,
    mut inbound: Streaming<proto::CallToolStreamRequest>,
    out: &mpsc::Sender<Sent>,
) -> Option<Result<proto::CallToolResponse, RequestError>> {
    let (conversation, mut events) = Conversation::new();
    let call = service
        .calls
        .run(prepared.tool_call(Some(conversation.clone())));
    tokio::pin!(call);
    let mut waiting = Waiting::default();
    let mut reading = true;
    let result = loop {
        tokio::select! {
            biased;
            result = &mut call => break result,
            () = out.closed() => return None,
            Some(interaction) = events.recv() => {
                if let Some(message) = waiting.ask(interaction, reading)
                    && out.send(Ok(message)).await.is_err()
                {
                    return None;
                }
            }
            message = inbound.message(), if reading => match message {
                Ok(Some(message)) => waiting.answer(message),
                // Half-closed (or broken): nothing more will be answered.
                Ok(None) | Err(_) => {
                    reading = false;
                    conversation.close();
                    waiting.decline_all();
                }
            },
        }
    };
    // Progress read before the answer is sent before the result.
    while let Ok(interaction) = events.try_recv() {
        let sent = match interaction {
            Interaction::Progress(progress) => Outbound::Progress(progress_of(progress)),
            Interaction::Log(log) => Outbound::Log(log_of(log)),
            _ => continue,
        };
        let _ = out.send(Ok(event(sent))).await;
    }
    Some(result.and_then(|called| {
        service
            .limit
            .check(messages::call_response(&called.server, called.result)?)
    }))
}

fn event(event: Outbound) -> proto::CallToolStreamResponse {
    proto::CallToolStreamResponse { event: Some(event) }
}

pub(super) fn progress_of(progress: ProgressNotificationParam) -> proto::Progress {
    proto::Progress {
        progress: progress.progress,
        total: progress.total,
        message: progress.message.unwrap_or_default(),
    }
}

fn log_of(log: LoggingMessageNotificationParam) -> proto::LogMessage {
    let level = serde_json::to_value(log.level)
        .ok()
        .and_then(|level| level.as_str().map(str::to_owned))
        .unwrap_or_default();
    proto::LogMessage {
        level,
        logger: log.logger.unwrap_or_default(),
        data_json: log.data.to_string(),
    }
}

/// The server's requests the client was shown and has not answered yet, by the id it was
/// given.
#[derive(Default)]
struct Waiting {
    next: u64,
    elicitations: HashMap<String, oneshot::Sender<ElicitResult>>,
    samplings: HashMap<String, oneshot::Sender<Result<CreateMessageResult, String>>>,
}

impl Waiting {
    /// The message that shows `interaction` to the client (none if it was answered at once:
    /// a client that stopped sending cannot answer).
    fn ask(
        &mut self,
        interaction: Interaction,
        reading: bool,
    ) -> Option<proto::CallToolStreamResponse> {
        match interaction {
            Interaction::Progress(progress) => {
                Some(event(Outbound::Progress(progress_of(progress))))
            }
            Interaction::Log(log) => Some(event(Outbound::Log(log_of(log)))),
            Interaction::Elicit { answer, .. } if !reading => {
                let _ = answer.send(ElicitResult::new(ElicitationAction::Decline));
                None
            }
            Interaction::Sample { answer, .. } if !reading => {
                let _ = answer.send(Err("the caller stopped sending; it cannot answer".into()));
                None
            }
            Interaction::Elicit { params, answer } => {
                let id = self.id("e");
                self.elicitations.insert(id.clone(), answer);
                Some(event(Outbound::Elicitation(elicitation(id, params))))
            }
            Interaction::Sample { params, answer } => {
                let id = self.id("s");
                self.samplings.insert(id.clone(), answer);
                Some(event(Outbound::Sampling(sampling(id, &params))))
            }
        }
    }

    /// The client's answer goes to the server request it answers.
    fn answer(&mut self, message: proto::CallToolStreamRequest) {
        match message.message {
            Some(Inbound::ElicitationResponse(response)) => {
                let Some(answer) = self.elicitations.remove(&response.id) else {
                    tracing::debug!(id = %response.id, "an answer to no open elicitation is ignored");
                    return;
                };
                let _ = answer.send(elicit_result(response));
            }
            Some(Inbound::SamplingResponse(response)) => {
                let Some(answer) = self.samplings.remove(&response.id) else {
                    tracing::debug!(id = %response.id, "an answer to no open sampling request is ignored");
                    return;
                };
                let _ = answer.send(sampling_result(response));
            }
            Some(Inbound::Call(_)) | None => {
                tracing::debug!("a second call on a CallToolStream is ignored");
            }
        }
    }

    /// The client will not answer: every open request is declined (sampling: refused).
    fn decline_all(&mut self) {
        for (_, answer) in self.elicitations.drain() {
            let _ = answer.send(ElicitResult::new(ElicitationAction::Decline));
        }
        for (_, answer) in self.samplings.drain() {
            let _ = answer.send(Err("the caller stopped sending; it cannot answer".into()));
        }
    }

    fn id(&mut self, kind: &str) -> String {
        self.next += 1;
        format!("{kind}{}", self.next)
    }
}

pub(super) fn elicitation(id: String, params: ElicitRequestParams) -> proto::ElicitationRequest {
    match params {
        ElicitRequestParams::FormElicitationParams {
            message,
            requested_schema,
            ..
        } => proto::ElicitationRequest {
            id,
            message,
            requested_schema_json: serde_json::to_string(&requested_schema).unwrap_or_default(),
            mode: "form".into(),
            url: String::new(),
            elicitation_id: String::new(),
        },
        ElicitRequestParams::UrlElicitationParams {
            message,
            url,
            elicitation_id,
            ..
        } => proto::ElicitationRequest {
            id,
            message,
            requested_schema_json: String::new(),
            mode: "url".into(),
            url,
            elicitation_id,
        },
        // A mode added to MCP later: shown as it is, for the client to decline.
        other => proto::ElicitationRequest {
            id,
            message: serde_json::to_string(&other).unwrap_or_default(),
            requested_schema_json: String::new(),
            mode: "unknown".into(),
            url: String::new(),
            elicitation_id: String::new(),
        },
    }
}

pub(super) fn sampling(id: String, params: &CreateMessageRequestParams) -> proto::SamplingRequest {
    proto::SamplingRequest {
        id,
        params_json: serde_json::to_string(params).unwrap_or_default(),
    }
}

/// The client's elicitation answer as MCP's; an action it cannot read is a decline.
pub(super) fn elicit_result(response: proto::ElicitationResponse) -> ElicitResult {
    let action = match response.action.as_str() {
        "accept" => ElicitationAction::Accept,
        "cancel" => ElicitationAction::Cancel,
        "decline" => ElicitationAction::Decline,
        other => {
            tracing::debug!(
                action = other,
                "an unknown elicitation action counts as decline"
            );
            ElicitationAction::Decline
        }
    };
    let content = match (&action, response.content) {
        (ElicitationAction::Accept, Some(content)) => proto::json::struct_to_json(content)
            .ok()
            .map(serde_json::Value::Object),
        _ => None,
    };
    let mut result = ElicitResult::new(action);
    result.content = content;
    result
}

/// The client's sampling answer: its error, or its result read as a CreateMessageResult.
pub(super) fn sampling_result(
    response: proto::SamplingResponse,
) -> Result<CreateMessageResult, String> {
    if !response.error.is_empty() {
        return Err(response.error);
    }
    serde_json::from_str(&response.result_json)
        .map_err(|e| format!("the caller's sampling answer is not a CreateMessageResult: {e}"))
}
