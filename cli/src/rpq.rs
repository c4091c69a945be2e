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
    evaluate_split, parse_log_line, plan, EvalOptions, LogQuery, PathGraph, PathResult,
    PerQueryRelations, Plan, Share, TraversalPolicy,
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
    /// Stop each query after this many pairs.
    #[arg(long, value_parser = crate::args::parse_limit)]
    pub limit: Option<u64>,
    /// Stop each query after this many seconds (the pairs found so far are printed).
    #[arg(long, value_parser = crate::args::parse_seconds)]
    pub timeout: Option<Duration>,
    /// Engine.
    #[arg(long, default_value = "auto", value_parser = crate::args::engine_parser())]
    pub engine: EngineChoice,
    /// Words per node of a frontier batch: 64·W start nodes per batch (var→var).
    #[arg(long, default_value_t = 8)]
    pub batch_words: usize,
    /// Product traversal.
    #[arg(long, value_enum, default_value = "auto")]
    pub traversal: TraversalChoice,
    /// Load only the tree and directory (no cached frontier).
    #[arg(long)]
    pub tree_only: bool,
    /// GPUs, GPU budget, cache statistics.
    #[command(flatten)]
    pub device: DeviceArgs,
}

impl EvalArgs {
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
            // `--engine gpu` keeps every product on the GPU.
            host_walk: self.engine != EngineChoice::Gpu,
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

/// Arguments of `k2rpq rpq`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// The graph.
    #[command(flatten)]
    pub source: SourceArgs,
    /// One query, `S REGEX O` (S, O: `?var` or `<IRI>`).
    #[arg(required_unless_present = "file", conflicts_with = "file")]
    pub query: Option<String>,
    /// A file of queries, one per line (`id,` prefixes allowed; blank and `#` lines skipped).
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
    eprintln!(
        "loaded {} node ids, {} predicates in {:.2} s",
        graph.node_count(),
        graph.predicates().len(),
        t0.elapsed().as_secs_f64()
    );
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
    Ok(match (&args.query, &args.file) {
        // The parser's message quotes the query itself.
        (Some(q), _) => vec![labelled(1, parse_log_line(q)?)],
        (None, Some(f)) => {
            let file =
                std::fs::File::open(f).with_context(|| format!("opening {}", f.display()))?;
            let mut out = Vec::new();
            for (i, line) in std::io::BufReader::new(file).lines().enumerate() {
                let at = || format!("{} line {}", f.display(), i + 1);
                let line = line.with_context(at)?;
                if !line.trim().is_empty() && !line.trim_start().starts_with('#') {
                    out.push(labelled(i + 1, parse_log_line(&line).with_context(at)?));
                }
            }
            out
        }
        (None, None) => anyhow::bail!("give a query or --file"),
    })
}

/// Prints one query's count line (with `--count`) and its report on stderr.
fn report(
    out: &mut impl Write,
    args: &Args,
    label: &str,
    many: bool,
    r: &PathResult,
    engine: &str,
) -> anyhow::Result<()> {
    if args.count {
        if many {
            writeln!(out, "{label}\t{}", r.count)?;
        } else {
            writeln!(out, "{}", r.count)?;
        }
    }
    eprintln!(
        "query {label}: {} pairs{}{} in {:.3} ms on {engine} ({} steps, {} products)",
        r.count,
        if r.truncated { " (limit reached)" } else { "" },
        if r.timed_out { " (timed out)" } else { "" },
        r.trace.elapsed.as_secs_f64() * 1e3,
        r.trace.total_steps,
        r.trace.products
    );
    Ok(())
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
    eprintln!(
        "opened {} ({} node ids) in {:.2} s",
        dir.display(),
        db.store().node_count(),
        t0.elapsed().as_secs_f64()
    );
    let many = queries.len() > 1;
    let stdout = std::io::stdout();
    let mut out = BufWriter::new(stdout.lock());
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
        report(&mut out, args, label, many, r, answer.engine)?;
    }
    out.flush()?;
    args.eval.device.print_stats(&db);
    Ok(())
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
            report(&mut out, args, label, many, &r, &r.trace.engine)?;
        }
        out.flush()?;
        Ok(())
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
