//! What keeping rate budgets in Redis costs a call: `echo` through three brokers on one
//! machine, without rates, with `limits.caller_rate` in memory, and with the same rate kept in
//! a real `redis-server` (`state.redis`), in interleaved rounds at concurrency 1 and 64, every
//! answer checked. The rate is far above the load, so every call is let through and each pays
//! for its check; Redis's own CPU per call is counted beside the broker's, and its round trips
//! per call (commands sent) over a fixed number of calls.

use std::{process::Stdio, time::Duration};

use anyhow::{Context as _, bail};
use tokio::io::AsyncBufReadExt as _;

use crate::{
    Plan,
    broker::{BrokerProcess, cpu_of, measure_process},
    demo_config,
    report::{Figures, median},
    streaming::unary_echo,
};

/// A rate no run reaches: every call is checked and let through.
const RATE: &str = "limits: {caller_rate: 1000000/s}\n";

/// Runs the three brokers at each concurrency, interleaved, and prints the medians and the
/// cost of Redis against memory.
pub async fn run(plan: Plan) -> anyhow::Result<()> {
    let rounds = if plan.quick { 1 } else { 5 };
    println!(
        "\n## Rates in memory vs in Redis (state.redis): echo (median of {rounds} interleaved rounds)"
    );
    let redis = Redis::start().await?;
    let none = BrokerProcess::start(&demo_config(&[], "")?, &[]).await?;
    let memory = BrokerProcess::start(&demo_config(&[], RATE)?, &[]).await?;
    let shared = format!("{RATE}state: {{redis: \"{}\"}}\n", redis.url());
    let shared = BrokerProcess::start(&demo_config(&[], &shared)?, &[]).await?;
    for concurrency in [1, 64] {
        let (mut without, mut in_memory, mut in_redis) = (Vec::new(), Vec::new(), Vec::new());
        let mut redis_cpu = Vec::new();
        for _ in 0..rounds {
            without.push(load(&none, concurrency, plan).await?);
            in_memory.push(load(&memory, concurrency, plan).await?);
            let cpu_before = cpu_of(redis.pid)?;
            let figures = load(&shared, concurrency, plan).await?;
            // The warm-up's calls are not counted in `calls` but are in Redis's CPU: an
            // overcount by (warm-up + run) / run, the same in every round.
            let calls = figures.calls.max(1) as f64;
            redis_cpu.push((cpu_of(redis.pid)? - cpu_before).as_secs_f64() * 1e6 / calls);
            in_redis.push(figures);
        }
        let (without, in_memory, in_redis) = (median(without), median(in_memory), median(in_redis));
        println!("{}", without.row(&format!("c={concurrency} no rate")));
        println!(
            "{}",
            in_memory.row(&format!("c={concurrency} rate in memory"))
        );
        println!(
            "{}",
            in_redis.row(&format!("c={concurrency} rate in Redis"))
        );
        let cpu = |f: &Figures| f.cpu_per_call_us().unwrap_or(0.0);
        println!(
            "c={concurrency} redis/memory: throughput {:.3}x, p50 {:+.3} ms, broker cpu/call {:+.1} µs; \
             redis cpu/call {:.1} µs (incl. warm-up); memory/none: throughput {:.3}x",
            in_redis.rate() / in_memory.rate(),
            in_redis.ms(0.5) - in_memory.ms(0.5),
            cpu(&in_redis) - cpu(&in_memory),
            middle(redis_cpu),
            in_memory.rate() / without.rate(),
        );
    }
    let calls = if plan.quick { 50 } else { 2000 };
    let client = shared.client().await?;
    let trips = redis
        .round_trips_per(calls, || unary_echo(client.clone()))
        .await?;
    println!(
        "redis round trips per rated call: {trips:.3} (commands sent, over {calls} calls one at a time)"
    );
    Ok(())
}

fn middle(mut values: Vec<f64>) -> f64 {
    values.sort_by(f64::total_cmp);
    values[values.len() / 2]
}

/// Closed-loop `echo` at `concurrency`, each answer checked.
async fn load(broker: &BrokerProcess, concurrency: usize, plan: Plan) -> anyhow::Result<Figures> {
    let client = broker.client().await?;
    measure_process(broker.pid(), concurrency, plan, move || {
        unary_echo(client.clone())
    })
    .await
}

/// A `redis-server` of the benchmark's own, nothing saved, killed when dropped.
pub struct Redis {
    _child: tokio::process::Child,
    pid: u32,
    port: u16,
}

impl Redis {
    /// Started on a free port, once it answers.
    pub async fn start() -> anyhow::Result<Self> {
        let port = std::net::TcpListener::bind("127.0.0.1:0")?
            .local_addr()?
            .port();
        let child = tokio::process::Command::new("redis-server")
            .args(["--port", &port.to_string(), "--bind", "127.0.0.1"])
            .args(["--save", "", "--appendonly", "no"])
            .stdout(Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .context("redis-server (Debian package redis-server) runs")?;
        let pid = child.id().context("redis-server runs")?;
        let redis = Self {
            _child: child,
            pid,
            port,
        };
        for _ in 0..200 {
            if redis.connection().await.is_ok() {
                return Ok(redis);
            }
            tokio::time::sleep(Duration::from_millis(25)).await;
        }
        bail!("redis-server on port {port} did not answer")
    }

    /// Where it listens.
    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}/0", self.port)
    }

    async fn connection(&self) -> anyhow::Result<redis::aio::MultiplexedConnection> {
        Ok(redis::Client::open(self.url())?
            .get_multiplexed_async_connection()
            .await?)
    }

    /// Commands clients sent Redis per `call`, over `calls` calls one at a time: its round
    /// trips (a script's own commands are not counted), as `redis-cli monitor` shows them.
    /// What the brokers do meanwhile of their own (a lease renewed) counts too.
    pub async fn round_trips_per<F, Fut>(&self, calls: u32, mut call: F) -> anyhow::Result<f64>
    where
        F: FnMut() -> Fut,
        Fut: Future<Output = anyhow::Result<()>>,
    {
        // Opened before the monitor starts: its own set-up commands are not counted.
        let mut connection = self.connection().await?;
        let mut monitor = tokio::process::Command::new("redis-cli")
            .args(["-p", &self.port.to_string(), "monitor"])
            .stdout(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .context("redis-cli (Debian package redis-tools) runs")?;
        let stdout = monitor.stdout.take().context("redis-cli's output")?;
        let mut lines = tokio::io::BufReader::new(stdout).lines();
        // MONITOR answers OK once it shows every command from then on.
        while lines
            .next_line()
            .await?
            .context("redis-cli monitor ended")?
            != "OK"
        {}
        for _ in 0..calls {
            call().await?;
        }
        let marker = "loadgen-monitor-end";
        redis::cmd("ECHO")
            .arg(marker)
            .query_async::<String>(&mut connection)
            .await?;
        let mut sent = 0u64;
        loop {
            let line = lines
                .next_line()
                .await?
                .context("redis-cli monitor ended")?;
            if line.contains(marker) {
                break;
            }
            // `<time> [<db> <client>] "COMMAND" ...`; a script's commands come from `lua`.
            if !line.contains(" lua] ") {
                sent += 1;
            }
        }
        Ok(sent as f64 / f64::from(calls))
    }
}
