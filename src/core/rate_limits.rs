//! The configured call rates, enforced: `limits.caller_rate` per caller, `servers[].caller_rate`
//! per caller and server, `servers[].rate` per server. GCRA limiters from `governor` (a burst
//! of N, then one call per period / N), keyed by caller: re-initialising a session does not
//! escape them, and one caller's limit never slows another. Keys idle long enough to be fresh
//! again are dropped, so per-caller state does not grow without bound.

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
    domain::{
        caller::CallerKey,
        config::{Config, Rate},
        names::ServerName,
        request_error::{RateLimit, RequestError},
    },
    telemetry::semconv,
};

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
    /// The limiters `config` asks for, keeping `previous`'s where a rate did not change.
    pub fn new(config: &Config, previous: Option<&RateLimits>) -> Self {
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
        Self {
            caller,
            servers,
            admitted: AtomicU64::new(0),
        }
    }

    /// Whether any rate is configured.
    pub fn any(&self) -> bool {
        self.caller.is_some() || !self.servers.is_empty()
    }

    /// Lets one call of `caller` to `server` through, or says which rate it is over and when
    /// to retry. The caller's own rates are asked first: a caller over them uses up nothing of
    /// the rate the server's callers share.
    pub fn admit(&self, caller: &CallerKey, server: &ServerName) -> Result<(), RequestError> {
        if !self.any() {
            return Ok(());
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

    fn limits(yaml: &str) -> RateLimits {
        let config = parse(yaml, &|_| None).unwrap();
        RateLimits::new(&config, None)
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
        assert!(limits.admit(&a, &fs).is_ok());
        assert!(limits.admit(&a, &fs).is_ok());
        let Err(RequestError::RateLimited { limit, retry_after }) = limits.admit(&a, &fs) else {
            panic!("the third call in a minute is over 2/m")
        };
        assert_eq!(limit.field(), "limits.caller_rate");
        assert!(
            retry_after > Duration::from_secs(25) && retry_after <= Duration::from_secs(30),
            "{retry_after:?}: one call comes back every 30 s"
        );
        assert!(limits.admit(&b, &fs).is_ok(), "b has its own allowance");
    }

    #[test]
    fn a_caller_over_its_own_rate_uses_nothing_of_the_shared_one() {
        let limits =
            limits("servers:\n  - name: fs\n    command: x\n    rate: 3/m\n    caller_rate: 1/m\n");
        let fs = ServerName::parse("fs").unwrap();
        let (a, b, c, d) = (caller("a"), caller("b"), caller("c"), caller("d"));
        assert!(limits.admit(&a, &fs).is_ok());
        for _ in 0..5 {
            let refused = limits.admit(&a, &fs).unwrap_err();
            assert!(matches!(
                refused,
                RequestError::RateLimited {
                    limit: RateLimit::ServerCaller { .. },
                    ..
                }
            ));
        }
        assert!(limits.admit(&b, &fs).is_ok());
        assert!(limits.admit(&c, &fs).is_ok());
        let shared = limits.admit(&d, &fs).unwrap_err();
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
            limits.admit(&caller(&i.to_string()), &fs).unwrap();
        }
        assert_eq!(limits.callers_held(), 100);
        std::thread::sleep(Duration::from_millis(5));
        limits.forget_idle();
        assert_eq!(limits.callers_held(), 0, "fresh again after 1 ms each");

        let strict = self::limits("limits: { caller_rate: 1/h }\n");
        strict.admit(&caller("a"), &fs).unwrap();
        let config = parse("limits: { caller_rate: 1/h }\n", &|_| None).unwrap();
        let reloaded = RateLimits::new(&config, Some(&strict));
        assert!(
            reloaded.admit(&caller("a"), &fs).is_err(),
            "the same rate keeps its state over a reload"
        );
        let changed = parse("limits: { caller_rate: 2/h }\n", &|_| None).unwrap();
        let reloaded = RateLimits::new(&changed, Some(&strict));
        assert!(
            reloaded.admit(&caller("a"), &fs).is_ok(),
            "a new rate starts afresh"
        );
    }
}
