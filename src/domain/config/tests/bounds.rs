//! Every setting that sizes something is bounded, each value out of range an error naming its
//! field and the range: no value that passes `check` can overflow later (a duration added to
//! the clock, a length written in 32 bits, a rate's interval). And the MCP face's settings.

use std::time::Duration;

use super::{errors::assert_errors, parse_with_env};
use crate::domain::{
    config::{MAX_DURATION, MAX_RATE_COUNT, MAX_SIZE, McpFace},
    origin::is_allowed,
};

const HUGE: &str = "18446744073709551615";

/// Every duration setting, as a document setting it to `value`, and its path.
fn durations(value: &str) -> Vec<(String, String)> {
    let server = |field: &str| {
        (
            format!("servers: [{{name: a, command: x, {field}: {value}}}]"),
            format!("servers[0] (a).{field}"),
        )
    };
    let mut cases: Vec<(String, String)> = ["shutdown_grace", "max_connection_age"]
        .iter()
        .map(|field| (format!("{field}: {value}"), (*field).to_owned()))
        .collect();
    cases.push((
        format!("max_connection_age: 1m\nmax_connection_age_grace: {value}"),
        "max_connection_age_grace".into(),
    ));
    for field in [
        "timeout",
        "init_timeout",
        "backoff_initial",
        "queue_timeout",
    ] {
        cases.push(server(field));
    }
    cases.push((
        format!("servers: [{{name: a, command: x, timeout: 1s, max_timeout: {value}}}]"),
        "servers[0] (a).max_timeout".into(),
    ));
    cases.push((
        format!("servers: [{{name: a, command: x, backoff_initial: 1s, backoff_max: {value}}}]"),
        "servers[0] (a).backoff_max".into(),
    ));
    cases.push((
        format!("servers: [{{name: a, command: x, isolation: per-caller, idle_timeout: {value}}}]"),
        "servers[0] (a).idle_timeout".into(),
    ));
    cases.push((
        format!(
            "auth: {{jwt: {{issuer: i, audience: tb, jwks_file: /k.json, \
             jwks_refetch_interval: {value}}}}}"
        ),
        "auth.jwt.jwks_refetch_interval".into(),
    ));
    cases
}

#[test]
fn every_duration_is_at_most_a_year() {
    for value in [HUGE, "\"18446744073709551615\"", "2years", "366days"] {
        for (text, at) in durations(value) {
            assert_errors(
                &text,
                &[(&at, "must be greater than zero and at most 1year, not ")],
            );
        }
    }
    // A first restart delay of a year needs a longest one as long.
    let accepted = durations("1year")
        .into_iter()
        .filter(|(_, at)| !at.ends_with("backoff_initial"));
    for (text, at) in accepted {
        parse_with_env(&text).unwrap_or_else(|e| panic!("{at}: {e}"));
    }
    parse_with_env("servers: [{name: a, command: x, backoff_initial: 1year, backoff_max: 1year}]")
        .unwrap();
}

#[test]
fn a_default_max_timeout_is_at_most_a_year_too() {
    let config = parse_with_env("servers: [{name: a, command: x, timeout: 1year}]").unwrap();
    assert_eq!(config.servers[0].max_timeout, MAX_DURATION);
    assert_eq!(MAX_DURATION, Duration::from_secs(31_557_600));
}

#[test]
fn sizes_are_at_most_4_gib_less_one() {
    for field in [
        "max_request_bytes",
        "max_response_bytes",
        "max_result_bytes",
    ] {
        let at = format!("limits.{field}");
        for value in ["4294967296", "4GiB", "1TB", HUGE] {
            assert_errors(
                &format!("limits: {{{field}: {value}}}"),
                &[(
                    &at,
                    "must be between 1 and 4294967295 bytes (4 GiB - 1), not ",
                )],
            );
        }
        let config = parse_with_env(&format!("limits: {{{field}: 4294967295}}")).unwrap();
        let limits = config.limits;
        let sizes = [
            limits.max_request_bytes,
            limits.max_response_bytes,
            limits.max_result_bytes,
        ];
        assert!(sizes.contains(&(MAX_SIZE as usize)), "{field}");
        // What pre-encoded answers write: a 32-bit length.
        assert!(sizes.iter().all(|size| u32::try_from(*size).is_ok()));
    }
}

#[test]
fn rates_allow_at_most_a_million_calls_a_period() {
    for rate in ["1000001/s", "4294967295/s", "4294967295/h"] {
        assert_errors(
            &format!("limits: {{caller_rate: \"{rate}\"}}"),
            &[(
                "limits.caller_rate",
                "the count must be between 1 and 1000000",
            )],
        );
    }
    for per in ["s", "m", "h"] {
        let config = parse_with_env(&format!(
            "limits: {{caller_rate: \"{MAX_RATE_COUNT}/{per}\"}}"
        ))
        .unwrap();
        // A zero interval was a panic when the limiter was built.
        assert!(!config.limits.caller_rate.unwrap().interval().is_zero());
    }
}

#[test]
fn counts_name_their_range() {
    let cases: &[(&str, &[(&str, &str)])] = &[
        (
            "mcp_sessions_per_caller: 0",
            &[(
                "mcp_sessions_per_caller",
                "must be between 1 and 100000, not 0",
            )],
        ),
        (
            "mcp_max_sessions: 100001",
            &[(
                "mcp_max_sessions",
                "must be between 1 and 100000, not 100001",
            )],
        ),
        (
            "mcp_max_sessions: -1",
            &[("mcp_max_sessions", "invalid value")],
        ),
        (
            "servers: [{name: a, command: x, max_queued_calls: 18446744073709551615}]",
            &[(
                "servers[0] (a).max_queued_calls",
                "must be between 0 and 1000000, not 18446744073709551615",
            )],
        ),
    ];
    for (text, want) in cases {
        assert_errors(text, want);
    }
}

#[test]
fn the_mcp_face_settings_default_and_read() {
    assert_eq!(
        parse_with_env("{}").unwrap().mcp_face,
        McpFace {
            allowed_origins: Vec::new(),
            sessions_per_caller: 16,
            max_sessions: 10_000,
        }
    );
    let text = "mcp_allowed_origins: [\"https://app.example.com\", \"http://localhost:*\"]\n\
                mcp_sessions_per_caller: 3\nmcp_max_sessions: 5\n";
    let face = parse_with_env(text).unwrap().mcp_face;
    assert_eq!((face.sessions_per_caller, face.max_sessions), (3, 5));
    let shown: Vec<String> = face
        .allowed_origins
        .iter()
        .map(ToString::to_string)
        .collect();
    assert_eq!(shown, ["https://app.example.com", "http://localhost:*"]);
    assert!(is_allowed(&face.allowed_origins, "https://app.example.com"));
    assert!(!is_allowed(&face.allowed_origins, "https://evil.example"));
}

#[test]
fn malformed_origins_are_named_at_their_index() {
    let cases: &[(&str, &[(&str, &str)])] = &[
        (
            "mcp_allowed_origins: [\"https://ok.example\", \"app.example.com\", \"https://a.example/path\"]",
            &[
                (
                    "mcp_allowed_origins[1]",
                    "invalid origin \"app.example.com\"",
                ),
                ("mcp_allowed_origins[2]", "has no path"),
            ],
        ),
        (
            "mcp_allowed_origins: [\"*\"]",
            &[("mcp_allowed_origins[0]", "invalid origin \"*\"")],
        ),
        (
            "mcp_allowed_origins: [\"https://*.example.com\"]",
            &[("mcp_allowed_origins[0]", "invalid origin")],
        ),
        (
            "mcp_allowed_origins: [80]",
            &[("mcp_allowed_origins[0]", "expected an origin")],
        ),
        (
            "mcp_allowed_origins: https://app.example.com",
            &[("mcp_allowed_origins", "expected a list of origins")],
        ),
        (
            "mcp_allowed_origins: [\"${NOT_SET}\"]",
            &[("mcp_allowed_origins[0]", "NOT_SET is not set")],
        ),
    ];
    for (text, want) in cases {
        assert_errors(text, want);
    }
}
