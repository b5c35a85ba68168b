//! How long a token from an authorization server is trusted: what its `expires_in` says, but
//! never more than a day. A value that would overflow the clock's arithmetic (`expires_in` of
//! 2^64−1 seconds) is clamped like any other, never added to an instant as it is. Pure.

use std::time::Duration;

/// The longest a token is used before a new one is asked for, whatever the server said.
pub const MAX_TOKEN_LIFETIME: Duration = Duration::from_secs(24 * 60 * 60);

/// `lifetime`, at most [`MAX_TOKEN_LIFETIME`].
pub fn clamped(lifetime: Duration) -> Duration {
    lifetime.min(MAX_TOKEN_LIFETIME)
}

/// An `expires_in` in seconds as a lifetime, at most [`MAX_TOKEN_LIFETIME`].
pub fn from_expires_in(seconds: u64) -> Duration {
    clamped(Duration::from_secs(seconds))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lifetimes_are_kept_up_to_a_day_and_clamped_beyond() {
        let day = 86_400;
        let cases = [
            (0, 0),
            (1, 1),
            (3600, 3600),
            (day, day),
            (day + 1, day),
            (u64::from(u32::MAX), day),
            (u64::MAX, day),
        ];
        for (expires_in, want) in cases {
            assert_eq!(
                from_expires_in(expires_in),
                Duration::from_secs(want),
                "{expires_in}"
            );
        }
        assert_eq!(clamped(Duration::MAX), MAX_TOKEN_LIFETIME);
    }
}
