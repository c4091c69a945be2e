//! Row limits and timeouts of the batched executor on a var→var closure: the limit stops
//! the fixed point between steps and between batches, the deadline stops it between
//! products and batches, and a cut answer says so and holds only correct pairs. Run on the
//! CPU engine here and on the GPU engine where one is usable (skipped with a notice
//! otherwise).

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use k2rpq::engine::cpu::CpuEngine;
use k2rpq::engine::gpu::GpuEngine;
use k2rpq::engine::Engine;
use k2rpq::rpq::{
    evaluate, plan, Endpoint, EvalDirection, EvalOptions, MemoryGraph, Path, PathResult,
    StartNodes, TraversalPolicy,
};

/// `?x p+ ?y` over a DAG of `nodes` nodes: node `i` links to `i − 1` and to `i / 2`, so
/// every node is a start and reaches about `i` others (`nodes²/2` pairs in all).
fn dag(nodes: u32) -> MemoryGraph {
    let mut triples = Vec::new();
    for i in 1..nodes {
        triples.push((i, 0, i - 1));
        if i / 2 != i - 1 {
            triples.push((i, 0, i / 2));
        }
    }
    MemoryGraph::from_triples(triples)
}

fn closure() -> Box<Path> {
    Box::new(Path::OneOrMore(Path::link(0)))
}

/// The batched executor on every product (a dense traversal: no sparse walks).
fn batched(limit: Option<u64>, timeout: Option<Duration>) -> EvalOptions {
    EvalOptions {
        limit,
        timeout,
        traversal: TraversalPolicy::Dense,
        batch_words: 1,
        ..EvalOptions::default()
    }
}

/// The answer of `?x p+ ?y` on `g` with [`batched`] options.
fn closure_pairs<E: Engine>(
    engine: &E,
    g: &MemoryGraph,
    limit: Option<u64>,
    timeout: Option<Duration>,
) -> PathResult {
    evaluate(
        engine,
        g,
        &closure(),
        Endpoint::Var,
        Endpoint::Var,
        &batched(limit, timeout),
    )
    .unwrap()
}

/// Every pair `(x, y)` with `y < x` is an answer of `?x p+ ?y` on [`dag`].
fn correct(pairs: &[(u32, u32)]) -> bool {
    pairs.iter().all(|&(x, y)| y < x)
}

fn limit_stops_the_fixed_point<E: Engine>(engine: &E) {
    let g = dag(4_000);
    let full = closure_pairs(engine, &g, Some(20_000), None);
    assert!(full.truncated && !full.timed_out);
    assert_eq!(full.count, 20_000);
    assert_eq!(full.pairs.len(), 20_000);
    assert!(correct(&full.pairs));
    let distinct: BTreeSet<_> = full.pairs.iter().collect();
    assert_eq!(distinct.len(), 20_000, "pairs are distinct");
    // 64 starts a batch, each reaching fewer than 4 000 nodes: 20 000 pairs need a few
    // batches of the 63 there are, and no more.
    assert!(
        full.trace.batches <= 12,
        "{} batches for 20 000 pairs",
        full.trace.batches
    );
    // A limit a single batch passes within a step stops that batch's fixed point: the
    // first batch (starts 0..64, at most 63·64/2 + … pairs) is not run to its end.
    let small = closure_pairs(engine, &g, Some(100), None);
    assert!(small.truncated);
    assert_eq!(small.count, 100);
    assert!(correct(&small.pairs));
    assert_eq!(small.trace.batches, 1);
    // An exact fit: the limit equals the whole answer of the first batch. Only a later
    // pair shows that the answer was cut, so the second batch runs, finds one and stops
    // the run there.
    let two = closure_pairs(engine, &dag(200), None, None);
    assert_eq!(two.count, 199 * 200 / 2);
    assert!(!two.truncated && !two.timed_out);
    // The first batch: the first 64 candidates, at the end the plan starts from.
    let pl = plan(
        &dag(200),
        &closure(),
        Endpoint::Var,
        Endpoint::Var,
        &batched(None, None),
    );
    let StartNodes::Candidates(cands) = &pl.start else {
        panic!("a var→var plan has candidates");
    };
    let first: BTreeSet<u32> = cands.iter().take(64).collect();
    let first_batch = two
        .pairs
        .iter()
        .filter(|&&(x, y)| match pl.direction {
            EvalDirection::Forward => first.contains(&x),
            EvalDirection::Backward => first.contains(&y),
        })
        .count() as u64;
    let exact = closure_pairs(engine, &dag(200), Some(first_batch), None);
    assert_eq!(exact.count, first_batch);
    assert!(exact.truncated);
    assert_eq!(exact.trace.batches, 2, "one batch after a full answer");
}

fn timeout_cancels_between_launches<E: Engine>(engine: &E) {
    let g = dag(20_000);
    // A passed deadline starts nothing.
    let none = closure_pairs(engine, &g, None, Some(Duration::ZERO));
    assert!(none.timed_out && !none.truncated);
    assert_eq!(none.count, 0);
    assert_eq!(none.trace.batches, 0);
    // A closure of 2·10⁸ pairs over 313 batches of up to 20 000 steps each is cut at the
    // deadline, with the pairs found by then.
    let timeout = Duration::from_millis(300);
    let t = Instant::now();
    let cut = closure_pairs(engine, &g, None, Some(timeout));
    let took = t.elapsed();
    assert!(cut.timed_out);
    assert!(cut.count < 19_999 * 20_000 / 2);
    assert!(correct(&cut.pairs));
    assert!(
        took < timeout + Duration::from_secs(3),
        "stopped {took:?} after a {timeout:?} timeout"
    );
}

#[test]
fn cpu_limit_stops_the_fixed_point() {
    limit_stops_the_fixed_point(&CpuEngine::new());
}

#[test]
fn cpu_timeout_cancels_between_products() {
    timeout_cancels_between_launches(&CpuEngine::new());
}

/// Runs `check` on GPU 0 (skipped without a usable GPU), then checks that the
/// evaluation's run freed what it kept.
fn on_gpu(check: impl FnOnce(&GpuEngine)) {
    let Some(gpu) = GpuEngine::new_or_notice(0) else {
        eprintln!("skipped: no usable GPU");
        return;
    };
    check(&gpu);
    assert_eq!(
        gpu.kept_bytes(),
        0,
        "the evaluation's run freed what it kept"
    );
}

#[test]
fn gpu_limit_stops_the_fixed_point() {
    on_gpu(limit_stops_the_fixed_point);
}

#[test]
fn gpu_timeout_cancels_between_launches() {
    on_gpu(timeout_cancels_between_launches);
}
