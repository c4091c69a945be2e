//! Sparse matrix–vector products on k²-trees, behind one [`Engine`] trait that the CPU
//! engine ([`cpu::CpuEngine`]) and the GPU engine (`gpu`) both implement.
//!
//! Conventions, for a tree of `A` with `A[r][c] = 1` for a triple `(r p c)`:
//! - [`Direction::Right`]: `y = A x`, `y[r] ⊕= w ⊗ x[c]`, `x` has `cols` entries, `y` has
//!   `rows`. Following `p` *backwards* (`^p`) from the set `x` is a right product.
//! - [`Direction::Left`]: `yᵀ = xᵀ A`, `y[c] ⊕= w ⊗ x[r]`, `x` has `rows` entries, `y`
//!   has `cols`. Following `p` forwards is a left product.
//! - A batch of `B` vectors is an `n × B` row-major array: entry `(i, b)` at `i·B + b`.
//! - Bit-packed Boolean batches ([`BitMatrix`]) hold `64·W` sources, `W` words per node:
//!   source `s` of node `i` is bit `s % 64` of word `i·W + s / 64`.

mod bits;
pub mod cpu;
pub mod gpu;
pub mod host_probe;
mod semiring;

pub use bits::BitMatrix;
pub use semiring::{Boolean, Counting, Element, PlusTimes, Semiring, SemiringKind, Tropical};

use std::sync::Arc;

use crate::k2tree::K2Tree;

/// Which side of the matrix the vector is on. See the [module docs](self).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
pub enum Direction {
    /// `y = A x`: gathers predecessors (inverse edges).
    Right,
    /// `yᵀ = xᵀ A`: gathers successors (forward edges).
    Left,
}

impl Direction {
    /// The other direction.
    pub fn reversed(self) -> Self {
        match self {
            Direction::Right => Direction::Left,
            Direction::Left => Direction::Right,
        }
    }

    /// Lengths `(input, output)` of the vectors for a `rows × cols` matrix.
    pub fn lengths(self, rows: u64, cols: u64) -> (u64, u64) {
        match self {
            Direction::Right => (cols, rows),
            Direction::Left => (rows, cols),
        }
    }
}

/// How a Boolean product visits the tree.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
pub enum Traversal {
    /// Every node: cost proportional to the tree, whatever the input.
    #[default]
    Dense,
    /// Only subtrees whose input range (right: columns, left: rows) meets a non-zero input
    /// entry: cost proportional to the part of the tree the frontier reaches.
    Masked,
}

/// What an engine keeps with a matrix it has loaded.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
pub enum MatrixConfig {
    /// The signatures and the sampled directory only (`k2`): the fewest bytes.
    TreeOnly,
    /// Also the Morton codes of the last internal level (`k2+F`, 8 bytes per node): a
    /// dense product is one pass over the leaves.
    #[default]
    CachedFrontier,
}

/// Errors of the engines.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum EngineError {
    /// Vector or batch sizes that do not match the matrix.
    #[error("shape mismatch: {0}")]
    Shape(String),
    /// A device allocation failed.
    #[error("device out of memory: asked for {bytes} bytes ({what})")]
    OutOfMemory {
        /// Bytes requested.
        bytes: u64,
        /// What the allocation was for.
        what: String,
    },
    /// No usable GPU, driver or NVRTC.
    #[error("GPU unavailable: {0}")]
    Unavailable(String),
    /// A CUDA driver, NVRTC or cuSPARSE call failed.
    #[error("CUDA error: {0}")]
    Cuda(String),
    /// The engine does not implement this combination.
    #[error("unsupported: {0}")]
    Unsupported(String),
}

/// Result of engine operations.
pub type Result<T, E = EngineError> = std::result::Result<T, E>;

/// A product engine over k²-trees: right and left, single and batched, any
/// [`Semiring`], and bit-packed Boolean frontiers that stay in the engine's memory.
///
/// ```
/// use std::sync::Arc;
/// use k2rpq::engine::{cpu::CpuEngine, Direction, Engine, MatrixConfig, PlusTimes};
/// use k2rpq::k2tree::K2Tree;
///
/// let tree = Arc::new(K2Tree::from_edges(3, 3, vec![(0, 1), (1, 2), (2, 0)]));
/// let engine = CpuEngine::new();
/// let a = engine.load(&tree, MatrixConfig::TreeOnly).unwrap();
/// let mut y = vec![0.0f32; 3];
/// engine.product::<PlusTimes>(&a, Direction::Right, &[1.0, 2.0, 3.0], 1, &mut y).unwrap();
/// assert_eq!(y, vec![2.0, 3.0, 1.0]);
/// ```
pub trait Engine: Send + Sync {
    /// A matrix loaded into the engine (host tree, or device-resident tree).
    type Matrix: Send + Sync + 'static;
    /// A bit-packed Boolean batch held by the engine (host or device memory).
    type Bits: Send + Sync + 'static;

    /// A short name for reports (`cpu`, `gpu`).
    fn name(&self) -> &'static str;
    /// Whether the engine works in host memory, so that a caller may answer a step whose
    /// frontier holds a few nodes by row/column queries of the host trees instead of a
    /// product over whole batches (no transfer is saved or paid either way). `false`
    /// unless an engine says otherwise: a device engine keeps its batches on the device.
    fn host_resident(&self) -> bool {
        false
    }

    /// Bytes the engine can give the bit batches of an evaluation now, where they are
    /// bounded apart from the host's memory (a device's free memory); `None` otherwise.
    /// The executor narrows its batches to fit.
    fn batch_memory(&self) -> Option<u64> {
        None
    }

    /// Loads `tree` with the given configuration.
    fn load(&self, tree: &Arc<K2Tree>, config: MatrixConfig) -> Result<Self::Matrix>;

    /// Bytes the loaded matrix holds in the engine's memory.
    fn matrix_bytes(&self, m: &Self::Matrix) -> u64;

    /// The tree a loaded matrix was made from.
    fn matrix_tree<'m>(&self, m: &'m Self::Matrix) -> &'m Arc<K2Tree>;

    /// Bytes [`Engine::load`] of `tree` with `config` would take in the engine's memory,
    /// known before anything is allocated; equal to [`Engine::matrix_bytes`] of the result.
    /// The device cache (`crate::cache`) decides what to evict from it.
    fn load_bytes(&self, tree: &K2Tree, config: MatrixConfig) -> u64;

    /// `y = A x` or `yᵀ = xᵀ A` over semiring `S` for a batch of `batch` vectors (`y` is
    /// overwritten).
    fn product<S: Semiring>(
        &self,
        m: &Self::Matrix,
        dir: Direction,
        x: &[S::Elem],
        batch: usize,
        y: &mut [S::Elem],
    ) -> Result<()>;

    /// A zeroed `rows × words` bit batch.
    fn bits_zeroed(&self, rows: usize, words: usize) -> Result<Self::Bits>;
    /// Copies a host batch into the engine.
    fn bits_upload(&self, host: &BitMatrix) -> Result<Self::Bits>;
    /// Copies a batch back to the host.
    fn bits_download(&self, bits: &Self::Bits) -> Result<BitMatrix>;
    /// Clears every bit.
    fn bits_clear(&self, bits: &mut Self::Bits) -> Result<()>;
    /// `dst |= src`.
    fn bits_or(&self, dst: &mut Self::Bits, src: &Self::Bits) -> Result<()>;
    /// One fixed-point step: `next &= !visited; visited |= next`; returns the bits left in
    /// `next` (0 means the fixed point is reached).
    fn bits_advance(&self, next: &mut Self::Bits, visited: &mut Self::Bits) -> Result<u64>;

    /// [`Engine::bits_advance`] of several `(next, visited)` pairs, one count each, in
    /// order. A device engine launches them all and reads the counts back with one
    /// synchronisation (the fixed-point loop advances every touched state each step).
    fn bits_advance_all(
        &self,
        pairs: &mut [(&mut Self::Bits, &mut Self::Bits)],
    ) -> Result<Vec<u64>> {
        pairs
            .iter_mut()
            .map(|(next, visited)| self.bits_advance(next, visited))
            .collect()
    }

    /// Word `index` of the row-major words of `bits` (row `index / words`): one bit test
    /// without copying the batch back.
    fn bits_word(&self, bits: &Self::Bits, index: usize) -> Result<u64> {
        let h = self.bits_download(bits)?;
        h.as_words().get(index).copied().ok_or_else(|| {
            EngineError::Shape(format!(
                "word {index} of a {}×{} batch",
                h.rows(),
                h.words()
            ))
        })
    }

    /// ORs `mask` into word `index` of `bits` (a start node of a batch is one bit): no
    /// host copy of the whole batch.
    fn bits_or_word(&self, bits: &mut Self::Bits, index: usize, mask: u64) -> Result<()> {
        let mut h = self.bits_download(bits)?;
        let (rows, words) = (h.rows(), h.words());
        let w = h
            .as_words_mut()
            .get_mut(index)
            .ok_or_else(|| EngineError::Shape(format!("word {index} of a {rows}×{words} batch")))?;
        *w |= mask;
        *bits = self.bits_upload(&h)?;
        Ok(())
    }

    /// Tells the engine that a run of many small products is starting (one RPQ
    /// evaluation): until the matching [`Engine::end_products`], it may keep the working
    /// memory of one product (scratch) for the next instead of freeing and allocating it
    /// each time. What it keeps is at most the largest single product's working memory,
    /// so a caller's reservation per product (e.g. `GpuEngine::product_bytes`) still
    /// bounds it. Calls nest; the default does nothing.
    fn begin_products(&self) {}

    /// Ends a run started by [`Engine::begin_products`]: once every run has ended, the
    /// engine frees what it kept.
    fn end_products(&self) {}

    /// Boolean product of a bit-packed batch, OR-ed into `y`: `y |= A x` (right) or
    /// `yᵀ |= xᵀ A` (left).
    fn bool_product(
        &self,
        m: &Self::Matrix,
        dir: Direction,
        x: &Self::Bits,
        y: &mut Self::Bits,
        traversal: Traversal,
    ) -> Result<()>;

    /// Boolean product of a bit-packed batch into `y`, replacing what it held: `y = A x`
    /// (right) or `yᵀ = xᵀ A` (left). The default clears `y`, then ORs into it; an engine
    /// may instead write every word once (the GPU engine over row windows:
    /// [`gpu::Tuning::row_windows`]).
    fn bool_product_overwrite(
        &self,
        m: &Self::Matrix,
        dir: Direction,
        x: &Self::Bits,
        y: &mut Self::Bits,
        traversal: Traversal,
    ) -> Result<()> {
        self.bits_clear(y)?;
        self.bool_product(m, dir, x, y, traversal)
    }
}

/// Checks the vector lengths of a semiring product.
pub fn check_product_shape(
    tree: &K2Tree,
    dir: Direction,
    x_len: usize,
    batch: usize,
    y_len: usize,
) -> Result<()> {
    let (n_in, n_out) = dir.lengths(tree.rows(), tree.cols());
    if batch == 0 {
        return Err(EngineError::Shape("batch width must be at least 1".into()));
    }
    if x_len as u64 != n_in * batch as u64 || y_len as u64 != n_out * batch as u64 {
        return Err(EngineError::Shape(format!(
            "{dir:?} product of a {}×{} matrix with batch {batch} needs x of {} and y of {} entries, got {x_len} and {y_len}",
            tree.rows(),
            tree.cols(),
            n_in * batch as u64,
            n_out * batch as u64
        )));
    }
    Ok(())
}

/// Checks the shapes of a bit-packed product.
pub fn check_bits_shape(
    tree: &K2Tree,
    dir: Direction,
    x: (usize, usize),
    y: (usize, usize),
) -> Result<()> {
    let (n_in, n_out) = dir.lengths(tree.rows(), tree.cols());
    if x.0 as u64 != n_in || y.0 as u64 != n_out || x.1 != y.1 {
        return Err(EngineError::Shape(format!(
            "{dir:?} Boolean product of a {}×{} matrix needs x of {n_in} rows and y of {n_out} rows with equal words, got {}×{} and {}×{}",
            tree.rows(),
            tree.cols(),
            x.0,
            x.1,
            y.0,
            y.1
        )));
    }
    Ok(())
}
