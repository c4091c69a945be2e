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
pub(crate) const MAX_BLOCK_HEIGHT: u32 = 26;

/// Bits of a block index (row or column) in a block entry: `MAX_BLOCK_HEIGHT − 2`.
const INDEX_BITS: u32 = MAX_BLOCK_HEIGHT - 2;

/// The block entry of the block at block row `row`, block column `col` (cells `4 row ..
/// 4 row + 3` × `4 col .. 4 col + 3`) with cells `bitmap` (bit `4r + c` = cell `(r, c)`):
/// `row << 40 | col << 16 | bitmap`. Sorting entries sorts them by row, then column.
pub(crate) fn block_entry(row: u32, col: u32, bitmap: u16) -> u64 {
    debug_assert!(row >> INDEX_BITS == 0 && col >> INDEX_BITS == 0);
    (row as u64) << (16 + INDEX_BITS) | (col as u64) << 16 | bitmap as u64
}

/// `(block row, block column, bitmap)` of a [`block_entry`].
pub(crate) fn block_entry_parts(e: u64) -> (u32, u32, u16) {
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
    /// Block entries (`row << 40 | col << 16 | bitmap`: a node's 4x4 block of cells) in
    /// level (Morton) order: no tree reads in the leaf kernel.
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
    pub(crate) fn copies(self) -> u64 {
        if self == FrontierLayout::Both {
            2
        } else {
            1
        }
    }

    /// Whether entries are [`block_entry`]s.
    pub(crate) fn packed(self) -> bool {
        self != FrontierLayout::Codes
    }

    /// The layout a matrix gets when `self` is asked for with leaf kernel `kernel`:
    /// codes when the tree is too tall for block entries or the kernel reads the tree's
    /// leaves itself (`cells`, `window`: the paper's kernel and the window kernel are kept
    /// as measured baselines over codes).
    pub(crate) fn for_tree(self, tree: &K2Tree, kernel: LeafKernel) -> FrontierLayout {
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
pub(crate) fn block_entries(tree: &K2Tree, layout: FrontierLayout) -> Vec<u64> {
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
pub(crate) fn sort_entries(entries: &mut [u64], layout: FrontierLayout) {
    match layout {
        FrontierLayout::RowBlocks | FrontierLayout::Both => entries.par_sort_unstable(),
        FrontierLayout::ColBlocks => entries.par_sort_unstable_by_key(|&e| {
            let (row, col, bitmap) = block_entry_parts(e);
            block_entry(col, row, bitmap)
        }),
        FrontierLayout::Codes | FrontierLayout::Blocks => {}
    }
}

/// Entries of one window of a [`RowWindows`] frontier: one warp's, four per lane
/// (`WINDOW` in `cuda/row_stores.cu`).
pub(crate) const WINDOW_ENTRIES: usize = 128;

/// The block row of a padding marker: the largest block index, so windows are laid only
/// for matrices with fewer block rows.
pub(crate) const PAD_ROW: u32 = (1 << INDEX_BITS) - 1;

/// The most markers and pads a [`RowWindows`] frontier may add to the row-sorted entries
/// it lays out, as a fraction `1 / MAX_WINDOW_GROWTH` of them (10 %): the row-windowed product
/// saves the clear of `y` and its reads, but every marker and pad is streamed by every
/// product, and the frontier is device memory.
pub(crate) const MAX_WINDOW_GROWTH: usize = 10;

/// A `RowBlocks` frontier laid out in windows of [`WINDOW_ENTRIES`] entries that no block
/// row's run crosses, so that the warp that takes a window is the only writer of its rows'
/// outputs and can store them: a right product `y = A x` then needs no clear of `y`, no
/// atomics and no reads of it (`rowwindows_bits` in `cuda/row_stores.cu`).
///
/// Besides the block entries, in row order, the windows hold *markers*, entries without
/// cells that every other kernel skips as empty blocks:
/// - an empty block row's marker, [`block_entry`]`(row, 0, 0)`: the product writes its
///   outputs' zeros;
/// - padding, `block_entry(PAD_ROW, 0, 0)`, where a run does not fit the rest of a window
///   and starts the next;
/// - a *shared part*'s marker, `block_entry(row, 1, 0)`: a run longer than a window is cut
///   into parts of `WINDOW_ENTRIES − 1` entries, each starting a window behind this
///   marker. Its rows (in [`RowWindows::shared_rows`]) are cleared before a product and
///   take atomic ORs.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct RowWindows {
    /// The windows' entries, a multiple of [`WINDOW_ENTRIES`].
    pub(crate) entries: Vec<u64>,
    /// The block rows whose runs are cut into shared parts, ascending.
    pub(crate) shared_rows: Vec<u32>,
}

impl RowWindows {
    /// Windows the entries fill.
    pub(crate) fn windows(&self) -> u64 {
        (self.entries.len() / WINDOW_ENTRIES) as u64
    }
}

/// Lays `entries` (sorted by block row, as [`FrontierLayout::RowBlocks`] sorts them) out
/// in [`RowWindows`] for a matrix of `block_rows` block rows, or `None` when that would
/// take more than `max_extra` markers and pads (a sparse relation's empty rows; the engine
/// allows `1 /` [`MAX_WINDOW_GROWTH`] of the entries), when the matrix has [`PAD_ROW`]
/// block rows or more, or when the windows would number 2^32 or more.
pub(crate) fn row_windows(
    entries: &[u64],
    block_rows: u32,
    max_extra: usize,
) -> Option<RowWindows> {
    const W: usize = WINDOW_ENTRIES;
    if block_rows >= PAD_ROW {
        return None;
    }
    // Where each block row's run starts (one pass over the entries), then each row's
    // place in the windows (one pass over the rows), then the entries copied to their
    // places and the pads written, rows in parallel.
    let mut starts = Vec::with_capacity(block_rows as usize + 1);
    for (i, &e) in entries.iter().enumerate() {
        let row = block_entry_parts(e).0 as usize;
        while starts.len() <= row.min(block_rows as usize) {
            starts.push(i);
        }
    }
    starts.resize(block_rows as usize + 1, entries.len());
    debug_assert!(
        entries.is_empty() || (block_entry_parts(entries[entries.len() - 1]).0) < block_rows,
        "entries past the last row"
    );
    let limit = entries.len().saturating_add(max_extra);
    let (at, shared_rows) = place_runs(starts.windows(2).map(|r| r[1] - r[0]), limit)?;
    let total = at[block_rows as usize];
    // Zeroed pages come from the allocator as they are; every slot is written below.
    let mut out = vec![0u64; total];
    // Rows in chunks, each chunk's places a slice of its own.
    const ROWS: usize = 1 << 14;
    let mut pieces = Vec::new();
    let mut rest = &mut out[..];
    for r0 in (0..block_rows as usize).step_by(ROWS) {
        let r1 = (r0 + ROWS).min(block_rows as usize);
        let (piece, after) = rest.split_at_mut(at[r1] - at[r0]);
        rest = after;
        pieces.push((r0..r1, piece));
    }
    let pad = block_entry(PAD_ROW, 0, 0);
    pieces.into_par_iter().for_each(|(rows, piece)| {
        let base = at[rows.start];
        for row in rows {
            let run = &entries[starts[row]..starts[row + 1]];
            let (p, next) = (at[row] - base, at[row + 1] - base);
            let end = if run.is_empty() {
                piece[p] = block_entry(row as u32, 0, 0);
                p + 1
            } else if run.len() <= W {
                piece[p..p + run.len()].copy_from_slice(run);
                p + run.len()
            } else {
                // Windows start at multiples of W of the whole frontier, not of the piece.
                let mut q = p;
                for part in run.chunks(W - 1) {
                    let window = (base + q).next_multiple_of(W) - base;
                    piece[q..window].fill(pad);
                    q = window;
                    piece[q] = block_entry(row as u32, 1, 0);
                    piece[q + 1..q + 1 + part.len()].copy_from_slice(part);
                    q += 1 + part.len();
                }
                q
            };
            piece[end..next].fill(pad);
        }
    });
    Some(RowWindows {
        entries: out,
        shared_rows,
    })
}

/// The places of block rows' runs of `lens` entries in row windows: the first slot of
/// each row's place, then the windows' total length (a multiple of [`WINDOW_ENTRIES`]),
/// and the rows cut into shared parts; `None` when the windows would hold more than
/// `limit` entries or count 2^32 windows or more (the kernel counts them in 32 bits).
fn place_runs(lens: impl Iterator<Item = usize>, limit: usize) -> Option<(Vec<usize>, Vec<u32>)> {
    const W: usize = WINDOW_ENTRIES;
    let mut at = Vec::with_capacity(lens.size_hint().0 + 1);
    let mut shared_rows = Vec::new();
    let mut end = 0usize;
    for (row, len) in lens.enumerate() {
        if len > W {
            // Parts of W − 1 entries, each at the start of a window behind its marker.
            shared_rows.push(row as u32);
            let parts = len.div_ceil(W - 1);
            end = end.next_multiple_of(W);
            at.push(end);
            end += (parts - 1) * W + 1 + (len - (parts - 1) * (W - 1));
        } else {
            // A run (or an empty row's marker) that does not fit the rest of a window
            // starts the next.
            if end % W + len.max(1) > W {
                end = end.next_multiple_of(W);
            }
            at.push(end);
            end += len.max(1);
        }
        if end > limit {
            return None;
        }
    }
    let total = end.next_multiple_of(W);
    if total > limit || (total / W) as u64 >= u32::MAX as u64 {
        return None;
    }
    at.push(total);
    Some((at, shared_rows))
}

/// The entries and shared rows that [`row_windows`] lays out for `tree`'s `RowBlocks`
/// entries with at most `max_extra` markers and pads (`None`: it lays none out), counted
/// from the tree's frontier without building the entries: what a frontier in row windows
/// takes on the device, for its memory budget.
pub(crate) fn row_windows_size(tree: &K2Tree, max_extra: usize) -> Option<(u64, u64)> {
    let block_rows = tree.rows().div_ceil(4);
    if block_rows >= PAD_ROW as u64 || tree.height() > MAX_BLOCK_HEIGHT {
        return None;
    }
    let lens = block_row_lengths(tree);
    let limit = lens
        .iter()
        .map(|&l| l as usize)
        .sum::<usize>()
        .saturating_add(max_extra);
    let (at, shared_rows) = place_runs(lens.into_iter().map(|l| l as usize), limit)?;
    Some((at[block_rows as usize] as u64, shared_rows.len() as u64))
}

/// The entries of each block row of `tree`'s `RowBlocks` frontier (one per frontier
/// node), counted from the frontier's codes without building the entries.
pub(super) fn block_row_lengths(tree: &K2Tree) -> Vec<u32> {
    use std::sync::atomic::{AtomicU32, Ordering};
    let codes: &[u64] = if tree.nodes() == 0 {
        &[]
    } else {
        tree.frontier()
    };
    let counts: Vec<AtomicU32> = (0..tree.rows().div_ceil(4))
        .map(|_| AtomicU32::new(0))
        .collect();
    codes.par_iter().for_each(|&code| {
        counts[morton::decode(code).0 as usize].fetch_add(1, Ordering::Relaxed);
    });
    counts.into_iter().map(AtomicU32::into_inner).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::{rngs::StdRng, Rng, SeedableRng};

    /// A block entry keeps its parts, and entries sort by block row, then column.
    #[test]
    fn block_entries_sort_by_row_then_column() {
        let e = block_entry(3, 7, 0b1000_0000_0000_0001);
        assert_eq!(block_entry_parts(e), (3, 7, 0b1000_0000_0000_0001));
        assert!(block_entry(3, 8, 1) > e && block_entry(4, 0, 1) > block_entry(3, 8, 1));
    }

    /// An empty block row between two others gets its marker; the windows are refused
    /// when their markers and pads would pass the allowance.
    #[test]
    fn row_windows_mark_empty_rows() {
        // Block rows 0 and 2 hold a block each; row 1 is empty.
        let entries = [block_entry(0, 3, 1), block_entry(2, 0, 0x8000)];
        // Two entries would get 126 markers and pads: far over the growth allowed.
        assert!(row_windows(&entries, 3, usize::MAX).is_some());
        assert!(row_windows(&entries, 3, 10).is_none());
        let w = row_windows(&entries, 3, usize::MAX).unwrap();
        assert_eq!(w.entries.len(), WINDOW_ENTRIES);
        assert_eq!(
            &w.entries[..3],
            &[entries[0], block_entry(1, 0, 0), entries[1]]
        );
        assert!(w.shared_rows.is_empty());
    }

    /// The size counted from the tree is that of the windows laid out from its entries.
    #[test]
    fn row_windows_size_counts_the_layout() {
        let edges: Vec<(u32, u32)> = (0..400u32).map(|i| (i, (i * 7) % 400)).collect();
        let tree = K2Tree::from_edges(400, 400, edges);
        let entries = block_entries(&tree, FrontierLayout::RowBlocks);
        let w = row_windows(&entries, 100, usize::MAX).unwrap();
        let size = (w.entries.len() as u64, w.shared_rows.len() as u64);
        assert_eq!(row_windows_size(&tree, usize::MAX), Some(size));
        assert_eq!(row_windows_size(&tree, 0), None);
    }

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

    /// Reads row windows back as the product `y = A x` of one word per node the way
    /// `rowwindows_bits` does (a run starts at a marker or a change of row; padding
    /// writes nothing), checking the layout's rules on the way: no run crosses into a
    /// window but behind a shared marker, every block row is written exactly once or is
    /// shared, and shared rows are exactly the runs longer than a window.
    fn windows_product(w: &RowWindows, block_rows: u32, x: &[u64]) -> Vec<u64> {
        assert_eq!(w.entries.len() % WINDOW_ENTRIES, 0);
        let mut y = vec![0u64; 4 * block_rows as usize];
        let mut written = vec![0u32; block_rows as usize];
        let mut shared = std::collections::BTreeSet::new();
        let mut row = None;
        for (i, &e) in w.entries.iter().enumerate() {
            let (r, col, bm) = block_entry_parts(e);
            let start = bm == 0 || Some(r) != row;
            if i % WINDOW_ENTRIES == 0 {
                assert!(start, "a run crosses into window {}", i / WINDOW_ENTRIES);
            }
            if start {
                row = Some(r);
                if bm == 0 && r == PAD_ROW {
                    row = None;
                } else if bm == 0 && col == 1 {
                    shared.insert(r);
                } else {
                    written[r as usize] += 1;
                }
            }
            for b in 0..16 {
                if bm >> b & 1 != 0 {
                    let r = row.expect("cells after padding");
                    y[(4 * r + b / 4) as usize] |= x[(4 * col + b % 4) as usize];
                }
            }
        }
        assert_eq!(shared.into_iter().collect::<Vec<_>>(), w.shared_rows);
        for (r, &n) in written.iter().enumerate() {
            let is_shared = w.shared_rows.binary_search(&(r as u32)).is_ok();
            assert_eq!(n, !is_shared as u32, "block row {r} written {n} times");
        }
        y
    }

    /// Row windows hold exactly the entries' cells, each row written once: rows longer
    /// than a window (shared parts), runs that do not fit the rest of a window, empty
    /// rows, the last rows empty; and the growth limit refuses sparse relations.
    #[test]
    fn row_windows_hold_exactly_the_cells() {
        let mut rng = StdRng::seed_from_u64(11);
        for (rows, cols, m, long) in [
            (64u64, 64u64, 1500usize, 0usize),
            (2000, 3000, 40_000, 0),
            (2000, 3000, 40_000, 3),
            (999, 4000, 30_000, 1),
            // More block rows than one parallel piece takes, so pieces start mid-window.
            (70_001, 70_000, 140_000, 3),
        ] {
            let mut edges: Vec<(u32, u32)> = (0..m)
                .map(|_| {
                    (
                        rng.random_range(0..rows) as u32,
                        rng.random_range(0..cols) as u32,
                    )
                })
                .collect();
            // Rows of up to 1000 blocks: runs of several windows.
            for k in 0..long {
                let r = rng.random_range(0..rows) as u32;
                edges.extend((0..cols as u32).step_by(k + 1).map(|c| (r, c)));
            }
            let tree = K2Tree::from_edges(rows, cols, edges);
            let entries = block_entries(&tree, FrontierLayout::RowBlocks);
            let block_rows = rows.div_ceil(4) as u32;
            let w = row_windows(&entries, block_rows, usize::MAX).expect("no limit");
            assert_eq!(
                w.entries.iter().filter(|&&e| e & 0xFFFF != 0).count(),
                entries.len()
            );
            assert_eq!(w.shared_rows.is_empty(), long == 0);
            let x: Vec<u64> = (0..cols.next_multiple_of(4))
                .map(|i| rng.random::<u64>() & !(i & 1))
                .collect();
            let mut want = vec![0u64; 4 * block_rows as usize];
            for (r, c) in tree.cells() {
                want[r as usize] |= x[c as usize];
            }
            assert_eq!(windows_product(&w, block_rows, &x), want);
            // The limit: exactly the markers and pads this layout took.
            let extra = w.entries.len() - entries.len();
            assert!(row_windows(&entries, block_rows, extra).is_some());
            if let Some(less) = extra.checked_sub(1) {
                assert!(row_windows(&entries, block_rows, less).is_none());
                assert_eq!(row_windows_size(&tree, less), None);
            }
            // Counted from the tree alone, the same windows.
            let size = (w.entries.len() as u64, w.shared_rows.len() as u64);
            assert_eq!(row_windows_size(&tree, usize::MAX), Some(size));
            assert_eq!(row_windows_size(&tree, extra), Some(size));
        }
        // A sparse relation: one block among 10,000 empty block rows.
        let sparse = K2Tree::from_edges(40_000, 40_000, vec![(5, 7)]);
        let entries = block_entries(&sparse, FrontierLayout::RowBlocks);
        assert!(row_windows(&entries, 10_000, entries.len() / MAX_WINDOW_GROWTH).is_none());
        assert_eq!(
            row_windows_size(&sparse, entries.len() / MAX_WINDOW_GROWTH),
            None
        );
        let empty = K2Tree::from_edges(0, 0, vec![]);
        assert_eq!(row_windows_size(&empty, 0), Some((0, 0)));
        assert!(row_windows(&[], 0, 0).is_some_and(|w| w.entries.is_empty()));
        assert!(row_windows(&entries, PAD_ROW, usize::MAX).is_none());
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
