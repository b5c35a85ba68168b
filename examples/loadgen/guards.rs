//! CallTool `echo` with the audit log and call rates off, then on: what each costs, as medians
//! of interleaved rounds, at concurrency 16 (or each level `--concurrency` gives). The rates
//! are set far above the load (every call is let through), so the run measures the checks,
//! not refusals; the audit log writes to a file in a temporary directory, each call waiting
//! for the write that holds its line (group commit). `--audit-only` leaves the rates out.

use crate::{
    Plan,
    broker::BrokerProcess,
    demo_config,
    report::{Figures, median},
};

/// Every call allowed: a per-caller, a per-caller-per-server and a per-server rate.
const RATES: &str =
    "    rate: 1000000/s\n    caller_rate: 1000000/s\nlimits: { caller_rate: 1000000/s }\n";

/// Runs the configs in turn at each of `levels`, several rounds, and prints each one's median
/// run and its throughput and CPU per call against off (medians: one run on a shared machine
/// is noisy); `audit_only`: off and audit alone.
pub async fn run(plan: Plan, levels: &[usize], audit_only: bool) -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let audit = format!("audit: {{ file: {:?} }}\n", dir.path().join("audit.jsonl"));
    let mut configs = vec![("off", String::new()), ("audit", audit.clone())];
    if !audit_only {
        configs.push(("rates", RATES.to_owned()));
        configs.push(("audit+rates", format!("{RATES}{audit}")));
    }
    for &concurrency in levels {
        run_at(plan, concurrency, &configs).await?;
    }
    Ok(())
}

/// One level of concurrency of [`run`].
async fn run_at(plan: Plan, concurrency: usize, configs: &[(&str, String)]) -> anyhow::Result<()> {
    let rounds = if plan.quick { 1 } else { 5 };
    println!(
        "\n## CallTool echo c={concurrency}: audit log and call rates off vs on \
         (median of {rounds} interleaved rounds)"
    );
    let mut runs: Vec<Vec<Figures>> = configs.iter().map(|_| Vec::new()).collect();
    for _ in 0..rounds {
        for (i, (_, extra)) in configs.iter().enumerate() {
            let figures = BrokerProcess::start(&demo_config(&[], extra)?, &[])
                .await?
                .echo_load(concurrency, plan)
                .await?;
            runs[i].push(figures);
        }
    }
    let medians: Vec<Figures> = runs.into_iter().map(median).collect();
    let off = &medians[0];
    println!("{}", off.row("off"));
    for ((name, _), on) in configs.iter().zip(&medians).skip(1) {
        println!("{}", on.row(name));
        println!(
            "{name}/off: throughput {:.3}x, p50 {:+.3} ms, cpu/call {:+.1} µs",
            on.rate() / off.rate(),
            on.ms(0.5) - off.ms(0.5),
            on.cpu_per_call_us().unwrap_or(0.0) - off.cpu_per_call_us().unwrap_or(0.0),
        );
    }
    Ok(())
}
