//! Long calls (tasks): a tool call that outlives the request that started it, kept as a
//! record its caller asks about later ([`TaskRecord`]), wherever it came from (gRPC
//! `StartToolCall`, the MCP face's tasks). [`Tasks`] starts them, answers their questions,
//! cancels and forgets them, each only for the caller that owns them; the records live in a
//! [`TaskStore`], the calls in this process.

// Sampling is deprecated by MCP 2026-07-28 (SEP-2577) but is what servers use today.
#![expect(
    deprecated,
    reason = "sampling is what servers before MCP 2026-07-28 use"
)]

pub mod record;
pub mod redis_store;
mod run;
pub mod store;

use std::{
    collections::HashMap,
    sync::{Arc, Mutex, PoisonError},
    time::Duration,
};

use rmcp::model::{CreateMessageResult, ElicitResult};
use tokio::sync::{mpsc, watch};
use tokio_util::sync::CancellationToken;
use tracing::Instrument as _;

pub use record::{Asked, Failure, Outcome, Question, TaskRecord, TaskState};
pub use store::{Control, MemoryStore, NotCreated, StoreDown, TaskStore};

use crate::{
    conversation::Conversation,
    core::broker::Called,
    domain::{caller::CallerKey, config, request_error::RequestError},
};

/// How often records past their time are swept away (they are hidden at once), and a shared
/// store's tasks whose process is gone are ended.
const SWEEP_EVERY: Duration = Duration::from_secs(10);
/// Answers that may wait for a task's runner; more at once are refused.
const ANSWER_BUFFER: usize = 64;
/// Records one caller may keep, running or finished, per task it may run: past it, its
/// oldest finished record is forgotten early (a caller cannot grow the store without bound
/// within `tasks.ttl`).
const KEPT_PER_RUNNING: usize = 10;

/// An answer to one of a task's open questions.
#[derive(Debug, serde::Serialize, serde::Deserialize)]
pub enum Answer {
    /// To elicitation `id`.
    Elicit(String, ElicitResult),
    /// To sampling request `id`: a result, or why there is none.
    Sample(String, Result<CreateMessageResult, String>),
}

impl Answer {
    fn question(&self) -> &str {
        match self {
            Answer::Elicit(id, _) | Answer::Sample(id, _) => id,
        }
    }
}

/// Why a running task is stopped before its call ends.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Stop {
    /// Its caller cancelled it.
    Cancelled,
    /// The broker is stopping.
    BrokerStopped,
}

/// A task's record as the store holds it, published by the task's runner in this process;
/// `None` while the store may hold another (a write that failed, or that the store refused).
type Latest = watch::Receiver<Option<Arc<TaskRecord>>>;

/// A task this process runs: how to stop it, where its answers go, and its record as stored.
struct Running {
    stop: watch::Sender<Option<Stop>>,
    answers: mpsc::Sender<Answer>,
    /// Read instead of the store: a shared store's round trip saved for every read and wait
    /// of a task this process runs, and a change seen without the store's channel.
    latest: Latest,
}

struct Inner {
    store: Arc<dyn TaskStore>,
    settings: config::Tasks,
    running: Mutex<HashMap<String, Running>>,
    /// How many tasks this process runs.
    count: watch::Sender<usize>,
}

/// The tasks of every face; clones share them.
#[derive(Clone)]
pub struct Tasks(Arc<Inner>);

impl Tasks {
    /// Tasks kept in `store`, as `settings` say.
    pub fn new(settings: config::Tasks, store: Arc<dyn TaskStore>) -> Self {
        Self(Arc::new(Inner {
            store,
            settings,
            running: Mutex::default(),
            count: watch::Sender::new(0),
        }))
    }

    /// Tasks kept in this process's memory.
    pub fn in_memory(settings: config::Tasks) -> Self {
        Self::new(settings, Arc::new(MemoryStore::default()))
    }

    /// The settings they run by.
    pub fn settings(&self) -> &config::Tasks {
        &self.0.settings
    }

    /// Starts a task of `owner` calling `tool` (on `server`): a record kept from now, and
    /// `call` run with a conversation whose questions become the task's. Refused beyond
    /// `tasks.max_per_caller` running tasks of the owner.
    pub async fn start<F>(
        &self,
        owner: CallerKey,
        tool: String,
        server: String,
        call: impl FnOnce(Conversation) -> F,
    ) -> Result<TaskRecord, RequestError>
    where
        F: Future<Output = Result<Called, RequestError>> + Send + 'static,
    {
        let id = crate::core::unguessable::unguessable();
        let record = TaskRecord::started(id.clone(), owner, tool, server);
        let limit = self.0.settings.max_per_caller;
        let kept = limit.saturating_mul(KEPT_PER_RUNNING);
        self.0
            .store
            .create(record.clone(), limit, kept)
            .await
            .map_err(|refused| match refused {
                NotCreated::TooMany { running } => RequestError::TooManyTasks { running, limit },
                NotCreated::Down(down) => unavailable(down),
            })?;
        let (conversation, events) = Conversation::new();
        let (stop, stopped) = watch::channel(None);
        let (answers, answered) = mpsc::channel(ANSWER_BUFFER);
        let (stored, latest) = watch::channel(Some(Arc::new(record.clone())));
        {
            let mut running = self.lock();
            let entry = Running {
                stop,
                answers,
                latest,
            };
            running.insert(id.clone(), entry);
            self.0.count.send_replace(running.len());
        }
        metrics::gauge!("toolbroker_tasks_running").increment(1);
        // A child of the starting request's span: the call's spans continue its trace, though
        // they outlive it.
        let span = tracing::info_span!("task", task.id = %id, tool = %record.tool);
        let runner = run::Runner {
            tasks: self.clone(),
            record: record.clone(),
            events,
            answered,
            stopped,
            stored,
        };
        let call = call(conversation);
        tokio::spawn(runner.drive(call).instrument(span));
        Ok(record)
    }

    /// Task `id` of `owner`; NOT_FOUND for another caller's, as for none.
    pub async fn get(&self, owner: &CallerKey, id: &str) -> Result<TaskRecord, RequestError> {
        if let Some(record) = self.latest(id).and_then(|latest| latest.borrow().clone()) {
            return owned(owner, id, Some(&*record));
        }
        self.stored(owner, id).await
    }

    /// Task `id` of `owner` as the store has it.
    async fn stored(&self, owner: &CallerKey, id: &str) -> Result<TaskRecord, RequestError> {
        let stored = self.0.store.get(id).await.map_err(unavailable)?;
        owned(owner, id, stored.as_ref())
    }

    /// Task `id`'s record as stored, published by its runner, if this process runs it.
    fn latest(&self, id: &str) -> Option<Latest> {
        self.lock().get(id).map(|running| running.latest.clone())
    }

    /// Every kept task of `owner`, newest first.
    pub async fn list(&self, owner: &CallerKey) -> Result<Vec<TaskRecord>, RequestError> {
        self.0.store.list(owner).await.map_err(unavailable)
    }

    /// Task `id` of `owner` once it ended, or as it stands after `within`.
    pub async fn wait(
        &self,
        owner: &CallerKey,
        id: &str,
        within: Duration,
    ) -> Result<TaskRecord, RequestError> {
        self.wait_until(owner, id, within, |record| record.state.is_terminal())
            .await
    }

    /// Task `id` of `owner` once `settled` holds of it, or as it stands after `within`.
    pub async fn wait_until(
        &self,
        owner: &CallerKey,
        id: &str,
        within: Duration,
        settled: impl Fn(&TaskRecord) -> bool,
    ) -> Result<TaskRecord, RequestError> {
        let until = tokio::time::Instant::now() + within;
        let mut local = self.latest(id);
        loop {
            // This process runs it: its runner tells of each change, with the record.
            if let Some(latest) = local.as_mut() {
                let current = latest.borrow_and_update().clone();
                if let Some(record) = current {
                    let record = owned(owner, id, Some(&*record))?;
                    if settled(&record) {
                        return Ok(record);
                    }
                    tokio::select! {
                        changed = latest.changed() => {
                            if changed.is_err() {
                                // Its runner is done: the store has the last word.
                                local = None;
                            }
                        }
                        () = tokio::time::sleep_until(until) => return Ok(record),
                    }
                    continue;
                }
            }
            // Subscribed before reading, so that no change falls between.
            let changed = self.0.store.changed(id);
            let record = self.stored(owner, id).await?;
            if settled(&record) {
                return Ok(record);
            }
            tokio::select! {
                () = changed => {}
                () = tokio::time::sleep_until(until) => return Ok(record),
            }
        }
    }

    /// Cancels task `id` of `owner`, if it still runs: its call is cancelled on its server,
    /// and it ends cancelled. A task that ended stays as it ended.
    pub async fn cancel(&self, owner: &CallerKey, id: &str) -> Result<(), RequestError> {
        let record = self.get(owner, id).await?;
        if record.state.is_terminal() || self.stop(id, Stop::Cancelled) {
            return Ok(());
        }
        // Another replica runs it.
        self.0
            .store
            .relay(id, Control::Cancel)
            .await
            .map_err(unavailable)?;
        Ok(())
    }

    /// Stops task `id` if this process runs it; whether it does.
    fn stop(&self, id: &str, stop: Stop) -> bool {
        match self.lock().get(id) {
            Some(running) => {
                running.stop.send_replace(Some(stop));
                true
            }
            None => false,
        }
    }

    /// Forgets task `id` of `owner`, which must have ended.
    pub async fn delete(&self, owner: &CallerKey, id: &str) -> Result<(), RequestError> {
        let record = self.get(owner, id).await?;
        if !record.state.is_terminal() {
            return Err(RequestError::OperationState {
                name: id.to_owned(),
                reason: "it is still running; cancel it first, or wait for it to end".into(),
            });
        }
        self.0.store.delete(id).await.map_err(unavailable)?;
        Ok(())
    }

    /// Answers open questions of task `id` of `owner`; each answer must name one.
    pub async fn answer(
        &self,
        owner: &CallerKey,
        id: &str,
        answers: Vec<Answer>,
    ) -> Result<(), RequestError> {
        let record = self.get(owner, id).await?;
        let open = |question: &str| record.questions.iter().any(|q| q.id == question);
        if let Some(stray) = answers.iter().find(|answer| !open(answer.question())) {
            let asked: Vec<&str> = record.questions.iter().map(|q| q.id.as_str()).collect();
            let reason = format!(
                "it has no open question {:?} (open now: {asked:?}); read the operation's metadata for its questions",
                stray.question()
            );
            return Err(RequestError::OperationState {
                name: id.to_owned(),
                reason,
            });
        }
        let sender = self.lock().get(id).map(|running| running.answers.clone());
        let Some(sender) = sender else {
            // Another replica runs it, or none does any more.
            let relayed = self
                .0
                .store
                .relay(id, Control::Answers(answers))
                .await
                .map_err(unavailable)?;
            return match relayed {
                true => Ok(()),
                false => Err(RequestError::OperationState {
                    name: id.to_owned(),
                    reason: "it is not running in this broker any more".into(),
                }),
            };
        };
        deliver(&sender, id, answers)
    }

    /// Ends every task this process runs as failed ("the broker running it stopped"): at
    /// shutdown, once `shutdown_grace` is over.
    pub fn abandon(&self) {
        for running in self.lock().values() {
            running.stop.send_replace(Some(Stop::BrokerStopped));
        }
    }

    /// Resolves once this process runs no task.
    pub async fn idle(&self) {
        let mut count = self.0.count.subscribe();
        let _ = count.wait_for(|n| *n == 0).await;
    }

    /// The task's runner is done with it.
    fn finished(&self, id: &str, state: TaskState) {
        let mut running = self.lock();
        running.remove(id);
        self.0.count.send_replace(running.len());
        metrics::gauge!("toolbroker_tasks_running").decrement(1);
        metrics::counter!("toolbroker_tasks_ended_total", "state" => state.as_str()).increment(1);
    }

    /// Sweeps away records past their time now and then, renews a shared store's lease and
    /// acts on what other replicas relay, until `until` is cancelled (or the tasks are
    /// dropped). To be spawned.
    pub fn keep_swept(
        &self,
        until: CancellationToken,
    ) -> impl Future<Output = ()> + Send + 'static {
        let inner = Arc::downgrade(&self.0);
        let mut relayed = self.0.store.relayed();
        let renew_every = self.0.store.renew_every();
        async move {
            let mut sweep = tokio::time::interval(SWEEP_EVERY);
            sweep.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            let mut renew = tokio::time::interval(renew_every.unwrap_or(Duration::MAX / 4));
            renew.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                let relayed_next = async {
                    match relayed.as_mut() {
                        Some(receiver) => receiver.recv().await,
                        None => std::future::pending().await,
                    }
                };
                tokio::select! {
                    () = until.cancelled() => return,
                    _ = sweep.tick() => {
                        let Some(inner) = inner.upgrade() else { return };
                        inner.store.sweep().await;
                    }
                    _ = renew.tick(), if renew_every.is_some() => {
                        let Some(inner) = inner.upgrade() else { return };
                        inner.store.renew().await;
                    }
                    message = relayed_next => {
                        let Some((id, control)) = message else {
                            relayed = None;
                            continue;
                        };
                        let Some(inner) = inner.upgrade() else { return };
                        Tasks(inner).on_relayed(&id, control);
                    }
                }
            }
        }
    }

    /// Acts on what another replica relayed for task `id`, if this process runs it.
    fn on_relayed(&self, id: &str, control: Control) {
        match control {
            Control::Cancel => {
                self.stop(id, Stop::Cancelled);
            }
            Control::Answers(answers) => {
                let sender = self.lock().get(id).map(|running| running.answers.clone());
                if let Some(sender) = sender
                    && let Err(error) = deliver(&sender, id, answers)
                {
                    tracing::debug!(task.id = id, %error, "relayed answers not delivered");
                }
            }
        }
    }

    /// Task `id`'s record as it stands now, into the store; retried for a while if the store
    /// cannot be reached (a running record left behind would show it running for ever).
    /// Whether the store holds it now.
    async fn save(&self, record: &TaskRecord, last: bool) -> bool {
        let mut delay = Duration::from_millis(100);
        for _ in 0..if last { 10 } else { 1 } {
            match self.0.store.put(record.clone()).await {
                Ok(replaced) => return replaced,
                Err(down) => {
                    tracing::warn!(task.id = %record.id, store = %down.store, reason = %down.reason,
                        "a task's record could not be saved");
                }
            }
            tokio::time::sleep(delay).await;
            delay = (delay * 2).min(Duration::from_secs(5));
        }
        false
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Running>> {
        self.0
            .running
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }
}

/// `found` if `owner` owns it; NOT_FOUND for another caller's task `id`, as for none.
fn owned(
    owner: &CallerKey,
    id: &str,
    found: Option<&TaskRecord>,
) -> Result<TaskRecord, RequestError> {
    match found {
        Some(record) if record.owner == *owner => Ok(record.clone()),
        _ => Err(RequestError::UnknownOperation {
            name: id.to_owned(),
        }),
    }
}

/// Hands `answers` to task `id`'s runner.
fn deliver(
    sender: &mpsc::Sender<Answer>,
    id: &str,
    answers: Vec<Answer>,
) -> Result<(), RequestError> {
    for answer in answers {
        sender
            .try_send(answer)
            .map_err(|_| RequestError::OperationState {
                name: id.to_owned(),
                reason: "too many answers at once, or it just ended; read it again".into(),
            })?;
    }
    Ok(())
}

/// The store could not be reached: UNAVAILABLE, naming it.
fn unavailable(down: StoreDown) -> RequestError {
    RequestError::StateUnavailable {
        redis: down.store,
        reason: down.reason,
    }
}
