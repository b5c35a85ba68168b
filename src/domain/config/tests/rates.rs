//! Call rates and the audit section: what they read as, and every mistake named at its field.

use std::{path::PathBuf, time::Duration};

use super::{errors::assert_errors, parse_with_env};
use crate::domain::config::{Audit, AuditSink, OnFailure, Per, Rate};

#[test]
fn rates_read_as_a_count_per_second_minute_or_hour() {
    let text = "limits: { caller_rate: 50/s }\naudit: { file: /var/log/tb/audit.jsonl, arguments: true }\nservers:\n  - name: fs\n    command: x\n    rate: \"20 / m\"\n    caller_rate: 2/h\n";
    let config = parse_with_env(text).unwrap();
    let caller = config.limits.caller_rate.unwrap();
    assert_eq!((caller.count.get(), caller.per), (50, Per::Second));
    assert_eq!(caller.interval(), Duration::from_millis(20));
    assert_eq!(caller.to_string(), "50/s");
    let server = &config.servers[0];
    assert_eq!(server.rate.unwrap().to_string(), "20/m");
    assert_eq!(server.rate.unwrap().interval(), Duration::from_secs(3));
    assert_eq!(server.caller_rate.unwrap().to_string(), "2/h");
    assert_eq!(
        config.audit,
        Some(Audit {
            sink: AuditSink::File(PathBuf::from("/var/log/tb/audit.jsonl")),
            arguments: true,
            on_failure: OnFailure::Refuse,
        })
    );
    let stdout = parse_with_env("audit: { file: \"-\", on_failure: drop }\n").unwrap();
    let stdout = stdout.audit.unwrap();
    assert_eq!(stdout.sink, AuditSink::Stdout);
    assert_eq!(stdout.on_failure, OnFailure::Drop);
    let refuse = parse_with_env("audit: { file: a.jsonl, on_failure: refuse }\n").unwrap();
    assert_eq!(refuse.audit.unwrap().on_failure, OnFailure::Refuse);
    assert_eq!(parse_with_env("{}").unwrap().audit, None);
    assert_eq!(
        Rate::parse("1/h").unwrap().interval(),
        Duration::from_secs(3600)
    );
}

#[test]
fn rate_and_audit_mistakes_are_named_at_their_field() {
    let server = |field: &str| format!("servers:\n  - name: fs\n    command: x\n    {field}\n");
    let cases: Vec<(String, Vec<(&str, &str)>)> = vec![
        (
            "limits: { caller_rate: 50 }\n".into(),
            vec![("limits.caller_rate", "expected a rate like \"50/s\"")],
        ),
        (
            "limits: { caller_rate: 50/d }\n".into(),
            vec![("limits.caller_rate", "unknown period \"d\"")],
        ),
        (
            server("rate: 0/s"),
            vec![("servers[0] (fs).rate", "between 1 and 1000000")],
        ),
        (
            server("caller_rate: fast"),
            vec![("servers[0] (fs).caller_rate", "write it as N/s, N/m or N/h")],
        ),
        (
            server("rate: 1.5/s"),
            vec![("servers[0] (fs).rate", "whole number")],
        ),
        (
            "audit: { arguments: true }\n".into(),
            vec![("audit.file", "missing")],
        ),
        (
            "audit: { file: \"\" }\n".into(),
            vec![("audit.file", "empty")],
        ),
        (
            "audit: { file: a.jsonl, rotate: daily }\n".into(),
            vec![("audit.rotate", "unknown field")],
        ),
        (
            "audit: { file: a.jsonl, on_failure: ignore }\n".into(),
            vec![(
                "audit.on_failure",
                r#"expected "refuse" or "drop", found "ignore""#,
            )],
        ),
        (
            "audit: { file: a.jsonl, on_failure: false }\n".into(),
            vec![("audit.on_failure", "expected a string")],
        ),
    ];
    for (text, want) in &cases {
        assert_errors(text, want);
    }
}
