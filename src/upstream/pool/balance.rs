//! Spreading a server's calls over its ready replicas: each call goes to the replica with the
//! fewest calls in flight, counted with one atomic per replica (no lock).

use std::sync::{
    Arc,
    atomic::{AtomicUsize, Ordering},
};

use rmcp::{RoleClient, service::Peer};
use tokio::sync::Notify;

use crate::upstream::{
    session::interactions::Interactions, session::rounds::Stateless, transport::faults::Faults,
    transport::stdio::call_lane::CallLane,
};

/// The call side of one replica's session. Clones share its in-flight count.
#[derive(Clone, Debug)]
pub struct Replica {
    /// The session calls are sent on, multiplexed by request id.
    pub(in crate::upstream) peer: Peer<RoleClient>,
    /// Tells the replica's supervisor a call lost its connection, so it checks the session.
    pub(in crate::upstream) suspect: Arc<Notify>,
    /// What the transport tells calls about answers that did not come.
    pub(in crate::upstream) faults: Faults,
    /// Where what the server sends during calls is routed.
    pub(in crate::upstream) interactions: Arc<Interactions>,
    /// Where tool calls are sent when not through rmcp's peer (stdio).
    pub(in crate::upstream) lane: Option<Arc<CallLane>>,
    /// On 2026-07-28: what each request declares and how its rounds are answered.
    pub(in crate::upstream) stateless: Option<Arc<Stateless>>,
    /// Calls sent on this session and not yet answered.
    in_flight: Arc<AtomicUsize>,
}

impl Replica {
    /// A replica with no calls in flight.
    pub(in crate::upstream) fn new(
        peer: Peer<RoleClient>,
        suspect: Arc<Notify>,
        faults: Faults,
        interactions: Arc<Interactions>,
        lane: Option<Arc<CallLane>>,
        stateless: Option<Arc<Stateless>>,
    ) -> Self {
        Self {
            peer,
            suspect,
            faults,
            interactions,
            lane,
            stateless,
            in_flight: Arc::default(),
        }
    }

    /// Whether its transport has ended. Known as soon as a call in flight learns it, so the
    /// caller's next call never goes to a session whose end its supervisor has yet to see.
    pub(in crate::upstream) fn is_closed(&self) -> bool {
        self.peer.is_transport_closed() || self.lane.as_ref().is_some_and(|lane| lane.is_closed())
    }

    /// Its count of calls in flight, shared, for what follows the session beyond its calls.
    pub(in crate::upstream) fn in_flight(&self) -> Arc<AtomicUsize> {
        self.in_flight.clone()
    }
}

/// Calls in flight on a replica.
impl AsRef<AtomicUsize> for Replica {
    fn as_ref(&self) -> &AtomicUsize {
        &self.in_flight
    }
}

/// An item chosen for one call; it counts as in flight there until dropped.
pub(in crate::upstream) struct Picked<'a, T: AsRef<AtomicUsize>>(&'a T);

impl<T: AsRef<AtomicUsize>> std::ops::Deref for Picked<'_, T> {
    type Target = T;

    fn deref(&self) -> &T {
        self.0
    }
}

impl<T: AsRef<AtomicUsize>> Drop for Picked<'_, T> {
    fn drop(&mut self) {
        self.0.as_ref().fetch_sub(1, Ordering::Relaxed);
    }
}

/// How often a pick is tried again when another call took the chosen item's count first;
/// after that the call goes where it was going anyway, one call over its fair share at worst.
const PICK_ATTEMPTS: usize = 4;

/// The item (replica) with the fewest calls in flight (the first of equals), counted in at
/// once. `None` only for an empty list, which the broker never publishes.
pub(in crate::upstream) fn least_busy<T: AsRef<AtomicUsize>>(items: &[T]) -> Option<Picked<'_, T>> {
    for _ in 0..PICK_ATTEMPTS {
        let (item, seen) = lowest(items)?;
        // Counting in only if nobody else did since we looked keeps simultaneous calls from
        // all landing on the same idle replica.
        let counted =
            item.as_ref()
                .compare_exchange(seen, seen + 1, Ordering::Relaxed, Ordering::Relaxed);
        if counted.is_ok() {
            return Some(Picked(item));
        }
    }
    let (item, _) = lowest(items)?;
    item.as_ref().fetch_add(1, Ordering::Relaxed);
    Some(Picked(item))
}

fn lowest<T: AsRef<AtomicUsize>>(items: &[T]) -> Option<(&T, usize)> {
    items
        .iter()
        .map(|item| (item, item.as_ref().load(Ordering::Relaxed)))
        .min_by_key(|(_, in_flight)| *in_flight)
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Counter(AtomicUsize);

    impl AsRef<AtomicUsize> for Counter {
        fn as_ref(&self) -> &AtomicUsize {
            &self.0
        }
    }

    fn counts(items: &[Counter]) -> Vec<usize> {
        items.iter().map(|c| c.0.load(Ordering::Relaxed)).collect()
    }

    #[test]
    fn calls_go_to_the_least_busy_and_leave_when_done() {
        let items: Vec<Counter> = [2, 0, 1].map(|n| Counter(AtomicUsize::new(n))).into();
        let first = least_busy(&items).unwrap();
        assert_eq!(counts(&items), [2, 1, 1]);
        let second = least_busy(&items).unwrap();
        assert_eq!(counts(&items), [2, 2, 1], "ties go to the first");
        let third = least_busy(&items).unwrap();
        assert_eq!(counts(&items), [2, 2, 2]);
        drop((first, second, third));
        assert_eq!(counts(&items), [2, 0, 1]);
        assert!(least_busy::<Counter>(&[]).is_none());
    }

    #[test]
    fn calls_that_stay_spread_evenly() {
        let items: Vec<Counter> = (0..4).map(|_| Counter(AtomicUsize::new(0))).collect();
        let held: Vec<_> = (0..16).map(|_| least_busy(&items).unwrap()).collect();
        assert_eq!(counts(&items), [4, 4, 4, 4]);
        drop(held);
        assert_eq!(counts(&items), [0, 0, 0, 0]);
    }
}
