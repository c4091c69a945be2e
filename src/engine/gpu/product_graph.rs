//! A product recorded once as a CUDA graph and replayed with one call (the paper's §3.4:
//! one submission instead of one per kernel): a semiring product ([`ProductGraph`]) or a
//! bit-packed Boolean one ([`BitsGraph`]). The graph owns its vectors and scratch, since
//! the recorded launches hold their addresses.

use std::sync::Arc;

use cudarc::driver::{CudaGraph, CudaStream, DeviceRepr, ValidAsZeroBits};

use super::context::cuda_err;
use super::{DeviceVec, GpuBits, Scratch};
use crate::engine::{BitMatrix, EngineError, Result};

/// A recorded product `y = A x` (or `xᵀ A`) over device vectors it owns.
pub struct ProductGraph<T> {
    // Field order = drop order: the executable graph goes before the buffers it uses.
    graph: CudaGraph,
    x: DeviceVec<T>,
    y: DeviceVec<T>,
    _scratch: Scratch,
    stream: Arc<CudaStream>,
}

impl<T: DeviceRepr + ValidAsZeroBits + Default + Clone> ProductGraph<T> {
    pub(super) fn new(
        graph: CudaGraph,
        x: DeviceVec<T>,
        y: DeviceVec<T>,
        scratch: Scratch,
        stream: Arc<CudaStream>,
    ) -> Self {
        ProductGraph {
            graph,
            x,
            y,
            _scratch: scratch,
            stream,
        }
    }

    /// Replays the product (asynchronously on the engine's stream): `y` is overwritten.
    pub fn launch(&self) -> Result<()> {
        self.graph.launch().map_err(cuda_err("graph launch"))
    }

    /// Replaces the input vector's contents (same length).
    pub fn set_x(&mut self, host: &[T]) -> Result<()> {
        if host.len() != self.x.len() {
            return Err(EngineError::Shape(format!(
                "graph input has {} entries, got {}",
                self.x.len(),
                host.len()
            )));
        }
        if !host.is_empty() {
            let mut view = self.x.buf.slice_mut(0..host.len());
            self.stream
                .memcpy_htod(host, &mut view)
                .map_err(cuda_err("upload"))?;
        }
        Ok(())
    }

    /// Waits for the replays and copies `y` back.
    pub fn y(&self) -> Result<Vec<T>> {
        let mut out = vec![T::default(); self.y.len()];
        if !out.is_empty() {
            self.stream
                .memcpy_dtoh(&self.y.buf.slice(0..out.len()), &mut out[..])
                .map_err(cuda_err("download"))?;
        }
        self.stream.synchronize().map_err(cuda_err("synchronize"))?;
        Ok(out)
    }

    /// Waits for the replays.
    pub fn synchronize(&self) -> Result<()> {
        self.stream.synchronize().map_err(cuda_err("synchronize"))
    }
}

/// A recorded bit-packed Boolean product `y |= A x` (or `yᵀ |= xᵀ A`) over batches it owns
/// ([`super::GpuEngine::record_bool_product`]).
pub struct BitsGraph {
    // Field order = drop order: the executable graph goes before the buffers it uses.
    graph: CudaGraph,
    x: GpuBits,
    y: GpuBits,
    _scratch: Scratch,
    stream: Arc<CudaStream>,
}

impl BitsGraph {
    pub(super) fn new(
        graph: CudaGraph,
        x: GpuBits,
        y: GpuBits,
        scratch: Scratch,
        stream: Arc<CudaStream>,
    ) -> Self {
        BitsGraph {
            graph,
            x,
            y,
            _scratch: scratch,
            stream,
        }
    }

    /// Replays the product (asynchronously on the engine's stream): ORs `A x` into `y`.
    pub fn launch(&self) -> Result<()> {
        self.graph.launch().map_err(cuda_err("graph launch"))
    }

    /// Replaces the input batch's contents (same shape).
    pub fn set_x(&mut self, host: &BitMatrix) -> Result<()> {
        if host.shape() != self.x.shape() {
            return Err(EngineError::Shape(format!(
                "graph input is {:?}, got {:?}",
                self.x.shape(),
                host.shape()
            )));
        }
        let words = host.as_words();
        let mut view = self.x.buf.slice_mut(0..words.len());
        self.stream
            .memcpy_htod(words, &mut view)
            .map_err(cuda_err("upload"))
    }

    /// Clears the output batch (stream-ordered before the next replay).
    pub fn clear_y(&mut self) -> Result<()> {
        let n = self.y.rows * self.y.words;
        self.stream
            .memset_zeros(&mut self.y.buf.slice_mut(0..n))
            .map_err(cuda_err("memset"))
    }

    /// Waits for the replays and copies `y` back.
    pub fn y(&self) -> Result<BitMatrix> {
        let (rows, words) = self.y.shape();
        let mut out = vec![0u64; rows * words];
        self.stream
            .memcpy_dtoh(&self.y.buf.slice(0..out.len()), &mut out[..])
            .map_err(cuda_err("download"))?;
        self.stream.synchronize().map_err(cuda_err("synchronize"))?;
        Ok(BitMatrix::from_words(rows, words, out))
    }

    /// Waits for the replays.
    pub fn synchronize(&self) -> Result<()> {
        self.stream.synchronize().map_err(cuda_err("synchronize"))
    }
}
