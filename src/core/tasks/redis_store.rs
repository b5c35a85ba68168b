//! Task records in the shared Redis (`state.redis`), so that every replica answers for every
//! task: each record a JSON string (`task:<id>`, kept `tasks.ttl` once ended), each owner's ids
//! by start (`tasks:of:<owner>`) and running ids (`tasks:running:<owner>`), and every running
//! id with the replica that runs it (`tasks:runners`). Each step is one script call
//! (`redis/*.lua`). Changes, cancels and answers go to every replica on one pub/sub channel;
//! each replica holds a lease it renews while it lives, and a task whose replica's lease ran
//! out is ended failed by whichever replica sweeps next.

// Sampling is deprecated by MCP 2026-07-28 (SEP-2577) but is what servers use today.
#![expect(
    deprecated,
    reason = "sampling is what servers before MCP 2026-07-28 use"
)]

use std::{
    sync::{Arc, Mutex, PoisonError},
    time::{Duration, SystemTime, UNIX_EPOCH},
};

use futures::future::BoxFuture;
use redis::{AsyncTypedCommands as _, Script};
use rmcp::model::{
    CallToolResult, CreateMessageRequestParams, ElicitRequestParams, ProgressNotificationParam,
};
use serde::{Deserialize, Serialize};
use tokio::sync::{broadcast, mpsc};

use super::{
    Asked, Failure, Outcome, Question, TaskRecord, TaskState,
    store::{Control, NotCreated, StoreDown, TaskStore},
};
use crate::{
    core::broker::Called,
    domain::{
        caller::{CallerKey, CallerKind},
        names::ServerName,
        request_error::Code,
    },
    shared_state::Shared,
};

/// How long a replica's lease lasts: a task of a replica gone this long is ended.
pub const LEASE: Duration = Duration::from_secs(15);
/// How often a live replica renews its lease.
const RENEW_EVERY: Duration = Duration::from_secs(5);
/// A waiter reads its record again at least this often (a change missed while the channel was
/// down is seen late, not never).
const REREAD_EVERY: Duration = Duration::from_secs(2);
/// How long an owner's indexes outlive its last task start, beyond `tasks.ttl`.
const INDEX_MARGIN: Duration = Duration::from_secs(24 * 3600);
/// The channel changes, cancels and answers go on (under the prefix).
const CHANNEL: &str = "tasks";
/// Why a reaped task failed.
const REAPED: &str = "the broker running it stopped before the call ended; start it again";

/// The scripts, loaded once.
struct Scripts {
    create: Script,
    put: Script,
    list: Script,
    delete: Script,
    reap: Script,
    relay: Script,
}

/// Task records in Redis.
pub struct RedisStore {
    shared: Shared,
    scripts: Scripts,
    ttl: Duration,
    /// Ids of changed tasks, for this process's waiters.
    changes: broadcast::Sender<Arc<str>>,
    /// What other replicas relay, until [`TaskStore::relayed`] takes it.
    relayed: Mutex<Option<mpsc::UnboundedReceiver<(String, Control)>>>,
}

impl RedisStore {
    /// Records in `shared`'s Redis, an ended one kept for `ttl`. Listens to the channel from
    /// now on (so it must be made within the runtime).
    pub fn new(shared: Shared, ttl: Duration) -> Self {
        let (changes, _) = broadcast::channel(1024);
        let (relay, relayed) = mpsc::unbounded_channel();
        let mut messages = shared.listen(CHANNEL);
        let heard = changes.clone();
        tokio::spawn(async move {
            while let Some(message) = messages.recv().await {
                match parse_message(&message) {
                    Some(Message::Changed(id)) => {
                        let _ = heard.send(id.into());
                    }
                    Some(Message::Relayed(id, control)) => {
                        if relay.send((id.to_owned(), control)).is_err() {
                            return;
                        }
                    }
                    None => tracing::debug!("an unreadable message on the tasks channel"),
                }
            }
        });
        Self {
            shared,
            scripts: Scripts {
                create: Script::new(include_str!("redis/create.lua")),
                put: Script::new(include_str!("redis/put.lua")),
                list: Script::new(include_str!("redis/list.lua")),
                delete: Script::new(include_str!("redis/delete.lua")),
                reap: Script::new(include_str!("redis/reap.lua")),
                relay: Script::new(include_str!("redis/relay.lua")),
            },
            ttl,
            changes,
            relayed: Mutex::new(Some(relayed)),
        }
    }

    fn record_key(&self, id: &str) -> String {
        self.shared.key(&format!("task:{id}"))
    }

    fn owner_keys(&self, owner: &CallerKey) -> (String, String) {
        let owner = format!("{}:{}", owner.kind.name(), owner.id);
        (
            self.shared.key(&format!("tasks:of:{owner}")),
            self.shared.key(&format!("tasks:running:{owner}")),
        )
    }

    fn runners_key(&self) -> String {
        self.shared.key("tasks:runners")
    }

    fn lease_key(&self) -> String {
        self.shared.key(&format!("lease:{}", self.shared.replica()))
    }

    /// A failed command, counted and turned into the store's error.
    fn down(&self, what: &'static str, error: &redis::RedisError) -> StoreDown {
        self.shared.failed(what, error);
        StoreDown {
            store: self.shared.shown().to_owned(),
            reason: error.to_string(),
        }
    }

    fn worked<T>(&self, value: T) -> T {
        self.shared.worked();
        value
    }
}

impl TaskStore for RedisStore {
    fn create(
        &self,
        record: TaskRecord,
        max_running: usize,
        max_kept: usize,
    ) -> BoxFuture<'_, Result<(), NotCreated>> {
        Box::pin(async move {
            let (of, running) = self.owner_keys(&record.owner);
            let json = Stored::from(&record).to_json();
            let keep_index = self.ttl + INDEX_MARGIN;
            let result: Result<i64, _> = self
                .scripts
                .create
                .key(self.record_key(&record.id))
                .key(of)
                .key(running)
                .key(self.runners_key())
                .key(self.lease_key())
                .arg(&record.id)
                .arg(json)
                .arg(millis(record.created))
                .arg(max_running)
                .arg(max_kept)
                .arg(self.shared.replica())
                .arg(self.shared.prefix())
                .arg(keep_index.as_millis() as u64)
                .arg(LEASE.as_millis() as u64)
                .invoke_async(&mut self.shared.connection())
                .await;
            match result {
                Ok(-1) => {
                    self.shared.worked();
                    Ok(())
                }
                Ok(running) => {
                    self.shared.worked();
                    Err(NotCreated::TooMany {
                        running: running.max(0) as usize,
                    })
                }
                Err(error) => Err(NotCreated::Down(self.down("task_create", &error))),
            }
        })
    }

    fn put(&self, record: TaskRecord) -> BoxFuture<'_, Result<bool, StoreDown>> {
        Box::pin(async move {
            let (_, running) = self.owner_keys(&record.owner);
            let ended = record.state.is_terminal();
            let keep = record
                .expires
                .and_then(|expires| expires.duration_since(SystemTime::now()).ok())
                .unwrap_or_default()
                .as_millis()
                .max(1) as u64;
            let result: Result<i64, _> = self
                .scripts
                .put
                .key(self.record_key(&record.id))
                .key(running)
                .key(self.runners_key())
                .arg(&record.id)
                .arg(Stored::from(&record).to_json())
                .arg(if ended { "1" } else { "0" })
                .arg(keep)
                .arg(self.shared.key(CHANNEL))
                .invoke_async(&mut self.shared.connection())
                .await;
            match result {
                Ok(replaced) => Ok(self.worked(replaced == 1)),
                Err(error) => Err(self.down("task_put", &error)),
            }
        })
    }

    fn get<'a>(&'a self, id: &'a str) -> BoxFuture<'a, Result<Option<TaskRecord>, StoreDown>> {
        Box::pin(async move {
            let found = self
                .shared
                .connection()
                .get(self.record_key(id))
                .await
                .map_err(|error| self.down("task_get", &error))?;
            self.shared.worked();
            let now = SystemTime::now();
            Ok(found
                .and_then(|json| read(&json))
                .filter(|record| !record.expired(now)))
        })
    }

    fn list<'a>(
        &'a self,
        owner: &'a CallerKey,
    ) -> BoxFuture<'a, Result<Vec<TaskRecord>, StoreDown>> {
        Box::pin(async move {
            let (of, _) = self.owner_keys(owner);
            let found: Vec<String> = self
                .scripts
                .list
                .key(of)
                .arg(self.shared.prefix())
                .invoke_async(&mut self.shared.connection())
                .await
                .map_err(|error| self.down("task_list", &error))?;
            self.shared.worked();
            let now = SystemTime::now();
            Ok(found
                .iter()
                .filter_map(|json| read(json))
                .filter(|record| !record.expired(now))
                .collect())
        })
    }

    fn delete<'a>(&'a self, id: &'a str) -> BoxFuture<'a, Result<bool, StoreDown>> {
        Box::pin(async move {
            let deleted: i64 = self
                .scripts
                .delete
                .key(self.record_key(id))
                .key(self.runners_key())
                .arg(id)
                .arg(self.shared.prefix())
                .arg(self.shared.key(CHANNEL))
                .invoke_async(&mut self.shared.connection())
                .await
                .map_err(|error| self.down("task_delete", &error))?;
            Ok(self.worked(deleted == 1))
        })
    }

    fn changed(&self, id: &str) -> BoxFuture<'static, ()> {
        let mut changes = self.changes.subscribe();
        let id: Arc<str> = id.into();
        Box::pin(async move {
            let heard = async {
                loop {
                    match changes.recv().await {
                        Ok(changed) if changed == id => return,
                        Ok(_) => {}
                        // Fell behind: something may have changed; read again.
                        Err(broadcast::error::RecvError::Lagged(_)) => return,
                        Err(broadcast::error::RecvError::Closed) => {
                            std::future::pending::<()>().await;
                        }
                    }
                }
            };
            let _ = tokio::time::timeout(REREAD_EVERY, heard).await;
        })
    }

    fn sweep(&self) -> BoxFuture<'_, ()> {
        Box::pin(async move {
            let reaped: Result<i64, _> = self
                .scripts
                .reap
                .key(self.runners_key())
                .arg(self.shared.prefix())
                .arg(self.shared.key(CHANNEL))
                .arg(millis(SystemTime::now()))
                .arg(self.ttl.as_millis() as u64)
                .arg(REAPED)
                .invoke_async(&mut self.shared.connection())
                .await;
            match reaped {
                Ok(0) => self.shared.worked(),
                Ok(reaped) => {
                    self.shared.worked();
                    tracing::warn!(
                        reaped,
                        "tasks of a replica that is gone were ended failed (its lease ran out)"
                    );
                    metrics::counter!("toolbroker_tasks_ended_total", "state" => "failed")
                        .increment(reaped as u64);
                }
                Err(error) => {
                    self.down("task_sweep", &error);
                }
            }
        })
    }

    fn relay<'a>(
        &'a self,
        id: &'a str,
        control: Control,
    ) -> BoxFuture<'a, Result<bool, StoreDown>> {
        Box::pin(async move {
            let message = write_message(id, &control);
            let relayed: i64 = self
                .scripts
                .relay
                .key(self.runners_key())
                .arg(id)
                .arg(self.shared.key(CHANNEL))
                .arg(message)
                .invoke_async(&mut self.shared.connection())
                .await
                .map_err(|error| self.down("task_relay", &error))?;
            Ok(self.worked(relayed == 1))
        })
    }

    fn relayed(&self) -> Option<mpsc::UnboundedReceiver<(String, Control)>> {
        self.relayed
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take()
    }

    fn renew(&self) -> BoxFuture<'_, ()> {
        Box::pin(async move {
            let renewed = self
                .shared
                .connection()
                .pset_ex(self.lease_key(), "1", LEASE.as_millis() as u64)
                .await;
            match renewed {
                Ok(()) => self.shared.worked(),
                Err(error) => {
                    self.down("lease", &error);
                }
            }
        })
    }

    fn renew_every(&self) -> Option<Duration> {
        Some(RENEW_EVERY)
    }
}

/// What goes on the channel.
enum Message<'a> {
    /// A task's record changed: `c <id>`.
    Changed(&'a str),
    /// A cancel (`x <id>`) or answers (`a <id>\n<JSON>`) for the replica that runs it.
    Relayed(&'a str, Control),
}

fn write_message(id: &str, control: &Control) -> String {
    match control {
        Control::Cancel => format!("x {id}"),
        Control::Answers(answers) => format!(
            "a {id}\n{}",
            serde_json::to_string(answers).expect("answers serialize")
        ),
    }
}

fn parse_message(message: &[u8]) -> Option<Message<'_>> {
    let text = std::str::from_utf8(message).ok()?;
    let (head, body) = text.split_once('\n').unwrap_or((text, ""));
    let (kind, id) = head.split_once(' ')?;
    match kind {
        "c" => Some(Message::Changed(id)),
        "x" => Some(Message::Relayed(id, Control::Cancel)),
        "a" => Some(Message::Relayed(
            id,
            Control::Answers(serde_json::from_str(body).ok()?),
        )),
        _ => None,
    }
}

/// A record as Redis keeps it: plain fields the scripts can read (and the reaper change).
#[derive(Serialize, Deserialize)]
struct Stored {
    id: String,
    owner_kind: String,
    owner_id: String,
    tool: String,
    server: String,
    state: String,
    status_message: String,
    #[serde(default)]
    progress: Option<ProgressNotificationParam>,
    /// Absent when empty (the reaper leaves it out).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    questions: Vec<StoredQuestion>,
    created_ms: u64,
    updated_ms: u64,
    #[serde(default)]
    expires_ms: Option<u64>,
    #[serde(default)]
    outcome: Option<StoredOutcome>,
}

#[derive(Serialize, Deserialize)]
struct StoredQuestion {
    id: String,
    #[serde(default)]
    elicit: Option<ElicitRequestParams>,
    #[serde(default)]
    sample: Option<CreateMessageRequestParams>,
}

#[derive(Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
enum StoredOutcome {
    Answered {
        server: String,
        result: CallToolResult,
    },
    Failed {
        code: String,
        message: String,
    },
    Cancelled {
        reason: String,
    },
}

impl Stored {
    fn to_json(&self) -> String {
        serde_json::to_string(self).expect("a record serializes")
    }
}

impl From<&TaskRecord> for Stored {
    fn from(record: &TaskRecord) -> Self {
        let questions = record
            .questions
            .iter()
            .map(|question| {
                let (elicit, sample) = match &question.asked {
                    Asked::Elicit(params) => (Some(params.clone()), None),
                    Asked::Sample(params) => (None, Some(params.clone())),
                };
                StoredQuestion {
                    id: question.id.clone(),
                    elicit,
                    sample,
                }
            })
            .collect();
        let outcome = record.outcome.as_ref().map(|outcome| match outcome {
            Outcome::Answered(called) => StoredOutcome::Answered {
                server: called.server.to_string(),
                result: called.result.clone(),
            },
            Outcome::Failed(failure) => StoredOutcome::Failed {
                code: failure.code.name().to_owned(),
                message: failure.message.clone(),
            },
            Outcome::Cancelled(reason) => StoredOutcome::Cancelled {
                reason: reason.clone(),
            },
        });
        Self {
            id: record.id.clone(),
            owner_kind: record.owner.kind.name().to_owned(),
            owner_id: record.owner.id.clone(),
            tool: record.tool.clone(),
            server: record.server.clone(),
            state: record.state.as_str().to_owned(),
            status_message: record.status_message.clone(),
            progress: record.progress.clone(),
            questions,
            created_ms: millis(record.created),
            updated_ms: millis(record.updated),
            expires_ms: record.expires.map(millis),
            outcome,
        }
    }
}

/// The record `json` holds; `None` (logged) if it cannot be read.
fn read(json: &str) -> Option<TaskRecord> {
    let record = serde_json::from_str::<Stored>(json)
        .ok()
        .and_then(|stored| stored.into_record());
    if record.is_none() {
        tracing::warn!("a task record in Redis cannot be read; it is ignored");
    }
    record
}

impl Stored {
    fn into_record(self) -> Option<TaskRecord> {
        let state = TaskState::parse(&self.state)?;
        let questions = self
            .questions
            .into_iter()
            .map(|question| {
                let asked = match (question.elicit, question.sample) {
                    (Some(params), _) => Asked::Elicit(params),
                    (None, Some(params)) => Asked::Sample(params),
                    (None, None) => return None,
                };
                Some(Question {
                    id: question.id,
                    asked,
                })
            })
            .collect::<Option<Vec<_>>>()?;
        let outcome = match self.outcome {
            None => None,
            Some(StoredOutcome::Answered { server, result }) => Some(Outcome::Answered(Called {
                server: ServerName::parse(&server).ok()?,
                result,
            })),
            Some(StoredOutcome::Failed { code, message }) => Some(Outcome::Failed(Failure {
                code: Code::parse(&code)?,
                message,
            })),
            Some(StoredOutcome::Cancelled { reason }) => Some(Outcome::Cancelled(reason)),
        };
        Some(TaskRecord {
            id: self.id,
            owner: CallerKey {
                kind: CallerKind::parse(&self.owner_kind)?,
                id: self.owner_id,
            },
            tool: self.tool,
            server: self.server,
            state,
            status_message: self.status_message,
            progress: self.progress,
            questions,
            created: from_millis(self.created_ms),
            updated: from_millis(self.updated_ms),
            expires: self.expires_ms.map(from_millis),
            outcome,
        })
    }
}

fn millis(time: SystemTime) -> u64 {
    time.duration_since(UNIX_EPOCH)
        .map_or(0, |since| since.as_millis() as u64)
}

fn from_millis(ms: u64) -> SystemTime {
    UNIX_EPOCH + Duration::from_millis(ms)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_record_reads_back_as_it_was_written_and_as_the_reaper_leaves_it() {
        let mut record = TaskRecord::started(
            "id1".into(),
            CallerKey::token("alice:x"),
            "fs_read".into(),
            "fs".into(),
        );
        record.questions.push(Question {
            id: "e1".into(),
            asked: Asked::Elicit(
                serde_json::from_value(serde_json::json!({
                    "message": "name?",
                    "requestedSchema": {"type": "object", "properties": {}}
                }))
                .unwrap(),
            ),
        });
        let json = Stored::from(&record).to_json();
        let back = read(&json).unwrap();
        assert_eq!(back.owner, record.owner);
        assert_eq!(back.questions.len(), 1);
        // Times to the millisecond, as records keep them: the same record from memory or Redis.
        assert_eq!(back.created, record.created);
        assert_eq!(back.updated, record.updated);
        let called = Called {
            server: ServerName::parse("fs").unwrap(),
            result: CallToolResult::success(vec![rmcp::model::ContentBlock::text("done")]),
        };
        let mut ended = record.clone();
        ended.end(
            Outcome::Answered(called),
            Duration::from_micros(3_600_000_123),
        );
        let back = read(&Stored::from(&ended).to_json()).unwrap();
        assert_eq!((back.updated, back.expires), (ended.updated, ended.expires));
        assert_eq!(back.state, TaskState::Completed);

        // What reap.lua writes: no questions key, a failed outcome, numbers as Lua prints them.
        let mut reaped: serde_json::Value = serde_json::from_str(&json).unwrap();
        let object = reaped.as_object_mut().unwrap();
        object.remove("questions");
        object.insert("state".into(), "failed".into());
        object.insert(
            "outcome".into(),
            serde_json::json!({"failed": {"code": "UNAVAILABLE", "message": REAPED}}),
        );
        // cjson prints numbers with %.14g: a 13-digit millisecond count as an integer.
        object.insert("expires_ms".into(), serde_json::json!(1_733_300_000_000u64));
        let failed = read(&reaped.to_string()).unwrap();
        assert_eq!(failed.state, TaskState::Failed);
        assert!(matches!(
            failed.outcome,
            Some(Outcome::Failed(Failure {
                code: Code::Unavailable,
                ..
            }))
        ));
    }

    #[test]
    fn channel_messages_read_back() {
        let answers = vec![super::super::Answer::Sample("s1".into(), Err("no".into()))];
        let written = write_message("t1", &Control::Answers(answers));
        let Some(Message::Relayed("t1", Control::Answers(read))) =
            parse_message(written.as_bytes())
        else {
            panic!("{written}")
        };
        assert_eq!(read.len(), 1);
        assert!(matches!(
            parse_message(b"x t2"),
            Some(Message::Relayed("t2", Control::Cancel))
        ));
        assert!(matches!(
            parse_message(b"c t3"),
            Some(Message::Changed("t3"))
        ));
        assert!(parse_message(b"zzz").is_none());
    }
}
