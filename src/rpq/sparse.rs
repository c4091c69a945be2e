//! The sparse executor: breadth-first walks of the product of graph and automaton from
//! one start node at a time, expanding each frontier node by row/column queries of the
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
// The keys are the engine's own (start, node) pairs, not a client's text, so a fast
// unseeded hash is safe: SipHash was 17 % of the CPU time of `?x wdt:P530+ ?y` on CoDEx-M.
use rustc_hash::FxHashSet as HashSet;

use super::automaton::Dir;
use super::exec::{emit, TraceStep};
use super::graph::PathGraph;
use super::node_set::{NodeSet, SetPool};
use super::plan::{Plan, RelKey};
use super::{EvalOptions, PathResult};
use crate::k2tree::K2Tree;

/// Tree nodes a sparse walk may visit before it gives up, at least.
const MIN_BUDGET: u64 = 1 << 16;

/// The budget of a walk tried in front of a device engine: a query that reaches a few
/// hundred nodes is answered from the host trees in well under a millisecond, less than
/// one query's device round trips (start batch, a launch and a count read-back per step).
/// Once a tree has its line lists the same budget covers [`LINE_READS_PER_VISIT`] times as
/// many cell reads: on cnr-2000 an answer of ~40k nodes (~4·10^5 cells, a few ms on the
/// host, where the device takes 30-60 steps of 0.2-0.5 ms). A walk that gives up has
/// wasted about that much before the device takes over.
///
/// [`LINE_READS_PER_VISIT`]: crate::k2tree::LINE_READS_PER_VISIT
pub(super) const DEVICE_FRONT_BUDGET: u64 = 1 << 16;

/// The budget of a walk in front of a device on a graph of `nodes` nodes: at least
/// [`DEVICE_FRONT_BUDGET`], and `nodes / 8` visits on large graphs, because a device
/// query's fixed cost grows with the node count (every state's bit batch is `nodes`
/// words, allocated, cleared and read back per query). Measured on the H200: 0.06 ms per
/// step at 325k nodes (cnr-2000), 0.87 ms per step and 0.5-0.9 s per small query at
/// 21.7M nodes (100M wikidata-like), where `nodes / 8` visits (~2.7M, tens of ms of
/// descents) is still far cheaper.
pub(super) fn device_front_budget(nodes: u32) -> u64 {
    DEVICE_FRONT_BUDGET.max(nodes as u64 / 8)
}

/// The work budget (tree nodes visited) of sparse walks from `starts` start nodes through
/// an automaton of `states` states, on a graph of `nodes` nodes whose relations have
/// `tree_nodes` nodes in all: about two dense products over the relations, plus per
/// start node a share of one batched step (`states` batches of `nodes` rows, 64 start
/// nodes per word; a word operation counted as a tenth of a node visit, rounded up). A
/// walk that gives up has then wasted about what the first batched steps cost.
fn budget(nodes: u32, tree_nodes: u64, starts: u64, states: usize) -> u64 {
    let base = (nodes as u64 / 4 + 2 * tree_nodes).max(MIN_BUDGET);
    base.saturating_add(starts.saturating_mul(states as u64 * (nodes as u64 / 256).max(1)))
}

/// Calls `f(input, output)` for every cell of `tree` whose input coordinate (row when following
/// `dir` forward, column otherwise) is in `active` (sorted, distinct): the row/column
/// queries of all active nodes in one descent, which shares the upper levels and enters
/// only blocks whose input range holds an active node. Adds the tree nodes visited to
/// `work`; returns `false` as soon as `work` passes `budget` or the time passes
/// `deadline`.
fn expand(
    tree: &K2Tree,
    dir: Dir,
    active: &[u32],
    work: &mut u64,
    budget: u64,
    deadline: Option<Instant>,
    mut f: impl FnMut(u32, u32),
) -> bool {
    if tree.nodes() == 0 || active.is_empty() {
        return true;
    }
    // Following `p` forward reads rows (successor lists), `^p` columns.
    let by_column = dir == Dir::Inverse;
    if let Some(lines) = tree.lines_if_built(by_column) {
        *work += lines.for_each(active, f);
        return *work <= budget;
    }
    let before = *work;
    let h = tree.height();
    // (node, level, row origin, column origin, active range within the block's inputs)
    let mut stack: Vec<(u64, u32, u64, u64, usize, usize)> = vec![(0, 0, 0, 0, 0, active.len())];
    while let Some((j, d, r0, c0, lo, hi)) = stack.pop() {
        *work += 1;
        // A long descent must not overrun the timeout: give up on it (the caller's
        // batches then report the timeout).
        if *work > budget
            || (work.is_multiple_of(4096) && deadline.is_some_and(|d| Instant::now() >= d))
        {
            // What a walk that gives up spent counts too: walks in front of a device
            // engine give up on every large answer, and must still earn the lists.
            tree.lines_after(by_column, *work - before);
            return false;
        }
        let s = tree.signature(j);
        let side = 1u64 << (h - 1 - d); // side of a child block
        let leaf = d + 1 == h;
        // The children split the block's input range in two halves: one search for the
        // split point serves all four (instead of two per child).
        let in0 = match dir {
            Dir::Forward => r0,
            Dir::Inverse => c0,
        };
        let mid = lo + active[lo..hi].partition_point(|&x| (x as u64) < in0 + side);
        // The first child's index (a rank) only once a child is entered.
        let mut first = None;
        for b in 0..4u64 {
            if s & (1 << b) == 0 {
                continue;
            }
            let (r, c) = (r0 + (b >> 1) * side, c0 + (b & 1) * side);
            let (input, output, upper) = match dir {
                Dir::Forward => (r, c, b >> 1),
                Dir::Inverse => (c, r, b & 1),
            };
            let (a, z) = if upper == 0 { (lo, mid) } else { (mid, hi) };
            if a < z {
                if leaf {
                    f(input as u32, output as u32);
                } else {
                    let fc = *first.get_or_insert_with(|| tree.first_child(j));
                    let k = (s & ((1u8 << b) - 1)).count_ones() as u64;
                    stack.push((fc + k, d + 1, r, c, a, z));
                }
            }
        }
    }
    // Count the descents' work towards building the lines (`K2Tree::lines_after`: once
    // descents cost a share of the build; used from the next call).
    tree.lines_after(by_column, *work - before);
    true
}

/// Evaluates `plan` from each node of `starts` (`start_count` of them) in turn (ascending; each a walk of its
/// own, its pairs recorded before the next starts) by sparse walks. Returns `None`,
/// having done at most the budget's work over all of them, when the walks would take
/// more or a start lies outside the id space: the caller then runs the batched executor
/// from scratch.
pub(super) fn evaluate_sparse(
    graph: &dyn PathGraph,
    plan: &Plan,
    options: &EvalOptions,
    starts: &mut dyn Iterator<Item = u32>,
    start_count: u64,
    started: Instant,
    cap: Option<u64>,
) -> Option<PathResult> {
    let a = &plan.automaton;
    let states = a.states();
    let rels = relations_of(graph, plan);
    let n = graph.node_count();
    let budget = budget(n, tree_nodes(&rels), start_count, states).min(cap.unwrap_or(u64::MAX));
    let sources_of = a.sources();
    let deadline = options.timeout.map(|t| started + t);
    let limit = options.limit.unwrap_or(u64::MAX);
    let mut result = PathResult::default();
    // Reused by every start node, and by later walks on this thread: clearing a set
    // costs its members, not the id space.
    let mut visited = SetPool::take(states, n);
    let mut work = 0u64;
    let mut input: Vec<u32> = Vec::new();
    for (batch, start) in starts.enumerate() {
        if result.truncated || result.timed_out {
            break;
        }
        if start >= n {
            // Outside the id space: no edges, the caller's batches handle it.
            return None;
        }
        result.trace.batches += 1;
        visited.iter_mut().for_each(NodeSet::clear);
        let mut frontier: Vec<Vec<u32>> = vec![Vec::new(); states];
        visited[0].insert(start);
        frontier[0].push(start);
        let mut step = 0u32;
        loop {
            if deadline.is_some_and(|d| Instant::now() >= d) {
                result.timed_out = true;
                break;
            }
            // Stop once the answers found pass the limit.
            let lower = plan.answers_at_least(|j| visited[j].len());
            if result.count.saturating_add(lower) > limit {
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
                if !gather(&mut input, &frontier, &sources_of[j]) {
                    continue;
                }
                input_total += input.len() as u64;
                products += 1;
                let (seen_j, next_j) = (&mut visited[j], &mut next[j]);
                for t in trees {
                    // A relation with its lists: a line at a time into the set (its hot
                    // loop without a call per cell); else descents, a cell at a time.
                    let fits = if let Some(lines) = t.lines_if_built(*dir == Dir::Inverse) {
                        work += lines.for_each_line(&input, |_, line| {
                            seen_j.insert_each(line, next_j);
                        });
                        work <= budget
                    } else {
                        expand(t, *dir, &input, &mut work, budget, deadline, |_, w| {
                            if seen_j.insert(w) {
                                next_j.push(w);
                            }
                        })
                    };
                    if !fits {
                        if cap.is_some() {
                            // In front of a device, a walk that gives up hands the rest of
                            // the answer to the device; with the lists the walk would have
                            // got much further (×LINE_READS_PER_VISIT). Count the give-up as
                            // a whole tree's worth of descents (past any build threshold), so
                            // the next queries get them.
                            for t in trees {
                                t.lines_after(*dir == Dir::Inverse, t.nodes());
                            }
                        }
                        return None;
                    }
                }
            }
            let new_bits = walk_step(
                &mut result,
                batch as u64,
                step,
                input_total,
                products,
                &next,
                t0,
            );
            frontier = next;
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
            visited[j].add_to(&mut ends);
        }
        if let Some(t) = plan.target {
            ends = if ends.contains(t) {
                RoaringBitmap::from_iter([t])
            } else {
                RoaringBitmap::new()
            };
        }
        if options.count_only {
            let room = limit.saturating_sub(result.count);
            result.truncated |= ends.len() > room;
            result.count += ends.len().min(room);
        } else {
            emit(&mut result, options, plan.direction, start, &ends);
        }
    }
    Some(result)
}

/// Logs one step of a host walk (its `products` expansions all sparse) and returns the
/// new (state, node) bits it found, the lengths of `next`'s per-state frontiers.
fn walk_step<T>(
    result: &mut PathResult,
    batch: u64,
    step: u32,
    input_total: u64,
    products: u32,
    next: &[Vec<T>],
    t0: Instant,
) -> u64 {
    let new_bits: u64 = next.iter().map(|f| f.len() as u64).sum();
    result.trace.log(TraceStep {
        batch,
        step,
        frontier: input_total,
        products,
        masked: 0,
        sparse: products,
        new_bits,
        elapsed: t0.elapsed(),
    });
    new_bits
}

/// Work units of one (start, node) pair a joint walk reaches, against one tree node
/// visited: each is a probe of a hash set. The closure of `?x wdt:P530+ ?y` on CoDEx-M
/// (214 starts that reach about 216 nodes each) probed 415k pairs in its second step,
/// 15 times its budget, before giving up: 9-12 ms, against 2.0-2.6 ms in batches.
const FANOUT_WORK: u64 = 4;

/// Start nodes up to which a var→var query first tries the joint walk: beyond a few
/// batches' worth the batched executor's parallel products are the better bet, and the
/// walk's budget (which grows with the starts) would waste too much before falling back.
pub(super) const MAX_JOINT_STARTS: u64 = 4096;

/// Evaluates `plan` from all of `starts` (ascending, each `< node_count`) at once: one
/// walk over (state, node, start) triples whose every step expands the frontier nodes of
/// all starts by one shared descent per tree, so a few hundred starts with small answers
/// cost about one walk rather than one each. Returns `None` past the budget (at most
/// `cap` when given), as [`evaluate_sparse`] does.
pub(super) fn evaluate_sparse_joint(
    graph: &dyn PathGraph,
    plan: &Plan,
    options: &EvalOptions,
    starts: &[u32],
    started: Instant,
    cap: Option<u64>,
) -> Option<PathResult> {
    let a = &plan.automaton;
    let states = a.states();
    let n = graph.node_count();
    if starts.iter().any(|&v| v >= n) {
        return None;
    }
    let rels = relations_of(graph, plan);
    let budget =
        budget(n, tree_nodes(&rels), starts.len() as u64, states).min(cap.unwrap_or(u64::MAX));
    let sources_of = a.sources();
    let deadline = options.timeout.map(|t| started + t);
    let limit = options.limit.unwrap_or(u64::MAX);
    let mut result = PathResult::default();
    result.trace.batches = 1;
    let key = |start: u32, node: u32| (start as u64) << 32 | node as u64;
    // Per state, the (start index, node) pairs reached, and the frontier as (node, start
    // index) pairs.
    let mut visited: Vec<HashSet<u64>> = vec![HashSet::default(); states];
    let mut frontier: Vec<Vec<(u32, u32)>> = vec![Vec::new(); states];
    for (k, &v) in starts.iter().enumerate() {
        visited[0].insert(key(k as u32, v));
        frontier[0].push((v, k as u32));
    }
    let mut work = starts.len() as u64;
    let mut step = 0u32;
    let mut entries: Vec<(u32, u32)> = Vec::new();
    let mut active: Vec<u32> = Vec::new();
    loop {
        if deadline.is_some_and(|d| Instant::now() >= d) {
            result.timed_out = true;
            break;
        }
        let lower = (0..states)
            .filter(|&j| a.accepting[j])
            .map(|j| visited[j].len() as u64)
            .max()
            .unwrap_or(0);
        if lower > limit {
            result.truncated = true;
            break;
        }
        let t0 = Instant::now();
        step += 1;
        let mut next: Vec<Vec<(u32, u32)>> = vec![Vec::new(); states];
        let (mut products, mut input_total) = (0u32, 0u64);
        for j in 1..states {
            let (trees, dir) = &rels[j];
            if trees.is_empty() {
                continue;
            }
            if !gather(&mut entries, &frontier, &sources_of[j]) {
                continue;
            }
            active.clear();
            active.extend(entries.iter().map(|&(v, _)| v));
            active.dedup();
            input_total += entries.len() as u64;
            products += 1;
            let (seen_j, next_j, ents) = (&mut visited[j], &mut next[j], &entries);
            let mut fanout = 0u64;
            for t in trees {
                // Pairs are counted as they are reached: a step whose pairs alone pass
                // the budget stops probing the visited set at once, not at its end.
                let room = budget.saturating_sub(work) / FANOUT_WORK;
                let fits = expand(t, *dir, &active, &mut work, budget, deadline, |i, w| {
                    if fanout > room {
                        return;
                    }
                    let lo = ents.partition_point(|&(v, _)| v < i);
                    for &(_, k) in ents[lo..].iter().take_while(|&&(v, _)| v == i) {
                        fanout += 1;
                        if seen_j.insert(key(k, w)) {
                            next_j.push((w, k));
                        }
                    }
                });
                work = work.saturating_add(FANOUT_WORK * std::mem::take(&mut fanout));
                if !fits || work > budget {
                    return None;
                }
            }
        }
        let new_bits = walk_step(&mut result, 0, step, input_total, products, &next, t0);
        frontier = next;
        if new_bits == 0 {
            break;
        }
    }
    // Answers: the accepting states' pairs, grouped by start, ends ascending.
    let mut pairs: Vec<u64> = (0..states)
        .filter(|&j| a.accepting[j])
        .flat_map(|j| visited[j].iter().copied())
        .collect();
    pairs.sort_unstable();
    pairs.dedup();
    let mut rest = &pairs[..];
    while let Some(&first) = rest.first() {
        let k = (first >> 32) as u32;
        let len = rest.partition_point(|&p| (p >> 32) as u32 == k);
        let ends: RoaringBitmap = rest[..len].iter().map(|&p| p as u32).collect();
        rest = &rest[len..];
        if options.count_only {
            let room = limit.saturating_sub(result.count);
            result.truncated |= ends.len() > room;
            result.count += ends.len().min(room);
        } else {
            emit(
                &mut result,
                options,
                plan.direction,
                starts[k as usize],
                &ends,
            );
        }
        if result.count >= limit {
            result.truncated |= !rest.is_empty();
            break;
        }
    }
    Some(result)
}

/// Per state, the trees read by transitions into it and the direction to follow them
/// (the predicates of a union one by one: no union tree is built).
fn relations_of(graph: &dyn PathGraph, plan: &Plan) -> Vec<(Vec<Arc<K2Tree>>, Dir)> {
    plan.relations
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
        .collect()
}

/// The frontiers of states `sources` as one sorted set in `out`; whether it is non-empty.
fn gather<T: Copy + Ord>(out: &mut Vec<T>, frontier: &[Vec<T>], sources: &[usize]) -> bool {
    out.clear();
    for &i in sources {
        out.extend_from_slice(&frontier[i]);
    }
    out.sort_unstable();
    out.dedup();
    !out.is_empty()
}

/// Nodes of the distinct trees of `rels`.
fn tree_nodes(rels: &[(Vec<Arc<K2Tree>>, Dir)]) -> u64 {
    let mut counted = HashSet::default();
    rels.iter()
        .flat_map(|(ts, _)| ts)
        .filter(|t| counted.insert(Arc::as_ptr(t)))
        .map(|t| t.nodes())
        .sum()
}
