//! `k2rpq-bench endpoint`: a load test of a SPARQL endpoint.

use std::path::PathBuf;
use std::time::Duration;

use anyhow::Context;
use k2rpq_bench::endpoint::{read_endpoint_workload, run_load, LoadOptions};

/// Arguments of `k2rpq-bench endpoint`.
#[derive(clap::Args)]
pub struct Args {
    /// The endpoint's query URL (`http://127.0.0.1:7878/query`).
    #[arg(long)]
    pub url: String,
    /// Workload: SPARQL texts separated by lines holding only `;`, or `[id,] S REGEX O`
    /// lines (each sent as `SELECT * WHERE { S REGEX O }`).
    #[arg(long)]
    pub queries: PathBuf,
    /// Concurrent clients.
    #[arg(long, default_value_t = 64)]
    pub clients: usize,
    /// Measured seconds.
    #[arg(long, default_value_t = 30.0)]
    pub duration: f64,
    /// Seconds run before the measured time (not measured).
    #[arg(long, default_value_t = 5.0)]
    pub warmup: f64,
    /// The server's process id: its resident memory is sampled during the run.
    #[arg(long)]
    pub pid: Option<u32>,
    /// Seconds between two memory samples.
    #[arg(long, default_value_t = 1.0)]
    pub rss_interval: f64,
    /// Seconds one request may take before it counts as an error.
    #[arg(long, default_value_t = 120.0)]
    pub request_timeout: f64,
    /// Write the report as JSON here.
    #[arg(long)]
    pub json: Option<PathBuf>,
}

/// Seconds as a duration, checked.
fn seconds(name: &str, value: f64) -> anyhow::Result<Duration> {
    anyhow::ensure!(
        value.is_finite() && value >= 0.0,
        "--{name} must be a number of seconds, not {value}"
    );
    Ok(Duration::from_secs_f64(value))
}

/// Runs `k2rpq-bench endpoint`.
pub fn run(args: Args) -> anyhow::Result<()> {
    let queries = read_endpoint_workload(&args.queries)?;
    let options = LoadOptions {
        url: args.url.clone(),
        clients: args.clients,
        duration: seconds("duration", args.duration)?,
        warmup: seconds("warmup", args.warmup)?,
        server_pid: args.pid,
        rss_interval: seconds("rss-interval", args.rss_interval)?.max(Duration::from_millis(10)),
        request_timeout: seconds("request-timeout", args.request_timeout)?,
    };
    anyhow::ensure!(!options.duration.is_zero(), "--duration must be positive");
    eprintln!(
        "k2rpq-bench endpoint: {} queries, {} clients, {:.0} s warm-up, {:.0} s measured",
        queries.len(),
        options.clients,
        options.warmup.as_secs_f64(),
        options.duration.as_secs_f64()
    );
    let report = run_load(&queries, &options)?;
    println!("{}", report.summary());
    if let Some(path) = &args.json {
        let text = serde_json::to_string_pretty(&report)?;
        std::fs::write(path, text).with_context(|| format!("writing {}", path.display()))?;
    }
    Ok(())
}
