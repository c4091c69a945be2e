//! Boolean CSR (bCSR): row pointers and column indices only, with the kernels of
//! `bench/cuda/bcsr.cu` - thread-per-row and warp-per-row gathers for the right product,
//! atomic scatters for the left product, one thread per (row, vector) for batches.

use std::sync::Arc;

use cudarc::driver::{CudaFunction, CudaModule, CudaSlice, LaunchConfig, PushKernelArg};
use cudarc::nvrtc::{CompileOptions, Ptx};

use super::{cuda, Csr, Device, DeviceProduct, Timing};
use k2rpq::engine::{Direction, EngineError, Result};

/// The kernels' CUDA C++ source.
pub const BCSR_SOURCE: &str = include_str!("../../cuda/bcsr.cu");

/// Threads per block of every bCSR kernel.
const BLOCK: u32 = 256;

/// Why NVRTC cannot compile here, or `None` when libnvrtc is present.
pub fn nvrtc_unavailable_reason() -> Option<String> {
    // SAFETY: only tries to dlopen the library.
    if unsafe { cudarc::nvrtc::sys::is_culib_present() } {
        None
    } else {
        Some("libnvrtc not found".into())
    }
}

/// Compiles `bench/cuda/bcsr.cu` for sm_90 with NVRTC (no GPU needed, only libnvrtc).
pub fn compile_ptx() -> Result<Ptx> {
    if let Some(why) = nvrtc_unavailable_reason() {
        return Err(EngineError::Unavailable(why));
    }
    cudarc::nvrtc::compile_ptx_with_opts(
        BCSR_SOURCE,
        CompileOptions {
            arch: Some("sm_90"),
            name: Some("bcsr.cu".into()),
            ..Default::default()
        },
    )
    .map_err(|e| EngineError::Cuda(format!("NVRTC compiling cuda/bcsr.cu: {e}")))
}

/// The names of every kernel in `bench/cuda/bcsr.cu`.
pub fn kernel_names() -> Vec<String> {
    let mut names = Vec::new();
    for k in [
        "right_thread",
        "right_warp",
        "left_thread",
        "left_warp",
        "right_batch",
        "left_batch",
    ] {
        for p in ["p32", "p64"] {
            names.push(format!("bcsr_{k}_{p}"));
        }
    }
    names
}

/// How rows are mapped to threads for a single vector.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
pub enum BcsrKernel {
    /// One thread per row (batches always use one thread per row and vector).
    ThreadPerRow,
    /// One warp per row.
    WarpPerRow,
}

impl BcsrKernel {
    /// A short name for reports.
    pub fn name(self) -> &'static str {
        match self {
            BcsrKernel::ThreadPerRow => "thread-per-row",
            BcsrKernel::WarpPerRow => "warp-per-row",
        }
    }
}

enum RowPtr {
    U32(CudaSlice<u32>),
    U64(CudaSlice<u64>),
}

/// A Boolean CSR matrix resident on the device with its compiled kernels.
pub struct BcsrMatrix {
    dev: Device,
    _module: Arc<CudaModule>,
    suffix: &'static str,
    module_fn: std::collections::HashMap<String, CudaFunction>,
    rows: u64,
    cols: u64,
    bytes: u64,
    row_ptr: RowPtr,
    col: CudaSlice<u32>,
}

impl BcsrMatrix {
    /// Compiles the kernels and uploads `csr` (32-bit row pointers unless the cells do
    /// not fit 32 bits).
    pub fn new(csr: &Csr) -> Result<Arc<Self>> {
        let dev = Device::open()?;
        let ptx = compile_ptx()?;
        let module = dev.ctx.load_module(ptx).map_err(cuda)?;
        let mut module_fn = std::collections::HashMap::new();
        for name in kernel_names() {
            let f = module.load_function(&name).map_err(cuda)?;
            module_fn.insert(name, f);
        }
        let col = dev.upload(csr.col_idx(), "bCSR column indices")?;
        let (row_ptr, suffix) = if csr.needs_64bit_offsets() {
            (
                RowPtr::U64(dev.upload(csr.row_ptr(), "bCSR row pointers")?),
                "p64",
            )
        } else {
            let p: Vec<u32> = csr.row_ptr().iter().map(|&o| o as u32).collect();
            (RowPtr::U32(dev.upload(&p, "bCSR row pointers")?), "p32")
        };
        Ok(Arc::new(BcsrMatrix {
            dev,
            _module: module,
            suffix,
            module_fn,
            rows: csr.rows(),
            cols: csr.cols(),
            bytes: csr.bcsr_bytes(),
            row_ptr,
            col,
        }))
    }

    /// `(rows, cols)` of the matrix.
    pub fn shape(&self) -> (u64, u64) {
        (self.rows, self.cols)
    }

    /// Device bytes of the matrix (row pointers and columns).
    pub fn bytes(&self) -> u64 {
        self.bytes
    }

    /// Prepares a product: allocates the input and output. Batches (`batch > 1`) use one
    /// thread per (row, vector) whatever `kernel` says.
    pub fn prepare(
        self: &Arc<Self>,
        dir: Direction,
        batch: usize,
        kernel: BcsrKernel,
    ) -> Result<BcsrProduct> {
        if batch == 0 || batch > u32::MAX as usize {
            return Err(EngineError::Shape(format!("bCSR batch {batch}")));
        }
        let (n_in, n_out) = dir.lengths(self.rows, self.cols);
        let name = match (dir, batch > 1, kernel) {
            (Direction::Right, true, _) => "right_batch",
            (Direction::Left, true, _) => "left_batch",
            (Direction::Right, false, BcsrKernel::ThreadPerRow) => "right_thread",
            (Direction::Right, false, BcsrKernel::WarpPerRow) => "right_warp",
            (Direction::Left, false, BcsrKernel::ThreadPerRow) => "left_thread",
            (Direction::Left, false, BcsrKernel::WarpPerRow) => "left_warp",
        };
        let func = self.module_fn[&format!("bcsr_{name}_{}", self.suffix)].clone();
        let threads_per_row: u64 = if batch > 1 {
            batch as u64
        } else if kernel == BcsrKernel::WarpPerRow {
            32
        } else {
            1
        };
        let threads = self.rows * threads_per_row;
        let grid = threads.div_ceil(BLOCK as u64).max(1);
        if grid > i32::MAX as u64 {
            return Err(EngineError::Unsupported(format!(
                "bCSR grid of {grid} blocks exceeds the launch limit"
            )));
        }
        Ok(BcsrProduct {
            m: self.clone(),
            func,
            dir,
            batch,
            grid: grid as u32,
            x_len: (n_in as usize) * batch,
            y_len: (n_out as usize) * batch,
            x: self.dev.zeros(n_in as usize * batch, "bCSR input")?,
            y: self.dev.zeros(n_out as usize * batch, "bCSR output")?,
        })
    }
}

/// One prepared bCSR product (see [`BcsrMatrix::prepare`]).
pub struct BcsrProduct {
    m: Arc<BcsrMatrix>,
    func: CudaFunction,
    dir: Direction,
    batch: usize,
    grid: u32,
    x_len: usize,
    y_len: usize,
    x: CudaSlice<f32>,
    y: CudaSlice<f32>,
}

impl DeviceProduct for BcsrProduct {
    fn matrix_bytes(&self) -> u64 {
        self.m.bytes
    }

    fn working_set_bytes(&self) -> u64 {
        self.m.bytes + 4 * (self.x_len + self.y_len) as u64
    }

    fn set_input(&mut self, x: &[f32]) -> Result<()> {
        if x.len() != self.x_len {
            return Err(EngineError::Shape(format!(
                "bCSR input of {} entries, expected {}",
                x.len(),
                self.x_len
            )));
        }
        let dev = self.m.dev.clone();
        dev.write(&mut self.x, x)
    }

    fn run(&mut self) -> Result<()> {
        let m = &self.m;
        let dev = &m.dev;
        if self.dir == Direction::Left {
            // The left kernels accumulate with atomics into a zeroed output.
            dev.stream.memset_zeros(&mut self.y).map_err(cuda)?;
        }
        let rp = match &m.row_ptr {
            RowPtr::U32(s) => dev.ptr(s),
            RowPtr::U64(s) => dev.ptr(s),
        };
        let (col, x, y) = (dev.ptr(&m.col), dev.ptr(&self.x), dev.ptr(&self.y));
        let rows = m.rows;
        let batch = self.batch as u32;
        let cfg = LaunchConfig {
            grid_dim: (self.grid, 1, 1),
            block_dim: (BLOCK, 1, 1),
            shared_mem_bytes: 0,
        };
        let mut launch = dev.stream.launch_builder(&self.func);
        launch.arg(&rp).arg(&col).arg(&x).arg(&y).arg(&rows);
        if self.batch > 1 {
            launch.arg(&batch);
        }
        // SAFETY: the argument list matches the kernel's signature in bench/cuda/bcsr.cu; the
        // pointers are live device arrays of the sizes the kernel indexes.
        unsafe { launch.launch(cfg) }.map_err(cuda)?;
        Ok(())
    }

    fn output(&mut self) -> Result<Vec<f32>> {
        self.m.dev.download(&self.y, self.y_len)
    }

    fn time(&mut self, warmup: usize, repeats: usize) -> Result<Timing> {
        let dev = self.m.dev.clone();
        dev.time(warmup, repeats, || self.run())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kernel_names_cover_both_offset_widths() {
        let names = kernel_names();
        assert_eq!(names.len(), 12);
        for n in &names {
            assert!(BCSR_SOURCE.contains(&n["bcsr_".len()..n.len() - 4]), "{n}");
        }
    }
}
