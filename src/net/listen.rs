//! Listeners whose connections are admitted by the [`ConnectionBudget`]: each accepted
//! connection takes a place or is closed at once. Accepting itself is axum's [`Listener`]
//! (for TCP and Unix sockets alike), which waits a second after an error such as EMFILE
//! rather than retrying at once (tonic's own accept loop retries at once, and spins).

use std::io;

use axum::serve::Listener;
use futures::Stream;

use super::{
    budget::{ConnectionBudget, ListenerKind},
    guarded::Guarded,
};

/// `L`'s connections, each holding a place in the budget.
pub struct Admitted<L> {
    listener: L,
    budget: ConnectionBudget,
    kind: ListenerKind,
}

impl<L: Listener> Admitted<L> {
    /// Connections of `listener` (a `kind`), admitted by `budget`.
    pub fn new(listener: L, budget: ConnectionBudget, kind: ListenerKind) -> Self {
        Self {
            listener,
            budget,
            kind,
        }
    }

    /// The admitted connections as a stream (which never ends nor fails), for tonic.
    pub fn incoming(self) -> impl Stream<Item = io::Result<Guarded<L::Io>>> + Send {
        futures::stream::unfold(self, |mut admitted| async move {
            let (io, _) = admitted.accept().await;
            Some((Ok(io), admitted))
        })
    }
}

impl<L: Listener> Listener for Admitted<L> {
    type Io = Guarded<L::Io>;
    type Addr = L::Addr;

    async fn accept(&mut self) -> (Self::Io, Self::Addr) {
        loop {
            let (io, addr) = self.listener.accept().await;
            if let Some(permit) = self.budget.admit(self.kind) {
                return (Guarded::new(io, permit), addr);
            }
            // Over the budget: closed at once, by dropping it.
        }
    }

    fn local_addr(&self) -> io::Result<Self::Addr> {
        self.listener.local_addr()
    }
}
