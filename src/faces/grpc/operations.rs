//! Long calls over gRPC (AIP-151): `StartToolCall` starts a task and answers with its
//! `google.longrunning.Operation`; the standard `Operations` service (served beside
//! ToolBroker, behind the same gate) follows it; `AnswerToolCall` answers its questions. Every
//! method sees only the caller's own operations: another's is NOT_FOUND, as for none.

use std::{sync::Arc, time::Duration};

use prost_types::Any;
use tonic::{Request, Response, Status};

use super::{
    audit_draft,
    broker_service::{BrokerService, PreparedCall, refused},
    call_stream, messages,
    observe::observe,
    status::grpc_code,
};
use crate::{
    auth,
    core::{
        call_audit::Answered,
        tasks::{Answer, Asked, Outcome, TaskRecord, TaskState, Tasks},
    },
    domain::{caller::CallerKey, request_error::RequestError},
    proto::{
        self,
        google::longrunning::{
            self as lro, operation::Result as Ended, operations_server::Operations,
        },
    },
};

/// What an operation's name starts with.
const PREFIX: &str = "operations/";
/// Operations a ListOperations page holds when the request says nothing.
const DEFAULT_PAGE: usize = 50;
/// The most a page may hold.
const MAX_PAGE: usize = 1000;
/// How long WaitOperation waits when the request gives no timeout.
const DEFAULT_WAIT: Duration = Duration::from_secs(60);
/// The longest WaitOperation waits, whatever the request says.
const MAX_WAIT: Duration = Duration::from_secs(3600);

/// StartToolCall: the call checked as CallTool checks it (the gate, the view, the caller's
/// grants, the tool), then started as a task of the caller's; its operation, at once. A
/// refusal is audited as CallTool's is; a started call's line is written when it ends.
pub(super) async fn start(
    service: &BrokerService,
    request: Request<proto::CallToolRequest>,
) -> Result<lro::Operation, RequestError> {
    let pending = service.calls.audited(|with_arguments| {
        audit_draft::draft(
            request.get_ref(),
            request.metadata(),
            request.extensions(),
            with_arguments,
        )
    });
    let (metadata, extensions, request) = request.into_parts();
    let (prepared, server) = match checked(service, metadata, extensions, request) {
        Ok(checked) => checked,
        Err(error) => {
            return match pending {
                Some(refused) => refused.commit(Err(&error)).settle(Err(error)).await,
                None => Err(error),
            };
        }
    };
    let draft = pending.and_then(|mut pending| pending.draft.take());
    let calls = service.calls.clone();
    let owner = prepared.context.caller.key.clone();
    let tool = prepared.name.clone();
    let record = service
        .calls
        .tasks()
        .start(owner, tool, server, move |conversation| {
            let mut prepared = prepared;
            async move {
                let pending = draft.and_then(|draft| calls.audited(|_| draft));
                let result = calls.run(prepared.tool_call(Some(conversation))).await;
                let Some(pending) = pending else {
                    return result;
                };
                // Written when the call ends, before anyone is told it did.
                let answered = result.as_ref().map(|called| Answered {
                    is_error: called.result.is_error == Some(true),
                    server: called.server.as_str(),
                });
                pending.commit(answered).settle(result).await
            }
        })
        .await?;
    Ok(operation(&record, service))
}

/// A StartToolCall decoded and admitted, with its tool's server.
fn checked(
    service: &BrokerService,
    metadata: tonic::metadata::MetadataMap,
    extensions: tonic::Extensions,
    request: proto::CallToolRequest,
) -> Result<(PreparedCall, String), RequestError> {
    let mut prepared = service.prepare(metadata, extensions, request)?;
    // The call outlives this request: its own timeout holds, not the request's deadline.
    prepared.deadline = None;
    let view = (!prepared.view.is_empty()).then_some(prepared.view.as_str());
    service
        .calls
        .admit(view, &prepared.context.caller, &prepared.name)?;
    match service.broker().owner(&prepared.name) {
        Some(server) => Ok((prepared, server)),
        None => Err(RequestError::UnknownTool {
            name: prepared.name,
        }),
    }
}

/// AnswerToolCall: the answers go to the open questions they name.
pub(super) async fn answer(
    service: &BrokerService,
    request: Request<proto::AnswerToolCallRequest>,
) -> Result<(), RequestError> {
    let owner = auth::caller(request.extensions()).key;
    let request = request.into_inner();
    let id = id_of(&request.name)?;
    let elicitations = request
        .elicitation_responses
        .into_iter()
        .map(|response| Answer::Elicit(response.id.clone(), call_stream::elicit_result(response)));
    let samplings = request.sampling_responses.into_iter().map(|response| {
        Answer::Sample(response.id.clone(), call_stream::sampling_result(response))
    });
    let answers: Vec<Answer> = elicitations.chain(samplings).collect();
    if answers.is_empty() {
        return Err(RequestError::InvalidArguments(
            "no answers: give elicitation_responses or sampling_responses".into(),
        ));
    }
    service
        .calls
        .tasks()
        .answer(&owner, id, answers)
        .await
        .map_err(|error| named(error, &request.name))
}

/// The `google.longrunning.Operations` service over the broker's tasks.
#[derive(Clone)]
pub struct OperationsService(pub Arc<BrokerService>);

impl OperationsService {
    fn tasks(&self) -> &Tasks {
        self.0.calls.tasks()
    }
}

#[tonic::async_trait]
impl Operations for OperationsService {
    async fn list_operations(
        &self,
        request: Request<lro::ListOperationsRequest>,
    ) -> Result<Response<lro::ListOperationsResponse>, Status> {
        observe("ListOperations", async {
            let owner = auth::caller(request.extensions()).key;
            let request = request.into_inner();
            let listed = list(self, &owner, &request).await.map_err(refused)?;
            Ok(Response::new(listed))
        })
        .await
    }

    async fn get_operation(
        &self,
        request: Request<lro::GetOperationRequest>,
    ) -> Result<Response<lro::Operation>, Status> {
        observe("GetOperation", async {
            let owner = auth::caller(request.extensions()).key;
            let name = request.into_inner().name;
            let record = on(&name, async |id| self.tasks().get(&owner, id).await).await?;
            Ok(Response::new(operation(&record, &self.0)))
        })
        .await
    }

    async fn delete_operation(
        &self,
        request: Request<lro::DeleteOperationRequest>,
    ) -> Result<Response<()>, Status> {
        observe("DeleteOperation", async {
            let owner = auth::caller(request.extensions()).key;
            let name = request.into_inner().name;
            on(&name, async |id| self.tasks().delete(&owner, id).await).await?;
            Ok(Response::new(()))
        })
        .await
    }

    async fn cancel_operation(
        &self,
        request: Request<lro::CancelOperationRequest>,
    ) -> Result<Response<()>, Status> {
        observe("CancelOperation", async {
            let owner = auth::caller(request.extensions()).key;
            let name = request.into_inner().name;
            on(&name, async |id| self.tasks().cancel(&owner, id).await).await?;
            Ok(Response::new(()))
        })
        .await
    }

    async fn wait_operation(
        &self,
        request: Request<lro::WaitOperationRequest>,
    ) -> Result<Response<lro::Operation>, Status> {
        observe("WaitOperation", async {
            let owner = auth::caller(request.extensions()).key;
            let request = request.into_inner();
            let within = match request.timeout {
                None => DEFAULT_WAIT,
                Some(timeout) => messages::duration(timeout).map_err(refused)?.min(MAX_WAIT),
            };
            let wait = async |id: &str| self.tasks().wait(&owner, id, within).await;
            let record = on(&request.name, wait).await?;
            Ok(Response::new(operation(&record, &self.0)))
        })
        .await
    }
}

/// `act` on the id of operation `name`; its error as the status to answer with, naming the
/// operation as the caller named it.
async fn on<T>(
    name: &str,
    act: impl AsyncFnOnce(&str) -> Result<T, RequestError>,
) -> Result<T, Status> {
    let acted = async { act(id_of(name)?).await };
    acted.await.map_err(|error| refused(named(error, name)))
}

/// A page of the caller's operations, newest first.
async fn list(
    service: &OperationsService,
    owner: &CallerKey,
    request: &lro::ListOperationsRequest,
) -> Result<lro::ListOperationsResponse, RequestError> {
    if !request.filter.trim().is_empty() {
        return Err(RequestError::InvalidArguments(
            "ListOperations takes no filter here: send an empty filter and read `done`".into(),
        ));
    }
    let size = match usize::try_from(request.page_size) {
        Ok(0) => DEFAULT_PAGE,
        Ok(size) => size.min(MAX_PAGE),
        Err(_) => {
            return Err(RequestError::InvalidArguments(
                "page_size must not be negative".into(),
            ));
        }
    };
    let start = match request.page_token.as_str() {
        "" => 0,
        token => token.parse::<usize>().map_err(|_| {
            RequestError::InvalidArguments(format!(
                "page_token {token:?} is not one a ListOperations response gave"
            ))
        })?,
    };
    let records = service.tasks().list(owner).await?;
    let end = start.saturating_add(size).min(records.len());
    let operations = records
        .get(start..end)
        .unwrap_or_default()
        .iter()
        .map(|record| operation(record, &service.0))
        .collect();
    let next_page_token = if end < records.len() {
        end.to_string()
    } else {
        String::new()
    };
    Ok(lro::ListOperationsResponse {
        operations,
        next_page_token,
        unreachable: Vec::new(),
    })
}

/// The id in an operation's name; NOT_FOUND for a name the broker never gives.
fn id_of(name: &str) -> Result<&str, RequestError> {
    name.strip_prefix(PREFIX)
        .filter(|id| !id.is_empty() && id.bytes().all(|b| b.is_ascii_digit()))
        .ok_or_else(|| RequestError::UnknownOperation {
            name: name.to_owned(),
        })
}

/// `error` naming the operation as the caller named it (`operations/<id>`).
fn named(error: RequestError, name: &str) -> RequestError {
    match error {
        RequestError::UnknownOperation { .. } => RequestError::UnknownOperation {
            name: name.to_owned(),
        },
        RequestError::OperationState { reason, .. } => RequestError::OperationState {
            name: name.to_owned(),
            reason,
        },
        other => other,
    }
}

/// A task as its operation: its metadata, and once done its response or error.
fn operation(record: &TaskRecord, service: &BrokerService) -> lro::Operation {
    let result = record.outcome.as_ref().map(|outcome| match outcome {
        Outcome::Answered(called) => {
            let response = messages::call_response(&called.server, called.result.clone())
                .and_then(|response| service.limit.check(response));
            match response {
                Ok(response) => Ended::Response(pack("CallToolResponse", &response)),
                Err(error) => Ended::Error(status_of(&error)),
            }
        }
        Outcome::Failed(failure) => Ended::Error(tonic_types::pb::Status {
            code: grpc_code(failure.code) as i32,
            message: failure.message.clone(),
            details: Vec::new(),
        }),
        Outcome::Cancelled(why) => Ended::Error(tonic_types::pb::Status {
            code: tonic::Code::Cancelled as i32,
            message: why.clone(),
            details: Vec::new(),
        }),
    });
    lro::Operation {
        name: format!("{PREFIX}{}", record.id),
        metadata: Some(pack("ToolCallMetadata", &metadata(record))),
        done: record.state.is_terminal(),
        result,
    }
}

/// The status `error` is answered with, as an operation's error.
fn status_of(error: &RequestError) -> tonic_types::pb::Status {
    tonic_types::pb::Status {
        code: grpc_code(error.class().code) as i32,
        message: error.to_string(),
        details: Vec::new(),
    }
}

/// `message`, a `toolbroker.v1.<name>`, packed in an `Any`.
fn pack(name: &str, message: &impl prost::Message) -> Any {
    Any {
        type_url: format!("type.googleapis.com/toolbroker.v1.{name}"),
        value: message.encode_to_vec(),
    }
}

/// The task's record as the operation's metadata.
fn metadata(record: &TaskRecord) -> proto::ToolCallMetadata {
    let mut elicitations = Vec::new();
    let mut samplings = Vec::new();
    for question in &record.questions {
        match &question.asked {
            Asked::Elicit(params) => {
                elicitations.push(call_stream::elicitation(
                    question.id.clone(),
                    params.clone(),
                ));
            }
            Asked::Sample(params) => {
                samplings.push(call_stream::sampling(question.id.clone(), params));
            }
        }
    }
    proto::ToolCallMetadata {
        tool: record.tool.clone(),
        server: record.server.clone(),
        caller: record.owner.to_string(),
        state: state(record.state) as i32,
        status_message: record.status_message.clone(),
        progress: record.progress.clone().map(call_stream::progress_of),
        create_time: Some(record.created.into()),
        update_time: Some(record.updated.into()),
        expire_time: record.expires.map(Into::into),
        elicitations,
        samplings,
    }
}

fn state(state: TaskState) -> proto::TaskState {
    match state {
        TaskState::Working => proto::TaskState::Working,
        TaskState::InputRequired => proto::TaskState::InputRequired,
        TaskState::Completed => proto::TaskState::Completed,
        TaskState::Failed => proto::TaskState::Failed,
        TaskState::Cancelled => proto::TaskState::Cancelled,
    }
}
