//! `k2rpq rpq`: evaluate `S REGEX O` queries (one argument, or a file of them) and print
//! the distinct (start, end) term pairs as TSV.

use std::io::{BufRead, BufWriter, Write};
use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::Context;
use k2rpq::database::Database;
use k2rpq::engine::cpu::CpuEngine;
use k2rpq::engine::{Engine, MatrixConfig};
use k2rpq::rpq::terms::{resolve_log_query, TermLookup};
use k2rpq::rpq::{
    evaluate_split, parse_log_line_with, plan, EvalOptions, LogQuery, PathGraph, PathResult,
    PerQueryRelations, Plan, Prefixes, Share, TraversalPolicy,
};

use crate::args::DeviceArgs;
use crate::source::{open_source, SourceArgs};

pub use k2rpq::database::EngineChoice;

/// How products visit the trees.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum TraversalChoice {
    /// Masked while the frontier is small, dense otherwise.
    Auto,
    /// Always dense.
    Dense,
    /// Always masked.
    Masked,
}

/// Options shared by `rpq` and `explain`.
#[derive(clap::Args, Debug)]
pub struct EvalArgs {
    /// Declare a prefix for prefixed names in queries: `wdt=http://www.wikidata.org/prop/direct/`
    /// (repeatable; `PREFIX wdt: <...>` at the start of a query does the same).
    #[arg(long, value_name = "PREFIX=IRI", value_parser = parse_prefix)]
    pub prefix: Vec<(String, String)>,
    /// Stop each query after this many pairs; when more were left, the command fails
    /// after printing them, naming the queries that were cut.
    #[arg(long, value_parser = crate::args::parse_limit)]
    pub limit: Option<u64>,
    /// Stop each query after this many seconds (a positive number). The pairs found so
    /// far are printed, then the command fails naming the queries that were cut.
    #[arg(long, value_parser = crate::args::parse_seconds)]
    pub timeout: Option<Duration>,
    /// The engine: `gpu` runs on the GPU, leaving to the CPU engine's host walks the
    /// var→var queries they answer faster; `auto` uses the GPU when one is usable and the
    /// query is large enough to pay for it, the same way.
    #[arg(long, default_value = "auto", value_parser = crate::args::engine_parser())]
    pub engine: EngineChoice,
    /// Keep every product of a GPU-run query on the device: no host walk in front of a
    /// constant start, no host walks instead of a var→var query's batches (measures the
    /// device alone).
    #[arg(long)]
    pub no_host_walk: bool,
    /// GPUs, GPU budget, cache statistics.
    #[command(flatten)]
    pub device: DeviceArgs,
    /// No notices on stderr (such as the one saying that no GPU is usable and the CPU
    /// engine runs instead); errors are still printed.
    #[arg(long, short)]
    pub quiet: bool,
    /// Words per node of a frontier batch: 64·W start nodes per batch (var→var).
    #[arg(
        long,
        default_value_t = 8,
        help_heading = "Tuning",
        hide_short_help = true
    )]
    pub batch_words: usize,
    /// How products visit the trees.
    #[arg(
        long,
        value_enum,
        default_value = "auto",
        help_heading = "Tuning",
        hide_short_help = true
    )]
    pub traversal: TraversalChoice,
    /// Load only the tree and directory of each relation (no cached frontier).
    #[arg(long, help_heading = "Tuning", hide_short_help = true)]
    pub tree_only: bool,
}

/// A `--prefix` value: `p=IRI`.
fn parse_prefix(s: &str) -> Result<(String, String), String> {
    let (p, iri) = s.split_once('=').ok_or_else(|| {
        format!("`{s}`: expected PREFIX=IRI, e.g. wd=http://www.wikidata.org/entity/")
    })?;
    let (p, iri) = (
        p.trim().trim_end_matches(':'),
        iri.trim().trim_start_matches('<').trim_end_matches('>'),
    );
    Prefixes::default()
        .insert(p, iri)
        .map_err(|e| e.to_string())?;
    Ok((p.to_owned(), iri.to_owned()))
}

impl EvalArgs {
    /// The prefixes of `--prefix`.
    pub fn prefixes(&self) -> Prefixes {
        let mut prefixes = Prefixes::default();
        for (p, iri) in &self.prefix {
            prefixes.insert(p, iri).expect("checked by the parser");
        }
        prefixes
    }

    /// The evaluation options these arguments ask for.
    pub fn options(&self, count_only: bool) -> anyhow::Result<EvalOptions> {
        if self.batch_words == 0 {
            anyhow::bail!("--batch-words must be at least 1");
        }
        Ok(EvalOptions {
            limit: self.limit,
            timeout: self.timeout,
            batch_words: self.batch_words,
            traversal: match self.traversal {
                TraversalChoice::Auto => TraversalPolicy::Auto,
                TraversalChoice::Dense => TraversalPolicy::Dense,
                TraversalChoice::Masked => TraversalPolicy::Masked,
            },
            config: if self.tree_only {
                MatrixConfig::TreeOnly
            } else {
                MatrixConfig::CachedFrontier
            },
            count_only,
            host_walk: !self.no_host_walk,
        })
    }

    /// Opens a store with the engine and device options these arguments ask for.
    pub fn open_database(&self, dir: &std::path::Path) -> anyhow::Result<Database> {
        self.device.open_database(dir, self.engine)
    }

    /// Runs `task` on the chosen engines: the CPU engine, or one GPU engine per `--gpus`
    /// device (`auto`: the GPUs when usable, else the CPU with a one-line notice; an
    /// explicit `--gpus` list naming an absent device is an error).
    pub fn dispatch<T: EngineTask>(&self, task: T) -> anyhow::Result<T::Output> {
        let gpus = self.device.gpu_engines(self.engine)?;
        if gpus.is_empty() {
            task.run(&[CpuEngine::new()])
        } else {
            task.run(&gpus)
        }
    }
}

/// Work that runs on whichever engines the user picked.
pub trait EngineTask {
    /// What the work returns.
    type Output;
    /// Runs the work on `engines` (at least one; several GPUs share var→var batches).
    fn run<E: Engine>(self, engines: &[E]) -> anyhow::Result<Self::Output>;
}

/// One [`PerQueryRelations`] per engine, kept across the queries of a run.
pub fn relations_of<'a, E: Engine>(
    engines: &'a [E],
    graph: &'a dyn PathGraph,
    options: &EvalOptions,
) -> Vec<PerQueryRelations<'a, E>> {
    engines
        .iter()
        .map(|e| PerQueryRelations::new(e, graph, options.config))
        .collect()
}

/// Runs `plan` on `engines` (split across them when it has several batches).
pub fn evaluate_on<E: Engine>(
    engines: &[E],
    relations: &mut [PerQueryRelations<'_, E>],
    graph: &dyn PathGraph,
    plan: &Plan,
    options: &EvalOptions,
) -> anyhow::Result<PathResult> {
    let mut shares: Vec<Share<'_, E>> = engines
        .iter()
        .zip(relations.iter_mut())
        .map(|(engine, r)| Share {
            engine,
            relations: r,
        })
        .collect();
    Ok(evaluate_split(graph, plan, options, &mut shares)?)
}

/// The syntax of a query, shown under `k2rpq rpq --help`.
const RPQ_SYNTAX: &str = "\
Queries are `S REGEX O`: S and O are `?var`, `<IRI>` or a prefixed name; REGEX is built \
from IRIs, prefixed names, `a`, `^` (inverse), `/` (sequence), `|` (alternative), `*`, `+`, \
`?`, `!(...)` (negated set) and parentheses. The answer is the distinct (start, end) pairs, \
one per line; `--count` counts them (SPARQL's `COUNT(*)` over the same path counts rows \
with multiplicities, see docs/SEMANTICS.md).

Examples:
  k2rpq rpq --store wd.store '?x <http://www.wikidata.org/prop/direct/P31>/<http://www.wikidata.org/prop/direct/P279>* <http://www.wikidata.org/entity/Q5>'
  k2rpq rpq --store wd.store --count 'PREFIX wdt: <http://www.wikidata.org/prop/direct/> PREFIX wd: <http://www.wikidata.org/entity/> wd:Q183 wdt:P530+ ?y'
  k2rpq rpq --store wd.store --prefix wdt=http://www.wikidata.org/prop/direct/ --prefix wd=http://www.wikidata.org/entity/ '?x wdt:P131+ wd:Q64'
  k2rpq rpq --store wd.store --file queries.rpq --count --limit 1000000 --timeout 60";

/// Arguments of `k2rpq rpq`.
#[derive(clap::Args, Debug)]
#[command(after_help = RPQ_SYNTAX)]
pub struct Args {
    /// The graph.
    #[command(flatten)]
    pub source: SourceArgs,
    /// One query, `S REGEX O` (S, O: `?var` or `<IRI>`).
    #[arg(required_unless_present = "file", conflicts_with = "file")]
    pub query: Option<String>,
    /// A file of queries, one per line (`id,` prefixes allowed; blank and `#` lines
    /// skipped; `PREFIX p: <IRI>` lines declare prefixes for the lines after them).
    #[arg(long)]
    pub file: Option<PathBuf>,
    /// Print only the number of pairs of each query.
    #[arg(long)]
    pub count: bool,
    /// Evaluation options.
    #[command(flatten)]
    pub eval: EvalArgs,
}

/// Runs the command.
pub fn run(args: Args) -> anyhow::Result<()> {
    crate::report::silence_notices(args.eval.quiet);
    let options = args.eval.options(args.count)?;
    args.eval
        .device
        .check_store_only(args.source.store.is_some())?;
    let queries = read_queries(&args)?;
    if let Some(dir) = &args.source.store {
        return run_on_store(&args, dir, &options, &queries);
    }
    let t0 = Instant::now();
    let (graph, terms) = open_source(&args.source)?;
    (!args.eval.quiet).then(|| {
        eprintln!(
            "loaded {} node ids, {} predicates in {:.2} s",
            graph.node_count(),
            graph.predicates().len(),
            t0.elapsed().as_secs_f64()
        )
    });
    let task = RunQueries {
        args: &args,
        options,
        graph: graph.as_ref(),
        terms: terms.as_ref(),
        queries,
    };
    args.eval.dispatch(task)
}

/// The queries of the command line or of `--file`, parsed, each with its label (its
/// `id,` prefix, else its line number). Every query is parsed before any runs, so a
/// mistake on a file's last line stops the command before the first query's work.
fn read_queries(args: &Args) -> anyhow::Result<Vec<(String, LogQuery)>> {
    let labelled =
        |line_no: usize, q: LogQuery| (q.id.clone().unwrap_or_else(|| line_no.to_string()), q);
    let mut prefixes = args.eval.prefixes();
    Ok(match (&args.query, &args.file) {
        // The parser's message quotes the query itself.
        (Some(q), _) => vec![labelled(1, parse_log_line_with(q, &prefixes)?)],
        (None, Some(f)) => {
            let file =
                std::fs::File::open(f).with_context(|| format!("opening {}", f.display()))?;
            let mut out = Vec::new();
            for (i, line) in std::io::BufReader::new(file).lines().enumerate() {
                let at = || format!("{} line {}", f.display(), i + 1);
                let line = line.with_context(at)?;
                if line.trim().is_empty()
                    || line.trim_start().starts_with('#')
                    || prefixes.declare(&line).with_context(at)?
                {
                    continue;
                }
                out.push(labelled(
                    i + 1,
                    parse_log_line_with(&line, &prefixes).with_context(at)?,
                ));
            }
            out
        }
        (None, None) => anyhow::bail!("give a query or --file"),
    })
}

/// Prints one query's count line (with `--count`) and its report on stderr; adds the
/// query to `cut` when its answer is partial.
fn report(
    out: &mut impl Write,
    args: &Args,
    label: &str,
    many: bool,
    r: &PathResult,
    engine: &str,
    cut: &mut Cut,
) -> anyhow::Result<()> {
    if args.count {
        if many {
            writeln!(out, "{label}\t{}", r.count)?;
        } else {
            writeln!(out, "{}", r.count)?;
        }
    }
    let quiet = args.eval.quiet;
    (!quiet).then(|| {
        eprintln!(
            "query {label}: {} pairs{}{} in {:.3} ms on {engine} ({} steps, {} products)",
            r.count,
            if r.truncated { " (limit reached)" } else { "" },
            if r.timed_out { " (timed out)" } else { "" },
            r.trace.elapsed.as_secs_f64() * 1e3,
            r.trace.total_steps,
            r.trace.products
        )
    });
    if r.timed_out {
        cut.timed_out.push(label.to_owned());
    } else if r.truncated {
        cut.limited.push(label.to_owned());
    }
    Ok(())
}

/// The queries whose answers were cut, by label: a partial answer is printed, then the
/// command fails, so that it never passes for a whole one.
#[derive(Default)]
struct Cut {
    timed_out: Vec<String>,
    limited: Vec<String>,
}

impl Cut {
    /// An error naming the cut queries, if any.
    fn check(self, options: &EvalOptions) -> anyhow::Result<()> {
        let mut parts = Vec::new();
        let list = |v: &[String]| {
            let shown: Vec<&str> = v.iter().take(10).map(String::as_str).collect();
            let more = v.len().saturating_sub(10);
            let more = if more > 0 {
                format!(" and {more} more")
            } else {
                String::new()
            };
            format!("{}{more}", shown.join(", "))
        };
        if !self.timed_out.is_empty() {
            let after = options
                .timeout
                .map(|t| format!(" after {:.3} s", t.as_secs_f64()))
                .unwrap_or_default();
            parts.push(format!(
                "timed out{after} (--timeout): query {}",
                list(&self.timed_out)
            ));
        }
        if !self.limited.is_empty() {
            let at = options
                .limit
                .map(|l| format!(" of {l} pairs"))
                .unwrap_or_default();
            parts.push(format!(
                "stopped at the limit{at} with more pairs left (--limit): query {}",
                list(&self.limited)
            ));
        }
        if parts.is_empty() {
            Ok(())
        } else {
            anyhow::bail!("partial answers: {}", parts.join("; "))
        }
    }
}

/// `rpq --store`: every query through a [`Database`], so that relations stay resident
/// in the device cache under `--gpu-budget` and small queries take the CPU path.
fn run_on_store(
    args: &Args,
    dir: &std::path::Path,
    options: &EvalOptions,
    queries: &[(String, LogQuery)],
) -> anyhow::Result<()> {
    let t0 = Instant::now();
    let db = args.eval.open_database(dir)?;
    (!args.eval.quiet).then(|| {
        eprintln!(
            "opened {} ({} node ids) in {:.2} s",
            dir.display(),
            db.store().node_count(),
            t0.elapsed().as_secs_f64()
        )
    });
    let many = queries.len() > 1;
    let stdout = std::io::stdout();
    let mut out = BufWriter::new(stdout.lock());
    let mut cut = Cut::default();
    for (label, q) in queries {
        let answer = db.run_log_query(q, options)?;
        let r = &answer.result;
        // Each end's column is decoded a chunk at a time (`Database::terms` prefetches
        // the next ids' dictionary blocks), as the benchmark does, while the terms held
        // at once stay bounded however large the answer.
        let name = |id: u32, t: &Option<oxrdf::Term>| {
            t.as_ref()
                .map_or_else(|| format!("_:n{id}"), |t| t.to_string())
        };
        for chunk in r.pairs.chunks(DECODE_CHUNK) {
            let column = |end: fn(&(u32, u32)) -> u32| {
                db.terms(&chunk.iter().map(end).collect::<Vec<u32>>())
            };
            let (subjects, objects) = (column(|p| p.0), column(|p| p.1));
            for ((&(a, b), sa), ob) in chunk.iter().zip(&subjects).zip(&objects) {
                if many {
                    writeln!(out, "{label}\t{}\t{}", name(a, sa), name(b, ob))?;
                } else {
                    writeln!(out, "{}\t{}", name(a, sa), name(b, ob))?;
                }
            }
        }
        report(&mut out, args, label, many, r, answer.engine, &mut cut)?;
    }
    out.flush()?;
    args.eval.device.print_stats(&db);
    cut.check(options)
}

struct RunQueries<'a> {
    args: &'a Args,
    options: EvalOptions,
    graph: &'a dyn PathGraph,
    terms: &'a dyn TermLookup,
    queries: Vec<(String, LogQuery)>,
}

impl EngineTask for RunQueries<'_> {
    type Output = ();

    fn run<E: Engine>(self, engines: &[E]) -> anyhow::Result<()> {
        let RunQueries {
            args,
            options,
            graph,
            terms,
            queries,
        } = self;
        let many = queries.len() > 1;
        let stdout = std::io::stdout();
        let mut out = BufWriter::new(stdout.lock());
        // Relations stay loaded across the queries of one run.
        let mut relations = relations_of(engines, graph, &options);
        let mut cut = Cut::default();
        for (label, q) in &queries {
            let r = run_one(
                engines,
                graph,
                terms,
                q,
                &options,
                &mut relations,
                |a, b| {
                    if many {
                        writeln!(out, "{label}\t{a}\t{b}")
                    } else {
                        writeln!(out, "{a}\t{b}")
                    }
                },
            )?;
            report(&mut out, args, label, many, &r, &r.trace.engine, &mut cut)?;
        }
        out.flush()?;
        cut.check(&options)
    }
}

/// Answer pairs whose terms `k2rpq rpq --store` decodes together: enough for the
/// prefetching of `Database::terms` to overlap its misses, few enough to keep memory flat.
const DECODE_CHUNK: usize = 4096;

/// Plans and evaluates one parsed query, calling `emit` with each pair's terms.
pub fn run_one<E: Engine>(
    engines: &[E],
    graph: &dyn PathGraph,
    terms: &dyn TermLookup,
    q: &k2rpq::rpq::LogQuery,
    options: &EvalOptions,
    relations: &mut [PerQueryRelations<'_, E>],
    mut emit: impl FnMut(&str, &str) -> std::io::Result<()>,
) -> anyhow::Result<PathResult> {
    let rq = resolve_log_query(q, terms);
    let p = plan(graph, &rq.path, rq.subject, rq.object, options);
    let r = evaluate_on(engines, relations, graph, &p, options)?;
    for &(a, b) in &r.pairs {
        emit(&rq.term(terms, a), &rq.term(terms, b))?;
    }
    Ok(r)
}
