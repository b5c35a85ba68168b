//! One task's runner: drives its call, turns what the call's server asks into the task's open
//! questions and its progress into the record, delivers the answers, and records how the call
//! ended. It is the record's one writer while the call runs.

// Sampling is deprecated by MCP 2026-07-28 (SEP-2577) but is what servers use today.
#![expect(
    deprecated,
    reason = "sampling is what servers before MCP 2026-07-28 use"
)]

use std::{collections::HashMap, sync::Arc};

use rmcp::model::{CreateMessageResult, ElicitResult};
use tokio::sync::{mpsc, oneshot, watch};

use super::{Answer, Asked, Failure, Outcome, Question, Stop, TaskRecord, Tasks};
use crate::{
    conversation::Interaction,
    core::broker::Called,
    domain::request_error::{Code, RequestError},
};

/// What a task's runner holds.
pub(super) struct Runner {
    pub tasks: Tasks,
    pub record: TaskRecord,
    pub events: mpsc::Receiver<Interaction>,
    pub answered: mpsc::Receiver<Answer>,
    pub stopped: watch::Receiver<Option<Stop>>,
    /// Where the record goes each time the store holds it (for this process's readers).
    pub stored: watch::Sender<Option<Arc<TaskRecord>>>,
}

/// Where the answer to an open question goes.
enum Reply {
    Elicit(oneshot::Sender<ElicitResult>),
    Sample(oneshot::Sender<Result<CreateMessageResult, String>>),
}

impl Runner {
    /// Runs `call` to its end (or until the task is stopped) and records how it ended.
    pub async fn drive(
        self,
        call: impl Future<Output = Result<Called, RequestError>> + Send + 'static,
    ) {
        let Runner {
            tasks,
            record,
            mut events,
            mut answered,
            mut stopped,
            stored,
        } = self;
        let mut task = Task {
            tasks,
            record,
            replies: HashMap::new(),
            asked: 0,
            stored,
        };
        let mut call = Box::pin(call);
        let outcome = loop {
            tokio::select! {
                biased;
                stop = stop_of(&mut stopped) => break self::stopped(stop),
                result = &mut call => break ended(result),
                Some(interaction) = events.recv() => {
                    if task.show(interaction) {
                        task.save().await;
                    }
                }
                Some(answer) = answered.recv() => {
                    task.deliver(answer);
                    task.save().await;
                }
            }
        };
        // The call is dropped first, which cancels it on its server, so that a task recorded
        // as cancelled is cancelled upstream too.
        drop(call);
        // Progress that came before the result but was read after it still counts.
        while let Ok(interaction) = events.try_recv() {
            if let Interaction::Progress(progress) = interaction {
                task.record.progress = Some(progress);
            }
        }
        task.replies.clear();
        task.record.end(outcome, task.tasks.settings().ttl);
        let state = task.record.state;
        let held = task.tasks.save(&task.record, true).await;
        // Before the task leaves the running ones: a waiter here sees its end without the store.
        task.publish(held);
        task.tasks.finished(&task.record.id, state);
    }
}

/// A running task: its record and the replies its open questions wait for.
struct Task {
    tasks: Tasks,
    record: TaskRecord,
    replies: HashMap<String, Reply>,
    /// Questions asked so far (their ids count).
    asked: u64,
    stored: watch::Sender<Option<Arc<TaskRecord>>>,
}

impl Task {
    /// Takes what the server sent into the record; whether the record changed.
    fn show(&mut self, interaction: Interaction) -> bool {
        let asked = &mut self.asked;
        let replies = &mut self.replies;
        let mut next_id = |kind: &str| {
            *asked += 1;
            format!("{kind}{asked}")
        };
        match interaction {
            Interaction::Progress(progress) => {
                if let Some(message) = &progress.message {
                    self.record.status_message.clone_from(message);
                }
                self.record.progress = Some(progress);
            }
            // A task has no stream to show log messages on.
            Interaction::Log(_) => return false,
            Interaction::Elicit { params, answer } => {
                let id = next_id("e");
                replies.insert(id.clone(), Reply::Elicit(answer));
                self.record.questions.push(Question {
                    id,
                    asked: Asked::Elicit(params),
                });
            }
            Interaction::Sample { params, answer } => {
                let id = next_id("s");
                replies.insert(id.clone(), Reply::Sample(answer));
                self.record.questions.push(Question {
                    id,
                    asked: Asked::Sample(params),
                });
            }
        }
        self.record.settle_questions();
        true
    }

    /// Sends `answer` to the server request it answers, closing its question.
    fn deliver(&mut self, answer: Answer) {
        let id = answer.question().to_owned();
        let reply = self.replies.remove(&id);
        match (reply, answer) {
            (Some(Reply::Elicit(reply)), Answer::Elicit(_, result)) => {
                let _ = reply.send(result);
            }
            (Some(Reply::Sample(reply)), Answer::Sample(_, result)) => {
                let _ = reply.send(result);
            }
            // An elicitation answered as sampling (or the other way): the question stays.
            (Some(reply), _) => {
                self.replies.insert(id, reply);
                return;
            }
            (None, _) => return,
        }
        self.record.questions.retain(|question| question.id != id);
        self.record.settle_questions();
    }

    async fn save(&mut self) {
        self.record.updated = super::record::now();
        let held = self.tasks.save(&self.record, false).await;
        self.publish(held);
    }

    /// The record to this process's readers if the store now `held` it; else they ask the store.
    fn publish(&self, held: bool) {
        self.stored
            .send_replace(held.then(|| Arc::new(self.record.clone())));
    }
}

/// Why the task is stopped, once it is (the broker's stop if its sender is gone).
async fn stop_of(stopped: &mut watch::Receiver<Option<Stop>>) -> Stop {
    let stop = stopped
        .wait_for(Option::is_some)
        .await
        .ok()
        .and_then(|stop| *stop);
    stop.unwrap_or(Stop::BrokerStopped)
}

/// How a call that ended, ended.
fn ended(result: Result<Called, RequestError>) -> Outcome {
    match result {
        Ok(called) => Outcome::Answered(called),
        Err(error) => Outcome::Failed(Failure {
            code: error.class().code,
            message: error.to_string(),
        }),
    }
}

/// How a task stopped before its call ended, ended.
fn stopped(stop: Stop) -> Outcome {
    match stop {
        Stop::Cancelled => Outcome::Cancelled("cancelled by its caller".into()),
        Stop::BrokerStopped => Outcome::Failed(Failure {
            code: Code::Unavailable,
            message: "the broker running it stopped before the call ended; start it again".into(),
        }),
    }
}
