//! One supervisor per configured server: it runs the server's replicas (one session each; one
//! unless `replicas` says more) side by side in its task, each restarting its own session with
//! backoff, and combines what they report (see [`board`]) until told to stop.

mod board;
mod replica;

use std::sync::Arc;

use tokio_util::sync::CancellationToken;

use self::{board::Board, replica::ReplicaLoop};
use super::{Reporter, exchange::Exchanger, pool::Pool};
use crate::domain::config::{Isolation, ServerSpec};

/// Owns one server's sessions for as long as the server is configured.
pub struct Supervisor {
    spec: ServerSpec,
    reporter: Arc<dyn Reporter>,
    stop: CancellationToken,
}

impl Supervisor {
    /// A supervisor that reports to `reporter` and stops when `stop` is cancelled.
    pub fn new(spec: ServerSpec, reporter: Arc<dyn Reporter>, stop: CancellationToken) -> Self {
        Self {
            spec,
            reporter,
            stop,
        }
    }

    /// Runs every replica until `stop` is cancelled; their sessions and processes are closed
    /// before return, and the server is reported STOPPED.
    pub async fn run(self) {
        let exchange = self
            .spec
            .token_exchange
            .clone()
            .map(|spec| Arc::new(Exchanger::new(self.spec.name.clone(), spec)));
        let pool = match &self.spec.isolation {
            Isolation::PerCaller(limits) => {
                Some(Pool::start(&self.spec, limits.clone(), exchange.clone()))
            }
            Isolation::Shared => None,
        };
        let board = Board::new(&self.spec, self.reporter, pool.clone());
        // Futures of this one task rather than tasks of their own: they end together, when
        // `stop` is cancelled, and share the board without a lock held across an await.
        let replicas = (0..self.spec.replicas).map(|index| {
            ReplicaLoop::new(index, &self.spec, &board, &self.stop, exchange.as_deref()).run()
        });
        futures::future::join_all(replicas).await;
        // Callers' sessions close with the server, and no process of theirs outlives it.
        if let Some(pool) = pool {
            pool.close().await;
        }
        board.stopped();
    }
}
