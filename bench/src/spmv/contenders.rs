//! The contenders of the SpMV benchmark behind one interface: a matrix that can prepare
//! a product of a given direction and batch width ([`Contender`]), or a bit-packed Boolean
//! product ([`BitsContender`]). The baselines' [`DeviceProduct`] is the prepared product.
//!
//! Implemented here for cuSPARSE, bCSR and the CPU engine; the GPU engine plugs in by
//! implementing the same two traits.

use std::sync::Arc;
use std::time::Instant;

use crate::baseline::bcsr::{BcsrKernel, BcsrMatrix};
use crate::baseline::cusparse::{CusparseAlg, CusparseMatrix};
use crate::baseline::{DeviceProduct, Timing};
use k2rpq::engine::cpu::{CpuEngine, CpuMatrix};
use k2rpq::engine::{BitMatrix, Direction, Engine, MatrixConfig, PlusTimes, Result, Traversal};

/// A matrix of one contender, able to prepare f32 plus-times products.
pub trait Contender {
    /// Who (`cusparse`, `bcsr`, `cpu`, `gpu`).
    fn name(&self) -> String;
    /// The variants tried for `(dir, batch)`; the fastest one that agrees with the
    /// reference is reported. Each variant name is shown in the report.
    fn variants(&self, dir: Direction, batch: usize) -> Vec<String>;
    /// Bytes of the matrix representation.
    fn representation_bytes(&self) -> u64;
    /// Working set a product would need, computed before allocating anything (used to
    /// skip a product that does not fit the memory budget).
    fn predicted_working_set(&self, dir: Direction, batch: usize) -> u64;
    /// Prepares one variant.
    fn prepare(
        &self,
        dir: Direction,
        batch: usize,
        variant: &str,
    ) -> Result<Box<dyn DeviceProduct + '_>>;
}

/// A matrix of one contender, able to run bit-packed Boolean batch products.
pub trait BitsContender {
    /// Who (`cpu k2+F`, `gpu k2+F scan`, ...).
    fn name(&self) -> String;
    /// Bytes of the matrix representation.
    fn representation_bytes(&self) -> u64;
    /// Working set of a product with `words` words per node.
    fn predicted_working_set(&self, dir: Direction, words: usize) -> u64;
    /// Prepares a product with `words` words per node.
    fn prepare(&self, dir: Direction, words: usize) -> Result<Box<dyn BitsProduct + '_>>;
}

/// A prepared bit-packed product: `y = A x` or `yᵀ = xᵀ A` over a [`BitMatrix`].
pub trait BitsProduct {
    /// Every byte held: matrix, input, output, scratch.
    fn working_set_bytes(&self) -> u64;
    /// Sets the input batch.
    fn set_input(&mut self, x: &BitMatrix) -> Result<()>;
    /// One product (the output is cleared first).
    fn run(&mut self) -> Result<()>;
    /// The output batch.
    fn output(&mut self) -> Result<BitMatrix>;
    /// Median time of `run`.
    fn time(&mut self, warmup: usize, repeats: usize) -> Result<Timing>;
    /// The same product of input `x` recorded once as a CUDA graph: the output of one
    /// replay into a cleared output, and the median time of a replay (without the host's
    /// launch work per call). `None` for contenders without graphs.
    fn replayed(
        &mut self,
        _x: &BitMatrix,
        _warmup: usize,
        _repeats: usize,
    ) -> Result<Option<(BitMatrix, Timing)>> {
        Ok(None)
    }
}

/// Input and output lengths of a product of `tree` in direction `dir`.
pub(crate) fn product_lengths(tree: &k2rpq::k2tree::K2Tree, dir: Direction) -> (usize, usize) {
    let (i, o) = dir.lengths(tree.rows(), tree.cols());
    (i as usize, o as usize)
}

/// An error unless the bit batch `x` has the shape `(rows, words)` of `expected`.
pub(crate) fn check_bits_shape(x: &BitMatrix, expected: (usize, usize)) -> Result<()> {
    if x.shape() != expected {
        return Err(k2rpq::engine::EngineError::Shape(format!(
            "bit batch {:?}, expected {:?}",
            x.shape(),
            expected
        )));
    }
    Ok(())
}

/// Working set of a CSR-style product: the matrix plus dense `f32` inputs and outputs
/// (`batch` of each).
fn matrix_and_vectors(matrix: u64, (rows, cols): (u64, u64), dir: Direction, batch: usize) -> u64 {
    let (i, o) = dir.lengths(rows, cols);
    matrix + 4 * (i + o) * batch as u64
}

/// A CSR-style baseline matrix (cuSPARSE, bCSR): what a [`BaselineContender`] needs of it.
pub trait CsrBaseline {
    /// Who (`cusparse`, `bcsr`).
    const NAME: &'static str;
    /// Device bytes of the matrix and its `(rows, cols)`.
    fn footprint(&self) -> (u64, (u64, u64));
    /// The variants tried for a batch of width `batch`.
    fn variants(batch: usize) -> Vec<String>;
    /// Prepares the product of variant `variant` (one of [`CsrBaseline::variants`]).
    fn prepare_variant(
        self: &Arc<Self>,
        dir: Direction,
        batch: usize,
        variant: &str,
    ) -> Result<Box<dyn DeviceProduct>>;
}

/// cuSPARSE CSR: SpMV for single vectors, the three SpMM algorithms for batches.
impl CsrBaseline for CusparseMatrix {
    const NAME: &'static str = "cusparse";
    fn footprint(&self) -> (u64, (u64, u64)) {
        (self.bytes(), self.shape())
    }
    fn variants(batch: usize) -> Vec<String> {
        if batch == 1 {
            vec![CusparseAlg::SpMv.name().into()]
        } else {
            CusparseAlg::SPMM.iter().map(|a| a.name().into()).collect()
        }
    }
    fn prepare_variant(
        self: &Arc<Self>,
        dir: Direction,
        batch: usize,
        variant: &str,
    ) -> Result<Box<dyn DeviceProduct>> {
        let alg = [CusparseAlg::SpMv]
            .into_iter()
            .chain(CusparseAlg::SPMM)
            .find(|a| a.name() == variant)
            .unwrap_or(CusparseAlg::SpMmDefault);
        Ok(Box::new(self.prepare(dir, batch, alg)?))
    }
}

/// Boolean CSR: thread- or warp-per-row for single vectors, thread per (row, vector) for
/// batches.
impl CsrBaseline for BcsrMatrix {
    const NAME: &'static str = "bcsr";
    fn footprint(&self) -> (u64, (u64, u64)) {
        (self.bytes(), self.shape())
    }
    fn variants(batch: usize) -> Vec<String> {
        if batch == 1 {
            vec![
                BcsrKernel::ThreadPerRow.name().into(),
                BcsrKernel::WarpPerRow.name().into(),
            ]
        } else {
            vec!["row-and-vector".into()]
        }
    }
    fn prepare_variant(
        self: &Arc<Self>,
        dir: Direction,
        batch: usize,
        variant: &str,
    ) -> Result<Box<dyn DeviceProduct>> {
        let kernel = if variant == BcsrKernel::WarpPerRow.name() {
            BcsrKernel::WarpPerRow
        } else {
            BcsrKernel::ThreadPerRow
        };
        Ok(Box::new(self.prepare(dir, batch, kernel)?))
    }
}

/// A CSR-style baseline as a contender: its working set is the matrix plus dense `f32`
/// inputs and outputs.
pub struct BaselineContender<M>(pub Arc<M>);

impl<M: CsrBaseline> Contender for BaselineContender<M> {
    fn name(&self) -> String {
        M::NAME.into()
    }
    fn variants(&self, _dir: Direction, batch: usize) -> Vec<String> {
        M::variants(batch)
    }
    fn representation_bytes(&self) -> u64 {
        self.0.footprint().0
    }
    fn predicted_working_set(&self, dir: Direction, batch: usize) -> u64 {
        let (bytes, shape) = self.0.footprint();
        matrix_and_vectors(bytes, shape, dir, batch)
    }
    fn prepare(
        &self,
        dir: Direction,
        batch: usize,
        variant: &str,
    ) -> Result<Box<dyn DeviceProduct + '_>> {
        self.0.prepare_variant(dir, batch, variant)
    }
}

/// Our CPU engine on all cores, in one configuration.
pub struct CpuContender {
    engine: CpuEngine,
    matrix: CpuMatrix,
    config: MatrixConfig,
    /// Wall-clock budget of one timing, seconds: repeats stop early once it is spent (a
    /// billion-edge batch product takes seconds on the CPU).
    pub time_limit_s: f64,
}

impl CpuContender {
    /// Loads the tree in `config`.
    pub fn new(tree: &Arc<k2rpq::k2tree::K2Tree>, config: MatrixConfig) -> Result<Self> {
        let engine = CpuEngine::new();
        let matrix = engine.load(tree, config)?;
        Ok(CpuContender {
            engine,
            matrix,
            config,
            time_limit_s: 10.0,
        })
    }

    fn vector_bytes(&self, dir: Direction, batch: usize) -> u64 {
        let (i, o) = product_lengths(self.matrix.tree(), dir);
        4 * (i + o) as u64 * batch as u64
    }
}

/// `k2` or `k2+F`, the paper's names of the two configurations.
pub fn config_name(config: MatrixConfig) -> &'static str {
    match config {
        MatrixConfig::TreeOnly => "k2",
        MatrixConfig::CachedFrontier => "k2+F",
    }
}

/// Runs `op` once to warm up (at most: the CPU has no lazy initialisation worth more
/// runs, and a billion-edge product takes seconds), then up to `repeats` times (at least
/// 3, or all of them if fewer were asked for) until `limit_s` seconds are spent; wall
/// clock.
fn wall_time(
    warmup: usize,
    repeats: usize,
    limit_s: f64,
    mut op: impl FnMut() -> Result<()>,
) -> Result<Timing> {
    for _ in 0..warmup.min(1) {
        op()?;
    }
    let start = Instant::now();
    let mut ms = Vec::new();
    for i in 0..repeats.max(1) {
        let t = Instant::now();
        op()?;
        ms.push(t.elapsed().as_secs_f64() * 1e3);
        if i + 1 >= 3 && start.elapsed().as_secs_f64() > limit_s {
            break;
        }
    }
    Ok(Timing::from_samples(ms))
}

struct CpuProduct<'a> {
    c: &'a CpuContender,
    dir: Direction,
    batch: usize,
    x: Vec<f32>,
    y: Vec<f32>,
}

impl DeviceProduct for CpuProduct<'_> {
    fn matrix_bytes(&self) -> u64 {
        self.c.engine.matrix_bytes(&self.c.matrix)
    }
    fn working_set_bytes(&self) -> u64 {
        self.matrix_bytes() + self.c.vector_bytes(self.dir, self.batch)
    }
    fn set_input(&mut self, x: &[f32]) -> Result<()> {
        if x.len() != self.x.len() {
            return Err(k2rpq::engine::EngineError::Shape(format!(
                "input of {} entries, expected {}",
                x.len(),
                self.x.len()
            )));
        }
        self.x.copy_from_slice(x);
        Ok(())
    }
    fn run(&mut self) -> Result<()> {
        self.c.engine.product::<PlusTimes>(
            &self.c.matrix,
            self.dir,
            &self.x,
            self.batch,
            &mut self.y,
        )
    }
    fn output(&mut self) -> Result<Vec<f32>> {
        Ok(self.y.clone())
    }
    fn time(&mut self, warmup: usize, repeats: usize) -> Result<Timing> {
        let limit = self.c.time_limit_s;
        wall_time(warmup, repeats, limit, || self.run())
    }
}

impl Contender for CpuContender {
    fn name(&self) -> String {
        format!("cpu {}", config_name(self.config))
    }
    fn variants(&self, _dir: Direction, _batch: usize) -> Vec<String> {
        vec![format!("{} threads", rayon::current_num_threads())]
    }
    fn representation_bytes(&self) -> u64 {
        self.engine.matrix_bytes(&self.matrix)
    }
    fn predicted_working_set(&self, dir: Direction, batch: usize) -> u64 {
        Contender::representation_bytes(self) + self.vector_bytes(dir, batch)
    }
    fn prepare(
        &self,
        dir: Direction,
        batch: usize,
        _variant: &str,
    ) -> Result<Box<dyn DeviceProduct + '_>> {
        let (i, o) = product_lengths(self.matrix.tree(), dir);
        Ok(Box::new(CpuProduct {
            c: self,
            dir,
            batch,
            x: vec![0.0; i * batch],
            y: vec![0.0; o * batch],
        }))
    }
}

struct CpuBitsProduct<'a> {
    c: &'a CpuContender,
    dir: Direction,
    x: BitMatrix,
    y: BitMatrix,
}

impl BitsProduct for CpuBitsProduct<'_> {
    fn working_set_bytes(&self) -> u64 {
        Contender::representation_bytes(self.c)
            + 8 * (self.x.as_words().len() + self.y.as_words().len()) as u64
    }
    fn set_input(&mut self, x: &BitMatrix) -> Result<()> {
        check_bits_shape(x, self.x.shape())?;
        self.x = x.clone();
        Ok(())
    }
    fn run(&mut self) -> Result<()> {
        self.c.engine.bool_product_overwrite(
            &self.c.matrix,
            self.dir,
            &self.x,
            &mut self.y,
            Traversal::Dense,
        )
    }
    fn output(&mut self) -> Result<BitMatrix> {
        Ok(self.y.clone())
    }
    fn time(&mut self, warmup: usize, repeats: usize) -> Result<Timing> {
        let limit = self.c.time_limit_s;
        wall_time(warmup, repeats, limit, || self.run())
    }
}

impl BitsContender for CpuContender {
    fn name(&self) -> String {
        Contender::name(self)
    }
    fn representation_bytes(&self) -> u64 {
        Contender::representation_bytes(self)
    }
    fn predicted_working_set(&self, dir: Direction, words: usize) -> u64 {
        let (i, o) = product_lengths(self.matrix.tree(), dir);
        Contender::representation_bytes(self) + 8 * (i + o) as u64 * words as u64
    }
    fn prepare(&self, dir: Direction, words: usize) -> Result<Box<dyn BitsProduct + '_>> {
        let (i, o) = product_lengths(self.matrix.tree(), dir);
        Ok(Box::new(CpuBitsProduct {
            c: self,
            dir,
            x: BitMatrix::zeroed(i, words),
            y: BitMatrix::zeroed(o, words),
        }))
    }
}
