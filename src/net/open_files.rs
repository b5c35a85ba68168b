//! The open-file limit the connection budget needs: every connection is a file descriptor,
//! and a broker out of descriptors can neither accept (to close at once) nor read its config,
//! its token files or its servers' pipes. At start the soft limit is raised, up to the hard
//! one, to `limits.max_connections` plus a reserve for everything else (as Go does for its
//! programs); if it cannot go that high, the budget is made smaller, with a warning.

use nix::sys::resource::{Resource, getrlimit, setrlimit};

/// Descriptors kept for everything but client connections: the servers' pipes, upstream HTTP
/// connections, the audit log, the config and token files, the runtime's own.
const RESERVED: u64 = 1024;

/// How many connections the broker takes at once: `max_connections`, or fewer if the
/// open-file limit (raised as far as it may be) leaves room for fewer.
pub fn connection_budget(max_connections: usize) -> usize {
    let wanted = (max_connections as u64).saturating_add(RESERVED);
    let limit = match raise_to(wanted) {
        Ok(limit) => limit,
        Err(error) => {
            tracing::warn!(%error, "cannot read the open-file limit (RLIMIT_NOFILE)");
            return max_connections;
        }
    };
    let budget = room(max_connections, limit);
    if budget < max_connections {
        tracing::warn!(
            max_connections,
            open_file_limit = limit,
            connections = budget,
            "the open-file limit leaves room for fewer connections than limits.max_connections; raise it (ulimit -n, LimitNOFILE)"
        );
    }
    budget
}

/// The soft open-file limit, raised to `wanted` if it is lower (no higher than the hard one).
fn raise_to(wanted: u64) -> nix::Result<u64> {
    let (soft, hard) = getrlimit(Resource::RLIMIT_NOFILE)?;
    if soft >= wanted {
        return Ok(soft);
    }
    let raised = wanted.min(hard);
    match setrlimit(Resource::RLIMIT_NOFILE, raised, hard) {
        Ok(()) => {
            tracing::debug!(from = soft, to = raised, "raised the open-file limit");
            Ok(raised)
        }
        Err(error) => {
            tracing::warn!(%error, "cannot raise the open-file limit");
            Ok(soft)
        }
    }
}

/// Connections that fit under an open-file `limit`: all but the reserve, and never less than
/// half of it (a small limit is shared), nor more than `max_connections`.
fn room(max_connections: usize, limit: u64) -> usize {
    let room = limit.saturating_sub(RESERVED).max(limit / 2);
    usize::try_from(room).map_or(max_connections, |room| room.min(max_connections))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_budget_leaves_room_for_everything_else() {
        let cases = [
            (10_000, 1_048_576, 10_000),
            (10_000, 11_024, 10_000),
            (10_000, 11_000, 9_976),
            (10_000, 1_024, 512),
            (50, 300, 50),
            (10_000, u64::MAX, 10_000),
            (1, 16, 1),
        ];
        for (max, limit, want) in cases {
            assert_eq!(room(max, limit), want, "max {max}, limit {limit}");
        }
    }
}
