//! `k2rpq query`: a SPARQL query (property paths, BGPs, joins, VALUES, FILTER, DISTINCT,
//! LIMIT/OFFSET, ORDER BY, COUNT) over an RDF file loaded in memory, or a store.

use std::io::{BufWriter, Write};
use std::path::PathBuf;
use std::time::Instant;

use anyhow::Context;
use k2rpq::engine::cpu::CpuEngine;
use k2rpq::engine::gpu::GpuEngine;
use k2rpq::engine::Engine;
use k2rpq::sparql::{
    query, write_answer, MemoryDataset, PathDataset, QueryAnswer, ResultFormat, SparqlError,
};

use super::rpq::EngineChoice;
use super::DeviceArgs;

/// Arguments of `k2rpq query`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// The query text (or use --file).
    #[arg(required_unless_present = "file", conflicts_with = "file")]
    pub query: Option<String>,
    /// Read the query from this file.
    #[arg(long, short)]
    pub file: Option<PathBuf>,
    /// An RDF file loaded in memory: .nt, .nq, .ttl or .trig, optionally .gz.
    #[arg(long, required_unless_present = "store", conflicts_with = "store")]
    pub nt: Option<PathBuf>,
    /// A store folder written by `k2rpq load`.
    #[arg(long)]
    pub store: Option<PathBuf>,
    /// Output format: table, json, xml, csv or tsv.
    #[arg(long, default_value = "table")]
    pub format: ResultFormat,
    /// Engine of the path products.
    #[arg(long, value_enum, default_value = "auto")]
    pub engine: EngineChoice,
    /// GPUs, GPU budget, cache statistics. The SPARQL layer evaluates a query's paths on
    /// one engine: over a `--store` the least busy selected GPU, over `--nt` the first.
    #[command(flatten)]
    pub device: DeviceArgs,
    /// Print load and query times to stderr.
    #[arg(long)]
    pub verbose: bool,
}

fn answer_with<E: Engine>(
    engine: &E,
    dataset: &dyn PathDataset,
    text: &str,
) -> anyhow::Result<QueryAnswer> {
    query(engine, dataset, text).map_err(|e| with_excerpt(e, text))
}

/// `e`, with the line of `text` a syntax error stopped on and a caret under its column.
fn with_excerpt(e: SparqlError, text: &str) -> anyhow::Error {
    match e.excerpt(text) {
        Some(excerpt) => anyhow::anyhow!("{e}\n{excerpt}"),
        None => e.into(),
    }
}

/// The GPU a SPARQL query runs on: the first of `gpus` (never empty: `open` fails
/// instead), with a notice when more were selected.
fn first_gpu(gpus: &[GpuEngine]) -> &GpuEngine {
    if gpus.len() > 1 {
        eprintln!(
            "k2rpq query: SPARQL paths run on one GPU; using GPU {} of the {} selected",
            gpus[0].device().ordinal,
            gpus.len()
        );
    }
    &gpus[0]
}

/// Runs `k2rpq query`.
pub fn run(args: Args) -> anyhow::Result<()> {
    let text = match (&args.query, &args.file) {
        (Some(q), _) => q.clone(),
        (None, Some(f)) => {
            std::fs::read_to_string(f).with_context(|| format!("reading {}", f.display()))?
        }
        (None, None) => anyhow::bail!("give a query or --file"),
    };
    let started = Instant::now();
    let (answer, engine, loaded, db) = match (&args.nt, &args.store) {
        (Some(p), _) => {
            args.device.check_store_only(false)?;
            let dataset = MemoryDataset::load_file(p)?;
            let loaded = started.elapsed();
            let gpus = args.device.gpu_engines(args.engine)?;
            let (answer, engine) = if gpus.is_empty() {
                (answer_with(&CpuEngine::new(), &dataset, &text)?, "cpu")
            } else {
                (answer_with(first_gpu(&gpus), &dataset, &text)?, "gpu")
            };
            (answer, engine, loaded, None)
        }
        (None, Some(dir)) => {
            // Through a Database: the device cache keeps relations resident under the
            // budget, and queries over small relations take the CPU engine.
            let db = args.device.open_database(dir, args.engine)?;
            let loaded = started.elapsed();
            let (answer, engine) = db.query(&text).map_err(|e| with_excerpt(e, &text))?;
            (answer, engine, loaded, Some(db))
        }
        (None, None) => anyhow::bail!("give --nt FILE or --store DIR"),
    };
    let answered = started.elapsed() - loaded;
    let stdout = std::io::stdout();
    let mut out = BufWriter::new(stdout.lock());
    write_answer(&answer, args.format, &mut out)?;
    if args.format != ResultFormat::Table {
        writeln!(out)?;
    }
    out.flush()?;
    if args.verbose {
        let rows = match &answer {
            QueryAnswer::Solutions { rows, .. } => rows.len(),
            QueryAnswer::Boolean(_) => 1,
        };
        eprintln!(
            "loaded in {:.1} ms, answered in {:.1} ms on {engine}, {rows} rows",
            loaded.as_secs_f64() * 1e3,
            answered.as_secs_f64() * 1e3
        );
    }
    if let Some(db) = &db {
        args.device.print_stats(db);
    }
    Ok(())
}
