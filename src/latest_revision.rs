//! A value derived from the catalog, kept for the latest revision asked for: derived at most
//! once per revision, shared by every request of that revision.

use std::sync::Mutex;

/// The value of the latest revision asked for.
pub struct LatestRevision<T> {
    /// Held only to compare a revision and clone or replace the entry.
    current: Mutex<Option<(u64, T)>>,
}

impl<T> Default for LatestRevision<T> {
    fn default() -> Self {
        Self {
            current: Mutex::new(None),
        }
    }
}

impl<T: Clone> LatestRevision<T> {
    /// The value of `revision`: the kept one, or `derive(earlier)`'s, which replaces it
    /// (`earlier` is the value of the revision kept until now, for what can be reused).
    pub fn get(&self, revision: u64, derive: impl FnOnce(Option<&T>) -> T) -> T {
        let mut current = self.current.lock().unwrap_or_else(|e| e.into_inner());
        if let Some((kept, value)) = &*current
            && *kept == revision
        {
            return value.clone();
        }
        let earlier = current.as_ref().map(|(_, value)| value);
        let value = blocking(|| derive(earlier));
        *current = Some((revision, value.clone()));
        value
    }
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

    #[tokio::test]
    async fn on_a_current_thread_runtime_the_value_is_derived_in_place() {
        let cache = LatestRevision::default();
        assert_eq!(cache.get(3, |_| 4), 4);
    }
}
