//! What the planner needs from a graph: its node ids and one k²-tree per predicate.

use std::collections::BTreeMap;
use std::sync::Arc;

use roaring::RoaringBitmap;

use super::PredId;
use crate::k2tree::K2Tree;

/// A graph the RPQ engine can evaluate paths on: one dense node id space and, per
/// predicate, a `node_count × node_count` k²-tree with `A[s][o] = 1` for each triple
/// `(s p o)`. The on-disk store implements it; [`MemoryGraph`] is the in-memory one.
pub trait PathGraph: Sync {
    /// Size of the node id space (ids `0..node_count`); every relation is this square.
    fn node_count(&self) -> u32;
    /// The nodes that occur as subject or object of some triple: the range of
    /// zero-length paths between two variables.
    fn nodes(&self) -> &RoaringBitmap;
    /// The predicates that have a relation, ascending.
    fn predicates(&self) -> Vec<PredId>;
    /// The relation of predicate `p`, or `None` when the graph has no triple with it.
    fn relation(&self, p: PredId) -> Option<Arc<K2Tree>>;
}

/// A [`PathGraph`] built in memory from `(subject, predicate, object)` id triples: for
/// tests and small inputs.
///
/// ```
/// use k2rpq::rpq::{MemoryGraph, PathGraph};
/// let g = MemoryGraph::from_triples(vec![(0, 10, 1), (1, 10, 2), (2, 11, 0)]);
/// assert_eq!(g.node_count(), 3);
/// assert_eq!(g.predicates(), vec![10, 11]);
/// assert_eq!(g.relation(10).unwrap().nnz(), 2);
/// assert!(g.relation(12).is_none());
/// ```
#[derive(Clone, Debug, Default)]
pub struct MemoryGraph {
    node_count: u32,
    nodes: RoaringBitmap,
    relations: BTreeMap<PredId, Arc<K2Tree>>,
}

impl MemoryGraph {
    /// The graph of `triples`; the id space is `0..=max node id`.
    pub fn from_triples(triples: Vec<(u32, PredId, u32)>) -> Self {
        let n = triples
            .iter()
            .map(|&(s, _, o)| s.max(o) as u64 + 1)
            .max()
            .unwrap_or(0);
        Self::with_node_count(n as u32, triples)
    }

    /// The graph of `triples` over the id space `0..node_count` (ids of terms that are not
    /// nodes, such as predicates, may leave gaps). Panics if a node id is out of range.
    pub fn with_node_count(node_count: u32, triples: Vec<(u32, PredId, u32)>) -> Self {
        let mut nodes = RoaringBitmap::new();
        let mut by_pred: BTreeMap<PredId, Vec<(u32, u32)>> = BTreeMap::new();
        for (s, p, o) in triples {
            assert!(
                s < node_count && o < node_count,
                "MemoryGraph: node id out of range"
            );
            nodes.insert(s);
            nodes.insert(o);
            by_pred.entry(p).or_default().push((s, o));
        }
        let relations = by_pred
            .into_iter()
            .map(|(p, edges)| {
                let t = K2Tree::from_edges(node_count as u64, node_count as u64, edges);
                (p, Arc::new(t))
            })
            .collect();
        MemoryGraph {
            node_count,
            nodes,
            relations,
        }
    }

    /// Triples, counted over all relations (duplicates removed).
    pub fn triple_count(&self) -> u64 {
        self.relations.values().map(|t| t.nnz()).sum()
    }
}

impl PathGraph for MemoryGraph {
    fn node_count(&self) -> u32 {
        self.node_count
    }
    fn nodes(&self) -> &RoaringBitmap {
        &self.nodes
    }
    fn predicates(&self) -> Vec<PredId> {
        self.relations.keys().copied().collect()
    }
    fn relation(&self, p: PredId) -> Option<Arc<K2Tree>> {
        self.relations.get(&p).cloned()
    }
}

/// One tree holding every edge of the predicates `preds` (those without a relation are
/// skipped): a negated property set becomes one product per step instead of one per
/// predicate.
pub fn union_tree(graph: &dyn PathGraph, preds: &[PredId]) -> Arc<K2Tree> {
    let n = graph.node_count() as u64;
    let mut edges: Vec<(u32, u32)> = Vec::new();
    for &p in preds {
        if let Some(t) = graph.relation(p) {
            edges.extend(t.cells());
        }
    }
    Arc::new(K2Tree::from_edges(n, n, edges))
}

/// The nodes with an edge of `tree` leaving them in direction `forward` (its non-empty
/// rows) or, otherwise, its non-empty columns.
pub(crate) fn support(tree: &K2Tree, forward: bool) -> RoaringBitmap {
    // Decoding every cell is what building the line lists costs, so build them (within
    // the store's line memory budget) and read the non-empty lines off their keys, now
    // and in later queries.
    if let Some(lines) = tree.lines_after(!forward, tree.nodes()) {
        return RoaringBitmap::from_sorted_iter(lines.keys().iter().copied())
            .expect("keys ascending");
    }
    let mut ids: Vec<u32> = tree
        .cells()
        .into_iter()
        .map(|(r, c)| if forward { r } else { c })
        .collect();
    ids.sort_unstable();
    ids.dedup();
    RoaringBitmap::from_sorted_iter(ids).expect("sorted")
}
