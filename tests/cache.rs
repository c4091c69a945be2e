//! The device cache with the CPU engine: budgets smaller than a workload and than one
//! plan, relations larger than the budget, pinning, reservations, threads, statistics.
//! After every operation the cache's bytes in use are checked against the budget.

use std::collections::BTreeSet;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Barrier};

use k2rpq::cache::{CacheError, CacheOptions, DeviceCache, Pinned};
use k2rpq::engine::cpu::CpuEngine;
use k2rpq::engine::{BitMatrix, Direction, Engine, MatrixConfig, Traversal};
use k2rpq::k2tree::K2Tree;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

const N: u32 = 512;

/// A relation: its tree and its edges (the oracle).
struct Relation {
    tree: Arc<K2Tree>,
    edges: Vec<(u32, u32)>,
}

fn relations(count: usize, edges_each: usize, seed: u64) -> Vec<Relation> {
    let mut rng = StdRng::seed_from_u64(seed);
    (0..count)
        .map(|_| {
            let edges: Vec<(u32, u32)> = (0..edges_each)
                .map(|_| (rng.random_range(0..N), rng.random_range(0..N)))
                .collect();
            Relation {
                tree: Arc::new(K2Tree::from_edges(N as u64, N as u64, edges.clone())),
                edges,
            }
        })
        .collect()
}

/// A cache that always takes the cached frontier when it fits the budget, so sizes are
/// predictable; the adaptive choice has its own test.
fn cache(budget: u64) -> DeviceCache<CpuEngine, usize> {
    let mut options = CacheOptions::with_budget(budget);
    options.comfortable_fraction = 1.0;
    DeviceCache::new(Arc::new(CpuEngine::new()), options)
}

fn bytes(r: &Relation, config: MatrixConfig) -> u64 {
    CpuEngine::new().load_bytes(&r.tree, config)
}

/// Bytes of each relation with its cached frontier.
fn frontier_bytes(rels: &[Relation]) -> Vec<u64> {
    rels.iter()
        .map(|r| bytes(r, MatrixConfig::CachedFrontier))
        .collect()
}

/// Relation `k` from the cache, asked for with its cached frontier.
fn pin(c: &DeviceCache<CpuEngine, usize>, rels: &[Relation], k: usize) -> Pinned<CpuEngine, usize> {
    c.get(k, || rels[k].tree.clone(), MatrixConfig::CachedFrontier)
        .unwrap()
}

/// One forward step of `sources` through the cached matrix `a`.
fn forward(
    c: &DeviceCache<CpuEngine, usize>,
    a: &Pinned<CpuEngine, usize>,
    sources: &BTreeSet<u32>,
    traversal: Traversal,
) -> BTreeSet<u32> {
    let mut y = BitMatrix::zeroed(N as usize, 1);
    c.engine()
        .bool_product(a, Direction::Left, &to_bits(sources), &mut y, traversal)
        .unwrap();
    from_bits(&y)
}

/// The budget invariant, checked after every operation.
fn check_budget(c: &DeviceCache<CpuEngine, usize>) {
    let used = c.used_bytes();
    let s = c.stats();
    assert!(
        used <= c.budget(),
        "{used} bytes used over a budget of {}",
        c.budget()
    );
    assert!(
        s.peak_bytes <= s.budget,
        "peak {} over budget {}",
        s.peak_bytes,
        s.budget
    );
    assert!(s.resident_bytes + s.reserved_bytes <= s.budget);
}

/// Nodes reached from `sources` by one step forward (`Left`) over `edges`.
fn successors(edges: &[(u32, u32)], sources: &BTreeSet<u32>) -> BTreeSet<u32> {
    edges
        .iter()
        .filter(|(r, _)| sources.contains(r))
        .map(|&(_, c)| c)
        .collect()
}

fn to_bits(set: &BTreeSet<u32>) -> BitMatrix {
    let mut m = BitMatrix::zeroed(N as usize, 1);
    for &i in set {
        m.set(i as usize, 0);
    }
    m
}

fn from_bits(m: &BitMatrix) -> BTreeSet<u32> {
    (0..m.rows())
        .filter(|&i| m.get(i, 0))
        .map(|i| i as u32)
        .collect()
}

/// One forward step through a cached relation, checked against the edges.
fn step(
    c: &DeviceCache<CpuEngine, usize>,
    rels: &[Relation],
    k: usize,
    sources: &BTreeSet<u32>,
    traversal: Traversal,
) -> BTreeSet<u32> {
    let working = c.reserve(2 * N as u64 * 8).unwrap();
    check_budget(c);
    let a = pin(c, rels, k);
    check_budget(c);
    let got = forward(c, &a, sources, traversal);
    assert_eq!(got, successors(&rels[k].edges, sources), "relation {k}");
    drop(a);
    drop(working);
    check_budget(c);
    got
}

fn random_sources(rng: &mut StdRng) -> BTreeSet<u32> {
    (0..8).map(|_| rng.random_range(0..N)).collect()
}

#[test]
fn budget_smaller_than_the_workload_evicts_and_stays_right() {
    let rels = relations(10, 800, 1);
    let total: u64 = frontier_bytes(&rels).iter().sum();
    let c = cache(total / 3 + 2 * N as u64 * 8);
    let mut rng = StdRng::seed_from_u64(2);
    for i in 0..200 {
        let k = rng.random_range(0..rels.len());
        let traversal = if i % 2 == 0 {
            Traversal::Dense
        } else {
            Traversal::Masked
        };
        step(&c, &rels, k, &random_sources(&mut rng), traversal);
    }
    let s = c.stats();
    assert!(s.evictions > 0, "{s}");
    assert_eq!(s.hits + s.misses, 200);
    assert!(s.misses >= rels.len() as u64);
    assert_eq!((s.pinned_entries, s.reserved_bytes), (0, 0));
    assert!(s.resident_bytes < total);
}

#[test]
fn plan_larger_than_the_budget_runs_in_phases() {
    // A path a/b/c/d/e whose relations together need more than the budget, each fitting.
    let rels = relations(5, 1500, 3);
    let sizes = frontier_bytes(&rels);
    let budget = sizes.iter().max().unwrap() * 2 + 2 * N as u64 * 8;
    assert!(sizes.iter().sum::<u64>() > budget);
    let c = cache(budget);
    let mut rng = StdRng::seed_from_u64(4);
    let start = random_sources(&mut rng);
    // Phased: one pinned relation per step.
    let mut frontier = start.clone();
    let mut oracle = start;
    for k in 0..rels.len() {
        frontier = step(&c, &rels, k, &frontier, Traversal::Masked);
        oracle = successors(&rels[k].edges, &oracle);
    }
    assert_eq!(frontier, oracle);
    assert!(c.stats().evictions > 0);

    // Pinning every relation at once does not fit with frontiers: the relations that
    // would block for good come tree-only instead.
    let pins: Vec<_> = rels
        .iter()
        .enumerate()
        .map(|(k, r)| {
            let p = c
                .get(k, || r.tree.clone(), MatrixConfig::CachedFrontier)
                .unwrap();
            check_budget(&c);
            p
        })
        .collect();
    assert!(pins.iter().any(|p| p.config() == MatrixConfig::TreeOnly));
    assert!(c.stats().tree_only_loads > 0);
    // A thread holding every pin and asking for more than is left gets an error instead
    // of waiting for itself forever.
    let left = c.budget() - c.used_bytes();
    match c.reserve(left + 1) {
        Err(CacheError::Exhausted { needed, budget, .. }) => {
            assert_eq!((needed, budget), (left + 1, c.budget()))
        }
        other => panic!("expected Exhausted, got {:?}", other.err()),
    }
    drop(pins);
    assert_eq!(c.stats().pinned_entries, 0);
}

#[test]
fn relation_larger_than_the_budget_falls_back_or_fails() {
    let rels = relations(1, 3000, 5);
    let tree_only = bytes(&rels[0], MatrixConfig::TreeOnly);
    let full = bytes(&rels[0], MatrixConfig::CachedFrontier);
    assert!(tree_only < full);

    // The frontier does not fit: tree-only, and products stay right.
    let c = cache(tree_only + 2 * N as u64 * 8);
    let a = pin(&c, &rels, 0);
    assert_eq!(a.config(), MatrixConfig::TreeOnly);
    assert_eq!(a.bytes(), tree_only);
    drop(a);
    let mut rng = StdRng::seed_from_u64(6);
    step(&c, &rels, 0, &random_sources(&mut rng), Traversal::Dense);
    assert_eq!(c.stats().tree_only_loads, 1);

    // Not even the tree fits: an error naming the sizes, and nothing left behind.
    let c = cache(tree_only - 1);
    match c.get(0, || rels[0].tree.clone(), MatrixConfig::TreeOnly) {
        Err(CacheError::TooLarge { bytes, budget }) => {
            assert_eq!((bytes, budget), (tree_only, tree_only - 1))
        }
        other => panic!("expected TooLarge, got {:?}", other.err()),
    }
    assert_eq!(c.used_bytes(), 0);
    assert!(!c.contains(&0));
    // A reservation larger than the budget is the same error.
    assert!(matches!(
        c.reserve(tree_only),
        Err(CacheError::TooLarge { .. })
    ));
}

#[test]
fn pinned_relations_are_never_evicted() {
    let rels = relations(6, 800, 7);
    let max = *frontier_bytes(&rels).iter().max().unwrap();
    let c = cache(2 * max);
    let pinned = pin(&c, &rels, 0);
    let mut rng = StdRng::seed_from_u64(8);
    for _ in 0..30 {
        let k = rng.random_range(1..rels.len());
        let a = pin(&c, &rels, k);
        check_budget(&c);
        assert!(c.contains(&0), "the pinned relation was evicted");
        drop(a);
    }
    // Relation 0 was loaded exactly once and still answers.
    let s = c.stats();
    assert!(s.evictions > 0);
    let again = c
        .get(
            0,
            || panic!("relation 0 reloaded"),
            MatrixConfig::CachedFrontier,
        )
        .unwrap();
    assert_eq!(again.tree().nnz(), pinned.tree().nnz());
    drop((pinned, again));
    // Unpinned, it can go.
    assert!(c.evict_unpinned() >= 1);
    assert!(!c.contains(&0));
    assert_eq!(c.used_bytes(), 0);
}

#[test]
fn reservations_evict_unpinned_relations_and_return_their_bytes() {
    let rels = relations(3, 800, 9);
    let sizes = frontier_bytes(&rels);
    let budget = sizes.iter().sum::<u64>();
    let c = cache(budget);
    for k in 0..rels.len() {
        drop(pin(&c, &rels, k));
    }
    assert_eq!(c.used_bytes(), budget);
    // Relation 0 is the least recently used: a reservation of its size evicts it alone.
    let res = c.reserve(sizes[0]).unwrap();
    check_budget(&c);
    assert!(!c.contains(&0) && c.contains(&1) && c.contains(&2));
    assert_eq!(c.stats().reserved_bytes, sizes[0]);
    drop(res);
    assert_eq!(c.stats().reserved_bytes, 0);
    assert_eq!(c.used_bytes(), sizes[1] + sizes[2]);
}

#[test]
fn stats_are_consistent() {
    let rels = relations(3, 800, 10);
    let sizes = frontier_bytes(&rels);
    // Room for relations 0 and 1 together, not all three.
    let c = cache(sizes[0] + sizes[1].max(sizes[2]));
    let get = |k: usize| {
        drop(pin(&c, &rels, k));
        check_budget(&c);
    };
    get(0); // miss
    get(1); // miss
    get(0); // hit
    get(2); // miss, evicts 1 (least recently used)
    get(0); // hit
    get(1); // miss, evicts 2
    let s = c.stats();
    assert_eq!((s.hits, s.misses, s.evictions), (2, 4, 2), "{s}");
    assert_eq!(s.bytes_uploaded, sizes[0] + 2 * sizes[1] + sizes[2]);
    assert_eq!(s.resident_bytes, sizes[0] + sizes[1]);
    assert_eq!(s.entries, 2);
    assert_eq!(s.peak_bytes, c.budget());
    assert_eq!(s.budget, c.budget());
    assert_eq!((s.tree_only_loads, s.upgrades, s.waits), (0, 0, 0));
    let text = s.to_string();
    assert!(
        text.contains("2 hits, 4 misses") && text.contains("2 evictions"),
        "{text}"
    );
}

#[test]
fn cold_relations_load_tree_only_and_upgrade_when_hot() {
    let rels = relations(1, 800, 11);
    let mut options = CacheOptions::with_budget(1 << 20);
    options.hot_after = 2;
    let c: DeviceCache<CpuEngine, usize> = DeviceCache::new(Arc::new(CpuEngine::new()), options);
    let load = || rels[0].tree.clone();
    let first = c.get(0, load, MatrixConfig::CachedFrontier).unwrap();
    assert_eq!(first.config(), MatrixConfig::TreeOnly);
    drop(first);
    let second = c.get(0, load, MatrixConfig::CachedFrontier).unwrap();
    assert_eq!(second.config(), MatrixConfig::CachedFrontier);
    drop(second);
    // Asking for tree-only is served by the cached-frontier entry.
    let third = c.get(0, load, MatrixConfig::TreeOnly).unwrap();
    assert_eq!(third.config(), MatrixConfig::CachedFrontier);
    drop(third);
    let s = c.stats();
    assert_eq!(
        (s.misses, s.hits, s.upgrades, s.tree_only_loads),
        (2, 1, 1, 1),
        "{s}"
    );
    assert_eq!(
        s.resident_bytes,
        bytes(&rels[0], MatrixConfig::CachedFrontier)
    );
}

#[test]
fn frontiers_that_do_not_fit_comfortably_are_left_out_when_memory_is_taken() {
    let rels = relations(2, 800, 15);
    let full = frontier_bytes(&rels);
    // Each frontier configuration takes over a quarter of the budget.
    let budget = full[0] + full[1] + 1;
    let c: DeviceCache<CpuEngine, usize> = DeviceCache::new(
        Arc::new(CpuEngine::new()),
        CacheOptions::with_budget(budget),
    );
    assert!(full[0] as f64 > 0.25 * budget as f64);
    // While the memory is free it is used.
    let a = pin(&c, &rels, 0);
    assert_eq!(a.config(), MatrixConfig::CachedFrontier);
    // Relation 0 is pinned and a query holds working memory: relation 1's frontier no
    // longer fits in what is free, so it comes tree-only.
    let w = c.reserve(budget - full[0] - full[1] + 2).unwrap();
    let b = pin(&c, &rels, 1);
    assert_eq!(b.config(), MatrixConfig::TreeOnly);
    check_budget(&c);
    drop((a, b, w));
    assert_eq!(c.stats().tree_only_loads, 1);
}

#[test]
fn failed_loads_leave_nothing_behind() {
    let rels = relations(1, 100, 12);
    let c = cache(1 << 20);
    let err = c
        .try_get(
            0,
            || Err::<Arc<K2Tree>, _>("disk on fire"),
            MatrixConfig::TreeOnly,
        )
        .err()
        .unwrap();
    assert!(err.to_string().contains("disk on fire"), "{err}");
    assert_eq!(c.used_bytes(), 0);
    // The placeholder is gone: the next request loads.
    let a = c
        .get(0, || rels[0].tree.clone(), MatrixConfig::TreeOnly)
        .unwrap();
    assert_eq!(a.tree().nnz(), rels[0].tree.nnz());
}

#[test]
fn concurrent_queries_share_one_cache() {
    let rels = relations(12, 600, 13);
    let total: u64 = frontier_bytes(&rels).iter().sum();
    let threads = 4;
    // Every thread can hold one relation and its working memory at once.
    let max = *frontier_bytes(&rels).iter().max().unwrap();
    let budget = (total / 4).max(threads as u64 * (max + 2 * N as u64 * 8));
    let c = cache(budget);
    let ops_per_thread = 60;
    std::thread::scope(|s| {
        for t in 0..threads {
            let (c, rels) = (&c, &rels);
            s.spawn(move || {
                let mut rng = StdRng::seed_from_u64(100 + t as u64);
                for i in 0..ops_per_thread {
                    let k = rng.random_range(0..rels.len());
                    let traversal = if i % 3 == 0 {
                        Traversal::Dense
                    } else {
                        Traversal::Masked
                    };
                    step(c, rels, k, &random_sources(&mut rng), traversal);
                }
            });
        }
    });
    let s = c.stats();
    assert_eq!(s.hits + s.misses, (threads * ops_per_thread) as u64, "{s}");
    assert!(s.peak_bytes <= budget);
    assert_eq!((s.pinned_entries, s.reserved_bytes), (0, 0));
    assert!(s.evictions > 0);
    assert!(s.bytes_uploaded >= s.resident_bytes);
}

#[test]
fn simultaneous_requests_load_a_relation_once() {
    let rels = relations(1, 800, 14);
    let c = cache(1 << 20);
    let produced = AtomicUsize::new(0);
    let threads = 6;
    let barrier = Barrier::new(threads);
    std::thread::scope(|s| {
        for _ in 0..threads {
            s.spawn(|| {
                barrier.wait();
                let a = c
                    .get(
                        0,
                        || {
                            produced.fetch_add(1, Ordering::SeqCst);
                            // Widen the window in which the others arrive (not a timing
                            // assertion: the count below holds for any interleaving).
                            std::thread::sleep(std::time::Duration::from_millis(50));
                            rels[0].tree.clone()
                        },
                        MatrixConfig::CachedFrontier,
                    )
                    .unwrap();
                assert_eq!(a.tree().nnz(), rels[0].tree.nnz());
            });
        }
    });
    assert_eq!(produced.load(Ordering::SeqCst), 1);
    let s = c.stats();
    assert_eq!((s.misses, s.hits), (1, threads as u64 - 1));
}

#[test]
fn queries_blocking_each_other_fail_one_instead_of_hanging() {
    // Two queries each hold half the budget and ask for more: neither can proceed while
    // the other holds its half.
    let c = cache(1000);
    let barrier = Barrier::new(2);
    let outcomes: Vec<bool> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..2)
            .map(|_| {
                s.spawn(|| {
                    let held = c.reserve(500).unwrap();
                    barrier.wait();
                    let more = c.reserve(300);
                    check_budget(&c);
                    let ok = more.is_ok();
                    if let Err(e) = &more {
                        assert!(matches!(e, CacheError::Exhausted { .. }), "{e}");
                    }
                    drop(more);
                    drop(held);
                    ok
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    // Exactly one gave up; the other waited for its memory and went on.
    assert_eq!(outcomes.iter().filter(|&&ok| ok).count(), 1, "{outcomes:?}");
    let s = c.stats();
    assert_eq!(s.reserved_bytes, 0);
    assert!(s.peak_bytes <= 1000);
    assert_eq!(s.waits, 1);
}

#[test]
fn tight_budgets_with_long_queries_never_hang_or_overrun() {
    // Queries hold their frontiers across steps (as the RPQ executor does) and pin one
    // relation per step; the budget holds every thread's frontiers and about two
    // relations. A query either completes with the right answer or gets `Exhausted`.
    let rels = relations(8, 600, 16);
    let max = *frontier_bytes(&rels).iter().max().unwrap();
    let threads = 4;
    let frontier = 2 * N as u64 * 8;
    let c = cache(threads as u64 * frontier + 2 * max);
    let completed = AtomicUsize::new(0);
    let exhausted = AtomicUsize::new(0);
    std::thread::scope(|s| {
        for t in 0..threads {
            let (c, rels, completed, exhausted) = (&c, &rels, &completed, &exhausted);
            s.spawn(move || {
                let mut rng = StdRng::seed_from_u64(200 + t as u64);
                'query: for _ in 0..25 {
                    let held = c.reserve(frontier).unwrap();
                    check_budget(c);
                    let mut set = random_sources(&mut rng);
                    let mut oracle = set.clone();
                    for _ in 0..3 {
                        let k = rng.random_range(0..rels.len());
                        let a =
                            match c.get(k, || rels[k].tree.clone(), MatrixConfig::CachedFrontier) {
                                Ok(a) => a,
                                Err(CacheError::Exhausted { .. }) => {
                                    exhausted.fetch_add(1, Ordering::Relaxed);
                                    continue 'query;
                                }
                                Err(e) => panic!("{e}"),
                            };
                        check_budget(c);
                        set = forward(c, &a, &set, Traversal::Masked);
                        oracle = successors(&rels[k].edges, &oracle);
                        assert_eq!(set, oracle);
                    }
                    drop(held);
                    completed.fetch_add(1, Ordering::Relaxed);
                }
            });
        }
    });
    let done = completed.load(Ordering::Relaxed) + exhausted.load(Ordering::Relaxed);
    assert_eq!(done, threads * 25);
    let s = c.stats();
    assert_eq!((s.pinned_entries, s.reserved_bytes), (0, 0), "{s}");
    assert!(s.peak_bytes <= c.budget());
}

#[test]
fn a_query_waiting_for_a_load_that_waits_for_its_memory_does_not_hang() {
    // A loads the relation but its tree does not fit beside both reservations, so it waits
    // for B's memory; B, still holding its reservation, asks for the same relation and
    // waits for A's load. Whatever the order in which they block, A gives up and B, once
    // A's reservation is gone, loads the relation itself.
    use std::sync::mpsc::channel;
    use std::time::Duration;
    let rels = relations(1, 800, 17);
    let tree_only = bytes(&rels[0], MatrixConfig::TreeOnly);
    let (a_holds, b_holds) = (1000, 1000);
    let c = Arc::new(cache(a_holds + b_holds + tree_only - 1));
    let (reserved_tx, reserved_rx) = channel();
    let (loading_tx, loading_rx) = channel();
    let (done_tx, done_rx) = channel();
    // Guards belong to the thread that made them, so each query is one thread.
    let b = {
        let (c, tree) = (c.clone(), rels[0].tree.clone());
        std::thread::spawn(move || {
            let held = c.reserve(b_holds).unwrap();
            reserved_tx.send(()).unwrap();
            loading_rx.recv().unwrap();
            // Let A reach its wait first (the order that used to hang); the outcome below
            // holds for either order.
            std::thread::sleep(Duration::from_millis(100));
            let got = c.get(0, || tree, MatrixConfig::TreeOnly).map(drop);
            drop(held);
            done_tx.send(()).unwrap();
            got
        })
    };
    reserved_rx.recv().unwrap();
    let a = {
        let (c, tree) = (c.clone(), rels[0].tree.clone());
        std::thread::spawn(move || {
            let held = c.reserve(a_holds).unwrap();
            let got = c.get(
                0,
                || {
                    loading_tx.send(()).unwrap();
                    tree
                },
                MatrixConfig::TreeOnly,
            );
            drop(held);
            got.map(drop)
        })
    };
    done_rx
        .recv_timeout(Duration::from_secs(60))
        .expect("the two queries hang");
    let b = b.join().unwrap();
    assert!(b.is_ok(), "{:?}", b.err());
    let a = a.join().unwrap();
    assert!(matches!(a, Err(CacheError::Exhausted { .. })), "{a:?}");
    let s = c.stats();
    assert_eq!((s.pinned_entries, s.reserved_bytes), (0, 0), "{s}");
    assert_eq!(s.misses, 2);
    assert!(s.peak_bytes <= c.budget());
}
