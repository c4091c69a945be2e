//! The sparse executor: a breadth-first walk of the product of graph and automaton from
//! one constant start node, expanding each frontier node by row/column queries of the
//! predicates' k²-trees.
//!
//! A query that touches a handful of nodes pays, in the batched executor, for whole
//! `node_count`-row batches per state and step (zeroing, OR-ing, advancing), for building
//! a union tree of every predicate of a negated set, and for products whose cost does not
//! shrink with the frontier. Here the work is proportional to the nodes reached and the
//! edges leaving them. The walk is level-synchronous like the batched one (same steps,
//! same answers) and gives up past a work budget, so the caller can fall back to products
//! when the reached set grows large.

use std::sync::Arc;
use std::time::Instant;

use roaring::RoaringBitmap;

use super::automaton::Dir;
use super::exec::{emit, TraceStep};
use super::graph::PathGraph;
use super::plan::{Plan, RelKey};
use super::{EvalOptions, PathResult};
use crate::k2tree::K2Tree;

/// Row/column queries (plus cells returned) a sparse walk may spend before it gives up:
/// an eighth of the node count, and at least this many.
const MIN_BUDGET: u64 = 8192;

/// The work budget of a sparse walk on a graph of `nodes` nodes: about what a couple of
/// batched steps over `nodes`-row batches cost, so a walk that gives up wastes little.
pub(super) fn budget(nodes: u32) -> u64 {
    (nodes as u64 / 8).max(MIN_BUDGET)
}

/// Evaluates `plan` from the single start node `start` (`< node_count`) by a sparse
/// walk. Returns `None`, having done at most `budget` units of work, when the walk would
/// take more: the caller then runs the batched executor from scratch.
pub(super) fn evaluate_sparse(
    graph: &dyn PathGraph,
    plan: &Plan,
    options: &EvalOptions,
    start: u32,
    started: Instant,
    budget: u64,
) -> Option<PathResult> {
    let a = &plan.automaton;
    let states = a.states();
    // Per state, the trees read by transitions into it and the direction to follow them
    // (the predicates of a union one by one: no union tree is built).
    let rels: Vec<(Vec<Arc<K2Tree>>, Dir)> = plan
        .relations
        .iter()
        .map(|r| match r {
            None => (Vec::new(), Dir::Forward),
            Some((key, dir)) => {
                let trees = match key {
                    RelKey::Pred(p) => graph.relation(*p).into_iter().collect(),
                    RelKey::Union(ps) => ps.iter().filter_map(|&p| graph.relation(p)).collect(),
                };
                (trees, *dir)
            }
        })
        .collect();
    let sources_of = a.sources();
    let deadline = options.timeout.map(|t| started + t);
    let limit = options.limit.unwrap_or(u64::MAX);
    let mut result = PathResult::default();
    result.trace.batches = 1;

    let mut visited = vec![RoaringBitmap::new(); states];
    let mut frontier: Vec<Vec<u32>> = vec![Vec::new(); states];
    visited[0].insert(start);
    frontier[0].push(start);
    let mut work = 0u64;
    let mut step = 0u32;
    loop {
        if deadline.is_some_and(|d| Instant::now() >= d) {
            result.timed_out = true;
            break;
        }
        let lower = (0..states)
            .filter(|&j| a.accepting[j])
            .map(|j| visited[j].len())
            .max()
            .unwrap_or(0);
        if lower > limit {
            result.truncated = true;
            break;
        }
        let t0 = Instant::now();
        step += 1;
        let mut next: Vec<Vec<u32>> = vec![Vec::new(); states];
        let (mut products, mut input_total) = (0u32, 0u64);
        for j in 1..states {
            let (trees, dir) = &rels[j];
            if trees.is_empty() {
                continue;
            }
            let mut any = false;
            for &i in &sources_of[j] {
                if frontier[i].is_empty() {
                    continue;
                }
                any = true;
                input_total += frontier[i].len() as u64;
                for &v in &frontier[i] {
                    for t in trees {
                        let out = match dir {
                            Dir::Forward => t.row(v),
                            Dir::Inverse => t.column(v),
                        };
                        work += 1 + out.len() as u64;
                        if work > budget {
                            return None;
                        }
                        for w in out {
                            if visited[j].insert(w) {
                                next[j].push(w);
                            }
                        }
                    }
                }
            }
            products += any as u32;
        }
        let new_bits: u64 = next.iter().map(|f| f.len() as u64).sum();
        frontier = next;
        result.trace.log(TraceStep {
            batch: 0,
            step,
            frontier: input_total,
            products,
            masked: 0,
            new_bits,
            elapsed: t0.elapsed(),
        });
        if new_bits == 0 {
            break;
        }
        if let Some(t) = plan.target {
            if (0..states).any(|j| a.accepting[j] && frontier[j].contains(&t)) {
                break;
            }
        }
    }
    let mut ends = RoaringBitmap::new();
    for j in (0..states).filter(|&j| a.accepting[j]) {
        ends |= &visited[j];
    }
    if let Some(t) = plan.target {
        ends = if ends.contains(t) {
            RoaringBitmap::from_iter([t])
        } else {
            RoaringBitmap::new()
        };
    }
    if options.count_only {
        let found = ends.len();
        result.truncated |= found > limit;
        result.count = found.min(limit);
    } else {
        emit(&mut result, options, plan.direction, start, &ends);
    }
    Some(result)
}
