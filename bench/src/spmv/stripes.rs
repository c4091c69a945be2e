//! `k2rpq bench-spmv --gpus`: one batched bit-packed Boolean product with the matrix split
//! in row stripes across 1, 2, .., N GPUs.
//!
//! The rows are cut into `k` stripes of about equal cells; GPU `i` holds the k²-tree of
//! stripe `i` only (its rows renumbered from 0: a `rows_i × cols` matrix), so each GPU
//! stores about `1/k` of the tree and a matrix larger than one GPU's budget fits on
//! several. Right product `y = A x`: every GPU gets all of `x` and computes its stripe's
//! rows of `y`, which the host places at the stripe's offset. Left product `yᵀ = xᵀ A`:
//! every GPU gets only its stripe's rows of `x` and computes a partial `y` over all
//! columns, which the host ORs together. The merge is checked against the CPU engine's
//! product of the whole matrix.
//!
//! A repeat starts every GPU's product at once (a barrier) and ends when the last GPU's
//! stream is idle; the median over repeats is reported, with the speedup over one GPU.

use std::sync::{Arc, Barrier};
use std::time::Instant;

use super::{input_bits, SpmvError};
use k2rpq::engine::cpu::CpuEngine;
use k2rpq::engine::gpu::GpuEngine;
use k2rpq::engine::{BitMatrix, Direction, Engine, MatrixConfig, Traversal};
use k2rpq::k2tree::K2Tree;

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

/// One row stripe: rows `first_row..first_row + tree.rows()` of the matrix.
pub struct Stripe {
    /// The stripe's first row in the whole matrix.
    pub first_row: u64,
    /// The stripe's cells, rows renumbered from 0 (`rows_i × cols`).
    pub tree: Arc<K2Tree>,
}

/// Cuts `tree` into `k` non-empty row stripes of about equal cells, in row order. `k`
/// must not exceed the rows.
pub fn row_stripes(tree: &K2Tree, k: usize) -> Vec<Stripe> {
    let rows = tree.rows() as usize;
    assert!(k >= 1 && k <= rows, "{k} stripes of {rows} rows");
    let cells = tree.cells();
    // before[r]: cells in rows < r.
    let mut before = vec![0u64; rows + 1];
    for &(r, _) in &cells {
        before[r as usize + 1] += 1;
    }
    for r in 0..rows {
        before[r + 1] += before[r];
    }
    let total = cells.len() as u64;
    let mut bounds = vec![0usize; k + 1];
    bounds[k] = rows;
    let mut r = 0;
    for i in 1..k {
        let target = total * i as u64 / k as u64;
        while r < rows && before[r] < target {
            r += 1;
        }
        // At least one row per stripe, and room left for the stripes after this one.
        bounds[i] = r.max(bounds[i - 1] + 1).min(rows - (k - i));
    }
    let mut parts: Vec<Vec<(u32, u32)>> = vec![Vec::new(); k];
    for (row, c) in cells {
        let i = bounds.partition_point(|&b| b <= row as usize) - 1;
        parts[i].push((row - bounds[i] as u32, c));
    }
    parts
        .into_iter()
        .enumerate()
        .map(|(i, p)| Stripe {
            first_row: bounds[i] as u64,
            tree: Arc::new(K2Tree::from_edges(
                (bounds[i + 1] - bounds[i]) as u64,
                tree.cols(),
                p,
            )),
        })
        .collect()
}

/// ORs a stripe's output `y` into the whole product's `merged`: a right product's rows
/// go to the stripe's offset, a left product's partial `y` covers every column.
fn merge_into(merged: &mut BitMatrix, y: &BitMatrix, dir: Direction, first_row: u64) {
    let offset = match dir {
        Direction::Right => first_row as usize * y.shape().1,
        Direction::Left => 0,
    };
    let dst = &mut merged.as_words_mut()[offset..offset + y.as_words().len()];
    for (d, s) in dst.iter_mut().zip(y.as_words()) {
        *d |= s;
    }
}

/// Rows `first..first + len` of `x`.
fn rows_of(x: &BitMatrix, first: usize, len: usize) -> BitMatrix {
    let w = x.shape().1;
    BitMatrix::from_words(len, w, x.as_words()[first * w..(first + len) * w].to_vec())
}

fn sync(e: &GpuEngine) -> Result<(), SpmvError> {
    e.stream()
        .synchronize()
        .map_err(|err| SpmvError::Reference(format!("GPU {}: {err:?}", e.device().ordinal)))
}

/// Times `dir` over the stripes on the engines (stripe `i` on engine `i`); returns the
/// median milliseconds and the merged output.
fn time_stripes(
    engines: &[GpuEngine],
    stripes: &[Stripe],
    dir: Direction,
    x: &BitMatrix,
    opts: &StripeOptions,
) -> Result<(f64, BitMatrix), SpmvError> {
    let words = x.shape().1;
    let k = stripes.len();
    let barrier = Barrier::new(k);
    let repeats = opts.repeats.max(1);
    let results: Vec<Result<(Vec<f64>, BitMatrix), SpmvError>> = std::thread::scope(|s| {
        let handles: Vec<_> = engines[..k]
            .iter()
            .zip(stripes)
            .map(|(e, stripe)| {
                let barrier = &barrier;
                let tree = &stripe.tree;
                s.spawn(move || -> Result<(Vec<f64>, BitMatrix), SpmvError> {
                    // Every thread reaches every barrier, even after an error, so that
                    // no other thread waits forever.
                    let setup = (|| -> Result<_, SpmvError> {
                        let m = e.load(tree, MatrixConfig::default())?;
                        // Left: only the stripe's rows of x; right: all of x.
                        let xb = match dir {
                            Direction::Left => e.bits_upload(&rows_of(
                                x,
                                stripe.first_row as usize,
                                tree.rows() as usize,
                            ))?,
                            Direction::Right => e.bits_upload(x)?,
                        };
                        let (_, o) = dir.lengths(tree.rows(), tree.cols());
                        let y = e.bits_zeroed(o as usize, words)?;
                        Ok((m, xb, y))
                    })();
                    let mut state = setup;
                    let mut times = Vec::with_capacity(repeats);
                    for i in 0..opts.warmup + repeats {
                        barrier.wait();
                        let t0 = Instant::now();
                        if let Ok((m, xb, y)) = &mut state {
                            let r = e
                                .bool_product_overwrite(m, dir, xb, y, Traversal::Dense)
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
    // Right: rows of y by stripe offset; left: partial y over all columns, OR-ed.
    let out_rows = match dir {
        Direction::Right => stripes.iter().map(|s| s.first_row + s.tree.rows()).max(),
        Direction::Left => stripes.first().map(|s| s.tree.cols()),
    }
    .unwrap_or(0) as usize;
    let mut merged = BitMatrix::zeroed(out_rows, words);
    for (r, stripe) in results.into_iter().zip(stripes) {
        let (times, y) = r?;
        for (m, t) in per_repeat.iter_mut().zip(times) {
            *m = m.max(t);
        }
        merge_into(&mut merged, &y, dir, stripe.first_row);
    }
    per_repeat.sort_by(f64::total_cmp);
    Ok((per_repeat[per_repeat.len() / 2], merged))
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
        if k as u64 > tree.rows() {
            return Err(SpmvError::Options(format!(
                "{k} row stripes of a {}-row matrix",
                tree.rows()
            )));
        }
        let stripes = if k == 1 {
            vec![Stripe {
                first_row: 0,
                tree: tree.clone(),
            }]
        } else {
            row_stripes(tree, k)
        };
        let max_device_bytes = stripes
            .iter()
            .zip(&engines)
            .map(|(s, e)| {
                let load = e.load_bytes(&s.tree, MatrixConfig::default());
                // Besides the matrix: the stripe's rows of one batch and all columns
                // of the other, doubled for the tile scratch (known exactly only once
                // the matrix is loaded).
                load + (s.tree.rows() + s.tree.cols()) * words as u64 * 8 * 2
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
        let skewed: Vec<(u32, u32)> = (0..400u32).map(|i| (299, i % 300)).collect();
        for edges in [edges, skewed] {
            let tree = K2Tree::from_edges(300, 300, edges);
            for k in 1..=4 {
                let s = row_stripes(&tree, k);
                assert_eq!(s.len(), k);
                let mut all: Vec<(u32, u32)> = s
                    .iter()
                    .flat_map(|st| {
                        st.tree
                            .cells()
                            .into_iter()
                            .map(move |(r, c)| (r + st.first_row as u32, c))
                    })
                    .collect();
                all.sort_unstable();
                let mut want = tree.cells();
                want.sort_unstable();
                assert_eq!(all, want, "k = {k}");
                // Contiguous, non-empty row ranges covering every row, in order.
                assert_eq!(s[0].first_row, 0);
                for w in s.windows(2) {
                    assert_eq!(w[0].first_row + w[0].tree.rows(), w[1].first_row);
                }
                assert!(s
                    .iter()
                    .all(|st| st.tree.rows() >= 1 && st.tree.cols() == 300));
                let last = s.last().unwrap();
                assert_eq!(last.first_row + last.tree.rows(), 300);
            }
        }
        // Balanced when rows allow it: 10 distinct cells in every row.
        let even: Vec<(u32, u32)> = (0..3000u32).map(|i| (i % 300, i / 300)).collect();
        let tree = K2Tree::from_edges(300, 300, even);
        let s = row_stripes(&tree, 3);
        assert!(
            s.iter().all(|st| st.tree.nnz() == tree.nnz() / 3),
            "{:?}",
            s.iter().map(|st| st.tree.nnz()).collect::<Vec<_>>()
        );
    }

    #[test]
    fn merges_match_the_whole_product_on_the_cpu() {
        // The merge rules (right: place rows at the offset; left: OR partial outputs of
        // the stripe's x rows), checked with the CPU engine standing in for the GPUs.
        let edges: Vec<(u32, u32)> = (0..3000u32).map(|i| (i * 31 % 500, i * 17 % 400)).collect();
        let tree = K2Tree::from_edges(500, 400, edges);
        let cpu = CpuEngine::new();
        let product = |t: &Arc<K2Tree>, dir: Direction, x: &BitMatrix| {
            let m = cpu.load(t, MatrixConfig::default()).unwrap();
            let xb = cpu.bits_upload(x).unwrap();
            let (_, o) = dir.lengths(t.rows(), t.cols());
            let mut y = cpu.bits_zeroed(o as usize, x.shape().1).unwrap();
            cpu.bool_product(&m, dir, &xb, &mut y, Traversal::Dense)
                .unwrap();
            cpu.bits_download(&y).unwrap()
        };
        let whole = Arc::new(tree.clone());
        for dir in [Direction::Right, Direction::Left] {
            let (i, o) = dir.lengths(500, 400);
            let x = input_bits(i as usize, 2, 7);
            let want = product(&whole, dir, &x);
            let stripes = row_stripes(&tree, 3);
            let mut got = BitMatrix::zeroed(o as usize, 2);
            for st in &stripes {
                let xs = match dir {
                    Direction::Right => x.clone(),
                    Direction::Left => rows_of(&x, st.first_row as usize, st.tree.rows() as usize),
                };
                merge_into(&mut got, &product(&st.tree, dir, &xs), dir, st.first_row);
            }
            assert_eq!(got.as_words(), want.as_words(), "{dir:?}");
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
