//! Client-credentials tokens shared by the fleet: the token in Redis while it is fresh (by the
//! same renewal margin as a token held in memory), else one replica gets a new one under the
//! lock and stores it for the token's lifetime; the others wait for it (a while). With Redis
//! unreachable a replica gets its own token (a second client-credentials token harms nobody)
//! and counts the failure.

use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use secrecy::{ExposeSecret, SecretString};
use serde::{Deserialize, Serialize};

use super::{Settled, SharedTokens};
use crate::domain::outcome::OAuthFailure;
use crate::upstream::oauth::{Held, machine::Machine, renewal_margin};

/// How long a replica waits for another's new token before it gets its own: a replica that
/// died holding the lock would otherwise hold up the fleet until the lock lapses, and a second
/// client-credentials token harms nobody.
const WAIT_FOR_OTHERS: Duration = Duration::from_secs(10);

/// A token as stored in Redis (never logged: no `Debug`).
#[derive(Serialize, Deserialize)]
pub(crate) struct StoredToken {
    token: String,
    /// When it was received, in ms since the epoch.
    issued_at_ms: u64,
    /// When it expires, in ms since the epoch; `None`: it does not.
    expires_at_ms: Option<u64>,
    /// The scope it was granted.
    scopes: Vec<String>,
}

impl StoredToken {
    /// `held`, received at `now_ms`.
    fn of(held: &Held, now_ms: u64) -> Self {
        Self {
            token: held.token.expose_secret().to_owned(),
            issued_at_ms: now_ms,
            expires_at_ms: held.lifetime.map(|life| now_ms.saturating_add(ms(life))),
            scopes: held.scopes.clone(),
        }
    }

    /// When to get a new one, in ms since the epoch (`None`: never, short of a refusal).
    fn renew_at_ms(&self) -> Option<u64> {
        self.expires_at_ms.map(|expires| {
            let lifetime = expires.saturating_sub(self.issued_at_ms);
            expires.saturating_sub(ms(renewal_margin(Duration::from_millis(lifetime))))
        })
    }

    fn fresh(&self, now_ms: u64) -> bool {
        self.renew_at_ms().is_none_or(|at| now_ms < at)
    }

    /// As held in memory at `now_ms`.
    fn held(self, now_ms: u64) -> Held {
        let renew_at = self
            .renew_at_ms()
            .map(|at| Instant::now() + Duration::from_millis(at.saturating_sub(now_ms)));
        let lifetime = self
            .expires_at_ms
            .map(|expires| Duration::from_millis(expires.saturating_sub(now_ms)));
        Held {
            token: self.token.into(),
            renew_at,
            lifetime,
            scopes: self.scopes,
        }
    }
}

/// A token for the fleet: Redis's while it is fresh and not `rejected` (refused by the
/// server), else a new one got under the lock and stored.
pub(crate) async fn acquire(
    machine: &Machine,
    tokens: &SharedTokens,
    rejected: Option<&SecretString>,
) -> Result<Held, OAuthFailure> {
    let suits = |stored: &StoredToken| {
        stored.fresh(now_ms()) && rejected.is_none_or(|r| stored.token != r.expose_secret())
    };
    let lock = match tokio::time::timeout(WAIT_FOR_OTHERS, tokens.settle(suits)).await {
        Ok(Ok(Settled::Stored(stored))) => return Ok(stored.held(now_ms())),
        Ok(Ok(Settled::Locked(lock, _))) => Some(lock),
        Ok(Err(error)) => {
            tokens.failed(&error);
            return machine.acquire().await;
        }
        Err(_) => {
            tracing::warn!(redis = %tokens.shown(), "another replica has been getting the \
                token for {} s: getting one here", WAIT_FOR_OTHERS.as_secs());
            None
        }
    };
    let held = machine.acquire().await;
    if let Ok(held) = &held {
        store(tokens, held).await;
    }
    if let Some(lock) = lock {
        lock.release().await;
    }
    held
}

/// Stores `held` for the fleet, until it expires (a failure is counted; the token is still
/// used here).
pub(crate) async fn store(tokens: &SharedTokens, held: &Held) {
    let stored = StoredToken::of(held, now_ms());
    if let Err(error) = tokens.write(&stored, held.lifetime).await {
        tokens.failed(&error);
    }
}

fn ms(duration: Duration) -> u64 {
    u64::try_from(duration.as_millis()).unwrap_or(u64::MAX)
}

fn now_ms() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, ms)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stored(issued_at_ms: u64, expires_at_ms: Option<u64>) -> StoredToken {
        StoredToken {
            token: "t".into(),
            issued_at_ms,
            expires_at_ms,
            scopes: vec![],
        }
    }

    #[test]
    fn a_stored_token_is_renewed_by_the_same_margin_as_one_held() {
        // An hour: renewed 30 s before it expires.
        let hour = stored(1_000, Some(1_000 + 3_600_000));
        assert_eq!(hour.renew_at_ms(), Some(1_000 + 3_570_000));
        assert!(hour.fresh(1_000 + 3_569_999));
        assert!(!hour.fresh(1_000 + 3_570_000));
        // 8 s: renewed halfway.
        let short = stored(0, Some(8_000));
        assert_eq!(short.renew_at_ms(), Some(4_000));
        // No expiry: always fresh.
        assert!(stored(0, None).fresh(u64::MAX));
    }

    #[test]
    fn a_stored_token_held_keeps_its_scopes_and_its_remaining_time() {
        let held = stored(0, Some(8_000)).held(1_000);
        assert!(held.fresh());
        assert_eq!(held.lifetime, Some(Duration::from_millis(7_000)));
        let at = held.renew_at.expect("it expires");
        let left = at.saturating_duration_since(Instant::now());
        assert!(left <= Duration::from_millis(3_000) && left > Duration::from_millis(2_000));
        assert!(!stored(0, Some(8_000)).held(5_000).fresh());
    }

    #[test]
    fn a_held_token_is_stored_with_its_expiry() {
        let held = Held::new(
            "t".into(),
            Some(Duration::from_secs(60)),
            vec!["mcp".into()],
        );
        let stored = StoredToken::of(&held, 10_000);
        assert_eq!(stored.expires_at_ms, Some(70_000));
        assert_eq!(stored.scopes, ["mcp"]);
        let forever = StoredToken::of(&Held::new("t".into(), None, vec![]), 10_000);
        assert_eq!(forever.expires_at_ms, None);
    }
}
