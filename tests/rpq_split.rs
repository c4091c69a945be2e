//! `rpq::evaluate_split` (the batches of one var→var plan shared out among several
//! engines, as on several GPUs) against one engine, with 1, 2 and 3 CPU engines: same
//! pairs, counts, flags and trace totals on random graphs and paths; limits, timeouts and
//! errors as with one engine.

use std::time::Duration;

mod rpq_support;
use rpq_support::{random_path, split};

use k2rpq::engine::cpu::CpuEngine;
use k2rpq::engine::Engine;
use k2rpq::rpq::{
    evaluate_split, execute, plan, runs_on_one, Endpoint, EvalOptions, Loaded, MemoryGraph, Path,
    PerQueryRelations, RelKey, RelationSource, RpqError, Share, TraversalPolicy,
};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

fn random_graph(rng: &mut StdRng) -> MemoryGraph {
    let n = rng.random_range(200..700u32);
    let edges = rng.random_range(n..3 * n);
    let triples = (0..edges)
        .map(|_| {
            // Half the edges local (chains and short cycles), half anywhere: long paths
            // and many fixed-point steps.
            let s = rng.random_range(0..n);
            let o = if rng.random_bool(0.5) {
                (s + rng.random_range(1..4)) % n
            } else {
                rng.random_range(0..n)
            };
            (s, rng.random_range(0..3), o)
        })
        .collect();
    MemoryGraph::with_node_count(n, triples)
}

fn options(traversal: TraversalPolicy, batch_words: usize) -> EvalOptions {
    EvalOptions {
        traversal,
        batch_words,
        ..EvalOptions::default()
    }
}

#[test]
fn split_equals_one_engine_on_random_graphs_and_paths() {
    let mut rng = StdRng::seed_from_u64(11);
    let engines: Vec<CpuEngine> = (0..3).map(|_| CpuEngine::new()).collect();
    let mut multi_batch = 0;
    for case in 0..60 {
        let g = random_graph(&mut rng);
        let path = random_path(&mut rng, 3);
        let trav = [TraversalPolicy::Dense, TraversalPolicy::Masked][case % 2];
        let o = options(trav, 1 + case % 2);
        let p = plan(&g, &path, Endpoint::Var, Endpoint::Var, &o);
        let one = execute(&engines[0], &g, &p, &o).unwrap();
        if p.batches() > 1 {
            multi_batch += 1;
        }
        for n in 1..=3 {
            let r = split(&engines[..n], &g, &p, &o).unwrap();
            let what = format!("case {case} {path:?} on {n} engines");
            assert_eq!(r.pairs, one.pairs, "{what}");
            assert_eq!(r.count, one.count, "{what}");
            assert!(!r.truncated && !r.timed_out, "{what}");
            assert_eq!(r.trace.batches, one.trace.batches, "{what}");
            assert_eq!(r.trace.total_steps, one.trace.total_steps, "{what}");
            assert_eq!(r.trace.products, one.trace.products, "{what}");
            // Every engine loads the plan's relations once (the split replicates them).
            if n > 1 && p.batches() > 1 {
                assert_eq!(r.trace.loads, n as u32 * one.trace.loads, "{what}");
                assert!(r.trace.engine.ends_with(&format!("x{n}")), "{what}");
            }
        }
    }
    // The cases must exercise the split itself, not only the one-engine shortcut.
    assert!(multi_batch >= 40, "only {multi_batch} multi-batch plans");
}

#[test]
fn split_counts_and_backward_plans_agree() {
    let mut rng = StdRng::seed_from_u64(12);
    let engines: Vec<CpuEngine> = (0..3).map(|_| CpuEngine::new()).collect();
    for case in 0..20 {
        let g = random_graph(&mut rng);
        let path = random_path(&mut rng, 3);
        for count_only in [false, true] {
            let o = EvalOptions {
                count_only,
                ..options(TraversalPolicy::Dense, 1)
            };
            // Var→var plans run forward; a backward plan needs a constant subject, which
            // runs on one engine: check both ends of `runs_on_one`.
            let p = plan(&g, &path, Endpoint::Var, Endpoint::Var, &o);
            let one = execute(&engines[0], &g, &p, &o).unwrap();
            let r = split(&engines, &g, &p, &o).unwrap();
            assert_eq!(r.count, one.count, "case {case} count_only {count_only}");
            assert_eq!(r.pairs, one.pairs, "case {case} count_only {count_only}");
            let pc = plan(&g, &path, Endpoint::Const(1), Endpoint::Var, &o);
            assert!(runs_on_one(&engines[0], &pc, &o));
            let one = execute(&engines[0], &g, &pc, &o).unwrap();
            let r = split(&engines, &g, &pc, &o).unwrap();
            assert_eq!(r.pairs, one.pairs, "case {case} const start");
        }
    }
}

#[test]
fn split_limits_cut_like_one_engine() {
    let mut rng = StdRng::seed_from_u64(13);
    let engines: Vec<CpuEngine> = (0..3).map(|_| CpuEngine::new()).collect();
    let mut limited = 0;
    for case in 0..30 {
        let g = random_graph(&mut rng);
        let path = Path::OneOrMore(Box::new(random_path(&mut rng, 2)));
        let o = options(TraversalPolicy::Dense, 1);
        let p = plan(&g, &path, Endpoint::Var, Endpoint::Var, &o);
        let full = execute(&engines[0], &g, &p, &o).unwrap();
        if full.count < 4 {
            continue;
        }
        for limit in [
            1,
            full.count / 3,
            full.count - 1,
            full.count,
            full.count + 1,
        ] {
            for count_only in [false, true] {
                let o = EvalOptions {
                    limit: Some(limit),
                    count_only,
                    ..o.clone()
                };
                let one = execute(&engines[0], &g, &p, &o).unwrap();
                for n in 2..=3 {
                    let r = split(&engines[..n], &g, &p, &o).unwrap();
                    let what = format!("case {case} limit {limit} of {} on {n}", full.count);
                    assert_eq!(r.count, one.count, "{what}");
                    assert_eq!(r.count, limit.min(full.count), "{what}");
                    assert_eq!(r.truncated, one.truncated, "{what}");
                    assert_eq!(r.truncated, limit < full.count, "{what}");
                    if !count_only {
                        assert_eq!(r.pairs.len() as u64, r.count, "{what}");
                        let mut sorted = r.pairs.clone();
                        sorted.sort_unstable();
                        sorted.dedup();
                        assert_eq!(sorted.len(), r.pairs.len(), "{what}: duplicates");
                        assert!(
                            r.pairs.iter().all(|x| full.pairs.binary_search(x).is_ok()),
                            "{what}: a pair outside the answer"
                        );
                    }
                }
                limited += 1;
            }
        }
    }
    assert!(limited >= 50, "only {limited} limited runs");
}

#[test]
fn split_timeout_keeps_correct_pairs() {
    let mut rng = StdRng::seed_from_u64(14);
    let engines: Vec<CpuEngine> = (0..2).map(|_| CpuEngine::new()).collect();
    let g = random_graph(&mut rng);
    let path = Path::ZeroOrMore(Box::new(Path::Alternative(Path::link(0), Path::link(1))));
    let o = options(TraversalPolicy::Dense, 1);
    let p = plan(&g, &path, Endpoint::Var, Endpoint::Var, &o);
    let full = execute(&engines[0], &g, &p, &o).unwrap();
    let o = EvalOptions {
        timeout: Some(Duration::ZERO),
        ..o
    };
    let r = split(&engines, &g, &p, &o).unwrap();
    assert!(r.timed_out);
    assert!(r.count < full.count);
    assert!(r.pairs.iter().all(|x| full.pairs.binary_search(x).is_ok()));
}

/// A relation source that fails on every load (a device that cannot hold a relation).
struct Failing;

impl RelationSource<CpuEngine> for Failing {
    fn relation(
        &mut self,
        _key: &RelKey,
    ) -> Result<Option<Loaded<<CpuEngine as Engine>::Matrix>>, RpqError> {
        Err(RpqError::Options("device 1 is full".into()))
    }
    fn load_stats(&self) -> (u32, Duration) {
        (0, Duration::ZERO)
    }
}

#[test]
fn split_errors_are_returned() {
    let mut rng = StdRng::seed_from_u64(15);
    let g = random_graph(&mut rng);
    let path = Path::OneOrMore(Path::link(0));
    let o = options(TraversalPolicy::Dense, 1);
    let p = plan(&g, &path, Endpoint::Var, Endpoint::Var, &o);
    assert!(p.batches() > 1);
    let (a, b) = (CpuEngine::new(), CpuEngine::new());
    let mut good = PerQueryRelations::new(&a, &g, o.config);
    let mut bad = Failing;
    let mut shares = vec![
        Share {
            engine: &a,
            relations: &mut good,
        },
        Share {
            engine: &b,
            relations: &mut bad,
        },
    ];
    let e = evaluate_split(&g, &p, &o, &mut shares).unwrap_err();
    assert!(e.to_string().contains("device 1 is full"), "{e}");
    let none: &mut [Share<'_, CpuEngine>] = &mut [];
    assert!(matches!(
        evaluate_split(&g, &p, &o, none),
        Err(RpqError::Options(_))
    ));
    let zero = EvalOptions {
        batch_words: 0,
        ..o.clone()
    };
    assert!(matches!(
        evaluate_split(&g, &p, &zero, &mut shares),
        Err(RpqError::Options(_))
    ));
}
