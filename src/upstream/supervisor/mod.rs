//! One supervisor per configured server: it runs the server's replicas (one session each; one
//! unless `replicas` says more) side by side in its task, each restarting its own session with
//! backoff, and combines what they report (see [`board`]) until told to stop.

mod board;
pub(crate) mod fleet;
mod replica;
pub(crate) mod reporter;

use std::sync::Arc;

use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

use self::{board::Board, replica::ReplicaLoop};
use super::{
    Reporter,
    oauth::{ServerAuth, exchange::Exchanger},
    pool::Pool,
    session::connect::Era,
};
use crate::domain::config::{Isolation, ServerSpec};

/// Owns one server's sessions for as long as the server is configured.
pub struct Supervisor {
    spec: ServerSpec,
    reporter: Arc<dyn Reporter>,
    stop: CancellationToken,
    auth: Option<ServerAuth>,
    retry: Arc<Notify>,
}

impl Supervisor {
    /// A supervisor that reports to `reporter` and stops when `stop` is cancelled; `auth` gives
    /// the tokens of a server under OAuth, `retry` ends a wait to restart early.
    pub fn new(
        spec: ServerSpec,
        reporter: Arc<dyn Reporter>,
        stop: CancellationToken,
        auth: Option<ServerAuth>,
        retry: Arc<Notify>,
    ) -> Self {
        Self {
            spec,
            reporter,
            stop,
            auth,
            retry,
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
        // One for all the server's sessions: they run one program.
        let era = Arc::new(Era::default());
        let pool = match &self.spec.isolation {
            Isolation::PerCaller(limits) => Some(Pool::start(
                &self.spec,
                limits.clone(),
                exchange.clone(),
                self.auth.clone(),
                era.clone(),
            )),
            Isolation::Shared => None,
        };
        let board = Board::new(&self.spec, self.reporter, pool.clone());
        // Futures of this one task rather than tasks of their own: they end together, when
        // `stop` is cancelled, and share the board without a lock held across an await.
        let replicas = (0..self.spec.replicas).map(|index| {
            ReplicaLoop {
                index,
                spec: &self.spec,
                board: &board,
                stop: &self.stop,
                exchange: exchange.as_deref(),
                auth: self.auth.as_ref(),
                retry: &self.retry,
                era: &era,
                restarts: 0,
            }
            .run()
        });
        futures::future::join_all(replicas).await;
        // Callers' sessions close with the server, and no process of theirs outlives it.
        if let Some(pool) = pool {
            pool.close().await;
        }
        board.stopped();
    }
}
