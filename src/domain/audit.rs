//! One audit line: who called which tool, on which server, with what outcome, when and how
//! long, in which trace — and the arguments only when asked for. Never a header, a token or a
//! tool's result. Pure.

use std::time::{Duration, SystemTime};

use serde::Serialize;
use serde_json::Value;

/// Arguments larger than this (serialized) are recorded by their size only.
pub const MAX_AUDITED_ARGUMENTS: usize = 64 * 1024;

/// What one tool call left in the audit log.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct AuditEntry {
    /// When the call arrived, RFC 3339 with milliseconds, UTC.
    pub ts: String,
    /// The caller's id (a token's name, a JWT's caller claim, a certificate's CN, `anonymous`);
    /// `None` when the caller was not admitted.
    pub caller: Option<String>,
    /// The tool asked for (its exposed name).
    pub tool: String,
    /// The server the tool belongs to, when it is known.
    pub server: Option<String>,
    /// The gRPC status name: `OK`, `PERMISSION_DENIED`, `RESOURCE_EXHAUSTED`, ...
    pub code: &'static str,
    /// Whether the tool ran and reported an error (`isError`).
    pub is_error: bool,
    /// How long the call took in the broker, in milliseconds.
    pub duration_ms: f64,
    /// The trace the call belongs to (the caller's `traceparent`), if any.
    pub trace_id: Option<String>,
    /// The arguments, with `audit.arguments: true`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub arguments: Option<Value>,
}

impl AuditEntry {
    /// The line, without its newline.
    pub fn to_line(&self) -> String {
        serde_json::to_string(self).expect("an audit entry serializes")
    }

    /// Appends the line and its newline to `out`.
    pub fn write_line(&self, out: &mut Vec<u8>) {
        serde_json::to_writer(&mut *out, self).expect("an audit entry serializes");
        out.push(b'\n');
    }
}

/// `arguments` as recorded: as sent, or `{"omitted_bytes": N}` when over
/// [`MAX_AUDITED_ARGUMENTS`]; text that is not JSON is kept as a string.
pub fn audited_arguments(arguments: Value) -> Value {
    let size = serde_json::to_string(&arguments).map_or(0, |text| text.len());
    if size > MAX_AUDITED_ARGUMENTS {
        serde_json::json!({ "omitted_bytes": size })
    } else {
        arguments
    }
}

/// `at` as RFC 3339 with milliseconds, UTC.
pub fn timestamp(at: SystemTime) -> String {
    humantime::format_rfc3339_millis(at).to_string()
}

/// A duration in milliseconds, to the microsecond.
pub fn milliseconds(duration: Duration) -> f64 {
    (duration.as_secs_f64() * 1_000_000.0).round() / 1000.0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_line_has_every_field_and_arguments_only_when_given() {
        let entry = AuditEntry {
            ts: timestamp(SystemTime::UNIX_EPOCH + Duration::from_millis(1_500)),
            caller: Some("alice".into()),
            tool: "fs_read".into(),
            server: None,
            code: "NOT_FOUND",
            is_error: false,
            duration_ms: milliseconds(Duration::from_micros(1_234_567)),
            trace_id: None,
            arguments: None,
        };
        let line: Value = serde_json::from_str(&entry.to_line()).unwrap();
        assert_eq!(
            line,
            serde_json::json!({
                "ts": "1970-01-01T00:00:01.500Z", "caller": "alice", "tool": "fs_read",
                "server": null, "code": "NOT_FOUND", "is_error": false,
                "duration_ms": 1234.567, "trace_id": null,
            })
        );
        let with = AuditEntry {
            arguments: Some(audited_arguments(serde_json::json!({"path": "/a"}))),
            ..entry
        };
        assert!(with.to_line().contains(r#""arguments":{"path":"/a"}"#));
        let big = audited_arguments(serde_json::json!({"blob": "x".repeat(70_000)}));
        assert_eq!(big, serde_json::json!({"omitted_bytes": 70_011}));
    }
}
