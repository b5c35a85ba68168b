//! The one budget of open client connections (`limits.max_connections`), shared by the gRPC
//! port, the Unix socket and the MCP face: a connection holds a permit for as long as it is
//! open (its [`Guarded`](super::Guarded) carries it); one past the budget is closed as soon as it is accepted,
//! counted in `toolbroker_connections_refused_total` and logged at most every few seconds.
//! `toolbroker_connections_open` is the gauge of open ones.

use std::{
    sync::{Arc, Mutex, PoisonError},
    time::{Duration, Instant},
};

use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// Refusals are logged at most this often (each line says how many since the last).
const WARN_EVERY: Duration = Duration::from_secs(5);

/// Where a connection came in: the label of the connection metrics.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ListenerKind {
    /// The gRPC port (`listen`), plaintext or TLS.
    Grpc,
    /// The gRPC services on `unix_listen`.
    UnixSocket,
    /// The MCP face (`mcp_listen`).
    McpFace,
}

impl ListenerKind {
    /// The `listener` label.
    pub fn as_str(self) -> &'static str {
        match self {
            ListenerKind::Grpc => "grpc",
            ListenerKind::UnixSocket => "unix_socket",
            ListenerKind::McpFace => "mcp",
        }
    }
}

/// Open connections, at most `max` at once; cheap to clone (one budget, shared).
#[derive(Clone)]
pub struct ConnectionBudget(Arc<Budget>);

struct Budget {
    permits: Arc<Semaphore>,
    max: usize,
    refused: Mutex<Refused>,
}

/// Refusals not yet logged, and when the last line was.
#[derive(Default)]
struct Refused {
    since_warning: u64,
    last_warning: Option<Instant>,
}

impl ConnectionBudget {
    /// Room for `max` connections at once.
    pub fn new(max: usize) -> Self {
        Self(Arc::new(Budget {
            permits: Arc::new(Semaphore::new(max)),
            max,
            refused: Mutex::default(),
        }))
    }

    /// A place for a connection just accepted on `kind`, or `None` (counted and logged) when
    /// the budget is spent: the caller closes the connection.
    pub fn admit(&self, kind: ListenerKind) -> Option<Permit> {
        match self.0.permits.clone().try_acquire_owned() {
            Ok(permit) => {
                metrics::gauge!("toolbroker_connections_open", "listener" => kind.as_str())
                    .increment(1.0);
                Some(Permit {
                    _permit: permit,
                    kind,
                })
            }
            Err(_) => {
                self.refused(kind);
                None
            }
        }
    }

    fn refused(&self, kind: ListenerKind) {
        metrics::counter!("toolbroker_connections_refused_total", "listener" => kind.as_str())
            .increment(1);
        let mut refused = self
            .0
            .refused
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        refused.since_warning += 1;
        if refused
            .last_warning
            .is_none_or(|at| at.elapsed() >= WARN_EVERY)
        {
            tracing::warn!(
                listener = kind.as_str(),
                max_connections = self.0.max,
                refused = refused.since_warning,
                "connections refused: limits.max_connections are open"
            );
            refused.since_warning = 0;
            refused.last_warning = Some(Instant::now());
        }
    }
}

/// A connection's place in the budget, given back when it is dropped.
pub struct Permit {
    _permit: OwnedSemaphorePermit,
    kind: ListenerKind,
}

impl Drop for Permit {
    fn drop(&mut self) {
        metrics::gauge!("toolbroker_connections_open", "listener" => self.kind.as_str())
            .decrement(1.0);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_connection_past_the_budget_is_refused_until_one_is_dropped() {
        let budget = ConnectionBudget::new(2);
        let first = budget.admit(ListenerKind::Grpc).expect("room for one");
        let _second = budget.admit(ListenerKind::McpFace).expect("room for two");
        assert!(budget.admit(ListenerKind::UnixSocket).is_none());
        assert!(budget.admit(ListenerKind::Grpc).is_none());
        drop(first);
        assert!(budget.admit(ListenerKind::UnixSocket).is_some());
    }

    #[test]
    fn clones_share_one_budget() {
        let budget = ConnectionBudget::new(1);
        let other = budget.clone();
        let _held = budget.admit(ListenerKind::Grpc).expect("room for one");
        assert!(other.admit(ListenerKind::McpFace).is_none());
    }
}
