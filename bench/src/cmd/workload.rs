//! `k2rpq-bench workload`: a query workload on several engines side by side.

use std::path::PathBuf;
use std::time::Duration;

use anyhow::Context;

use k2rpq::database::{Database, DatabaseOptions, EngineChoice};
use k2rpq::engine::gpu::GpuSelection;
use k2rpq::rpq::EvalOptions;
use k2rpq_bench::rpq::{run_bench, BenchEngine, BenchOptions};
use k2rpq_bench::scaling::{run_scaling, ScalingOptions};
use k2rpq_bench::workload::{read_workload, WorkloadQuery};
use k2rpq_cli::args::DeviceArgs;

/// Arguments of `k2rpq bench`.
#[derive(clap::Args)]
pub struct Args {
    /// The store (made by `k2rpq load`).
    #[arg(long)]
    pub store: PathBuf,
    /// Workload: a file of `[id,] S REGEX O` lines, a `.rq` file of SPARQL queries
    /// separated by lines holding only `;`, or a folder of `.rq` files.
    #[arg(long)]
    pub queries: PathBuf,
    /// Engines, comma-separated. Default: gpu (when a GPU is usable), cpu, oxigraph.
    #[arg(long, value_delimiter = ',')]
    pub engines: Option<Vec<BenchEngine>>,
    /// Run every path of the gpu engine on the GPU (`--engine gpu` with every product on
    /// the device, as `--no-host-walk`); by default it opens the store as `--engine auto`,
    /// which leaves groups over small relations on the CPU and var→var queries that host
    /// walks answer faster to those walks.
    #[arg(long)]
    pub force_gpu: bool,
    /// Timed repeats per query (median reported).
    #[arg(long, default_value_t = 5)]
    pub repeats: usize,
    /// Untimed runs after the cold run.
    #[arg(long, default_value_t = 1)]
    pub warmup: usize,
    /// Row limit per query.
    #[arg(long, default_value_t = 1_000_000)]
    pub limit: u64,
    /// Time limit per run, seconds.
    #[arg(long, default_value = "60", value_parser = k2rpq_cli::args::parse_seconds)]
    pub timeout: Duration,
    /// Run every product of a GPU-run query on the device: no host walk of a constant
    /// start in front, no host walks instead of a var→var query's batches (measures the
    /// device alone; the default is what `--engine auto` does).
    #[arg(long)]
    pub no_host_walk: bool,
    /// Write every figure as JSON here.
    #[arg(long)]
    pub json: Option<PathBuf>,
    /// Write one CSV row per query and engine here.
    #[arg(long)]
    pub csv: Option<PathBuf>,
    /// Write the per-query plot (ours vs Oxigraph, log–log) here.
    #[arg(long)]
    pub svg: Option<PathBuf>,
    /// GPUs, GPU budget (per GPU), cache statistics.
    #[command(flatten)]
    pub device: DeviceArgs,
    /// Measure scaling instead: the workload (path queries) at 1, 2, .., N of the `--gpus`
    /// GPUs, one worker thread per GPU pulling queries from one queue, var→var queries
    /// split across the GPUs; prints GPUs, seconds, queries/s and speedup (JSON: --json).
    #[arg(long)]
    pub scaling: bool,
    /// With --scaling: count the rows only (no pairs are materialised, so `--limit` does
    /// not apply: all pairs of a large graph are counted).
    #[arg(long)]
    pub count: bool,
    /// With --scaling: words per node of a frontier batch (64·W start nodes per batch).
    #[arg(long, default_value_t = 8)]
    pub batch_words: usize,
    /// No progress bar.
    #[arg(long)]
    pub quiet: bool,
    /// Load Oxigraph's in-memory copy on a background thread while the k2rpq engines run
    /// the workload, then run Oxigraph's queries (saves the load's wall time on a large
    /// store; the load can only slow the k2rpq timings down).
    #[arg(long)]
    pub overlap_load: bool,
}

/// Runs the command.
pub fn run(args: Args) -> anyhow::Result<()> {
    let workload = read_workload(&args.queries)?;
    if args.scaling {
        return run_scaling_cmd(&args, &workload);
    }
    let engines = match args.engines {
        Some(e) => e,
        None => {
            let mut e = Vec::new();
            if k2rpq::database::gpu_available().is_ok() {
                e.push(BenchEngine::Gpu);
            }
            e.extend([BenchEngine::Cpu, BenchEngine::Oxigraph]);
            e
        }
    };
    if let Err(why) = k2rpq::database::gpu_available() {
        if engines.contains(&BenchEngine::Gpu) {
            anyhow::bail!("engine gpu asked for, but no GPU is usable: {why}");
        }
        eprintln!("note: no usable GPU ({why}); running k2rpq on the CPU engine");
    }
    let open = |engine| Database::open(&args.store, &args.device.database_options(engine));
    let cpu_db = open(EngineChoice::Cpu)
        .with_context(|| format!("opening store {}", args.store.display()))?;
    let gpu_db = if engines.contains(&BenchEngine::Gpu) {
        Some(open(if args.force_gpu {
            EngineChoice::Gpu
        } else {
            EngineChoice::Auto
        })?)
    } else {
        None
    };
    let options = BenchOptions {
        engines,
        repeats: args.repeats,
        warmup: args.warmup,
        limit: args.limit,
        timeout: args.timeout,
        host_walk: !args.no_host_walk && !args.force_gpu,
        progress: !args.quiet,
        overlap_load: args.overlap_load,
    };
    eprintln!(
        "k2rpq bench: {} queries from {}, engines {:?}, {} repeats after {} warm-up, limit {}, timeout {} s",
        workload.len(),
        args.queries.display(),
        options.engines.iter().map(|e| e.name()).collect::<Vec<_>>(),
        options.repeats,
        options.warmup,
        options.limit,
        args.timeout.as_secs_f64()
    );
    let report = run_bench(&cpu_db, gpu_db.as_ref(), &workload, &options)?;
    eprintln!("k2rpq-cpu {}", cpu_db.store().line_budget().stats());
    if let Some(db) = &gpu_db {
        eprintln!("k2rpq-gpu {}", db.store().line_budget().stats());
    }
    if let Some(p) = &args.json {
        std::fs::write(p, serde_json::to_string_pretty(&report)?)
            .with_context(|| format!("writing {}", p.display()))?;
    }
    if let Some(p) = &args.csv {
        std::fs::write(p, report.csv()).with_context(|| format!("writing {}", p.display()))?;
    }
    if let Some(p) = &args.svg {
        std::fs::write(p, report.svg()).with_context(|| format!("writing {}", p.display()))?;
    }
    print!("{}", report.table());
    if args.device.stats {
        if let Some(stats) = gpu_db.as_ref().and_then(|d| d.gpu_stats()) {
            println!("\nDevice cache:\n{stats}");
        }
    }
    if !report.disagreements.is_empty() {
        anyhow::bail!("engines disagree on {} queries", report.disagreements.len());
    }
    Ok(())
}

/// `k2rpq bench --scaling`.
fn run_scaling_cmd(args: &Args, workload: &[WorkloadQuery]) -> anyhow::Result<()> {
    if args.batch_words == 0 {
        anyhow::bail!("--batch-words must be at least 1");
    }
    let ordinals = args
        .device
        .gpus
        .clone()
        .unwrap_or_default()
        .ordinals()
        .context("bench --scaling")?;
    let options = ScalingOptions {
        warmup: args.warmup,
        repeats: args.repeats,
        eval: EvalOptions {
            limit: (!args.count).then_some(args.limit),
            timeout: Some(args.timeout),
            batch_words: args.batch_words,
            count_only: args.count,
            // The GPUs' scaling: every query on them, none left to host walks.
            host_walk: false,
            ..EvalOptions::default()
        },
    };
    eprintln!(
        "k2rpq bench --scaling: {} queries from {}, GPUs {:?}, {} untimed + {} timed passes, limit {:?}, timeout {} s, W {}{}",
        workload.len(),
        args.queries.display(),
        ordinals,
        options.warmup,
        options.repeats,
        options.eval.limit,
        args.timeout.as_secs_f64(),
        args.batch_words,
        if args.count { ", counting" } else { "" }
    );
    // Every query on the GPUs (no small-query CPU shortcut): this measures the GPUs.
    let open = |ords: &[usize]| {
        Database::open(
            &args.store,
            &DatabaseOptions {
                engine: EngineChoice::Gpu,
                gpu_budget: args.device.gpu_budget,
                gpus: Some(GpuSelection::List(ords.to_vec())),
                line_memory: args.device.line_memory,
                gpu_options: args.device.gpu_options(),
            },
        )
    };
    let report = run_scaling(&open, &ordinals, workload, &options, !args.quiet)?;
    if let Some(p) = &args.json {
        std::fs::write(p, serde_json::to_string_pretty(&report)?)
            .with_context(|| format!("writing {}", p.display()))?;
    }
    print!("{}", report.table());
    if !report.disagreements.is_empty() {
        for d in &report.disagreements {
            eprintln!("disagreement: {d}");
        }
        anyhow::bail!(
            "GPU counts disagree on {} queries",
            report.disagreements.len()
        );
    }
    Ok(())
}
