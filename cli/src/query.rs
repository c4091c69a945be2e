//! `k2rpq query`: a SPARQL query (property paths, BGPs, joins, VALUES, FILTER, DISTINCT,
//! LIMIT/OFFSET, ORDER BY, COUNT) over an RDF file loaded in memory, or a store; with
//! `--oxigraph`, any SPARQL query through the Oxigraph embedding.

use std::io::{BufWriter, Write};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;

use anyhow::Context;
use k2rpq::database::Database;
use k2rpq::engine::cpu::CpuEngine;
use k2rpq::engine::gpu::GpuEngine;
use k2rpq::engine::Engine;
use k2rpq::oxigraph::{copy_store, K2Paths, OxigraphError, StorePaths};
use k2rpq::sparql::{
    query, read_quads, write_answer, write_triples, MemoryDataset, PathDataset, QueryAnswer,
    ResultFormat, SparqlError,
};

use crate::args::DeviceArgs;
use crate::rpq::EngineChoice;

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
    /// Output format: table, json, xml, csv or tsv; for CONSTRUCT and DESCRIBE (with
    /// `--oxigraph`) nt or ttl (`table` writes N-Triples).
    #[arg(long, default_value = "table")]
    pub format: ResultFormat,
    /// Answer any SPARQL 1.1 query (OPTIONAL, MINUS, aggregates, CONSTRUCT, DESCRIBE, …)
    /// through the Oxigraph embedding: Oxigraph evaluates the query, k2rpq its property
    /// paths. The data are first copied into an in-memory Oxigraph store (a `--store`'s
    /// quads from its trees and dictionary, with a progress bar: minutes and Oxigraph's
    /// memory for 100 M triples); the paths of a `--store` run on its own trees and device
    /// cache.
    #[arg(long)]
    pub oxigraph: bool,
    /// Engine of the path products.
    #[arg(long, default_value = "auto", value_parser = crate::args::engine_parser())]
    pub engine: EngineChoice,
    /// GPUs, GPU budget, cache statistics. The SPARQL layer evaluates a query's paths on
    /// one engine: over a `--store` the least busy selected GPU, over `--nt` the first.
    #[command(flatten)]
    pub device: DeviceArgs,
    /// Print load and query times to stderr.
    #[arg(long)]
    pub verbose: bool,
}

/// What a query returned: a standalone answer, or the triples of a CONSTRUCT or DESCRIBE.
enum Output {
    Answer(QueryAnswer),
    Triples(Vec<oxrdf::Triple>),
}

fn answer_with<E: Engine>(
    engine: &E,
    dataset: &dyn PathDataset,
    text: &str,
) -> anyhow::Result<QueryAnswer> {
    query(engine, dataset, text).map_err(|e| with_excerpt(e, text))
}

/// `e`, with the line of `text` a syntax error stopped on and a caret under its column,
/// or for a construct outside the standalone subset, the option that answers it.
fn with_excerpt(e: SparqlError, text: &str) -> anyhow::Error {
    if let SparqlError::Unsupported(_) = e {
        return anyhow::anyhow!(
            "{e} (outside k2rpq's standalone SPARQL subset, docs/SEMANTICS.md; \
             `--oxigraph` answers any query through the Oxigraph embedding)"
        );
    }
    match e.excerpt(text) {
        Some(excerpt) => anyhow::anyhow!("{e}\n{excerpt}"),
        None => e.into(),
    }
}

/// Parses `text` and checks that `format` can write its results, before any data are
/// loaded (a store's copy into Oxigraph may take minutes).
fn check_before_loading(text: &str, format: ResultFormat) -> anyhow::Result<()> {
    let parsed = spargebra::SparqlParser::new()
        .parse_query(text)
        .map_err(|e| with_excerpt(SparqlError::Syntax(e), text))?;
    let rdf = matches!(format, ResultFormat::NTriples | ResultFormat::Turtle);
    match parsed {
        spargebra::Query::Construct { .. } | spargebra::Query::Describe { .. }
            if !rdf && format != ResultFormat::Table =>
        {
            anyhow::bail!("a CONSTRUCT or DESCRIBE result is RDF: use --format nt, ttl or table")
        }
        spargebra::Query::Select { .. } | spargebra::Query::Ask { .. } if rdf => {
            anyhow::bail!("--format nt and ttl are for CONSTRUCT and DESCRIBE results; a SELECT or ASK answer is written as table, json, xml, csv or tsv")
        }
        _ => Ok(()),
    }
}

/// Oxigraph's results as what `query` writes (their rows are read here: Oxigraph's
/// errors surface before any output).
fn output_of(results: oxigraph::sparql::QueryResults<'_>) -> anyhow::Result<Output> {
    use oxigraph::sparql::QueryResults;
    Ok(match results {
        QueryResults::Boolean(b) => Output::Answer(QueryAnswer::Boolean(b)),
        QueryResults::Solutions(solutions) => {
            let variables = solutions.variables().to_vec();
            let rows = solutions
                .map(|s| s.map(|s| s.values().to_vec()))
                .collect::<Result<_, _>>()?;
            Output::Answer(QueryAnswer::Solutions { variables, rows })
        }
        QueryResults::Graph(triples) => Output::Triples(triples.collect::<Result<_, _>>()?),
    })
}

/// `--oxigraph`: the query through the embedding, over a copy of the data in Oxigraph.
/// Returns the output, the engine of the paths, the load time and the database.
fn run_in_oxigraph(
    args: &Args,
    text: &str,
    started: Instant,
) -> anyhow::Result<(
    Output,
    &'static str,
    std::time::Duration,
    Option<Arc<Database>>,
)> {
    let syntax = |e: OxigraphError| match e {
        OxigraphError::Syntax(e) => with_excerpt(SparqlError::Syntax(e), text),
        e => e.into(),
    };
    match (&args.nt, &args.store) {
        (Some(p), _) => {
            args.device.check_store_only(false)?;
            let store = oxigraph::store::Store::new()?;
            store.extend(read_quads(p)?)?;
            let loaded = started.elapsed();
            let gpus = args.device.gpu_engines(args.engine)?;
            let (results, engine) = match gpus.into_iter().next() {
                None => (K2Paths::cpu().evaluate(&store, text), "cpu"),
                Some(gpu) => (K2Paths::new(gpu).evaluate(&store, text), "gpu"),
            };
            Ok((output_of(results.map_err(syntax)?)?, engine, loaded, None))
        }
        (None, Some(dir)) => {
            let db = Arc::new(args.device.open_database(dir, args.engine)?);
            let bars = crate::progress::Bars::default();
            let copy = copy_store(db.store(), Some(&bars))
                .with_context(|| format!("copying {} into Oxigraph", dir.display()))?;
            let loaded = started.elapsed();
            // Each `SERVICE` pattern takes its engine as `Database::query` would: with a
            // GPU and `auto`, the GPU only for patterns over enough edges.
            let engine = match (db.has_gpu(), args.engine) {
                (false, _) | (true, EngineChoice::Cpu) => "cpu",
                (true, EngineChoice::Gpu) => "gpu",
                (true, EngineChoice::Auto) => "gpu or cpu per path",
            };
            let results = StorePaths::new(Arc::clone(&db)).evaluate(&copy.store, text);
            Ok((
                output_of(results.map_err(syntax)?)?,
                engine,
                loaded,
                Some(db),
            ))
        }
        (None, None) => anyhow::bail!("give --nt FILE or --store DIR"),
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
    check_before_loading(&text, args.format)?;
    let started = Instant::now();
    let (output, engine, loaded, db) = if args.oxigraph {
        run_in_oxigraph(&args, &text, started)?
    } else {
        let (answer, engine, loaded, db) = standalone(&args, &text, started)?;
        (Output::Answer(answer), engine, loaded, db.map(Arc::new))
    };
    let answered = started.elapsed() - loaded;
    let stdout = std::io::stdout();
    let mut out = BufWriter::new(stdout.lock());
    let rows = match output {
        Output::Answer(answer) => {
            write_answer(&answer, args.format, &mut out)?;
            if args.format != ResultFormat::Table {
                writeln!(out)?;
            }
            match answer {
                QueryAnswer::Solutions { rows, .. } => rows.len(),
                QueryAnswer::Boolean(_) => 1,
            }
        }
        Output::Triples(triples) => {
            let rows = triples.len();
            write_triples(
                triples.into_iter().map(Ok::<_, String>),
                args.format,
                &mut out,
            )?;
            rows
        }
    };
    out.flush()?;
    if args.verbose {
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

/// The query by k2rpq's own SPARQL layer (the standalone subset). Returns the answer, the
/// engine, the load time and the database.
fn standalone(
    args: &Args,
    text: &str,
    started: Instant,
) -> anyhow::Result<(
    QueryAnswer,
    &'static str,
    std::time::Duration,
    Option<Database>,
)> {
    Ok(match (&args.nt, &args.store) {
        (Some(p), _) => {
            args.device.check_store_only(false)?;
            let dataset = MemoryDataset::load_file(p)?;
            let loaded = started.elapsed();
            let gpus = args.device.gpu_engines(args.engine)?;
            let (answer, engine) = if gpus.is_empty() {
                (answer_with(&CpuEngine::new(), &dataset, text)?, "cpu")
            } else {
                (answer_with(first_gpu(&gpus), &dataset, text)?, "gpu")
            };
            (answer, engine, loaded, None)
        }
        (None, Some(dir)) => {
            // Through a Database: the device cache keeps relations resident under the
            // budget, and queries over small relations take the CPU engine.
            let db = args.device.open_database(dir, args.engine)?;
            let loaded = started.elapsed();
            let (answer, engine) = db.query(text).map_err(|e| with_excerpt(e, text))?;
            (answer, engine, loaded, Some(db))
        }
        (None, None) => anyhow::bail!("give --nt FILE or --store DIR"),
    })
}
