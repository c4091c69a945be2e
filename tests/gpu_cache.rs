//! The device cache against the device's own free-memory readings: a workload over more
//! relations than the budget holds, with the device memory in use (free memory before
//! the cache minus free memory now, `cuMemGetInfo`) checked after every operation.
//!
//! The relations are uploaded by a small engine local to this test (tree, directory and
//! frontier words in one device buffer, padded to [`PAD`] so that the driver's allocation
//! granularity does not blur the readings); it exercises the cache's accounting against
//! real allocations and frees. Without a GPU the test prints `SKIPPED (no GPU: ...)`.

use std::sync::Arc;

use cudarc::driver::{CudaContext, CudaSlice, CudaStream};
use k2rpq::cache::{CacheOptions, DeviceCache};
use k2rpq::engine::cpu::CpuEngine;
use k2rpq::engine::{
    BitMatrix, Direction, Engine, EngineError, MatrixConfig, Result, Semiring, Traversal,
};
use k2rpq::k2tree::K2Tree;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

/// Device buffers are padded to a multiple of this.
const PAD: u64 = 32 << 20;
/// Readings may exceed the cache's own count by this much (driver and pool bookkeeping).
const SLACK: u64 = 32 << 20;

/// Uploads trees; products are not its job.
struct UploadEngine {
    stream: Arc<CudaStream>,
}

struct Uploaded {
    words: CudaSlice<u64>,
    tree: Arc<K2Tree>,
}

fn cuda(e: impl std::fmt::Debug) -> EngineError {
    EngineError::Cuda(format!("{e:?}"))
}

fn unsupported<T>() -> Result<T> {
    Err(EngineError::Unsupported(
        "the test's upload engine only loads".into(),
    ))
}

impl Engine for UploadEngine {
    type Matrix = Uploaded;
    type Bits = BitMatrix;

    fn name(&self) -> &'static str {
        "upload-test"
    }

    fn load(&self, tree: &Arc<K2Tree>, config: MatrixConfig) -> Result<Uploaded> {
        let mut host: Vec<u64> = tree.nibbles()[..tree.nodes().div_ceil(16) as usize].to_vec();
        host.extend_from_slice(&tree.directory().ranks);
        if config == MatrixConfig::CachedFrontier {
            host.extend_from_slice(tree.frontier());
        }
        host.resize((self.load_bytes(tree, config) / 8) as usize, 0);
        let words = self.stream.clone_htod(&host).map_err(cuda)?;
        self.stream.synchronize().map_err(cuda)?;
        Ok(Uploaded {
            words,
            tree: tree.clone(),
        })
    }

    fn matrix_tree<'m>(&self, m: &'m Uploaded) -> &'m Arc<K2Tree> {
        &m.tree
    }

    fn matrix_bytes(&self, m: &Uploaded) -> u64 {
        m.words.len() as u64 * 8
    }

    fn load_bytes(&self, tree: &K2Tree, config: MatrixConfig) -> u64 {
        CpuEngine::new().load_bytes(tree, config).div_ceil(PAD) * PAD
    }

    fn product<S: Semiring>(
        &self,
        _: &Uploaded,
        _: Direction,
        _: &[S::Elem],
        _: usize,
        _: &mut [S::Elem],
    ) -> Result<()> {
        unsupported()
    }
    fn bits_zeroed(&self, _: usize, _: usize) -> Result<BitMatrix> {
        unsupported()
    }
    fn bits_upload(&self, _: &BitMatrix) -> Result<BitMatrix> {
        unsupported()
    }
    fn bits_download(&self, _: &BitMatrix) -> Result<BitMatrix> {
        unsupported()
    }
    fn bits_clear(&self, _: &mut BitMatrix) -> Result<()> {
        unsupported()
    }
    fn bits_or(&self, _: &mut BitMatrix, _: &BitMatrix) -> Result<()> {
        unsupported()
    }
    fn bits_advance(&self, _: &mut BitMatrix, _: &mut BitMatrix) -> Result<u64> {
        unsupported()
    }
    fn bool_product(
        &self,
        _: &Uploaded,
        _: Direction,
        _: &BitMatrix,
        _: &mut BitMatrix,
        _: Traversal,
    ) -> Result<()> {
        unsupported()
    }
}

/// The device's context, or why there is none.
fn device() -> std::result::Result<Arc<CudaContext>, String> {
    // cudarc panics on first use when libcuda is missing: ask first.
    if !unsafe { cudarc::driver::sys::is_culib_present() } {
        return Err("libcuda not found".into());
    }
    match CudaContext::device_count() {
        Ok(n) if n > 0 => CudaContext::new(0).map_err(|e| format!("{e:?}")),
        Ok(_) => Err("no CUDA device".into()),
        Err(e) => Err(format!("{e:?}")),
    }
}

fn device_memory_stays_within_the_budget() {
    let ctx = match device() {
        Ok(c) => c,
        Err(why) => {
            println!("SKIPPED (no GPU: {why})");
            return;
        }
    };
    let stream = ctx.default_stream();
    let engine = Arc::new(UploadEngine {
        stream: stream.clone(),
    });
    // 24 relations of one PAD unit each.
    let mut rng = StdRng::seed_from_u64(1);
    let trees: Vec<Arc<K2Tree>> = (0..24)
        .map(|_| {
            let n = 1u32 << 16;
            let edges = (0..20_000)
                .map(|_| (rng.random_range(0..n), rng.random_range(0..n)))
                .collect();
            Arc::new(K2Tree::from_edges(n as u64, n as u64, edges))
        })
        .collect();
    let total: u64 = trees
        .iter()
        .map(|t| engine.load_bytes(t, MatrixConfig::CachedFrontier))
        .sum();
    let budget = total / 4;
    let working = PAD / 2;

    let mut watch = harness::DeviceMemoryWatch::new(ctx.clone(), stream.clone(), budget, SLACK);
    let cache: DeviceCache<UploadEngine, usize> =
        DeviceCache::new(engine.clone(), CacheOptions::with_budget(budget));
    for i in 0..200 {
        let k = rng.random_range(0..trees.len());
        let reservation = cache.reserve(working).unwrap();
        let scratch = stream.alloc_zeros::<u8>(working as usize).unwrap();
        watch.check("reserving working memory", cache.used_bytes());
        let pinned = cache
            .get(k, || trees[k].clone(), MatrixConfig::CachedFrontier)
            .unwrap();
        watch.check(
            &format!("operation {i} on relation {k}"),
            cache.used_bytes(),
        );
        drop(pinned);
        drop(scratch);
        drop(reservation);
    }
    watch.check("the workload", cache.used_bytes());
    watch.finish(cache, total);
}

#[path = "harness/mod.rs"]
mod harness;

fn main() {
    harness::run(&[harness::GpuTest {
        name: "device_memory_stays_within_the_budget",
        needs: harness::Needs::Gpu,
        run: device_memory_stays_within_the_budget,
    }])
}
