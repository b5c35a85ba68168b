//! Call rates (`limits.caller_rate`, `servers[].rate`, `servers[].caller_rate`) written `N/s`,
//! `N/m` or `N/h`, and the `audit` section. Pure.

use std::{fmt, num::NonZeroU32, path::PathBuf, time::Duration};

use serde::Deserialize;
use serde_json::Value;

use super::validate::Checker;

/// The most calls a rate may allow per period: more is no limit, and past 10^9 a second the
/// interval between calls would be zero (a limiter cannot be built for it).
pub const MAX_RATE_COUNT: u32 = 1_000_000;

/// How many calls per period; a burst of `count` at once is allowed, then one per
/// `period / count`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Rate {
    /// Calls per period (and the burst).
    pub count: NonZeroU32,
    /// The period.
    pub per: Per,
}

/// The period of a [`Rate`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Per {
    /// `/s`
    Second,
    /// `/m`
    Minute,
    /// `/h`
    Hour,
}

impl Per {
    /// Its length.
    pub fn duration(self) -> Duration {
        Duration::from_secs(match self {
            Per::Second => 1,
            Per::Minute => 60,
            Per::Hour => 3600,
        })
    }
}

impl Rate {
    /// Reads `50/s`, `100/m`, `1000/h` (spaces around the parts allowed).
    pub fn parse(text: &str) -> Result<Rate, String> {
        let hint = "write it as N/s, N/m or N/h, e.g. 50/s";
        let (count, per) = text
            .split_once('/')
            .ok_or_else(|| format!("invalid rate {text:?}: {hint}"))?;
        let count: u32 = count.trim().parse().map_err(|_| {
            format!("invalid rate {text:?}: the count must be a whole number; {hint}")
        })?;
        let count = NonZeroU32::new(count)
            .filter(|count| count.get() <= MAX_RATE_COUNT)
            .ok_or_else(|| {
                format!("invalid rate {text:?}: the count must be between 1 and {MAX_RATE_COUNT}")
            })?;
        let per = match per.trim() {
            "s" => Per::Second,
            "m" => Per::Minute,
            "h" => Per::Hour,
            other => {
                return Err(format!(
                    "invalid rate {text:?}: unknown period {other:?}; {hint}"
                ));
            }
        };
        Ok(Rate { count, per })
    }

    /// The time one call's allowance takes to come back: `period / count`.
    pub fn interval(self) -> Duration {
        self.per.duration() / self.count.get()
    }
}

impl fmt::Display for Rate {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let per = match self.per {
            Per::Second => "s",
            Per::Minute => "m",
            Per::Hour => "h",
        };
        write!(f, "{}/{per}", self.count)
    }
}

/// Where audit lines go.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AuditSink {
    /// `-`: the broker's standard output.
    Stdout,
    /// A file, appended to (created with mode 0600), reopened on SIGHUP.
    File(PathBuf),
}

/// The `audit` section: one JSON line per tool call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Audit {
    /// Where the lines go.
    pub sink: AuditSink,
    /// Whether a line holds the call's arguments.
    pub arguments: bool,
    /// What a call gets when its line cannot be written.
    pub on_failure: OnFailure,
}

/// `audit.on_failure`: what a call gets when its line cannot be written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum OnFailure {
    /// `refuse` (the default): no line, no answer: UNAVAILABLE instead of the call's result,
    /// and new calls refused before they run until the log can be written again.
    #[default]
    Refuse,
    /// `drop`: the call is answered; its line is dropped and counted.
    Drop,
}

#[derive(Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawAudit {
    file: Option<String>,
    arguments: Option<bool>,
    on_failure: Option<String>,
}

impl Checker<'_, '_> {
    /// A rate at `at`, if given.
    pub(super) fn rate(&mut self, raw: Option<Value>, at: &str) -> Option<Rate> {
        let parsed = match raw? {
            Value::String(text) => Rate::parse(&text),
            other => Err(format!(
                "expected a rate like \"50/s\" (N/s, N/m or N/h), found {other}"
            )),
        };
        parsed.map_err(|reason| self.error(at, reason)).ok()
    }

    /// The `audit` section.
    pub(super) fn audit(&mut self, raw: Option<Value>) -> Option<Audit> {
        let raw = self.section::<RawAudit>(raw, "audit")?;
        let sink = match raw.file.as_deref().map(str::trim) {
            None => {
                self.error(
                    "audit.file",
                    "missing: a path, or \"-\" for standard output",
                );
                return None;
            }
            Some("") => {
                self.error("audit.file", "empty: a path, or \"-\" for standard output");
                return None;
            }
            Some("-") => AuditSink::Stdout,
            Some(path) => AuditSink::File(PathBuf::from(path)),
        };
        let on_failure = match raw.on_failure.as_deref().map(str::trim) {
            None | Some("refuse") => OnFailure::Refuse,
            Some("drop") => OnFailure::Drop,
            Some(other) => {
                self.error(
                    "audit.on_failure",
                    format!("expected \"refuse\" or \"drop\", found {other:?}"),
                );
                return None;
            }
        };
        Some(Audit {
            sink,
            arguments: raw.arguments.unwrap_or(false),
            on_failure,
        })
    }
}
