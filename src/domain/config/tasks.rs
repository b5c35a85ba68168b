//! The `tasks` section: how long a finished long call (an operation, a task of the MCP face)
//! is kept, how many one caller may run at once, and whether the MCP face makes every call of
//! a task-capable client a task. Pure.

use std::time::Duration;

use serde::Deserialize;
use serde_json::Value;

use super::validate::Checker;

/// How long a finished task is kept when the file says nothing.
pub const DEFAULT_TASK_TTL: Duration = Duration::from_secs(3600);
/// The longest a finished task may be kept: a week of records is already a lot of memory.
pub const MAX_TASK_TTL: Duration = Duration::from_secs(7 * 24 * 3600);
/// Tasks one caller may run at once when the file says nothing.
pub const DEFAULT_TASKS_PER_CALLER: usize = 100;
/// The most `tasks.max_per_caller` may allow: each running task holds a call and its record.
pub const MAX_TASKS_PER_CALLER: u64 = 10_000;

/// The `tasks` section, checked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Tasks {
    /// How long a finished task is kept before it is forgotten.
    pub ttl: Duration,
    /// Tasks one caller may run at once.
    pub max_per_caller: usize,
    /// The MCP face answers every `tools/call` of a task-capable client with a task.
    pub always: bool,
}

impl Default for Tasks {
    fn default() -> Self {
        Self {
            ttl: DEFAULT_TASK_TTL,
            max_per_caller: DEFAULT_TASKS_PER_CALLER,
            always: false,
        }
    }
}

#[derive(Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawTasks {
    ttl: Option<Value>,
    max_per_caller: Option<u64>,
    always: Option<bool>,
}

impl Checker<'_, '_> {
    /// The `tasks` section; its defaults when absent.
    pub(super) fn tasks(&mut self, raw: Option<Value>) -> Tasks {
        let Some(raw) = self.section::<RawTasks>(raw, "tasks") else {
            return Tasks::default();
        };
        let mut ttl = self.duration_at_most(raw.ttl, DEFAULT_TASK_TTL, MAX_TASK_TTL, "tasks.ttl");
        if ttl.is_zero() {
            self.error(
                "tasks.ttl",
                "must be more than 0: a finished task must be collectable",
            );
            ttl = DEFAULT_TASK_TTL;
        }
        Tasks {
            ttl,
            max_per_caller: self.count(
                raw.max_per_caller,
                DEFAULT_TASKS_PER_CALLER,
                1..=MAX_TASKS_PER_CALLER,
                "tasks.max_per_caller",
            ),
            always: raw.always.unwrap_or(false),
        }
    }
}
