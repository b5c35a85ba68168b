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
        let value = derive(current.as_ref().map(|(_, value)| value));
        *current = Some((revision, value.clone()));
        value
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
}
