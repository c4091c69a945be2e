//! What the cached frontier holds on the device: its [`FrontierLayout`].
//!
//! The cached frontier has one entry per node of the last internal level (`h − 2`), i.e.
//! per non-empty 4x4 block of the matrix. In the paper's layout ([`FrontierLayout::Codes`])
//! an entry is the node's Morton code, and the leaf kernel finds the node's leaves
//! itself: a signature load, a directory rank (a sample plus up to 16 popcounted words)
//! and one or two leaf loads per node. A *block entry* ([`block_entry`]) packs the
//! block's row, its column and its 16-cell bitmap into one word, `row << 40 | col << 16
//! | bitmap`, so the leaf kernel reads 8 bytes per node, nothing of the tree, and decodes
//! no Morton code. The frontier keeps its size (8 bytes per node); the tree, its file and
//! the CPU engine do not change. A block index has `h − 2` bits, so a block entry fits
//! while `h ≤ 26` (a matrix side of at most 2^26); a taller tree keeps codes.
//!
//! Block entries carry their position, so their order is free:
//! [`FrontierLayout::RowBlocks`] sorts them by block row (then column), so a thread of a
//! right product sums a run of blocks of one row in registers and the 32 lanes of a
//! warp update the same few rows. [`FrontierLayout::ColBlocks`] sorts them by block
//! column (then row), which serves left products the same way. [`FrontierLayout::Both`]
//! keeps both sorted copies, for twice the frontier's bytes, so that products in either
//! direction run over the order that serves them.

use rayon::prelude::*;

use super::LeafKernel;
use crate::k2tree::{morton, K2Tree};

/// The tallest tree whose block entries fit a word: `2(h − 2) + 16 ≤ 64`.
pub const MAX_BLOCK_HEIGHT: u32 = 26;

/// Bits of a block index (row or column) in a block entry: `MAX_BLOCK_HEIGHT − 2`.
const INDEX_BITS: u32 = MAX_BLOCK_HEIGHT - 2;

/// The block entry of the block at block row `row`, block column `col` (cells `4 row ..
/// 4 row + 3` × `4 col .. 4 col + 3`) with cells `bitmap` (bit `4r + c` = cell `(r, c)`):
/// `row << 40 | col << 16 | bitmap`. Sorting entries sorts them by row, then column.
///
/// ```
/// use k2rpq::engine::gpu::{block_entry, block_entry_parts};
/// let e = block_entry(3, 7, 0b1000_0000_0000_0001);
/// assert_eq!(block_entry_parts(e), (3, 7, 0b1000_0000_0000_0001));
/// assert!(block_entry(3, 8, 1) > e && block_entry(4, 0, 1) > block_entry(3, 8, 1));
/// ```
pub fn block_entry(row: u32, col: u32, bitmap: u16) -> u64 {
    debug_assert!(row >> INDEX_BITS == 0 && col >> INDEX_BITS == 0);
    (row as u64) << (16 + INDEX_BITS) | (col as u64) << 16 | bitmap as u64
}

/// `(block row, block column, bitmap)` of a [`block_entry`].
pub fn block_entry_parts(e: u64) -> (u32, u32, u16) {
    let mask = (1u64 << INDEX_BITS) - 1;
    (
        (e >> (16 + INDEX_BITS)) as u32,
        (e >> 16 & mask) as u32,
        e as u16,
    )
}

/// Nodes per parallel chunk when block entries are built (each chunk ranks its first
/// node once, then walks its leaves in order).
const CHUNK: usize = 1 << 16;

/// The entries of the cached frontier on the device.
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize,
)]
pub enum FrontierLayout {
    /// Morton codes in level order (the paper's): the leaf kernel reads the leaves from
    /// the tree through the directory.
    Codes,
    /// [`block_entry`]s in level (Morton) order: no tree reads in the leaf kernel.
    Blocks,
    /// Block entries sorted by block row, then column (the default: with the tuned
    /// kernels the fastest right products, left ones within 0.54-0.66x of cuSPARSE's).
    #[default]
    RowBlocks,
    /// Block entries sorted by block column, then row: the mirror of `RowBlocks`, for
    /// workloads of left products (backward paths), whose column sums then run in
    /// registers; right products scatter their rows instead.
    ColBlocks,
    /// Both sorted copies: `RowBlocks` for right products, `ColBlocks` for left ones
    /// (twice the frontier's bytes; for relations queried in both directions).
    Both,
}

impl FrontierLayout {
    /// Every layout.
    pub const ALL: [FrontierLayout; 5] = [
        FrontierLayout::Codes,
        FrontierLayout::Blocks,
        FrontierLayout::RowBlocks,
        FrontierLayout::ColBlocks,
        FrontierLayout::Both,
    ];

    /// Short name (`codes`, `blocks`, `rowblocks`, `colblocks`, `both`), as in benchmark
    /// rows and on the CLI.
    pub fn name(self) -> &'static str {
        match self {
            FrontierLayout::Codes => "codes",
            FrontierLayout::Blocks => "blocks",
            FrontierLayout::RowBlocks => "rowblocks",
            FrontierLayout::ColBlocks => "colblocks",
            FrontierLayout::Both => "both",
        }
    }

    /// The layout of a [`FrontierLayout::name`].
    ///
    /// ```
    /// use k2rpq::engine::gpu::FrontierLayout;
    /// assert_eq!(FrontierLayout::from_name("both"), Some(FrontierLayout::Both));
    /// assert_eq!(FrontierLayout::from_name("rows"), None);
    /// ```
    pub fn from_name(name: &str) -> Option<FrontierLayout> {
        Self::ALL.into_iter().find(|l| l.name() == name)
    }

    /// The layout a product in direction `dir` reads: for [`FrontierLayout::Both`] the
    /// copy sorted by its output blocks (`RowBlocks` right, `ColBlocks` left), otherwise
    /// the layout itself.
    ///
    /// ```
    /// use k2rpq::engine::gpu::FrontierLayout;
    /// use k2rpq::engine::Direction;
    /// assert_eq!(FrontierLayout::Both.for_dir(Direction::Left), FrontierLayout::ColBlocks);
    /// assert_eq!(FrontierLayout::Blocks.for_dir(Direction::Left), FrontierLayout::Blocks);
    /// ```
    pub fn for_dir(self, dir: crate::engine::Direction) -> FrontierLayout {
        match (self, dir) {
            (FrontierLayout::Both, crate::engine::Direction::Right) => FrontierLayout::RowBlocks,
            (FrontierLayout::Both, crate::engine::Direction::Left) => FrontierLayout::ColBlocks,
            (l, _) => l,
        }
    }

    /// Copies of the frontier this layout keeps on the device (0 for none is the
    /// caller's: tree-only matrices have no frontier).
    pub fn copies(self) -> u64 {
        if self == FrontierLayout::Both {
            2
        } else {
            1
        }
    }

    /// Whether entries are [`block_entry`]s.
    pub fn packed(self) -> bool {
        self != FrontierLayout::Codes
    }

    /// The layout a matrix gets when `self` is asked for with leaf kernel `kernel`:
    /// codes when the tree is too tall for block entries or the kernel reads the tree's
    /// leaves itself (`cells`, `window`: the paper's kernel and the window kernel are kept
    /// as measured baselines over codes).
    pub fn for_tree(self, tree: &K2Tree, kernel: LeafKernel) -> FrontierLayout {
        let fits = tree.height() <= MAX_BLOCK_HEIGHT;
        if self.packed() && fits && kernel.reads_blocks() {
            self
        } else {
            FrontierLayout::Codes
        }
    }
}

/// The [`block_entry`]s of `tree`'s last internal level in the order of `layout`: level
/// order (`Blocks`, and `Codes`, which has no block entries), sorted by block row and
/// column (`RowBlocks`; `Both`, whose other copy [`sort_entries`] makes) or by block
/// column and row (`ColBlocks`). The caller checks `tree.height() ≤ MAX_BLOCK_HEIGHT`.
pub fn block_entries(tree: &K2Tree, layout: FrontierLayout) -> Vec<u64> {
    debug_assert!(tree.height() <= MAX_BLOCK_HEIGHT);
    if tree.nodes() == 0 {
        return Vec::new();
    }
    let codes: &[u64] = tree.frontier();
    let first = tree.level_start(tree.height() - 2);
    let mut out = vec![0u64; codes.len()];
    out.par_chunks_mut(CHUNK)
        .zip(codes.par_chunks(CHUNK))
        .enumerate()
        .for_each(|(k, (dst, src))| {
            let j0 = first + (k * CHUNK) as u64;
            let mut leaf = tree.first_child(j0);
            for (i, (e, &code)) in dst.iter_mut().zip(src).enumerate() {
                let j = j0 + i as u64;
                let (row, col) = morton::decode(code);
                *e = block_entry(row, col, tree.block_bitmap(j, leaf));
                leaf += tree.signature(j).count_ones() as u64;
            }
        });
    sort_entries(&mut out, layout);
    out
}

/// Puts block entries in the order of a sorted `layout` (`RowBlocks` and `Both`: by block
/// row and column; `ColBlocks`: by block column and row); other layouts keep the order.
pub fn sort_entries(entries: &mut [u64], layout: FrontierLayout) {
    match layout {
        FrontierLayout::RowBlocks | FrontierLayout::Both => entries.par_sort_unstable(),
        FrontierLayout::ColBlocks => entries.par_sort_unstable_by_key(|&e| {
            let (row, col, bitmap) = block_entry_parts(e);
            block_entry(col, row, bitmap)
        }),
        FrontierLayout::Codes | FrontierLayout::Blocks => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::{rngs::StdRng, Rng, SeedableRng};

    /// Every cell of a block entry, as `(row, col)` of the matrix.
    fn cells_of(e: u64) -> impl Iterator<Item = (u32, u32)> {
        let (br, bc, _) = block_entry_parts(e);
        (0..16u32)
            .filter(move |b| e >> b & 1 != 0)
            .map(move |b| (4 * br + b / 4, 4 * bc + b % 4))
    }

    fn check(tree: &K2Tree) {
        let mut want = tree.cells();
        want.sort_unstable();
        for layout in [
            FrontierLayout::Blocks,
            FrontierLayout::RowBlocks,
            FrontierLayout::ColBlocks,
            FrontierLayout::Both,
        ] {
            let entries = block_entries(tree, layout);
            assert_eq!(entries.len() as u64, tree.frontier().len() as u64);
            assert!(entries.iter().all(|e| e & 0xFFFF != 0), "an empty block");
            let mut got: Vec<(u32, u32)> = entries.iter().flat_map(|&e| cells_of(e)).collect();
            let by_col = layout == FrontierLayout::ColBlocks;
            if layout != FrontierLayout::Blocks {
                let keys: Vec<(u32, u32)> = entries
                    .iter()
                    .map(|&e| {
                        let (r, c, _) = block_entry_parts(e);
                        if by_col {
                            (c, r)
                        } else {
                            (r, c)
                        }
                    })
                    .collect();
                assert!(
                    keys.windows(2).all(|w| w[0] < w[1]),
                    "not sorted: {layout:?}"
                );
            } else {
                let codes: Vec<u64> = entries
                    .iter()
                    .map(|&e| {
                        let (r, c, _) = block_entry_parts(e);
                        morton::encode(r, c)
                    })
                    .collect();
                assert_eq!(&codes[..], &tree.frontier()[..]);
            }
            got.sort_unstable();
            assert_eq!(got, want, "{layout:?}");
        }
    }

    /// Block entries hold exactly the tree's cells: random shapes (non-square, sides
    /// that are not powers of two, more than one chunk of nodes), a full block, one cell.
    #[test]
    fn block_entries_hold_exactly_the_cells() {
        let mut rng = StdRng::seed_from_u64(7);
        for (rows, cols, m) in [
            (1u64, 1u64, 1usize),
            (5, 3, 10),
            (1000, 37, 5000),
            (300_000, 300_000, 400_000),
        ] {
            let edges: Vec<(u32, u32)> = (0..m)
                .map(|_| {
                    (
                        rng.random_range(0..rows) as u32,
                        rng.random_range(0..cols) as u32,
                    )
                })
                .collect();
            check(&K2Tree::from_edges(rows, cols, edges));
        }
        let full: Vec<(u32, u32)> = (0..4).flat_map(|r| (0..4).map(move |c| (r, c))).collect();
        check(&K2Tree::from_edges(4, 4, full));
        check(&K2Tree::from_edges(10, 10, vec![]));
    }

    /// Taller trees and the kernels that read leaves themselves keep codes.
    #[test]
    fn layout_falls_back_to_codes() {
        let small = K2Tree::from_edges(8, 8, vec![(1, 2)]);
        let tall = K2Tree::from_edges(1 << 30, 1 << 30, vec![(1, (1 << 30) - 1)]);
        assert!(tall.height() > MAX_BLOCK_HEIGHT);
        for l in FrontierLayout::ALL {
            assert_eq!(l.for_tree(&tall, LeafKernel::Tuned), FrontierLayout::Codes);
            assert_eq!(l.for_tree(&small, LeafKernel::Cells), FrontierLayout::Codes);
            assert_eq!(
                l.for_tree(&small, LeafKernel::Window),
                FrontierLayout::Codes
            );
            assert_eq!(l.for_tree(&small, LeafKernel::WarpAgg), l);
            assert_eq!(l.for_tree(&small, LeafKernel::Runs), l);
        }
    }
}
