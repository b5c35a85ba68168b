//! The connection limits under `limits`: what they read as, their defaults, and every value
//! out of bounds named at its field.

use std::time::Duration;

use super::{errors::assert_errors, parse_with_env};
use crate::domain::config::ConnectionLimits;

#[test]
fn connection_limits_read_with_their_defaults() {
    let text = "limits: { max_connections: 50, max_concurrent_streams: 8, header_timeout: 1500ms }";
    let config = parse_with_env(text).unwrap();
    assert_eq!(
        config.limits.connections,
        ConnectionLimits {
            max_connections: 50,
            max_concurrent_streams: 8,
            header_timeout: Duration::from_millis(1500),
        }
    );
    let defaults = parse_with_env("limits: { max_request_bytes: 1MiB }").unwrap();
    assert_eq!(
        defaults.limits.connections,
        ConnectionLimits {
            max_connections: 10_000,
            max_concurrent_streams: 256,
            header_timeout: Duration::from_secs(10),
        }
    );
    let upper =
        "limits: { max_connections: 1000000, max_concurrent_streams: 65536, header_timeout: 1h }";
    assert!(parse_with_env(upper).is_ok());
}

#[test]
fn connection_limits_out_of_bounds_are_named_at_their_field() {
    let cases: &[(&str, &[(&str, &str)])] = &[
        (
            "limits: {max_connections: 0}",
            &[(
                "limits.max_connections",
                "must be between 1 and 1000000, not 0",
            )],
        ),
        (
            "limits: {max_connections: 1000001}",
            &[(
                "limits.max_connections",
                "must be between 1 and 1000000, not 1000001",
            )],
        ),
        (
            "limits: {max_connections: 18446744073709551615}",
            &[(
                "limits.max_connections",
                "must be between 1 and 1000000, not 18446744073709551615",
            )],
        ),
        (
            "limits: {max_connections: many}",
            &[("limits.max_connections", "invalid type")],
        ),
        (
            "limits: {max_concurrent_streams: 0}",
            &[(
                "limits.max_concurrent_streams",
                "must be between 1 and 65536, not 0",
            )],
        ),
        (
            "limits: {max_concurrent_streams: 4294967296}",
            &[(
                "limits.max_concurrent_streams",
                "must be between 1 and 65536, not 4294967296",
            )],
        ),
        (
            "limits: {header_timeout: 0}",
            &[("limits.header_timeout", "greater than zero")],
        ),
        (
            "limits: {header_timeout: 1h1s}",
            &[("limits.header_timeout", "must be at most 1h, not 1h 1s")],
        ),
        (
            "limits: {header_timeout: soon}",
            &[("limits.header_timeout", "invalid duration \"soon\"")],
        ),
    ];
    for (text, want) in cases {
        assert_errors(text, want);
    }
}
