//! One audit line: who called which tool, on which server, with what outcome, when and how
//! long, in which trace — and the arguments only when asked for. Never a header, a token or a
//! tool's result. Pure.

use std::time::{Duration, SystemTime};

use serde::Serialize;
use serde_json::Value;

/// Arguments larger than this (serialized) are recorded by their size only.
pub const MAX_AUDITED_ARGUMENTS: usize = 64 * 1024;

/// Tool names longer than this (in bytes) are cut to it: a name is the caller's to choose,
/// even a caller the gate refused.
pub const MAX_AUDITED_TOOL: usize = 256;

/// What one tool call left in the audit log.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct AuditEntry {
    /// When the call arrived, RFC 3339 with milliseconds, UTC.
    pub ts: String,
    /// The caller's id (a token's name, a JWT's caller claim, a certificate's identity,
    /// `anonymous`); `None` when the caller was not admitted.
    pub caller: Option<String>,
    /// How it proved it: `token`, `jwt`, `cert` or `anonymous` (`None` with `caller`): a
    /// token and a JWT may bear the same id, and are two callers.
    pub caller_kind: Option<&'static str>,
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
    /// How many calls the line stands for, when more than one: the `tools/call`s of one
    /// refused request (a JSON-RPC batch), of which `tool`, `trace_id` and `arguments` are the
    /// first's.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub count: Option<u64>,
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

/// `tool` as recorded: cut to at most [`MAX_AUDITED_TOOL`] bytes, on a character boundary.
pub fn audited_tool(mut tool: String) -> String {
    if tool.len() > MAX_AUDITED_TOOL {
        let end = tool.floor_char_boundary(MAX_AUDITED_TOOL);
        tool.truncate(end);
    }
    tool
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
            caller_kind: Some("jwt"),
            tool: "fs_read".into(),
            server: None,
            code: "NOT_FOUND",
            is_error: false,
            duration_ms: milliseconds(Duration::from_micros(1_234_567)),
            trace_id: None,
            arguments: None,
            count: None,
        };
        let line: Value = serde_json::from_str(&entry.to_line()).unwrap();
        assert_eq!(
            line,
            serde_json::json!({
                "ts": "1970-01-01T00:00:01.500Z", "caller": "alice", "caller_kind": "jwt",
                "tool": "fs_read",
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
        let batch = AuditEntry {
            count: Some(1000),
            ..with
        };
        assert!(batch.to_line().ends_with(r#","count":1000}"#));
    }

    #[test]
    fn tool_names_are_cut_at_256_bytes_on_a_character_boundary() {
        let cases = [
            ("fs_read".to_owned(), "fs_read".to_owned()),
            ("a".repeat(256), "a".repeat(256)),
            ("a".repeat(10_000), "a".repeat(256)),
            // 'é' is two bytes: byte 256 falls inside the 128th, which is left out whole.
            (
                format!("x{}", "é".repeat(200)),
                format!("x{}", "é".repeat(127)),
            ),
            ("€".repeat(100), "€".repeat(85)),
        ];
        for (tool, want) in cases {
            let cut = audited_tool(tool);
            assert_eq!(cut, want);
            assert!(cut.len() <= MAX_AUDITED_TOOL);
        }
    }
}
