//! Restart delays: exponential backoff with jitter, capped. Pure: the randomness is a parameter.

use std::time::Duration;

/// How long to wait before restart attempt `attempt` (0 for the first after a failure): the
/// delay doubles from `initial` up to `max`, and `jitter` (in `[0, 1)`) picks a point in its
/// upper half ("equal jitter"), so many servers failing together do not retry in lockstep
/// while each still waits at least half its share.
pub fn delay(attempt: u32, initial: Duration, max: Duration, jitter: f64) -> Duration {
    let ceiling = initial
        .saturating_mul(2u32.saturating_pow(attempt))
        .min(max);
    let jitter = jitter.clamp(0.0, 1.0);
    ceiling.div_f64(2.0) + ceiling.div_f64(2.0).mul_f64(jitter)
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: fn(u64) -> Duration = Duration::from_secs;

    #[test]
    fn delays_double_up_to_the_cap() {
        let ceilings: Vec<Duration> = (0..9).map(|a| delay(a, S(1), S(60), 1.0)).collect();
        assert_eq!(
            ceilings,
            [S(1), S(2), S(4), S(8), S(16), S(32), S(60), S(60), S(60)]
        );
    }

    #[test]
    fn jitter_stays_in_the_upper_half() {
        for attempt in [0, 3, 10, 40, u32::MAX] {
            let ceiling = delay(attempt, S(1), S(60), 1.0);
            assert_eq!(delay(attempt, S(1), S(60), 0.0), ceiling / 2);
            let mid = delay(attempt, S(1), S(60), 0.5);
            assert!(mid > ceiling / 2 && mid < ceiling, "{attempt}: {mid:?}");
        }
    }

    #[test]
    fn out_of_range_jitter_is_clamped() {
        assert_eq!(delay(0, S(2), S(60), -3.0), S(1));
        assert_eq!(delay(0, S(2), S(60), 7.0), S(2));
    }
}
