//! `k2rpq bench --scaling`: a path-query workload on 1, 2, .., N GPUs.
//!
//! For each GPU count `k` the store is opened on the first `k` selected GPUs and the
//! workload runs `warmup` times untimed (loads the relations on the GPUs that get them),
//! then `repeats` times, timed as a whole, with `k` worker threads pulling queries from one
//! shared queue (throughput: queries/s). One-batch queries go to one GPU each (the
//! database's placement); var→var queries are split across all `k` GPUs. The var→var
//! queries are also timed one at a time (the split alone). Every query's count must be the
//! same for every `k` (timed-out runs excepted).

use std::fmt::Write as _;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::Instant;

use super::rpq::BenchError;
use super::workload::{QueryKind, WorkloadQuery};
use k2rpq::database::{Database, DatabaseError};
use k2rpq::rpq::{EvalOptions, LogEndpoint, LogQuery};

/// Options of a scaling run.
#[derive(Clone, Debug, serde::Serialize)]
pub struct ScalingOptions {
    /// Untimed passes over the workload per GPU count before the timed ones (they load
    /// the relations on the GPUs; 0 for workloads of a few long queries, where loading
    /// is noise).
    pub warmup: usize,
    /// Timed passes over the workload per GPU count.
    pub repeats: usize,
    /// Per query: limit, timeout, batch width, counting only.
    #[serde(skip)]
    pub eval: EvalOptions,
}

/// One GPU count.
#[derive(Clone, Debug, serde::Serialize)]
pub struct ScalingRow {
    /// GPUs used.
    pub gpus: usize,
    /// Their ordinals.
    pub ordinals: Vec<usize>,
    /// Seconds of the timed passes (all repeats).
    pub seconds: f64,
    /// Queries per second over the timed passes.
    pub queries_per_s: f64,
    /// Throughput over the one-GPU throughput.
    pub speedup: f64,
    /// Seconds of the var→var queries run one at a time (one pass), split across the
    /// GPUs; `None` when the workload has none.
    pub split_seconds: Option<f64>,
    /// One-GPU split seconds over these.
    pub split_speedup: Option<f64>,
}

/// The report of a scaling run.
#[derive(Clone, Debug, serde::Serialize)]
pub struct ScalingReport {
    /// Options used.
    pub options: ScalingOptions,
    /// Queries of the workload (path queries only).
    pub queries: usize,
    /// Ids of its var→var queries.
    pub var_var: Vec<String>,
    /// Per GPU count, ascending.
    pub rows: Vec<ScalingRow>,
    /// Queries whose count differed between GPU counts (must be empty).
    pub disagreements: Vec<String>,
}

impl ScalingReport {
    /// The table printed by `k2rpq bench --scaling`.
    pub fn table(&self) -> String {
        let mut s = String::new();
        let _ = writeln!(
            s,
            "GPUs\tseconds\tqueries/s\tspeedup\tvar→var s ({} queries)\tspeedup",
            self.var_var.len()
        );
        for r in &self.rows {
            let opt = |v: Option<f64>, suffix: &str| {
                v.map(|v| format!("{v:.3}{suffix}"))
                    .unwrap_or_else(|| "-".into())
            };
            let _ = writeln!(
                s,
                "{}\t{:.3}\t{:.2}\t{:.2}x\t{}\t{}",
                r.gpus,
                r.seconds,
                r.queries_per_s,
                r.speedup,
                opt(r.split_seconds, ""),
                opt(r.split_speedup, "x")
            );
        }
        s
    }
}

/// What one query returned, for the cross-check between GPU counts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Outcome {
    count: u64,
    truncated: bool,
    timed_out: bool,
}

fn run_one(db: &Database, q: &LogQuery, eval: &EvalOptions) -> Result<Outcome, DatabaseError> {
    let a = db.run_log_query(q, eval)?;
    Ok(Outcome {
        count: a.result.count,
        truncated: a.result.truncated,
        timed_out: a.result.timed_out,
    })
}

/// Runs the workload `passes` times with `workers` threads pulling from one queue;
/// returns the seconds and each query's outcome (of its first run).
fn throughput(
    db: &Database,
    queries: &[(&str, &LogQuery)],
    eval: &EvalOptions,
    workers: usize,
    passes: usize,
) -> Result<(f64, Vec<Option<Outcome>>), BenchError> {
    let total = queries.len() * passes;
    let next = AtomicUsize::new(0);
    let outcomes: Mutex<Vec<Option<Outcome>>> = Mutex::new(vec![None; queries.len()]);
    let error: Mutex<Option<DatabaseError>> = Mutex::new(None);
    let t0 = Instant::now();
    std::thread::scope(|scope| {
        for _ in 0..workers.max(1) {
            scope.spawn(|| loop {
                let i = next.fetch_add(1, Ordering::SeqCst);
                if i >= total || error.lock().unwrap_or_else(|p| p.into_inner()).is_some() {
                    break;
                }
                let k = i % queries.len();
                match run_one(db, queries[k].1, eval) {
                    Ok(o) => {
                        let mut out = outcomes.lock().unwrap_or_else(|p| p.into_inner());
                        out[k].get_or_insert(o);
                    }
                    Err(e) => {
                        error
                            .lock()
                            .unwrap_or_else(|p| p.into_inner())
                            .get_or_insert(e);
                        break;
                    }
                }
            });
        }
    });
    let seconds = t0.elapsed().as_secs_f64();
    if let Some(e) = error.into_inner().unwrap_or_else(|p| p.into_inner()) {
        return Err(e.into());
    }
    Ok((
        seconds,
        outcomes.into_inner().unwrap_or_else(|p| p.into_inner()),
    ))
}

/// Runs the scaling benchmark on the GPUs `ordinals` (1 up to all of them); `open` opens
/// the store on a list of GPU ordinals.
pub fn run_scaling(
    open: &dyn Fn(&[usize]) -> Result<Database, DatabaseError>,
    ordinals: &[usize],
    workload: &[WorkloadQuery],
    options: &ScalingOptions,
    progress: bool,
) -> Result<ScalingReport, BenchError> {
    if ordinals.is_empty() {
        return Err(BenchError::Unavailable(
            "bench --scaling needs at least one GPU".into(),
        ));
    }
    let queries: Vec<(&str, &LogQuery)> = workload
        .iter()
        .filter_map(|w| match &w.kind {
            QueryKind::Path(q) => Some((w.id.as_str(), q)),
            QueryKind::Sparql(_) => None,
        })
        .collect();
    if queries.is_empty() {
        return Err(BenchError::Unavailable(
            "bench --scaling runs path queries (`S REGEX O` lines); the workload has none".into(),
        ));
    }
    let var_var: Vec<(&str, &LogQuery)> = queries
        .iter()
        .copied()
        .filter(|(_, q)| {
            matches!(
                (&q.subject, &q.object),
                (LogEndpoint::Var(a), LogEndpoint::Var(b)) if a != b
            )
        })
        .collect();
    let mut rows: Vec<ScalingRow> = Vec::new();
    let mut reference: Option<Vec<Option<Outcome>>> = None;
    let mut disagreements = Vec::new();
    for k in 1..=ordinals.len() {
        let db = open(&ordinals[..k])?;
        if progress {
            eprintln!("scaling: {k} GPU(s) {:?}: warm-up pass", &ordinals[..k]);
        }
        if options.warmup > 0 {
            throughput(&db, &queries, &options.eval, k, options.warmup)?;
        }
        let (seconds, outcomes) =
            throughput(&db, &queries, &options.eval, k, options.repeats.max(1))?;
        let split_seconds = if var_var.is_empty() {
            None
        } else {
            let t0 = Instant::now();
            for (_, q) in &var_var {
                run_one(&db, q, &options.eval)?;
            }
            Some(t0.elapsed().as_secs_f64())
        };
        match &reference {
            None => reference = Some(outcomes),
            Some(r) => {
                for (i, (a, b)) in r.iter().zip(&outcomes).enumerate() {
                    let (Some(a), Some(b)) = (a, b) else { continue };
                    if !a.timed_out
                        && !b.timed_out
                        && (a.count, a.truncated) != (b.count, b.truncated)
                    {
                        disagreements.push(format!(
                            "{} on {k} GPUs: {} rows{} (1 GPU: {}{})",
                            queries[i].0,
                            b.count,
                            if b.truncated { ", limit" } else { "" },
                            a.count,
                            if a.truncated { ", limit" } else { "" }
                        ));
                    }
                }
            }
        }
        let qps = (queries.len() * options.repeats.max(1)) as f64 / seconds.max(1e-9);
        let (base_qps, base_split) = rows
            .first()
            .map(|r| (r.queries_per_s, r.split_seconds))
            .unwrap_or((qps, split_seconds));
        let row = ScalingRow {
            gpus: k,
            ordinals: ordinals[..k].to_vec(),
            seconds,
            queries_per_s: qps,
            speedup: qps / base_qps,
            split_seconds,
            split_speedup: match (base_split, split_seconds) {
                (Some(b), Some(s)) => Some(b / s.max(1e-9)),
                _ => None,
            },
        };
        if progress {
            eprintln!(
                "scaling: {k} GPU(s): {:.3} s, {:.2} queries/s ({:.2}x)",
                row.seconds, row.queries_per_s, row.speedup
            );
        }
        rows.push(row);
    }
    Ok(ScalingReport {
        options: options.clone(),
        queries: queries.len(),
        var_var: var_var.iter().map(|(id, _)| id.to_string()).collect(),
        rows,
        disagreements,
    })
}
