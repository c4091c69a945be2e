//! Tree-only products of a synthetic web graph (or of an edge-list file), once per number
//! of levels an expand step may take (`Tuning::fused_levels`): prints each descent's
//! plan (launches and nodes per level, scratch) and the mean time of `REPS` products per
//! direction (CUDA events, device time). A small program to run under a profiler, where
//! each launch's duration splits a descent into its expand and leaf steps: with
//! `REPS=0` each product runs once, after a stream hold (`k2rpq_hold`) that marks where it
//! starts in the profile (`scripts/ncu-sum.py` sums each product's launches per kernel).
//! With `DESCENT_KERNEL_DIRS=a,b,…` every measurement is repeated once per folder of kernel
//! sources (through `K2RPQ_KERNEL_DIR`), over the same graph, and with
//! `DESCENT_WARP_CHUNKS=1,4,…` once per `Tuning::warp_chunks`, and with
//! `DESCENT_TOP_NODES=20,22,…` once per `Tuning::top_nodes` (log2), and with
//! `DESCENT_LONE_PATHS=0,6,…` once per `Tuning::lone_paths`. Each product's `y` (of
//! `x` = ones: the rows' or columns' cell counts) is checked against the tree's cells,
//! counted on the host; a mismatch is printed and makes the exit status 1.
//!
//! ```text
//! profile-descent [EDGES=200000000 | EDGE-LIST-FILE] [FUSED=1,3] [REPS=20]
//! ncu --clock-control none --metrics gpu__time_duration.sum --csv profile-descent 200000000 1,3 0
//! ```

use std::collections::BTreeMap;
use std::sync::Arc;

use k2rpq::engine::gpu::{hold_stream, GpuEngine, GpuOptions, OffsetSource, StepKind, Tuning};
use k2rpq::engine::{Direction, Engine, MatrixConfig, PlusTimes};
use k2rpq_bench::input::web_or_edge_list;

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let source = args.get(1).map_or("200000000", String::as_str);
    let fused: Vec<u32> = args
        .get(2)
        .map_or("1,3", String::as_str)
        .split(',')
        .map(|l| l.parse().expect("FUSED: levels per expand step, e.g. 1,3"))
        .collect();
    let reps: usize = args.get(3).map_or(20, |s| s.parse().expect("REPS"));
    let (name, g) = web_or_edge_list(source).expect("a number of edges or an edge list");
    let (rows, cols) = (g.rows, g.cols);
    let tree = Arc::new(g.into_tree().expect("tree"));
    let n = rows.max(cols) as usize;
    println!("{name}: {} cells, {rows}x{cols}", tree.nnz());
    // y of x = ones: right products count each row's cells, left ones each column's
    // (exact in f32 below 2^24 cells per line).
    let (mut per_row, mut per_col) = (vec![0.0f32; n], vec![0.0f32; n]);
    for (r, c) in tree.cells() {
        per_row[r as usize] += 1.0;
        per_col[c as usize] += 1.0;
    }
    let mut mismatches = 0usize;
    let dirs: Vec<Option<String>> = match std::env::var("DESCENT_KERNEL_DIRS") {
        Ok(list) => list.split(',').map(|d| Some(d.to_string())).collect(),
        Err(_) => vec![None],
    };
    let defaults = Tuning::default();
    let chunks = env_list("DESCENT_WARP_CHUNKS", defaults.warp_chunks);
    let tops: Vec<u64> = env_list("DESCENT_TOP_NODES", defaults.top_nodes.trailing_zeros())
        .into_iter()
        .map(|t| 1 << t)
        .collect();
    let lones = env_list("DESCENT_LONE_PATHS", defaults.lone_paths);
    let runs = dirs
        .iter()
        .flat_map(|d| fused.iter().map(move |&l| (d, l)))
        .flat_map(|(d, l)| chunks.iter().map(move |&c| (d, l, c)))
        .flat_map(|(d, l, c)| tops.iter().map(move |&t| (d, l, c, t)))
        .flat_map(|(d, l, c, t)| lones.iter().map(move |&p| (d, l, c, t, p)))
        .enumerate();
    for (i, (dir, levels, warp_chunks, top_nodes, lone_paths)) in runs {
        if let Some(d) = dir {
            std::env::set_var("K2RPQ_KERNEL_DIR", d);
            print!("[{d}] ");
        }
        print!(
            "warp_chunks {warp_chunks}, top_nodes 2^{}, lone_paths {lone_paths}, ",
            top_nodes.trailing_zeros()
        );
        let gpu = GpuEngine::with_options(
            0,
            GpuOptions {
                tuning: Tuning {
                    fused_levels: levels,
                    warp_chunks,
                    top_nodes,
                    lone_paths,
                    ..defaults
                },
                ..GpuOptions::default()
            },
        )
        .unwrap_or_else(|e| {
            eprintln!("profile-descent needs a GPU: {e}");
            std::process::exit(2)
        });
        let m = gpu.load(&tree, MatrixConfig::TreeOnly).expect("load");
        let plan = m.dense_plan(OffsetSource::Directory);
        // (level, levels per step, leaf step) -> (launches, nodes)
        let mut per: BTreeMap<(u32, u32, bool), (u64, u64)> = BTreeMap::new();
        for s in &plan.steps {
            let e = per
                .entry((s.level, s.levels, s.kind != StepKind::Expand))
                .or_default();
            *e = (e.0 + 1, e.1 + s.count);
        }
        let scratch: u64 = plan.scratch_codes.iter().sum::<u64>() * 8;
        println!(
            "fused_levels {levels}: top level {}, {:.1} MB resident, {} lone cells, tiles of {}, {} launches, {:.1} MB of codes scratch",
            m.top_level().level,
            m.bytes() as f64 / 1e6,
            m.lone_cells(),
            m.tile_sizes().descend,
            plan.launches(),
            scratch as f64 / 1e6
        );
        for ((level, down, leaf), (launches, nodes)) in per {
            let what = if leaf { "leaf step" } else { "expand" };
            println!("  level {level:>2} {what} of {down} level(s): {launches:>4} launches, {nodes:>11} nodes");
        }
        let x = gpu.upload(&vec![1.0f32; n]).expect("x");
        let mut y = gpu.zeros::<f32>(n).expect("y");
        for dir in [Direction::Right, Direction::Left] {
            if reps == 0 {
                let stream = gpu.stream();
                hold_stream(stream, 1000).expect("hold");
                gpu.product_device::<PlusTimes>(&m, dir, &x, 1, &mut y)
                    .expect("product");
                stream.synchronize().expect("synchronize");
                print!(
                    "  {dir:?}: one product (profile: after hold {})",
                    2 * i + dir_index(dir)
                );
            } else {
                let ms = gpu
                    .time_ms(reps, || {
                        gpu.product_device::<PlusTimes>(&m, dir, &x, 1, &mut y)
                    })
                    .expect("product");
                print!("  {dir:?}: {ms:.4} ms per product");
            }
            let want = match dir {
                Direction::Right => &per_row,
                Direction::Left => &per_col,
            };
            let got = gpu.download(&y).expect("download y");
            let wrong: Vec<usize> = (0..n).filter(|&i| got[i] != want[i]).collect();
            match wrong.first() {
                None => println!(", y checked"),
                Some(&i) => {
                    mismatches += 1;
                    println!(
                        ", y WRONG at {} of {n} entries (first {i}: {} instead of {})",
                        wrong.len(),
                        got[i],
                        want[i]
                    );
                }
            }
        }
    }
    if mismatches > 0 {
        eprintln!("{mismatches} products gave a wrong y");
        std::process::exit(1);
    }
}

/// Right products first, then left: the order of the holds in a profile.
fn dir_index(dir: Direction) -> usize {
    match dir {
        Direction::Right => 0,
        Direction::Left => 1,
    }
}

/// The comma-separated numbers of environment variable `name`, or `[default]` without it.
fn env_list(name: &str, default: u32) -> Vec<u32> {
    match std::env::var(name) {
        Ok(list) => list
            .split(',')
            .map(|v| {
                v.trim()
                    .parse()
                    .unwrap_or_else(|_| panic!("{name}: numbers, e.g. 0,6 (got {v:?})"))
            })
            .collect(),
        Err(_) => vec![default],
    }
}
