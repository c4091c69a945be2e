//! One batched Boolean product on a k²-tree: the successors of 64 start nodes at once, the
//! 64 sources bit-packed in one `u64` word per node. On the GPU when one is usable, checked
//! against the CPU engine (the oracle for every GPU kernel).
//!
//! Run: `cargo run --release --example gpu_batch`

use std::sync::Arc;

use k2rpq::engine::cpu::CpuEngine;
use k2rpq::engine::gpu::GpuEngine;
use k2rpq::engine::{BitMatrix, Direction, Engine, EngineError, MatrixConfig, Traversal};
use k2rpq::k2tree::K2Tree;

fn main() -> Result<(), EngineError> {
    // A graph of 100,000 nodes, each linked to three pseudo-random others.
    let n: u32 = 100_000;
    let edges: Vec<(u32, u32)> = (0..n)
        .flat_map(|s| {
            (1..=3u64).map(move |k| (s, ((s as u64 * 2_654_435_761 * k) % n as u64) as u32))
        })
        .collect();
    let tree = Arc::new(K2Tree::from_edges(n as u64, n as u64, edges));
    let stats = tree.stats();
    println!(
        "{} edges in {} bytes of k²-tree",
        stats.nnz, stats.tree_bytes
    );

    // Source s of the batch starts at node 1000·s: bit s of node 1000·s's word.
    let mut x = BitMatrix::zeroed(n as usize, 1);
    for s in 0..64 {
        x.set(1000 * s, s);
    }
    let expected = successors(&CpuEngine::new(), &tree, &x)?;
    match GpuEngine::new(0) {
        Ok(gpu) => {
            let got = successors(&gpu, &tree, &x)?;
            assert_eq!(got, expected, "the GPU disagrees with the CPU engine");
            println!(
                "GPU and CPU agree: {} (node, source) pairs",
                got.count_ones()
            );
        }
        Err(why) => println!(
            "{why}; CPU only: {} (node, source) pairs",
            expected.count_ones()
        ),
    }
    Ok(())
}

/// `yᵀ = xᵀ A`: the successors of every source's nodes (a left product follows edges
/// forwards).
fn successors<E: Engine>(
    engine: &E,
    tree: &Arc<K2Tree>,
    x: &BitMatrix,
) -> Result<BitMatrix, EngineError> {
    let matrix = engine.load(tree, MatrixConfig::CachedFrontier)?;
    let xd = engine.bits_upload(x)?;
    let mut yd = engine.bits_zeroed(tree.cols() as usize, x.words())?;
    engine.bool_product_overwrite(&matrix, Direction::Left, &xd, &mut yd, Traversal::Dense)?;
    engine.bits_download(&yd)
}
