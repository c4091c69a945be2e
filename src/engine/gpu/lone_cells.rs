//! Lone cells: the cells a tree-only matrix keeps in a list beside its tree
//! (`Tuning::lone_paths`; `lone_cells_*` in `cuda/lone_cells.cu`).
//!
//! A cell that no other cell shares a node with from some level down hangs at the end of
//! a unary path: one node per level, each of which a tree-only descent expands as it does
//! any other. A web graph's far links are such cells: on the 200M-edge synthetic web graph
//! the cells that hang alone below a path of at least 10 nodes are 6 % of its cells but
//! 36 % of its nodes (`examples/lone_cells.rs`). Taking them out of the tree the device
//! descends, into a list of `(row, col)` pairs that one flat launch applies after the
//! descent, removes those nodes from every expand and octet step. Each direction keeps
//! its own copy of the list, sorted by its output (rows for right products, columns for
//! left ones), so that a warp's updates go to a few lines of `y` and the lanes of equal
//! outputs combine first: in Morton order the launch cost 37-76 ns per cell, the random
//! updates of `y` and the web graph's popular columns.
//! The two copies cost 16 bytes per cell against about half a byte per node removed, so
//! a path of 32 nodes breaks even and shorter ones trade memory for time.

use rayon::prelude::*;

use crate::k2tree::{morton, InvalidTree, K2Tree, TreeStats};

/// A tree-only matrix split for the device: the tree it descends and its lone cells.
#[derive(Debug)]
pub(crate) struct LoneCells {
    /// The tree without the lone cells (the same shape as the original).
    pub(crate) tree: K2Tree,
    /// The lone cells as `(row, col)` pairs, `2 · count` words, sorted: the right
    /// products' list (output, input).
    pub(crate) by_row: Vec<u32>,
    /// The same cells as `(col, row)` pairs, sorted: the left products' list.
    pub(crate) by_col: Vec<u32>,
}

impl LoneCells {
    /// How many cells the list holds.
    pub(crate) fn count(&self) -> u64 {
        self.by_row.len() as u64 / 2
    }

    /// Device bytes of both copies.
    pub(crate) fn list_bytes(&self) -> u64 {
        list_bytes(self.count())
    }
}

/// What [`lone_cells`] would take out of a tree, counted without splitting it
/// ([`lone_count`]).
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct LoneCount {
    /// How many cells the lists would hold.
    pub(crate) cells: u64,
    /// The sizes of the tree left ([`LoneCells::tree`]'s `stats()`).
    pub(crate) kept: TreeStats,
}

impl LoneCount {
    /// Device bytes of both copies of the list ([`LoneCells::list_bytes`]).
    pub(crate) fn list_bytes(&self) -> u64 {
        list_bytes(self.cells)
    }
}

/// Device bytes of the two lists of `cells` cells: a pair of `u32` per cell in each.
fn list_bytes(cells: u64) -> u64 {
    16 * cells
}

/// The nodes of the unary path each cell of `codes` (sorted, distinct Morton codes of a
/// tree of `height` levels) hangs below: the levels, down to the leaves, whose node holds
/// that cell alone (0 for a cell that shares its leaf).
pub(crate) fn path_lengths(codes: &[u64], height: u32) -> Vec<u32> {
    // Base-4 digits two codes share from the top (a code has `height` digits).
    let shared = |a, b| morton::divergence(height, a, b);
    let n = codes.len();
    (0..n)
        .into_par_iter()
        .map(|i| {
            let before = if i > 0 {
                shared(codes[i - 1], codes[i])
            } else {
                0
            };
            let after = if i + 1 < n {
                shared(codes[i], codes[i + 1])
            } else {
                0
            };
            // Alone from level `1 + max(before, after)` (the root is level 0) down to
            // the leaves' level `height - 1`.
            height - 1 - before.max(after)
        })
        .collect()
}

/// Splits `tree` into the cells that hang alone below a path of at least `min_path` nodes
/// and a tree of the others; `None` when no cell does (or `min_path` is 0).
pub(crate) fn lone_cells(tree: &K2Tree, min_path: u32) -> Result<Option<LoneCells>, InvalidTree> {
    let Some((codes, paths)) = coded_paths(tree, min_path) else {
        return Ok(None);
    };
    let (lone, mut kept): (Vec<u64>, Vec<u64>) = codes
        .par_iter()
        .zip(paths.par_iter())
        .partition_map(|(&c, &p)| {
            if p >= min_path {
                rayon::iter::Either::Left(c)
            } else {
                rayon::iter::Either::Right(c)
            }
        });
    // Sorted pairs (output, input) packed in a u64 each, output in the high half.
    let sorted = |flip: bool| -> Vec<u32> {
        let mut pairs: Vec<u64> = lone
            .par_iter()
            .map(|&c| {
                let (r, k) = morton::decode(c);
                let (out, inp) = if flip { (k, r) } else { (r, k) };
                (out as u64) << 32 | inp as u64
            })
            .collect();
        pairs.par_sort_unstable();
        pairs
            .iter()
            .flat_map(|&p| [(p >> 32) as u32, p as u32])
            .collect()
    };
    let (by_row, by_col) = (sorted(false), sorted(true));
    // Freed before the smaller tree is built, which needs its own buffers.
    drop(lone);
    let tree = K2Tree::from_codes(tree.rows(), tree.cols(), &mut kept)?;
    Ok(Some(LoneCells {
        tree,
        by_row,
        by_col,
    }))
}

/// What [`lone_cells`]`(tree, min_path)` takes out, counted without building the tree left
/// or the lists (what a load under a memory budget asks first); `None` as `lone_cells`
/// gives `None`.
pub(crate) fn lone_count(tree: &K2Tree, min_path: u32) -> Option<LoneCount> {
    let (codes, paths) = coded_paths(tree, min_path)?;
    let kept: Vec<u64> = codes
        .par_iter()
        .zip(paths.par_iter())
        .filter(|&(_, &p)| p < min_path)
        .map(|(&c, _)| c)
        .collect();
    Some(LoneCount {
        cells: (codes.len() - kept.len()) as u64,
        kept: TreeStats::of_codes(tree.rows(), tree.cols(), &kept),
    })
}

/// The cells of `tree` as sorted Morton codes and the path each hangs below
/// ([`path_lengths`]), when some path has at least `min_path` nodes (`min_path` > 0).
fn coded_paths(tree: &K2Tree, min_path: u32) -> Option<(Vec<u64>, Vec<u32>)> {
    if min_path == 0 || tree.nnz() == 0 {
        return None;
    }
    let mut codes: Vec<u64> = tree
        .cells()
        .into_par_iter()
        .map(|(r, c)| morton::encode(r, c))
        .collect();
    codes.par_sort_unstable();
    let paths = path_lengths(&codes, tree.height());
    paths
        .par_iter()
        .any(|&p| p >= min_path)
        .then_some((codes, paths))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::gpu::TopLevel;
    use rand::rngs::StdRng;
    use rand::{Rng, SeedableRng};

    /// A cell that shares its leaf hangs below no path; a far one below the levels it
    /// holds alone.
    #[test]
    fn path_lengths_count_the_lone_levels() {
        // A 16x16 matrix (4 levels): two cells in one leaf, one far away.
        let mut codes = vec![
            morton::encode(0, 0),
            morton::encode(1, 1),
            morton::encode(15, 3),
        ];
        codes.sort_unstable();
        assert_eq!(path_lengths(&codes, 4), vec![0, 0, 3]);
    }

    /// The count without building the tree left matches what the split builds.
    #[test]
    fn lone_count_is_what_the_split_takes_out() {
        // Four cells together in one corner, one far away.
        let tree = K2Tree::from_edges(64, 64, vec![(0, 0), (0, 1), (1, 0), (1, 1), (60, 3)]);
        let count = lone_count(&tree, 3).unwrap();
        let split = lone_cells(&tree, 3).unwrap().unwrap();
        assert_eq!(
            (count.cells, count.list_bytes()),
            (split.count(), split.list_bytes())
        );
        assert_eq!(count.kept, split.tree.stats());
    }

    /// The list and the smaller tree hold the original cells exactly once each; every
    /// listed cell's path is long enough, and the smaller tree keeps the matrix's shape.
    #[test]
    fn split_keeps_every_cell_once() {
        let mut rng = StdRng::seed_from_u64(5);
        for (n, m) in [
            (7u32, 3usize),
            (1000, 2000),
            (1 << 16, 5000),
            (1 << 20, 20_000),
        ] {
            let mut edges: Vec<(u32, u32)> = (0..m)
                .map(|_| (rng.random_range(0..n), rng.random_range(0..n)))
                .collect();
            // A dense corner, so that some cells are never lone.
            edges.extend((0..16).map(|i| (i / 4, i % 4)));
            let tree = K2Tree::from_edges(n as u64, n as u64, edges);
            let all = tree.cells();
            let mut codes: Vec<u64> = all.iter().map(|&(r, c)| morton::encode(r, c)).collect();
            codes.sort_unstable();
            let paths = path_lengths(&codes, tree.height());
            for min_path in [1u32, 3, 6, 40] {
                let split = lone_cells(&tree, min_path).unwrap();
                let count = lone_count(&tree, min_path);
                let Some(split) = split else {
                    assert!(paths.iter().all(|&p| p < min_path), "{n} {m} {min_path}");
                    assert_eq!(count, None);
                    continue;
                };
                // Counted without the split: the same cells, the same tree left.
                let count = count.expect("a count where there is a split");
                assert_eq!(count.cells, split.count(), "{n} {m} {min_path}");
                assert_eq!(count.list_bytes(), split.list_bytes());
                assert_eq!(count.kept, split.tree.stats(), "{n} {m} {min_path}");
                for top_nodes in [1, 1 << 10, u64::MAX] {
                    assert_eq!(
                        TopLevel::for_stats(&count.kept, top_nodes),
                        TopLevel::for_stats(&split.tree.stats(), top_nodes)
                    );
                }
                assert_eq!(split.tree.rows(), tree.rows());
                assert_eq!(split.tree.height(), tree.height());
                let mut both: Vec<(u32, u32)> = split.tree.cells();
                both.extend(split.by_row.chunks(2).map(|p| (p[0], p[1])));
                both.sort_unstable();
                let mut expected = all.clone();
                expected.sort_unstable();
                assert_eq!(both, expected, "{n} {m} {min_path}");
                assert_eq!(split.count() + split.tree.nnz(), tree.nnz());
                assert!(split.tree.nnz() >= 16, "the dense corner stays in the tree");
                // Every listed cell was alone below `min_path` levels, and only those.
                let moved = paths.iter().filter(|&&p| p >= min_path).count() as u64;
                assert_eq!(split.count(), moved);
                // Each copy is sorted by its output and holds the same cells.
                assert!(split.by_row.chunks(2).is_sorted_by_key(|p| (p[0], p[1])));
                assert!(split.by_col.chunks(2).is_sorted_by_key(|p| (p[0], p[1])));
                let mut flipped: Vec<(u32, u32)> =
                    split.by_col.chunks(2).map(|p| (p[1], p[0])).collect();
                flipped.sort_unstable();
                let mut rows: Vec<(u32, u32)> =
                    split.by_row.chunks(2).map(|p| (p[0], p[1])).collect();
                rows.sort_unstable();
                assert_eq!(flipped, rows);
                for p in split.by_row.chunks(2) {
                    let i = codes.binary_search(&morton::encode(p[0], p[1])).unwrap();
                    assert!(paths[i] >= min_path);
                }
            }
        }
    }

    /// A single cell hangs below the whole height; two cells in one leaf share every
    /// node; none moves when the bound is 0.
    #[test]
    fn path_lengths_count_the_nodes_a_cell_holds_alone() {
        let one = K2Tree::from_edges(1 << 10, 1 << 10, vec![(3, 900)]);
        let split = lone_cells(&one, one.height() - 1).unwrap().unwrap();
        assert_eq!(split.by_row, vec![3, 900]);
        assert_eq!(split.by_col, vec![900, 3]);
        assert_eq!(split.tree.nnz(), 0);
        // Nothing left: an empty tree, counted as built.
        let count = lone_count(&one, one.height() - 1).unwrap();
        assert_eq!((count.cells, count.kept.nodes), (1, 0));
        assert_eq!(count.kept, split.tree.stats());
        assert!(lone_cells(&one, one.height()).unwrap().is_none());
        let pair = K2Tree::from_edges(1 << 10, 1 << 10, vec![(0, 0), (1, 1)]);
        assert!(lone_cells(&pair, 1).unwrap().is_none());
        assert!(lone_cells(&one, 0).unwrap().is_none());
    }
}
