//! The peers our engine is measured against: CSR through cuSPARSE ([`cusparse`]) and a
//! Boolean CSR with hand-written kernels ([`bcsr`]). For benchmarks and cross-checks only.
//!
//! Both multiply the same Boolean matrix as the k²-tree engines with unit weights, so
//! their f32 results equal a [`PlusTimes`](k2rpq::engine::PlusTimes) product of the tree.
//! Both follow the GPU engine's availability rules: no libcuda, no device, no NVRTC or no
//! cuSPARSE gives [`EngineError::Unavailable`], never a panic.

pub mod bcsr;
pub mod cusparse;

use std::sync::Arc;

use cudarc::driver::{CudaContext, CudaSlice, CudaStream, DevicePtr, DeviceRepr, ValidAsZeroBits};
use rayon::prelude::*;

use k2rpq::engine::{Direction, EngineError, Result};
use k2rpq::k2tree::{morton, K2Tree};

/// A Boolean matrix in compressed sparse row form on the host: sorted, duplicate-free
/// column indices per row.
///
/// ```
/// use k2rpq_bench::baseline::Csr;
/// let csr = Csr::from_edges(3, 4, &[(2, 1), (0, 3), (2, 1), (0, 0)]).unwrap();
/// assert_eq!(csr.nnz(), 3);
/// assert_eq!(csr.row(0), &[0, 3]);
/// assert_eq!(csr.row(2), &[1]);
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Csr {
    rows: u64,
    cols: u64,
    row_ptr: Vec<u64>,
    col_idx: Vec<u32>,
}

impl Csr {
    /// Builds the CSR of the cells `(row, col)`; duplicates are merged. A cell outside
    /// `rows × cols` is an [`EngineError::Shape`] error.
    pub fn from_edges(rows: u64, cols: u64, edges: &[(u32, u32)]) -> Result<Self> {
        check_shape(rows, cols)?;
        if let Some(&(r, c)) = edges
            .par_iter()
            .find_any(|&&(r, c)| r as u64 >= rows || c as u64 >= cols)
        {
            return Err(EngineError::Shape(format!(
                "cell ({r}, {c}) lies outside the {rows}×{cols} matrix"
            )));
        }
        // One sort of (row, col) keys gives row order, column order and duplicates side by
        // side; 8 bytes per edge on top of the input.
        let keys = edges
            .par_iter()
            .map(|&(r, c)| (r as u64) << 32 | c as u64)
            .collect();
        let mut csr = Self::from_keys(rows, keys);
        csr.cols = cols;
        Ok(csr)
    }

    /// Builds the CSR of cells given as Morton codes (what the edge-list readers and
    /// generators of [`crate::gen`] produce); duplicates are merged.
    pub fn from_codes(rows: u64, cols: u64, codes: &[u64]) -> Result<Self> {
        check_shape(rows, cols)?;
        let keys: Vec<u64> = codes
            .par_iter()
            .map(|&m| {
                let (r, c) = morton::decode(m);
                (r as u64) << 32 | c as u64
            })
            .collect();
        if let Some(&k) = keys
            .par_iter()
            .find_any(|&&k| k >> 32 >= rows || k as u32 as u64 >= cols)
        {
            return Err(EngineError::Shape(format!(
                "cell ({}, {}) lies outside the {rows}×{cols} matrix",
                k >> 32,
                k as u32
            )));
        }
        let mut csr = Self::from_keys(rows, keys);
        csr.cols = cols;
        Ok(csr)
    }

    /// From `row << 32 | col` keys inside the matrix (any order, duplicates allowed).
    fn from_keys(rows: u64, mut keys: Vec<u64>) -> Self {
        keys.par_sort_unstable();
        keys.dedup();
        let mut row_ptr = vec![0u64; rows as usize + 1];
        for &k in &keys {
            row_ptr[(k >> 32) as usize + 1] += 1;
        }
        for i in 0..rows as usize {
            row_ptr[i + 1] += row_ptr[i];
        }
        let col_idx = keys.par_iter().map(|&k| k as u32).collect();
        Csr {
            rows,
            cols: 0,
            row_ptr,
            col_idx,
        }
    }

    /// The CSR of the matrix a tree holds (for a relation that only exists as a tree,
    /// such as a predicate of a store).
    pub fn from_tree(tree: &K2Tree) -> Self {
        Self::from_edges(tree.rows(), tree.cols(), &tree.cells())
            .expect("a valid tree has its cells inside its matrix")
    }

    /// Matrix rows.
    pub fn rows(&self) -> u64 {
        self.rows
    }
    /// Matrix columns.
    pub fn cols(&self) -> u64 {
        self.cols
    }
    /// Stored cells.
    pub fn nnz(&self) -> u64 {
        self.col_idx.len() as u64
    }
    /// Row pointers: row `r` holds `col_idx[row_ptr[r]..row_ptr[r + 1]]`.
    pub fn row_ptr(&self) -> &[u64] {
        &self.row_ptr
    }
    /// Column indices, row by row.
    pub fn col_idx(&self) -> &[u32] {
        &self.col_idx
    }
    /// The sorted columns of row `r`.
    pub fn row(&self, r: u32) -> &[u32] {
        let r = r as usize;
        &self.col_idx[self.row_ptr[r] as usize..self.row_ptr[r + 1] as usize]
    }
    /// Whether the row pointers need 64 bits (more than `i32::MAX` cells: cuSPARSE's
    /// 32-bit index type is signed).
    pub fn needs_64bit_offsets(&self) -> bool {
        self.nnz() > i32::MAX as u64
    }
    /// Bytes of one row pointer on the device (4 or 8).
    pub fn offset_bytes(&self) -> u64 {
        if self.needs_64bit_offsets() {
            8
        } else {
            4
        }
    }
    /// Device bytes of the cuSPARSE form: row pointers, 32-bit columns, f32 values.
    pub fn cusparse_bytes(&self) -> u64 {
        (self.rows + 1) * self.offset_bytes() + self.nnz() * 8
    }
    /// Device bytes of the Boolean form: row pointers and 32-bit columns, no values.
    pub fn bcsr_bytes(&self) -> u64 {
        (self.rows + 1) * self.offset_bytes() + self.nnz() * 4
    }

    /// Reference plus-times product with unit weights (the oracle for the baselines'
    /// own tests): `y = A x` (right) or `yᵀ = xᵀ A` (left) for a row-major batch.
    pub fn product(&self, dir: Direction, x: &[f32], batch: usize) -> Result<Vec<f32>> {
        let (n_in, n_out) = dir.lengths(self.rows, self.cols);
        if batch == 0 || x.len() as u64 != n_in * batch as u64 {
            return Err(EngineError::Shape(format!(
                "{dir:?} product of a {}×{} CSR with batch {batch} needs x of {} entries, got {}",
                self.rows,
                self.cols,
                n_in * batch as u64,
                x.len()
            )));
        }
        let mut y = vec![0.0f32; (n_out * batch as u64) as usize];
        match dir {
            Direction::Right => {
                y.par_chunks_mut(batch).enumerate().for_each(|(r, out)| {
                    for &c in self.row(r as u32) {
                        let xs = &x[c as usize * batch..(c as usize + 1) * batch];
                        out.iter_mut().zip(xs).for_each(|(o, v)| *o += v);
                    }
                });
            }
            Direction::Left => {
                for r in 0..self.rows as usize {
                    let xs = &x[r * batch..(r + 1) * batch];
                    for &c in self.row(r as u32) {
                        let out = &mut y[c as usize * batch..(c as usize + 1) * batch];
                        out.iter_mut().zip(xs).for_each(|(o, v)| *o += v);
                    }
                }
            }
        }
        Ok(y)
    }
}

fn check_shape(rows: u64, cols: u64) -> Result<()> {
    if rows > u32::MAX as u64 + 1 || cols > u32::MAX as u64 + 1 {
        return Err(EngineError::Shape(format!(
            "a {rows}×{cols} matrix does not fit 32-bit indices"
        )));
    }
    Ok(())
}

/// Why no GPU baseline can run here, or `None` when libcuda is present and a device is
/// visible. Checks the library before any other cudarc call (cudarc panics without it).
pub fn gpu_unavailable_reason() -> Option<String> {
    // SAFETY: only tries to dlopen the library.
    if !unsafe { cudarc::driver::sys::is_culib_present() } {
        return Some("libcuda not found".into());
    }
    match CudaContext::device_count() {
        Ok(n) if n > 0 => None,
        Ok(_) => Some("no CUDA device".into()),
        Err(e) => Some(format!("CUDA driver: {e}")),
    }
}

/// The context and stream a baseline runs on. Event tracking is off: each baseline uses
/// one stream, so stream order alone orders its copies and kernels, and tracking would
/// add event records to every timed launch.
#[derive(Clone, Debug)]
pub struct Device {
    /// The CUDA context (device 0).
    pub ctx: Arc<CudaContext>,
    /// The stream every operation of the baseline is issued on.
    pub stream: Arc<CudaStream>,
}

impl Device {
    /// Opens device 0, or says why it cannot.
    pub fn open() -> Result<Self> {
        if let Some(why) = gpu_unavailable_reason() {
            return Err(EngineError::Unavailable(why));
        }
        let ctx = CudaContext::new(0).map_err(cuda)?;
        // SAFETY: every buffer of a baseline is used on `stream` only.
        unsafe { ctx.disable_event_tracking() };
        let stream = ctx.new_stream().map_err(cuda)?;
        Ok(Device { ctx, stream })
    }

    /// Allocates `len` zeroed elements, naming `what` in the out-of-memory error.
    pub fn zeros<T: DeviceRepr + ValidAsZeroBits>(
        &self,
        len: usize,
        what: &str,
    ) -> Result<CudaSlice<T>> {
        self.stream
            .alloc_zeros::<T>(len.max(1))
            .map_err(|e| oom::<T>(len, what, e))
    }

    /// Copies a host slice to a new device buffer.
    pub fn upload<T: DeviceRepr>(&self, host: &[T], what: &str) -> Result<CudaSlice<T>> {
        if host.is_empty() {
            // cudarc rejects zero-length allocations: keep one element as a placeholder.
            // SAFETY: the placeholder is never read.
            return unsafe { self.stream.alloc::<T>(1) }.map_err(|e| oom::<T>(1, what, e));
        }
        self.stream
            .clone_htod(host)
            .map_err(|e| oom::<T>(host.len(), what, e))
    }

    /// Overwrites a device buffer with a host slice of the same length.
    pub fn write<T: DeviceRepr>(&self, dst: &mut CudaSlice<T>, host: &[T]) -> Result<()> {
        if host.is_empty() {
            return Ok(());
        }
        self.stream.memcpy_htod(host, dst).map_err(cuda)
    }

    /// Copies the first `len` elements of a device buffer back.
    pub fn download<T: DeviceRepr + Default + Clone>(
        &self,
        src: &CudaSlice<T>,
        len: usize,
    ) -> Result<Vec<T>> {
        let mut v = self.stream.clone_dtoh(src).map_err(cuda)?;
        self.stream.synchronize().map_err(cuda)?;
        v.truncate(len);
        Ok(v)
    }

    /// The raw device address of a buffer (event tracking is off, so no event is recorded).
    pub fn ptr<T>(&self, s: &CudaSlice<T>) -> u64 {
        let (p, _sync) = s.device_ptr(&self.stream);
        p
    }

    /// Median and minimum time in milliseconds of `op` over `repeats` runs after `warmup`
    /// runs, each run bracketed by CUDA events on the stream, behind a hold of the stream
    /// ([`hold_stream`](k2rpq::engine::gpu::hold_stream)) so that the events time the
    /// device's work rather than the host's submission of it.
    pub fn time(
        &self,
        warmup: usize,
        repeats: usize,
        mut op: impl FnMut() -> Result<()>,
    ) -> Result<Timing> {
        for _ in 0..warmup {
            op()?;
        }
        self.stream.synchronize().map_err(cuda)?;
        let flags = Some(cudarc::driver::sys::CUevent_flags::CU_EVENT_DEFAULT);
        let start = self.ctx.new_event(flags).map_err(cuda)?;
        let end = self.ctx.new_event(flags).map_err(cuda)?;
        let mut ms = Vec::with_capacity(repeats.max(1));
        let hold_ns = k2rpq::engine::gpu::timing_hold_ns();
        for _ in 0..repeats.max(1) {
            k2rpq::engine::gpu::hold_stream(&self.stream, hold_ns)?;
            start.record(&self.stream).map_err(cuda)?;
            op()?;
            end.record(&self.stream).map_err(cuda)?;
            end.synchronize().map_err(cuda)?;
            ms.push(start.elapsed_ms(&end).map_err(cuda)? as f64);
        }
        Ok(Timing::from_samples(ms))
    }
}

/// Times of one measured operation.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Timing {
    /// Median over the repeats, milliseconds.
    pub median_ms: f64,
    /// Fastest repeat, milliseconds.
    pub min_ms: f64,
    /// Repeats measured.
    pub repeats: usize,
}

impl Timing {
    /// Median and minimum of some samples (milliseconds; at least one).
    pub fn from_samples(mut ms: Vec<f64>) -> Self {
        ms.sort_by(f64::total_cmp);
        let n = ms.len();
        let median = if n == 0 {
            f64::NAN
        } else if n % 2 == 1 {
            ms[n / 2]
        } else {
            (ms[n / 2 - 1] + ms[n / 2]) / 2.0
        };
        Timing {
            median_ms: median,
            min_ms: ms.first().copied().unwrap_or(f64::NAN),
            repeats: n,
        }
    }
}

/// A product prepared on a device (matrix, vectors and scratch allocated), ready to be
/// filled, run many times and read back: what the benchmark times.
pub trait DeviceProduct {
    /// Bytes the matrix occupies on the device.
    fn matrix_bytes(&self) -> u64;
    /// Every device byte this product holds: matrix, input, output, scratch.
    fn working_set_bytes(&self) -> u64;
    /// Copies the input (row-major batch) to the device.
    fn set_input(&mut self, x: &[f32]) -> Result<()>;
    /// Enqueues one product on the device's stream (not synchronised).
    fn run(&mut self) -> Result<()>;
    /// Waits for the product and copies the output back.
    fn output(&mut self) -> Result<Vec<f32>>;
    /// Times `run` with CUDA events.
    fn time(&mut self, warmup: usize, repeats: usize) -> Result<Timing>;
}

/// Maps a driver error to [`EngineError::Cuda`].
pub(crate) fn cuda(e: impl std::fmt::Display) -> EngineError {
    EngineError::Cuda(e.to_string())
}

fn oom<T>(len: usize, what: &str, e: impl std::fmt::Display) -> EngineError {
    let bytes = (len.max(1) * std::mem::size_of::<T>()) as u64;
    let msg = e.to_string();
    if msg.contains("OUT_OF_MEMORY") {
        EngineError::OutOfMemory {
            bytes,
            what: what.to_string(),
        }
    } else {
        EngineError::Cuda(format!("allocating {bytes} bytes for {what}: {msg}"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn csr_merges_duplicates_and_sorts_rows() {
        let csr = Csr::from_edges(4, 5, &[(3, 4), (0, 2), (3, 0), (0, 2), (0, 1)]).unwrap();
        assert_eq!(csr.row_ptr(), &[0, 2, 2, 2, 4]);
        assert_eq!(csr.col_idx(), &[1, 2, 0, 4]);
        assert_eq!(csr.nnz(), 4);
        assert_eq!(csr.cusparse_bytes(), 5 * 4 + 4 * 8);
        assert_eq!(csr.bcsr_bytes(), 5 * 4 + 4 * 4);
    }

    #[test]
    fn csr_from_codes_equals_csr_from_edges() {
        let edges = [(3u32, 1u32), (0, 2), (3, 1), (2, 2)];
        let codes: Vec<u64> = edges.iter().map(|&(r, c)| morton::encode(r, c)).collect();
        assert_eq!(
            Csr::from_codes(4, 3, &codes).unwrap(),
            Csr::from_edges(4, 3, &edges).unwrap()
        );
    }

    #[test]
    fn csr_rejects_cells_outside() {
        let err = Csr::from_edges(2, 2, &[(0, 0), (1, 2)]).unwrap_err();
        assert!(err.to_string().contains("(1, 2)"), "{err}");
    }

    #[test]
    fn csr_of_empty_matrix() {
        let csr = Csr::from_edges(3, 3, &[]).unwrap();
        assert_eq!(csr.nnz(), 0);
        assert_eq!(
            csr.product(Direction::Left, &[1.0; 3], 1).unwrap(),
            vec![0.0; 3]
        );
    }

    #[test]
    fn csr_from_tree_equals_csr_from_edges() {
        let edges: Vec<(u32, u32)> = (0..500u32)
            .map(|i| ((i * 37) % 61, (i * 101 + 7) % 53))
            .collect();
        let tree = K2Tree::from_edges(61, 53, edges.clone());
        assert_eq!(
            Csr::from_tree(&tree),
            Csr::from_edges(61, 53, &edges).unwrap()
        );
    }

    #[test]
    fn csr_products_right_and_left_batched() {
        // A = [[0 1 1], [0 0 0]]; 2×3.
        let csr = Csr::from_edges(2, 3, &[(0, 1), (0, 2)]).unwrap();
        // Right, batch 2: x is 3×2.
        let y = csr
            .product(Direction::Right, &[1.0, 2.0, 3.0, 4.0, 5.0, 6.0], 2)
            .unwrap();
        assert_eq!(y, vec![8.0, 10.0, 0.0, 0.0]);
        let y = csr.product(Direction::Left, &[2.0, 7.0], 1).unwrap();
        assert_eq!(y, vec![0.0, 2.0, 2.0]);
        assert!(csr.product(Direction::Left, &[1.0; 3], 1).is_err());
    }

    #[test]
    fn timing_median() {
        let t = Timing::from_samples(vec![3.0, 1.0, 2.0, 10.0]);
        assert_eq!((t.median_ms, t.min_ms, t.repeats), (2.5, 1.0, 4));
        assert_eq!(Timing::from_samples(vec![5.0, 1.0, 2.0]).median_ms, 2.0);
    }
}
