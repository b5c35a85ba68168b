//! Closed-loop load: `concurrency` workers each calling as fast as answers come, for a while.

use std::{
    future::Future,
    sync::Arc,
    time::{Duration, Instant},
};

use tokio::sync::Mutex;

use crate::report::{Figures, histogram};

/// Runs `call` from `concurrency` workers for `duration` after `warmup`, and measures.
pub async fn run<F, Fut>(
    concurrency: usize,
    warmup: Duration,
    duration: Duration,
    call: F,
) -> anyhow::Result<Figures>
where
    F: Fn() -> Fut + Clone + Send + 'static,
    Fut: Future<Output = anyhow::Result<()>> + Send,
{
    let warm_until = Instant::now() + warmup;
    let stop_at = warm_until + duration;
    let merged = Arc::new(Mutex::new(histogram()));
    let mut workers = Vec::with_capacity(concurrency);
    for _ in 0..concurrency {
        let call = call.clone();
        let merged = merged.clone();
        workers.push(tokio::spawn(async move {
            let mut latency = histogram();
            loop {
                let started = Instant::now();
                if started >= stop_at {
                    break;
                }
                call().await?;
                if started >= warm_until {
                    latency.record(started.elapsed().as_micros().max(1) as u64)?;
                }
            }
            merged.lock().await.add(&latency)?;
            anyhow::Ok(())
        }));
    }
    for worker in workers {
        worker.await??;
    }
    let latency = Arc::try_unwrap(merged)
        .map_err(|_| anyhow::anyhow!("workers linger"))?
        .into_inner();
    Ok(Figures {
        calls: latency.len(),
        elapsed: duration,
        latency,
        broker_cpu: None,
        machine_cpu: None,
        machine_steal: None,
        broker_rss_mib: None,
    })
}
