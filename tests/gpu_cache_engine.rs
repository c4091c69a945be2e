//! The device cache over the real GPU engine: random Boolean products through a cache
//! whose budget holds a quarter of the relations, each checked against the CPU engine,
//! with the device's free memory (`cuMemGetInfo`) checked against the budget after every
//! operation. Without a GPU the test prints `SKIPPED (no GPU: ...)`.

use std::sync::Arc;

use k2rpq::cache::{CacheOptions, DeviceCache};
use k2rpq::engine::cpu::CpuEngine;
use k2rpq::engine::gpu::GpuEngine;
use k2rpq::engine::{BitMatrix, Direction, Engine, MatrixConfig, Traversal};
use k2rpq::k2tree::K2Tree;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

/// Device readings may exceed the cache's own count by this much: the memory pool's
/// granularity and the engine's allocations outside the cache (CUDA graphs, kernels).
const SLACK: u64 = 64 << 20;

fn gpu_products_through_the_cache_stay_within_budget_and_right() {
    let gpu = match GpuEngine::new(0) {
        Ok(e) => Arc::new(e),
        Err(e) => {
            println!("SKIPPED (no GPU: {e})");
            return;
        }
    };
    let cpu = CpuEngine::new();
    let n = 1u32 << 20;
    let mut rng = StdRng::seed_from_u64(1);
    let trees: Vec<Arc<K2Tree>> = (0..16)
        .map(|_| {
            let edges = (0..1_000_000)
                .map(|_| (rng.random_range(0..n), rng.random_range(0..n)))
                .collect();
            Arc::new(K2Tree::from_edges(n as u64, n as u64, edges))
        })
        .collect();
    let data: u64 = trees
        .iter()
        .map(|t| gpu.load_bytes(t, MatrixConfig::CachedFrontier))
        .sum();
    // A quarter of the data plus the largest product's batches and scratch.
    let mut work = 0u64;
    for t in &trees {
        let m = gpu.load(t, MatrixConfig::CachedFrontier).unwrap();
        for dir in [Direction::Left, Direction::Right] {
            for traversal in [Traversal::Dense, Traversal::Masked] {
                let b = gpu.product_bytes(&m, dir, 1, 8, Some((1, traversal)));
                work = work.max(b.scratch + b.vectors);
            }
        }
    }
    let budget = data / 4 + work;
    let ctx = gpu.cuda_context().clone();
    let stream = gpu.stream().clone();
    let mut watch = harness::DeviceMemoryWatch::new(ctx.clone(), stream.clone(), budget, SLACK);
    let cache: DeviceCache<GpuEngine, usize> =
        DeviceCache::new(gpu.clone(), CacheOptions::with_budget(budget));
    for i in 0..100 {
        let k = rng.random_range(0..trees.len());
        let dir = if rng.random::<bool>() {
            Direction::Left
        } else {
            Direction::Right
        };
        let traversal = if i % 4 == 0 {
            Traversal::Dense
        } else {
            Traversal::Masked
        };
        let a = cache
            .get(k, || trees[k].clone(), MatrixConfig::CachedFrontier)
            .unwrap();
        watch.check(&format!("loading relation {k}"), cache.used_bytes());
        let need = gpu.product_bytes(&a, dir, 1, 8, Some((1, traversal)));
        let working = cache.reserve(need.scratch + need.vectors).unwrap();
        let mut x = BitMatrix::zeroed(n as usize, 1);
        for s in 0..64 {
            x.set(rng.random_range(0..n as usize), s);
        }
        let xd = gpu.bits_upload(&x).unwrap();
        let mut yd = gpu.bits_zeroed(n as usize, 1).unwrap();
        gpu.bool_product(&a, dir, &xd, &mut yd, traversal).unwrap();
        watch.check(&format!("product {i} on relation {k}"), cache.used_bytes());
        let got = gpu.bits_download(&yd).unwrap();
        let host = cpu.load(&trees[k], MatrixConfig::TreeOnly).unwrap();
        let mut want = BitMatrix::zeroed(n as usize, 1);
        cpu.bool_product(&host, dir, &x, &mut want, traversal)
            .unwrap();
        assert_eq!(got, want, "product {i} on relation {k}");
        drop((xd, yd, working, a));
    }
    watch.finish(cache, data);
}

#[path = "harness/mod.rs"]
mod harness;

fn main() {
    harness::run(&[harness::GpuTest {
        name: "gpu_products_through_the_cache_stay_within_budget_and_right",
        needs: harness::Needs::Gpu,
        run: gpu_products_through_the_cache_stay_within_budget_and_right,
    }])
}
