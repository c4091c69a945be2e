//! The k²-tree (k = 2): a Boolean matrix as the level-order signatures of its
//! non-empty quadrants.
//!
//! Node `j` (global level order, root = 0) has a 4-bit *signature*: bit `b` is set
//! when quadrant `b = 2·row_bit + col_bit` of its block holds a non-zero. Levels run
//! from 0 (the root, the whole `2^h × 2^h` matrix) to `h − 1`, the *leaves*, whose
//! signatures are the cells of a 2 × 2 block. Level `h − 2` is the last internal
//! level. The children of node `j` occupy global positions `1 + rank(j)` onwards,
//! where `rank(j)` counts set bits in the signatures of nodes `0..j`; a sampled
//! [`Directory`] stores that rank every `S` nodes.
//!
//! ```
//! use k2rpq::k2tree::K2Tree;
//! let t = K2Tree::from_edges(5, 7, vec![(0, 1), (3, 5), (4, 6), (3, 5)]);
//! assert_eq!(t.nnz(), 3);
//! assert!(t.contains(3, 5) && !t.contains(5, 3));
//! assert_eq!(t.row(3), vec![5]);
//! assert_eq!(t.column(6), vec![4]);
//! ```

mod build;
pub mod file;
pub mod lines_file;
pub mod morton;
mod query;
mod words;

use std::sync::OnceLock;

pub use query::{
    line_build_threshold, physical_memory, LineBudget, LineBuildError, LineFileState, LineInfo,
    LineMemoryStats, Lines, BUILD_NODES_PER_VISIT, DEFAULT_LINE_MEMORY, EAGER_LINE_NODES,
    LINE_BUILD_SHARE, LINE_READS_PER_VISIT,
};
pub use words::Words;

/// Default sampling period of the [`Directory`], in nodes.
pub const DEFAULT_SAMPLE: u32 = 256;

/// A Boolean `rows × cols` matrix as a k²-tree.
#[derive(Clone, Debug)]
pub struct K2Tree {
    rows: u64,
    cols: u64,
    height: u32,
    nnz: u64,
    /// Global index of the first node of each level; `level_start[h]` = node count.
    level_start: Vec<u64>,
    /// Signatures, 16 per word, node `j` in bits `4·(j % 16)..` of word `j / 16`.
    nibbles: Words,
    directory: OnceLock<Directory>,
    frontier: OnceLock<Words>,
    /// Decoded successor / predecessor lists, built once sparse walks have spent a share
    /// of their build on descents ([`K2Tree::lines_after`]), and their memory budget.
    lines: query::TreeLines,
}

/// First-child offsets sampled every `sample` nodes: `ranks[k] = rank(k · sample)`.
#[derive(Clone, Debug, PartialEq)]
pub struct Directory {
    /// Sampling period in nodes: a power of two, at least 16.
    pub sample: u32,
    /// `ranks[k]` = set bits in the signatures of nodes `0 .. k·sample`.
    pub ranks: Words,
}

/// Sizes a user asks about: see [`K2Tree::stats`].
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct TreeStats {
    /// Matrix rows.
    pub rows: u64,
    /// Matrix columns.
    pub cols: u64,
    /// Non-zero cells.
    pub nnz: u64,
    /// Levels, root to leaves.
    pub levels: u32,
    /// Nodes per level.
    pub level_nodes: Vec<u64>,
    /// All nodes.
    pub nodes: u64,
    /// Bytes of the signatures (4 bits per node, rounded up to words).
    pub tree_bytes: u64,
    /// Bytes of the sampled directory (the attached one, else one at the default period).
    pub directory_bytes: u64,
    /// Bytes of the cached frontier (8 per last-internal-level node).
    pub frontier_bytes: u64,
    /// Signature bits per non-zero.
    pub bits_per_edge: f64,
}

impl TreeStats {
    /// The sizes of a tree of a `rows × cols` matrix with `nnz` cells and `level_nodes`
    /// nodes per level (root to leaves), its directory at the default period.
    fn of_levels(rows: u64, cols: u64, nnz: u64, level_nodes: Vec<u64>) -> TreeStats {
        let levels = level_nodes.len() as u32;
        let nodes: u64 = level_nodes.iter().sum();
        let internal = nodes - level_nodes.last().copied().unwrap_or(0);
        let frontier_bytes = if levels >= 2 && nodes > 0 {
            level_nodes[levels as usize - 2] * 8
        } else {
            0
        };
        TreeStats {
            rows,
            cols,
            nnz,
            levels,
            level_nodes,
            nodes,
            tree_bytes: nodes.div_ceil(16) * 8,
            directory_bytes: (internal / DEFAULT_SAMPLE as u64 + 1) * 8,
            frontier_bytes,
            bits_per_edge: if nnz == 0 {
                0.0
            } else {
                nodes as f64 * 4.0 / nnz as f64
            },
        }
    }

    /// The sizes of the tree [`K2Tree::from_codes`] builds from `codes` (sorted Morton
    /// codes of a `rows × cols` matrix's cells), counted by the builder's first pass
    /// without building it: a code opens a node at every level below the digits it
    /// shares with the code before it ([`morton::divergence`]).
    ///
    /// ```
    /// use k2rpq::k2tree::{morton, K2Tree, TreeStats};
    /// let mut codes: Vec<u64> = [(0, 0), (1, 1), (7, 2), (30, 31)]
    ///     .iter()
    ///     .map(|&(r, c)| morton::encode(r, c))
    ///     .collect();
    /// codes.sort_unstable();
    /// let counted = TreeStats::of_codes(32, 32, &codes);
    /// let tree = K2Tree::from_codes(32, 32, &mut codes).unwrap();
    /// assert_eq!(counted, tree.stats());
    /// ```
    pub fn of_codes(rows: u64, cols: u64, codes: &[u64]) -> TreeStats {
        let (level_nodes, nnz) = build::level_nodes(height_for(rows, cols), codes);
        TreeStats::of_levels(rows, cols, nnz, level_nodes)
    }
}

/// Error for inconsistent parts passed to [`K2Tree::from_parts`].
#[derive(Debug, thiserror::Error)]
#[error("inconsistent k²-tree: {0}")]
pub struct InvalidTree(pub String);

/// Levels of a tree whose matrix has `rows × cols` cells: the side is the next power
/// of two, at least 4, so there is always one internal level above the leaves.
pub fn height_for(rows: u64, cols: u64) -> u32 {
    let n = rows.max(cols).max(4);
    64 - (n - 1).leading_zeros()
}

impl K2Tree {
    /// Builds the tree of the cells `(row, col)`; duplicates are allowed.
    ///
    /// Panics if a cell is outside `rows × cols`; use [`K2Tree::try_from_edges`] to
    /// get an error instead.
    pub fn from_edges(rows: u64, cols: u64, edges: Vec<(u32, u32)>) -> Self {
        Self::try_from_edges(rows, cols, edges).expect("cell outside the matrix")
    }

    /// Builds the tree of the cells `(row, col)` in parallel; duplicates are allowed.
    ///
    /// The pairs are turned into Morton codes in place, so the build needs the 8 bytes per
    /// edge of `edges` plus the tree, and no second edge-sized buffer.
    pub fn try_from_edges(
        rows: u64,
        cols: u64,
        edges: Vec<(u32, u32)>,
    ) -> Result<Self, InvalidTree> {
        build::from_edges(rows, cols, edges)
    }

    /// Builds the tree from Morton codes (any order, duplicates allowed); sorts `codes`.
    pub fn from_codes(rows: u64, cols: u64, codes: &mut [u64]) -> Result<Self, InvalidTree> {
        build::from_codes(rows, cols, codes)
    }

    /// Assembles a tree from its stored parts, checking that they agree.
    pub fn from_parts(
        rows: u64,
        cols: u64,
        nnz: u64,
        level_nodes: &[u64],
        nibbles: Words,
    ) -> Result<Self, InvalidTree> {
        let height = height_for(rows, cols);
        if level_nodes.len() != height as usize {
            return Err(InvalidTree(format!(
                "{} levels stored, {height} expected for a {rows}×{cols} matrix",
                level_nodes.len()
            )));
        }
        let mut level_start = Vec::with_capacity(level_nodes.len() + 1);
        let mut acc = 0u64;
        level_start.push(0);
        for &n in level_nodes {
            acc = acc
                .checked_add(n)
                .ok_or_else(|| InvalidTree("node count overflows".into()))?;
            level_start.push(acc);
        }
        if (nibbles.len() as u64) < acc.div_ceil(16) {
            return Err(InvalidTree(format!(
                "{acc} nodes need {} words, {} stored",
                acc.div_ceil(16),
                nibbles.len()
            )));
        }
        let tree = K2Tree {
            rows,
            cols,
            height,
            nnz,
            level_start,
            nibbles,
            directory: OnceLock::new(),
            frontier: OnceLock::new(),
            lines: Default::default(),
        };
        tree.validate()?;
        Ok(tree)
    }

    /// Checks the structural invariants: each level has as many nodes as the level above
    /// has set bits, no signature is empty, leaves hold `nnz` cells, padding is zero, and
    /// no cell lies outside the matrix. O(nodes), in parallel over words.
    pub fn validate(&self) -> Result<(), InvalidTree> {
        if self.rows > 1 << 32 || self.cols > 1 << 32 {
            return Err(InvalidTree(format!(
                "{}×{} matrix: coordinates are 32-bit",
                self.rows, self.cols
            )));
        }
        let total = self.nodes();
        let used_words = total.div_ceil(16) as usize;
        // Padding nibbles past the last node must be zero (a flipped bit there would be
        // invisible to the counts below).
        let tail = total % 16;
        if tail != 0 && self.nibbles[used_words - 1] >> (4 * tail) != 0 {
            return Err(InvalidTree("non-zero padding after the last node".into()));
        }
        if self.nibbles[used_words..].iter().any(|&w| w != 0) {
            return Err(InvalidTree("non-zero words after the last node".into()));
        }
        if total == 0 {
            return if self.nnz == 0 {
                Ok(())
            } else {
                Err(InvalidTree(format!("no nodes but nnz = {}", self.nnz)))
            };
        }
        if self.level_nodes(0) != 1 {
            return Err(InvalidTree("level 0 must hold exactly the root".into()));
        }
        for d in 0..self.height {
            let (a, b) = (
                self.level_start[d as usize],
                self.level_start[d as usize + 1],
            );
            let (bits, empty) = scan_nibbles(&self.nibbles, a, b);
            if let Some(j) = empty {
                return Err(InvalidTree(format!("node {j} has an empty signature")));
            }
            let expect = if d + 1 < self.height {
                self.level_nodes(d + 1)
            } else {
                self.nnz
            };
            if bits != expect {
                return Err(InvalidTree(format!(
                    "level {d} has {bits} set bits but {expect} {}",
                    if d + 1 < self.height {
                        "children"
                    } else {
                        "cells"
                    }
                )));
            }
        }
        // Cells beyond the logical shape: the largest row and column present.
        let side = self.side();
        if self.rows < side || self.cols < side {
            let (max_r, max_c) = self.max_cell();
            if max_r >= self.rows || max_c >= self.cols {
                return Err(InvalidTree(format!(
                    "cell ({max_r}, {max_c}) outside the {}×{} matrix",
                    self.rows, self.cols
                )));
            }
        }
        Ok(())
    }

    /// Matrix rows.
    pub fn rows(&self) -> u64 {
        self.rows
    }
    /// Matrix columns.
    pub fn cols(&self) -> u64 {
        self.cols
    }
    /// Levels `h`, root (0) to leaves (`h − 1`).
    pub fn height(&self) -> u32 {
        self.height
    }
    /// Side of the padded square matrix, `2^h`.
    pub fn side(&self) -> u64 {
        1u64 << self.height
    }
    /// Non-zero cells.
    pub fn nnz(&self) -> u64 {
        self.nnz
    }
    /// All nodes.
    pub fn nodes(&self) -> u64 {
        *self.level_start.last().unwrap()
    }
    /// Nodes at level `d`.
    pub fn level_nodes(&self, d: u32) -> u64 {
        self.level_start[d as usize + 1] - self.level_start[d as usize]
    }
    /// Global index of the first node of level `d` (`d == h` gives the node count).
    pub fn level_start(&self, d: u32) -> u64 {
        self.level_start[d as usize]
    }
    /// The signature words, 16 nodes per word.
    pub fn nibbles(&self) -> &Words {
        &self.nibbles
    }
    /// Signature of node `j`.
    #[inline]
    pub fn signature(&self, j: u64) -> u8 {
        ((self.nibbles[(j / 16) as usize] >> (4 * (j % 16))) & 0xF) as u8
    }
    /// Nodes with children: all but the leaves.
    pub fn internal_nodes(&self) -> u64 {
        if self.nodes() == 0 {
            0
        } else {
            self.level_start[self.height as usize - 1]
        }
    }

    /// Set bits in the signatures of nodes `0..j`; node `j`'s first child is `1 + rank(j)`.
    #[inline]
    pub fn rank(&self, j: u64) -> u64 {
        let dir = self.directory();
        let s = dir.sample as u64;
        let mut r = dir.ranks[(j / s) as usize];
        let mut w = (j / s) * s / 16;
        let end = j / 16;
        while w < end {
            r += popcount_nibbles(self.nibbles[w as usize]);
            w += 1;
        }
        let rem = j % 16;
        if rem != 0 {
            r += (self.nibbles[end as usize] & ((1u64 << (4 * rem)) - 1)).count_ones() as u64;
        }
        r
    }

    /// Global index of the first child of internal node `j`.
    #[inline]
    pub fn first_child(&self, j: u64) -> u64 {
        1 + self.rank(j)
    }

    /// The sampled directory at [`DEFAULT_SAMPLE`], computed on first use unless one was
    /// attached by [`K2Tree::with_directory`] or loaded from a file.
    pub fn directory(&self) -> &Directory {
        self.directory
            .get_or_init(|| Directory::build(self, DEFAULT_SAMPLE))
    }

    /// Whether a directory has been computed or attached.
    pub fn has_directory(&self) -> bool {
        self.directory.get().is_some()
    }

    /// The directory if one has been computed or attached (computes nothing).
    pub fn directory_if_built(&self) -> Option<&Directory> {
        self.directory.get()
    }

    /// Returns the tree with `dir` attached, replacing any computed so far. The caller
    /// vouches that `dir` is this tree's (`Directory::build(&tree, dir.sample)`);
    /// [`file::open`] checks that before attaching a stored one.
    pub fn with_directory(mut self, dir: Directory) -> Self {
        self.directory = OnceLock::from(dir);
        self
    }

    /// Morton codes of the nodes of the last internal level (`h − 2`), in level order:
    /// the cached frontier. Computed on first use unless attached.
    pub fn frontier(&self) -> &Words {
        self.frontier
            .get_or_init(|| Words::owned(query::expand_to(self, self.height.saturating_sub(2))))
    }

    /// Whether the cached frontier has been computed or attached.
    pub fn has_frontier(&self) -> bool {
        self.frontier.get().is_some()
    }

    /// Returns the tree with its cached frontier attached, replacing any computed so far.
    /// The caller vouches that `frontier` equals `level_codes(height() − 2)`;
    /// [`file::open`] checks that before attaching a stored one.
    pub fn with_frontier(mut self, frontier: Words) -> Self {
        self.frontier = OnceLock::from(frontier);
        self
    }

    /// The 4x4 block of cells below last-internal-level node `j` (level `h − 2`) whose
    /// leaves start at global index `first_leaf` (`first_child(j)`): bit `4r + c` is cell
    /// `(r, c)` of the block. A node's up to four 2x2 leaves are contiguous, in the order
    /// of its signature's bits (leaf `q` = 2 × row + col of the 2x2 quadrants).
    pub fn block_bitmap(&self, j: u64, first_leaf: u64) -> u16 {
        let s = self.signature(j);
        let mut leaf = first_leaf;
        let mut bm = 0u16;
        for q in 0..4u16 {
            if s & (1 << q) != 0 {
                let lam = self.signature(leaf) as u16;
                leaf += 1;
                // Leaf cell e = 2 × row + col: its rows land four bits apart.
                let spread = (lam & 3) | ((lam & 12) << 2);
                bm |= spread << ((q >> 1) * 8 + (q & 1) * 2);
            }
        }
        bm
    }

    /// Morton codes of the nodes of level `d`, in level order (a host-side expansion).
    pub fn level_codes(&self, d: u32) -> Vec<u64> {
        query::expand_to(self, d)
    }

    /// Sizes: nodes, levels, bits per edge, bytes of tree, directory and frontier.
    pub fn stats(&self) -> TreeStats {
        let levels = (0..self.height).map(|d| self.level_nodes(d)).collect();
        let mut s = TreeStats::of_levels(self.rows, self.cols, self.nnz, levels);
        // The attached directory if any, else what one at the default period would take.
        if let Some(d) = self.directory.get() {
            s.directory_bytes = d.bytes();
        }
        s
    }

    /// Every non-zero cell `(row, col)`, in Morton order.
    pub fn cells(&self) -> Vec<(u32, u32)> {
        query::cells(self)
    }

    fn max_cell(&self) -> (u64, u64) {
        query::max_cell(self)
    }
}

impl PartialEq for K2Tree {
    fn eq(&self, other: &Self) -> bool {
        self.rows == other.rows
            && self.cols == other.cols
            && self.nnz == other.nnz
            && self.level_start == other.level_start
            && self.nibbles[..self.nodes().div_ceil(16) as usize]
                == other.nibbles[..other.nodes().div_ceil(16) as usize]
    }
}

/// Set bits of a word of 16 signatures (same as `count_ones`, named for intent).
#[inline]
pub(crate) fn popcount_nibbles(w: u64) -> u64 {
    w.count_ones() as u64
}

/// Mask of the nibbles of nodes `a..b` within word `w` (nodes `16·w .. 16·w + 16`).
#[inline]
fn nibble_mask(w: u64, a: u64, b: u64) -> u64 {
    let lo = a.saturating_sub(16 * w).min(16);
    let hi = (b - 16 * w).min(16);
    let upto = |n: u64| {
        if n >= 16 {
            u64::MAX
        } else {
            (1u64 << (4 * n)) - 1
        }
    };
    upto(hi) & !upto(lo)
}

/// Set bits in the signatures of nodes `a..b`.
pub(crate) fn count_bits(nibbles: &[u64], a: u64, b: u64) -> u64 {
    if a >= b {
        return 0;
    }
    (a / 16..b.div_ceil(16))
        .map(|w| (nibbles[w as usize] & nibble_mask(w, a, b)).count_ones() as u64)
        .sum()
}

/// Set bits in the signatures of nodes `a..b`, and the first node there with an empty
/// signature, in parallel over words.
fn scan_nibbles(nibbles: &[u64], a: u64, b: u64) -> (u64, Option<u64>) {
    use rayon::prelude::*;
    if a >= b {
        return (0, None);
    }
    const LOW: u64 = 0x1111_1111_1111_1111;
    ((a / 16) as usize..b.div_ceil(16) as usize)
        .into_par_iter()
        .with_min_len(1 << 12)
        .map(|w| {
            let w = w as u64;
            let m = nibble_mask(w, a, b);
            let x = nibbles[w as usize] & m;
            // A nibble is non-empty when any of its 4 bits is set: fold them onto bit 0.
            let nonempty = (x | x >> 1 | x >> 2 | x >> 3) & LOW;
            let empty = (m & LOW) & !nonempty;
            let first = (empty != 0).then(|| 16 * w + empty.trailing_zeros() as u64 / 4);
            (x.count_ones() as u64, first)
        })
        .reduce(
            || (0, None),
            |(b1, e1), (b2, e2)| {
                (
                    b1 + b2,
                    match (e1, e2) {
                        (Some(x), Some(y)) => Some(x.min(y)),
                        (x, y) => x.or(y),
                    },
                )
            },
        )
}

impl Directory {
    /// Samples `rank` every `sample` nodes over the internal nodes of `tree`.
    ///
    /// `sample` is rounded by [`Directory::period`].
    pub fn build(tree: &K2Tree, sample: u32) -> Directory {
        let sample = Directory::period(sample);
        let internal = tree.internal_nodes();
        let n = (internal / sample as u64 + 1) as usize;
        let words_per = (sample / 16) as usize;
        let nib = &tree.nibbles;
        let total_words = tree.nodes().div_ceil(16) as usize;
        // Per-sample popcounts in parallel, then a prefix sum.
        use rayon::prelude::*;
        let mut ranks: Vec<u64> = (0..n)
            .into_par_iter()
            .map(|k| {
                if k == 0 {
                    return 0;
                }
                let a = ((k - 1) * words_per).min(total_words);
                let b = (k * words_per).min(total_words);
                nib[a..b].iter().map(|&w| w.count_ones() as u64).sum()
            })
            .collect();
        for k in 1..n {
            ranks[k] += ranks[k - 1];
        }
        Directory {
            sample,
            ranks: Words::owned(ranks),
        }
    }

    /// The period actually used for a requested `sample`: rounded up to a power of two,
    /// at least 16 (whole words of signatures) and at most 2^31.
    pub fn period(sample: u32) -> u32 {
        sample.clamp(16, 1 << 31).next_power_of_two()
    }

    /// Bytes of the directory.
    pub fn bytes(&self) -> u64 {
        self.ranks.bytes()
    }
}
