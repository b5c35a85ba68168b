//! Capacity checks: how many calls a server takes at once and queues, and how many copies of a
//! stdio server run. Pure.

use super::{
    Concurrency, DEFAULT_MAX_CONCURRENT_CALLS, DEFAULT_MAX_QUEUED_CALLS, DEFAULT_QUEUE_TIMEOUT,
    DEFAULT_REPLICAS, MAX_REPLICAS, path, raw::RawServer, validate::Checker,
};

impl Checker<'_, '_> {
    /// How many calls run at once and wait; at least one must be able to run.
    pub(super) fn concurrency(&mut self, raw: &mut RawServer, at: &str) -> Concurrency {
        let max_calls = raw
            .max_concurrent_calls
            .take()
            .map_or(DEFAULT_MAX_CONCURRENT_CALLS, |n| n as usize);
        if max_calls == 0 {
            self.error(
                &path::field(at, "max_concurrent_calls"),
                "must be at least 1",
            );
        }
        let max_queued = raw
            .max_queued_calls
            .take()
            .map_or(DEFAULT_MAX_QUEUED_CALLS, |n| n as usize);
        let queue_timeout = self.duration(
            raw.queue_timeout.take(),
            DEFAULT_QUEUE_TIMEOUT,
            &path::field(at, "queue_timeout"),
        );
        Concurrency {
            max_calls: max_calls.max(1),
            max_queued,
            queue_timeout,
        }
    }

    /// How many copies of a stdio server run: 1 to [`MAX_REPLICAS`]. An HTTP server is one
    /// endpoint we do not start, so there is nothing to copy.
    pub(super) fn replicas(&mut self, raw: Option<u64>, over_http: bool, at: &str) -> usize {
        let Some(replicas) = raw else {
            return DEFAULT_REPLICAS;
        };
        let at = path::field(at, "replicas");
        if over_http {
            self.error(
                &at,
                "only for stdio servers (with \"command\"), not with \"url\"",
            );
            return DEFAULT_REPLICAS;
        }
        match usize::try_from(replicas) {
            Ok(n @ 1..=MAX_REPLICAS) => n,
            _ => {
                let reason = format!("must be between 1 and {MAX_REPLICAS}, not {replicas}");
                self.error(&at, reason);
                DEFAULT_REPLICAS
            }
        }
    }
}
