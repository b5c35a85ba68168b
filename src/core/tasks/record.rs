//! What is kept of one long call (a task): who owns it, where it stands, its open questions,
//! its last progress and, once it ended, its outcome. Face-neutral: the gRPC face shows it as
//! a `google.longrunning.Operation`, the MCP face as a task. Pure.

// Sampling is deprecated by MCP 2026-07-28 (SEP-2577) but is what servers use today.
#![expect(
    deprecated,
    reason = "sampling is what servers before MCP 2026-07-28 use"
)]

use std::time::SystemTime;

use rmcp::model::{CreateMessageRequestParams, ElicitRequestParams, ProgressNotificationParam};

use crate::{
    core::broker::Called,
    domain::{caller::CallerKey, request_error::Code},
};

/// Where a task stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TaskState {
    /// The call runs.
    Working,
    /// The call waits for answers to its open questions.
    InputRequired,
    /// The call ended with the tool's result.
    Completed,
    /// The call ended without a result.
    Failed,
    /// The call was cancelled.
    Cancelled,
}

impl TaskState {
    /// Whether the call has ended.
    pub fn is_terminal(self) -> bool {
        matches!(self, Self::Completed | Self::Failed | Self::Cancelled)
    }

    /// Its name, as metrics and logs give it (MCP's spelling).
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Working => "working",
            Self::InputRequired => "input_required",
            Self::Completed => "completed",
            Self::Failed => "failed",
            Self::Cancelled => "cancelled",
        }
    }

    /// The state named `name` (as [`TaskState::as_str`] gives it).
    pub fn parse(name: &str) -> Option<Self> {
        [
            Self::Working,
            Self::InputRequired,
            Self::Completed,
            Self::Failed,
            Self::Cancelled,
        ]
        .into_iter()
        .find(|state| state.as_str() == name)
    }
}

/// A question the call's server put to the task's client, open until answered.
#[derive(Clone, Debug)]
pub struct Question {
    /// Its id within the task (`e1`, `s2`, …): the answer names it.
    pub id: String,
    /// What is asked.
    pub asked: Asked,
}

/// What a question asks.
#[derive(Clone, Debug)]
pub enum Asked {
    /// The user (elicitation).
    Elicit(ElicitRequestParams),
    /// The client's model (sampling).
    Sample(CreateMessageRequestParams),
}

/// Why a call ended without a result: the status `CallTool` would have given.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Failure {
    /// The status code.
    pub code: Code,
    /// What went wrong, for people.
    pub message: String,
}

/// How a call ended.
#[derive(Clone, Debug)]
pub enum Outcome {
    /// The tool answered (its result may be an error the tool reported).
    Answered(Called),
    /// The call failed.
    Failed(Failure),
    /// The call was cancelled (by its caller, or by the broker's shutdown).
    Cancelled(String),
}

/// One task's record.
#[derive(Clone, Debug)]
pub struct TaskRecord {
    /// Its unguessable id (the operation is `operations/<id>`).
    pub id: String,
    /// The caller it belongs to: no one else may see or touch it.
    pub owner: CallerKey,
    /// The exposed tool name called.
    pub tool: String,
    /// The configured name of the tool's server.
    pub server: String,
    /// Where it stands.
    pub state: TaskState,
    /// Why it stands there, for people.
    pub status_message: String,
    /// The last progress notification.
    pub progress: Option<ProgressNotificationParam>,
    /// Open questions, oldest first.
    pub questions: Vec<Question>,
    /// When the call started.
    pub created: SystemTime,
    /// When the record last changed.
    pub updated: SystemTime,
    /// When the record is forgotten; `None` while the call runs.
    pub expires: Option<SystemTime>,
    /// How the call ended; `None` while it runs.
    pub outcome: Option<Outcome>,
}

impl TaskRecord {
    /// A running call's first record.
    pub fn started(id: String, owner: CallerKey, tool: String, server: String) -> Self {
        let now = now();
        Self {
            id,
            owner,
            tool,
            server,
            state: TaskState::Working,
            status_message: String::new(),
            progress: None,
            questions: Vec::new(),
            created: now,
            updated: now,
            expires: None,
            outcome: None,
        }
    }

    /// Whether the record is past its time at `now`.
    pub fn expired(&self, now: SystemTime) -> bool {
        self.expires.is_some_and(|expires| expires <= now)
    }

    /// The state the open questions put a running call in.
    pub fn settle_questions(&mut self) {
        if self.state.is_terminal() {
            return;
        }
        self.state = if self.questions.is_empty() {
            TaskState::Working
        } else {
            TaskState::InputRequired
        };
    }

    /// Ends the record with `outcome`, kept for `ttl` from now.
    pub fn end(&mut self, outcome: Outcome, ttl: std::time::Duration) {
        let now = now();
        self.state = match &outcome {
            Outcome::Answered(_) => TaskState::Completed,
            Outcome::Failed(_) => TaskState::Failed,
            Outcome::Cancelled(_) => TaskState::Cancelled,
        };
        self.status_message = match &outcome {
            Outcome::Answered(called) if called.result.is_error == Some(true) => {
                "the tool reported an error".into()
            }
            Outcome::Answered(_) => String::new(),
            Outcome::Failed(failure) => failure.message.clone(),
            Outcome::Cancelled(why) => why.clone(),
        };
        self.questions.clear();
        self.outcome = Some(outcome);
        self.updated = now;
        self.expires = Some(whole_millis(now + ttl));
    }
}

/// Now, as a record keeps it: to the millisecond, as a shared store does, so that a record
/// read from memory and the same record read from the store are one answer.
pub fn now() -> SystemTime {
    whole_millis(SystemTime::now())
}

/// `time` less its part under a millisecond.
fn whole_millis(time: SystemTime) -> SystemTime {
    let since = time
        .duration_since(SystemTime::UNIX_EPOCH)
        .unwrap_or_default();
    SystemTime::UNIX_EPOCH + std::time::Duration::from_millis(since.as_millis() as u64)
}
