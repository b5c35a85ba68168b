//! The caller's deadline, read from the `grpc-timeout` request header.

use std::time::Duration;

use tonic::metadata::MetadataMap;

/// The time the caller gives this request, if it set a deadline. A malformed header is ignored
/// (tonic's own timeout layer has rejected nothing for it either).
pub fn from_metadata(metadata: &MetadataMap) -> Option<Duration> {
    parse(metadata.get("grpc-timeout")?.to_str().ok()?)
}

/// Parses a `grpc-timeout` value: at most 8 digits and a unit (H, M, S, m, u, n), as the gRPC
/// over HTTP/2 spec defines it.
fn parse(value: &str) -> Option<Duration> {
    if value.len() < 2 || value.len() > 9 {
        return None;
    }
    let (digits, unit) = value.split_at(value.len() - 1);
    let amount: u64 = digits.parse().ok()?;
    Some(match unit {
        "H" => Duration::from_secs(amount * 3600),
        "M" => Duration::from_secs(amount * 60),
        "S" => Duration::from_secs(amount),
        "m" => Duration::from_millis(amount),
        "u" => Duration::from_micros(amount),
        "n" => Duration::from_nanos(amount),
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grpc_timeout_values_parse() {
        let cases = [
            ("1H", Some(Duration::from_secs(3600))),
            ("2M", Some(Duration::from_secs(120))),
            ("30S", Some(Duration::from_secs(30))),
            ("1500m", Some(Duration::from_millis(1500))),
            ("99999999u", Some(Duration::from_micros(99_999_999))),
            ("7n", Some(Duration::from_nanos(7))),
            ("100000000S", None),
            ("S", None),
            ("10x", None),
            ("-1S", None),
            ("", None),
        ];
        for (value, want) in cases {
            assert_eq!(parse(value), want, "{value:?}");
        }
    }
}
