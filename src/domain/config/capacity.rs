//! Capacity checks: how many calls a server takes at once and queues, and how many copies of a
//! stdio server run. Pure.

use std::ops::RangeInclusive;

use super::{
    Concurrency, DEFAULT_MAX_CONCURRENT_CALLS, DEFAULT_MAX_QUEUED_CALLS, DEFAULT_QUEUE_TIMEOUT,
    DEFAULT_REPLICAS, MAX_CONCURRENT_CALLS, MAX_QUEUED_CALLS, MAX_REPLICAS, path, raw::RawServer,
    validate::Checker,
};

impl Checker<'_, '_> {
    /// How many calls run at once and wait; at least one must be able to run, and neither
    /// count may be so large that it stops being a limit.
    pub(super) fn concurrency(&mut self, raw: &mut RawServer, at: &str) -> Concurrency {
        let max_calls = self.count(
            raw.max_concurrent_calls.take(),
            DEFAULT_MAX_CONCURRENT_CALLS,
            1..=MAX_CONCURRENT_CALLS,
            &path::field(at, "max_concurrent_calls"),
        );
        let max_queued = self.count(
            raw.max_queued_calls.take(),
            DEFAULT_MAX_QUEUED_CALLS,
            0..=MAX_QUEUED_CALLS,
            &path::field(at, "max_queued_calls"),
        );
        let queue_timeout = self.duration(
            raw.queue_timeout.take(),
            DEFAULT_QUEUE_TIMEOUT,
            &path::field(at, "queue_timeout"),
        );
        Concurrency {
            max_calls,
            max_queued,
            queue_timeout,
        }
    }

    /// A count within `range`, or `default` (with an error) when it is outside.
    pub(super) fn count(
        &mut self,
        raw: Option<u64>,
        default: usize,
        range: RangeInclusive<u64>,
        at: &str,
    ) -> usize {
        let Some(count) = raw else {
            return default;
        };
        match usize::try_from(count) {
            Ok(n) if range.contains(&count) => n,
            _ => {
                let (low, high) = (range.start(), range.end());
                self.error(at, format!("must be between {low} and {high}, not {count}"));
                default
            }
        }
    }

    /// How many copies of a stdio server run: 1 to [`MAX_REPLICAS`]. An HTTP server is one
    /// endpoint we do not start, so there is nothing to copy.
    pub(super) fn replicas(
        &mut self,
        raw: Option<u64>,
        over_http: bool,
        per_caller: bool,
        at: &str,
    ) -> usize {
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
        if per_caller && replicas != 1 {
            let reason = "only for shared servers: a per-caller server runs one process per caller";
            self.error(&at, reason);
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
