//! The Redis (or Valkey) that replicas share (`state.redis`): one multiplexed connection per
//! process, made lazily and remade by itself when Redis comes back, every key under
//! `state.key_prefix`, and its failures counted (`toolbroker_state_errors_total`) and logged
//! once in a while, not once per call. What is kept there (rate budgets, tokens, tasks) is
//! each user's own business; this is only the way to it.

use std::{
    collections::HashMap,
    sync::{
        Arc, Mutex, PoisonError,
        atomic::{AtomicBool, AtomicU64, Ordering},
    },
    time::{Duration, SystemTime, UNIX_EPOCH},
};

use redis::{
    Client, IntoConnectionInfo, Msg, ProtocolVersion, PushInfo,
    aio::{ConnectionManager, ConnectionManagerConfig},
};
use tokio::sync::mpsc;

use crate::domain::config::{OnUnavailable, SharedState};

/// How long one command may take before it counts as failed: a rate check waits at most this
/// for Redis (then `on_unavailable` decides).
const RESPONSE_TIMEOUT: Duration = Duration::from_millis(500);
/// How long connecting may take.
const CONNECT_TIMEOUT: Duration = Duration::from_millis(500);
/// Warnings about Redis failing: at most one per this long.
const WARN_EVERY: Duration = Duration::from_secs(10);

/// The way to the shared Redis; clones share it.
#[derive(Clone)]
pub struct Shared(Arc<Inner>);

struct Inner {
    connection: ConnectionManager,
    prefix: String,
    shown: String,
    /// Server and prefix, for people.
    place: String,
    on_unavailable: OnUnavailable,
    /// This process among the replicas: names the tasks it runs and its lease.
    replica: String,
    /// Where each subscribed channel's messages go.
    channels: Arc<Mutex<HashMap<String, mpsc::UnboundedSender<Vec<u8>>>>>,
    /// Whether the last command failed (so that recovering is logged once).
    down: AtomicBool,
    /// When a failure was last logged (ms since the epoch).
    warned_at: AtomicU64,
}

impl std::fmt::Debug for Shared {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Shared")
            .field("redis", &self.0.shown)
            .field("prefix", &self.0.prefix)
            .finish_non_exhaustive()
    }
}

impl Shared {
    /// The way to `spec`'s Redis for the replica called `replica` (unique among them).
    /// Nothing is sent yet: a Redis that is down at start does not stop the broker, which
    /// connects once it is up.
    pub fn connect(spec: &SharedState, replica: String) -> Result<Self, String> {
        let info = spec
            .redis
            .clone()
            .into_connection_info()
            .map_err(|error| format!("state.redis: {error}"))?;
        let mut settings = info.redis_settings().clone();
        if let Some(password) = &spec.password {
            settings = settings.set_password(password.expose());
        }
        // RESP3: pub/sub messages arrive on the same connection as replies.
        let settings = settings
            .set_protocol(ProtocolVersion::RESP3)
            .set_lib_name("toolbroker", env!("CARGO_PKG_VERSION"));
        let info = info.set_redis_settings(settings);
        let client = Client::open(info).map_err(|error| format!("state.redis: {error}"))?;
        let channels: Arc<Mutex<HashMap<String, mpsc::UnboundedSender<Vec<u8>>>>> = Arc::default();
        let dispatch = channels.clone();
        let config = ConnectionManagerConfig::new()
            .set_response_timeout(Some(RESPONSE_TIMEOUT))
            .set_connection_timeout(Some(CONNECT_TIMEOUT))
            .set_number_of_retries(1)
            .set_min_delay(Duration::from_millis(20))
            .set_max_delay(Duration::from_millis(200))
            .set_push_sender(move |push: PushInfo| -> Result<(), ()> {
                deliver(&dispatch, push);
                Ok(())
            })
            .set_automatic_resubscription();
        let connection = ConnectionManager::new_lazy_with_config(client, config)
            .map_err(|error| format!("state.redis: {error}"))?;
        Ok(Self(Arc::new(Inner {
            connection,
            prefix: spec.key_prefix.clone(),
            shown: spec.shown(),
            place: spec.place(),
            on_unavailable: spec.on_unavailable,
            replica,
            channels,
            down: AtomicBool::new(false),
            warned_at: AtomicU64::new(0),
        })))
    }

    /// A handle on the connection (cheap: it is multiplexed).
    pub fn connection(&self) -> ConnectionManager {
        self.0.connection.clone()
    }

    /// `suffix` under the configured prefix.
    pub fn key(&self, suffix: &str) -> String {
        format!("{}{suffix}", self.0.prefix)
    }

    /// The configured prefix.
    pub fn prefix(&self) -> &str {
        &self.0.prefix
    }

    /// Where Redis is, for people (no password).
    pub fn shown(&self) -> &str {
        &self.0.shown
    }

    /// Where the shared state is, for people: the server (no password) and the prefix.
    pub fn place(&self) -> &str {
        &self.0.place
    }

    /// What a rate check does while Redis is down.
    pub fn on_unavailable(&self) -> OnUnavailable {
        self.0.on_unavailable
    }

    /// This process's id among the replicas.
    pub fn replica(&self) -> &str {
        &self.0.replica
    }

    /// Counts and (now and then) logs a failed command; `what` says what it was for.
    pub fn failed(&self, what: &'static str, error: &redis::RedisError) {
        metrics::counter!("toolbroker_state_errors_total", "op" => what).increment(1);
        self.0.down.store(true, Ordering::Relaxed);
        let now = millis_now();
        let last = self.0.warned_at.load(Ordering::Relaxed);
        if now.saturating_sub(last) >= WARN_EVERY.as_millis() as u64
            && self
                .0
                .warned_at
                .compare_exchange(last, now, Ordering::Relaxed, Ordering::Relaxed)
                .is_ok()
        {
            tracing::warn!(redis = %self.0.shown, op = what, %error,
                "the shared state (Redis) failed; the broker goes on and reconnects by itself");
        }
    }

    /// Notes a command that worked (logs once that Redis is back).
    pub fn worked(&self) {
        if self.0.down.load(Ordering::Relaxed) && self.0.down.swap(false, Ordering::Relaxed) {
            tracing::info!(redis = %self.0.shown, "the shared state (Redis) is reachable again");
        }
    }

    /// Messages published on `channel` (under the prefix) from now on; subscribed again
    /// whenever the connection is remade. Subscribing is retried until it works.
    pub fn listen(&self, channel: &str) -> mpsc::UnboundedReceiver<Vec<u8>> {
        let channel = self.key(channel);
        let (sender, receiver) = mpsc::unbounded_channel();
        self.0
            .channels
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(channel.clone(), sender.clone());
        let shared = self.clone();
        tokio::spawn(async move {
            let mut delay = Duration::from_millis(50);
            loop {
                match shared.connection().subscribe(&channel).await {
                    Ok(()) => return,
                    Err(error) => shared.failed("subscribe", &error),
                }
                if sender.is_closed() {
                    return;
                }
                tokio::time::sleep(delay).await;
                delay = (delay * 2).min(Duration::from_secs(2));
            }
        });
        receiver
    }
}

/// Hands a pushed message to its channel's listener.
fn deliver(channels: &Mutex<HashMap<String, mpsc::UnboundedSender<Vec<u8>>>>, push: PushInfo) {
    let Some(message) = Msg::from_push_info(push) else {
        return;
    };
    let channels = channels.lock().unwrap_or_else(PoisonError::into_inner);
    if let Some(listener) = channels.get(message.get_channel_name()) {
        let _ = listener.send(message.get_payload_bytes().to_vec());
    }
}

fn millis_now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |since| since.as_millis() as u64)
}
