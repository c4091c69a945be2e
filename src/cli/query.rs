//! `k2rpq query`: a SPARQL query (property paths, BGPs, joins, VALUES, FILTER, DISTINCT,
//! LIMIT/OFFSET, ORDER BY, COUNT) over an RDF file loaded in memory, or a store.

use std::io::{BufWriter, Write};
use std::path::PathBuf;
use std::time::Instant;

use anyhow::Context;
use k2rpq::engine::cpu::CpuEngine;
use k2rpq::engine::gpu::{open_or_notice, GpuEngine, GpuSelection};
use k2rpq::engine::Engine;
use k2rpq::sparql::{query, write_answer, MemoryDataset, PathDataset, QueryAnswer, ResultFormat};

use super::rpq::EngineChoice;

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
    /// GPUs (`all` or a list like `0,1`; default GPU 0). The SPARQL layer evaluates each
    /// path on one engine: the first selected GPU (a notice says so when several are given).
    #[arg(long)]
    pub gpus: Option<GpuSelection>,
    /// Print load and query times to stderr.
    #[arg(long)]
    pub verbose: bool,
}

fn answer_with<E: Engine>(
    engine: &E,
    dataset: &dyn PathDataset,
    text: &str,
) -> anyhow::Result<QueryAnswer> {
    Ok(query(engine, dataset, text)?)
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
    let dataset: Box<dyn PathDataset> = match (&args.nt, &args.store) {
        (Some(p), _) => Box::new(MemoryDataset::load_file(p)?),
        (None, Some(dir)) => Box::new(k2rpq::database::StoreDataset::new(std::sync::Arc::new(
            k2rpq::store::Store::open(dir)
                .with_context(|| format!("opening store {}", dir.display()))?,
        ))),
        (None, None) => anyhow::bail!("give --nt FILE or --store DIR"),
    };
    let loaded = started.elapsed();
    let run =
        |engine: &dyn Fn(&dyn PathDataset) -> anyhow::Result<QueryAnswer>| engine(dataset.as_ref());
    let answer = match args.engine {
        EngineChoice::Cpu => run(&|d| answer_with(&CpuEngine::new(), d, &text))?,
        EngineChoice::Gpu => {
            let gpus = args
                .gpus
                .clone()
                .unwrap_or_default()
                .open()
                .context("--engine gpu")?;
            run(&|d| answer_with(first_gpu(&gpus), d, &text))?
        }
        EngineChoice::Auto => match open_or_notice(args.gpus.as_ref())? {
            Some(gpus) => run(&|d| answer_with(first_gpu(&gpus), d, &text))?,
            None => run(&|d| answer_with(&CpuEngine::new(), d, &text))?,
        },
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
            "loaded in {:.1} ms, answered in {:.1} ms, {rows} rows",
            loaded.as_secs_f64() * 1e3,
            answered.as_secs_f64() * 1e3
        );
    }
    Ok(())
}
