//! The device-cache benchmark behind `k2rpq bench-cache`: a mixed workload of Boolean
//! products over many relations, run against a [`DeviceCache`] at several budgets given
//! as fractions of the data's size, reporting throughput and the cache's statistics.
//!
//! The workload is fixed by its seed, so every budget runs the same operations: each
//! picks a relation with Zipf-distributed popularity (a few hot relations, a long tail),
//! a direction, and a traversal (dense or masked), and runs one bit-packed product of a
//! batch of `64·words` single-node sources. Each operation reserves its working memory
//! (input and output batches) and pins its relation for the duration of the product, as
//! the RPQ executor does per step.

use std::sync::Arc;
use std::time::Instant;

use rand::rngs::SmallRng;
use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};
use rayon::prelude::*;

use k2rpq::cache::{human_bytes, CacheError, CacheOptions, CacheStats, DeviceCache};
use k2rpq::engine::{BitMatrix, Direction, Engine, MatrixConfig, Traversal};
use k2rpq::k2tree::{morton, K2Tree};

/// The workload's parameters.
#[derive(Clone, Debug)]
pub struct Workload {
    /// Products in all.
    pub ops: usize,
    /// Threads sharing the cache.
    pub threads: usize,
    /// Words per node of a batch (64 sources per word).
    pub words: usize,
    /// Zipf exponent of relation popularity (0: uniform).
    pub zipf: f64,
    /// Share of dense products (the rest are masked).
    pub dense_share: f64,
    /// The configuration requested for every relation.
    pub config: MatrixConfig,
    /// Cache tuning other than the budget ([`CacheOptions::hot_after`],
    /// [`CacheOptions::comfortable_fraction`]).
    pub hot_after: u64,
    /// See [`CacheOptions::comfortable_fraction`].
    pub comfortable_fraction: f64,
    /// Seed of the operation sequence.
    pub seed: u64,
}

impl Default for Workload {
    fn default() -> Self {
        let o = CacheOptions::with_budget(0);
        Workload {
            ops: 2000,
            threads: 4,
            words: 1,
            zipf: 1.0,
            dense_share: 0.25,
            config: MatrixConfig::CachedFrontier,
            hot_after: o.hot_after,
            comfortable_fraction: o.comfortable_fraction,
            seed: 1,
        }
    }
}

/// One budget's result.
#[derive(Clone, Debug, serde::Serialize)]
pub struct CacheBenchRow {
    /// The budget as a fraction of the data's size.
    pub fraction: f64,
    /// The budget in bytes (the fraction of the data plus the threads' working memory).
    pub budget: u64,
    /// Products run.
    pub ops: usize,
    /// Products refused with [`CacheError::Exhausted`]: every thread holding memory was
    /// blocked waiting for more (see [`DeviceCache`]'s waiting rules).
    pub refused: usize,
    /// Wall time of the workload.
    pub seconds: f64,
    /// Products per second.
    pub ops_per_second: f64,
    /// The cache's statistics at the end.
    pub stats: CacheStats,
}

/// Splits a square `nodes × nodes` graph (Morton codes) into `parts` relations of about
/// equal size, each edge to a relation chosen by a hash of the edge and `seed`.
pub fn split_relations(nodes: u64, codes: &[u64], parts: usize, seed: u64) -> Vec<Arc<K2Tree>> {
    let parts = parts.max(1);
    let mut buckets: Vec<Vec<u64>> = vec![Vec::with_capacity(codes.len() / parts + 1); parts];
    for &c in codes {
        buckets[(mix(c ^ seed) % parts as u64) as usize].push(c);
    }
    buckets
        .into_par_iter()
        .map(|mut b| {
            Arc::new(
                K2Tree::from_codes(nodes, nodes, &mut b).expect("codes of a square graph fit it"),
            )
        })
        .collect()
}

/// SplitMix64's finalizer: a well-spread hash of a word.
fn mix(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// Bytes of all relations loaded with `config`: the "data size" budgets are fractions of.
pub fn data_bytes<E: Engine>(engine: &E, relations: &[Arc<K2Tree>], config: MatrixConfig) -> u64 {
    relations.iter().map(|t| engine.load_bytes(t, config)).sum()
}

/// One product of the workload.
#[derive(Clone, Copy, Debug)]
struct Op {
    relation: usize,
    dir: Direction,
    traversal: Traversal,
    /// Seed of its sources.
    seed: u64,
}

/// The operations of each thread.
fn plan(relations: usize, w: &Workload) -> Vec<Vec<Op>> {
    let mut rng = SmallRng::seed_from_u64(w.seed);
    // Popularity by Zipf rank, ranks assigned to relations at random.
    let mut rank: Vec<usize> = (0..relations).collect();
    rank.shuffle(&mut rng);
    let weights: Vec<f64> = (0..relations)
        .map(|i| 1.0 / ((rank[i] + 1) as f64).powf(w.zipf))
        .collect();
    let mut cdf = Vec::with_capacity(relations);
    let mut acc = 0.0;
    for x in &weights {
        acc += x;
        cdf.push(acc);
    }
    let threads = w.threads.max(1);
    (0..threads)
        .map(|t| {
            let n = w.ops / threads + usize::from(t < w.ops % threads);
            (0..n)
                .map(|_| {
                    let u = rng.random::<f64>() * acc;
                    Op {
                        relation: cdf.partition_point(|&c| c <= u).min(relations - 1),
                        dir: if rng.random::<bool>() {
                            Direction::Left
                        } else {
                            Direction::Right
                        },
                        traversal: if rng.random::<f64>() < w.dense_share {
                            Traversal::Dense
                        } else {
                            Traversal::Masked
                        },
                        seed: rng.random(),
                    }
                })
                .collect()
        })
        .collect()
}

/// Working memory of one product: input and output batches.
fn working_bytes(tree: &K2Tree, words: usize) -> u64 {
    (tree.rows() + tree.cols()) * words as u64 * 8
}

/// Runs the workload once per budget fraction (each on a fresh cache) and returns a row
/// per budget. The budget of fraction `f` is `f × data_bytes` plus the working memory of
/// `threads` concurrent products on the largest relation.
pub fn run<E: Engine>(
    engine: Arc<E>,
    relations: &[Arc<K2Tree>],
    fractions: &[f64],
    w: &Workload,
) -> Result<Vec<CacheBenchRow>, CacheError> {
    if relations.is_empty() {
        return Ok(Vec::new());
    }
    let data = data_bytes(&*engine, relations, w.config);
    let working = relations
        .iter()
        .map(|t| working_bytes(t, w.words))
        .max()
        .unwrap_or(0);
    let ops = plan(relations.len(), w);
    fractions
        .iter()
        .map(|&fraction| {
            let budget = (data as f64 * fraction).ceil() as u64 + w.threads as u64 * working;
            let mut options = CacheOptions::with_budget(budget);
            options.hot_after = w.hot_after;
            options.comfortable_fraction = w.comfortable_fraction;
            let cache: DeviceCache<E, usize> = DeviceCache::new(engine.clone(), options);
            let start = Instant::now();
            let refused = std::thread::scope(|s| {
                let handles: Vec<_> = ops
                    .iter()
                    .map(|mine| {
                        let cache = &cache;
                        s.spawn(move || -> Result<usize, CacheError> {
                            let mut refused = 0;
                            for op in mine {
                                match product(cache, relations, op, w) {
                                    Ok(()) => {}
                                    Err(CacheError::Exhausted { .. }) => refused += 1,
                                    Err(e) => return Err(e),
                                }
                            }
                            Ok(refused)
                        })
                    })
                    .collect();
                handles.into_iter().try_fold(0, |sum, h| {
                    Ok::<_, CacheError>(sum + h.join().expect("a benchmark thread panicked")?)
                })
            })?;
            let seconds = start.elapsed().as_secs_f64();
            let n: usize = ops.iter().map(Vec::len).sum();
            Ok(CacheBenchRow {
                fraction,
                budget,
                ops: n,
                refused,
                seconds,
                ops_per_second: n as f64 / seconds.max(1e-9),
                stats: cache.stats(),
            })
        })
        .collect()
}

/// One operation: reserve, pin, product.
fn product<E: Engine>(
    cache: &DeviceCache<E, usize>,
    relations: &[Arc<K2Tree>],
    op: &Op,
    w: &Workload,
) -> Result<(), CacheError> {
    let tree = &relations[op.relation];
    let _working = cache.reserve(working_bytes(tree, w.words))?;
    let m = cache.get(op.relation, || tree.clone(), w.config)?;
    let (n_in, n_out) = op.dir.lengths(tree.rows(), tree.cols());
    let mut x = BitMatrix::zeroed(n_in as usize, w.words);
    let mut rng = SmallRng::seed_from_u64(op.seed);
    for s in 0..64 * w.words {
        x.set(rng.random_range(0..n_in as usize), s);
    }
    let engine = cache.engine();
    let x = engine.bits_upload(&x)?;
    let mut y = engine.bits_zeroed(n_out as usize, w.words)?;
    engine.bool_product(&m, op.dir, &x, &mut y, op.traversal)?;
    Ok(())
}

/// The rows as a Markdown table.
pub fn table(data_bytes: u64, rows: &[CacheBenchRow]) -> String {
    let mut out = String::from(
        "| budget | of data | ops | refused | seconds | ops/s | hit rate | misses | evictions | uploaded | upload s | peak | tree-only loads | waits |\n\
         |---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n",
    );
    for r in rows {
        let s = &r.stats;
        out.push_str(&format!(
            "| {} | {:.0}% | {} | {} | {:.3} | {:.0} | {:.1}% | {} | {} | {} | {:.3} | {} | {} | {} |\n",
            human_bytes(r.budget),
            100.0 * r.fraction,
            r.ops,
            r.refused,
            r.seconds,
            r.ops_per_second,
            100.0 * s.hit_rate(),
            s.misses,
            s.evictions,
            human_bytes(s.bytes_uploaded),
            s.upload_time.as_secs_f64(),
            human_bytes(s.peak_bytes),
            s.tree_only_loads,
            s.waits,
        ));
    }
    out.push_str(&format!("\nData: {}.\n", human_bytes(data_bytes)));
    out
}

/// Square side of a graph given as Morton codes: the largest id + 1.
pub fn side_of(codes: &[u64]) -> u64 {
    codes
        .par_iter()
        .map(|&c| {
            let (r, c) = morton::decode(c);
            r.max(c) as u64 + 1
        })
        .max()
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use k2rpq::engine::cpu::CpuEngine;

    #[test]
    fn small_workload_runs_at_every_budget() {
        let mut rng = SmallRng::seed_from_u64(3);
        let codes: Vec<u64> = (0..20_000)
            .map(|_| morton::encode(rng.random_range(0..1024), rng.random_range(0..1024)))
            .collect();
        let relations = split_relations(1024, &codes, 8, 5);
        assert_eq!(relations.len(), 8);
        let nnz: u64 = relations.iter().map(|t| t.nnz()).sum();
        let mut distinct = codes.clone();
        distinct.sort_unstable();
        distinct.dedup();
        assert_eq!(nnz, distinct.len() as u64);
        let w = Workload {
            ops: 200,
            threads: 2,
            ..Workload::default()
        };
        let rows = run(Arc::new(CpuEngine::new()), &relations, &[1.0, 0.5, 0.1], &w).unwrap();
        assert_eq!(rows.len(), 3);
        for r in &rows {
            assert_eq!(r.ops, 200);
            // Each thread can hold its batches and one tree-only relation: none is refused.
            assert_eq!(r.refused, 0);
            assert_eq!(r.stats.hits + r.stats.misses, 200);
            assert!(r.stats.peak_bytes <= r.budget);
        }
        // With everything fitting, each relation is loaded once; at 10% there is churn.
        assert_eq!(rows[0].stats.evictions, 0);
        assert!(rows[2].stats.evictions > 0);
        let t = table(data_bytes(&CpuEngine::new(), &relations, w.config), &rows);
        assert_eq!(t.lines().filter(|l| l.starts_with("| ")).count(), 4);
    }
}
