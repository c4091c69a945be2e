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
    /// Expand into the next level's scratch, or (last internal level) visit the leaves.
    pub kind: StepKind,
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
    /// Global index of the first child of `node0`.
    pub child0: u64,
    /// Children of the step's nodes (expand: codes written to the next level's scratch).
    pub children: u64,
}

/// What a step's kernel does.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StepKind {
    /// Write the children's codes to the next level's scratch.
    Expand,
    /// Visit the leaves in place and update `y`.
    Leaves,
}

/// The steps of a product and the scratch they need.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TilePlan {
    /// Launch order: depth-first over tiles.
    pub steps: Vec<Step>,
    /// Codes each level's scratch buffer holds at most (index = level; 0 = no buffer).
    pub scratch_codes: Vec<u64>,
    /// Most nodes in one step (the scan's offsets buffer).
    pub max_step_nodes: u64,
}

/// Nodes one scan tile covers (SCAN_THREADS × SCAN_ITEMS in `cuda/scan.cu`).
pub const SCAN_TILE_NODES: u64 = 256 * 8;

impl TilePlan {
    /// The plan of a traversal from the host-expanded top level `top` down to the leaves,
    /// with tiles of at most `tile_nodes` nodes and children.
    pub fn descend(tree: &K2Tree, top: u32, tile_nodes: u64) -> TilePlan {
        let mut plan = TilePlan {
            steps: Vec::new(),
            scratch_codes: vec![0; tree.height() as usize],
            max_step_nodes: 0,
        };
        if tree.nodes() == 0 {
            return plan;
        }
        let m = tile_nodes.max(4);
        plan.range(
            tree,
            top,
            tree.level_start(top),
            tree.level_nodes(top),
            CodeSource::Top,
            0,
            m,
        );
        plan
    }

    /// The plan of a product over the cached frontier: the last internal level in tiles
    /// of at most `tile_nodes` nodes, each one kernel over its leaves.
    pub fn frontier(tree: &K2Tree, tile_nodes: u64) -> TilePlan {
        let mut plan = TilePlan {
            steps: Vec::new(),
            scratch_codes: vec![0; tree.height() as usize],
            max_step_nodes: 0,
        };
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
            CodeSource::Frontier,
            0,
            tile_nodes.max(4),
        );
        plan
    }

    /// Plans nodes `node0 .. node0 + count` of level `d`, whose codes are at `src[off0..]`.
    #[allow(clippy::too_many_arguments)]
    fn range(
        &mut self,
        tree: &K2Tree,
        d: u32,
        node0: u64,
        count: u64,
        src: CodeSource,
        off0: u64,
        m: u64,
    ) {
        let h = tree.height();
        let end = node0 + count;
        let mut a = node0;
        while a < end {
            let fa = tree.first_child(a);
            let b = if d + 2 == h {
                (a + m).min(end)
            } else {
                // The largest b <= a + m with at most m children in a..b (each node has
                // at most 4, so at least m / 4 nodes fit).
                let (mut lo, mut hi) = (a + 1, (a + m).min(end));
                while lo < hi {
                    let mid = lo + (hi - lo).div_ceil(2);
                    if self.children_of(tree, d, mid) - fa <= m {
                        lo = mid;
                    } else {
                        hi = mid - 1;
                    }
                }
                lo
            };
            let fb = self.children_of(tree, d, b);
            let step = Step {
                kind: if d + 2 == h {
                    StepKind::Leaves
                } else {
                    StepKind::Expand
                },
                level: d,
                node0: a,
                count: b - a,
                src,
                src_off: off0 + (a - node0),
                child0: fa,
                children: fb - fa,
            };
            self.steps.push(step);
            self.max_step_nodes = self.max_step_nodes.max(b - a);
            if d + 2 < h {
                let next = &mut self.scratch_codes[d as usize + 1];
                *next = (*next).max(fb - fa);
                self.range(tree, d + 1, fa, fb - fa, CodeSource::Scratch(d + 1), 0, m);
            }
            a = b;
        }
    }

    /// First child of node `j` of level `d`, where `j` may be one past the level's end.
    fn children_of(&self, tree: &K2Tree, d: u32, j: u64) -> u64 {
        if j == tree.level_start(d + 1) {
            tree.level_start(d + 2)
        } else {
            tree.first_child(j)
        }
    }

    /// Scan tiles of the largest step (for the look-back status words).
    pub fn scan_tiles(&self) -> u64 {
        self.max_step_nodes.div_ceil(SCAN_TILE_NODES)
    }

    /// Launches of a product (scans not counted).
    pub fn launches(&self) -> usize {
        self.steps.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tree(n: u32, m: usize, seed: u64) -> K2Tree {
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

    /// Every node of every level below the top is planned exactly once, in order, and no
    /// step exceeds the tile size.
    #[test]
    fn plans_cover_each_level_once_within_tiles() {
        for &(n, m) in &[(5u32, 1usize), (100, 300), (1000, 5000), (4096, 20000)] {
            let t = tree(n, m, n as u64);
            let h = t.height();
            for &tile in &[4u64, 16, 1000, 1 << 20] {
                for top in 0..=h - 2 {
                    let plan = TilePlan::descend(&t, top, tile);
                    let mut next = (top..h - 1).map(|d| t.level_start(d)).collect::<Vec<_>>();
                    for s in &plan.steps {
                        let k = (s.level - top) as usize;
                        assert_eq!(s.node0, next[k], "level {} out of order", s.level);
                        next[k] += s.count;
                        assert!(s.count <= tile.max(4));
                        if s.kind == StepKind::Expand {
                            assert!(s.children <= tile.max(4));
                            assert!(s.children <= plan.scratch_codes[s.level as usize + 1]);
                        }
                        assert_eq!(s.child0, t.first_child(s.node0));
                    }
                    for d in top..h - 1 {
                        assert_eq!(next[(d - top) as usize], t.level_start(d + 1));
                    }
                }
                let f = TilePlan::frontier(&t, tile);
                let covered: u64 = f.steps.iter().map(|s| s.count).sum();
                assert_eq!(covered, t.level_nodes(h - 2));
            }
        }
    }

    #[test]
    fn empty_tree_has_no_steps() {
        let t = K2Tree::from_edges(10, 10, vec![]);
        assert!(TilePlan::descend(&t, 0, 16).steps.is_empty());
        assert!(TilePlan::frontier(&t, 16).steps.is_empty());
    }
}
