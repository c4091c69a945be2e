//! `k2rpq query`: a SPARQL query (property paths, BGPs, joins, VALUES, FILTER, DISTINCT,
//! LIMIT/OFFSET, ORDER BY, COUNT) over an RDF file loaded in memory, or a store.

use std::io::{BufWriter, Write};
use std::path::PathBuf;
use std::time::Instant;

use anyhow::Context;
use k2rpq::engine::cpu::CpuEngine;
use k2rpq::engine::gpu::GpuEngine;
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
            let gpu = GpuEngine::new(0).context("--engine gpu")?;
            run(&|d| answer_with(&gpu, d, &text))?
        }
        EngineChoice::Auto => match GpuEngine::new_or_notice(0) {
            Some(gpu) => run(&|d| answer_with(&gpu, d, &text))?,
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
