//! Dense single-vector products (plus-times, right and left) of a synthetic web graph over
//! the cached frontier, once per leaf kernel: a small program to time the leaf kernels
//! alone and to run under a profiler (issue 10). Prints the mean time of `REPS` products
//! (CUDA events; each product also zeroes `y`) per leaf kernel and frontier layout.
//!
//! ```text
//! profile_leaves [EDGES=200000000] [KERNELS=rows,window] [REPS=20] [LAYOUTS=blocks]
//! ncu --kernel-name regex:'blocks_' --section SpeedOfLight --section WarpStateStats \
//!     profile_leaves 200000000 rows,wagg 1 blocks,rowblocks
//! ```

use std::sync::Arc;

use k2rpq::bench::gen::Web;
use k2rpq::engine::gpu::{FrontierLayout, GpuEngine, GpuOptions, LeafKernel};
use k2rpq::engine::{Direction, Engine, MatrixConfig, PlusTimes};
use k2rpq::k2tree::K2Tree;

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let edges: u64 = args
        .get(1)
        .map_or(200_000_000, |s| s.parse().expect("EDGES"));
    let kernels: Vec<LeafKernel> = args
        .get(2)
        .map_or("rows,window", String::as_str)
        .split(',')
        .map(|k| LeafKernel::from_name(k).expect("a leaf kernel name"))
        .collect();
    let reps: usize = args.get(3).map_or(20, |s| s.parse().expect("REPS"));
    let layouts: Vec<FrontierLayout> = args
        .get(4)
        .map_or("blocks", String::as_str)
        .split(',')
        .map(|l| {
            FrontierLayout::ALL
                .into_iter()
                .find(|f| f.name() == l)
                .expect("a frontier layout: codes, blocks or rowblocks")
        })
        .collect();
    let g = Web::like_cnr(edges, 1).generate();
    let n = g.nodes;
    let mut codes = g.codes;
    let tree = Arc::new(K2Tree::from_codes(n, n, &mut codes).expect("tree"));
    drop(codes);
    println!("web {edges} edges: {} cells, {} nodes", tree.nnz(), n);
    for (k, frontier) in kernels
        .iter()
        .flat_map(|&k| layouts.iter().map(move |&f| (k, f)))
    {
        let gpu = GpuEngine::with_options(
            0,
            GpuOptions {
                leaf_kernel: k,
                frontier,
                ..GpuOptions::default()
            },
        )
        .expect("GPU");
        let m = gpu.load(&tree, MatrixConfig::CachedFrontier).expect("load");
        let x = gpu.upload(&vec![1.0f32; n as usize]).expect("x");
        let mut y = gpu.zeros::<f32>(n as usize).expect("y");
        for dir in [Direction::Right, Direction::Left] {
            let ms = gpu
                .time_ms(reps, || {
                    gpu.product_device::<PlusTimes>(&m, dir, &x, 1, &mut y)
                })
                .expect("product");
            let layout = m.frontier_layout().name();
            println!("{} {layout} {dir:?}: {ms:.4} ms per product", k.name());
        }
    }
}
