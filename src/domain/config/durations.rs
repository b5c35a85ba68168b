//! Durations in the config: `30s`, `1m30s`, `500ms` or whole seconds, never zero and at most
//! a year, and the restart delays built from two of them. Pure.

use std::time::Duration;

use serde_json::Value;

/// `max_timeout` when absent: this many times `timeout` (at most [`MAX_DURATION`]).
const MAX_TIMEOUT_FACTOR: u32 = 10;

/// The longest duration any setting takes (humantime's `1year`, 365.25 days): longer is no
/// longer a limit, and a duration near `u64::MAX` seconds added to the clock panics.
pub const MAX_DURATION: Duration = Duration::from_secs(31_557_600);

use super::{
    Backoff, DEFAULT_BACKOFF_INITIAL, DEFAULT_BACKOFF_MAX, path,
    validate::{Checker, kind},
};

impl Checker<'_, '_> {
    /// The restart delays; the longest may not be shorter than the first.
    pub(super) fn backoff(
        &mut self,
        initial: Option<Value>,
        max: Option<Value>,
        at: &str,
    ) -> Backoff {
        let initial = self.duration(
            initial,
            DEFAULT_BACKOFF_INITIAL,
            &path::field(at, "backoff_initial"),
        );
        let max_at = path::field(at, "backoff_max");
        let max = self.duration(max, DEFAULT_BACKOFF_MAX, &max_at);
        if max < initial {
            let reason = format!(
                "{} is shorter than backoff_initial ({})",
                humantime::format_duration(max),
                humantime::format_duration(initial)
            );
            self.error(&max_at, reason);
        }
        Backoff { initial, max }
    }

    /// The longest a call may last while progress keeps restarting its `timeout`: at least
    /// `timeout`; absent, ten times it.
    pub(super) fn max_timeout(
        &mut self,
        raw: Option<Value>,
        timeout: Duration,
        at: &str,
    ) -> Duration {
        let at = path::field(at, "max_timeout");
        let default = timeout.saturating_mul(MAX_TIMEOUT_FACTOR).min(MAX_DURATION);
        let max = self.duration(raw, default, &at);
        if max < timeout {
            let reason = format!(
                "{} is shorter than timeout ({})",
                humantime::format_duration(max),
                humantime::format_duration(timeout)
            );
            self.error(&at, reason);
        }
        max
    }

    /// A duration that may be absent (`None`); present, it is checked like [`Self::duration`].
    pub(super) fn optional_duration(&mut self, raw: Option<Value>, at: &str) -> Option<Duration> {
        match raw {
            None | Some(Value::Null) => None,
            raw => Some(self.duration(raw, Duration::MAX, at)),
        }
    }

    /// A duration checked like [`Self::duration`], and at most `max` (else `default`, with an
    /// error naming `max`).
    pub(super) fn duration_at_most(
        &mut self,
        raw: Option<Value>,
        default: Duration,
        max: Duration,
        at: &str,
    ) -> Duration {
        let duration = self.duration(raw, default, at);
        if duration <= max {
            return duration;
        }
        let reason = format!(
            "must be at most {}, not {}",
            humantime::format_duration(max),
            humantime::format_duration(duration)
        );
        self.error(at, reason);
        default
    }

    /// A humantime duration (`30s`, `1m30s`, `500ms`) or a whole number of seconds; not zero,
    /// at most [`MAX_DURATION`]. Absent: `default`.
    pub(super) fn duration(&mut self, raw: Option<Value>, default: Duration, at: &str) -> Duration {
        let parsed = match &raw {
            None | Some(Value::Null) => return default,
            Some(Value::Number(n)) => n.as_u64().map(Duration::from_secs).ok_or_else(|| {
                format!("invalid duration {n}; write whole seconds or a duration like \"1500ms\"")
            }),
            Some(Value::String(text)) => parse_duration(text),
            Some(other) => Err(format!(
                "expected a duration like \"30s\", found {}",
                kind(other)
            )),
        };
        match parsed {
            Ok(duration) if duration.is_zero() => {
                self.error(at, "duration must be greater than zero");
                default
            }
            Ok(duration) if duration > MAX_DURATION => {
                let reason = format!(
                    "duration must be greater than zero and at most {}, not {}",
                    humantime::format_duration(MAX_DURATION),
                    humantime::format_duration(duration)
                );
                self.error(at, reason);
                default
            }
            Ok(duration) => duration,
            Err(reason) => {
                self.error(at, reason);
                default
            }
        }
    }
}

/// Parses a duration string: whole seconds, or humantime syntax.
fn parse_duration(text: &str) -> Result<Duration, String> {
    let text = text.trim();
    if !text.is_empty() && text.bytes().all(|b| b.is_ascii_digit()) {
        return text
            .parse()
            .map(Duration::from_secs)
            .map_err(|_| format!("invalid duration {text:?}; the number is too large"));
    }
    humantime::parse_duration(text)
        .map_err(|e| format!("invalid duration {text:?} ({e}); write e.g. 30s, 1m30s or 500ms"))
}
