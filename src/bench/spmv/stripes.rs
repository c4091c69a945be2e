//! `k2rpq bench-spmv --gpus`: one batched bit-packed Boolean product with the matrix split
//! in row stripes across 1, 2, .., N GPUs.
//!
//! The rows are cut into `k` stripes of about equal cells; GPU `i` holds the k²-tree of
//! stripe `i` only (same `rows × cols` shape, other rows empty), so each GPU stores about
//! `1/k` of the tree and a matrix larger than one GPU's budget fits on several. Right
//! product `y = A x`: every GPU gets all of `x` and writes its stripe's rows of `y`. Left
//! product `yᵀ = xᵀ A`: every GPU reads only its stripe's rows of `x` (its tree has no
//! other rows) and produces a partial `y`. Either way the host merges by OR-ing the
//! partial outputs, and the merge is checked against the CPU engine's product.
//!
//! A repeat starts every GPU's product at once (a barrier) and ends when the last GPU's
//! stream is idle; the median over repeats is reported, with the speedup over one GPU.

use std::sync::{Arc, Barrier};
use std::time::Instant;

use super::{input_bits, SpmvError};
use crate::engine::cpu::CpuEngine;
use crate::engine::gpu::GpuEngine;
use crate::engine::{BitMatrix, Direction, Engine, MatrixConfig, Traversal};
use crate::k2tree::K2Tree;

/// Options of the row-stripe run.
#[derive(Clone, Debug, serde::Serialize)]
pub struct StripeOptions {
    /// Sources per product (a multiple of 64: `64·W`).
    pub sources: usize,
    /// Timed repeats (median reported).
    pub repeats: usize,
    /// Untimed runs first.
    pub warmup: usize,
    /// Device bytes each GPU may use for its stripe and the product's working set; a GPU
    /// count whose largest stripe does not fit is reported as not fitting.
    pub gpu_budget: Option<u64>,
}

/// One GPU count.
#[derive(Clone, Debug, serde::Serialize)]
pub struct StripeRow {
    /// GPUs.
    pub gpus: usize,
    /// Device bytes of the largest stripe's tree plus its input and output bit batches,
    /// doubled as an allowance for the product's scratch (an estimate made before
    /// anything is loaded, so that a budget can rule a GPU count out).
    pub max_device_bytes: u64,
    /// Whether every stripe fits the per-GPU budget (the row is timed only then).
    pub fits: bool,
    /// Median right product (`A x`), milliseconds.
    pub right_ms: Option<f64>,
    /// Median left product (`xᵀ A`), milliseconds.
    pub left_ms: Option<f64>,
    /// One-GPU right time over this one (`None` when one GPU does not fit).
    pub right_speedup: Option<f64>,
    /// One-GPU left time over this one.
    pub left_speedup: Option<f64>,
}

/// The report.
#[derive(Clone, Debug, serde::Serialize)]
pub struct StripeReport {
    /// Options used.
    pub options: StripeOptions,
    /// Cells of the matrix.
    pub nnz: u64,
    /// GPU ordinals, in order of use.
    pub ordinals: Vec<usize>,
    /// Per GPU count.
    pub rows: Vec<StripeRow>,
}

impl StripeReport {
    /// The printed table.
    pub fn table(&self) -> String {
        let f = |v: Option<f64>, s: &str| {
            v.map(|v| format!("{v:.3}{s}"))
                .unwrap_or_else(|| "-".into())
        };
        let mut out = format!(
            "row stripes, {} sources, {} cells\nGPUs\tMiB/GPU\tfits\tright ms\tspeedup\tleft ms\tspeedup\n",
            self.options.sources, self.nnz
        );
        for r in &self.rows {
            out += &format!(
                "{}\t{:.1}\t{}\t{}\t{}\t{}\t{}\n",
                r.gpus,
                r.max_device_bytes as f64 / (1 << 20) as f64,
                if r.fits { "yes" } else { "no" },
                f(r.right_ms, ""),
                f(r.right_speedup, "x"),
                f(r.left_ms, ""),
                f(r.left_speedup, "x")
            );
        }
        out
    }
}

/// Cuts `tree` into `k` row stripes of about equal cells (same shape each).
pub fn row_stripes(tree: &K2Tree, k: usize) -> Vec<Arc<K2Tree>> {
    let cells = tree.cells();
    let rows = tree.rows() as usize;
    let mut per_row = vec![0u64; rows + 1];
    for &(r, _) in &cells {
        per_row[r as usize] += 1;
    }
    // Stripe of row r: the first stripe whose share of cells is not yet full.
    let total = cells.len() as u64;
    let mut stripe_of = vec![0u32; rows + 1];
    let (mut seen, mut s) = (0u64, 0usize);
    for r in 0..=rows {
        while s + 1 < k && seen >= total * (s as u64 + 1) / k as u64 {
            s += 1;
        }
        stripe_of[r] = s as u32;
        seen += per_row[r];
    }
    let mut parts: Vec<Vec<(u32, u32)>> = vec![Vec::new(); k];
    for (r, c) in cells {
        parts[stripe_of[r as usize] as usize].push((r, c));
    }
    parts
        .into_iter()
        .map(|p| Arc::new(K2Tree::from_edges(tree.rows(), tree.cols(), p)))
        .collect()
}

fn sync(e: &GpuEngine) -> Result<(), SpmvError> {
    e.context()
        .stream()
        .synchronize()
        .map_err(|err| SpmvError::Reference(format!("GPU {}: {err:?}", e.device().ordinal)))
}

/// Times `dir` over the stripes on the engines (stripe `i` on engine `i`); returns the
/// median milliseconds and the merged output.
fn time_stripes(
    engines: &[GpuEngine],
    stripes: &[Arc<K2Tree>],
    dir: Direction,
    x: &BitMatrix,
    opts: &StripeOptions,
) -> Result<(f64, BitMatrix), SpmvError> {
    let k = stripes.len();
    let barrier = Barrier::new(k);
    let repeats = opts.repeats.max(1);
    let results: Vec<Result<(Vec<f64>, BitMatrix), SpmvError>> = std::thread::scope(|s| {
        let handles: Vec<_> = engines[..k]
            .iter()
            .zip(stripes)
            .map(|(e, tree)| {
                let barrier = &barrier;
                s.spawn(move || -> Result<(Vec<f64>, BitMatrix), SpmvError> {
                    // Every thread reaches every barrier, even after an error, so that
                    // no other thread waits forever.
                    let setup = (|| -> Result<_, SpmvError> {
                        let m = e.load(tree, MatrixConfig::default())?;
                        let xb = e.bits_upload(x)?;
                        let (_, o) = dir.lengths(tree.rows(), tree.cols());
                        let y = e.bits_zeroed(o as usize, x.shape().1)?;
                        Ok((m, xb, y))
                    })();
                    let mut state = setup;
                    let mut times = Vec::with_capacity(repeats);
                    for i in 0..opts.warmup + repeats {
                        barrier.wait();
                        let t0 = Instant::now();
                        if let Ok((m, xb, y)) = &mut state {
                            let r = e
                                .bits_clear(y)
                                .and_then(|_| e.bool_product(m, dir, xb, y, Traversal::Dense))
                                .map_err(SpmvError::from)
                                .and_then(|_| sync(e));
                            if let Err(err) = r {
                                state = Err(err);
                            }
                        }
                        let dt = t0.elapsed().as_secs_f64() * 1e3;
                        if i >= opts.warmup {
                            times.push(dt);
                        }
                        barrier.wait();
                    }
                    let (_, _, y) = state?;
                    Ok((times, e.bits_download(&y)?))
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().expect("stripe worker panicked"))
            .collect()
    });
    let mut per_repeat = vec![0f64; repeats];
    let mut merged: Option<BitMatrix> = None;
    for r in results {
        let (times, y) = r?;
        for (m, t) in per_repeat.iter_mut().zip(times) {
            *m = m.max(t);
        }
        match &mut merged {
            None => merged = Some(y),
            Some(acc) => {
                for (d, s) in acc.as_words_mut().iter_mut().zip(y.as_words()) {
                    *d |= s;
                }
            }
        }
    }
    per_repeat.sort_by(f64::total_cmp);
    Ok((
        per_repeat[per_repeat.len() / 2],
        merged.expect("at least one stripe"),
    ))
}

/// Runs the row-stripe benchmark of `tree` on the GPUs `ordinals` (1 up to all).
pub fn run_stripes(
    tree: &Arc<K2Tree>,
    ordinals: &[usize],
    opts: &StripeOptions,
) -> Result<StripeReport, SpmvError> {
    if ordinals.is_empty() {
        return Err(SpmvError::Options("--gpus selects no GPU".into()));
    }
    if opts.sources == 0 || !opts.sources.is_multiple_of(64) {
        return Err(SpmvError::Options(format!(
            "{} sources: a multiple of 64 is needed",
            opts.sources
        )));
    }
    let words = opts.sources / 64;
    let engines: Vec<GpuEngine> = ordinals
        .iter()
        .map(|&k| GpuEngine::new(k))
        .collect::<Result<_, _>>()?;
    let dirs = [Direction::Right, Direction::Left];
    let inputs: Vec<BitMatrix> = dirs
        .iter()
        .enumerate()
        .map(|(j, d)| {
            let (i, _) = d.lengths(tree.rows(), tree.cols());
            input_bits(i as usize, words, 0x5717 + j as u64)
        })
        .collect();
    // The reference of each direction: the CPU engine's product of the whole tree.
    let mut reference: Vec<Option<BitMatrix>> = vec![None, None];
    let mut rows: Vec<StripeRow> = Vec::new();
    for k in 1..=ordinals.len() {
        let stripes = if k == 1 {
            vec![tree.clone()]
        } else {
            row_stripes(tree, k)
        };
        let max_device_bytes = stripes
            .iter()
            .zip(&engines)
            .map(|(s, e)| {
                let load = e.load_bytes(s, MatrixConfig::default());
                // Besides the matrix: x and y, doubled for the tile scratch (known
                // exactly only once the matrix is loaded).
                let (i, o) = (s.rows(), s.cols());
                load + (i + o) * words as u64 * 8 * 2
            })
            .max()
            .unwrap_or(0);
        let fits = opts.gpu_budget.is_none_or(|b| max_device_bytes <= b);
        let mut times = [None, None];
        if fits {
            for (j, &dir) in dirs.iter().enumerate() {
                let (ms, y) = time_stripes(&engines, &stripes, dir, &inputs[j], opts)?;
                let want = match &reference[j] {
                    Some(r) => r,
                    None => {
                        let cpu = CpuEngine::new();
                        let m = cpu.load(tree, MatrixConfig::default())?;
                        let x = cpu.bits_upload(&inputs[j])?;
                        let (_, o) = dir.lengths(tree.rows(), tree.cols());
                        let mut out = cpu.bits_zeroed(o as usize, words)?;
                        cpu.bool_product(&m, dir, &x, &mut out, Traversal::Dense)?;
                        reference[j].insert(cpu.bits_download(&out)?)
                    }
                };
                if let Some(why) = super::bits_disagreement(&y, want) {
                    return Err(SpmvError::Reference(format!(
                        "{dir:?} product on {k} GPUs (row stripes) differs: {why}"
                    )));
                }
                times[j] = Some(ms);
            }
        }
        let base = rows.first().map(|r| (r.right_ms, r.left_ms));
        let speedup = |b: Option<Option<f64>>, t: Option<f64>| match (b.flatten(), t) {
            (Some(b), Some(t)) => Some(b / t.max(1e-9)),
            (None, Some(_)) if k == 1 => Some(1.0),
            _ => None,
        };
        let row = StripeRow {
            gpus: k,
            max_device_bytes,
            fits,
            right_ms: times[0],
            left_ms: times[1],
            right_speedup: speedup(base.map(|b| b.0), times[0]),
            left_speedup: speedup(base.map(|b| b.1), times[1]),
        };
        eprintln!(
            "{k} GPU(s): {:.1} MiB/GPU, right {:?} ms, left {:?} ms",
            max_device_bytes as f64 / (1 << 20) as f64,
            row.right_ms,
            row.left_ms
        );
        rows.push(row);
    }
    Ok(StripeReport {
        options: opts.clone(),
        nnz: tree.nnz(),
        ordinals: ordinals.to_vec(),
        rows,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stripes_partition_the_cells_by_row() {
        let edges: Vec<(u32, u32)> = (0..500u32).map(|i| (i * 7 % 300, i * 13 % 300)).collect();
        let tree = K2Tree::from_edges(300, 300, edges);
        for k in 1..=4 {
            let s = row_stripes(&tree, k);
            assert_eq!(s.len(), k);
            let mut all: Vec<(u32, u32)> = s.iter().flat_map(|t| t.cells()).collect();
            all.sort_unstable();
            let mut want = tree.cells();
            want.sort_unstable();
            assert_eq!(all, want, "k = {k}");
            // Stripes are row ranges, in order, and none is much larger than its share.
            let ranges: Vec<(u32, u32)> = s
                .iter()
                .filter(|t| t.nnz() > 0)
                .map(|t| {
                    let c = t.cells();
                    (
                        c.iter().map(|x| x.0).min().unwrap(),
                        c.iter().map(|x| x.0).max().unwrap(),
                    )
                })
                .collect();
            assert!(ranges.windows(2).all(|w| w[0].1 < w[1].0), "{ranges:?}");
            let max = s.iter().map(|t| t.nnz()).max().unwrap();
            assert!(max <= tree.nnz() / k as u64 + 10, "k = {k}: {max}");
        }
    }

    #[test]
    fn bad_options_are_errors() {
        let tree = Arc::new(K2Tree::from_edges(4, 4, vec![(0, 1)]));
        let o = StripeOptions {
            sources: 100,
            repeats: 1,
            warmup: 0,
            gpu_budget: None,
        };
        assert!(matches!(
            run_stripes(&tree, &[0], &o),
            Err(SpmvError::Options(_))
        ));
        assert!(matches!(
            run_stripes(&tree, &[], &o),
            Err(SpmvError::Options(_))
        ));
    }
}
