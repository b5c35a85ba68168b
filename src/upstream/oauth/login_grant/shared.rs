//! A login's tokens in Redis, shared by every replica. The refresh token there is the only one
//! that counts: a replica refreshes only under the lock, from what it read under it, and
//! writes the rotated refresh token back before it releases, so that no refresh token is
//! redeemed twice. With Redis unreachable nothing is refreshed (that could redeem a token
//! another replica already redeemed, or lose the rotated one): the request fails, naming Redis.

use std::time::Duration;

use redis::RedisError;
use secrecy::SecretString;

use super::{LoginGrant, held};
use crate::{
    domain::outcome::{OAuthFailure, TokenStep},
    upstream::oauth::{
        Held,
        scopes::{split, union},
        shared::{Settled, SharedTokens},
        store::TokenFile,
    },
};

/// How many times refreshed tokens are written before giving up (a reconnect may be under way).
const WRITES: u32 = 3;

impl LoginGrant {
    /// [`LoginGrant::acquire`] with Redis: Redis's token while it is fresh and not `rejected`,
    /// else one refreshed under the lock.
    pub(super) async fn acquire_shared(
        &self,
        shared: &SharedTokens,
        rejected: Option<&SecretString>,
    ) -> Result<Held, OAuthFailure> {
        let mut slot = self.manager.lock().await;
        let suits = |file: &TokenFile| {
            file.server_url == self.url.as_str()
                && held(file)
                    .is_some_and(|held| held.fresh() && rejected.is_none_or(|r| !held.is(r)))
        };
        let settled = shared
            .settle(suits)
            .await
            .map_err(|error| self.unreachable(shared, &error))?;
        let (lock, stored) = match settled {
            Settled::Stored(file) => return self.held(&file),
            Settled::Locked(lock, stored) => (lock, stored),
        };
        let file = match stored
            .ok_or_else(|| self.not_logged_in())
            .and_then(|file| self.check(file))
        {
            Ok(file) => file,
            Err(failure) => {
                lock.release().await;
                return Err(failure);
            }
        };
        self.store.hold(file.clone());
        let manager = match self.manager_for(&mut slot, &file).await {
            Ok(manager) => manager,
            Err(failure) => {
                lock.release().await;
                return Err(failure);
            }
        };
        let outcome = manager.refresh_token().await.map(drop);
        *slot = Some((file.client_id.clone(), manager));
        if outcome.is_ok()
            && let Some(refreshed) = self.store.current()
        {
            self.write_back(shared, &refreshed).await;
        }
        lock.release().await;
        self.refreshed(outcome)
    }

    /// What Redis holds for this server (not checked yet).
    pub(super) async fn read_shared(
        &self,
        shared: &SharedTokens,
    ) -> Result<Option<TokenFile>, OAuthFailure> {
        shared
            .read()
            .await
            .map_err(|error| self.unreachable(shared, &error))
    }

    /// Adds `needed` to the scope the next login asks for, under the lock (a refresh must not
    /// be overwritten with the tokens it replaced).
    pub(super) async fn record_step_up(
        &self,
        shared: &SharedTokens,
        needed: &[String],
    ) -> Result<(), OAuthFailure> {
        let fail = |error: RedisError| self.unreachable(shared, &error);
        let Some(lock) = shared.lock().await.map_err(fail)? else {
            return Err(OAuthFailure::Store {
                store: self.hint.store.clone(),
                reason: "its lock stayed taken".into(),
            });
        };
        let recorded = async {
            let stored = shared.read::<TokenFile>().await.map_err(fail)?;
            let mut file = self.check(stored.ok_or_else(|| self.not_logged_in())?)?;
            file.step_up = Some(union(&split(file.step_up.as_deref()), needed).join(" "));
            shared.write(&file, None).await.map_err(fail)
        }
        .await;
        lock.release().await;
        recorded
    }

    /// Writes refreshed tokens to Redis: the refresh token just redeemed is spent, so the
    /// rotated one must reach the other replicas.
    async fn write_back(&self, shared: &SharedTokens, refreshed: &TokenFile) {
        for attempt in 1..=WRITES {
            match shared.write(refreshed, None).await {
                Ok(()) => return,
                Err(error) => {
                    shared.failed(&error);
                    if attempt == WRITES {
                        tracing::error!(server = %self.hint.server, redis = %shared.shown(),
                            %error, "the refreshed tokens could not be written to Redis: this \
                            replica uses them, the others will need `toolbroker login` again");
                    }
                }
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// Redis failed `error`: counted, and what the request is told.
    fn unreachable(&self, shared: &SharedTokens, error: &RedisError) -> OAuthFailure {
        shared.failed(error);
        OAuthFailure::Token {
            step: TokenStep::Refresh,
            reason: format!(
                "the login's tokens are kept in the shared state ({}), which cannot be reached \
                 ({error}); they are not refreshed without it, which could redeem the refresh \
                 token twice",
                shared.shown()
            ),
        }
    }
}
