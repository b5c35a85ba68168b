//! Where task records are kept: [`TaskStore`], the small interface a shared store (Redis, for
//! many replicas: `redis_store.rs`) takes over, and [`MemoryStore`], one process's. The store
//! keeps records and tells of their changes; a shared one also carries cancels and answers to
//! the process running a task, and notices when that process is gone. Running the calls is not
//! its business.

use std::{
    collections::{HashMap, VecDeque},
    sync::{Mutex, PoisonError},
    time::SystemTime,
};

use futures::future::BoxFuture;
use tokio::sync::{mpsc, watch};

use super::{Answer, record::TaskRecord};
use crate::domain::caller::CallerKey;

/// The store could not be reached (a shared one); why, for people.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoreDown {
    /// Where the store is (no password).
    pub store: String,
    /// What failed.
    pub reason: String,
}

/// Why a task could not be created.
#[derive(Debug, PartialEq, Eq)]
pub enum NotCreated {
    /// Its owner runs as many as it may.
    TooMany {
        /// How many the caller runs.
        running: usize,
    },
    /// The store could not be reached.
    Down(StoreDown),
}

/// What one process asks of the process that runs a task (through a shared store).
#[derive(Debug, serde::Serialize, serde::Deserialize)]
pub enum Control {
    /// Cancel it.
    Cancel,
    /// Deliver these answers to its open questions.
    Answers(Vec<Answer>),
}

/// Where task records live. Every method is one step for a shared store (one round trip).
pub trait TaskStore: Send + Sync + 'static {
    /// Keeps `record`, a new running task of this process, unless its owner runs
    /// `max_running` already; past `max_kept` records of the owner, its oldest finished one is
    /// forgotten.
    fn create(
        &self,
        record: TaskRecord,
        max_running: usize,
        max_kept: usize,
    ) -> BoxFuture<'_, Result<(), NotCreated>>;

    /// Replaces a task's record (the task's runner is its one writer while it runs); nothing if
    /// it was forgotten or has ended (a shared store may have ended it for a runner it thought
    /// gone). A finished record is kept until its `expires`. Whether it was replaced.
    fn put(&self, record: TaskRecord) -> BoxFuture<'_, Result<bool, StoreDown>>;

    /// The record of task `id`, if kept and not expired.
    fn get<'a>(&'a self, id: &'a str) -> BoxFuture<'a, Result<Option<TaskRecord>, StoreDown>>;

    /// Every kept record of `owner`, newest first.
    fn list<'a>(
        &'a self,
        owner: &'a CallerKey,
    ) -> BoxFuture<'a, Result<Vec<TaskRecord>, StoreDown>>;

    /// Forgets task `id`; whether it was kept.
    fn delete<'a>(&'a self, id: &'a str) -> BoxFuture<'a, Result<bool, StoreDown>>;

    /// Resolves at the next change of task `id` after this call (at once if it is not kept),
    /// or after a while: a waiter reads the record again either way. The subscription is
    /// taken before the future is first polled.
    fn changed(&self, id: &str) -> BoxFuture<'static, ()>;

    /// Forgets the records past their time, and ends those whose process is gone; run now and
    /// then.
    fn sweep(&self) -> BoxFuture<'_, ()>;

    /// Sends `control` to the process that runs task `id`, when it may be another one (a
    /// shared store); `Ok(false)` when no other process can run it.
    fn relay<'a>(
        &'a self,
        _id: &'a str,
        _control: Control,
    ) -> BoxFuture<'a, Result<bool, StoreDown>> {
        Box::pin(std::future::ready(Ok(false)))
    }

    /// What other processes relay to the tasks of this one (a shared store's); `None` when
    /// nothing can be relayed.
    fn relayed(&self) -> Option<mpsc::UnboundedReceiver<(String, Control)>> {
        None
    }

    /// Tells the other processes that this one still runs its tasks (a shared store's lease);
    /// called every [`TaskStore::renew_every`].
    fn renew(&self) -> BoxFuture<'_, ()> {
        Box::pin(std::future::ready(()))
    }

    /// How often [`TaskStore::renew`] is due; `None`: never.
    fn renew_every(&self) -> Option<std::time::Duration> {
        None
    }
}

/// One kept record and who waits for its changes.
struct Kept {
    record: TaskRecord,
    changes: watch::Sender<()>,
}

/// One owner's records: their ids, oldest first, and how many of them run.
#[derive(Default)]
struct Owned {
    ids: VecDeque<String>,
    running: usize,
}

#[derive(Default)]
struct Records {
    by_id: HashMap<String, Kept>,
    by_owner: HashMap<CallerKey, Owned>,
}

impl Records {
    fn remove(&mut self, id: &str) -> Option<Kept> {
        let kept = self.by_id.remove(id)?;
        if let Some(owned) = self.by_owner.get_mut(&kept.record.owner) {
            // Most often the oldest (expired, or making room): no scan.
            if owned.ids.front().is_some_and(|first| first == id) {
                owned.ids.pop_front();
            } else {
                owned.ids.retain(|kept_id| kept_id != id);
            }
            if !kept.record.state.is_terminal() {
                owned.running = owned.running.saturating_sub(1);
            }
            if owned.ids.is_empty() {
                self.by_owner.remove(&kept.record.owner);
            }
        }
        // Its waiters see the change (the record is gone).
        kept.changes.send_replace(());
        Some(kept)
    }

    /// The oldest finished record of `owner`, if any.
    fn oldest_finished(&self, owner: &CallerKey) -> Option<String> {
        let owned = self.by_owner.get(owner)?;
        owned
            .ids
            .iter()
            .find(|id| {
                self.by_id
                    .get(id.as_str())
                    .is_some_and(|kept| kept.record.state.is_terminal())
            })
            .cloned()
    }
}

/// The records of one process, in memory.
#[derive(Default)]
pub struct MemoryStore {
    records: Mutex<Records>,
}

impl MemoryStore {
    fn lock(&self) -> std::sync::MutexGuard<'_, Records> {
        self.records.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl TaskStore for MemoryStore {
    fn create(
        &self,
        record: TaskRecord,
        max_running: usize,
        max_kept: usize,
    ) -> BoxFuture<'_, Result<(), NotCreated>> {
        let created = (|| {
            let mut records = self.lock();
            let owner = record.owner.clone();
            let (running, kept) = records
                .by_owner
                .get(&owner)
                .map_or((0, 0), |owned| (owned.running, owned.ids.len()));
            if running >= max_running {
                return Err(NotCreated::TooMany { running });
            }
            if kept >= max_kept
                && let Some(id) = records.oldest_finished(&owner)
            {
                records.remove(&id);
            }
            let id = record.id.clone();
            let owned = records.by_owner.entry(owner).or_default();
            owned.ids.push_back(id.clone());
            owned.running += 1;
            let (changes, _) = watch::channel(());
            records.by_id.insert(id, Kept { record, changes });
            Ok(())
        })();
        Box::pin(std::future::ready(created))
    }

    fn put(&self, record: TaskRecord) -> BoxFuture<'_, Result<bool, StoreDown>> {
        let mut records = self.lock();
        let Records { by_id, by_owner } = &mut *records;
        let mut replaced = false;
        if let Some(kept) = by_id.get_mut(&record.id)
            && !kept.record.state.is_terminal()
        {
            let ended = !kept.record.state.is_terminal() && record.state.is_terminal();
            if ended && let Some(owned) = by_owner.get_mut(&record.owner) {
                owned.running = owned.running.saturating_sub(1);
            }
            kept.record = record;
            kept.changes.send_replace(());
            replaced = true;
        }
        Box::pin(std::future::ready(Ok(replaced)))
    }

    fn get<'a>(&'a self, id: &'a str) -> BoxFuture<'a, Result<Option<TaskRecord>, StoreDown>> {
        let now = SystemTime::now();
        let found = self
            .lock()
            .by_id
            .get(id)
            .filter(|kept| !kept.record.expired(now))
            .map(|kept| kept.record.clone());
        Box::pin(std::future::ready(Ok(found)))
    }

    fn list<'a>(
        &'a self,
        owner: &'a CallerKey,
    ) -> BoxFuture<'a, Result<Vec<TaskRecord>, StoreDown>> {
        let now = SystemTime::now();
        let records = self.lock();
        let listed = records
            .by_owner
            .get(owner)
            .map(|owned| {
                owned
                    .ids
                    .iter()
                    .rev()
                    .filter_map(|id| records.by_id.get(id))
                    .filter(|kept| !kept.record.expired(now))
                    .map(|kept| kept.record.clone())
                    .collect()
            })
            .unwrap_or_default();
        Box::pin(std::future::ready(Ok(listed)))
    }

    fn delete<'a>(&'a self, id: &'a str) -> BoxFuture<'a, Result<bool, StoreDown>> {
        let deleted = self.lock().remove(id).is_some();
        Box::pin(std::future::ready(Ok(deleted)))
    }

    fn changed(&self, id: &str) -> BoxFuture<'static, ()> {
        let subscribed = self
            .lock()
            .by_id
            .get(id)
            .map(|kept| kept.changes.subscribe());
        Box::pin(async move {
            if let Some(mut changes) = subscribed {
                let _ = changes.changed().await;
            }
        })
    }

    fn sweep(&self) -> BoxFuture<'_, ()> {
        let now = SystemTime::now();
        let mut records = self.lock();
        let expired: Vec<String> = records
            .by_id
            .values()
            .filter(|kept| kept.record.expired(now))
            .map(|kept| kept.record.id.clone())
            .collect();
        for id in expired {
            records.remove(&id);
        }
        Box::pin(std::future::ready(()))
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::core::tasks::record::{Failure, Outcome, TaskState};
    use crate::domain::request_error::Code;

    fn record(id: &str, owner: &str) -> TaskRecord {
        TaskRecord::started(id.into(), CallerKey::token(owner), "t".into(), "s".into())
    }

    fn ended(mut record: TaskRecord, ttl: Duration) -> TaskRecord {
        let failure = Failure {
            code: Code::Internal,
            message: "x".into(),
        };
        record.end(Outcome::Failed(failure), ttl);
        record
    }

    #[tokio::test]
    async fn running_tasks_are_bounded_per_owner_and_finished_ones_make_room() {
        let store = MemoryStore::default();
        store.create(record("1", "alice"), 2, 10).await.unwrap();
        store.create(record("2", "alice"), 2, 10).await.unwrap();
        assert_eq!(
            store.create(record("3", "alice"), 2, 10).await,
            Err(NotCreated::TooMany { running: 2 })
        );
        // Another owner's budget is its own.
        store.create(record("b1", "bob"), 2, 10).await.unwrap();
        let first = store.get("1").await.unwrap().unwrap();
        store
            .put(ended(first, Duration::from_secs(60)))
            .await
            .unwrap();
        store.create(record("3", "alice"), 2, 10).await.unwrap();
        let listed: Vec<String> = store
            .list(&CallerKey::token("alice"))
            .await
            .unwrap()
            .into_iter()
            .map(|r| r.id)
            .collect();
        assert_eq!(listed, ["3", "2", "1"], "newest first");
    }

    #[tokio::test]
    async fn past_the_kept_limit_the_oldest_finished_record_goes() {
        let store = MemoryStore::default();
        for id in ["1", "2"] {
            store.create(record(id, "alice"), 5, 2).await.unwrap();
        }
        // Both run: nothing finished to forget, so a third is kept beyond the limit.
        store.create(record("3", "alice"), 5, 2).await.unwrap();
        let second = store.get("2").await.unwrap().unwrap();
        store
            .put(ended(second, Duration::from_secs(60)))
            .await
            .unwrap();
        store.create(record("4", "alice"), 5, 2).await.unwrap();
        assert!(
            store.get("2").await.unwrap().is_none(),
            "the finished one went"
        );
        assert!(store.get("1").await.unwrap().is_some(), "running ones stay");
    }

    #[tokio::test]
    async fn an_expired_record_is_hidden_at_once_and_swept_later() {
        let store = MemoryStore::default();
        store.create(record("1", "alice"), 5, 50).await.unwrap();
        let first = store.get("1").await.unwrap().unwrap();
        store.put(ended(first, Duration::ZERO)).await.unwrap();
        assert!(store.get("1").await.unwrap().is_none());
        assert!(
            store
                .list(&CallerKey::token("alice"))
                .await
                .unwrap()
                .is_empty()
        );
        store.sweep().await;
        assert!(store.lock().by_id.is_empty() && store.lock().by_owner.is_empty());
    }

    #[tokio::test]
    async fn a_waiter_hears_of_the_next_change_and_of_a_delete() {
        let store = MemoryStore::default();
        store.create(record("1", "alice"), 5, 50).await.unwrap();
        let changed = store.changed("1");
        let mut current = store.get("1").await.unwrap().unwrap();
        current.state = TaskState::InputRequired;
        store.put(current).await.unwrap();
        tokio::time::timeout(Duration::from_secs(5), changed)
            .await
            .expect("woken by the put");
        let deleted = store.changed("1");
        assert!(store.delete("1").await.unwrap());
        tokio::time::timeout(Duration::from_secs(5), deleted)
            .await
            .expect("woken by the delete");
        // Nothing kept: at once.
        tokio::time::timeout(Duration::from_secs(5), store.changed("1"))
            .await
            .expect("at once");
    }
}
