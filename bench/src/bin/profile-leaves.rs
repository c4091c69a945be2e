//! Dense products (right and left) of a synthetic web graph (or of an edge-list file) over
//! the cached frontier, once per leaf kernel: a small program to time the leaf kernels
//! alone and to run under a profiler. Prints the mean time of `REPS` products
//! (CUDA events; each product also zeroes `y`) per leaf kernel and frontier layout. `OP`
//! is `f32` (a plus-times single vector, the default) or `bits` (a bit-packed batch of 64
//! sources, random words). With `PROFILE_KERNEL_DIRS=a,b,…` every measurement is repeated
//! once per folder of kernel sources (through `K2RPQ_KERNEL_DIR`), over the same graph.
//! With `PROFILE_TRANSPOSE=1` the graph is transposed first, so that its right products
//! time what a left product of the original would take over column-sorted block entries.
//!
//! ```text
//! profile-leaves [EDGES=200000000 | EDGE-LIST-FILE] [KERNELS=rows,window] [REPS=20] \
//!     [LAYOUTS=blocks] [OP=f32]
//! PROFILE_KERNEL_DIRS=$PWD/exp/a,$PWD/exp/b profile-leaves cnr-2000.arcs.tsv.gz runs 200 rowblocks bits
//! ncu --kernel-name regex:'blocks_' --section SpeedOfLight --section WarpStateStats \
//!     profile-leaves 200000000 rows,wagg 1 blocks,rowblocks
//! ncu --kernel-name blocks_rows_bits --section SpeedOfLight --section WarpStateStats \
//!     --section InstructionStats profile-leaves 200000000 rows 1 rowblocks bits
//! ```

use std::sync::Arc;

use k2rpq::engine::gpu::{FrontierLayout, GpuEngine, GpuOptions, LeafKernel, Tuning};
use k2rpq::engine::{BitMatrix, Direction, Engine, MatrixConfig, PlusTimes, Traversal};
use k2rpq::k2tree::{morton, K2Tree};
use k2rpq_bench::input::web_or_edge_list;

fn main() {
    let args: Vec<String> = std::env::args().collect();
    // A number of edges (a synthetic web graph) or an edge-list file.
    let source = args.get(1).map_or("200000000", String::as_str);
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
            FrontierLayout::from_name(l)
                .expect("a frontier layout: codes, blocks, rowblocks, colblocks or both")
        })
        .collect();
    let bits = match args.get(5).map_or("f32", String::as_str) {
        "f32" => false,
        "bits" => true,
        other => panic!("OP is f32 or bits, not {other}"),
    };
    let (name, g) = web_or_edge_list(source).expect("a number of edges or an edge list");
    let (rows, cols, mut codes) = (g.rows, g.cols, g.codes);
    let (rows, cols) = if std::env::var_os("PROFILE_TRANSPOSE").is_some() {
        for c in codes.iter_mut() {
            let (r, k) = morton::decode(*c);
            *c = morton::encode(k, r);
        }
        (cols, rows)
    } else {
        (rows, cols)
    };
    let tree = Arc::new(K2Tree::from_codes(rows, cols, &mut codes).expect("tree"));
    drop(codes);
    // Products read x over the columns (right) or rows (left): one vector of the larger side.
    let n = rows.max(cols);
    println!("{name}: {} cells, {rows}x{cols}", tree.nnz());
    // PROFILE_KERNEL_DIRS=a,b: every measurement once per kernel-source folder (each
    // compiled through K2RPQ_KERNEL_DIR), so variants of a kernel share one generated graph.
    let dirs: Vec<Option<String>> = match std::env::var("PROFILE_KERNEL_DIRS") {
        Ok(list) => list.split(',').map(|d| Some(d.to_string())).collect(),
        Err(_) => vec![None],
    };
    let mut runs = Vec::new();
    for dir in &dirs {
        for &k in &kernels {
            for &frontier in &layouts {
                runs.push((dir, k, frontier));
            }
        }
    }
    for (dir, k, frontier) in runs {
        if let Some(d) = dir {
            std::env::set_var("K2RPQ_KERNEL_DIR", d);
            print!("[{d}] ");
        }
        let gpu = GpuEngine::with_options(
            0,
            GpuOptions {
                frontier,
                tuning: Tuning {
                    leaf_kernel: k,
                    ..Tuning::default()
                },
            },
        )
        .unwrap_or_else(|e| {
            eprintln!("profile-leaves needs a GPU: {e}");
            std::process::exit(2)
        });
        let m = gpu.load(&tree, MatrixConfig::CachedFrontier).expect("load");
        let x = gpu.upload(&vec![1.0f32; n as usize]).expect("x");
        let mut y = gpu.zeros::<f32>(n as usize).expect("y");
        // A fixed pseudo-random word per row (splitmix64), so every run reads the same bits.
        let words = (0..n)
            .map(|i| {
                let z = (i + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15);
                let z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
                z ^ (z >> 27)
            })
            .collect();
        let xb = gpu
            .bits_upload(&BitMatrix::from_words(n as usize, 1, words))
            .expect("bit batch");
        let mut yb = gpu.bits_zeroed(n as usize, 1).expect("bit batch");
        for dir in [Direction::Right, Direction::Left] {
            let ms = gpu
                .time_ms(reps, || {
                    if bits {
                        gpu.bits_clear(&mut yb)?;
                        gpu.bool_product(&m, dir, &xb, &mut yb, Traversal::Dense)
                    } else {
                        gpu.product_device::<PlusTimes>(&m, dir, &x, 1, &mut y)
                    }
                })
                .expect("product");
            let layout = m.frontier_layout().name();
            let op = if bits { "bits W=1" } else { "f32" };
            println!("{} {layout} {op} {dir:?}: {ms:.4} ms per product", k.name());
        }
    }
}
