//! CallTool `echo` at concurrency 16 with the audit log and call rates off, then on: what each
//! costs. The rates are set far above the load (every call is let through), so the run
//! measures the checks, not refusals; the audit log writes to a file in a temporary directory.

use crate::{Plan, broker::BrokerProcess, demo_config, report::Figures};

/// Every call allowed: a per-caller, a per-caller-per-server and a per-server rate.
const RATES: &str =
    "    rate: 1000000/s\n    caller_rate: 1000000/s\nlimits: { caller_rate: 1000000/s }\n";

/// Prints the four runs, interleaved twice, and each one's throughput against off.
pub async fn run(plan: Plan) -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let audit = format!("audit: {{ file: {:?} }}\n", dir.path().join("audit.jsonl"));
    let configs = [
        ("off", String::new()),
        ("audit", audit.clone()),
        ("rates", RATES.to_owned()),
        ("audit+rates", format!("{RATES}{audit}")),
    ];
    let concurrency = 16;
    println!("\n## CallTool echo c={concurrency}: audit log and call rates off vs on");
    let rounds = if plan.quick { 1 } else { 2 };
    let mut best: Vec<Option<Figures>> = vec![None, None, None, None];
    for _ in 0..rounds {
        for (i, (_, extra)) in configs.iter().enumerate() {
            let figures = BrokerProcess::start(&demo_config(&[], extra)?, &[])
                .await?
                .echo_load(concurrency, plan)
                .await?;
            // The better of the rounds: noise on a shared machine only ever slows a run.
            if best[i].as_ref().is_none_or(|b| figures.rate() > b.rate()) {
                best[i] = Some(figures);
            }
        }
    }
    let off = best[0].take().expect("measured");
    println!("{}", off.row("off"));
    for (i, (name, _)) in configs.iter().enumerate().skip(1) {
        let on = best[i].take().expect("measured");
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
