//! The Tasks extension (`io.modelcontextprotocol/tasks`, SEP-2663) on the MCP face, over the
//! same records as gRPC's operations (a task started here is an operation there). A
//! `tools/call` of a 2026-07-28 client that declares the extension runs as a task: answered
//! inline if it ends within [`INLINE_WITHIN`] without asking anything (unless `tasks.always`),
//! else answered `resultType: "task"`, and followed with `tasks/get`, `tasks/update` and
//! `tasks/cancel`. Each task is its caller's: another caller's is an unknown task.

// Sampling is deprecated by MCP 2026-07-28 (SEP-2577) but is what servers use today.
#![expect(
    deprecated,
    reason = "sampling is what servers before MCP 2026-07-28 use"
)]

use std::time::{Duration, SystemTime};

use rmcp::{
    ErrorData, RoleServer,
    model::{
        CallToolRequestParams, CallToolResponse, CreateMessageRequest, CreateMessageResult,
        CreateTaskResult, DetailedTask, ElicitRequest, ElicitResult, ElicitationAction,
        InputRequest, InputResponses, JsonObject, Task, TaskPayload, TaskStatus,
    },
    service::RequestContext,
};
use serde_json::Value;
use tracing::Instrument as _;

use super::{
    call::answer_of,
    request::{Asker, incoming_trace, server_span},
    server_handler::Face,
};
use crate::{
    core::tasks::{Answer, Asked, Outcome, TaskRecord, TaskState},
    domain::{caller::CallerKey, request_error::RequestError},
    faces::mcp::{
        model::{
            cache,
            refusal::{self, Refusal},
        },
        rounds,
    },
};

/// How long a task's call may take to be answered inline, as a plain result, when it asks
/// nothing: quick calls cost the client no polling.
const INLINE_WITHIN: Duration = Duration::from_secs(1);
/// How often a client is asked to poll `tasks/get`.
const POLL_INTERVAL_MS: u64 = 500;

impl Face {
    /// Whether `context`'s `tools/call` runs as a task: a 2026-07-28 client that declares
    /// the extension, starting a call (not answering a round of one).
    pub(super) fn takes_tasks(
        &self,
        request: &CallToolRequestParams,
        context: &RequestContext<RoleServer>,
    ) -> bool {
        cache::owed(context.protocol_version().as_ref())
            && context
                .client_capabilities()
                .is_some_and(|capabilities| capabilities.supports_tasks())
            && request.request_state.is_none()
            && request.input_responses.is_none()
    }

    /// A `tools/call` run as a task of its caller's.
    pub(super) async fn call_as_task(
        &self,
        request: CallToolRequestParams,
        context: &RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let owner = Asker::of(&context.extensions).caller.key;
        let incoming = incoming_trace(&context.meta, &context.extensions);
        let (span, trace_id) = server_span("tools/call", &incoming);
        span.record("tool", &*request.name);
        let tasks = self.calls.tasks().clone();
        // An unknown tool's task fails at once, and is answered inline as CallTool's refusal.
        let server = self.broker().owner(&request.name).unwrap_or_default();
        let answers = rounds::answers(context.client_capabilities().as_ref());
        let face = self.clone();
        let extensions = context.extensions.clone();
        let tool = request.name.to_string();
        let started = tasks
            .start(owner.clone(), tool, server, move |conversation| {
                let conversation = conversation.answering(answers);
                async move {
                    face.checked_call(request, &extensions, &incoming, trace_id, conversation)
                        .instrument(span)
                        .await
                }
            })
            .await;
        let record = match started {
            Ok(record) => record,
            Err(error) => return answer_of(Err(error)),
        };
        let ttl = tasks.settings().ttl;
        if tasks.settings().always {
            return Ok(CallToolResponse::Task(CreateTaskResult::new(task(
                &record, ttl,
            ))));
        }
        let settled = tasks
            .wait_until(&owner, &record.id, INLINE_WITHIN, |record| {
                record.state != TaskState::Working
            })
            .await;
        match settled {
            Ok(record) if record.state.is_terminal() => {
                // The client never saw this task: it is not kept.
                let _ = tasks.delete(&owner, &record.id).await;
                inline(record)
            }
            Ok(record) => Ok(CallToolResponse::Task(CreateTaskResult::new(task(
                &record, ttl,
            )))),
            Err(error) => answer_of(Err(error)),
        }
    }

    /// `tasks/get`: the caller's task as it stands.
    pub(super) async fn task_status(
        &self,
        id: &str,
        context: &RequestContext<RoleServer>,
    ) -> Result<DetailedTask, ErrorData> {
        let owner = Asker::of(&context.extensions).caller.key;
        let tasks = self.calls.tasks();
        let record = tasks.get(&owner, id).await.map_err(|_| unknown_task(id))?;
        Ok(detailed(&record, tasks.settings().ttl))
    }

    /// `tasks/update`: the responses to the task's open questions go to them; a key that
    /// names none open is ignored, as the extension says.
    pub(super) async fn answer_task(
        &self,
        id: &str,
        responses: &InputResponses,
        context: &RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        let owner = Asker::of(&context.extensions).caller.key;
        let tasks = self.calls.tasks();
        let record = tasks.get(&owner, id).await.map_err(|_| unknown_task(id))?;
        let answers: Vec<Answer> = record
            .questions
            .iter()
            .filter_map(|question| {
                let response = responses.get(&question.id)?;
                Some(answer(question.id.clone(), &question.asked, response))
            })
            .collect();
        if answers.is_empty() {
            return Ok(());
        }
        match tasks.answer(&owner, id, answers).await {
            // Answered meanwhile, or ended: nothing left to take the answer.
            Ok(()) | Err(RequestError::OperationState { .. }) => Ok(()),
            Err(_) => Err(unknown_task(id)),
        }
    }

    /// `tasks/cancel`: the caller's task is cancelled, upstream too.
    pub(super) async fn cancel_task_of(
        &self,
        id: &str,
        context: &RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        let owner: CallerKey = Asker::of(&context.extensions).caller.key;
        self.calls
            .tasks()
            .cancel(&owner, id)
            .await
            .map_err(|_| unknown_task(id))
    }
}

/// The extension's error for a task id this caller has none of (never, another caller's, or
/// forgotten): the same for each, so no one learns another's ids.
fn unknown_task(id: &str) -> ErrorData {
    ErrorData::invalid_params(
        format!("unknown task: {id} (never one of this caller's, or forgotten after tasks.ttl)"),
        None,
    )
}

/// A task that ended before the client was told of it, answered as a plain call is.
fn inline(record: TaskRecord) -> Result<CallToolResponse, ErrorData> {
    match record.outcome {
        Some(Outcome::Answered(called)) => answer_of(Ok(called)),
        Some(Outcome::Failed(failure)) => refusal::refused_call(Refusal {
            code: Some(failure.code),
            message: failure.message,
        })
        .map(Into::into),
        // Not cancelled by anyone who knew of it, so by the broker stopping.
        Some(Outcome::Cancelled(why)) => Err(ErrorData::internal_error(why, None)),
        None => Err(ErrorData::internal_error("the call did not end", None)),
    }
}

/// The task's base fields.
fn task(record: &TaskRecord, ttl: Duration) -> Task {
    let status = match record.state {
        TaskState::Working => TaskStatus::Working,
        TaskState::InputRequired => TaskStatus::InputRequired,
        TaskState::Completed => TaskStatus::Completed,
        TaskState::Failed => TaskStatus::Failed,
        TaskState::Cancelled => TaskStatus::Cancelled,
    };
    let ttl_ms = u64::try_from(ttl.as_millis()).unwrap_or(u64::MAX);
    let task = Task::new(
        record.id.clone(),
        status,
        timestamp(record.created),
        timestamp(record.updated),
    )
    .with_ttl_ms(ttl_ms)
    .with_poll_interval_ms(POLL_INTERVAL_MS);
    if record.status_message.is_empty() {
        task
    } else {
        task.with_status_message(record.status_message.clone())
    }
}

/// The task with what its status carries: its open questions, its result or its error.
fn detailed(record: &TaskRecord, ttl: Duration) -> DetailedTask {
    let payload = match (&record.state, &record.outcome) {
        (TaskState::InputRequired, _) => TaskPayload::InputRequired {
            input_requests: record
                .questions
                .iter()
                .map(|question| (question.id.clone(), input_request(&question.asked)))
                .collect(),
        },
        (_, Some(Outcome::Answered(called))) => {
            let mut result = called.result.clone();
            cache::complete(&mut result.result_type, &mut result.meta);
            TaskPayload::Completed {
                result: object(serde_json::to_value(result).unwrap_or_default()),
            }
        }
        (_, Some(Outcome::Failed(failure))) => {
            let refusal = Refusal {
                code: Some(failure.code),
                message: failure.message.clone(),
            };
            match refusal::refused_call(refusal) {
                // A refusal the model reads is the tool's error result, as for a plain call.
                Ok(result) => TaskPayload::Completed {
                    result: object(serde_json::to_value(result).unwrap_or_default()),
                },
                Err(error) => TaskPayload::Failed {
                    error: object(serde_json::to_value(error).unwrap_or_default()),
                },
            }
        }
        (_, Some(Outcome::Cancelled(_))) => TaskPayload::Cancelled,
        (_, None) => TaskPayload::Working,
    };
    DetailedTask::new(task(record, ttl), payload)
}

/// A question as the extension's input request.
fn input_request(asked: &Asked) -> InputRequest {
    match asked {
        Asked::Elicit(params) => InputRequest::Elicitation(ElicitRequest::new(params.clone())),
        Asked::Sample(params) => {
            InputRequest::CreateMessage(CreateMessageRequest::new(params.clone()))
        }
    }
}

/// The client's `response` to the question `id` as the call takes it: an answer it cannot
/// read is a decline (elicitation) or an error (sampling).
fn answer(id: String, asked: &Asked, response: &Value) -> Answer {
    match asked {
        Asked::Elicit(_) => Answer::Elicit(
            id,
            serde_json::from_value::<ElicitResult>(response.clone())
                .unwrap_or_else(|_| ElicitResult::new(ElicitationAction::Decline)),
        ),
        Asked::Sample(_) => Answer::Sample(
            id,
            serde_json::from_value::<CreateMessageResult>(response.clone()).map_err(|e| {
                format!("the client's sampling answer is not a CreateMessageResult: {e}")
            }),
        ),
    }
}

fn object(value: Value) -> JsonObject {
    match value {
        Value::Object(object) => object,
        _ => JsonObject::new(),
    }
}

/// ISO 8601 (RFC 3339, UTC, milliseconds), as the extension's timestamps are.
fn timestamp(at: SystemTime) -> String {
    humantime::format_rfc3339_millis(at).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::tasks::{Failure, Question};
    use crate::domain::request_error::Code;

    fn record(state: TaskState) -> TaskRecord {
        let mut record =
            TaskRecord::started("7".into(), CallerKey::anonymous(), "t".into(), "s".into());
        record.state = state;
        record
    }

    #[test]
    fn a_task_shows_its_questions_result_or_error_as_the_extension_says() {
        let ttl = Duration::from_secs(60);
        let mut asking = record(TaskState::InputRequired);
        let params = serde_json::from_value(serde_json::json!({
            "mode": "form", "message": "Colour?",
            "requestedSchema": {"type": "object", "properties": {}},
        }))
        .unwrap();
        asking.questions.push(Question {
            id: "e1".into(),
            asked: Asked::Elicit(params),
        });
        let shown = serde_json::to_value(detailed(&asking, ttl)).unwrap();
        assert_eq!(shown["status"], "input_required");
        assert_eq!(shown["inputRequests"]["e1"]["method"], "elicitation/create");
        assert_eq!(shown["ttlMs"], 60_000);
        assert_eq!(shown["pollIntervalMs"], POLL_INTERVAL_MS);

        let mut failed = record(TaskState::Working);
        let failure = |code| Failure {
            code,
            message: "why".into(),
        };
        failed.end(Outcome::Failed(failure(Code::NotFound)), ttl);
        let shown = serde_json::to_value(detailed(&failed, ttl)).unwrap();
        assert_eq!(shown["status"], "failed", "{shown}");
        assert_eq!(shown["error"]["code"], -32602);
        assert_eq!(shown["error"]["message"], "why");

        // A refusal the table makes a tool error is a completed task with an error result.
        let mut refused = record(TaskState::Working);
        refused.end(Outcome::Failed(failure(Code::Unavailable)), ttl);
        let shown = serde_json::to_value(detailed(&refused, ttl)).unwrap();
        assert_eq!(shown["status"], "completed", "{shown}");
        assert_eq!(shown["result"]["isError"], true);

        let mut cancelled = record(TaskState::Working);
        cancelled.end(Outcome::Cancelled("by you".into()), ttl);
        let shown = serde_json::to_value(detailed(&cancelled, ttl)).unwrap();
        assert_eq!(shown["status"], "cancelled");
    }
}
