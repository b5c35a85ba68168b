//! An upstream server's task (MCP 2026-07-28's Tasks extension, SEP-2663), followed for the
//! call it answered: `tasks/get` at the server's `pollIntervalMs`, its `inputRequests` put to
//! the call's own client (as its rounds are) and answered with `tasks/update`, until it ends.
//! The caller sees the task's result or error as the call's (and its status messages as
//! progress): never the server's task id. A call that is dropped (its caller went away, its time ran out) sends `tasks/cancel`.

use std::{
    collections::HashSet,
    time::{Duration, Instant},
};

use rmcp::{
    RoleClient,
    model::{
        CallToolResult, CancelTaskParams, CancelTaskRequest, ClientRequest, CreateTaskResult,
        ErrorCode, GetTaskParams, GetTaskRequest, InputRequests, InputResponses, JsonObject,
        NumberOrString, ProgressNotificationParam, ProgressToken, RequestMetaObject, ServerResult,
        TaskPayload, UpdateTaskParams, UpdateTaskRequest,
    },
    service::{Peer, PeerRequestOptions},
};
use serde_json::Value;

use super::{
    requests::{Ends, Following, Upstream},
    rounds::Stateless,
};
use crate::{
    conversation::Conversation,
    domain::{caller::CallerKey, request_error::RequestError},
    upstream::pool::balance::Replica,
};

/// The shortest and longest wait between two `tasks/get`, whatever the server suggests.
const FASTEST_POLL: Duration = Duration::from_millis(50);
const SLOWEST_POLL: Duration = Duration::from_secs(5);
/// The wait when the server suggests none.
const DEFAULT_POLL: Duration = Duration::from_secs(1);

impl Upstream {
    /// Follows the task `created` to its end: the call's result, or why there is none.
    pub(super) async fn follow_task(
        &self,
        following: Following<'_>,
        created: CreateTaskResult,
        ends: Ends,
    ) -> Result<CallToolResult, RequestError> {
        let Following {
            replica,
            stateless,
            conversation,
            caller,
        } = following;
        let id = created.task.task_id;
        let mut cancel = CancelOnDrop::new(&replica.peer, stateless, &id);
        let mut every = interval(created.task.poll_interval_ms);
        // A key is asked once: a `tasks/get` may still show one answered a moment ago.
        let mut asked: HashSet<String> = HashSet::new();
        let mut told = Told::default();
        loop {
            let waited = tokio::time::timeout_at(ends.hard.into(), tokio::time::sleep(every));
            if waited.await.is_err() {
                return Err(self.timed_out(ends.timing));
            }
            let left = ends
                .hard
                .saturating_duration_since(Instant::now())
                .min(self.timeout);
            let get = ClientRequest::GetTaskRequest(GetTaskRequest::new(GetTaskParams::new(&id)));
            let ServerResult::GetTaskResult(got) =
                self.request_on(replica, caller, get, left).await?
            else {
                return Err(self.bad(format!(
                    "its answer to tasks/get of task {id} is not a task"
                )));
            };
            if let Some(ms) = got.task.task.poll_interval_ms {
                every = interval(Some(ms));
            }
            if let Some(conversation) = conversation {
                told.tell(conversation, &id, got.task.task.status_message.as_deref());
            }
            match got.task.payload {
                TaskPayload::InputRequired { input_requests } => {
                    let fresh: InputRequests = input_requests
                        .into_iter()
                        .filter(|(key, _)| asked.insert(key.clone()))
                        .collect();
                    if fresh.is_empty() {
                        continue;
                    }
                    let answering = stateless.answer(fresh, conversation);
                    let answers = tokio::time::timeout_at(ends.hard.into(), answering)
                        .await
                        .map_err(|_| self.timed_out(ends.timing))?
                        .map_err(|reason| RequestError::InputNotGiven {
                            server: self.server.clone(),
                            reason,
                        })?;
                    self.update(replica, caller, &id, answers, left).await?;
                }
                TaskPayload::Completed { result } => {
                    cancel.disarm();
                    return serde_json::from_value(Value::Object(result)).map_err(|error| {
                        self.bad(format!("its task's result is not a tool result: {error}"))
                    });
                }
                TaskPayload::Failed { error } => {
                    cancel.disarm();
                    return Err(self.failed(&error));
                }
                TaskPayload::Cancelled => {
                    cancel.disarm();
                    return Err(RequestError::ServerError {
                        server: self.server.clone(),
                        code: ErrorCode::INTERNAL_ERROR.0,
                        message: "it cancelled the task running the call".into(),
                    });
                }
                // Working, or a status of a later version: asked again.
                _ => {}
            }
        }
    }

    /// `tasks/update` with the call's client's answers.
    async fn update(
        &self,
        replica: &Replica,
        caller: &CallerKey,
        id: &str,
        answers: InputResponses,
        within: Duration,
    ) -> Result<(), RequestError> {
        let params = UpdateTaskParams::new(id, answers);
        let update = ClientRequest::UpdateTaskRequest(UpdateTaskRequest::new(params));
        self.request_on(replica, caller, update, within)
            .await
            .map(drop)
    }

    /// A task that failed, as the JSON-RPC error it carries.
    fn failed(&self, error: &JsonObject) -> RequestError {
        RequestError::ServerError {
            server: self.server.clone(),
            code: error
                .get("code")
                .and_then(Value::as_i64)
                .and_then(|code| i32::try_from(code).ok())
                .unwrap_or(ErrorCode::INTERNAL_ERROR.0),
            message: error
                .get("message")
                .and_then(Value::as_str)
                .unwrap_or("its task failed and said nothing more")
                .to_owned(),
        }
    }

    fn bad(&self, reason: String) -> RequestError {
        RequestError::BadResult {
            server: self.server.clone(),
            reason,
        }
    }
}

/// The task's status messages, told to the call's client as progress as they change (a task
/// has no progress notifications of its own).
#[derive(Default)]
struct Told {
    last: Option<String>,
    count: u32,
}

impl Told {
    fn tell(&mut self, conversation: &Conversation, id: &str, message: Option<&str>) {
        let Some(message) = message.filter(|m| self.last.as_deref() != Some(*m)) else {
            return;
        };
        self.count += 1;
        self.last = Some(message.to_owned());
        let token = ProgressToken(NumberOrString::String(id.into()));
        let progress =
            ProgressNotificationParam::new(token, f64::from(self.count)).with_message(message);
        conversation.progress(progress);
    }
}

/// The wait between two `tasks/get`: the server's suggestion, within bounds.
fn interval(suggested_ms: Option<u64>) -> Duration {
    suggested_ms.map_or(DEFAULT_POLL, |ms| {
        Duration::from_millis(ms).clamp(FASTEST_POLL, SLOWEST_POLL)
    })
}

/// Sends `tasks/cancel` for a task still followed when it is dropped.
struct CancelOnDrop {
    cancel: Option<(Peer<RoleClient>, ClientRequest, RequestMetaObject)>,
}

impl CancelOnDrop {
    fn new(peer: &Peer<RoleClient>, stateless: &Stateless, id: &str) -> Self {
        let mut meta = RequestMetaObject::default();
        stateless.stamp(&mut meta, None);
        let request =
            ClientRequest::CancelTaskRequest(CancelTaskRequest::new(CancelTaskParams::new(id)));
        Self {
            cancel: Some((peer.clone(), request, meta)),
        }
    }

    fn disarm(&mut self) {
        self.cancel = None;
    }
}

impl Drop for CancelOnDrop {
    fn drop(&mut self) {
        let Some((peer, request, meta)) = self.cancel.take() else {
            return;
        };
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return;
        };
        runtime.spawn(async move {
            let options = PeerRequestOptions::no_options().with_meta(meta);
            if let Err(error) = peer.send_request_with_option(request, options).await {
                tracing::debug!(%error, "tasks/cancel not sent");
            }
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_poll_interval_is_the_servers_within_bounds() {
        assert_eq!(interval(None), DEFAULT_POLL);
        assert_eq!(interval(Some(200)), Duration::from_millis(200));
        assert_eq!(interval(Some(0)), FASTEST_POLL);
        assert_eq!(interval(Some(u64::MAX)), SLOWEST_POLL);
    }
}
