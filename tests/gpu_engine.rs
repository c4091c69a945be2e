//! The GPU engine against the CPU engine (the oracle): every product variant on random
//! matrices and on cnr-2000, bit-for-bit on Boolean, Counting and Tropical, relative error
//! <= 1e-6 on f32. Without a GPU every device test prints `SKIPPED (no GPU: <reason>)`;
//! the NVRTC test compiles every kernel wherever libnvrtc loads, GPU or not.

use std::io::BufRead;
use std::sync::Arc;

use k2rpq::engine::cpu::CpuEngine;
use k2rpq::engine::gpu::{
    self, BitsUpdate, FrontierLayout, GpuEngine, GpuOptions, LeafKernel, OffsetSource, Tuning,
};
use k2rpq::engine::{
    BitMatrix, Boolean, Counting, Direction, Engine, EngineError, MatrixConfig, PlusTimes,
    Semiring, Traversal, Tropical,
};
use k2rpq::k2tree::K2Tree;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

const DIRS: [Direction; 2] = [Direction::Right, Direction::Left];
const CONFIGS: [MatrixConfig; 2] = [MatrixConfig::TreeOnly, MatrixConfig::CachedFrontier];

/// The engine with `options`, or `None` after printing why the test is skipped.
fn gpu_or_skip(options: GpuOptions) -> Option<GpuEngine> {
    match gpu::available(0) {
        Err(reason) => {
            println!("SKIPPED (no GPU: {reason})");
            None
        }
        Ok(_) => Some(GpuEngine::with_options(0, options).expect("GPU present but engine failed")),
    }
}

/// Tiles of `tile_nodes` nodes under a top level of `top_nodes`, with `offset_source`
/// and `leaf_kernel`, and one level per expand launch (the default fuses): sets may
/// change that with [`tuned`].
fn tiled(
    tile_nodes: u64,
    top_nodes: u64,
    offset_source: Option<OffsetSource>,
    leaf_kernel: LeafKernel,
) -> GpuOptions {
    GpuOptions {
        tuning: Tuning {
            tile_nodes: Some(tile_nodes),
            top_nodes,
            offset_source,
            leaf_kernel,
            fused_levels: 1,
            ..Tuning::default()
        },
        ..GpuOptions::default()
    }
}

/// `o` with its tuning changed by `f`.
fn tuned(mut o: GpuOptions, f: impl FnOnce(&mut Tuning)) -> GpuOptions {
    f(&mut o.tuning);
    o
}

/// Option sets that exercise tiling (tiny tiles), deep device-side descents (top level =
/// the root) and both offset sources.
/// Every other leaf kernel variant gets four of them: steps shorter than a warp with the
/// directory (the warp rank's partial warps), the scan's offsets (the warp-rank kernels
/// then read them), deep descents through `expand_wrank`, and the defaults (automatic
/// tiles); batches of 3 in `check_matrix` put several lanes of a warp on one node (and
/// make the `window` kernel's window hold a third of the output indices, so outputs
/// beyond it go to `y` directly).
fn option_sets() -> Vec<GpuOptions> {
    let mut out = Vec::new();
    for leaf_kernel in std::iter::once(LeafKernel::Tuned).chain(LeafKernel::ALL) {
        let o = |tile_nodes, top_nodes, offset_source| {
            tiled(tile_nodes, top_nodes, offset_source, leaf_kernel)
        };
        let auto = GpuOptions {
            tuning: Tuning {
                leaf_kernel,
                ..Tuning::default()
            },
            ..GpuOptions::default()
        };
        // Every frontier layout under every kernel (`cells` and `window` keep codes).
        out.extend(
            FrontierLayout::ALL
                .into_iter()
                .filter(|&f| f != auto.frontier)
                .map(|frontier| GpuOptions { frontier, ..auto }),
        );
        if leaf_kernel == LeafKernel::default() {
            out.extend([
                GpuOptions {
                    frontier: FrontierLayout::RowBlocks,
                    ..o(64, 1, Some(OffsetSource::Scan))
                },
                auto,
                o(1 << 20, 1 << 16, None),
                o(4, 1, Some(OffsetSource::Directory)),
                o(4, 1, Some(OffsetSource::Scan)),
                o(64, 1, None),
                o(1 << 20, 1, Some(OffsetSource::Scan)),
                o(16, 1 << 16, Some(OffsetSource::Directory)),
                o(3000, 4, Some(OffsetSource::Scan)),
                // Every step launched after its predecessor ends, as before sm_90.
                tuned(o(64, 1, None), |t| t.overlapped_launches = false),
                // Expand steps of up to three levels (the other sets: one per launch),
                // with the directory, the scan (whose offsets such steps do not use) and
                // masked products through them (`check_matrix`).
                tuned(o(64, 1, Some(OffsetSource::Directory)), |t| {
                    t.fused_levels = Tuning::MAX_FUSED_LEVELS
                }),
                tuned(o(3000, 4, Some(OffsetSource::Scan)), |t| {
                    t.fused_levels = Tuning::MAX_FUSED_LEVELS
                }),
                tuned(o(1 << 20, 1, None), |t| {
                    t.fused_levels = Tuning::MAX_FUSED_LEVELS
                }),
                // Warps that take several chunks of fused expand and octet steps in a row
                // and carry their ranks (the automatic choice chunks only steps that fill
                // the GPU, larger than these): partial last chunks, warps with none.
                tuned(o(3000, 4, Some(OffsetSource::Directory)), |t| {
                    t.fused_levels = Tuning::MAX_FUSED_LEVELS;
                    t.warp_chunks = 3;
                }),
                tuned(o(1 << 20, 1, None), |t| {
                    t.fused_levels = Tuning::MAX_FUSED_LEVELS;
                    t.warp_chunks = 64;
                }),
                // Subtree launches for the last levels (`check_matrix` runs them dense,
                // masked, batched and bit-packed, both directions): from the root with
                // tiles of four (blocks with fewer roots than SUBTREE_ROOTS), two levels
                // under fused expand steps with the scan (which subtree steps ignore),
                // and the deepest subtrees under a default top.
                tuned(o(4, 1, Some(OffsetSource::Directory)), |t| {
                    t.subtree_levels = Tuning::MAX_SUBTREE_LEVELS
                }),
                tuned(o(3000, 4, Some(OffsetSource::Scan)), |t| {
                    t.subtree_levels = 2;
                    t.fused_levels = Tuning::MAX_FUSED_LEVELS;
                }),
                tuned(o(1 << 20, 1 << 16, None), |t| {
                    t.subtree_levels = Tuning::MAX_SUBTREE_LEVELS
                }),
                tuned(o(64, 1, None), |t| t.subtree_levels = 5),
                // Leaf steps over the leaves' parents (4x4 blocks) instead of the
                // default octet leaf steps a level above them: with the automatic tiles,
                // from the root in small tiles, fused and with the scan.
                tuned(auto, |t| t.octets = false),
                tuned(o(64, 1, None), |t| t.octets = false),
                tuned(o(3000, 4, Some(OffsetSource::Scan)), |t| {
                    t.octets = false;
                    t.fused_levels = Tuning::MAX_FUSED_LEVELS;
                }),
                // Tree-only matrices without their lone cells (cells alone below paths
                // of at least 1, 3 or 6 nodes, applied by a launch of their own after
                // the descent): with the defaults, from the root in small tiles, fused
                // with the scan, into subtree launches and into 4x4 leaf steps.
                tuned(auto, |t| t.lone_paths = 1),
                tuned(o(64, 1, None), |t| t.lone_paths = 3),
                tuned(o(3000, 4, Some(OffsetSource::Scan)), |t| {
                    t.lone_paths = 6;
                    t.fused_levels = Tuning::MAX_FUSED_LEVELS;
                }),
                tuned(o(64, 1, None), |t| {
                    t.lone_paths = 3;
                    t.subtree_levels = 5;
                }),
                tuned(auto, |t| {
                    t.lone_paths = 3;
                    t.octets = false;
                }),
            ]);
        } else {
            out.extend([
                auto,
                o(4, 1, Some(OffsetSource::Directory)),
                o(64, 1, Some(OffsetSource::Scan)),
                o(3000, 4, Some(OffsetSource::Directory)),
            ]);
        }
    }
    out
}

fn random_tree(rng: &mut StdRng, rows: u64, cols: u64, m: usize, clustered: bool) -> Arc<K2Tree> {
    let edges = (0..m)
        .map(|_| {
            let r = rng.random_range(0..rows) as u32;
            let c = if clustered {
                // Near the diagonal, as crawls in locality order: deeper, denser subtrees.
                let span = 64.min(cols) as i64;
                let c = r as i64 * cols as i64 / rows as i64 + rng.random_range(-span..span);
                c.clamp(0, cols as i64 - 1) as u32
            } else {
                rng.random_range(0..cols) as u32
            };
            (r, c)
        })
        .collect();
    Arc::new(K2Tree::from_edges(rows, cols, edges))
}

fn random_matrices() -> Vec<(String, Arc<K2Tree>)> {
    let mut rng = StdRng::seed_from_u64(7);
    let mut out = vec![
        (
            "empty 8x8".to_string(),
            Arc::new(K2Tree::from_edges(8, 8, vec![])),
        ),
        (
            "single cell 1x1".into(),
            Arc::new(K2Tree::from_edges(1, 1, vec![(0, 0)])),
        ),
        (
            "single cell 7x3".into(),
            Arc::new(K2Tree::from_edges(7, 3, vec![(6, 2)])),
        ),
        (
            "full 16x16".into(),
            Arc::new(K2Tree::from_edges(
                16,
                16,
                (0..16).flat_map(|r| (0..16).map(move |c| (r, c))).collect(),
            )),
        ),
    ];
    for &(rows, cols, m, clustered) in &[
        (37u64, 200u64, 300usize, false),
        (200, 37, 300, false),
        (1000, 1000, 5000, false),
        (3000, 2500, 40000, true),
        (4096, 4096, 30000, false),
    ] {
        out.push((
            format!(
                "random {rows}x{cols} m={m}{}",
                if clustered { " clustered" } else { "" }
            ),
            random_tree(&mut rng, rows, cols, m, clustered),
        ));
    }
    out
}

/// Random inputs of each semiring for `n` entries.
fn input<S: Semiring>(rng: &mut StdRng, n: usize, exact: bool) -> Vec<S::Elem>
where
    S::Elem: FromSample,
{
    (0..n).map(|_| S::Elem::sample::<S>(rng, exact)).collect()
}

/// Draws one input entry for a semiring: zeros included, tropical infinities included.
trait FromSample: Sized {
    fn sample<S: Semiring>(rng: &mut StdRng, exact: bool) -> Self;
}
impl FromSample for f32 {
    fn sample<S: Semiring>(rng: &mut StdRng, exact: bool) -> f32 {
        if S::KIND == k2rpq::engine::SemiringKind::Tropical {
            if rng.random_bool(0.3) {
                f32::INFINITY
            } else {
                rng.random_range(0..50) as f32
            }
        } else if rng.random_bool(0.2) {
            0.0
        } else if exact {
            // Multiples of 1/16 below 1: sums of up to 2^20 of them are exact in f32, so
            // the order of the atomic additions cannot matter.
            rng.random_range(1..16) as f32 / 16.0
        } else {
            rng.random_range(0.0f32..1.0)
        }
    }
}
impl FromSample for u32 {
    fn sample<S: Semiring>(rng: &mut StdRng, _exact: bool) -> u32 {
        if rng.random_bool(0.3) {
            0
        } else {
            rng.random_range(1..5)
        }
    }
}

fn max_rel_err(a: &[f32], b: &[f32]) -> f64 {
    a.iter()
        .zip(b)
        .map(|(&g, &c)| {
            if g == c {
                0.0
            } else {
                ((g - c).abs() as f64) / (c.abs() as f64).max(f64::MIN_POSITIVE)
            }
        })
        .fold(0.0, f64::max)
}

/// One semiring product on both engines; panics with `label` on a mismatch.
#[allow(clippy::too_many_arguments)]
fn check_semiring<S: Semiring>(
    gpu: &GpuEngine,
    gm: &<GpuEngine as Engine>::Matrix,
    cpu: &CpuEngine,
    cm: &<CpuEngine as Engine>::Matrix,
    tree: &K2Tree,
    dir: Direction,
    batch: usize,
    rng: &mut StdRng,
    exact: bool,
    label: &str,
) where
    S::Elem: FromSample,
{
    let (n_in, n_out) = dir.lengths(tree.rows(), tree.cols());
    let x = input::<S>(rng, n_in as usize * batch, exact);
    let mut yc = vec![S::zero(); n_out as usize * batch];
    let mut yg = vec![S::zero(); n_out as usize * batch];
    cpu.product::<S>(cm, dir, &x, batch, &mut yc).unwrap();
    gpu.product::<S>(gm, dir, &x, batch, &mut yg)
        .unwrap_or_else(|e| panic!("{label}: {e}"));
    let ctx = format!("{label} {:?} {dir:?} batch {batch}", S::KIND);
    match S::KIND {
        k2rpq::engine::SemiringKind::PlusTimes => {
            // SAFETY-free reinterpretation: PlusTimes::Elem is f32.
            let (g, c): (Vec<f32>, Vec<f32>) = (as_f32(&yg), as_f32(&yc));
            let err = max_rel_err(&g, &c);
            assert!(err <= 1e-6, "{ctx}: relative error {err}");
        }
        _ => assert!(yg == yc, "{ctx}: results differ"),
    }
}

fn as_f32<T: Copy + 'static>(v: &[T]) -> Vec<f32> {
    v.iter()
        .map(|x| *(x as &dyn std::any::Any).downcast_ref::<f32>().unwrap())
        .collect()
}

fn random_bits(rng: &mut StdRng, rows: usize, words: usize, active: f64) -> BitMatrix {
    let mut m = BitMatrix::zeroed(rows, words);
    for r in 0..rows {
        if rng.random_bool(active) {
            for w in 0..words {
                m.as_words_mut()[r * words + w] = rng.random::<u64>() & rng.random::<u64>();
            }
        }
    }
    m
}

/// Every product variant of one matrix under one engine configuration.
fn check_matrix(gpu: &GpuEngine, tree: &Arc<K2Tree>, label: &str, exact: bool, batches: &[usize]) {
    let cpu = CpuEngine::new();
    let mut rng = StdRng::seed_from_u64(tree.nnz() ^ 0x5eed);
    for config in CONFIGS {
        let gm = gpu.load(tree, config).unwrap();
        let cm = cpu.load(tree, config).unwrap();
        let label = format!("{label} {config:?} {:?}", gpu.options());
        for dir in DIRS {
            for &batch in batches {
                check_semiring::<PlusTimes>(
                    gpu, &gm, &cpu, &cm, tree, dir, batch, &mut rng, exact, &label,
                );
                check_semiring::<Counting>(
                    gpu, &gm, &cpu, &cm, tree, dir, batch, &mut rng, exact, &label,
                );
                check_semiring::<Boolean>(
                    gpu, &gm, &cpu, &cm, tree, dir, batch, &mut rng, exact, &label,
                );
                check_semiring::<Tropical>(
                    gpu, &gm, &cpu, &cm, tree, dir, batch, &mut rng, exact, &label,
                );
            }
            let (n_in, n_out) = dir.lengths(tree.rows(), tree.cols());
            for words in [1usize, 2] {
                for (traversal, active) in [
                    (Traversal::Dense, 0.5),
                    (Traversal::Masked, 0.02),
                    (Traversal::Masked, 0.5),
                ] {
                    let x = random_bits(&mut rng, n_in as usize, words, active);
                    let y0 = random_bits(&mut rng, n_out as usize, words, 0.1);
                    let (mut yc, xc) = (y0.clone(), x.clone());
                    cpu.bool_product(&cm, dir, &xc, &mut yc, traversal).unwrap();
                    let xg = gpu.bits_upload(&x).unwrap();
                    let mut yg = gpu.bits_upload(&y0).unwrap();
                    gpu.bool_product(&gm, dir, &xg, &mut yg, traversal)
                        .unwrap_or_else(|e| panic!("{label}: {e}"));
                    assert!(
                        gpu.bits_download(&yg).unwrap() == yc,
                        "{label} bits {dir:?} W={words} {traversal:?} active={active}: results differ"
                    );
                }
            }
        }
        assert_eq!(
            gpu.matrix_bytes(&gm),
            gpu.product_bytes(&gm, Direction::Right, 1, 4, None).matrix
        );
        // The bytes the device cache admits are those the load holds: for every matrix,
        // the empty one and those whose cells are all lone included. With lone cells the
        // engine counts what the split leaves (`lone_count`), without splitting.
        assert_eq!(
            gpu.load_bytes(tree, config),
            gpu.matrix_bytes(&gm),
            "{label}"
        );
        let lone = gm.lone_cells();
        if lone > 0 {
            assert!(gpu.options().tuning.lone_paths > 0 && config == MatrixConfig::TreeOnly);
        }
        // Scattered cells hang alone from their leaf up: the lone path is exercised.
        if gpu.options().tuning.lone_paths == 1
            && config == MatrixConfig::TreeOnly
            && tree.nnz() > 1000
        {
            assert!(lone > 0, "{label}: no lone cells");
        }
    }
}

fn random_matrices_match_cpu() {
    let Some(_) = gpu_or_skip(GpuOptions::default()) else {
        return;
    };
    let mats = random_matrices();
    for options in option_sets() {
        let gpu = GpuEngine::with_options(0, options).unwrap();
        for (label, tree) in &mats {
            // Tiles of a few nodes mean tens of thousands of launches per product on the
            // larger matrices: tiling is already exercised on the smaller ones.
            if options.tuning.tile_nodes.is_some_and(|m| m < 64) && tree.nnz() > 10_000 {
                continue;
            }
            check_matrix(&gpu, tree, label, true, &[1, 3]);
        }
    }
    check_f32_accuracy_every_leaf_kernel(&mats);
}

/// [`check_f32_accuracy`] of each (label, matrix) of `mats` under every leaf kernel.
fn check_f32_accuracy_every_leaf_kernel(mats: &[(String, Arc<K2Tree>)]) {
    for leaf_kernel in LeafKernel::ALL {
        let gpu = GpuEngine::with_options(
            0,
            GpuOptions {
                tuning: Tuning {
                    leaf_kernel,
                    ..Tuning::default()
                },
                ..GpuOptions::default()
            },
        )
        .unwrap();
        for (label, tree) in mats {
            check_f32_accuracy(&gpu, tree, &format!("{label} {}", leaf_kernel.name()));
        }
    }
}

/// Plus-times on unquantised f32 inputs, where the order of the additions matters: the
/// GPU's result must be within the forward error bound of a `k`-term f32 sum,
/// `(k − 1) · 2^-24 · Σ|terms|`, of the exact (f64) product, per entry; the largest
/// relative difference from the CPU engine is printed.
fn check_f32_accuracy(gpu: &GpuEngine, tree: &Arc<K2Tree>, label: &str) {
    let cpu = CpuEngine::new();
    let mut rng = StdRng::seed_from_u64(99);
    let gm = gpu.load(tree, MatrixConfig::CachedFrontier).unwrap();
    let cm = cpu.load(tree, MatrixConfig::CachedFrontier).unwrap();
    let cells = tree.cells();
    for dir in DIRS {
        let (n_in, n_out) = dir.lengths(tree.rows(), tree.cols());
        let x: Vec<f32> = (0..n_in).map(|_| rng.random_range(0.0f32..1.0)).collect();
        let (mut yc, mut yg) = (vec![0.0f32; n_out as usize], vec![0.0f32; n_out as usize]);
        cpu.product::<PlusTimes>(&cm, dir, &x, 1, &mut yc).unwrap();
        gpu.product::<PlusTimes>(&gm, dir, &x, 1, &mut yg).unwrap();
        let mut exact = vec![0.0f64; n_out as usize];
        let mut terms = vec![0u32; n_out as usize];
        for &(r, c) in &cells {
            let (i, o) = match dir {
                Direction::Right => (c as usize, r as usize),
                Direction::Left => (r as usize, c as usize),
            };
            exact[o] += x[i] as f64;
            terms[o] += 1;
        }
        for o in 0..n_out as usize {
            let bound = (terms[o].max(1) as f64) * 2f64.powi(-24) * exact[o] + 1e-30;
            assert!(
                (yg[o] as f64 - exact[o]).abs() <= bound,
                "{label} f32 {dir:?}: y[{o}] = {} but exact {} (bound {bound})",
                yg[o],
                exact[o]
            );
        }
        println!(
            "{label} f32 {dir:?}: max relative difference GPU vs CPU {:e}",
            max_rel_err(&yg, &yc)
        );
    }
}

fn bit_batch_operations_match_cpu() {
    let Some(gpu) = gpu_or_skip(GpuOptions::default()) else {
        return;
    };
    let cpu = CpuEngine::new();
    let mut rng = StdRng::seed_from_u64(11);
    for &(rows, words) in &[(0usize, 1usize), (1, 1), (1000, 1), (777, 3), (100_000, 2)] {
        let a = random_bits(&mut rng, rows, words, 0.5);
        let b = random_bits(&mut rng, rows, words, 0.5);
        // or
        let (mut ca, cb) = (a.clone(), b.clone());
        cpu.bits_or(&mut ca, &cb).unwrap();
        let mut ga = gpu.bits_upload(&a).unwrap();
        let gb = gpu.bits_upload(&b).unwrap();
        gpu.bits_or(&mut ga, &gb).unwrap();
        assert_eq!(
            gpu.bits_download(&ga).unwrap(),
            ca,
            "bits_or {rows}x{words}"
        );
        // advance
        let (mut cn, mut cv) = (a.clone(), b.clone());
        let count_c = cpu.bits_advance(&mut cn, &mut cv).unwrap();
        let mut gn = gpu.bits_upload(&a).unwrap();
        let mut gv = gpu.bits_upload(&b).unwrap();
        let count_g = gpu.bits_advance(&mut gn, &mut gv).unwrap();
        assert_eq!(count_g, count_c, "bits_advance count {rows}x{words}");
        assert_eq!(gpu.bits_download(&gn).unwrap(), cn);
        assert_eq!(gpu.bits_download(&gv).unwrap(), cv);
        // a second advance reaches the fixed point
        assert_eq!(gpu.bits_advance(&mut gn, &mut gv).unwrap(), 0);
        // clear and zeroed
        gpu.bits_clear(&mut ga).unwrap();
        assert!(gpu.bits_download(&ga).unwrap().is_empty());
        let z = gpu.bits_zeroed(rows, words).unwrap();
        assert_eq!(
            gpu.bits_download(&z).unwrap(),
            BitMatrix::zeroed(rows, words)
        );
        // shape errors
        let other = gpu.bits_zeroed(rows + 1, words).unwrap();
        assert!(matches!(
            gpu.bits_or(&mut ga, &other),
            Err(EngineError::Shape(_))
        ));
    }
}

fn recorded_graph_replays_the_product() {
    let Some(_) = gpu_or_skip(GpuOptions::default()) else {
        return;
    };
    for leaf_kernel in LeafKernel::ALL {
        let gpu = GpuEngine::with_options(
            0,
            GpuOptions {
                tuning: Tuning {
                    tile_nodes: Some(64),
                    top_nodes: 1,
                    offset_source: None,
                    leaf_kernel,
                    ..Tuning::default()
                },
                ..GpuOptions::default()
            },
        )
        .unwrap();
        replays_the_product(&gpu);
    }
    // A tree-only matrix's lone cells are part of the recorded graph.
    replays_the_product(
        &GpuEngine::with_options(
            0,
            GpuOptions {
                tuning: Tuning {
                    lone_paths: 2,
                    ..Tuning::default()
                },
                ..GpuOptions::default()
            },
        )
        .unwrap(),
    );
}

fn replays_the_product(gpu: &GpuEngine) {
    let cpu = CpuEngine::new();
    let mut rng = StdRng::seed_from_u64(3);
    let tree = random_tree(&mut rng, 3000, 2500, 40000, true);
    for config in CONFIGS {
        let gm = gpu.load(&tree, config).unwrap();
        let cm = cpu.load(&tree, config).unwrap();
        for (dir, batch) in [(Direction::Right, 1usize), (Direction::Left, 4)] {
            let (n_in, n_out) = dir.lengths(tree.rows(), tree.cols());
            let x: Vec<f32> = input::<Tropical>(&mut rng, n_in as usize * batch, true);
            let mut yc = vec![0.0f32; n_out as usize * batch];
            cpu.product::<Tropical>(&cm, dir, &x, batch, &mut yc)
                .unwrap();
            let xd = gpu.upload(&x).unwrap();
            let yd = gpu.zeros::<f32>(n_out as usize * batch).unwrap();
            let mut g = gpu
                .record_product::<Tropical>(&gm, dir, xd, batch, yd)
                .unwrap();
            g.launch().unwrap();
            g.launch().unwrap();
            let kernel = gpu.options().tuning.leaf_kernel;
            assert!(
                g.y().unwrap() == yc,
                "graph replay {config:?} {dir:?} {kernel:?}"
            );
            // New input, same graph.
            let x2: Vec<f32> = input::<Tropical>(&mut rng, n_in as usize * batch, true);
            cpu.product::<Tropical>(&cm, dir, &x2, batch, &mut yc)
                .unwrap();
            g.set_x(&x2).unwrap();
            g.launch().unwrap();
            assert!(
                g.y().unwrap() == yc,
                "graph replay with new x {config:?} {dir:?} {kernel:?}"
            );
            let ms = gpu.time_ms(3, || g.launch()).unwrap();
            assert!(ms >= 0.0);
        }
        // A recorded bit-packed product ORs into its output on every replay.
        for (dir, traversal) in [
            (Direction::Right, Traversal::Dense),
            (Direction::Left, Traversal::Masked),
        ] {
            let kernel = gpu.options().tuning.leaf_kernel;
            let label = format!("bits graph {config:?} {dir:?} {traversal:?} {kernel:?}");
            let (n_in, n_out) = dir.lengths(tree.rows(), tree.cols());
            let (xb, xb2) = (
                random_bits(&mut rng, n_in as usize, 1, 0.05),
                random_bits(&mut rng, n_in as usize, 1, 0.3),
            );
            let record = |update| {
                gpu.record_bool_product(
                    &gm,
                    dir,
                    gpu.bits_zeroed(n_in as usize, 1).unwrap(),
                    gpu.bits_zeroed(n_out as usize, 1).unwrap(),
                    traversal,
                    update,
                )
                .unwrap()
            };
            let mut g = record(BitsUpdate::Or);
            let mut want = BitMatrix::zeroed(n_out as usize, 1);
            g.set_x(&xb).unwrap();
            g.launch().unwrap();
            g.launch().unwrap();
            cpu.bool_product(&cm, dir, &xb, &mut want, traversal)
                .unwrap();
            assert!(g.y().unwrap() == want, "{label}");
            // New input, OR-ed into the same output; then cleared.
            g.set_x(&xb2).unwrap();
            g.launch().unwrap();
            cpu.bool_product(&cm, dir, &xb2, &mut want, traversal)
                .unwrap();
            assert!(g.y().unwrap() == want, "{label}, second input");
            g.clear_y().unwrap();
            g.launch().unwrap();
            let mut only = BitMatrix::zeroed(n_out as usize, 1);
            cpu.bool_product(&cm, dir, &xb2, &mut only, traversal)
                .unwrap();
            assert!(g.y().unwrap() == only, "{label}, after clear_y");
            // A graph that overwrites: each replay holds its own input's product only.
            let mut g = record(BitsUpdate::Overwrite);
            g.set_x(&xb).unwrap();
            g.launch().unwrap();
            g.set_x(&xb2).unwrap();
            g.launch().unwrap();
            assert!(g.y().unwrap() == only, "{label}, overwriting replays");
        }
    }
}

/// Bit-packed right products `y = A x` that store `y` window by window over a frontier
/// laid out in row windows, against the CPU engine: outputs full of garbage first (a word
/// the kernel fails to write shows), runs of up to 1000 blocks cut into shared parts,
/// empty block rows, sides that are not multiples of 4 and `x` longer or shorter than
/// `y`, called from the host and replayed as a graph; and every other product (each
/// semiring, OR-ing bit-packed ones, both directions) over the same windows.
fn row_windows_match_cpu() {
    // Row windows (the default), then row groups beside them (`Tuning::row_groups`),
    // which bit-packed right products of one word then read instead: with the default
    // iteration cap, then with caps of 1 (rows of more than 32 entries take blocks of
    // warps, of more than 256 pieces) and 12. Every other product reads the windows, so
    // it is checked once per layout.
    let default_cap = Tuning::default().row_group_iterations;
    for (groups, row_group_iterations) in [
        (false, default_cap),
        (true, default_cap),
        (true, 1),
        (true, 12),
    ] {
        let options = GpuOptions {
            tuning: Tuning {
                row_groups: groups,
                row_group_iterations,
                ..Tuning::default()
            },
            ..GpuOptions::default()
        };
        let Some(gpu) = gpu_or_skip(options) else {
            return;
        };
        overwriting_products_match_cpu(&gpu, row_group_iterations == default_cap);
    }
}

/// `others`: also every other product over the same matrix (`check_matrix`).
fn overwriting_products_match_cpu(gpu: &GpuEngine, others: bool) {
    let groups = gpu.options().tuning.row_groups;
    let cap = gpu.options().tuning.row_group_iterations;
    let cpu = CpuEngine::new();
    let mut rng = StdRng::seed_from_u64(19);
    // About 8 cells per block row: short runs, few empty rows (windows need few pads).
    // Long rows: ~1,000-3,000 entries (row groups give them a block of warps, or, past
    // 2,048, pieces whose rows are cleared first).
    for (rows, cols, m, long) in [
        (4000u64, 4000u64, 8000usize, 0usize),
        (3999, 5001, 8000, 4),
        (5001, 3999, 10_000, 4),
        (1001, 2001, 2000, 2),
        (3001, 12_001, 9000, 2),
    ] {
        let mut edges: Vec<(u32, u32)> = (0..m)
            .map(|_| {
                (
                    rng.random_range(0..rows) as u32,
                    rng.random_range(0..cols) as u32,
                )
            })
            .collect();
        for k in 0..long {
            let r = rng.random_range(0..rows) as u32;
            edges.extend((0..cols as u32).step_by(k + 1).map(|c| (r, c)));
        }
        let tree = Arc::new(K2Tree::from_edges(rows, cols, edges));
        let label = format!("{rows}x{cols}, {long} long rows, row groups {groups} (cap {cap})");
        let gm = gpu.load(&tree, MatrixConfig::CachedFrontier).unwrap();
        assert!(gm.has_row_windows(), "{label}: not laid out in row windows");
        assert_eq!(gm.has_row_groups(), groups, "{label}: row groups");
        // The cache reserves what `load_bytes` predicts: exactly what the windows take.
        assert_eq!(
            gpu.load_bytes(&tree, MatrixConfig::CachedFrontier),
            gpu.matrix_bytes(&gm),
            "{label}: predicted bytes"
        );
        let cm = cpu.load(&tree, MatrixConfig::CachedFrontier).unwrap();
        let garbage = |rows: usize, words: usize| {
            BitMatrix::from_words(rows, words, vec![0xA5A5_A5A5_A5A5_A5A5; rows * words])
        };
        for words in [1usize, 2] {
            for dir in DIRS {
                let (n_in, n_out) = dir.lengths(rows, cols);
                let (n_in, n_out) = (n_in as usize, n_out as usize);
                let x = random_bits(&mut rng, n_in, words, 0.5);
                let mut want = BitMatrix::zeroed(n_out, words);
                cpu.bool_product(&cm, dir, &x, &mut want, Traversal::Dense)
                    .unwrap();
                let xg = gpu.bits_upload(&x).unwrap();
                let mut yg = gpu.bits_upload(&garbage(n_out, words)).unwrap();
                gpu.bool_product_overwrite(&gm, dir, &xg, &mut yg, Traversal::Dense)
                    .unwrap();
                assert!(
                    gpu.bits_download(&yg).unwrap() == want,
                    "{label} {dir:?} W={words}: overwriting product differs"
                );
                let g = gpu
                    .record_bool_product(
                        &gm,
                        dir,
                        gpu.bits_upload(&x).unwrap(),
                        gpu.bits_upload(&garbage(n_out, words)).unwrap(),
                        Traversal::Dense,
                        BitsUpdate::Overwrite,
                    )
                    .unwrap();
                g.launch().unwrap();
                g.launch().unwrap();
                assert!(
                    g.y().unwrap() == want,
                    "{label} {dir:?} W={words}: overwriting replays differ"
                );
            }
        }
        if others {
            check_matrix(gpu, &tree, &label, true, &[1, 3]);
        }
    }
}

fn allocation_failure_names_the_bytes() {
    let Some(gpu) = gpu_or_skip(GpuOptions::default()) else {
        return;
    };
    // 2^40 words = 8 TiB: more than any device holds.
    match gpu.bits_zeroed(1 << 37, 8) {
        Err(EngineError::OutOfMemory { bytes, what }) => {
            assert_eq!(bytes, 8 << 40);
            assert!(what.contains("bit batch"));
        }
        Err(e) => panic!("expected OutOfMemory, got {e}"),
        Ok(_) => panic!("an 8 TiB allocation succeeded"),
    }
}

fn missing_device_is_unavailable_not_a_panic() {
    match GpuEngine::new(4096) {
        Err(EngineError::Unavailable(reason)) => println!("device 4096: {reason}"),
        Err(e) => panic!("expected Unavailable, got {e}"),
        Ok(_) => panic!("device 4096 exists?"),
    }
    match gpu::available(0) {
        Ok(info) => println!("device 0: {info:?}"),
        Err(reason) => {
            assert!(matches!(
                GpuEngine::new(0),
                Err(EngineError::Unavailable(_))
            ));
            assert!(GpuEngine::new_or_notice(0).is_none());
            println!("no GPU: {reason}");
        }
    }
}

fn kernels_compile_with_nvrtc() {
    if !gpu::nvrtc_present() {
        let required = std::env::var("K2RPQ_REQUIRE_NVRTC").is_ok_and(|v| v == "1");
        assert!(
            !required,
            "K2RPQ_REQUIRE_NVRTC=1 but libnvrtc could not be loaded"
        );
        println!("SKIPPED (no NVRTC: libnvrtc not found)");
        return;
    }
    for arch in ["sm_90", "sm_80"] {
        let files = gpu::compile_kernels(arch).unwrap_or_else(|e| panic!("{arch}: {e}"));
        // K2RPQ_DUMP_PTX=DIR keeps the PTX (DIR/<arch>-<file>.ptx) for kernel work.
        if let Ok(dir) = std::env::var("K2RPQ_DUMP_PTX") {
            for f in &files {
                let path = std::path::Path::new(&dir).join(format!("{arch}-{}.ptx", f.name));
                std::fs::write(&path, &f.ptx).expect("writing the PTX");
            }
        }
        let mut launched = 0;
        for f in &files {
            assert!(
                !f.kernels.is_empty(),
                "{arch} {}: no kernel in the table",
                f.name
            );
            for &(name, overlapped) in &f.kernels {
                let body = entry_body(&f.ptx, name).unwrap_or_else(|| {
                    panic!("{arch}: kernel {name} is not in the PTX of {}.cu", f.name)
                });
                // A kernel the engine may launch to overlap its predecessor (sm_90) must
                // wait for it before touching x, y or the scratch; no kernel waits on
                // older architectures, where the wait does not exist.
                if overlapped || arch != "sm_90" {
                    assert_eq!(
                        body.contains("griddepcontrol.wait"),
                        arch == "sm_90",
                        "{arch}: kernel {name} and the overlap's wait"
                    );
                }
                launched += 1;
            }
        }
        // Every kernel of every leaf variant, operation and frontier, the expand kernels
        // and the element-wise, scan and row-store kernels.
        assert_eq!(launched, 87, "{arch}: kernels in the table");
    }
}

/// The PTX text of kernel `name` in `ptx`: from its `.entry` to the next one.
fn entry_body<'a>(ptx: &'a str, name: &str) -> Option<&'a str> {
    let start = ptx.find(&format!(".entry {name}("))?;
    let rest = &ptx[start + 1..];
    Some(&ptx[start..start + 1 + rest.find(".entry ").unwrap_or(rest.len())])
}

fn cnr_2000() -> Option<Arc<K2Tree>> {
    let path = data::data_file("cnr-2000/cnr-2000.arcs.tsv.gz")?;
    let file = std::fs::File::open(&path).expect("open cnr-2000");
    let path = path.display();
    let reader = std::io::BufReader::new(flate2::read::GzDecoder::new(file));
    let mut edges = Vec::new();
    let mut n = 0u32;
    for (i, line) in reader.lines().enumerate() {
        let line = line.expect("read cnr-2000");
        let mut it = line.split('\t');
        let parse = |s: Option<&str>| -> u32 {
            s.and_then(|s| s.trim().parse().ok())
                .unwrap_or_else(|| panic!("{path}:{}: bad line {line:?}", i + 1))
        };
        let (s, d) = (parse(it.next()), parse(it.next()));
        n = n.max(s + 1).max(d + 1);
        edges.push((s, d));
    }
    Some(Arc::new(K2Tree::from_edges(n as u64, n as u64, edges)))
}

fn cnr_2000_matches_cpu() {
    let Some(_) = gpu_or_skip(GpuOptions::default()) else {
        return;
    };
    let Some(tree) = cnr_2000() else {
        return;
    };
    println!("cnr-2000: {:?}", tree.stats());
    let mut sets: Vec<GpuOptions> = FrontierLayout::ALL
        .into_iter()
        .map(|frontier| GpuOptions {
            frontier,
            ..GpuOptions::default()
        })
        .collect();
    sets.push(GpuOptions {
        frontier: FrontierLayout::RowBlocks,
        tuning: Tuning {
            leaf_kernel: LeafKernel::WarpAgg,
            ..Tuning::default()
        },
    });
    // Tree-only leaf steps over the leaves' parents (the default: octet leaf steps a level
    // up, which from the default top level 16 are the whole descent), and octets after an
    // expand step from level 15.
    sets.push(GpuOptions {
        tuning: Tuning {
            octets: false,
            ..Tuning::default()
        },
        ..GpuOptions::default()
    });
    sets.push(GpuOptions {
        tuning: Tuning {
            top_nodes: 1 << 18,
            ..Tuning::default()
        },
        ..GpuOptions::default()
    });
    // A shallow top (deep device-side descents) with small tiles.
    let shallow = tiled(
        1 << 14,
        1 << 10,
        Some(OffsetSource::Directory),
        LeafKernel::Tuned,
    );
    sets.push(tuned(shallow, |t| {
        t.fused_levels = Tuning::MAX_FUSED_LEVELS
    }));
    // The same, and the default, with warps that carry their ranks over 5 chunks each.
    for base in [shallow, GpuOptions::default()] {
        sets.push(tuned(base, |t| {
            t.fused_levels = Tuning::MAX_FUSED_LEVELS;
            t.warp_chunks = 5;
        }));
    }
    // Subtree launches: the default top and tiles, and the shallow top, whose descent
    // hands eight levels' subtrees over after fused expand steps.
    for subtree_levels in [5, Tuning::MAX_SUBTREE_LEVELS] {
        sets.push(GpuOptions {
            tuning: Tuning {
                subtree_levels,
                ..Tuning::default()
            },
            ..GpuOptions::default()
        });
    }
    sets.push(tuned(shallow, |t| {
        t.subtree_levels = Tuning::MAX_SUBTREE_LEVELS;
        t.fused_levels = Tuning::MAX_FUSED_LEVELS;
    }));
    for k in LeafKernel::ALL {
        sets.push(tiled(1 << 12, 1 << 16, Some(OffsetSource::Scan), k));
        sets.push(tiled(1 << 14, 1 << 10, Some(OffsetSource::Directory), k));
    }
    for options in sets {
        let gpu = GpuEngine::with_options(0, options).unwrap();
        check_matrix(&gpu, &tree, "cnr-2000", true, &[1, 4]);
        let gm = gpu.load(&tree, MatrixConfig::TreeOnly).unwrap();
        let pb = gpu.product_bytes(&gm, Direction::Right, 1, 4, None);
        println!(
            "cnr-2000 {options:?}: tiles {:?}, product bytes {pb:?}",
            gm.tile_sizes()
        );
        if options.tuning.tile_nodes.is_none() {
            // Automatic tiles keep a tree-only product's scratch within the matrix's bytes
            // or the floor that keeps a small matrix's launches few.
            let budget = pb.matrix.max(gpu::TileSizes::MIN_SCRATCH_BUDGET);
            assert!(
                pb.scratch <= budget,
                "tree-only scratch {} > budget {budget}",
                pb.scratch
            );
            let f = gpu.load(&tree, MatrixConfig::CachedFrontier).unwrap();
            assert_eq!(f.dense_plan(OffsetSource::Directory).launches(), 1);
            assert_eq!(
                gpu.product_bytes(&f, Direction::Right, 1, 4, None).scratch,
                0,
                "a single vector over the frontier needs no scratch"
            );
        }
    }
    check_f32_accuracy_every_leaf_kernel(&[("cnr-2000".to_string(), tree)]);
}

/// Prints product times on cnr-2000 (CUDA events, mean of 20 after a warm-up) for the
/// report; asserts nothing about time, only that the timed products ran.
fn cnr_2000_timings() {
    let Some(_) = gpu_or_skip(GpuOptions::default()) else {
        return;
    };
    let Some(tree) = cnr_2000() else {
        return;
    };
    let n = tree.rows() as usize;
    for source in [OffsetSource::Directory, OffsetSource::Scan] {
        let gpu = GpuEngine::with_options(
            0,
            GpuOptions {
                tuning: Tuning {
                    offset_source: Some(source),
                    ..Tuning::default()
                },
                ..GpuOptions::default()
            },
        )
        .unwrap();
        for config in CONFIGS {
            let gm = gpu.load(&tree, config).unwrap();
            for batch in [1usize, 32] {
                let x = gpu.upload(&vec![1.0f32; n * batch]).unwrap();
                let y = gpu.zeros::<f32>(n * batch).unwrap();
                let g = gpu
                    .record_product::<PlusTimes>(&gm, Direction::Right, x, batch, y)
                    .unwrap();
                let ms = gpu.time_ms(20, || g.launch()).unwrap();
                let pb = gpu.product_bytes(&gm, Direction::Right, batch, 4, None);
                println!(
                    "TIMING cnr-2000 {config:?} {source:?} plus-times right B={batch}: {ms:.4} ms/product (graph), scratch {} B, matrix {} B",
                    pb.scratch, pb.matrix
                );
            }
            // 64·W sources spread over the graph, and a single source (an RPQ from a
            // constant), bit-packed.
            for (words, sources) in [(1usize, 64usize), (4, 256), (1, 1)] {
                let mut x = BitMatrix::zeroed(n, words);
                for s in 0..sources {
                    x.set(s * 5077 % n, s);
                }
                let xg = gpu.bits_upload(&x).unwrap();
                let mut yg = gpu.bits_zeroed(n, words).unwrap();
                for traversal in [Traversal::Dense, Traversal::Masked] {
                    let ms = gpu
                        .time_ms(20, || {
                            gpu.bool_product(&gm, Direction::Left, &xg, &mut yg, traversal)
                        })
                        .unwrap();
                    println!(
                        "TIMING cnr-2000 {config:?} {source:?} bits W={words} left {traversal:?} ({sources} sources): {ms:.4} ms/product (with host sync)"
                    );
                }
            }
        }
    }
}

#[path = "data/mod.rs"]
mod data;
#[path = "harness/mod.rs"]
mod harness;

fn main() {
    harness::run(&[
        harness::GpuTest {
            name: "random_matrices_match_cpu",
            needs: harness::Needs::Gpu,
            run: random_matrices_match_cpu,
        },
        harness::GpuTest {
            name: "bit_batch_operations_match_cpu",
            needs: harness::Needs::Gpu,
            run: bit_batch_operations_match_cpu,
        },
        harness::GpuTest {
            name: "recorded_graph_replays_the_product",
            needs: harness::Needs::Gpu,
            run: recorded_graph_replays_the_product,
        },
        harness::GpuTest {
            name: "row_windows_match_cpu",
            needs: harness::Needs::Gpu,
            run: row_windows_match_cpu,
        },
        harness::GpuTest {
            name: "allocation_failure_names_the_bytes",
            needs: harness::Needs::Gpu,
            run: allocation_failure_names_the_bytes,
        },
        harness::GpuTest {
            name: "missing_device_is_unavailable_not_a_panic",
            needs: harness::Needs::Nothing,
            run: missing_device_is_unavailable_not_a_panic,
        },
        harness::GpuTest {
            name: "kernels_compile_with_nvrtc",
            needs: harness::Needs::Nvrtc,
            run: kernels_compile_with_nvrtc,
        },
        harness::GpuTest {
            name: "cnr_2000_matches_cpu",
            needs: harness::Needs::Gpu,
            run: cnr_2000_matches_cpu,
        },
        harness::GpuTest {
            name: "cnr_2000_timings",
            needs: harness::Needs::Gpu,
            run: cnr_2000_timings,
        },
    ])
}
