//! A value derived from the catalog, kept for the latest revision asked for: derived at most
//! once per revision, shared by every request of that revision.

use std::sync::{Mutex, MutexGuard, TryLockError};

/// The value of the latest revision asked for.
pub struct LatestRevision<T> {
    /// Held only to compare a revision and clone or replace the entry.
    current: Mutex<Option<(u64, T)>>,
    /// Held through a derive, so a revision is derived once however many ask for it.
    deriving: Mutex<()>,
}

impl<T> Default for LatestRevision<T> {
    fn default() -> Self {
        Self {
            current: Mutex::new(None),
            deriving: Mutex::new(()),
        }
    }
}

impl<T: Clone> LatestRevision<T> {
    /// The value of `revision`: the kept one, or `derive(earlier)`'s, which replaces it
    /// (`earlier` is the value of the revision kept until now, for what can be reused).
    pub fn get(&self, revision: u64, derive: impl FnOnce(Option<&T>) -> T) -> T {
        let earlier = match self.kept(revision) {
            Ok(value) => return value,
            Err(earlier) => earlier,
        };
        let _deriving = self.wait_for_derive();
        // Another request may have derived it while this one waited.
        let earlier = match self.kept(revision) {
            Ok(value) => return value,
            Err(now) => now.or(earlier),
        };
        let value = blocking(|| derive(earlier.as_ref()));
        *lock(&self.current) = Some((revision, value.clone()));
        value
    }

    /// The revision whose value is kept, if any.
    pub fn revision(&self) -> Option<u64> {
        lock(&self.current).as_ref().map(|(revision, _)| *revision)
    }

    /// The value kept for `revision`, or else the one kept for another.
    fn kept(&self, revision: u64) -> Result<T, Option<T>> {
        match &*lock(&self.current) {
            Some((kept, value)) if *kept == revision => Ok(value.clone()),
            other => Err(other.as_ref().map(|(_, value)| value.clone())),
        }
    }

    /// The right to derive, waited for (while another request derives: up to a few hundred
    /// milliseconds) the way a derive runs, so the waiting worker's other tasks go on.
    fn wait_for_derive(&self) -> MutexGuard<'_, ()> {
        match self.deriving.try_lock() {
            Ok(deriving) => deriving,
            Err(TryLockError::Poisoned(poisoned)) => poisoned.into_inner(),
            Err(TryLockError::WouldBlock) => blocking(|| lock(&self.deriving)),
        }
    }
}

/// `mutex` locked, also after a panic elsewhere (every write to it is a single assignment).
fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// Runs `work` (a whole catalog's worth: up to a few hundred milliseconds) so that it does
/// not hold up other tasks: on a worker of a multi-thread runtime, tokio first hands the
/// worker's queued tasks to another thread. Elsewhere it just runs.
fn blocking<T>(work: impl FnOnce() -> T) -> T {
    let multi_thread = tokio::runtime::Handle::try_current().is_ok_and(|runtime| {
        runtime.runtime_flavor() == tokio::runtime::RuntimeFlavor::MultiThread
    });
    if multi_thread {
        tokio::task::block_in_place(work)
    } else {
        work()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_value_is_derived_once_per_revision() {
        let cache = LatestRevision::default();
        let mut derived = 0;
        let mut get = |revision| {
            cache.get(revision, |earlier: Option<&u64>| {
                derived += 1;
                revision * 10 + earlier.copied().unwrap_or_default()
            })
        };
        assert_eq!((get(1), get(1), get(2), get(2)), (10, 10, 30, 30));
        assert_eq!(derived, 2);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_worker_deriving_a_value_leaves_its_other_tasks_to_another() {
        let cache = LatestRevision::default();
        let (ran, signal) = std::sync::mpsc::channel();
        let derive = tokio::spawn(async move {
            // Queued on this worker (in its slot no other worker steals from) just before
            // the derive blocks it; the derive waits for it.
            let other = tokio::spawn(async move { ran.send(()).unwrap() });
            let value = cache.get(1, |_| {
                signal
                    .recv_timeout(std::time::Duration::from_secs(2))
                    .is_ok()
            });
            other.await.unwrap();
            value
        });
        assert!(
            derive.await.unwrap(),
            "the task queued on the deriving worker did not run during the derive"
        );
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_worker_waiting_for_a_value_being_derived_leaves_its_other_tasks_to_another() {
        let cache = std::sync::Arc::new(LatestRevision::default());
        let (deriving, derive_started) = std::sync::mpsc::channel();
        let (ran, signal) = std::sync::mpsc::channel();
        let derive = tokio::spawn({
            let cache = cache.clone();
            async move {
                cache.get(1, |_| {
                    deriving.send(()).unwrap();
                    signal
                        .recv_timeout(std::time::Duration::from_secs(2))
                        .is_ok()
                })
            }
        });
        let waiter = tokio::spawn(async move {
            derive_started.recv().unwrap();
            // Queued on the waiting worker (in its slot no other worker steals from) just
            // before it waits for the derive, which waits for this task.
            // (Its send fails only once the derive has given up waiting, which the assert reports.)
            let other = tokio::spawn(async move { ran.send(()).ok() });
            let value = cache.get(1, |_| unreachable!("derived by the first request"));
            other.await.unwrap();
            value
        });
        let (derived, waited) = (derive.await.unwrap(), waiter.await.unwrap());
        assert!(
            derived && waited,
            "the task queued on the waiting worker did not run while it waited"
        );
    }

    #[tokio::test]
    async fn on_a_current_thread_runtime_the_value_is_derived_in_place() {
        let cache = LatestRevision::default();
        assert_eq!(cache.get(3, |_| 4), 4);
    }
}
