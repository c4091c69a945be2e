//! cuSPARSE CSR with f32 values (all 1.0): SpMV for the right product, transposed SpMV
//! for the left product, SpMM for batches (default, CSR_ALG2 and CSR_ALG3 algorithms).
//!
//! The external buffer of every call is sized by cuSPARSE's own `*_bufferSize` query, so
//! [`DeviceProduct::working_set_bytes`] is exactly what is allocated.

use std::ffi::c_void;
use std::ptr;
use std::sync::Arc;

use cudarc::cusparse::sys;
use cudarc::driver::CudaSlice;

use super::{Csr, Device, DeviceProduct, Timing};
use k2rpq::engine::{Direction, EngineError, Result};

/// Why cuSPARSE cannot run here, or `None` when libcuda, a device and libcusparse are
/// all present.
pub fn unavailable_reason() -> Option<String> {
    if let Some(why) = super::gpu_unavailable_reason() {
        return Some(why);
    }
    // SAFETY: only tries to dlopen the library.
    if !unsafe { sys::is_culib_present() } {
        return Some("libcusparse not found".into());
    }
    None
}

/// The cuSPARSE algorithm of a product.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
pub enum CusparseAlg {
    /// `cusparseSpMV`, default algorithm (single vectors).
    SpMv,
    /// `cusparseSpMM`, `CUSPARSE_SPMM_ALG_DEFAULT`.
    SpMmDefault,
    /// `cusparseSpMM`, `CUSPARSE_SPMM_CSR_ALG2`.
    SpMmCsrAlg2,
    /// `cusparseSpMM`, `CUSPARSE_SPMM_CSR_ALG3`.
    SpMmCsrAlg3,
}

impl CusparseAlg {
    /// The SpMM algorithms the benchmark tries for a batch (the fastest is reported).
    pub const SPMM: [CusparseAlg; 3] = [
        CusparseAlg::SpMmDefault,
        CusparseAlg::SpMmCsrAlg2,
        CusparseAlg::SpMmCsrAlg3,
    ];

    /// A short name for reports.
    pub fn name(self) -> &'static str {
        match self {
            CusparseAlg::SpMv => "spmv",
            CusparseAlg::SpMmDefault => "spmm-default",
            CusparseAlg::SpMmCsrAlg2 => "spmm-csr-alg2",
            CusparseAlg::SpMmCsrAlg3 => "spmm-csr-alg3",
        }
    }

    fn spmm(self) -> sys::cusparseSpMMAlg_t {
        match self {
            CusparseAlg::SpMmCsrAlg2 => sys::cusparseSpMMAlg_t::CUSPARSE_SPMM_CSR_ALG2,
            CusparseAlg::SpMmCsrAlg3 => sys::cusparseSpMMAlg_t::CUSPARSE_SPMM_CSR_ALG3,
            _ => sys::cusparseSpMMAlg_t::CUSPARSE_SPMM_ALG_DEFAULT,
        }
    }
}

fn check(what: &str, status: sys::cusparseStatus_t) -> Result<()> {
    match status {
        sys::cusparseStatus_t::CUSPARSE_STATUS_SUCCESS => Ok(()),
        sys::cusparseStatus_t::CUSPARSE_STATUS_NOT_SUPPORTED => Err(EngineError::Unsupported(
            format!("cuSPARSE {what}: not supported"),
        )),
        s => Err(EngineError::Cuda(format!("cuSPARSE {what}: {s:?}"))),
    }
}

/// A cuSPARSE handle bound to the device's stream.
struct Handle(sys::cusparseHandle_t);

impl Drop for Handle {
    fn drop(&mut self) {
        // SAFETY: created by cusparseCreate and destroyed once.
        unsafe { sys::cusparseDestroy(self.0) };
    }
}

/// A CSR matrix resident on the device with its cuSPARSE handle. Each prepared product
/// gets its own sparse-matrix descriptor, so the preprocessing of one product (which
/// cuSPARSE ties to the descriptor and that product's buffer) never leaks into another.
pub struct CusparseMatrix {
    dev: Device,
    handle: Handle,
    rows: u64,
    cols: u64,
    nnz: u64,
    index: sys::cusparseIndexType_t,
    bytes: u64,
    // The device arrays every descriptor points into.
    row_ptr: RowPtr,
    col: CudaSlice<i32>,
    val: CudaSlice<f32>,
}

enum RowPtr {
    I32(CudaSlice<i32>),
    I64(CudaSlice<i64>),
}

// SAFETY: the handle is only used through &self methods that issue work on the matrix's
// own stream; cuSPARSE handles may be used from any thread.
unsafe impl Send for CusparseMatrix {}
unsafe impl Sync for CusparseMatrix {}

/// A sparse-matrix descriptor over a [`CusparseMatrix`]'s arrays.
struct SpMat(sys::cusparseSpMatDescr_t);

impl Drop for SpMat {
    fn drop(&mut self) {
        // SAFETY: created by cusparseCreateCsr and destroyed once.
        unsafe { sys::cusparseDestroySpMat(self.0 as sys::cusparseConstSpMatDescr_t) };
    }
}

impl CusparseMatrix {
    /// Uploads `csr` with every value 1.0 (32-bit column indices; 64-bit row pointers
    /// only when the cells do not fit `i32`).
    pub fn new(csr: &Csr) -> Result<Arc<Self>> {
        if let Some(why) = unavailable_reason() {
            return Err(EngineError::Unavailable(why));
        }
        let dev = Device::open()?;
        let handle = Handle(
            cudarc::cusparse::result::create()
                .map_err(|e| EngineError::Cuda(format!("cusparseCreate: {:?}", e.0)))?,
        );
        // SAFETY: the stream outlives the handle (both owned by the matrix).
        check("set stream", unsafe {
            sys::cusparseSetStream(handle.0, dev.stream.cu_stream() as sys::cudaStream_t)
        })?;
        let cols_i32: Vec<i32> = csr.col_idx().iter().map(|&c| c as i32).collect();
        let col = dev.upload(&cols_i32, "CSR column indices")?;
        drop(cols_i32);
        let val = dev.upload(&vec![1.0f32; csr.nnz() as usize], "CSR values")?;
        let (row_ptr, index) = if csr.needs_64bit_offsets() {
            let p: Vec<i64> = csr.row_ptr().iter().map(|&o| o as i64).collect();
            (
                RowPtr::I64(dev.upload(&p, "CSR row pointers")?),
                sys::cusparseIndexType_t::CUSPARSE_INDEX_64I,
            )
        } else {
            let p: Vec<i32> = csr.row_ptr().iter().map(|&o| o as i32).collect();
            (
                RowPtr::I32(dev.upload(&p, "CSR row pointers")?),
                sys::cusparseIndexType_t::CUSPARSE_INDEX_32I,
            )
        };
        Ok(Arc::new(CusparseMatrix {
            dev,
            handle,
            rows: csr.rows(),
            cols: csr.cols(),
            nnz: csr.nnz(),
            index,
            bytes: csr.cusparse_bytes(),
            row_ptr,
            col,
            val,
        }))
    }

    fn new_descr(&self) -> Result<SpMat> {
        let dev = &self.dev;
        let rp = match &self.row_ptr {
            RowPtr::I32(s) => dev.ptr(s),
            RowPtr::I64(s) => dev.ptr(s),
        };
        let mut descr = ptr::null_mut();
        // SAFETY: the arrays hold rows + 1 offsets and nnz columns and values, and live as
        // long as the matrix, which every product holding a descriptor keeps alive.
        check("create CSR", unsafe {
            sys::cusparseCreateCsr(
                &mut descr,
                self.rows as i64,
                self.cols as i64,
                self.nnz as i64,
                rp as *mut c_void,
                dev.ptr(&self.col) as *mut c_void,
                dev.ptr(&self.val) as *mut c_void,
                self.index,
                sys::cusparseIndexType_t::CUSPARSE_INDEX_32I,
                sys::cusparseIndexBase_t::CUSPARSE_INDEX_BASE_ZERO,
                sys::cudaDataType::CUDA_R_32F,
            )
        })?;
        Ok(SpMat(descr))
    }

    /// `(rows, cols)` of the matrix.
    pub fn shape(&self) -> (u64, u64) {
        (self.rows, self.cols)
    }

    /// Device bytes of the matrix (row pointers, columns, values).
    pub fn bytes(&self) -> u64 {
        self.bytes
    }

    /// Prepares a product: allocates the vectors and the external buffer cuSPARSE asks
    /// for, and runs the algorithm's preprocessing. `batch == 1` with
    /// [`CusparseAlg::SpMv`] is an SpMV; otherwise an SpMM over a row-major batch.
    pub fn prepare(
        self: &Arc<Self>,
        dir: Direction,
        batch: usize,
        alg: CusparseAlg,
    ) -> Result<CusparseProduct> {
        if batch == 0 || (alg == CusparseAlg::SpMv && batch != 1) {
            return Err(EngineError::Shape(format!(
                "cuSPARSE {} with batch {batch}",
                alg.name()
            )));
        }
        let (n_in, n_out) = dir.lengths(self.rows, self.cols);
        let dev = &self.dev;
        let x = dev.zeros::<f32>(n_in as usize * batch, "SpMV input")?;
        let y = dev.zeros::<f32>(n_out as usize * batch, "SpMV output")?;
        let op = match dir {
            Direction::Right => sys::cusparseOperation_t::CUSPARSE_OPERATION_NON_TRANSPOSE,
            Direction::Left => sys::cusparseOperation_t::CUSPARSE_OPERATION_TRANSPOSE,
        };
        let mut p = CusparseProduct {
            descr: self.new_descr()?,
            m: self.clone(),
            op,
            alg,
            batch,
            x_len: n_in as usize * batch,
            y_len: n_out as usize * batch,
            dense: Dense::None,
            buffer: None,
            buffer_bytes: 0,
            vector_bytes: 4 * (n_in + n_out) * batch as u64,
            x,
            y,
        };
        p.create_dense(n_in, n_out)?;
        let mut size = 0usize;
        let (alpha, beta) = (1.0f32, 0.0f32);
        // SAFETY: descriptors are valid; scalars are host pointers (default pointer mode).
        unsafe {
            match p.dense {
                Dense::Vec(xd, yd) => check(
                    "SpMV buffer size",
                    sys::cusparseSpMV_bufferSize(
                        self.handle.0,
                        op,
                        &alpha as *const f32 as *const c_void,
                        p.descr.0 as sys::cusparseConstSpMatDescr_t,
                        xd as sys::cusparseConstDnVecDescr_t,
                        &beta as *const f32 as *const c_void,
                        yd,
                        sys::cudaDataType::CUDA_R_32F,
                        sys::cusparseSpMVAlg_t::CUSPARSE_SPMV_ALG_DEFAULT,
                        &mut size,
                    ),
                )?,
                Dense::Mat(xd, yd) => check(
                    "SpMM buffer size",
                    sys::cusparseSpMM_bufferSize(
                        self.handle.0,
                        op,
                        sys::cusparseOperation_t::CUSPARSE_OPERATION_NON_TRANSPOSE,
                        &alpha as *const f32 as *const c_void,
                        p.descr.0 as sys::cusparseConstSpMatDescr_t,
                        xd as sys::cusparseConstDnMatDescr_t,
                        &beta as *const f32 as *const c_void,
                        yd,
                        sys::cudaDataType::CUDA_R_32F,
                        alg.spmm(),
                        &mut size,
                    ),
                )?,
                Dense::None => unreachable!("create_dense sets the descriptors"),
            }
        }
        if size > 0 {
            p.buffer = Some(dev.zeros::<u8>(size, "cuSPARSE external buffer")?);
            p.buffer_bytes = size as u64;
        }
        p.call(Pass::Preprocess)?;
        Ok(p)
    }
}

/// Dense descriptors of a product's input and output.
enum Dense {
    None,
    Vec(sys::cusparseDnVecDescr_t, sys::cusparseDnVecDescr_t),
    Mat(sys::cusparseDnMatDescr_t, sys::cusparseDnMatDescr_t),
}

/// One prepared cuSPARSE product (see [`CusparseMatrix::prepare`]).
pub struct CusparseProduct {
    // Dropped before `m`, whose arrays it points into.
    descr: SpMat,
    m: Arc<CusparseMatrix>,
    op: sys::cusparseOperation_t,
    alg: CusparseAlg,
    batch: usize,
    x_len: usize,
    y_len: usize,
    dense: Dense,
    buffer: Option<CudaSlice<u8>>,
    buffer_bytes: u64,
    vector_bytes: u64,
    x: CudaSlice<f32>,
    y: CudaSlice<f32>,
}

// SAFETY: as for CusparseMatrix; the descriptors are only touched through &mut self.
unsafe impl Send for CusparseProduct {}

impl Drop for CusparseProduct {
    fn drop(&mut self) {
        // SAFETY: each descriptor was created once by create_dense.
        unsafe {
            match self.dense {
                Dense::Vec(a, b) => {
                    sys::cusparseDestroyDnVec(a as sys::cusparseConstDnVecDescr_t);
                    sys::cusparseDestroyDnVec(b as sys::cusparseConstDnVecDescr_t);
                }
                Dense::Mat(a, b) => {
                    sys::cusparseDestroyDnMat(a as sys::cusparseConstDnMatDescr_t);
                    sys::cusparseDestroyDnMat(b as sys::cusparseConstDnMatDescr_t);
                }
                Dense::None => {}
            }
        }
    }
}

impl CusparseProduct {
    /// The algorithm.
    pub fn alg(&self) -> CusparseAlg {
        self.alg
    }
    /// Bytes of cuSPARSE's external buffer.
    pub fn buffer_bytes(&self) -> u64 {
        self.buffer_bytes
    }

    fn create_dense(&mut self, n_in: u64, n_out: u64) -> Result<()> {
        let dev = &self.m.dev;
        let (xp, yp) = (
            dev.ptr(&self.x) as *mut c_void,
            dev.ptr(&self.y) as *mut c_void,
        );
        let f32t = sys::cudaDataType::CUDA_R_32F;
        // SAFETY: x and y hold n_in·batch and n_out·batch floats and outlive the
        // descriptors (both owned by self; descriptors are destroyed first in Drop).
        unsafe {
            if self.alg == CusparseAlg::SpMv {
                let (mut xd, mut yd) = (ptr::null_mut(), ptr::null_mut());
                check(
                    "create x",
                    sys::cusparseCreateDnVec(&mut xd, n_in as i64, xp, f32t),
                )?;
                self.dense = Dense::Vec(xd, ptr::null_mut());
                check(
                    "create y",
                    sys::cusparseCreateDnVec(&mut yd, n_out as i64, yp, f32t),
                )?;
                self.dense = Dense::Vec(xd, yd);
            } else {
                let b = self.batch as i64;
                let row = sys::cusparseOrder_t::CUSPARSE_ORDER_ROW;
                let (mut xd, mut yd) = (ptr::null_mut(), ptr::null_mut());
                check(
                    "create X",
                    sys::cusparseCreateDnMat(&mut xd, n_in as i64, b, b, xp, f32t, row),
                )?;
                self.dense = Dense::Mat(xd, ptr::null_mut());
                check(
                    "create Y",
                    sys::cusparseCreateDnMat(&mut yd, n_out as i64, b, b, yp, f32t, row),
                )?;
                self.dense = Dense::Mat(xd, yd);
            }
        }
        Ok(())
    }

    fn buffer_ptr(&self) -> *mut c_void {
        match &self.buffer {
            Some(b) => self.m.dev.ptr(b) as *mut c_void,
            None => ptr::null_mut(),
        }
    }

    /// Runs the product (`Pass::Product`) or cuSPARSE's optional preprocessing of it
    /// (`Pass::Preprocess`): the `_preprocess` entry points take exactly the product's
    /// arguments, so one call site serves both.
    fn call(&self, pass: Pass) -> Result<()> {
        let (alpha, beta) = (1.0f32, 0.0f32);
        let m = &self.m;
        let (spmv, spmm): (SpMvFn, SpMmFn) = match pass {
            Pass::Product => (sys::cusparseSpMV, sys::cusparseSpMM),
            Pass::Preprocess => (sys::cusparseSpMV_preprocess, sys::cusparseSpMM_preprocess),
        };
        let what = |name: &str| match pass {
            Pass::Product => name.to_string(),
            Pass::Preprocess => format!("{name} preprocess"),
        };
        // SAFETY: descriptors point at live device arrays of the right sizes; the buffer
        // has the size cuSPARSE asked for; scalars are host pointers read before return;
        // preprocessing only reads the matrix.
        unsafe {
            match self.dense {
                Dense::Vec(xd, yd) => check(
                    &what("SpMV"),
                    spmv(
                        m.handle.0,
                        self.op,
                        &alpha as *const f32 as *const c_void,
                        self.descr.0 as sys::cusparseConstSpMatDescr_t,
                        xd as sys::cusparseConstDnVecDescr_t,
                        &beta as *const f32 as *const c_void,
                        yd,
                        sys::cudaDataType::CUDA_R_32F,
                        sys::cusparseSpMVAlg_t::CUSPARSE_SPMV_ALG_DEFAULT,
                        self.buffer_ptr(),
                    ),
                ),
                Dense::Mat(xd, yd) => check(
                    &what("SpMM"),
                    spmm(
                        m.handle.0,
                        self.op,
                        sys::cusparseOperation_t::CUSPARSE_OPERATION_NON_TRANSPOSE,
                        &alpha as *const f32 as *const c_void,
                        self.descr.0 as sys::cusparseConstSpMatDescr_t,
                        xd as sys::cusparseConstDnMatDescr_t,
                        &beta as *const f32 as *const c_void,
                        yd,
                        sys::cudaDataType::CUDA_R_32F,
                        self.alg.spmm(),
                        self.buffer_ptr(),
                    ),
                ),
                Dense::None => Ok(()),
            }
        }
    }
}

/// Which of a product's two same-signature cuSPARSE entry points [`CusparseProduct::call`] runs.
#[derive(Clone, Copy)]
enum Pass {
    Product,
    Preprocess,
}

/// `cusparseSpMV` and `cusparseSpMV_preprocess`.
type SpMvFn = unsafe fn(
    sys::cusparseHandle_t,
    sys::cusparseOperation_t,
    *const c_void,
    sys::cusparseConstSpMatDescr_t,
    sys::cusparseConstDnVecDescr_t,
    *const c_void,
    sys::cusparseDnVecDescr_t,
    sys::cudaDataType,
    sys::cusparseSpMVAlg_t,
    *mut c_void,
) -> sys::cusparseStatus_t;

/// `cusparseSpMM` and `cusparseSpMM_preprocess`.
type SpMmFn = unsafe fn(
    sys::cusparseHandle_t,
    sys::cusparseOperation_t,
    sys::cusparseOperation_t,
    *const c_void,
    sys::cusparseConstSpMatDescr_t,
    sys::cusparseConstDnMatDescr_t,
    *const c_void,
    sys::cusparseDnMatDescr_t,
    sys::cudaDataType,
    sys::cusparseSpMMAlg_t,
    *mut c_void,
) -> sys::cusparseStatus_t;

impl DeviceProduct for CusparseProduct {
    fn matrix_bytes(&self) -> u64 {
        self.m.bytes
    }

    fn working_set_bytes(&self) -> u64 {
        self.m.bytes + self.vector_bytes + self.buffer_bytes
    }

    fn set_input(&mut self, x: &[f32]) -> Result<()> {
        if x.len() != self.x_len {
            return Err(EngineError::Shape(format!(
                "cuSPARSE input of {} entries, expected {}",
                x.len(),
                self.x_len
            )));
        }
        let dev = self.m.dev.clone();
        dev.write(&mut self.x, x)
    }

    fn run(&mut self) -> Result<()> {
        self.call(Pass::Product)
    }

    fn output(&mut self) -> Result<Vec<f32>> {
        self.m.dev.download(&self.y, self.y_len)
    }

    fn time(&mut self, warmup: usize, repeats: usize) -> Result<Timing> {
        let dev = self.m.dev.clone();
        dev.time(warmup, repeats, || self.run())
    }
}
