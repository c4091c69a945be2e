//! One plan on several engines at once: the batches of start nodes of a var→var plan are
//! shared out among the engines (one host thread each, e.g. one per GPU), each running the
//! plan's fixed point on the batches it takes with relations loaded into its own memory;
//! the per-batch answers are merged on the host in batch order, so the result is the one
//! a single engine gives (see [`evaluate_split`]).

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use super::exec::{evaluate_with, walk_before_device, RelationSource, Run, Trace};
use super::graph::PathGraph;
use super::plan::{EvalDirection, Plan, StartNodes};
use super::sparse::MAX_JOINT_STARTS;
use super::{EvalOptions, PathResult, RpqError, TraversalPolicy};
use crate::engine::Engine;

/// One engine of a split evaluation and where it gets its relations (for a GPU: that
/// device's cache).
pub struct Share<'a, E: Engine> {
    /// The engine.
    pub engine: &'a E,
    /// Its relations, loaded into the engine's memory.
    pub relations: &'a mut (dyn RelationSource<E> + Send),
}

/// What one batch produced, kept until the merge.
struct BatchOut {
    index: u64,
    pairs: Vec<(u32, u32)>,
    count: u64,
    truncated: bool,
    timed_out: bool,
    trace: Trace,
}

/// What one engine's thread produced.
struct WorkerOut {
    batches: Vec<BatchOut>,
    loads: u32,
    load_time: Duration,
}

/// Whether [`evaluate_split`] would hand `plan` to one engine: a plan with one batch (a
/// constant start, or few candidates), or one that a host engine answers by its sparse
/// walk, gains nothing from several engines.
pub fn runs_on_one<E: Engine>(engine: &E, plan: &Plan, options: &EvalOptions) -> bool {
    match &plan.start {
        StartNodes::Const(_) => true,
        StartNodes::Candidates(c) => {
            plan.batches() <= 1
                || (options.traversal == TraversalPolicy::Auto
                    && engine.host_resident()
                    && c.len() <= MAX_JOINT_STARTS)
        }
    }
}

/// Runs `plan` on the engines of `shares`: the result equals [`evaluate_with`] on one
/// engine (same pairs in the same order, same count, same `truncated`).
///
/// Plans that [`runs_on_one`] says gain nothing run on the first share alone. Otherwise
/// every share loads the plan's relations (so each engine must be able to hold them: a
/// relation used by a split query is replicated on every engine) and its thread pulls
/// batch indices from a shared counter — a dynamic split, so a slow engine takes fewer
/// batches. Batch `k` holds the same start nodes as in a single-engine run (the `k`-th
/// run of `64·W` candidates), and the merge concatenates the batches in index order.
///
/// Limit: a thread stops taking batches once the finished batches hold more than the
/// limit (or one batch alone hit it); batches are handed out in index order, so the
/// finished ones then form a prefix of the batches, whose pairs are cut at the limit as a
/// single engine cuts them. Timeout: one deadline for all; a batch that meets it stops
/// every thread, and the pairs found so far are returned with `timed_out`. An engine
/// error stops every thread and is returned (the first by batch order).
pub fn evaluate_split<E: Engine>(
    graph: &dyn PathGraph,
    plan: &Plan,
    options: &EvalOptions,
    shares: &mut [Share<'_, E>],
) -> Result<PathResult, RpqError> {
    let started = Instant::now();
    if options.batch_words == 0 {
        return Err(RpqError::Options("batch_words must be at least 1".into()));
    }
    let Some(first) = shares.first_mut() else {
        return Err(RpqError::Options(
            "a split evaluation needs an engine".into(),
        ));
    };
    // A few candidates in front of device engines are walked on the host first, as one
    // device engine walks them; a walk that gave up is not walked again.
    let walked;
    let options = if !first.engine.host_resident() && options.host_walk {
        if let Some(result) = walk_before_device(graph, plan, options, started) {
            return Ok(result);
        }
        walked = EvalOptions {
            host_walk: false,
            ..options.clone()
        };
        &walked
    } else {
        options
    };
    let cands = match &plan.start {
        StartNodes::Candidates(c) if !runs_on_one(first.engine, plan, options) => c,
        _ => return evaluate_with(first.engine, graph, plan, options, &mut *first.relations),
    };
    if shares.len() == 1 {
        let first = &mut shares[0];
        return evaluate_with(first.engine, graph, plan, options, &mut *first.relations);
    }
    let per = 64 * plan.batch_words as u64;
    let batches = plan.batches();
    let limit = options.limit.unwrap_or(u64::MAX);
    let next = AtomicU64::new(0);
    let found = AtomicU64::new(0);
    let stop = AtomicBool::new(false);
    let first_error: Mutex<Option<(u64, RpqError)>> = Mutex::new(None);
    let fail = |index: u64, e: RpqError| {
        stop.store(true, Ordering::SeqCst);
        let mut slot = first_error.lock().unwrap_or_else(|p| p.into_inner());
        if slot.as_ref().is_none_or(|(k, _)| index < *k) {
            *slot = Some((index, e));
        }
    };
    let outs: Vec<WorkerOut> = std::thread::scope(|scope| {
        let handles: Vec<_> = shares
            .iter_mut()
            .map(|share| {
                let (next, found, stop, fail) = (&next, &found, &stop, &fail);
                scope.spawn(move || {
                    let mut out = WorkerOut {
                        batches: Vec::new(),
                        loads: 0,
                        load_time: Duration::ZERO,
                    };
                    let mut run = match Run::prepare(
                        share.engine,
                        graph,
                        plan,
                        options,
                        &mut *share.relations,
                        started,
                    ) {
                        Ok(r) => r,
                        Err(e) => {
                            fail(0, e);
                            return out;
                        }
                    };
                    out.loads = run.result.trace.loads;
                    out.load_time = run.result.trace.load_time;
                    let mut sources = Vec::with_capacity(per as usize);
                    while !stop.load(Ordering::SeqCst) {
                        let k = next.fetch_add(1, Ordering::SeqCst);
                        if k >= batches {
                            break;
                        }
                        sources.clear();
                        // `select` finds the batch's first candidate without walking the
                        // earlier ones: batches are handed out in any interleaving.
                        let Some(lo) = cands.select((k * per) as u32) else {
                            break;
                        };
                        sources.extend(cands.range(lo..).take(per as usize));
                        run.result = PathResult::default();
                        if let Err(e) = run.batch(k, &sources, plan.batch_words) {
                            fail(k, e);
                            break;
                        }
                        let r = std::mem::take(&mut run.result);
                        let total = found.fetch_add(r.count, Ordering::SeqCst) + r.count;
                        if r.truncated || r.timed_out || total > limit {
                            stop.store(true, Ordering::SeqCst);
                        }
                        out.batches.push(BatchOut {
                            index: k,
                            pairs: r.pairs,
                            count: r.count,
                            truncated: r.truncated,
                            timed_out: r.timed_out,
                            trace: r.trace,
                        });
                    }
                    out
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().expect("split worker panicked"))
            .collect()
    });
    if let Some((_, e)) = first_error.into_inner().unwrap_or_else(|p| p.into_inner()) {
        return Err(e);
    }
    let mut result = merge(outs, options, plan.direction);
    result.trace.engine = format!("{} x{}", shares[0].engine.name(), shares.len());
    result.trace.elapsed = started.elapsed();
    Ok(result)
}

/// Merges the per-batch answers in batch order, cutting at the limit as one engine would.
fn merge(outs: Vec<WorkerOut>, options: &EvalOptions, direction: EvalDirection) -> PathResult {
    let limit = options.limit.unwrap_or(u64::MAX);
    let mut result = PathResult {
        trace: Trace::default(),
        ..PathResult::default()
    };
    let mut all: Vec<BatchOut> = Vec::new();
    for o in outs {
        result.trace.loads += o.loads;
        result.trace.load_time += o.load_time;
        all.extend(o.batches);
    }
    all.sort_unstable_by_key(|b| b.index);
    for b in all {
        result.trace.append(b.trace);
        if result.truncated || result.timed_out {
            continue;
        }
        let room = limit - result.count;
        if b.count > room {
            result.truncated = true;
        }
        let take = b.count.min(room);
        result.count += take;
        if !options.count_only {
            result.pairs.extend(b.pairs.into_iter().take(take as usize));
        }
        result.truncated |= b.truncated;
        result.timed_out |= b.timed_out;
    }
    if direction == EvalDirection::Backward && !options.count_only {
        result.pairs.sort_unstable();
    }
    result
}
