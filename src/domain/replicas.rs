//! A server run as several replicas (copies of one stdio server): its one condition, combined
//! from theirs. Pure.

use super::state::{ServerCondition, ServerState};

/// The server's condition given each replica's, in replica order, and the condition shown
/// before (which keeps `since` while the state stays the same).
///
/// One replica's condition is the server's, as it was before replicas existed. With more, the
/// server is READY while any replica is; otherwise it takes the most hopeful state among them
/// (CONNECTING, then RECONNECTING, FAILED, STOPPED). The message counts ready replicas and
/// says what the first one that is not ready is doing, e.g. `3 of 4 replicas ready; replica 2:
/// session lost: ...`. `restarts` adds up every replica's.
pub fn combine(replicas: &[ServerCondition], previous: &ServerCondition) -> ServerCondition {
    let (first, rest) = match replicas {
        [only] => return only.clone(),
        [first, rest @ ..] => (first, rest),
        [] => return previous.clone(),
    };
    let lead = rest.iter().fold(first, |best, c| {
        if rank(c.state) < rank(best.state) {
            c
        } else {
            best
        }
    });
    let total = replicas.len();
    let ready = replicas
        .iter()
        .filter(|c| c.state == ServerState::Ready)
        .count();
    let detail = if ready == total {
        lead.message.clone()
    } else {
        let (index, shown) = replicas
            .iter()
            .enumerate()
            .find(|(_, c)| {
                if ready > 0 {
                    c.state != ServerState::Ready
                } else {
                    c.state == lead.state
                }
            })
            .expect("some replica is not ready, and the lead's state is some replica's");
        format!("replica {}: {}", index + 1, shown.message)
    };
    ServerCondition {
        state: lead.state,
        message: format!("{ready} of {total} replicas ready; {detail}"),
        transport: lead.transport,
        restarts: replicas.iter().map(|c| c.restarts).sum(),
        protocol: lead.protocol.clone(),
        icons: lead.icons.clone(),
        since: if previous.state == lead.state {
            previous.since
        } else {
            lead.since
        },
    }
}

/// Which state a server with replicas shows: the lowest rank among them.
fn rank(state: ServerState) -> u8 {
    match state {
        ServerState::Ready => 0,
        ServerState::Connecting => 1,
        ServerState::Reconnecting => 2,
        ServerState::Failed => 3,
        ServerState::Stopped => 4,
    }
}

#[cfg(test)]
mod tests {
    use std::time::{Duration, SystemTime};

    use super::*;
    use crate::domain::state::Transport;
    use ServerState::*;

    fn at(secs: u64) -> SystemTime {
        SystemTime::UNIX_EPOCH + Duration::from_secs(secs)
    }

    fn condition(state: ServerState, message: &str, restarts: u32, since: u64) -> ServerCondition {
        ServerCondition {
            state,
            message: message.into(),
            transport: Transport::Stdio,
            restarts,
            since: at(since),
            protocol: None,
            icons: Default::default(),
        }
    }

    #[test]
    fn one_replica_is_the_server() {
        let only = condition(Failed, "exited; next attempt in 1s", 3, 7);
        let previous = condition(Reconnecting, "reconnecting", 2, 5);
        assert_eq!(combine(std::slice::from_ref(&only), &previous), only);
    }

    #[test]
    fn the_server_shows_its_best_replica_and_counts_the_ready_ones() {
        let up = |n| condition(Ready, "connected to demo", n, 10);
        let lost = condition(Reconnecting, "session lost: killed", 1, 20);
        let failed = condition(Failed, "cannot start; next attempt in 2s", 2, 30);
        let starting = condition(Connecting, "starting", 0, 40);
        let cases = [
            (
                vec![up(0), up(1), up(0)],
                Ready,
                "3 of 3 replicas ready; connected to demo",
                1,
            ),
            (
                vec![up(0), lost.clone(), up(0), up(0)],
                Ready,
                "3 of 4 replicas ready; replica 2: session lost: killed",
                1,
            ),
            (
                vec![failed.clone(), lost.clone()],
                Reconnecting,
                "0 of 2 replicas ready; replica 2: session lost: killed",
                3,
            ),
            (
                vec![failed.clone(), starting, lost],
                Connecting,
                "0 of 3 replicas ready; replica 2: starting",
                3,
            ),
            (
                vec![failed.clone(), failed],
                Failed,
                "0 of 2 replicas ready; replica 1: cannot start; next attempt in 2s",
                4,
            ),
        ];
        let previous = condition(Stopped, "", 0, 0);
        for (replicas, state, message, restarts) in cases {
            let server = combine(&replicas, &previous);
            assert_eq!(
                (server.state, server.message.as_str(), server.restarts),
                (state, message, restarts)
            );
        }
    }

    #[test]
    fn since_stays_while_the_state_does() {
        let replicas = [
            condition(Ready, "connected", 0, 50),
            condition(Connecting, "starting", 0, 40),
        ];
        let was_ready = condition(Ready, "1 of 2 replicas ready", 0, 10);
        assert_eq!(combine(&replicas, &was_ready).since, at(10));
        let was_connecting = condition(Connecting, "starting", 0, 10);
        assert_eq!(combine(&replicas, &was_connecting).since, at(50));
    }
}
