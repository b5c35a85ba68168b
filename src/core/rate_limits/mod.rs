//! The configured call rates, enforced: `limits.caller_rate` per caller, `servers[].caller_rate`
//! per caller and server, `servers[].rate` per server. GCRA limiters from `governor` (a burst
//! of N, then one call per period / N), keyed by caller: re-initialising a session does not
//! escape them, and one caller's limit never slows another. Keys idle long enough to be fresh
//! again are dropped, so per-caller state does not grow without bound. With `state.redis`, the
//! budgets are kept there instead (`shared.rs`), one for every replica.

mod shared;

use std::{
    collections::HashMap,
    sync::{
        Arc,
        atomic::{AtomicU64, Ordering},
    },
    time::Duration,
};

use governor::{
    DefaultDirectRateLimiter, DefaultKeyedRateLimiter, Quota, RateLimiter,
    clock::{Clock as _, DefaultClock},
};

use crate::{
    domain::config::OnUnavailable,
    domain::{
        caller::CallerKey,
        config::{Config, Rate},
        names::ServerName,
        request_error::{RateLimit, RequestError},
    },
    shared_state::Shared,
    telemetry::semconv,
};
use shared::{Budget, SharedBudgets};

/// Every how many admissions the keyed limiters forget their idle callers.
const FORGET_EVERY: u64 = 4096;

/// The limiters of one configuration; those whose rate did not change carry over a reload.
#[derive(Default)]
pub struct RateLimits {
    /// `limits.caller_rate`.
    caller: Option<Arc<Keyed>>,
    /// Per server, where it has a rate.
    servers: HashMap<ServerName, ServerRates>,
    admitted: AtomicU64,
    /// With `state.redis`: the budgets are kept there, and the limiters above only say which
    /// rates apply.
    shared: Option<Arc<SharedBudgets>>,
}

impl std::fmt::Debug for RateLimits {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RateLimits").finish_non_exhaustive()
    }
}

#[derive(Default)]
struct ServerRates {
    rate: Option<Arc<Direct>>,
    caller_rate: Option<Arc<Keyed>>,
}

struct Keyed {
    rate: Rate,
    limiter: DefaultKeyedRateLimiter<CallerKey>,
}

struct Direct {
    rate: Rate,
    limiter: DefaultDirectRateLimiter,
}

fn quota(rate: Rate) -> Quota {
    Quota::with_period(rate.interval())
        .expect("a rate's interval is never zero")
        .allow_burst(rate.count)
}

impl Keyed {
    fn new(rate: Rate) -> Arc<Self> {
        Arc::new(Self {
            rate,
            limiter: RateLimiter::keyed(quota(rate)),
        })
    }
}

impl Direct {
    fn new(rate: Rate) -> Arc<Self> {
        Arc::new(Self {
            rate,
            limiter: RateLimiter::direct(quota(rate)),
        })
    }
}

/// The limiter for `rate`: `previous` if it enforces the same rate (its state goes on), else
/// a new one.
fn carried<T>(
    rate: Option<Rate>,
    previous: Option<&Arc<T>>,
    new: fn(Rate) -> Arc<T>,
) -> Option<Arc<T>>
where
    T: HasRate,
{
    let rate = rate?;
    Some(match previous {
        Some(previous) if previous.rate() == rate => previous.clone(),
        _ => new(rate),
    })
}

trait HasRate {
    fn rate(&self) -> Rate;
}

impl HasRate for Keyed {
    fn rate(&self) -> Rate {
        self.rate
    }
}

impl HasRate for Direct {
    fn rate(&self) -> Rate {
        self.rate
    }
}

impl RateLimits {
    /// The limiters `config` asks for, keeping `previous`'s where a rate did not change; kept
    /// in `shared` when given.
    pub fn new(config: &Config, previous: Option<&RateLimits>, shared: Option<&Shared>) -> Self {
        let caller = carried(
            config.limits.caller_rate,
            previous.and_then(|p| p.caller.as_ref()),
            Keyed::new,
        );
        let servers = config
            .servers
            .iter()
            .filter(|spec| spec.rate.is_some() || spec.caller_rate.is_some())
            .map(|spec| {
                let before = previous.and_then(|p| p.servers.get(&spec.name));
                let rates = ServerRates {
                    rate: carried(spec.rate, before.and_then(|b| b.rate.as_ref()), Direct::new),
                    caller_rate: carried(
                        spec.caller_rate,
                        before.and_then(|b| b.caller_rate.as_ref()),
                        Keyed::new,
                    ),
                };
                (spec.name.clone(), rates)
            })
            .collect();
        let shared = shared.map(|shared| match previous.and_then(|p| p.shared.as_ref()) {
            Some(kept) => kept.clone(),
            None => Arc::new(SharedBudgets::new(shared.clone())),
        });
        Self {
            caller,
            servers,
            admitted: AtomicU64::new(0),
            shared,
        }
    }

    /// Whether any rate is configured.
    pub fn any(&self) -> bool {
        self.caller.is_some() || !self.servers.is_empty()
    }

    /// Lets one call of `caller` to `server` through, or says which rate it is over and when
    /// to retry. The caller's own rates are asked first: a caller over them uses up nothing of
    /// the rate the server's callers share.
    pub async fn admit(&self, caller: &CallerKey, server: &ServerName) -> Result<(), RequestError> {
        if !self.any() {
            return Ok(());
        }
        if let Some(budgets) = &self.shared {
            return self.admit_shared(budgets, caller, server).await;
        }
        if self.admitted.fetch_add(1, Ordering::Relaxed) % FORGET_EVERY == FORGET_EVERY - 1 {
            self.forget_idle();
        }
        let rates = self.servers.get(server);
        if let Some(keyed) = rates.and_then(|r| r.caller_rate.as_ref())
            && let Err(until) = keyed.limiter.check_key(caller)
        {
            let wait = until.wait_time_from(DefaultClock::default().now());
            return Err(over(
                RateLimit::ServerCaller {
                    server: server.clone(),
                    rate: keyed.rate,
                },
                server,
                wait,
            ));
        }
        if let Some(keyed) = &self.caller
            && let Err(until) = keyed.limiter.check_key(caller)
        {
            let wait = until.wait_time_from(DefaultClock::default().now());
            return Err(over(RateLimit::Caller(keyed.rate), server, wait));
        }
        if let Some(direct) = rates.and_then(|r| r.rate.as_ref())
            && let Err(until) = direct.limiter.check()
        {
            let wait = until.wait_time_from(DefaultClock::default().now());
            return Err(over(
                RateLimit::Server {
                    server: server.clone(),
                    rate: direct.rate,
                },
                server,
                wait,
            ));
        }
        Ok(())
    }

    /// [`Self::admit`] against the budgets in Redis: one script call for every rate that
    /// applies, in the same order. Redis unreachable: `state.on_unavailable` decides.
    async fn admit_shared(
        &self,
        budgets: &SharedBudgets,
        caller: &CallerKey,
        server: &ServerName,
    ) -> Result<(), RequestError> {
        let rates = self.servers.get(server);
        // The rates that apply, in the order memory checks them; which one refused is named
        // only when one does (no copy of the server's name per admitted call).
        let applying: Vec<(Rate, Budget<'_>)> = [
            rates
                .and_then(|r| r.caller_rate.as_ref())
                .map(|keyed| (keyed.rate, Budget::ServerCaller(server, caller))),
            self.caller
                .as_ref()
                .map(|keyed| (keyed.rate, Budget::Caller(caller))),
            rates
                .and_then(|r| r.rate.as_ref())
                .map(|direct| (direct.rate, Budget::Server(server))),
        ]
        .into_iter()
        .flatten()
        .collect();
        if applying.is_empty() {
            return Ok(());
        }
        match budgets.take(&applying).await {
            Ok(None) => {
                budgets.shared.worked();
                Ok(())
            }
            Ok(Some((index, wait))) => {
                budgets.shared.worked();
                let (rate, budget) = applying
                    .get(index)
                    .expect("the script names a key it was given");
                let limit = match budget {
                    Budget::ServerCaller(..) => RateLimit::ServerCaller {
                        server: server.clone(),
                        rate: *rate,
                    },
                    Budget::Caller(_) => RateLimit::Caller(*rate),
                    Budget::Server(_) => RateLimit::Server {
                        server: server.clone(),
                        rate: *rate,
                    },
                };
                Err(over(limit, server, wait))
            }
            Err(error) => {
                budgets.shared.failed("rate", &error);
                match budgets.shared.on_unavailable() {
                    OnUnavailable::Allow => Ok(()),
                    OnUnavailable::Refuse => Err(RequestError::StateUnavailable {
                        redis: budgets.shared.shown().to_owned(),
                        reason: error.to_string(),
                    }),
                }
            }
        }
    }

    /// Drops the callers whose state is fresh again (they would be let through as new ones).
    pub fn forget_idle(&self) {
        let keyed = self
            .caller
            .iter()
            .chain(self.servers.values().filter_map(|r| r.caller_rate.as_ref()));
        for limiter in keyed {
            limiter.limiter.retain_recent();
            limiter.limiter.shrink_to_fit();
        }
    }

    /// How many callers the keyed limiters hold state for (for tests and metrics).
    pub fn callers_held(&self) -> usize {
        self.caller
            .iter()
            .chain(self.servers.values().filter_map(|r| r.caller_rate.as_ref()))
            .map(|keyed| keyed.limiter.len())
            .sum()
    }
}

/// The refusal, counted.
fn over(limit: RateLimit, server: &ServerName, retry_after: Duration) -> RequestError {
    metrics::counter!(
        "toolbroker_rate_limited_total",
        semconv::SERVER => server.to_string(),
        "limit" => limit.field(),
    )
    .increment(1);
    RequestError::RateLimited { limit, retry_after }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::config::parse;

    impl RateLimits {
        /// In memory, admitting never waits.
        fn admit_now(&self, caller: &CallerKey, server: &ServerName) -> Result<(), RequestError> {
            futures::executor::block_on(self.admit(caller, server))
        }
    }

    fn limits(yaml: &str) -> RateLimits {
        let config = parse(yaml, &|_| None).unwrap();
        RateLimits::new(&config, None, None)
    }

    fn caller(id: &str) -> CallerKey {
        CallerKey {
            kind: crate::domain::caller::CallerKind::Token,
            id: id.into(),
        }
    }

    #[test]
    fn a_caller_over_its_rate_waits_and_others_do_not() {
        let limits =
            limits("limits: { caller_rate: 2/m }\nservers:\n  - name: fs\n    command: x\n");
        let fs = ServerName::parse("fs").unwrap();
        let (a, b) = (caller("a"), caller("b"));
        assert!(limits.admit_now(&a, &fs).is_ok());
        assert!(limits.admit_now(&a, &fs).is_ok());
        let Err(RequestError::RateLimited { limit, retry_after }) = limits.admit_now(&a, &fs)
        else {
            panic!("the third call in a minute is over 2/m")
        };
        assert_eq!(limit.field(), "limits.caller_rate");
        assert!(
            retry_after > Duration::from_secs(25) && retry_after <= Duration::from_secs(30),
            "{retry_after:?}: one call comes back every 30 s"
        );
        assert!(limits.admit_now(&b, &fs).is_ok(), "b has its own allowance");
    }

    #[test]
    fn a_caller_over_its_own_rate_uses_nothing_of_the_shared_one() {
        let limits =
            limits("servers:\n  - name: fs\n    command: x\n    rate: 3/m\n    caller_rate: 1/m\n");
        let fs = ServerName::parse("fs").unwrap();
        let (a, b, c, d) = (caller("a"), caller("b"), caller("c"), caller("d"));
        assert!(limits.admit_now(&a, &fs).is_ok());
        for _ in 0..5 {
            let refused = limits.admit_now(&a, &fs).unwrap_err();
            assert!(matches!(
                refused,
                RequestError::RateLimited {
                    limit: RateLimit::ServerCaller { .. },
                    ..
                }
            ));
        }
        assert!(limits.admit_now(&b, &fs).is_ok());
        assert!(limits.admit_now(&c, &fs).is_ok());
        let shared = limits.admit_now(&d, &fs).unwrap_err();
        assert!(
            matches!(
                shared,
                RequestError::RateLimited {
                    limit: RateLimit::Server { .. },
                    ..
                }
            ),
            "{shared:?}"
        );
    }

    #[test]
    fn idle_callers_are_forgotten_and_unchanged_rates_survive_a_reload() {
        let yaml = "limits: { caller_rate: 1000/s }\n";
        let limits = limits(yaml);
        let fs = ServerName::parse("fs").unwrap();
        for i in 0..100 {
            limits.admit_now(&caller(&i.to_string()), &fs).unwrap();
        }
        assert_eq!(limits.callers_held(), 100);
        std::thread::sleep(Duration::from_millis(5));
        limits.forget_idle();
        assert_eq!(limits.callers_held(), 0, "fresh again after 1 ms each");

        let strict = self::limits("limits: { caller_rate: 1/h }\n");
        strict.admit_now(&caller("a"), &fs).unwrap();
        let config = parse("limits: { caller_rate: 1/h }\n", &|_| None).unwrap();
        let reloaded = RateLimits::new(&config, Some(&strict), None);
        assert!(
            reloaded.admit_now(&caller("a"), &fs).is_err(),
            "the same rate keeps its state over a reload"
        );
        let changed = parse("limits: { caller_rate: 2/h }\n", &|_| None).unwrap();
        let reloaded = RateLimits::new(&changed, Some(&strict), None);
        assert!(
            reloaded.admit_now(&caller("a"), &fs).is_ok(),
            "a new rate starts afresh"
        );
    }
}
