//! Rate budgets kept in the shared Redis, so that every replica with the same `state.redis`
//! and `key_prefix` spends one budget: the budgets a call is under are checked and taken in
//! one script call (one round trip), all or nothing (`gcra.lua`). A budget's key names its
//! rate, so a changed rate starts afresh, as in memory.

use std::time::Duration;

use redis::Script;

use crate::{
    domain::{caller::CallerKey, config::Rate, names::ServerName},
    shared_state::Shared,
};

/// The script and the way to Redis.
pub(super) struct SharedBudgets {
    pub(super) shared: Shared,
    script: Script,
}

/// Which budget a key is.
pub(super) enum Budget<'a> {
    /// `limits.caller_rate` of a caller.
    Caller(&'a CallerKey),
    /// `servers[].rate`.
    Server(&'a ServerName),
    /// `servers[].caller_rate` of a caller.
    ServerCaller(&'a ServerName, &'a CallerKey),
}

impl SharedBudgets {
    pub(super) fn new(shared: Shared) -> Self {
        Self {
            shared,
            script: Script::new(include_str!("gcra.lua")),
        }
    }

    /// The key of `budget` under `rate`.
    fn key(&self, rate: Rate, budget: &Budget<'_>) -> String {
        let caller = |key: &CallerKey| format!("{}:{}", key.kind.name(), key.id);
        self.shared.key(&match budget {
            Budget::Caller(key) => format!("rate:{rate}:caller:{}", caller(key)),
            Budget::Server(server) => format!("rate:{rate}:server:{server}"),
            Budget::ServerCaller(server, key) => {
                format!("rate:{rate}:server:{server}:caller:{}", caller(key))
            }
        })
    }

    /// Takes one call from each of `budgets` if all have room: `None`, or the index of the
    /// first without room and how long until it has.
    pub(super) async fn take(
        &self,
        budgets: &[(Rate, Budget<'_>)],
    ) -> Result<Option<(usize, Duration)>, redis::RedisError> {
        let mut invocation = self.script.prepare_invoke();
        for (rate, budget) in budgets {
            let interval = rate.interval().as_micros().max(1) as u64;
            invocation
                .key(self.key(*rate, budget))
                .arg(interval)
                .arg(rate.count.get());
        }
        let (index, wait): (usize, u64) = invocation
            .invoke_async(&mut self.shared.connection())
            .await?;
        Ok(match index {
            0 => None,
            index => Some((index - 1, Duration::from_micros(wait))),
        })
    }
}
