//! `k2rpq-bench build`: construction throughput, bits per edge and peak memory on edge-list
//! files and synthetic graphs; prints a Markdown table (and JSON with `--json`).

use std::path::PathBuf;

use anyhow::Context;
use k2rpq_bench::build::{run as bench, table, BenchOptions, Source, Synthetic};
use k2rpq_bench::input::InputFormat;

/// Arguments of `k2rpq bench-build`.
#[derive(clap::Args)]
pub struct Args {
    /// Edge-list files (tsv or mtx, `.gz` allowed); repeatable.
    #[arg(long)]
    pub input: Vec<PathBuf>,
    /// Format of the `--input` files (default: from each file name).
    #[arg(long, value_enum)]
    pub format: Option<InputFormat>,
    /// A synthetic graph to generate; repeatable.
    #[arg(long, value_enum)]
    pub synthetic: Vec<Synthetic>,
    /// Edges of each synthetic graph (e.g. 50000000 or 50M, 1G).
    #[arg(long, default_value = "10M", value_parser = k2rpq_cli::args::parse_count)]
    pub edges: u64,
    /// Seed of the generators.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Directory sampling period.
    #[arg(long, default_value_t = 256)]
    pub directory_sample: u32,
    /// Also build the cached frontier.
    #[arg(long)]
    pub frontier: bool,
    /// Write the reports as JSON here.
    #[arg(long)]
    pub json: Option<PathBuf>,
}

/// Runs the command.
pub fn run(args: Args) -> anyhow::Result<()> {
    let mut sources: Vec<Source> = args
        .input
        .iter()
        .map(|p| Source::File {
            path: p.clone(),
            format: args.format.unwrap_or_else(|| InputFormat::from_path(p)),
        })
        .collect();
    sources.extend(args.synthetic.iter().map(|&kind| Source::Synthetic {
        kind,
        edges: args.edges,
        seed: args.seed,
    }));
    if sources.is_empty() {
        anyhow::bail!("nothing to benchmark: give --input FILE and/or --synthetic rmat|web");
    }
    let opts = BenchOptions {
        directory_sample: args.directory_sample,
        frontier: args.frontier,
        progress: true,
    };
    let mut reports = Vec::new();
    for s in &sources {
        let r = bench(s, &opts)?;
        eprintln!(
            "{}: {} edges in {:.3} s ({:.1} M edges/s), {:.2} bits/edge",
            r.name,
            r.input_edges,
            r.build_s,
            r.edges_per_s / 1e6,
            r.bits_per_edge
        );
        reports.push(r);
    }
    println!(
        "machine: {} logical CPUs, rayon threads {}",
        num_cpus::get(),
        rayon::current_num_threads()
    );
    print!("{}", table(&reports));
    if let Some(p) = &args.json {
        std::fs::write(p, serde_json::to_string_pretty(&reports)?)
            .with_context(|| format!("writing {}", p.display()))?;
    }
    Ok(())
}
