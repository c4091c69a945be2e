//! The workload benchmark behind `k2rpq-bench workload`: every query of a workload (path
//! queries, or whole SPARQL queries) on several engines side by side (k2rpq on the GPU,
//! k2rpq on the CPU, Oxigraph's own evaluation on the same data), checked for agreement,
//! timed cold and as a median over repeats.
//!
//! Agreement: path queries compare distinct pairs (k2rpq's RPQs are sets); SPARQL queries
//! compare multisets of rows (SPARQL's bags; a CONSTRUCT's triples). Oxigraph 0.5.13
//! departs from the spec in two known ways (docs/SEMANTICS.md): it deduplicates the
//! solutions of an alternative (`a|b`, a negated set with forward and inverse members)
//! outside a closure, and it drops a constant the data do not hold from zero-length paths.
//! A query whose answers differ only where one of these applies is reported as a
//! deviation, not a disagreement.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::time::{Duration, Instant};

use indicatif::{ProgressBar, ProgressStyle};
use oxrdf::Term;

use super::oxigraph_runner::{copy_store, drain, run_query, QueryOutcome};
use super::stats::{geomean, Summary};
use super::svg::{LogLogPlot, Series};
use super::workload::{QueryKind, WorkloadQuery};
use k2rpq::database::{Database, DatabaseError, QueryOptions};
use k2rpq::rpq::{EvalOptions, LogEndpoint, LogQuery};

/// An engine of the benchmark.
#[derive(
    Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize, clap::ValueEnum,
)]
pub enum BenchEngine {
    /// k2rpq with [`EngineChoice::Auto`](k2rpq::database::EngineChoice::Auto) on a machine with a GPU (small queries on the CPU).
    Gpu,
    /// k2rpq on the CPU engine.
    Cpu,
    /// Oxigraph 0.5.13's own evaluation over an in-memory copy of the data.
    Oxigraph,
}

impl BenchEngine {
    /// Its name in reports.
    pub fn name(self) -> &'static str {
        match self {
            BenchEngine::Gpu => "k2rpq-gpu",
            BenchEngine::Cpu => "k2rpq-cpu",
            BenchEngine::Oxigraph => "oxigraph",
        }
    }
}

/// Options of a benchmark run.
#[derive(Clone, Debug, serde::Serialize)]
pub struct BenchOptions {
    /// Engines, in report order.
    pub engines: Vec<BenchEngine>,
    /// Timed repeats after the cold run (median reported).
    pub repeats: usize,
    /// Untimed runs between the cold run and the timed ones.
    pub warmup: usize,
    /// Row limit per query.
    pub limit: u64,
    /// Time limit per run.
    #[serde(with = "secs")]
    pub timeout: Duration,
    /// Walk constant-start queries on the host first, under a budget, before the GPU
    /// (the default, as `--engine auto`); `false` runs every product of the GPU engine on
    /// the device (`k2rpq bench --no-host-walk`).
    pub host_walk: bool,
    /// Show a progress bar.
    #[serde(skip)]
    pub progress: bool,
    /// Copy the data into Oxigraph on a background thread while the k2rpq engines run
    /// every query, then run Oxigraph's queries (instead of loading first and running the
    /// engines query by query). Saves the load's wall time on a large store; the copy
    /// holds one core and memory bandwidth while k2rpq is timed, which can only slow
    /// k2rpq down.
    pub overlap_load: bool,
}

mod secs {
    pub fn serialize<S: serde::Serializer>(
        d: &std::time::Duration,
        s: S,
    ) -> Result<S::Ok, S::Error> {
        s.serialize_f64(d.as_secs_f64())
    }
}

impl Default for BenchOptions {
    fn default() -> Self {
        BenchOptions {
            engines: vec![BenchEngine::Gpu, BenchEngine::Cpu, BenchEngine::Oxigraph],
            repeats: 5,
            warmup: 1,
            limit: 1_000_000,
            timeout: Duration::from_secs(60),
            host_walk: true,
            progress: true,
            overlap_load: false,
        }
    }
}

/// How a run ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
pub enum RunStatus {
    /// All rows.
    Ok,
    /// Stopped at the row limit.
    Limit,
    /// Stopped at the time limit.
    Timeout,
    /// Failed (see `error`).
    Error,
}

/// One engine on one query.
#[derive(Clone, Debug, serde::Serialize)]
pub struct EngineRun {
    /// The engine.
    pub engine: BenchEngine,
    /// Which k2rpq engine actually ran (`cpu`/`gpu`), or `oxigraph`.
    pub ran_on: String,
    /// How it ended.
    pub status: RunStatus,
    /// Rows (with multiplicity for SPARQL queries and Oxigraph; k2rpq's path queries
    /// return distinct rows).
    pub rows: u64,
    /// Distinct rows.
    pub distinct: u64,
    /// First run, milliseconds (includes loading relations).
    pub cold_ms: f64,
    /// Median of the timed repeats, milliseconds.
    pub median_ms: f64,
    /// Every timed repeat, milliseconds.
    pub times_ms: Vec<f64>,
    /// The error, when `status` is `Error`.
    pub error: Option<String>,
    #[serde(skip)]
    answer: Answer,
}

/// The rows an engine returned, in the form engines are compared in.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
enum Answer {
    /// Nothing to compare (the run failed).
    #[default]
    None,
    /// Distinct rows (path queries).
    Set(BTreeSet<String>),
    /// Rows with their multiplicities (SPARQL queries).
    Bag(BTreeMap<String, u64>),
}

impl Answer {
    fn distinct(&self) -> u64 {
        match self {
            Answer::None => 0,
            Answer::Set(s) => s.len() as u64,
            Answer::Bag(b) => b.len() as u64,
        }
    }

    fn rows(&self) -> u64 {
        match self {
            Answer::Bag(b) => b.values().sum(),
            other => other.distinct(),
        }
    }

    /// The distinct rows.
    fn keys(&self) -> BTreeSet<&String> {
        match self {
            Answer::None => BTreeSet::new(),
            Answer::Set(s) => s.iter().collect(),
            Answer::Bag(b) => b.keys().collect(),
        }
    }
}

/// One query on every engine.
#[derive(Clone, Debug, serde::Serialize)]
pub struct QueryReport {
    /// Query id.
    pub id: String,
    /// Shape, e.g. `c a+ v`.
    pub shape: String,
    /// The query as SPARQL.
    pub sparql: String,
    /// One run per engine, in option order.
    pub runs: Vec<EngineRun>,
    /// Whether every engine that finished returned the same rows (`None` when fewer than
    /// two finished).
    pub agree: Option<bool>,
    /// Where the answers differ only as one of Oxigraph's known deviations from the spec
    /// allows: which one.
    pub deviation: Option<String>,
}

/// Per-engine summary.
#[derive(Clone, Debug, serde::Serialize)]
pub struct EngineSummary {
    /// The engine.
    pub engine: BenchEngine,
    /// Queries it completed.
    pub completed: usize,
    /// Timeouts.
    pub timeouts: usize,
    /// Limits hit.
    pub limits: usize,
    /// Errors.
    pub errors: usize,
    /// Of the per-query medians of completed queries, milliseconds.
    pub time_ms: Summary,
    /// Geometric mean over queries of Oxigraph's time divided by this engine's.
    pub speedup_geomean: Option<f64>,
    /// Oxigraph's median time over this engine's median time.
    pub speedup_of_medians: Option<f64>,
    /// Largest ratio of this engine's time to Oxigraph's over the queries both completed.
    pub worst_ratio: Option<f64>,
}

/// One engine on one class of queries.
#[derive(Clone, Debug, Default, PartialEq, serde::Serialize)]
pub struct ClassSummary {
    /// Queries of the class.
    pub queries: usize,
    /// Queries completed.
    pub completed: usize,
    /// Queries stopped at the time limit.
    pub timeouts: usize,
    /// Queries stopped at the row limit (their times count in `time_ms`: a run cut at
    /// the limit did its work up to there).
    pub limits: usize,
    /// Queries that failed.
    pub errors: usize,
    /// Of the per-query medians of the completed and limit-cut queries, milliseconds.
    pub time_ms: Summary,
}

/// The whole report.
#[derive(Clone, Debug, serde::Serialize)]
pub struct BenchReport {
    /// Options used.
    pub options: BenchOptions,
    /// Triples of the data.
    pub triples: u64,
    /// Seconds to copy the data into Oxigraph (when it runs): decoding plus insertion.
    pub oxigraph_load_s: Option<f64>,
    /// Of which: seconds to decode the dictionary's terms.
    pub oxigraph_decode_s: Option<f64>,
    /// Per query.
    pub queries: Vec<QueryReport>,
    /// Per engine.
    pub engines: Vec<EngineSummary>,
    /// Per shape, per engine: median of per-query medians, milliseconds.
    pub shapes: BTreeMap<String, BTreeMap<String, f64>>,
    /// Per query class ([`query_class`](crate::workload::query_class)), per engine.
    pub classes: BTreeMap<String, BTreeMap<String, ClassSummary>>,
    /// Queries where the engines disagree.
    pub disagreements: Vec<String>,
}

/// Errors of the benchmark.
#[derive(Debug, thiserror::Error)]
pub enum BenchError {
    /// The database failed.
    #[error(transparent)]
    Database(#[from] DatabaseError),
    /// Copying the data into Oxigraph failed.
    #[error("cannot load the data into Oxigraph: {0}")]
    Oxigraph(String),
    /// An engine that was asked for is not available.
    #[error("{0}")]
    Unavailable(String),
}

/// The distinct rows of a k2rpq answer in Oxigraph's `SELECT *` form: the values of the
/// variables in order of appearance, as N-Triples terms, tab-separated.
fn k2rpq_rows(db: &Database, q: &LogQuery, pairs: &[(u32, u32)]) -> BTreeSet<String> {
    let t = |id: u32| db.term(id).map(|t| t.to_string()).unwrap_or_default();
    let same_var =
        matches!((&q.subject, &q.object), (LogEndpoint::Var(a), LogEndpoint::Var(b)) if a == b);
    pairs
        .iter()
        .filter(|(s, o)| !same_var || s == o)
        .map(|&(s, o)| match (&q.subject, &q.object) {
            (LogEndpoint::Var(_), LogEndpoint::Var(_)) if same_var => t(s),
            (LogEndpoint::Var(_), LogEndpoint::Var(_)) => format!("{}\t{}", t(s), t(o)),
            (LogEndpoint::Var(_), _) => t(s),
            (_, LogEndpoint::Var(_)) => t(o),
            _ => String::new(),
        })
        .collect()
}

/// One engine's runs of one query: a cold run, untimed warm-ups, then timed repeats, which
/// [`run_bench`] interleaves with the other engines' (one repeat of each in turn, the
/// order rotating every round) so that no engine always runs right after another's
/// work on the caches.
struct Runs<'a> {
    /// One run: its status, or why it failed.
    run: Box<dyn FnMut() -> Result<RunStatus, String> + 'a>,
    /// Turns the runs' figures into the report.
    finish: Box<dyn FnOnce(Timing) -> EngineRun + 'a>,
    timing: Timing,
}

/// What the runs of one engine measured.
struct Timing {
    status: RunStatus,
    cold_ms: f64,
    times_ms: Vec<f64>,
    error: Option<String>,
}

impl<'a> Runs<'a> {
    /// Runs cold: `run` returns the answer, kept for the agreement check, and its status.
    /// `finish` turns the cold answer (`None` after an error) and the figures into the
    /// report.
    fn start<T: 'a>(
        options: &BenchOptions,
        mut run: impl FnMut() -> Result<(T, RunStatus), String> + 'a,
        finish: impl FnOnce(Option<T>, Timing) -> EngineRun + 'a,
    ) -> Runs<'a> {
        let t0 = Instant::now();
        let first = run();
        let cold_ms = t0.elapsed().as_secs_f64() * 1e3;
        let (value, timing) = match first {
            Ok((v, status)) => (
                Some(v),
                Timing {
                    status,
                    cold_ms,
                    times_ms: Vec::new(),
                    error: None,
                },
            ),
            Err(e) => (
                None,
                Timing {
                    status: RunStatus::Error,
                    cold_ms,
                    times_ms: Vec::new(),
                    error: Some(e),
                },
            ),
        };
        let mut runs = Runs {
            run: Box::new(move || run().map(|(_, status)| status)),
            finish: Box::new(move |timing| finish(value, timing)),
            timing,
        };
        if runs.repeats() {
            for _ in 0..options.warmup {
                let _ = (runs.run)();
            }
        }
        runs
    }

    /// Whether the query is timed again: not after an error, nor after a cold run that
    /// hit the timeout (it would only hit it again; its cold time is its figure).
    fn repeats(&self) -> bool {
        !matches!(self.timing.status, RunStatus::Error | RunStatus::Timeout)
    }

    /// One timed repeat.
    fn repeat(&mut self) {
        if self.repeats() {
            let t = Instant::now();
            let _ = (self.run)();
            self.timing.times_ms.push(t.elapsed().as_secs_f64() * 1e3);
        }
    }

    /// The report.
    fn finish(mut self) -> EngineRun {
        if self.timing.status == RunStatus::Timeout {
            self.timing.times_ms = vec![self.timing.cold_ms];
        }
        (self.finish)(self.timing)
    }
}

fn run_k2rpq<'a>(
    db: &'a Database,
    engine: BenchEngine,
    wq: &'a WorkloadQuery,
    options: &BenchOptions,
) -> Runs<'a> {
    let eval = EvalOptions {
        limit: Some(options.limit),
        timeout: Some(options.timeout),
        host_walk: options.host_walk,
        ..EvalOptions::default()
    };
    // Timed: the evaluation and the terms of the answer's variables (what a caller
    // receives); not timed: the strings of the agreement check, built once from the cold
    // run's pairs.
    match &wq.kind {
        QueryKind::Path(q) => Runs::start(
            options,
            move || {
                let a = db.run_log_query(q, &eval).map_err(|e| e.to_string())?;
                let status = if a.result.timed_out {
                    RunStatus::Timeout
                } else if a.result.truncated {
                    RunStatus::Limit
                } else {
                    RunStatus::Ok
                };
                // A row binds the query's variables, as Oxigraph's `SELECT *` solutions
                // do: a constant end is not part of the answer and is not decoded once
                // per row.
                let (sv, ov) = (
                    matches!(q.subject, LogEndpoint::Var(_)),
                    matches!(q.object, LogEndpoint::Var(_)),
                );
                // Each variable's column is decoded at once (`Database::terms`), as a
                // caller that receives the whole answer would.
                let pairs = &a.result.pairs;
                let column = |on: bool, end: fn(&(u32, u32)) -> u32| -> Vec<Option<Term>> {
                    if on {
                        db.terms(&pairs.iter().map(end).collect::<Vec<u32>>())
                    } else {
                        vec![None; pairs.len()]
                    }
                };
                let terms: Vec<(Option<Term>, Option<Term>)> = column(sv, |p| p.0)
                    .into_iter()
                    .zip(column(ov, |p| p.1))
                    .collect();
                std::hint::black_box(&terms);
                Ok(((a.result.pairs, a.engine), status))
            },
            move |answer, timing| {
                let ran_on = answer.as_ref().map(|a| a.1.to_string()).unwrap_or_default();
                let answer = answer.map(|(pairs, _)| Answer::Set(k2rpq_rows(db, q, &pairs)));
                finish_run(engine, ran_on, answer, timing)
            },
        ),
        QueryKind::Sparql(text) => {
            let owned = options.clone();
            Runs::start(
                options,
                move || {
                    let before = db.path_service_runs();
                    let o = run_sparql(db, text, &owned)?;
                    let after = db.path_service_runs();
                    let ran_on = match (after.0 > before.0, after.1 > before.1) {
                        (_, false) => "cpu",
                        (false, true) => "gpu",
                        (true, true) => "cpu+gpu",
                    };
                    let status = outcome_status(&o);
                    Ok(((o, ran_on), status))
                },
                move |answer, timing| {
                    let ran_on = answer.as_ref().map(|a| a.1.to_string()).unwrap_or_default();
                    let answer = answer.map(|(o, _)| Answer::Bag(o.bag()));
                    finish_run(engine, ran_on, answer, timing)
                },
            )
        }
    }
}

/// A SPARQL query on k2rpq, every row read (at most the limit), stopped at the timeout.
fn run_sparql(db: &Database, text: &str, options: &BenchOptions) -> Result<QueryOutcome, String> {
    let start = Instant::now();
    let deadline = start
        .checked_add(options.timeout)
        .unwrap_or(start + Duration::from_secs(1 << 30));
    let query_options = QueryOptions {
        timeout: Some(options.timeout),
        ..QueryOptions::default()
    };
    let cancelled = |e: String| {
        if Instant::now() >= deadline {
            Ok(QueryOutcome {
                timed_out: true,
                ..QueryOutcome::default()
            })
        } else {
            Err(e)
        }
    };
    let mut o = match db.query_with(text, &query_options) {
        Ok(results) => drain(results, options.limit, deadline).or_else(cancelled)?,
        Err(e) => cancelled(e.to_string())?,
    };
    o.time = start.elapsed();
    Ok(o)
}

/// How a run that returned `o` ended.
fn outcome_status(o: &QueryOutcome) -> RunStatus {
    if o.timed_out {
        RunStatus::Timeout
    } else if o.truncated {
        RunStatus::Limit
    } else {
        RunStatus::Ok
    }
}

fn finish_run(
    engine: BenchEngine,
    ran_on: String,
    answer: Option<Answer>,
    timing: Timing,
) -> EngineRun {
    let answer = answer.unwrap_or_default();
    EngineRun {
        engine,
        ran_on,
        status: timing.status,
        rows: answer.rows(),
        distinct: answer.distinct(),
        cold_ms: timing.cold_ms,
        median_ms: Summary::of(&timing.times_ms).median,
        times_ms: timing.times_ms,
        error: timing.error,
        answer,
    }
}

fn run_oxigraph<'a>(
    ox: &'a oxigraph::store::Store,
    wq: &'a WorkloadQuery,
    options: &BenchOptions,
) -> Runs<'a> {
    let sparql = wq.sparql();
    let (limit, timeout) = (options.limit, options.timeout);
    Runs::start(
        options,
        move || {
            let o = run_query(ox, &sparql, limit, timeout)?;
            let status = outcome_status(&o);
            Ok((o, status))
        },
        move |answer, timing| {
            let answer = answer.map(|o| match wq.kind {
                QueryKind::Path(_) => Answer::Set(o.distinct()),
                QueryKind::Sparql(_) => Answer::Bag(o.bag()),
            });
            finish_run(BenchEngine::Oxigraph, "oxigraph".into(), answer, timing)
        },
    )
}

/// Runs the workload. `gpu_db` serves [`BenchEngine::Gpu`] and `cpu_db` [`BenchEngine::Cpu`]
/// (the same store opened with two engine choices).
pub fn run_bench(
    cpu_db: &Database,
    gpu_db: Option<&Database>,
    workload: &[WorkloadQuery],
    options: &BenchOptions,
) -> Result<BenchReport, BenchError> {
    if options.engines.contains(&BenchEngine::Gpu) && gpu_db.is_none() {
        return Err(BenchError::Unavailable(
            "engine gpu asked for but no GPU database given".into(),
        ));
    }
    let with_ox = options.engines.contains(&BenchEngine::Oxigraph);
    let bar = if options.progress {
        let b = ProgressBar::new((workload.len() * options.engines.len()) as u64);
        b.set_style(
            ProgressStyle::with_template(
                "{spinner} [{elapsed_precise}] {bar:40} {pos}/{len} {msg}",
            )
            .unwrap_or_else(|_| ProgressStyle::default_bar()),
        );
        b
    } else {
        ProgressBar::hidden()
    };
    let load = || -> Result<_, BenchError> {
        let t = Instant::now();
        let copy =
            copy_store(cpu_db.store(), None).map_err(|e| BenchError::Oxigraph(e.to_string()))?;
        let load = (t.elapsed().as_secs_f64(), copy.decode_s);
        Ok((copy.store, copy.triples, load))
    };
    // runs[q][k]: query q on engine k (option order).
    let mut runs: Vec<Vec<Option<EngineRun>>> =
        vec![vec![None; options.engines.len()]; workload.len()];
    let run_engines = |runs: &mut Vec<Vec<Option<EngineRun>>>,
                       ox: Option<&oxigraph::store::Store>,
                       which: &dyn Fn(BenchEngine) -> bool| {
        for (q, wq) in workload.iter().enumerate() {
            // Each engine's cold run and warm-ups in turn, then the timed repeats, one of
            // each engine per round, in an order that rotates every round.
            let mut started: Vec<(usize, Runs<'_>)> = Vec::new();
            for (k, &e) in options.engines.iter().enumerate() {
                if !which(e) {
                    continue;
                }
                bar.set_message(format!("{} on {}", wq.id, e.name()));
                started.push((
                    k,
                    match e {
                        BenchEngine::Cpu => run_k2rpq(cpu_db, e, wq, options),
                        BenchEngine::Gpu => run_k2rpq(gpu_db.unwrap_or(cpu_db), e, wq, options),
                        BenchEngine::Oxigraph => {
                            run_oxigraph(ox.expect("loaded before its queries"), wq, options)
                        }
                    },
                ));
            }
            let n = started.len();
            for round in 0..options.repeats.max(1) {
                for i in 0..n {
                    started[(round + i) % n].1.repeat();
                }
            }
            for (k, timed) in started {
                let e = options.engines[k];
                let run = timed.finish();
                if !options.progress {
                    // Without a bar, a line per finished run: a run cut off by an outer
                    // time limit still leaves every figure measured so far.
                    eprintln!(
                        "done {} {} {:?}: median {:.3} ms, cold {:.3} ms, {} rows (on {})",
                        wq.id,
                        e.name(),
                        run.status,
                        run.median_ms,
                        run.cold_ms,
                        run.distinct,
                        run.ran_on
                    );
                }
                runs[q][k] = Some(run);
                bar.inc(1);
            }
        }
    };
    let (triples, ox_load) = if with_ox && options.overlap_load {
        let (ox, n, l) = std::thread::scope(|scope| {
            let loading = scope.spawn(load);
            run_engines(&mut runs, None, &|e| e != BenchEngine::Oxigraph);
            loading
                .join()
                .unwrap_or_else(|p| std::panic::resume_unwind(p))
        })?;
        run_engines(&mut runs, Some(&ox), &|e| e == BenchEngine::Oxigraph);
        (n, Some(l))
    } else if with_ox {
        let (ox, n, l) = load()?;
        run_engines(&mut runs, Some(&ox), &|_| true);
        (n, Some(l))
    } else {
        run_engines(&mut runs, None, &|_| true);
        let n = cpu_db.store().graphs().iter().map(|g| g.edges).sum();
        (n, None)
    };
    let mut queries = Vec::with_capacity(workload.len());
    for (wq, runs) in workload.iter().zip(runs) {
        let runs: Vec<EngineRun> = runs
            .into_iter()
            .map(|r| r.expect("every engine ran"))
            .collect();
        let finished: Vec<&EngineRun> = runs.iter().filter(|r| r.status == RunStatus::Ok).collect();
        let agree =
            (finished.len() >= 2).then(|| finished.windows(2).all(|w| w[0].answer == w[1].answer));
        let deviation = match agree {
            Some(false) => explained_deviation(cpu_db, wq, &runs),
            _ => None,
        };
        queries.push(QueryReport {
            id: wq.id.clone(),
            shape: wq.shape.clone(),
            sparql: wq.sparql(),
            runs,
            agree,
            deviation,
        });
    }
    bar.finish_and_clear();
    Ok(summarise(options.clone(), triples, ox_load, queries))
}

fn summarise(
    options: BenchOptions,
    triples: u64,
    oxigraph_load: Option<(f64, f64)>,
    queries: Vec<QueryReport>,
) -> BenchReport {
    let ox_index = options
        .engines
        .iter()
        .position(|&e| e == BenchEngine::Oxigraph);
    let mut engines = Vec::new();
    for (k, &e) in options.engines.iter().enumerate() {
        let runs: Vec<&EngineRun> = queries.iter().map(|q| &q.runs[k]).collect();
        let count = |s: RunStatus| runs.iter().filter(|r| r.status == s).count();
        let times: Vec<f64> = runs
            .iter()
            .filter(|r| r.status == RunStatus::Ok)
            .map(|r| r.median_ms)
            .collect();
        let (mut ratios, mut worst) = (Vec::new(), None::<f64>);
        if let Some(ox) = ox_index.filter(|&o| o != k) {
            for q in &queries {
                let (a, b) = (&q.runs[k], &q.runs[ox]);
                if a.status == RunStatus::Ok && b.status == RunStatus::Ok && a.median_ms > 0.0 {
                    ratios.push(b.median_ms / a.median_ms);
                    worst = Some(worst.map_or(a.median_ms / b.median_ms, |w: f64| {
                        w.max(a.median_ms / b.median_ms)
                    }));
                }
            }
        }
        let time_ms = Summary::of(&times);
        let ox_median = ox_index.map(|o| {
            Summary::of(
                &queries
                    .iter()
                    .filter(|q| q.runs[o].status == RunStatus::Ok)
                    .map(|q| q.runs[o].median_ms)
                    .collect::<Vec<_>>(),
            )
            .median
        });
        engines.push(EngineSummary {
            engine: e,
            completed: count(RunStatus::Ok),
            timeouts: count(RunStatus::Timeout),
            limits: count(RunStatus::Limit),
            errors: count(RunStatus::Error),
            time_ms,
            speedup_geomean: (!ratios.is_empty()).then(|| geomean(&ratios)),
            speedup_of_medians: ox_median
                .filter(|_| ox_index != Some(k) && time_ms.median > 0.0)
                .map(|m| m / time_ms.median),
            worst_ratio: worst,
        });
    }
    let mut shapes: BTreeMap<String, BTreeMap<String, f64>> = BTreeMap::new();
    for (k, &e) in options.engines.iter().enumerate() {
        let mut by_shape: BTreeMap<&str, Vec<f64>> = BTreeMap::new();
        for q in &queries {
            if q.runs[k].status == RunStatus::Ok {
                by_shape
                    .entry(&q.shape)
                    .or_default()
                    .push(q.runs[k].median_ms);
            }
        }
        for (s, v) in by_shape {
            shapes
                .entry(s.to_string())
                .or_default()
                .insert(e.name().to_string(), Summary::of(&v).median);
        }
    }
    let mut classes: BTreeMap<String, BTreeMap<String, ClassSummary>> = BTreeMap::new();
    for (k, &e) in options.engines.iter().enumerate() {
        let mut by_class: BTreeMap<&str, (ClassSummary, Vec<f64>)> = BTreeMap::new();
        for q in &queries {
            let (c, times) = by_class
                .entry(crate::workload::query_class(&q.id, &q.shape))
                .or_default();
            let r = &q.runs[k];
            c.queries += 1;
            match r.status {
                RunStatus::Ok => c.completed += 1,
                RunStatus::Limit => c.limits += 1,
                RunStatus::Timeout => c.timeouts += 1,
                RunStatus::Error => c.errors += 1,
            }
            if matches!(r.status, RunStatus::Ok | RunStatus::Limit) {
                times.push(r.median_ms);
            }
        }
        for (class, (mut c, times)) in by_class {
            c.time_ms = Summary::of(&times);
            classes
                .entry(class.to_string())
                .or_default()
                .insert(e.name().to_string(), c);
        }
    }
    let disagreements = queries
        .iter()
        .filter(|q| q.agree == Some(false) && q.deviation.is_none())
        .map(|q| q.id.clone())
        .collect();
    BenchReport {
        options,
        triples,
        oxigraph_load_s: oxigraph_load.map(|l| l.0),
        oxigraph_decode_s: oxigraph_load.map(|l| l.1),
        queries,
        engines,
        shapes,
        classes,
        disagreements,
    }
}

impl BenchReport {
    /// The per-query table, then the per-engine summary (the main job's last lines).
    pub fn table(&self) -> String {
        let mut s = String::new();
        let names: Vec<&str> = self.options.engines.iter().map(|e| e.name()).collect();
        let _ = write!(s, "{:<6} {:<14}", "query", "shape");
        for n in &names {
            let _ = write!(s, " {:>20}", format!("{n} ms (rows)"));
        }
        let _ = writeln!(s, "  agree");
        for q in &self.queries {
            let _ = write!(s, "{:<6} {:<14}", q.id, truncate(&q.shape, 14));
            for r in &q.runs {
                let cell = match r.status {
                    RunStatus::Ok => format!("{:.3} ({})", r.median_ms, r.distinct),
                    RunStatus::Limit => format!("{:.3} (limit)", r.median_ms),
                    RunStatus::Timeout => "timeout".to_string(),
                    RunStatus::Error => "error".to_string(),
                };
                let _ = write!(s, " {cell:>20}");
            }
            let _ = writeln!(
                s,
                "  {}",
                match (q.agree, &q.deviation) {
                    (Some(true), _) => "yes".to_string(),
                    (Some(false), Some(d)) => format!("deviation: {d}"),
                    (Some(false), None) => "NO".to_string(),
                    (None, _) => "-".to_string(),
                }
            );
        }
        let _ = writeln!(
            s,
            "\nSummary ({} queries, {} triples):",
            self.queries.len(),
            self.triples
        );
        if let (Some(load), Some(decode)) = (self.oxigraph_load_s, self.oxigraph_decode_s) {
            // Load time is reported apart from query times: it is not part of any query.
            let _ = writeln!(
                s,
                "Oxigraph in-memory load: {load:.2} s ({decode:.2} s decoding terms, {:.2} s inserting: {:.2} M triples/s)",
                load - decode,
                self.triples as f64 / (load - decode).max(1e-9) / 1e6
            );
        }
        let _ = writeln!(
            s,
            "{:<10} {:>5} {:>5} {:>5} {:>11} {:>11} {:>11} {:>13} {:>13} {:>11}",
            "engine",
            "done",
            "t/o",
            "err",
            "median ms",
            "mean ms",
            "p95 ms",
            "speedup(geo)",
            "speedup(med)",
            "worst/oxi"
        );
        for e in &self.engines {
            let f = |v: Option<f64>| v.map_or("-".to_string(), |v| format!("{v:.2}x"));
            let _ = writeln!(
                s,
                "{:<10} {:>5} {:>5} {:>5} {:>11.3} {:>11.3} {:>11.3} {:>13} {:>13} {:>11}",
                e.engine.name(),
                e.completed,
                e.timeouts,
                e.errors,
                e.time_ms.median,
                e.time_ms.mean,
                e.time_ms.p95,
                f(e.speedup_geomean),
                f(e.speedup_of_medians),
                f(e.worst_ratio)
            );
        }
        s.push_str(&self.shape_table());
        s.push_str(&self.class_table());
        if self.disagreements.is_empty() {
            let _ = writeln!(s, "All engines agree on every query they completed.");
        } else {
            let _ = writeln!(s, "DISAGREEMENT on: {}", self.disagreements.join(", "));
        }
        s
    }

    /// Per query class (shape): queries, each engine's median of its per-query medians
    /// (completed runs), and for each k2rpq engine that median over Oxigraph's median of
    /// all its completed queries (the issue's "no query class slower than Oxigraph's
    /// median": ≤ 1 is met).
    pub fn shape_table(&self) -> String {
        let mut s = String::new();
        let ox_k = self
            .options
            .engines
            .iter()
            .position(|&e| e == BenchEngine::Oxigraph);
        let ox_median = ox_k.and_then(|k| {
            self.engines
                .get(k)
                .filter(|e| e.completed > 0)
                .map(|e| e.time_ms.median)
        });
        let _ = write!(
            s,
            "\nPer query class (median ms of per-query medians):\n{:<18} {:>3}",
            "shape", "n"
        );
        for e in &self.options.engines {
            let _ = write!(s, " {:>12}", e.name());
        }
        if ox_median.is_some() {
            for e in self
                .options
                .engines
                .iter()
                .filter(|&&e| e != BenchEngine::Oxigraph)
            {
                let _ = write!(s, " {:>14}", format!("{}/oxi-med", &e.name()[6..]));
            }
        }
        let _ = writeln!(s);
        for (shape, medians) in &self.shapes {
            let n = self.queries.iter().filter(|q| &q.shape == shape).count();
            let _ = write!(s, "{:<18} {:>3}", truncate(shape, 18), n);
            for e in &self.options.engines {
                let cell = medians
                    .get(e.name())
                    .map_or("-".to_string(), |m| format!("{m:.3}"));
                let _ = write!(s, " {cell:>12}");
            }
            if let Some(om) = ox_median {
                for e in self
                    .options
                    .engines
                    .iter()
                    .filter(|&&e| e != BenchEngine::Oxigraph)
                {
                    let cell = medians
                        .get(e.name())
                        .filter(|_| om > 0.0)
                        .map_or("-".to_string(), |m| format!("{:.3}x", m / om));
                    let _ = write!(s, " {cell:>14}");
                }
            }
            let _ = writeln!(s);
        }
        s
    }

    /// Per query class and engine: queries, completed, row-limit cuts, timeouts, errors,
    /// and the median, mean and p95 of the per-query medians (completed and limit-cut
    /// runs), milliseconds.
    pub fn class_table(&self) -> String {
        let mut s = String::new();
        let _ = writeln!(
            s,
            "\nPer class (ms of per-query medians, completed and limit-cut runs):\n{:<12} {:<10} {:>4} {:>5} {:>6} {:>4} {:>4} {:>11} {:>11} {:>11}",
            "class", "engine", "n", "done", "limit", "t/o", "err", "median", "mean", "p95"
        );
        for (class, engines) in &self.classes {
            for e in &self.options.engines {
                let Some(c) = engines.get(e.name()) else {
                    continue;
                };
                let _ = writeln!(
                    s,
                    "{:<12} {:<10} {:>4} {:>5} {:>6} {:>4} {:>4} {:>11.3} {:>11.3} {:>11.3}",
                    truncate(class, 12),
                    e.name(),
                    c.queries,
                    c.completed,
                    c.limits,
                    c.timeouts,
                    c.errors,
                    c.time_ms.median,
                    c.time_ms.mean,
                    c.time_ms.p95
                );
            }
        }
        s
    }

    /// One CSV row per (query, engine).
    pub fn csv(&self) -> String {
        let mut s = String::from(
            "query,shape,engine,ran_on,status,rows,distinct,cold_ms,median_ms,agree\n",
        );
        for q in &self.queries {
            for r in &q.runs {
                let _ = writeln!(
                    s,
                    "{},{},{},{},{:?},{},{},{:.4},{:.4},{}",
                    q.id,
                    q.shape,
                    r.engine.name(),
                    r.ran_on,
                    r.status,
                    r.rows,
                    r.distinct,
                    r.cold_ms,
                    r.median_ms,
                    q.agree.map_or("", |a| if a { "yes" } else { "no" })
                );
            }
        }
        s
    }

    /// Per-query time, each k2rpq engine against Oxigraph, log–log.
    pub fn svg(&self) -> String {
        let ox = self
            .options
            .engines
            .iter()
            .position(|&e| e == BenchEngine::Oxigraph);
        let colors = ["#d62728", "#1f77b4"];
        let series = self
            .options
            .engines
            .iter()
            .enumerate()
            .filter(|(k, _)| Some(*k) != ox)
            .zip(colors)
            .map(|((k, e), color)| Series {
                label: e.name().into(),
                color: color.into(),
                points: self
                    .queries
                    .iter()
                    .filter_map(|q| {
                        let o = &q.runs[ox?];
                        let r = &q.runs[k];
                        (o.status == RunStatus::Ok && r.status == RunStatus::Ok)
                            .then(|| (o.median_ms, r.median_ms, format!("{} {}", q.id, q.shape)))
                    })
                    .collect(),
            })
            .collect();
        LogLogPlot {
            title: "Per-query time: k2rpq vs Oxigraph (below the diagonal: k2rpq faster)".into(),
            x_label: "Oxigraph median (ms)".into(),
            y_label: "k2rpq median (ms)".into(),
            diagonal: true,
            series,
        }
        .render()
    }
}

/// Which of Oxigraph's known deviations from the spec (docs/SEMANTICS.md) explains that
/// Oxigraph's answer to `wq` differs from k2rpq's, if one does: alternatives outside
/// closures (the same distinct rows, fewer duplicates on Oxigraph), or a constant the
/// data lack at the end of a zero-length path (rows k2rpq has and Oxigraph lacks).
fn explained_deviation(db: &Database, wq: &WorkloadQuery, runs: &[EngineRun]) -> Option<String> {
    let ox = runs
        .iter()
        .find(|r| r.engine == BenchEngine::Oxigraph && r.status == RunStatus::Ok)?;
    let ours: Vec<&EngineRun> = runs
        .iter()
        .filter(|r| r.engine != BenchEngine::Oxigraph && r.status == RunStatus::Ok)
        .collect();
    if ours.windows(2).any(|w| w[0].answer != w[1].answer) {
        return None;
    }
    let ours = ours.first()?;
    let query = spargebra::SparqlParser::new()
        .parse_query(&wq.sparql())
        .ok()?;
    let features = deviation_features(&query, |iri| db.iri_id(iri).is_some());
    let (mine, theirs) = (ours.answer.keys(), ox.answer.keys());
    // An aggregate over an alternative counts the duplicates Oxigraph drops: its rows
    // differ, not only their multiplicities.
    if features.alternative && (mine == theirs || features.aggregate) {
        return Some("alternatives deduplicated".into());
    }
    if features.absent_constant && theirs.is_subset(&mine) {
        return Some("absent constant dropped".into());
    }
    None
}

/// Whether a query holds what Oxigraph deviates on.
#[derive(Default)]
struct DeviationFeatures {
    /// An alternative, or a negated set with forward and inverse members, outside every
    /// closure.
    alternative: bool,
    /// A path that may be empty with a constant end the data do not hold.
    absent_constant: bool,
    /// An aggregate (GROUP BY, COUNT, ...).
    aggregate: bool,
}

fn deviation_features(query: &spargebra::Query, known: impl Fn(&str) -> bool) -> DeviationFeatures {
    use k2rpq::sparql::rewrite::sub_patterns;
    use spargebra::algebra::{GraphPattern, PropertyPathExpression as P};
    use spargebra::term::TermPattern;
    fn bag_alternative(p: &P) -> bool {
        match p {
            P::Alternative(..) => true,
            P::NegatedPropertySet(_) => false,
            P::Reverse(a) => bag_alternative(a),
            P::Sequence(a, b) => bag_alternative(a) || bag_alternative(b),
            P::NamedNode(_) | P::ZeroOrMore(_) | P::OneOrMore(_) | P::ZeroOrOne(_) => false,
        }
    }
    fn may_be_empty(p: &P) -> bool {
        match p {
            P::ZeroOrMore(_) | P::ZeroOrOne(_) => true,
            P::OneOrMore(a) | P::Reverse(a) => may_be_empty(a),
            P::Sequence(a, b) => may_be_empty(a) && may_be_empty(b),
            P::Alternative(a, b) => may_be_empty(a) || may_be_empty(b),
            P::NamedNode(_) | P::NegatedPropertySet(_) => false,
        }
    }
    fn walk(p: &GraphPattern, known: &dyn Fn(&str) -> bool, f: &mut DeviationFeatures) {
        match p {
            GraphPattern::Path {
                subject,
                path,
                object,
            } => {
                f.alternative |= bag_alternative(path);
                let absent = |t: &TermPattern| match t {
                    TermPattern::NamedNode(n) => !known(n.as_str()),
                    TermPattern::Literal(_) => true,
                    _ => false,
                };
                f.absent_constant |= may_be_empty(path) && (absent(subject) || absent(object));
            }
            GraphPattern::Group { .. } => f.aggregate = true,
            _ => {}
        }
        for inner in sub_patterns(p) {
            walk(inner, known, f);
        }
    }
    let pattern = match query {
        spargebra::Query::Select { pattern, .. }
        | spargebra::Query::Ask { pattern, .. }
        | spargebra::Query::Construct { pattern, .. }
        | spargebra::Query::Describe { pattern, .. } => pattern,
    };
    let mut f = DeviationFeatures::default();
    walk(pattern, &known, &mut f);
    f
}

fn truncate(s: &str, n: usize) -> String {
    if s.chars().count() <= n {
        s.to_string()
    } else {
        s.chars().take(n - 1).chain(std::iter::once('…')).collect()
    }
}
