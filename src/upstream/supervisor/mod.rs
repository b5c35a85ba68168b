//! One supervisor per configured server: it runs the server's replicas (one session each; one
//! unless `replicas` says more) side by side in its task, each restarting its own session with
//! backoff, and combines what they report (see [`board`]) until told to stop.

mod board;
mod replica;

use std::sync::Arc;

use tokio_util::sync::CancellationToken;

use self::{board::Board, replica::ReplicaLoop};
use super::Reporter;
use crate::domain::config::ServerSpec;

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
        let board = Board::new(&self.spec, self.reporter);
        // Futures of this one task rather than tasks of their own: they end together, when
        // `stop` is cancelled, and share the board without a lock held across an await.
        let replicas = (0..self.spec.replicas)
            .map(|index| ReplicaLoop::new(index, &self.spec, &board, &self.stop).run());
        futures::future::join_all(replicas).await;
        board.stopped();
    }
}
