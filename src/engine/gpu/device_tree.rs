//! A k²-tree resident on the device: its signatures, sampled directory, host-expanded top
//! level, optional cached frontier (in a [`FrontierLayout`]), and the tile plans of its
//! products.

use std::sync::Arc;

use cudarc::driver::{CudaSlice, DevicePtr};

use super::context::GpuContext;
use super::frontier::{
    block_entries, row_windows, sort_entries, FrontierLayout, MAX_WINDOW_GROWTH,
};
use super::lone_cells::lone_cells;
use super::row_groups::{row_groups, RowGroups};
use super::tile_plan::{Bottom, TilePlan, TileSizes};
use super::{GpuOptions, OffsetSource, Tuning};
use crate::engine::{Direction, EngineError, MatrixConfig, Result};
use crate::k2tree::{K2Tree, TreeStats};

/// A matrix loaded into the [`super::GpuEngine`]. Device memory is freed on drop.
pub struct DeviceTree {
    /// The matrix (host walks and shapes read it; a tree-only matrix with lone cells
    /// descends a smaller tree on the device).
    pub(super) tree: Arc<K2Tree>,
    pub(super) config: MatrixConfig,
    pub(super) nibbles: CudaSlice<u64>,
    pub(super) ranks: CudaSlice<u64>,
    pub(super) sample_log2: u32,
    /// The level tree-only products start from ([`TopLevel::for_stats`]).
    pub(super) top: TopLevel,
    /// Its codes, expanded on the host (`None` with a cached frontier, whose products
    /// never descend, and for an empty tree).
    pub(super) top_codes: Option<TopCodes>,
    pub(super) frontier: Option<CudaSlice<u64>>,
    /// The column-sorted copy of a [`FrontierLayout::Both`] frontier (`frontier` is then
    /// row-sorted).
    pub(super) frontier_by_col: Option<CudaSlice<u64>>,
    /// What the frontier's entries are (`Codes` when there is no frontier).
    pub(super) layout: FrontierLayout,
    /// A `RowBlocks` frontier laid out in row windows (`Tuning::row_windows`, when
    /// its markers and pads stay within `1 /` [`MAX_WINDOW_GROWTH`] of the entries).
    pub(super) windows: Option<DeviceWindows>,
    /// The same entries in row groups (`Tuning::row_groups`).
    pub(super) groups: Option<DeviceGroups>,
    /// The cells taken out of the descended tree ([`super::LoneCells`],
    /// `Tuning::lone_paths`; tree-only matrices only), applied after each descent.
    pub(super) lone: Option<DeviceLone>,
    /// Plan from the top level (tree-only products).
    pub(super) descend: TilePlan,
    /// Plans over the cached frontier (`CachedFrontier` only): with child offsets from
    /// the directory, then from the scan (whose offsets scratch grows with the tile).
    pub(super) over_frontier: Option<(TilePlan, TilePlan)>,
    /// The tile sizes of the plans.
    pub(super) tiles: TileSizes,
    /// Bytes of the resident arrays.
    pub(super) bytes: u64,
}

/// The level a tree-only descent starts from, expanded on the host at load so that the
/// device skips the launches of the levels above it (each an expand of few nodes, bound by
/// its launch and one chain of loads, not by work).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TopLevel {
    /// The level (0: the root).
    pub level: u32,
    /// Whether its Morton codes are kept in 32 bits: they are `2 · level` bits long, and
    /// only expand steps read them (the level lies above the leaves' parents).
    pub narrow: bool,
}

/// Levels of at most this many nodes may always be the top level, whatever their codes
/// take (small trees keep their few launches).
pub(crate) const SMALL_TOP_NODES: u64 = 1 << 16;

impl TopLevel {
    /// The top level of a tree of sizes `s` (those of a built tree, or of one not yet
    /// built, [`TreeStats::of_codes`]): the deepest level above the leaves (at most
    /// `h − 2`) with at most `top_nodes` nodes whose codes take no more bytes than the
    /// tree's own signatures and directory, or with at most [`SMALL_TOP_NODES`] nodes; the
    /// root's (level 0) when none is. The byte bound keeps a tree-only matrix within twice
    /// its tree: on cnr-2000 the default picks level 16 (348 K nodes, 1.39 MB of 32-bit
    /// codes beside a 1.46 MB tree), four expand launches fewer than level 12 and the
    /// level of its octet leaf steps ([`super::tile_plan::Bottom::Octets`]).
    pub(crate) fn for_stats(s: &TreeStats, top_nodes: u64) -> TopLevel {
        if s.nodes == 0 {
            return TopLevel {
                level: 0,
                narrow: false,
            };
        }
        let own = s.tree_bytes + s.directory_bytes;
        (0..=s.levels - 2)
            .rev()
            .map(|level| Self::at(s.levels, level))
            .find(|t| {
                let nodes = s.level_nodes[t.level as usize];
                nodes <= top_nodes && (nodes <= SMALL_TOP_NODES || t.bytes(s) <= own)
            })
            .unwrap_or(Self::at(s.levels, 0))
    }

    /// Level `level` of a tree of `height` levels as a top level.
    fn at(height: u32, level: u32) -> TopLevel {
        TopLevel {
            level,
            narrow: level + 2 < height && 2 * level <= 32,
        }
    }

    /// Bytes of its codes on the device, for a tree of sizes `s`.
    pub(crate) fn bytes(self, s: &TreeStats) -> u64 {
        if s.nodes == 0 {
            return 0;
        }
        s.level_nodes[self.level as usize] * if self.narrow { 4 } else { 8 }
    }
}

/// The codes of a [`TopLevel`] on the device.
pub(super) enum TopCodes {
    Wide(CudaSlice<u64>),
    Narrow(CudaSlice<u32>),
}

/// Block rows cut into parts that several warps OR into: cleared before each product
/// (`clear_block_rows`) by the row windows and the row groups alike.
pub(super) struct ClearedRows {
    /// The rows (`None`: none).
    pub(super) rows: Option<CudaSlice<u32>>,
    /// How many there are.
    pub(super) count: u64,
}

impl ClearedRows {
    /// Uploads `rows` (none uploaded when empty), `what` naming them in errors.
    fn upload(gpu: &GpuContext, rows: &[u32], what: &str) -> Result<ClearedRows> {
        Ok(ClearedRows {
            rows: if rows.is_empty() {
                None
            } else {
                Some(gpu.upload(rows, what)?)
            },
            count: rows.len() as u64,
        })
    }
}

/// What the device keeps of a frontier laid out in row windows besides its entries.
pub(super) struct DeviceWindows {
    /// Windows of the frontier.
    pub(super) windows: u64,
    /// The block rows whose runs are cut into shared parts.
    pub(super) shared: ClearedRows,
}

/// The lone cells of a tree-only matrix on the device.
pub(super) struct DeviceLone {
    /// `(row, col)` pairs sorted by row (right products).
    pub(super) by_row: CudaSlice<u32>,
    /// `(col, row)` pairs sorted by column (left products).
    pub(super) by_col: CudaSlice<u32>,
    /// How many cells.
    pub(super) count: u64,
}

/// What the device keeps of a frontier's row groups.
pub(super) struct DeviceGroups {
    /// The block column of each slot's entry (`RowGroups::cols`).
    pub(super) cols: CudaSlice<u32>,
    /// The bitmap of each slot's entry (`RowGroups::cells`).
    pub(super) cells: CudaSlice<u16>,
    /// Four words per warp (`RowGroups::desc`).
    pub(super) desc: CudaSlice<u32>,
    /// Warps of the layout.
    pub(super) warps: u32,
    /// Each group's row (`RowGroups::rows`).
    pub(super) rows: CudaSlice<u32>,
    /// The rows cut into pieces.
    pub(super) shared: ClearedRows,
    /// Device bytes of the layout ([`RowGroups::bytes`](super::RowGroups::bytes), as the
    /// engine's `load_bytes` predicts them).
    pub(super) bytes: u64,
}

impl DeviceTree {
    /// Uploads `tree` with `config`; the options' `top_nodes` bound the host-expanded top
    /// level, `tile_nodes` the tiles (`None`: chosen per plan, [`TileSizes::auto`]),
    /// `lone_paths` the lone cells of a tree-only matrix and `frontier` (with
    /// `leaf_kernel`) the frontier's layout.
    pub(super) fn load(
        gpu: &GpuContext,
        tree: &Arc<K2Tree>,
        config: MatrixConfig,
        options: &GpuOptions,
    ) -> Result<DeviceTree> {
        let Tuning {
            top_nodes,
            tile_nodes,
            ..
        } = options.tuning;
        let split = lone_cells(tree, Self::lone_paths(config, options))
            .map_err(|e| EngineError::Unsupported(format!("taking out lone cells: {e}")))?;
        let lone = match &split {
            Some(l) => Some(DeviceLone {
                by_row: gpu.upload(&l.by_row, "lone cells by row")?,
                by_col: gpu.upload(&l.by_col, "lone cells by column")?,
                count: l.count(),
            }),
            None => None,
        };
        // The tree the device descends: without the lone cells, if any.
        let tree_arc = tree;
        let tree: &K2Tree = split.as_ref().map_or(tree_arc.as_ref(), |l| &l.tree);
        let words = tree.nodes().div_ceil(16) as usize;
        let nibbles = gpu.upload(&tree.nibbles()[..words], "tree signatures")?;
        let dir = tree.directory();
        let ranks = gpu.upload(&dir.ranks[..], "sampled directory")?;
        let stats = tree.stats();
        let top = TopLevel::for_stats(&stats, top_nodes);
        let top_codes = if config == MatrixConfig::TreeOnly && tree.nodes() > 0 {
            let codes = tree.level_codes(top.level);
            Some(if top.narrow {
                let narrow: Vec<u32> = codes.iter().map(|&c| c as u32).collect();
                TopCodes::Narrow(gpu.upload(&narrow, "top-level codes")?)
            } else {
                TopCodes::Wide(gpu.upload(&codes, "top-level codes")?)
            })
        } else {
            None
        };
        let layout = match config {
            MatrixConfig::CachedFrontier => {
                options.frontier.for_tree(tree, options.tuning.leaf_kernel)
            }
            MatrixConfig::TreeOnly => FrontierLayout::Codes,
        };
        let mut windows = None;
        let mut groups = None;
        // `frontier_words`: the words uploaded from the host into the frontier's copies.
        let (frontier, frontier_by_col, frontier_words) = match (config, layout) {
            (MatrixConfig::TreeOnly, _) => (None, None, 0),
            (_, FrontierLayout::Codes) => {
                let codes = &tree.frontier()[..];
                (
                    Some(gpu.upload(codes, "cached frontier")?),
                    None,
                    codes.len(),
                )
            }
            (_, l) => {
                let mut entries = block_entries(tree, l);
                let block_rows = tree.rows().div_ceil(4) as u32;
                if l == FrontierLayout::RowBlocks && options.tuning.row_groups {
                    groups = row_groups(&entries, block_rows, options.tuning.row_group_iterations)
                        .map(|g| Self::upload_groups(gpu, &g))
                        .transpose()?;
                }
                let laid = Self::window_allowance(options, l, entries.len())
                    .and_then(|max_extra| row_windows(&entries, block_rows, max_extra));
                let (frontier, entry_words) = match laid {
                    Some(laid) => {
                        let frontier =
                            gpu.upload(&laid.entries, "cached frontier (row windows)")?;
                        windows = Some(DeviceWindows {
                            windows: laid.windows(),
                            shared: ClearedRows::upload(
                                gpu,
                                &laid.shared_rows,
                                "shared rows of the row windows",
                            )?,
                        });
                        (frontier, laid.entries.len())
                    }
                    None => (
                        gpu.upload(&entries, "cached frontier (blocks)")?,
                        entries.len(),
                    ),
                };
                // `Both`: the column-sorted copy from the same entries, re-sorted.
                let (by_col, by_col_words) = if l == FrontierLayout::Both {
                    sort_entries(&mut entries, FrontierLayout::ColBlocks);
                    let copy = gpu.upload(&entries, "cached frontier (column-sorted blocks)")?;
                    (Some(copy), entries.len())
                } else {
                    (None, 0)
                };
                (Some(frontier), by_col, entry_words + by_col_words)
            }
        };
        // The bytes of the host's data, as `load_bytes` counts them: not the word an empty
        // buffer is given on the device (`GpuContext::upload`), which an empty tree, or one
        // whose cells are all lone, would otherwise add.
        let tree_only = 8 * (words + dir.ranks.len()) as u64
            + top_codes.as_ref().map_or(0, |_| top.bytes(&stats))
            + split.as_ref().map_or(0, |l| l.list_bytes());
        let bytes = tree_only
            + 8 * frontier_words as u64
            + 4 * windows.as_ref().map_or(0, |w| w.shared.count)
            + groups.as_ref().map_or(0, |g: &DeviceGroups| g.bytes);
        // Octet leaf steps run their own kernel, so a variant measured as a baseline
        // (`cells`, `wrank`, `wagg`, `window`) keeps its leaf steps over the leaves' parents.
        let octets = options.tuning.octets && options.tuning.leaf_kernel.ends_in_octets();
        let bottom = Bottom::new(options.tuning.subtree_levels, octets);
        let tiles = match tile_nodes {
            Some(m) => TileSizes::fixed(m),
            None => TileSizes::auto(
                tree,
                (top.level, options.tuning.fused_levels, bottom),
                tree_only,
                bytes,
            ),
        };
        let descend = TilePlan::descend(
            tree,
            top.level,
            tiles.descend,
            (options.tuning.fused_levels, bottom),
        );
        let over_frontier = (config == MatrixConfig::CachedFrontier).then(|| match &windows {
            // Block entries need no offsets: one plan serves both sources.
            Some(w) => {
                let entries = w.windows * super::frontier::WINDOW_ENTRIES as u64;
                // Automatic tiles: one launch over all of them, pads included.
                let tile = tile_nodes.map_or(entries, |_| tiles.frontier);
                let plan = TilePlan::block_entries(tree, entries, tile);
                (plan.clone(), plan)
            }
            None => (
                TilePlan::frontier(tree, tiles.frontier),
                TilePlan::frontier(tree, tiles.frontier_scan),
            ),
        });
        Ok(DeviceTree {
            tree: tree_arc.clone(),
            config,
            nibbles,
            ranks,
            sample_log2: dir.sample.trailing_zeros(),
            top,
            top_codes,
            frontier,
            frontier_by_col,
            layout,
            windows,
            groups,
            lone,
            descend,
            over_frontier,
            tiles,
            bytes,
        })
    }

    /// The `min_path` of the lone cells a matrix loaded with `config` and `options` takes
    /// out of the tree it descends (tree-only matrices only; 0: none): the one rule of
    /// both [`DeviceTree::load`] and the engine's `load_bytes`.
    pub(super) fn lone_paths(config: MatrixConfig, options: &GpuOptions) -> u32 {
        match config {
            MatrixConfig::TreeOnly => options.tuning.lone_paths,
            MatrixConfig::CachedFrontier => 0,
        }
    }

    /// Uploads a frontier's row groups (`GpuContext::upload` gives an empty buffer one
    /// zeroed element, so the kernel's arguments are never null).
    fn upload_groups(gpu: &GpuContext, g: &RowGroups) -> Result<DeviceGroups> {
        Ok(DeviceGroups {
            cols: gpu.upload(&g.cols, "cached frontier (row groups' columns)")?,
            cells: gpu.upload(&g.cells, "cached frontier (row groups' bitmaps)")?,
            desc: gpu.upload(g.desc.as_flattened(), "row groups' warps")?,
            warps: g.desc.len() as u32,
            rows: gpu.upload(&g.rows, "row groups' rows")?,
            shared: ClearedRows::upload(gpu, &g.shared_rows, "row groups' cut rows")?,
            bytes: g.bytes(),
        })
    }

    /// The markers and pads a frontier of `entries` block entries in `layout` may take to
    /// be laid out in row windows under `options` (`1 /`
    /// [`MAX_WINDOW_GROWTH`] of them), or `None` when it is not to be: the one rule of both
    /// [`DeviceTree::load`] and the engine's `load_bytes`.
    pub(super) fn window_allowance(
        options: &GpuOptions,
        layout: FrontierLayout,
        entries: usize,
    ) -> Option<usize> {
        (layout == FrontierLayout::RowBlocks && options.tuning.row_windows)
            .then_some(entries / MAX_WINDOW_GROWTH)
    }

    /// The host tree.
    pub fn tree(&self) -> &Arc<K2Tree> {
        &self.tree
    }

    /// The configuration it was loaded with.
    pub fn config(&self) -> MatrixConfig {
        self.config
    }

    /// The level expanded on the host, from which tree-only products start.
    pub fn top_level(&self) -> TopLevel {
        self.top
    }

    /// The layout of its cached frontier (`Codes` when it has none); a product in
    /// direction `dir` reads [`FrontierLayout::for_dir`] of it.
    pub fn frontier_layout(&self) -> FrontierLayout {
        self.layout
    }

    /// Whether its `RowBlocks` frontier is laid out in row windows, whose bit-packed
    /// right products `y = A x` store `y` (no clear, no atomics).
    pub fn has_row_windows(&self) -> bool {
        self.windows.is_some()
    }

    /// How many lone cells it keeps beside the tree it descends (`Tuning::lone_paths`).
    pub fn lone_cells(&self) -> u64 {
        self.lone.as_ref().map_or(0, |l| l.count)
    }

    /// Whether its `RowBlocks` frontier is also kept in row groups,
    /// which bit-packed right products `y = A x` then read.
    pub fn has_row_groups(&self) -> bool {
        self.groups.is_some()
    }

    /// The offset source a product asked to use `source` gets: the directory's plan over
    /// block entries, which need no child offsets at all (so no scan).
    pub(crate) fn offsets(&self, source: OffsetSource) -> OffsetSource {
        if self.layout.packed() {
            OffsetSource::Directory
        } else {
            source
        }
    }

    /// The plan a dense product with child offsets from `source` follows: over the cached
    /// frontier when there is one.
    pub fn dense_plan(&self, source: OffsetSource) -> &TilePlan {
        match (&self.over_frontier, self.offsets(source)) {
            (Some((dir, _)), OffsetSource::Directory) => dir,
            (Some((_, scan)), OffsetSource::Scan) => scan,
            (None, _) => &self.descend,
        }
    }

    /// The tile sizes its plans were made with.
    pub fn tile_sizes(&self) -> TileSizes {
        self.tiles
    }

    /// The plan a masked product follows: the dense plan, whose kernels skip every node
    /// whose input range meets no active input. Tree-only, the descent from the top also
    /// prunes whole subtrees (children of a pruned node are never expanded); with the
    /// cached frontier one check per last-internal-level node is cheaper than a descent
    /// that launches a thread per internal node anyway.
    pub(crate) fn masked_plan(&self, source: OffsetSource) -> &TilePlan {
        self.dense_plan(source)
    }

    /// Bytes held on the device.
    pub fn bytes(&self) -> u64 {
        self.bytes
    }

    /// Raw device addresses `(signatures, directory, top codes or 0, frontier or 0)`, the
    /// frontier being the copy a product in direction `dir` reads.
    pub(super) fn pointers(&self, gpu: &GpuContext, dir: Direction) -> (u64, u64, u64, u64) {
        let s = gpu.stream();
        let (nib, _a) = self.nibbles.device_ptr(s);
        let (ranks, _b) = self.ranks.device_ptr(s);
        let top = match &self.top_codes {
            Some(TopCodes::Wide(c)) => c.device_ptr(s).0,
            Some(TopCodes::Narrow(c)) => c.device_ptr(s).0,
            None => 0,
        };
        let copy = match dir {
            Direction::Left if self.frontier_by_col.is_some() => &self.frontier_by_col,
            _ => &self.frontier,
        };
        let front = copy.as_ref().map_or(0, |f| f.device_ptr(s).0);
        (nib, ranks, top, front)
    }
}

#[cfg(test)]
mod tests {
    use super::super::tile_plan::tests::tree;
    use super::*;

    /// The top level is the deepest one within both bounds (nodes, and bytes unless
    /// small), above the leaves; its codes are narrow exactly when expand steps read them
    /// and they fit in 32 bits.
    #[test]
    fn top_level_keeps_within_its_bounds() {
        for (n, m) in [
            (5u32, 1usize),
            (1000, 5000),
            (1 << 20, 400_000),
            (1 << 24, 300_000),
        ] {
            let t = tree(n, m, 7);
            let h = t.height();
            let s = t.stats();
            let own = s.tree_bytes + s.directory_bytes;
            for top_nodes in [1, 4, 1 << 10, 1 << 16, 1 << 18, u64::MAX] {
                let top = TopLevel::for_stats(&t.stats(), top_nodes);
                let fits = |d: u32| {
                    let at = TopLevel::at(h, d);
                    let nodes = t.level_nodes(d);
                    nodes <= top_nodes && (nodes <= SMALL_TOP_NODES || at.bytes(&s) <= own)
                };
                assert!(top.level <= h - 2);
                assert!(top.level == 0 || fits(top.level), "{n} {m} {top_nodes}");
                assert!(
                    (top.level + 1..=h - 2).all(|d| !fits(d)),
                    "{n} {m} {top_nodes}"
                );
                assert_eq!(top.narrow, top.level + 2 < h && top.level <= 16);
                let width = if top.narrow { 4 } else { 8 };
                assert_eq!(top.bytes(&s), width * t.level_nodes(top.level));
            }
        }
        let empty = K2Tree::from_edges(4, 4, vec![]);
        assert_eq!(
            TopLevel::for_stats(&empty.stats(), 1).bytes(&empty.stats()),
            0
        );
    }
}
