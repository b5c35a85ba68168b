//! Latency and throughput figures, printed as aligned rows.

use std::time::Duration;

use hdrhistogram::Histogram;

/// What one load run measured.
pub struct Figures {
    /// Calls completed.
    pub calls: u64,
    /// Wall time of the run.
    pub elapsed: Duration,
    /// Latencies in microseconds.
    pub latency: Histogram<u64>,
    /// CPU the broker used during the run, if measured.
    pub broker_cpu: Option<Duration>,
    /// CPU every process on the machine used during the run (load generator, broker and
    /// servers alike), if measured.
    pub machine_cpu: Option<Duration>,
    /// CPU time the hypervisor gave to others while this machine's CPUs wanted it (steal),
    /// summed over CPUs, if measured.
    pub machine_steal: Option<Duration>,
    /// The broker's resident memory at the end of the run, if measured.
    pub broker_rss_mib: Option<f64>,
}

impl Figures {
    /// Calls per second.
    pub fn rate(&self) -> f64 {
        self.calls as f64 / self.elapsed.as_secs_f64()
    }

    /// A latency percentile, in milliseconds.
    pub fn ms(&self, quantile: f64) -> f64 {
        self.latency.value_at_quantile(quantile) as f64 / 1000.0
    }

    /// Broker CPU per call, in microseconds.
    pub fn cpu_per_call_us(&self) -> Option<f64> {
        self.broker_cpu.map(|cpu| self.per_call_us(cpu))
    }

    /// CPU of the whole machine per call, in microseconds.
    pub fn machine_cpu_per_call_us(&self) -> Option<f64> {
        self.machine_cpu.map(|cpu| self.per_call_us(cpu))
    }

    /// `total` spread over the calls, in microseconds.
    fn per_call_us(&self, total: Duration) -> f64 {
        total.as_secs_f64() * 1e6 / self.calls.max(1) as f64
    }

    /// Steal as a share of the run's CPU time (wall time × CPUs), in per cent.
    pub fn stolen_percent(&self) -> Option<f64> {
        let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
        let steal = self.machine_steal?.as_secs_f64();
        Some(100.0 * steal / (self.elapsed.as_secs_f64() * cpus as f64))
    }

    /// One printed row.
    pub fn row(&self, label: &str) -> String {
        let cpu = self
            .cpu_per_call_us()
            .map_or("-".to_owned(), |us| format!("{us:.1}"));
        let rss = self
            .broker_rss_mib
            .map_or("-".to_owned(), |mib| format!("{mib:.1}"));
        format!(
            "{label:<34} {:>10.0}/s  p50 {:>7.3} ms  p99 {:>7.3} ms  p99.9 {:>7.3} ms  cpu/call {:>6} µs  rss {:>5} MiB",
            self.rate(),
            self.ms(0.5),
            self.ms(0.99),
            self.ms(0.999),
            cpu,
            rss
        )
    }
}

/// An empty latency histogram (1 µs to 60 s, 3 significant digits).
pub fn histogram() -> Histogram<u64> {
    Histogram::new_with_bounds(1, 60_000_000, 3).expect("valid bounds")
}

/// The run with the median throughput (one run on a shared machine is noisy).
pub fn median(mut runs: Vec<Figures>) -> Figures {
    runs.sort_by(|a, b| a.rate().total_cmp(&b.rate()));
    let middle = runs.len() / 2;
    runs.swap_remove(middle)
}
