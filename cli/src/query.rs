//! `k2rpq query`: any SPARQL 1.1 query over a store (or an RDF file, loaded into a
//! temporary store first), through Oxigraph's evaluator over the store's trees with the
//! property paths on k2rpq's engines. Rows are written as they come.

use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::Context;
use k2rpq::database::QueryOptions;
use k2rpq::sparql::results::write_results;
use k2rpq::sparql::{parse_query, with_row_limit, QueryEvaluationError, ResultFormat, SparqlError};

use crate::args::{parse_limit, parse_seconds, DeviceArgs};
use crate::rpq::EngineChoice;

/// Arguments of `k2rpq query`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// The query text (or use --file).
    #[arg(required_unless_present = "file", conflicts_with = "file")]
    pub query: Option<String>,
    /// Read the query from this file (its location is the default base IRI).
    #[arg(long, short)]
    pub file: Option<PathBuf>,
    /// An RDF file (.nt, .nq, .ttl or .trig, optionally .gz or .bz2), loaded into a
    /// temporary store for this query.
    #[arg(long, required_unless_present = "store", conflicts_with = "store")]
    pub nt: Option<PathBuf>,
    /// A store folder written by `k2rpq load`.
    #[arg(long)]
    pub store: Option<PathBuf>,
    /// Output format: table, json, xml, csv or tsv; for CONSTRUCT and DESCRIBE nt or ttl
    /// (`table` writes N-Triples). Aliases and media types work too (`srj`,
    /// `application/sparql-results+json`, `text/turtle`).
    #[arg(long, default_value = "table")]
    pub format: ResultFormat,
    /// Write at most this many rows (triples); when more are left, say so on stderr and
    /// exit with an error.
    #[arg(long, value_parser = parse_limit)]
    pub limit: Option<u64>,
    /// Stop the query after this many seconds (counted until the last row is written)
    /// and exit with an error.
    #[arg(long, value_parser = parse_seconds)]
    pub timeout: Option<Duration>,
    /// The IRI the query's relative IRIs resolve against (default: the location of
    /// --file).
    #[arg(long)]
    pub base: Option<String>,
    /// No longer an option: every query runs through Oxigraph's evaluator over the store.
    #[arg(long, hide = true)]
    pub oxigraph: bool,
    /// Engine of the path products.
    #[arg(long, default_value = "auto", value_parser = crate::args::engine_parser())]
    pub engine: EngineChoice,
    /// GPUs, GPU budget, cache statistics. Each group of path patterns runs on one
    /// engine: the least busy selected GPU, or the CPU for groups over few edges (auto).
    #[command(flatten)]
    pub device: DeviceArgs,
    /// No notices on stderr (such as the one saying that no GPU is usable and the CPU
    /// engine runs instead); errors are still printed.
    #[arg(long, short)]
    pub quiet: bool,
    /// Print load and query times to stderr.
    #[arg(long)]
    pub verbose: bool,
    /// Print how the query would be answered (its path groups' join order, estimates
    /// and counts) instead of answering it.
    #[arg(long)]
    pub explain: bool,
}

/// `file:` IRI of a path (made absolute), with the characters an IRI cannot hold
/// percent-encoded.
fn file_iri(path: &Path) -> anyhow::Result<String> {
    let absolute =
        std::path::absolute(path).with_context(|| format!("locating {}", path.display()))?;
    let mut iri = String::from("file://");
    for b in absolute.to_string_lossy().bytes() {
        match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' | b'/' => {
                iri.push(b as char)
            }
            _ => iri.push_str(&format!("%{b:02X}")),
        }
    }
    Ok(iri)
}

/// `e` with the line of `text` a syntax error stopped on and a caret under its column.
fn with_excerpt(e: SparqlError, text: &str) -> anyhow::Error {
    match e.excerpt(text) {
        Some(excerpt) => anyhow::anyhow!("{e}\n{excerpt}"),
        None => e.into(),
    }
}

/// A temporary store of an RDF file, removed when dropped.
struct FileStore {
    dir: tempfile::TempDir,
}

impl FileStore {
    fn load(file: &Path) -> anyhow::Result<FileStore> {
        let dir = tempfile::Builder::new()
            .prefix("k2rpq-query-")
            .tempdir()
            .context("creating a temporary store")?;
        let options = k2rpq::store::LoadOptions::default();
        k2rpq::store::load(
            &[k2rpq::store::Input::Path(file.to_path_buf())],
            &dir.path().join("store"),
            &options,
        )
        .with_context(|| format!("loading {}", file.display()))?;
        Ok(FileStore { dir })
    }

    fn path(&self) -> PathBuf {
        self.dir.path().join("store")
    }
}

/// Runs `k2rpq query`.
pub fn run(args: Args) -> anyhow::Result<()> {
    crate::report::silence_notices(args.quiet);
    if args.oxigraph {
        anyhow::bail!(
            "--oxigraph is gone: every query now runs through Oxigraph's evaluator over the \
             store itself, with its paths on k2rpq's engines; drop the flag"
        );
    }
    let text = match (&args.query, &args.file) {
        (Some(q), _) => q.clone(),
        (None, Some(f)) => {
            std::fs::read_to_string(f).with_context(|| format!("reading {}", f.display()))?
        }
        (None, None) => anyhow::bail!("give a query or --file"),
    };
    let base = match (&args.base, &args.file) {
        (Some(b), _) => Some(b.clone()),
        (None, Some(f)) => Some(file_iri(f)?),
        (None, None) => None,
    };
    // The query and its format are checked before any data are read.
    let query = parse_query(&text, base.as_deref()).map_err(|e| with_excerpt(e, &text))?;
    args.format.check(&query)?;
    // One row past --limit tells a cut answer from a whole one; the engines stop there.
    let query = match args.limit {
        Some(n) => with_row_limit(&query, n.saturating_add(1)),
        None => query,
    };
    let started = Instant::now();
    let (db, _file_store) = match (&args.nt, &args.store) {
        (Some(file), _) => {
            args.device.check_store_only(false)?;
            let loaded = FileStore::load(file)?;
            (
                args.device.open_database(&loaded.path(), args.engine)?,
                Some(loaded),
            )
        }
        (None, Some(dir)) => (args.device.open_database(dir, args.engine)?, None),
        (None, None) => anyhow::bail!("give --nt FILE or --store DIR"),
    };
    let opened = started.elapsed();
    if args.explain {
        print!("{}", db.explain(&query)?);
        return Ok(());
    }
    let options = QueryOptions {
        base_iri: base,
        timeout: args.timeout,
    };
    let timed_out = |e: &SparqlError| {
        args.timeout.is_some_and(|t| started.elapsed() >= t)
            && matches!(
                e,
                SparqlError::Timeout
                    | SparqlError::Evaluation(
                        QueryEvaluationError::Cancelled | QueryEvaluationError::Service(_)
                    )
            )
    };
    let fail = |e: SparqlError| -> anyhow::Error {
        if timed_out(&e) {
            anyhow::anyhow!(
                "the query ran past --timeout {} s",
                args.timeout.unwrap_or_default().as_secs_f64()
            )
        } else {
            e.into()
        }
    };
    let results = db.evaluate(&query, &options).map_err(fail)?;
    let stdout = std::io::stdout();
    let mut out = BufWriter::new(stdout.lock());
    let written = write_results(results, args.format, args.limit, &mut out);
    // JSON and XML documents end without a newline; CSV and TSV rows end with one.
    if written.is_ok() && matches!(args.format, ResultFormat::Json | ResultFormat::Xml) {
        writeln!(out)?;
    }
    out.flush()?;
    let written = written.map_err(fail)?;
    if args.verbose {
        let (cpu, gpu) = db.path_service_runs();
        eprintln!(
            "opened in {:.1} ms, answered in {:.1} ms, {} row{}; path groups: {cpu} on the CPU, {gpu} on a GPU",
            opened.as_secs_f64() * 1e3,
            (started.elapsed() - opened).as_secs_f64() * 1e3,
            written.rows,
            if written.rows == 1 { "" } else { "s" },
        );
    }
    args.device.print_stats(&db);
    if written.truncated {
        anyhow::bail!(
            "stopped at --limit {}: the answer has more rows",
            written.rows
        );
    }
    Ok(())
}
