//! A server's tokens kept in the shared Redis (`state.redis`), so that every replica uses the
//! same ones: one JSON value per server (`oauth:<server>`) and a lock beside it
//! (`oauth:<server>:lock`, `SET NX PX`, released by compare-and-delete) that one replica at a
//! time holds while it gets a new token. Whoever takes the lock reads the value again first:
//! another replica may have just renewed it, and a refresh token already redeemed must not be
//! redeemed twice.

pub(super) mod machine;

use std::{
    sync::{
        LazyLock,
        atomic::{AtomicU64, Ordering},
    },
    time::Duration,
};

use redis::{AsyncTypedCommands as _, ExistenceCheck, RedisError, Script, SetExpiry, SetOptions};
use serde::{Serialize, de::DeserializeOwned};

use super::TOKEN_DEADLINE;
use crate::{domain::names::ServerName, shared_state::Shared};

/// How long the lock lasts unless released: longer than its holder can hold it (getting a
/// token is abandoned after [`TOKEN_DEADLINE`]), so that it never lapses under a live holder,
/// and it frees itself if the holder dies.
pub(crate) const LOCK_TTL: Duration = Duration::from_secs(TOKEN_DEADLINE.as_secs() + 5);
/// How often a replica waiting for another's new token looks again.
const POLL_EVERY: Duration = Duration::from_millis(50);

/// Deletes the lock only if it is still the one taken (its value), so that a lock that lapsed
/// and was taken by another replica is not freed by the first.
static RELEASE: LazyLock<Script> = LazyLock::new(|| {
    Script::new(
        "if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) \
         else return 0 end",
    )
});

/// Makes each lock value of this process unique.
static LOCKS_TAKEN: AtomicU64 = AtomicU64::new(0);

/// One server's tokens in Redis.
pub(crate) struct SharedTokens {
    shared: Shared,
    key: String,
    lock_key: String,
}

/// What Redis held, once it suits or this replica may get a new one.
pub(crate) enum Settled<T> {
    /// A value that suits: no need to get one.
    Stored(T),
    /// None suits and this replica holds the lock: it gets one (from what is stored, if
    /// anything), writes it and releases.
    Locked(Lock, Option<T>),
}

impl SharedTokens {
    /// `server`'s tokens in `shared`'s Redis.
    pub(crate) fn new(shared: Shared, server: &ServerName) -> Self {
        let key = shared.key(&format!("oauth:{server}"));
        let lock_key = format!("{key}:lock");
        Self {
            shared,
            key,
            lock_key,
        }
    }

    /// Where the tokens are, for people: "Redis at URL (no password), key KEY".
    pub(crate) fn shown(&self) -> String {
        format!("Redis at {}, key {}", self.shared.shown(), self.key)
    }

    /// Counts and (now and then) logs a failed command.
    pub(crate) fn failed(&self, error: &RedisError) {
        self.shared.failed("oauth", error);
    }

    /// The stored value; `None` when there is none, or when it cannot be read as a `T` (it is
    /// then replaced by the next one written).
    pub(crate) async fn read<T: DeserializeOwned>(&self) -> Result<Option<T>, RedisError> {
        let text = self.shared.connection().get(&self.key).await?;
        self.shared.worked();
        Ok(text.and_then(|text| match serde_json::from_str(&text) {
            Ok(value) => Some(value),
            Err(error) => {
                tracing::warn!(key = %self.key, %error, "an unreadable token value in Redis is ignored");
                None
            }
        }))
    }

    /// Stores `value`, to expire after `ttl` if given.
    pub(crate) async fn write<T: Serialize>(
        &self,
        value: &T,
        ttl: Option<Duration>,
    ) -> Result<(), RedisError> {
        let json = serde_json::to_string(value).map_err(|e| {
            RedisError::from((
                redis::ErrorKind::Client,
                "token not serializable",
                e.to_string(),
            ))
        })?;
        let mut connection = self.shared.connection();
        match ttl {
            Some(ttl) => connection.pset_ex(&self.key, json, millis(ttl)).await?,
            None => connection.set(&self.key, json).await?,
        }
        self.shared.worked();
        Ok(())
    }

    /// The lock, if no other replica holds it.
    pub(crate) async fn try_lock(&self) -> Result<Option<Lock>, RedisError> {
        let taken = LOCKS_TAKEN.fetch_add(1, Ordering::Relaxed);
        let value = format!("{}:{taken}", self.shared.replica());
        let options = SetOptions::default()
            .conditional_set(ExistenceCheck::NX)
            .with_expiration(SetExpiry::PX(millis(LOCK_TTL)));
        let set = self
            .shared
            .connection()
            .set_options(&self.lock_key, &value, options)
            .await?;
        self.shared.worked();
        Ok(set.map(|_| Lock {
            shared: self.shared.clone(),
            key: self.lock_key.clone(),
            value,
            released: false,
        }))
    }

    /// Waits until Redis holds a value that `suits`, or this replica holds the lock (and has
    /// read the value again under it). The caller bounds the wait ([`TOKEN_DEADLINE`]).
    pub(crate) async fn settle<T: DeserializeOwned>(
        &self,
        suits: impl Fn(&T) -> bool,
    ) -> Result<Settled<T>, RedisError> {
        loop {
            if let Some(stored) = self.read::<T>().await?.filter(&suits) {
                return Ok(Settled::Stored(stored));
            }
            if let Some(lock) = self.try_lock().await? {
                // Another replica may have written a new one between the read and the lock.
                let stored = self.read::<T>().await?;
                return Ok(match stored {
                    Some(stored) if suits(&stored) => {
                        lock.release().await;
                        Settled::Stored(stored)
                    }
                    stored => Settled::Locked(lock, stored),
                });
            }
            tokio::time::sleep(POLL_EVERY).await;
        }
    }

    /// Takes the lock, waiting at most [`LOCK_TTL`] for another holder to release it (or for
    /// its lock to lapse).
    pub(crate) async fn lock(&self) -> Result<Option<Lock>, RedisError> {
        let deadline = tokio::time::Instant::now() + LOCK_TTL + POLL_EVERY;
        while tokio::time::Instant::now() < deadline {
            if let Some(lock) = self.try_lock().await? {
                return Ok(Some(lock));
            }
            tokio::time::sleep(POLL_EVERY).await;
        }
        Ok(None)
    }
}

/// The lock of one server's tokens, held by this replica. Released when dropped, if not
/// before (a token request abandoned at its deadline must not keep the others waiting).
pub(crate) struct Lock {
    shared: Shared,
    key: String,
    value: String,
    released: bool,
}

impl Lock {
    /// Releases it (a failure is counted; the lock then lapses by itself).
    pub(crate) async fn release(mut self) {
        self.released = true;
        release(&self.shared, &self.key, &self.value).await;
    }
}

impl Drop for Lock {
    fn drop(&mut self) {
        if self.released {
            return;
        }
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            let (shared, key, value) = (
                self.shared.clone(),
                std::mem::take(&mut self.key),
                std::mem::take(&mut self.value),
            );
            runtime.spawn(async move { release(&shared, &key, &value).await });
        }
    }
}

async fn release(shared: &Shared, key: &str, value: &str) {
    let released: Result<i64, RedisError> = RELEASE
        .key(key)
        .arg(value)
        .invoke_async(&mut shared.connection())
        .await;
    if let Err(error) = released {
        shared.failed("oauth", &error);
    }
}

/// `duration` in whole milliseconds, at least one (Redis refuses an expiry of zero).
pub(crate) fn millis(duration: Duration) -> u64 {
    u64::try_from(duration.as_millis())
        .unwrap_or(u64::MAX)
        .max(1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn expiries_are_whole_milliseconds_never_zero() {
        assert_eq!(millis(Duration::ZERO), 1);
        assert_eq!(millis(Duration::from_micros(1500)), 1);
        assert_eq!(millis(Duration::from_secs(2)), 2000);
        assert_eq!(millis(Duration::MAX), u64::MAX);
    }

    #[test]
    fn the_lock_outlives_whoever_holds_it() {
        assert!(LOCK_TTL > TOKEN_DEADLINE);
    }
}
