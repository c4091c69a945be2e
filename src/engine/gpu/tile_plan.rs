//! Tile plans: the sequence of kernel launches of a product, planned once on the host.
//!
//! In level order the children of a contiguous range of nodes form a contiguous range,
//! so a level is cut into *tiles* of at most `M` nodes with at most `M` children, each
//! descended to the leaves before the next tile of its level is expanded (the paper's
//! §3.4, Figure 2b). One buffer of at most `M` codes per level below the host-expanded
//! top suffices, so the scratch is `O(M × depth)` and known before any product runs.

use crate::k2tree::K2Tree;

/// Where a step reads its nodes' Morton codes from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CodeSource {
    /// The host-expanded top level, resident with the matrix.
    Top,
    /// The cached frontier (codes of the last internal level), resident with the matrix.
    Frontier,
    /// The scratch buffer of this level.
    Scratch(u32),
}

/// One kernel launch of a product (plus its scan, when offsets come from a scan).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Step {
    /// Expand into the scratch of the level `levels` below, (last internal level) visit
    /// the leaves, or descend whole subtrees.
    pub kind: StepKind,
    /// Levels an expand step descends at once (leaf steps: the levels down to the leaves'
    /// parents, 1, or 2 for octet leaf steps; for subtree steps the levels below their
    /// nodes' down to the last internal one).
    pub levels: u32,
    /// Level of the step's nodes.
    pub level: u32,
    /// Global index of the first node.
    pub node0: u64,
    /// Nodes in the step.
    pub count: u64,
    /// Where the codes are read from.
    pub src: CodeSource,
    /// Position of `node0`'s code in `src`.
    pub src_off: u64,
    /// Global index of the first child of `node0` (expand steps of several levels: of its
    /// first descendant on the level they write).
    pub child0: u64,
    /// Children of the step's nodes (expand: codes written to the scratch of the level
    /// they write; descendants there for several levels).
    pub children: u64,
}

impl Step {
    /// Whether a product with scanned offsets ([`super::OffsetSource::Scan`]) scans this
    /// step's fan-outs: the scan gives first children, which only steps of one level use.
    /// Expand steps of several levels and octet leaf steps rank once per warp and level,
    /// and subtree steps scan their own buffers.
    pub(crate) fn takes_scan(&self) -> bool {
        self.kind != StepKind::Subtrees && self.levels == 1
    }
}

/// What a step's kernel does.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StepKind {
    /// Write the codes of the nodes' children (or descendants a few levels down) to the
    /// scratch of their level.
    Expand,
    /// Visit the leaves in place and update `y`.
    Leaves,
    /// Descend the nodes' subtrees to the leaves within one launch, each block with its
    /// levels' codes in shared memory, and update `y` (descents with
    /// [`Tuning::subtree_levels`](super::Tuning::subtree_levels)).
    Subtrees,
}

/// The steps of a product and the scratch they need.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TilePlan {
    /// Launch order: depth-first over tiles.
    pub steps: Vec<Step>,
    /// Codes each level's scratch buffer holds at most (index = level; 0 = no buffer).
    pub scratch_codes: Vec<u64>,
}

/// Nodes one scan tile covers (SCAN_THREADS × SCAN_ITEMS in `cuda/scan.cu`).
pub(crate) const SCAN_TILE_NODES: u64 = 256 * 8;

/// The smallest tile an automatic choice makes: below it the launches of a descent
/// multiply (cnr-2000's tree-only plan: 6 launches at 2^20, 85 at 2^15, 657 at 2^12).
pub(crate) const MIN_AUTO_TILE: u64 = 1 << 15;

/// Scratch an automatic choice always allows, however small the matrix: on the H200 a
/// launch of a descent costs ~2.5 µs, and capping cnr-2000's tree-only scratch at its
/// 1.8 MB matrix (tiles of 2^15, 85 launches instead of 6) made its product 5.7x slower
/// (0.243 vs 0.043 ms) for a working set of 0.19x cuSPARSE's instead of 0.52x. A few MB
/// are nothing on the device; launches are not.
pub(crate) const MIN_SCRATCH_BUDGET: u64 = 16 << 20;

/// Levels one expand step descends at most ([`TilePlan::descend`]).
pub(crate) const MAX_FUSED_LEVELS: u32 = 3;

/// An expand step goes on through a level only while that level has at most this many
/// nodes: a launch over a level this small is bound by its latency (a thread's chain of
/// loads, the launch), not by its work, so the two launches around it cost more than a
/// thread doing two or three levels of its own subtree (cnr-2000 tree-only: five expand
/// launches of 39 K-348 K nodes took as long as its 647 K-node leaf step).
pub(crate) const FUSED_LEVEL_NODES: u64 = 1 << 19;

/// An expand step also goes on through a larger level while the level below it holds at
/// most this many times the nodes of the step's own, so a thread writes at most a few
/// codes on average, and the levels in between are neither written nor read back. With 2
/// a 200M-edge web graph's descent wrote 74 M codes in 81 launches, and cnr-2000 × 64,
/// whose levels grow 1.7-1.9x each, took a launch per level (52 M codes, 96 launches).
/// With 8 they write 69.6 M and 27 M codes in 40 and 16 launches, and their tree-only
/// right products took 10 % and 15 % less time.
pub(crate) const FUSED_FANOUT: u64 = 8;

/// Levels one subtree step descends at most, its nodes' level included (`SUBTREE_LEVELS`
/// in `cuda/subtrees.cu`: a buffer per level in shared memory).
pub(crate) const MAX_SUBTREE_LEVELS: u32 = 8;

/// Nodes of a subtree step that one block of its kernel takes (`SUBTREE_ROOTS` in
/// `cuda/subtrees.cu`).
pub(crate) const SUBTREE_ROOTS: u64 = 64;

/// The largest tile: a scanned step's child offsets are u32 and a node has at most four
/// children, so a step holds at most 2^30 nodes.
pub(crate) const MAX_TILE: u64 = 1 << 30;

/// What ends a tree-only descent below its level-by-level expand steps.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Bottom {
    /// Leaf steps over the last internal level (the leaves' parents): a thread per node
    /// and its 4x4 block of cells.
    Blocks,
    /// Leaf steps over the level above the leaves' parents: a thread per node and its 8x8
    /// block of cells (`leaves_octets` in `cuda/octets.cu`), so the level of the leaves'
    /// parents, the widest internal one, needs neither scratch nor launches. A tree of
    /// fewer than three levels below its top ends in [`Bottom::Blocks`].
    Octets,
    /// Subtree steps over the `n`-th internal level from the bottom (see
    /// [`TilePlan::subtree_level`]; below 2, or on a tree too short: [`Bottom::Blocks`]).
    Subtrees(u32),
}

impl Bottom {
    /// The bottom a descent's options ask for: subtree steps when `subtree_levels` is at
    /// least 2, else octet leaf steps when `octets`, else block leaf steps.
    pub(crate) fn new(subtree_levels: u32, octets: bool) -> Bottom {
        match subtree_levels {
            s if s >= 2 => Bottom::Subtrees(s),
            _ if octets => Bottom::Octets,
            _ => Bottom::Blocks,
        }
    }

    /// The level of the leaf steps of a descent from `top` that ends here (the subtree
    /// level takes over above it, if any).
    fn leaf_level(self, tree: &K2Tree, top: u32) -> u32 {
        let h = tree.height();
        match self {
            Bottom::Octets if top + 3 <= h => h - 3,
            _ => h - 2,
        }
    }

    /// The subtree level of a descent from `top`, if any.
    fn roots(self, tree: &K2Tree, top: u32) -> Option<u32> {
        match self {
            Bottom::Subtrees(s) => TilePlan::subtree_level(tree, top, s),
            _ => None,
        }
    }
}

/// How a descent goes down: expand steps of up to `max_levels` levels, the level whose
/// nodes go to subtree steps, if any, and the level of its leaf steps.
#[derive(Clone, Copy, Debug)]
struct Shape {
    max_levels: u32,
    roots: Option<u32>,
    leaves: u32,
}

impl Shape {
    /// The shape of a descent from `top` with expand steps of up to `max_levels` levels
    /// ending in `bottom`.
    fn new(tree: &K2Tree, top: u32, max_levels: u32, bottom: Bottom) -> Shape {
        Shape {
            max_levels: max_levels.clamp(1, MAX_FUSED_LEVELS),
            roots: bottom.roots(tree, top),
            leaves: bottom.leaf_level(tree, top),
        }
    }
}

/// The tile sizes of one matrix's plans.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TileSizes {
    /// Tree-only descents from the host-expanded top level.
    pub descend: u64,
    /// Over the cached frontier with child offsets from the directory (no scratch).
    pub frontier: u64,
    /// Over the cached frontier with scanned offsets (4 bytes of scratch per node of the
    /// largest step).
    pub frontier_scan: u64,
}

impl TileSizes {
    /// The scratch an automatic choice of tile sizes (no
    /// [`Tuning::tile_nodes`](super::Tuning::tile_nodes)) always allows, however small the
    /// matrix.
    pub const MIN_SCRATCH_BUDGET: u64 = MIN_SCRATCH_BUDGET;

    /// The same size `m` for every plan (an explicit [`super::Tuning::tile_nodes`]).
    pub(crate) fn fixed(m: u64) -> TileSizes {
        let m = m.clamp(4, MAX_TILE);
        TileSizes {
            descend: m,
            frontier: m,
            frontier_scan: m,
        }
    }

    /// Sizes chosen from what each plan needs, for a tree whose descents start at level
    /// `top` and whose resident bytes are `tree_only` (signatures, directory, top codes)
    /// and `with_frontier` (the same plus the cached frontier):
    ///
    /// - over the frontier with the directory, no scratch depends on the tile: one launch
    ///   for the whole level (2^24-node tiles ran 14 % faster than 2^20 on a 200M-edge
    ///   graph: 4 launches instead of 53);
    /// - over the frontier with the scan, and tree-only descents, the scratch grows with
    ///   the tile (`O(M × depth)` codes): the largest power of two whose scratch stays
    ///   within the matrix's own resident bytes or [`MIN_SCRATCH_BUDGET`], whichever is
    ///   more, so a large matrix never needs more transient memory than it keeps resident
    ///   and a small one keeps its few launches.
    ///
    /// `max_levels` and `bottom`: the levels per expand step and what ends a descent (see
    /// [`TilePlan::descend`]); levels passed through by expand steps of several levels
    /// need no scratch, nor do those below subtree steps or octet leaf steps.
    pub(crate) fn auto(
        tree: &K2Tree,
        (top, max_levels, bottom): (u32, u32, Bottom),
        tree_only: u64,
        with_frontier: u64,
    ) -> TileSizes {
        Self::within(
            tree,
            (top, max_levels, bottom),
            tree_only.max(MIN_SCRATCH_BUDGET),
            with_frontier.max(MIN_SCRATCH_BUDGET),
        )
    }

    /// The rule of [`TileSizes::auto`] with explicit scratch budgets (bytes) for the
    /// descents and for scanned frontier products: the largest power-of-two tiles whose
    /// scratch fits, at least [`MIN_AUTO_TILE`]; one launch over the frontier with the
    /// directory.
    pub(crate) fn within(
        tree: &K2Tree,
        descent: (u32, u32, Bottom),
        descend: u64,
        frontier_scan: u64,
    ) -> TileSizes {
        let fits = |budget: u64, need: &dyn Fn(u64) -> u64| -> u64 {
            let mut m = MAX_TILE;
            while m > MIN_AUTO_TILE && need(m) > budget {
                m /= 2;
            }
            m
        };
        let last = if tree.nodes() == 0 {
            0
        } else {
            tree.level_nodes(tree.height() - 2)
        };
        TileSizes {
            descend: fits(descend, &|m| {
                TilePlan::descend_scratch_bound(tree, descent, m)
            }),
            frontier: last.clamp(MIN_AUTO_TILE, MAX_TILE),
            frontier_scan: fits(frontier_scan, &|m| 4 * m.min(last)),
        }
    }
}

impl TilePlan {
    /// A plan of no steps, with a (still unused) scratch slot per level of `tree`.
    fn empty(tree: &K2Tree) -> TilePlan {
        TilePlan {
            steps: Vec::new(),
            scratch_codes: vec![0; tree.height() as usize],
        }
    }

    /// The plan of a traversal from the host-expanded top level `top` down to the leaves,
    /// with tiles of at most `tile_nodes` nodes and children (descendants, for steps of
    /// several levels). An expand step descends up to `max_levels` levels at once (at
    /// most [`MAX_FUSED_LEVELS`]; 1: a launch per level) through levels of at most
    /// [`FUSED_LEVEL_NODES`] nodes.
    ///
    /// `bottom` says where the expand steps stop. With [`Bottom::Subtrees`] of `s` ≥ 2
    /// levels (at most [`MAX_SUBTREE_LEVELS`]) the last `s` internal levels are left to
    /// [`StepKind::Subtrees`] steps: the expand steps stop at the level
    /// [`TilePlan::subtree_level`] gives, whose tiles then each take one launch that
    /// descends their subtrees to the leaves with no scratch below. With
    /// [`Bottom::Octets`] they stop one level above the leaves' parents, whose tiles are
    /// leaf steps of two levels.
    pub(crate) fn descend(
        tree: &K2Tree,
        top: u32,
        tile_nodes: u64,
        (max_levels, bottom): (u32, Bottom),
    ) -> TilePlan {
        let mut plan = TilePlan::empty(tree);
        if tree.nodes() == 0 {
            return plan;
        }
        let m = tile_nodes.max(4);
        let shape = Shape::new(tree, top, max_levels, bottom);
        plan.range(
            tree,
            top,
            tree.level_start(top),
            tree.level_nodes(top),
            (CodeSource::Top, 0),
            m,
            shape,
        );
        plan
    }

    /// The level whose nodes a descent from `top` with `subtrees` subtree levels hands to
    /// subtree steps: the `subtrees`-th internal level from the bottom, or `top` when that
    /// is above it. `None` when there are none (`subtrees` below 2, or the tree has only
    /// the last internal level below `top`).
    pub(crate) fn subtree_level(tree: &K2Tree, top: u32, subtrees: u32) -> Option<u32> {
        let h = tree.height();
        if subtrees < 2 || tree.nodes() == 0 || top + 2 >= h {
            return None;
        }
        let s = subtrees.min(MAX_SUBTREE_LEVELS);
        Some((h - 1).saturating_sub(s).max(top))
    }

    /// Levels an expand step from level `d` descends with tiles of `m`: up to
    /// `max_levels`, down to level `last` at most (the last internal level, or the subtree
    /// level), through levels that are small (at most [`FUSED_LEVEL_NODES`] nodes, onto a
    /// level of at most `m` nodes, so that a step of several levels never cuts its level
    /// into more tiles than one level would) or thin (the level below holds at most
    /// [`FUSED_FANOUT`] times level `d`'s nodes, and a tile holds any node's descendants).
    fn fused_levels(tree: &K2Tree, d: u32, (max_levels, last): (u32, u32), m: u64) -> u32 {
        let mut k = 1;
        while k < max_levels && d + k < last {
            let (through, below) = (tree.level_nodes(d + k), tree.level_nodes(d + k + 1));
            let small = through <= FUSED_LEVEL_NODES && below <= m;
            // A node has at most 4^(k+1) descendants there, which a tile must hold.
            let thin = below <= FUSED_FANOUT * tree.level_nodes(d) && 4u64.pow(k + 1) <= m;
            if !(small || thin) {
                break;
            }
            k += 1;
        }
        k
    }

    /// The levels a descent from `top` in `shape` with tiles of `m` writes codes to: the
    /// expand steps from one level descend the same number of levels in every tile.
    fn written_levels(tree: &K2Tree, top: u32, shape: Shape, m: u64) -> Vec<u32> {
        let last = shape.roots.unwrap_or(shape.leaves);
        let mut levels = Vec::new();
        let mut d = top;
        while d < last {
            d += Self::fused_levels(tree, d, (shape.max_levels, last), m);
            levels.push(d);
        }
        levels
    }

    /// Bytes of scratch a [`TilePlan::descend`] plan from `top` with expand steps of up
    /// to `max_levels` levels ending in `bottom` with tiles of `m` needs at most: per level
    /// its expand steps write, a code buffer of at most `min(m, level)` codes (8 bytes),
    /// plus the scan's offsets of the largest step (4 bytes per node). An upper bound of
    /// `ScratchLayout`'s codes and offsets, computed without planning the tiles.
    pub(crate) fn descend_scratch_bound(
        tree: &K2Tree,
        (top, max_levels, bottom): (u32, u32, Bottom),
        m: u64,
    ) -> u64 {
        if tree.nodes() == 0 {
            return 0;
        }
        let shape = Shape::new(tree, top, max_levels, bottom);
        let last = shape.roots.unwrap_or(shape.leaves);
        let codes: u64 = Self::written_levels(tree, top, shape, m)
            .into_iter()
            .map(|d| tree.level_nodes(d).min(m))
            .sum();
        let widest = (top..=last).map(|d| tree.level_nodes(d)).max().unwrap_or(0);
        8 * codes + 4 * widest.min(m)
    }

    /// The plan of a product over the cached frontier: the last internal level in tiles
    /// of at most `tile_nodes` nodes, each one kernel over its leaves.
    pub(crate) fn frontier(tree: &K2Tree, tile_nodes: u64) -> TilePlan {
        let mut plan = TilePlan::empty(tree);
        if tree.nodes() == 0 {
            return plan;
        }
        let d = tree.height() - 2;
        let start = tree.level_start(d);
        plan.range(
            tree,
            d,
            start,
            tree.level_nodes(d),
            (CodeSource::Frontier, 0),
            tile_nodes.max(4),
            Shape {
                max_levels: 1,
                roots: None,
                leaves: d,
            },
        );
        plan
    }

    /// The plan of a leaf visit over `entries` block entries of the cached frontier, in
    /// tiles of at most `tile_nodes`: more entries than the level has nodes when they are
    /// laid out in [`super::RowWindows`] (the kernels skip its markers and pads). Block
    /// entries carry their blocks, so the steps need no node indices or children (their
    /// `child0` and `children` are 0).
    pub(crate) fn block_entries(tree: &K2Tree, entries: u64, tile_nodes: u64) -> TilePlan {
        let mut plan = TilePlan::empty(tree);
        if tree.nodes() == 0 {
            return plan;
        }
        let d = tree.height() - 2;
        let tile = tile_nodes.max(4);
        let mut a = 0;
        while a < entries {
            let count = tile.min(entries - a);
            plan.steps.push(Step {
                kind: StepKind::Leaves,
                levels: 1,
                level: d,
                node0: tree.level_start(d) + a,
                count,
                src: CodeSource::Frontier,
                src_off: a,
                child0: 0,
                children: 0,
            });
            a += count;
        }
        plan
    }

    /// Plans nodes `node0 .. node0 + count` of level `d`, whose codes are at `src[off0..]`,
    /// in the descent's `shape`.
    #[allow(clippy::too_many_arguments)]
    fn range(
        &mut self,
        tree: &K2Tree,
        d: u32,
        node0: u64,
        count: u64,
        (src, off0): (CodeSource, u64),
        m: u64,
        shape: Shape,
    ) {
        let h = tree.height();
        let end = node0 + count;
        let kind = if d == shape.leaves {
            StepKind::Leaves
        } else if shape.roots == Some(d) {
            StepKind::Subtrees
        } else {
            StepKind::Expand
        };
        let levels = match kind {
            // 2 for octet leaf steps (one level above the leaves' parents).
            StepKind::Leaves => h - 1 - d,
            // The levels below the nodes' own, down to the last internal level.
            StepKind::Subtrees => h - 2 - d,
            StepKind::Expand => {
                let last = shape.roots.unwrap_or(shape.leaves);
                Self::fused_levels(tree, d, (shape.max_levels, last), m)
            }
        };
        // Leaf and subtree steps record their nodes' first child and children; expand
        // steps those of the level they write.
        let down = if kind == StepKind::Expand { levels } else { 1 };
        let mut a = node0;
        while a < end {
            let fa = Self::descendants_of(tree, d, a, down);
            let b = if kind != StepKind::Expand {
                (a + m).min(end)
            } else {
                // The largest b <= a + m with at most m children in a..b (each node has
                // at most 4, so at least m / 4 nodes fit; a step of several levels
                // writes a level of at most m nodes).
                let (mut lo, mut hi) = (a + 1, (a + m).min(end));
                while lo < hi {
                    let mid = lo + (hi - lo).div_ceil(2);
                    if Self::descendants_of(tree, d, mid, levels) - fa <= m {
                        lo = mid;
                    } else {
                        hi = mid - 1;
                    }
                }
                lo
            };
            let fb = Self::descendants_of(tree, d, b, down);
            let step = Step {
                kind,
                levels,
                level: d,
                node0: a,
                count: b - a,
                src,
                src_off: off0 + (a - node0),
                child0: fa,
                children: fb - fa,
            };
            self.steps.push(step);
            if kind == StepKind::Expand {
                let below = d + levels;
                let next = &mut self.scratch_codes[below as usize];
                *next = (*next).max(fb - fa);
                let src = (CodeSource::Scratch(below), 0);
                self.range(tree, below, fa, fb - fa, src, m, shape);
            }
            a = b;
        }
    }

    /// First child of node `j` of level `d`, where `j` may be one past the level's end.
    fn children_of(tree: &K2Tree, d: u32, j: u64) -> u64 {
        if j == tree.level_start(d + 1) {
            tree.level_start(d + 2)
        } else {
            tree.first_child(j)
        }
    }

    /// First descendant `levels` levels below node `j` of level `d` (its first child for
    /// one level), where `j` may be one past the level's end.
    pub(crate) fn descendants_of(tree: &K2Tree, d: u32, j: u64, levels: u32) -> u64 {
        (0..levels).fold(j, |j, k| Self::children_of(tree, d + k, j))
    }

    /// Most nodes in one step that a scanned product scans ([`Step::takes_scan`]): the
    /// scan's offsets buffer. Fused expand steps and octet leaf steps, which rank instead,
    /// do not count.
    pub(crate) fn max_scanned_nodes(&self) -> u64 {
        let scanned = self.steps.iter().filter(|s| s.takes_scan());
        scanned.map(|s| s.count).max().unwrap_or(0)
    }

    /// Scan tiles of the largest scanned step (for the look-back status words).
    pub(crate) fn scan_tiles(&self) -> u64 {
        self.max_scanned_nodes().div_ceil(SCAN_TILE_NODES)
    }

    /// Launches of a product (scans not counted).
    pub fn launches(&self) -> usize {
        self.steps.len()
    }
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;

    /// Block entries are cut into tiles of the size asked for, the last one shorter.
    #[test]
    fn block_entry_steps_cut_the_entries_in_tiles() {
        let t = K2Tree::from_edges(64, 64, vec![(0, 0), (40, 9)]);
        let plan = TilePlan::block_entries(&t, 256, 100);
        let counts: Vec<u64> = plan.steps.iter().map(|s| s.count).collect();
        assert_eq!(counts, [100, 100, 56]);
        assert_eq!(plan.steps[2].src_off, 200);
    }

    /// Octet leaf steps end a descent one launch sooner, over the level above the leaves'
    /// parents.
    #[test]
    fn octet_steps_take_one_level_fewer() {
        let t = K2Tree::from_edges(64, 64, vec![(0, 0), (40, 9), (63, 63)]);
        let h = t.height();
        let blocks = TilePlan::descend(&t, 0, 1 << 20, (1, Bottom::Blocks));
        let octets = TilePlan::descend(&t, 0, 1 << 20, (1, Bottom::Octets));
        assert_eq!(octets.launches() + 1, blocks.launches());
        let last = octets.steps.last().unwrap();
        assert_eq!(
            (last.kind, last.level, last.levels),
            (StepKind::Leaves, h - 3, 2)
        );
    }

    /// A tree of `m` pseudo-random cells of an `n × n` matrix (duplicates merged).
    pub(in crate::engine::gpu) fn tree(n: u32, m: usize, seed: u64) -> K2Tree {
        let mut s = seed;
        let mut next = || {
            s = s
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            (s >> 33) as u32
        };
        let edges = (0..m).map(|_| (next() % n, next() % n)).collect();
        K2Tree::from_edges(n as u64, n as u64, edges)
    }

    /// Every node of every level a plan visits is planned exactly once, in order; no
    /// step exceeds the tile size; expand steps of several levels skip only small or thin
    /// levels, and with one level per step every level is visited.
    #[test]
    fn plans_cover_each_level_once_within_tiles() {
        for &(n, m) in &[(5u32, 1usize), (100, 300), (1000, 5000), (4096, 20000)] {
            let t = tree(n, m, n as u64);
            let h = t.height();
            for &tile in &[4u64, 16, 1000, 1 << 20] {
                for top in 0..=h - 2 {
                    let mut launches = Vec::new();
                    for (max_levels, bottom) in (1..=MAX_FUSED_LEVELS)
                        .flat_map(|l| [(l, Bottom::Blocks), (l, Bottom::Octets)])
                    {
                        let plan = TilePlan::descend(&t, top, tile, (max_levels, bottom));
                        let leaves = if bottom == Bottom::Octets && top + 3 <= h {
                            h - 3
                        } else {
                            h - 2
                        };
                        let mut next: Vec<u64> = (0..h).map(|d| t.level_start(d)).collect();
                        let mut visited = vec![false; h as usize];
                        for s in &plan.steps {
                            let d = s.level as usize;
                            visited[d] = true;
                            assert_eq!(s.node0, next[d], "level {d} out of order");
                            next[d] += s.count;
                            assert!(s.count <= tile.max(4));
                            if s.kind == StepKind::Expand {
                                assert!((1..=max_levels).contains(&s.levels));
                                assert!(s.children <= tile.max(4));
                                let below = (s.level + s.levels) as usize;
                                assert!(below <= leaves as usize);
                                assert!(s.children <= plan.scratch_codes[below]);
                                for k in 1..s.levels {
                                    let (through, below) = (
                                        t.level_nodes(s.level + k),
                                        t.level_nodes(s.level + k + 1),
                                    );
                                    assert!(
                                        through <= FUSED_LEVEL_NODES
                                            || below <= FUSED_FANOUT * t.level_nodes(s.level)
                                    );
                                }
                            } else {
                                assert_eq!((s.level, s.levels), (leaves, h - 1 - leaves));
                            }
                            // Leaf steps record their nodes' first child, expand steps
                            // the first node of the level they write.
                            let down = if s.kind == StepKind::Expand {
                                s.levels
                            } else {
                                1
                            };
                            let first = TilePlan::descendants_of(&t, s.level, s.node0, down);
                            assert_eq!(s.child0, first);
                        }
                        for d in top..=leaves {
                            let full = next[d as usize] == t.level_start(d + 1);
                            assert!(full || !visited[d as usize], "level {d} partly planned");
                            assert!(visited[d as usize] || max_levels > 1, "level {d} skipped");
                        }
                        assert!(!visited[leaves as usize + 1..].contains(&true));
                        assert!(visited[top as usize] && visited[leaves as usize]);
                        // The scan's offsets cover the largest one-level expand or leaf
                        // step: fused expand steps and octet leaf steps rank instead.
                        let one_level = plan.steps.iter().filter(|s| s.levels == 1);
                        let most = one_level.map(|s| s.count).max().unwrap_or(0);
                        assert_eq!(plan.max_scanned_nodes(), most);
                        let exact = 8 * plan.scratch_codes.iter().sum::<u64>()
                            + 4 * plan.max_scanned_nodes();
                        let bound =
                            TilePlan::descend_scratch_bound(&t, (top, max_levels, bottom), tile);
                        assert!(exact <= bound, "{n} {tile} {top} {bottom:?}");
                        launches.push((bottom, plan.launches()));
                    }
                    // More levels per launch never mean more launches where a tile holds
                    // a level (with tiles of a few nodes, a step through a level up to
                    // FUSED_FANOUT times larger cuts its own level into more tiles than
                    // two shorter steps would), and octet leaf steps take one level's
                    // launches fewer.
                    for b in [Bottom::Blocks, Bottom::Octets] {
                        let l: Vec<usize> =
                            launches.iter().filter(|x| x.0 == b).map(|x| x.1).collect();
                        let monotone = l.windows(2).all(|w| w[1] <= w[0]);
                        assert!(monotone || tile < 1 << 20, "{n} {tile} {top} {l:?}");
                    }
                    assert!(launches[1].1 <= launches[0].1);
                }
                let f = TilePlan::frontier(&t, tile);
                let covered: u64 = f.steps.iter().map(|s| s.count).sum();
                assert_eq!(covered, t.level_nodes(h - 2));
            }
        }
    }

    /// With subtree levels, expand steps stop at the subtree level, whose nodes subtree
    /// steps cover once each, in order and within tiles; nothing below is planned, the
    /// scratch stops there too, and the bound still holds.
    #[test]
    fn subtree_steps_cover_their_level_once() {
        for &(n, m) in &[
            (5u32, 1usize),
            (1000, 5000),
            (4096, 20000),
            (1 << 16, 300_000),
        ] {
            let t = tree(n, m, 7 + n as u64);
            let h = t.height();
            for &tile in &[4u64, 1000, 1 << 20] {
                for top in 0..=h - 2 {
                    for subtrees in [0, 1, 2, 3, 5, MAX_SUBTREE_LEVELS, 20] {
                        for max_levels in [1, MAX_FUSED_LEVELS] {
                            let bottom = Bottom::Subtrees(subtrees);
                            let plan = TilePlan::descend(&t, top, tile, (max_levels, bottom));
                            let roots = TilePlan::subtree_level(&t, top, subtrees);
                            let Some(l) = roots else {
                                assert!(plan.steps.iter().all(|s| s.kind != StepKind::Subtrees));
                                continue;
                            };
                            assert!(l >= top && l + 2 < h);
                            assert!(h - 1 - l <= MAX_SUBTREE_LEVELS.min(subtrees));
                            let mut next = t.level_start(l);
                            for s in &plan.steps {
                                assert!(s.level <= l, "a step below the subtree level");
                                assert_ne!(s.kind, StepKind::Leaves);
                                if s.kind == StepKind::Subtrees {
                                    assert_eq!(s.level, l);
                                    assert_eq!(s.node0, next);
                                    assert!(s.count <= tile.max(4));
                                    assert_eq!(s.levels, h - 2 - l);
                                    assert_eq!(
                                        s.child0,
                                        TilePlan::descendants_of(&t, l, s.node0, 1)
                                    );
                                    next += s.count;
                                } else {
                                    assert!(s.level + s.levels <= l);
                                }
                            }
                            assert_eq!(next, t.level_start(l + 1), "level {l} not covered");
                            assert!(plan.scratch_codes[l as usize + 1..].iter().all(|&c| c == 0));
                            let exact = 8 * plan.scratch_codes.iter().sum::<u64>()
                                + 4 * plan.max_scanned_nodes();
                            assert!(
                                exact
                                    <= TilePlan::descend_scratch_bound(
                                        &t,
                                        (top, max_levels, bottom),
                                        tile
                                    )
                            );
                        }
                    }
                }
            }
        }
    }

    /// The bound holds for real plans, grows with the tile, and the automatic sizes keep
    /// the scratch within the budget whenever a tile of at least `MIN_AUTO_TILE` can.
    #[test]
    fn automatic_tiles_respect_the_scratch_budget() {
        let t = tree(1 << 16, 300_000, 5);
        let h = t.height();
        let top = 3;
        let mut last = 0;
        for m in [4u64, 64, 1 << 10, 1 << 14, 1 << 18] {
            let p = TilePlan::descend(&t, top, m, (MAX_FUSED_LEVELS, Bottom::Blocks));
            let exact = 8 * p.scratch_codes.iter().sum::<u64>() + 4 * p.max_scanned_nodes();
            let bound =
                TilePlan::descend_scratch_bound(&t, (top, MAX_FUSED_LEVELS, Bottom::Blocks), m);
            assert!(exact <= bound, "M = {m}: {exact} > {bound}");
            assert!(bound >= last);
            last = bound;
        }
        for budget in [1u64, 100_000, 1 << 20, 1 << 22, 1 << 40] {
            let s = TileSizes::within(&t, (top, MAX_FUSED_LEVELS, Bottom::Blocks), budget, budget);
            assert!(s.descend.is_power_of_two());
            assert!((MIN_AUTO_TILE..=MAX_TILE).contains(&s.descend));
            let b = TilePlan::descend_scratch_bound(
                &t,
                (top, MAX_FUSED_LEVELS, Bottom::Blocks),
                s.descend,
            );
            assert!(b <= budget || s.descend == MIN_AUTO_TILE, "{budget}: {s:?}");
            // The next size up would not have fitted.
            if s.descend < MAX_TILE {
                assert!(
                    TilePlan::descend_scratch_bound(
                        &t,
                        (top, MAX_FUSED_LEVELS, Bottom::Blocks),
                        2 * s.descend
                    ) > budget
                );
            }
            assert!(
                4 * s.frontier_scan.min(t.level_nodes(h - 2)) <= budget
                    || s.frontier_scan == MIN_AUTO_TILE
            );
            // One launch over the frontier with the directory.
            assert_eq!(TilePlan::frontier(&t, s.frontier).launches(), 1);
        }
        // Below the floor the automatic sizes are those of the floor.
        assert_eq!(
            TileSizes::auto(&t, (top, MAX_FUSED_LEVELS, Bottom::Blocks), 1, 1),
            TileSizes::within(
                &t,
                (top, MAX_FUSED_LEVELS, Bottom::Blocks),
                MIN_SCRATCH_BUDGET,
                MIN_SCRATCH_BUDGET
            )
        );
        assert_eq!(
            TileSizes::auto(
                &t,
                (top, MAX_FUSED_LEVELS, Bottom::Blocks),
                1 << 40,
                1 << 40
            ),
            TileSizes::within(
                &t,
                (top, MAX_FUSED_LEVELS, Bottom::Blocks),
                1 << 40,
                1 << 40
            )
        );
        assert_eq!(TileSizes::fixed(1 << 40).descend, MAX_TILE);
        assert_eq!(TileSizes::fixed(0).frontier, 4);
    }

    /// Sparse cells of a large matrix: below the first levels their paths hardly branch,
    /// so expand steps fuse through levels larger than the tile (which the small-level
    /// rule alone would not allow), those levels get no scratch, and the bound counts
    /// only the levels written.
    #[test]
    fn thin_levels_fuse() {
        let t = tree(1 << 16, 200, 3);
        let (top, tile) = (2, 64u64);
        let plan = TilePlan::descend(&t, top, tile, (MAX_FUSED_LEVELS, Bottom::Octets));
        let thin: Vec<&Step> = plan
            .steps
            .iter()
            .filter(|s| s.kind == StepKind::Expand && s.levels > 1)
            .filter(|s| (1..s.levels).any(|k| t.level_nodes(s.level + k + 1) > tile))
            .collect();
        assert!(!thin.is_empty(), "no step fused through a thin level");
        for s in thin {
            for k in 1..s.levels {
                assert_eq!(plan.scratch_codes[(s.level + k) as usize], 0);
            }
        }
        let one = TilePlan::descend(&t, top, tile, (1, Bottom::Octets));
        assert!(plan.launches() < one.launches());
        let bound = |l| TilePlan::descend_scratch_bound(&t, (top, l, Bottom::Octets), tile);
        assert!(bound(MAX_FUSED_LEVELS) < bound(1));
    }

    #[test]
    fn empty_tree_has_no_steps() {
        let t = K2Tree::from_edges(10, 10, vec![]);
        assert!(
            TilePlan::descend(&t, 0, 16, (MAX_FUSED_LEVELS, Bottom::Blocks))
                .steps
                .is_empty()
        );
        assert!(
            TilePlan::descend(&t, 0, 16, (1, Bottom::Subtrees(MAX_SUBTREE_LEVELS)))
                .steps
                .is_empty()
        );
        assert!(TilePlan::frontier(&t, 16).steps.is_empty());
    }
}
