//! The SpMV benchmark behind `k2rpq bench-spmv` (the paper's Tables 2-3 and Figure 5):
//! our engines against cuSPARSE CSR and a Boolean CSR, on the same matrix and vectors.
//!
//! For each direction and batch width, every contender's product is first checked
//! against the reference (the CPU engine, itself checked against a plain CSR product for
//! single vectors): f32 entries within 1e-6 relative, bit-packed batches exactly. A
//! contender that disagrees is not timed and is listed as rejected. Then each product is
//! timed (median over repeats after warm-up; CUDA events on the GPU, wall clock on the
//! CPU) and compared with cuSPARSE's product of the same direction and width.

pub mod contenders;
pub mod gpu;
pub mod graph;
pub mod report;
pub mod stripes;
pub mod svg;

use std::sync::Arc;

use indicatif::{ProgressBar, ProgressStyle};
use rayon::prelude::*;

use self::contenders::{BaselineContender, BitsContender, Contender, CpuContender, CsrBaseline};
use self::report::{GraphInfo, Measurement, SpmvReport, VariantTime};
use crate::baseline::bcsr::{self, BcsrMatrix};
use crate::baseline::cusparse::{self, CusparseMatrix};
use crate::baseline::{Csr, Timing};
use k2rpq::engine::cpu::CpuEngine;
use k2rpq::engine::{BitMatrix, Direction, Engine, MatrixConfig, PlusTimes, Traversal};
use k2rpq::k2tree::K2Tree;

/// Options of the benchmark.
#[derive(Clone, Debug, serde::Serialize)]
pub struct SpmvOptions {
    /// Timed repeats per product (the median is reported).
    pub repeats: usize,
    /// Untimed runs before timing.
    pub warmup: usize,
    /// Batch widths of the f32 products (1 = single vector).
    pub batches: Vec<usize>,
    /// Sources of the bit-packed Boolean batches (multiples of 64).
    pub bit_batches: Vec<usize>,
    /// Memory budget in bytes: a product whose working set exceeds it is skipped.
    pub budget: Option<u64>,
    /// CPU only: skip every GPU contender.
    pub cpu_only: bool,
    /// Do not time the CPU engine (it still computes the reference): saves minutes on
    /// billion-edge graphs.
    pub skip_cpu: bool,
    /// Draw a progress bar on stderr.
    pub progress: bool,
    /// GPU leaf-kernel variants run as contenders of their own besides the default;
    /// default: all of them.
    pub leaf_kernels: Vec<k2rpq::engine::gpu::LeafKernel>,
    /// Iteration caps of the row groups (`rowgrp`, named ` I<cap>` when not the default
    /// [`Tuning::row_group_iterations`](k2rpq::engine::gpu::Tuning::row_group_iterations)),
    /// each a contender of its own; default 8, 10 and 12.
    pub row_group_iterations: Vec<u32>,
}

impl Default for SpmvOptions {
    fn default() -> Self {
        SpmvOptions {
            repeats: 50,
            warmup: 5,
            batches: vec![1, 4, 16, 64, 128],
            bit_batches: vec![64, 128, 256],
            budget: None,
            cpu_only: false,
            skip_cpu: false,
            progress: false,
            leaf_kernels: k2rpq::engine::gpu::LeafKernel::ALL.to_vec(),
            row_group_iterations: vec![
                k2rpq::engine::gpu::Tuning::default().row_group_iterations,
                10,
                12,
            ],
        }
    }
}

/// Errors of the benchmark.
#[derive(Debug, thiserror::Error)]
pub enum SpmvError {
    /// The input could not be read or generated.
    #[error(transparent)]
    Input(#[from] graph::GraphError),
    /// The reference product failed or disagrees with a plain CSR product.
    #[error("reference: {0}")]
    Reference(String),
    /// An engine error outside any one contender.
    #[error(transparent)]
    Engine(#[from] k2rpq::engine::EngineError),
    /// Bad options.
    #[error("bad options: {0}")]
    Options(String),
}

/// The f32 input of a product: small integers (0..=3), so every sum is exact in f32
/// whatever the summation order, unless an output exceeds 2^24.
pub fn input_vector(len: usize, salt: u64) -> Vec<f32> {
    (0..len as u64)
        .into_par_iter()
        .map(|i| (splitmix(i ^ salt.rotate_left(29)) % 4) as f32)
        .collect()
}

/// A bit-packed input: each bit set with probability 1/4.
pub fn input_bits(rows: usize, words: usize, salt: u64) -> BitMatrix {
    let data = (0..(rows * words) as u64)
        .into_par_iter()
        .map(|i| {
            let a = splitmix(i ^ salt);
            a & splitmix(a)
        })
        .collect();
    BitMatrix::from_words(rows, words, data)
}

fn splitmix(x: u64) -> u64 {
    let mut z = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// The first entry where `got` and `want` differ by more than 1e-6 relative, as text.
pub fn f32_disagreement(got: &[f32], want: &[f32]) -> Option<String> {
    if got.len() != want.len() {
        return Some(format!("{} entries, expected {}", got.len(), want.len()));
    }
    got.par_iter()
        .zip(want)
        .position_first(|(g, w)| {
            let tol = 1e-6 * g.abs().max(w.abs());
            (g - w).abs() > tol || g.is_nan() != w.is_nan()
        })
        .map(|i| format!("entry {i}: {} vs reference {}", got[i], want[i]))
}

/// The first word where two bit batches differ, as text.
pub fn bits_disagreement(got: &BitMatrix, want: &BitMatrix) -> Option<String> {
    if got.shape() != want.shape() {
        return Some(format!(
            "shape {:?}, expected {:?}",
            got.shape(),
            want.shape()
        ));
    }
    let w = want.words().max(1);
    got.as_words()
        .par_iter()
        .zip(want.as_words())
        .position_first(|(a, b)| a != b)
        .map(|i| {
            format!(
                "row {} word {}: {:#x} vs reference {:#x}",
                i / w,
                i % w,
                got.as_words()[i],
                want.as_words()[i]
            )
        })
}

/// What the benchmark measures: the tree, and the CSR unless the budget rules it out.
pub struct Prepared {
    /// The graph's sizes.
    pub info: GraphInfo,
    /// The tree (directory and frontier built).
    pub tree: Arc<K2Tree>,
    /// The CSR (None when it exceeds the budget).
    pub csr: Option<Csr>,
}

/// Builds the tree and the CSR of a loaded graph.
pub fn prepare(g: graph::LoadedGraph, opts: &SpmvOptions) -> Result<Prepared, SpmvError> {
    let graph::LoadedGraph {
        name,
        rows,
        cols,
        input_edges,
        tree,
        codes,
    } = g;
    let (tree, codes) = match (tree, codes) {
        (Some(t), c) => (t, c),
        (None, Some(mut c)) => {
            // Sorts the codes in place; the CSR is built from the same (sorted) codes.
            let t = K2Tree::from_codes(rows, cols, &mut c)
                .map_err(|e| SpmvError::Reference(e.to_string()))?;
            (Arc::new(t), Some(c))
        }
        (None, None) => {
            return Err(SpmvError::Options(format!(
                "{name}: neither edges nor a tree"
            )));
        }
    };
    tree.directory();
    tree.frontier();
    let s = tree.stats();
    let nnz = s.nnz;
    let offset = if nnz > i32::MAX as u64 { 8 } else { 4 };
    let csr_bytes = (rows + 1) * offset + nnz * 8;
    let bcsr_bytes = (rows + 1) * offset + nnz * 4;
    // The CSR is built only if at least its matrix fits the budget.
    let csr = if opts.budget.is_some_and(|b| bcsr_bytes > b) {
        None
    } else {
        Some(match &codes {
            Some(c) => Csr::from_codes(rows, cols, c)?,
            None => Csr::from_tree(&tree),
        })
    };
    drop(codes);
    let info = GraphInfo {
        name,
        rows,
        cols,
        input_edges,
        nnz,
        levels: s.levels,
        nodes: s.nodes,
        bits_per_edge: s.bits_per_edge,
        tree_bytes: s.tree_bytes,
        directory_bytes: s.directory_bytes,
        frontier_bytes: s.frontier_bytes,
        csr_bytes,
        bcsr_bytes,
    };
    Ok(Prepared { info, tree, csr })
}

/// A contender set up for the run, or why it is not there.
type Setup<T> = std::result::Result<T, String>;

/// A contender's name, its setup and the batch widths it runs.
type NamedSetup = (&'static str, Setup<Box<dyn Contender>>, Vec<usize>);

/// Runs the benchmark on a prepared graph. GPU contenders that cannot be set up (no GPU,
/// no cuSPARSE, no NVRTC) are listed as skipped with the reason.
pub fn run(p: &Prepared, opts: &SpmvOptions) -> Result<SpmvReport, SpmvError> {
    if opts.batches.contains(&0) || opts.bit_batches.iter().any(|&b| b == 0 || b % 64 != 0) {
        return Err(SpmvError::Options(
            "batch widths must be positive and bit-packed widths multiples of 64".into(),
        ));
    }
    let mut report = SpmvReport::new(p.info.clone(), opts.clone());
    let tree = &p.tree;
    let cpu = CpuEngine::new();
    let reference = cpu.load(tree, MatrixConfig::CachedFrontier)?;

    // The contenders, each set up once.
    let mut f32_contenders: Vec<(Box<dyn Contender>, Vec<usize>)> = Vec::new();
    let gpu_reason = if opts.cpu_only {
        Some("--cpu: GPU contenders not run".to_string())
    } else {
        crate::baseline::gpu_unavailable_reason().map(|r| format!("no GPU: {r}"))
    };
    // cuSPARSE also runs at the bit-packed widths: the per-source time of a bit-packed
    // batch is compared with its SpMM per-vector time at the same width.
    let mut cusparse_batches = opts.batches.clone();
    for &b in &opts.bit_batches {
        if !cusparse_batches.contains(&b) {
            cusparse_batches.push(b);
        }
    }
    let setups: [NamedSetup; 2] = [
        (
            "cusparse",
            setup_csr(p, gpu_reason.as_deref(), opts.budget, |csr| {
                let unavailable = cusparse::unavailable_reason().map(|r| format!("no GPU: {r}"));
                baseline(unavailable, || CusparseMatrix::new(csr))
            }),
            cusparse_batches,
        ),
        (
            "bcsr",
            setup_csr(p, gpu_reason.as_deref(), opts.budget, |csr| {
                let unavailable =
                    bcsr::nvrtc_unavailable_reason().map(|r| format!("no NVRTC: {r}"));
                baseline(unavailable, || BcsrMatrix::new(csr))
            }),
            opts.batches.clone(),
        ),
    ];
    for (name, setup, batches) in setups {
        match setup {
            Ok(c) => f32_contenders.push((c, batches)),
            Err(reason) => report.skip(name, None, None, false, reason),
        }
    }
    let cpus = [
        CpuContender::new(tree, MatrixConfig::TreeOnly)?,
        CpuContender::new(tree, MatrixConfig::CachedFrontier)?,
    ];
    let gpus = match &gpu_reason {
        Some(r) => {
            report.skip("gpu", None, None, false, r.clone());
            Vec::new()
        }
        None => gpu::GpuContender::all(tree, &opts.leaf_kernels, &opts.row_group_iterations)
            .unwrap_or_else(|e| {
                report.skip("gpu", None, None, false, e.to_string());
                Vec::new()
            }),
    };
    let mut f32_list: Vec<(&dyn Contender, &[usize])> = f32_contenders
        .iter()
        .map(|(c, b)| (c.as_ref(), b.as_slice()))
        .collect();
    let mut bits_list: Vec<&dyn BitsContender> = Vec::new();
    if opts.skip_cpu {
        report.skip("cpu", None, None, false, "--skip-cpu".into());
    } else {
        bits_list.push(&cpus[1]);
        for c in &cpus {
            f32_list.push((c, &opts.batches));
        }
    }
    for g in &gpus {
        f32_list.push((g, &opts.batches));
        bits_list.push(g);
    }

    let dirs = [Direction::Right, Direction::Left];
    let mut all_batches: Vec<usize> = f32_list
        .iter()
        .flat_map(|(_, b)| b.iter().copied())
        .collect();
    all_batches.sort_unstable();
    all_batches.dedup();
    let steps = dirs.len() * (all_batches.len() + opts.bit_batches.len());
    let pb = progress_bar(opts.progress, steps as u64);

    for dir in dirs {
        let (n_in, n_out) = dir.lengths(tree.rows(), tree.cols());
        for &batch in &all_batches {
            pb.set_message(format!("{dir:?} B={batch}: reference"));
            let x = input_vector(n_in as usize * batch, batch as u64);
            let mut want = vec![0.0f32; n_out as usize * batch];
            cpu.product::<PlusTimes>(&reference, dir, &x, batch, &mut want)?;
            if batch == 1 {
                if let Some(csr) = &p.csr {
                    let plain = csr.product(dir, &x, 1)?;
                    if let Some(d) = f32_disagreement(&want, &plain) {
                        return Err(SpmvError::Reference(format!(
                            "CPU engine {dir:?} product disagrees with the CSR product: {d}"
                        )));
                    }
                }
            }
            for &(c, batches) in &f32_list {
                if !batches.contains(&batch) {
                    continue;
                }
                pb.set_message(format!("{dir:?} B={batch}: {}", c.name()));
                measure(&mut report, c, dir, batch, &x, &want, opts);
            }
            pb.inc(1);
        }
        for &width in &opts.bit_batches {
            let words = width / 64;
            pb.set_message(format!("{dir:?} bit-packed {width}: reference"));
            let x = input_bits(n_in as usize, words, width as u64);
            let mut want = BitMatrix::zeroed(n_out as usize, words);
            cpu.bool_product(&reference, dir, &x, &mut want, Traversal::Dense)?;
            for &c in &bits_list {
                pb.set_message(format!("{dir:?} bit-packed {width}: {}", c.name()));
                measure_bits(&mut report, c, dir, width, &x, &want, opts);
            }
            pb.inc(1);
        }
    }
    pb.finish_and_clear();
    report.compute_ratios();
    Ok(report)
}

fn setup_csr(
    p: &Prepared,
    gpu_reason: Option<&str>,
    budget: Option<u64>,
    make: impl FnOnce(&Csr) -> Setup<Box<dyn Contender>>,
) -> Setup<Box<dyn Contender>> {
    // The budget first: it rules the CSR out on any machine.
    let Some(csr) = &p.csr else {
        return Err(format!(
            "budget: the CSR ({} bytes) does not fit {} bytes",
            p.info.bcsr_bytes,
            budget.unwrap_or(0)
        ));
    };
    match gpu_reason {
        Some(r) => Err(r.to_string()),
        None => make(csr),
    }
}

/// A CSR baseline as a contender, made by `new` unless `unavailable` says why it cannot
/// run.
fn baseline<M: CsrBaseline + 'static>(
    unavailable: Option<String>,
    new: impl FnOnce() -> k2rpq::engine::Result<Arc<M>>,
) -> Setup<Box<dyn Contender>> {
    if let Some(r) = unavailable {
        return Err(r);
    }
    new()
        .map(|m| Box::new(BaselineContender(m)) as Box<dyn Contender>)
        .map_err(|e| e.to_string())
}

/// Records a product as skipped, and says so, when its predicted working set (`ws`,
/// computed only under a budget) exceeds the budget.
fn over_budget(
    report: &mut SpmvReport,
    name: &str,
    dir: Direction,
    width: usize,
    bit_packed: bool,
    budget: Option<u64>,
    ws: impl FnOnce() -> u64,
) -> bool {
    let Some(b) = budget else {
        return false;
    };
    let ws = ws();
    if ws > b {
        report.skip(
            name,
            Some(dir),
            Some(width),
            bit_packed,
            format!("budget: working set {ws} bytes > {b}"),
        );
    }
    ws > b
}

fn progress_bar(show: bool, len: u64) -> ProgressBar {
    if !show {
        return ProgressBar::hidden();
    }
    let pb = ProgressBar::new(len);
    if let Ok(style) =
        ProgressStyle::with_template("bench-spmv [{elapsed_precise}] {wide_bar} {pos}/{len} {msg}")
    {
        pb.set_style(style);
    }
    pb
}

/// Checks every variant of one contender for `(dir, batch)`, times those that agree and
/// records the fastest.
fn measure(
    report: &mut SpmvReport,
    c: &dyn Contender,
    dir: Direction,
    batch: usize,
    x: &[f32],
    want: &[f32],
    opts: &SpmvOptions,
) {
    let name = c.name();
    let ws = || c.predicted_working_set(dir, batch);
    if over_budget(report, &name, dir, batch, false, opts.budget, ws) {
        return;
    }
    let mut best: Option<(String, Timing, u64)> = None;
    let mut others = Vec::new();
    for variant in c.variants(dir, batch) {
        let outcome = (|| -> Result<Result<(Timing, u64), String>, k2rpq::engine::EngineError> {
            let mut prod = c.prepare(dir, batch, &variant)?;
            let ws = prod.working_set_bytes();
            if let Some(b) = opts.budget.filter(|&b| ws > b) {
                return Ok(Err(format!("budget: working set {ws} bytes > {b}")));
            }
            prod.set_input(x)?;
            prod.run()?;
            if let Some(d) = f32_disagreement(&prod.output()?, want) {
                return Ok(Err(format!("REJECTED: disagrees with the reference: {d}")));
            }
            Ok(Ok((prod.time(opts.warmup, opts.repeats)?, ws)))
        })();
        match outcome {
            Ok(Ok((t, ws))) => {
                others.push(VariantTime {
                    variant: variant.clone(),
                    median_ms: t.median_ms,
                    working_set_bytes: ws,
                });
                if best
                    .as_ref()
                    .is_none_or(|(_, b, _)| t.median_ms < b.median_ms)
                {
                    best = Some((variant, t, ws));
                }
            }
            Ok(Err(reason)) => report.skip(
                &format!("{name} {variant}"),
                Some(dir),
                Some(batch),
                false,
                reason,
            ),
            Err(e) => report.skip(
                &format!("{name} {variant}"),
                Some(dir),
                Some(batch),
                false,
                format!("error: {e}"),
            ),
        }
    }
    if let Some((variant, timing, ws)) = best {
        report.measurements.push(Measurement {
            contender: name,
            variant,
            direction: dir,
            batch,
            bit_packed: false,
            representation_bytes: c.representation_bytes(),
            working_set_bytes: ws,
            per_vector_ms: timing.median_ms / batch as f64,
            timing,
            time_vs_cusparse: None,
            working_set_vs_cusparse: None,
            variants: others,
        });
    }
}

/// Checks and times one bit-packed contender.
fn measure_bits(
    report: &mut SpmvReport,
    c: &dyn BitsContender,
    dir: Direction,
    width: usize,
    x: &BitMatrix,
    want: &BitMatrix,
    opts: &SpmvOptions,
) {
    let name = c.name();
    let words = width / 64;
    let ws = || c.predicted_working_set(dir, words);
    if over_budget(report, &name, dir, width, true, opts.budget, ws) {
        return;
    }
    // Rows of this contender: the product called from the host each time, then (device
    // contenders) the same product recorded once as a CUDA graph and replayed.
    type Rows = Vec<(String, Result<Timing, String>)>;
    let outcome = (|| -> Result<(Rows, u64), k2rpq::engine::EngineError> {
        let mut prod = c.prepare(dir, words)?;
        prod.set_input(x)?;
        prod.run()?;
        let variant = format!("bit-packed W={words}");
        let ws = prod.working_set_bytes();
        if let Some(d) = bits_disagreement(&prod.output()?, want) {
            let reason = format!("REJECTED: disagrees with the reference: {d}");
            return Ok((vec![(variant, Err(reason))], ws));
        }
        let mut rows = vec![(variant.clone(), Ok(prod.time(opts.warmup, opts.repeats)?))];
        if let Some((out, timing)) = prod.replayed(x, opts.warmup, opts.repeats)? {
            let graph = format!("bit-graph W={words}");
            rows.push(match bits_disagreement(&out, want) {
                Some(d) => (
                    graph,
                    Err(format!(
                        "REJECTED: the replay disagrees with the reference: {d}"
                    )),
                ),
                None => (graph, Ok(timing)),
            });
        }
        Ok((rows, ws))
    })();
    match outcome {
        Ok((rows, ws)) => {
            for (variant, row) in rows {
                match row {
                    Ok(timing) => report.measurements.push(Measurement {
                        contender: name.clone(),
                        variant,
                        direction: dir,
                        batch: width,
                        bit_packed: true,
                        representation_bytes: c.representation_bytes(),
                        working_set_bytes: ws,
                        per_vector_ms: timing.median_ms / width as f64,
                        timing,
                        time_vs_cusparse: None,
                        working_set_vs_cusparse: None,
                        variants: Vec::new(),
                    }),
                    Err(reason) => report.skip(&name, Some(dir), Some(width), true, reason),
                }
            }
        }
        Err(e) => report.skip(&name, Some(dir), Some(width), true, format!("error: {e}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn small() -> graph::LoadedGraph {
        let edges: Vec<(u32, u32)> = (0..3000u32)
            .map(|i| ((i * 31) % 500, (i * 17 + i / 7) % 433))
            .collect();
        graph::LoadedGraph::from_edges("small", 500, 433, &edges)
    }

    fn quick() -> SpmvOptions {
        SpmvOptions {
            repeats: 2,
            warmup: 0,
            batches: vec![1, 4],
            bit_batches: vec![64],
            cpu_only: true,
            ..Default::default()
        }
    }

    #[test]
    fn disagreement_is_relative() {
        assert_eq!(f32_disagreement(&[1.0, 2e6], &[1.0, 2e6 + 1.0]), None);
        assert!(f32_disagreement(&[1.0, 2.0], &[1.0, 2.001])
            .unwrap()
            .contains("entry 1"));
        assert!(f32_disagreement(&[1.0], &[1.0, 2.0]).is_some());
        let a = BitMatrix::from_words(2, 1, vec![1, 2]);
        let b = BitMatrix::from_words(2, 1, vec![1, 3]);
        assert!(bits_disagreement(&a, &b)
            .unwrap()
            .starts_with("row 1 word 0"));
        assert_eq!(bits_disagreement(&a, &a), None);
    }

    #[test]
    fn cpu_run_measures_every_product_and_skips_gpu() {
        let p = prepare(small(), &quick()).unwrap();
        assert!(p.csr.is_some());
        let r = run(&p, &quick()).unwrap();
        // k2 and k2+F at B = 1 and 4, both directions; bit-packed k2+F at 64, both directions.
        assert_eq!(r.measurements.len(), 2 * 2 * 2 + 2);
        assert!(r
            .skipped
            .iter()
            .any(|s| s.contender == "cusparse" && s.reason.contains("--cpu")));
        for m in &r.measurements {
            assert!(m.timing.median_ms >= 0.0 && m.timing.repeats >= 1);
            assert!(m.working_set_bytes > m.representation_bytes);
            assert_eq!(m.time_vs_cusparse, None);
        }
    }

    /// A banded matrix: local like a web graph, so the tree is far smaller than the CSR.
    fn banded() -> graph::LoadedGraph {
        let edges: Vec<(u32, u32)> = (0..2000u32)
            .flat_map(|i| (0..8).map(move |d| (i, (i + d) % 2000)))
            .collect();
        graph::LoadedGraph::from_edges("banded", 2000, 2000, &edges)
    }

    #[test]
    fn budget_skips_csr_and_runs_tree_only() {
        let mut opts = quick();
        let full = prepare(banded(), &opts).unwrap();
        // Room for the tree-only matrix and its f32 vectors, not for the CSR, nor for the
        // cached frontier with vectors.
        let i = &full.info;
        let budget = i.tree_bytes + i.directory_bytes + 4 * 2 * 2000 * 4;
        assert!(budget < i.bcsr_bytes, "{i:?}");
        assert!(i.frontier_bytes > 0, "{i:?}");
        opts.budget = Some(budget);
        opts.cpu_only = false;
        let p = prepare(banded(), &opts).unwrap();
        assert!(p.csr.is_none());
        let r = run(&p, &opts).unwrap();
        for who in ["cusparse", "bcsr"] {
            let s = r.skipped.iter().find(|s| s.contender == who).unwrap();
            assert!(s.reason.starts_with("budget: the CSR"), "{}", s.reason);
        }
        assert!(!r.measurements.is_empty());
        assert!(r.measurements.iter().all(|m| m.working_set_bytes <= budget));
        assert!(r.measurements.iter().any(|m| m.contender == "cpu k2"));
        assert!(r
            .skipped
            .iter()
            .any(|s| s.contender == "cpu k2+F" && s.reason.contains("budget")));
    }

    #[test]
    fn skip_cpu_still_checks_the_reference_but_times_no_cpu_product() {
        let opts = SpmvOptions {
            skip_cpu: true,
            ..quick()
        };
        let r = run(&prepare(small(), &opts).unwrap(), &opts).unwrap();
        assert!(r
            .measurements
            .iter()
            .all(|m| !m.contender.starts_with("cpu")));
        assert!(r.skipped.iter().any(|s| s.contender == "cpu"));
    }

    /// A contender that returns a wrong answer is rejected, never timed.
    #[test]
    fn a_wrong_contender_is_rejected() {
        struct Wrong;
        struct WrongProduct(usize);
        impl crate::baseline::DeviceProduct for WrongProduct {
            fn matrix_bytes(&self) -> u64 {
                1
            }
            fn working_set_bytes(&self) -> u64 {
                1
            }
            fn set_input(&mut self, _x: &[f32]) -> k2rpq::engine::Result<()> {
                Ok(())
            }
            fn run(&mut self) -> k2rpq::engine::Result<()> {
                Ok(())
            }
            fn output(&mut self) -> k2rpq::engine::Result<Vec<f32>> {
                Ok(vec![42.0; self.0])
            }
            fn time(&mut self, _: usize, _: usize) -> k2rpq::engine::Result<Timing> {
                panic!("a rejected contender must not be timed")
            }
        }
        impl Contender for Wrong {
            fn name(&self) -> String {
                "wrong".into()
            }
            fn variants(&self, _: Direction, _: usize) -> Vec<String> {
                vec!["v".into()]
            }
            fn representation_bytes(&self) -> u64 {
                1
            }
            fn predicted_working_set(&self, _: Direction, _: usize) -> u64 {
                1
            }
            fn prepare(
                &self,
                _: Direction,
                _: usize,
                _: &str,
            ) -> k2rpq::engine::Result<Box<dyn crate::baseline::DeviceProduct + '_>> {
                Ok(Box::new(WrongProduct(3)))
            }
        }
        let p = prepare(small(), &quick()).unwrap();
        let mut r = SpmvReport::new(p.info.clone(), quick());
        measure(
            &mut r,
            &Wrong,
            Direction::Right,
            1,
            &[1.0; 3],
            &[1.0, 2.0, 3.0],
            &quick(),
        );
        assert!(r.measurements.is_empty());
        assert!(
            r.skipped[0].reason.starts_with("REJECTED"),
            "{:?}",
            r.skipped
        );
    }
}
