//! The relations of a live store: per `(graph, predicate)` a base tree plus a delta of
//! added and deleted `(subject, object)` id pairs, and immutable, versioned snapshots of
//! them that queries read ([`Snapshot`], a [`PathDataset`]).
//!
//! A relation with a delta is materialised (base cells minus deletions plus additions,
//! one tree) by the first query that reads it, or ahead of time by the background merge;
//! the materialised tree then becomes the relation's base, atomically for readers: a
//! query keeps the snapshot it started with, and every snapshot is immutable.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock, RwLock};

use oxrdf::{GraphNameRef, QuadRef, Term, TermRef};
use roaring::RoaringBitmap;
// Every write hashes its pair into a delta and both nodes into the counts: with SipHash
// that was a third of applying a change.
use rustc_hash::{FxHashMap as HashMap, FxHashSet as HashSet};

use crate::k2tree::K2Tree;
use crate::rpq::{PathGraph, PredId};
use crate::sparql::{MemoryDictionary, PathDataset, TermDictionary};

/// Identifies the content of a relation's tree (for the device cache): every tree built
/// gets a new one.
pub(crate) type TreeId = u64;

fn next_tree_id() -> TreeId {
    static NEXT: AtomicU64 = AtomicU64::new(1);
    NEXT.fetch_add(1, Ordering::Relaxed)
}

/// The id space of relations over `terms` terms: a power of two with room to grow, so
/// that new terms rarely change the relations' shape (when they do, every relation is
/// rebuilt at its next read).
pub(crate) fn id_space(terms: usize) -> u32 {
    (terms.max(1) as u64).next_power_of_two().clamp(64, 1 << 31) as u32
}

/// A graph of the store: `None` the default graph, `Some(id)` a named graph.
pub(crate) type GraphKey = Option<u32>;

/// A relation's tree to be: `base` (over its own id space) minus `deleted` plus `added`,
/// over `side` ids, built once.
pub(crate) struct PendingTree {
    id: TreeId,
    side: u32,
    base_id: Option<TreeId>,
    base: Option<Arc<K2Tree>>,
    added: Vec<(u32, u32)>,
    added_set: HashSet<(u32, u32)>,
    deleted: HashSet<(u32, u32)>,
    tree: OnceLock<Arc<K2Tree>>,
}

impl PendingTree {
    /// The tree, built on the first call.
    pub(crate) fn tree(&self) -> &Arc<K2Tree> {
        self.tree.get_or_init(|| {
            let mut edges: Vec<(u32, u32)> = match &self.base {
                Some(b) => b
                    .cells()
                    .into_iter()
                    .filter(|e| !self.deleted.contains(e))
                    .collect(),
                None => Vec::new(),
            };
            edges.extend_from_slice(&self.added);
            let n = self.side as u64;
            Arc::new(K2Tree::from_edges(n, n, edges))
        })
    }

    fn is_built(&self) -> bool {
        self.tree.get().is_some()
    }
}

/// A relation as a snapshot sees it.
#[derive(Clone)]
pub(crate) enum SnapRelation {
    /// A built tree.
    Ready(TreeId, Arc<K2Tree>),
    /// A tree built at its first read.
    Pending(Arc<PendingTree>),
}

impl SnapRelation {
    /// The identity of the tree's content.
    pub(crate) fn tree_id(&self) -> TreeId {
        match self {
            SnapRelation::Ready(id, _) => *id,
            SnapRelation::Pending(p) => p.id,
        }
    }

    /// The tree (built now if pending).
    pub(crate) fn tree(&self) -> Arc<K2Tree> {
        match self {
            SnapRelation::Ready(_, t) => Arc::clone(t),
            SnapRelation::Pending(p) => Arc::clone(p.tree()),
        }
    }
}

/// One relation of the live store.
#[derive(Default)]
struct LiveRelation {
    /// The base tree and its id (`None`: no base).
    base: Option<(TreeId, Arc<K2Tree>)>,
    /// Pairs present but not in the base.
    added: HashSet<(u32, u32)>,
    /// Pairs of the base no longer present.
    deleted: HashSet<(u32, u32)>,
    /// Pairs present.
    len: u64,
    /// The view handed to the last snapshot, while the delta has not changed since.
    view: Option<SnapRelation>,
    /// Whether a background merge of it is running.
    merging: bool,
}

impl LiveRelation {
    fn apply(&mut self, pair: (u32, u32), inserted: bool) {
        if inserted {
            if !self.deleted.remove(&pair) {
                self.added.insert(pair);
            }
            self.len += 1;
        } else {
            if !self.added.remove(&pair) {
                self.deleted.insert(pair);
            }
            self.len -= 1;
        }
        self.view = None;
    }

    /// Whether `pair` is present.
    fn contains(&self, pair: (u32, u32)) -> bool {
        if self.added.contains(&pair) {
            return true;
        }
        !self.deleted.contains(&pair)
            && self
                .base
                .as_ref()
                .is_some_and(|(_, t)| t.contains(pair.0, pair.1))
    }

    fn delta_len(&self) -> usize {
        self.added.len() + self.deleted.len()
    }

    /// The relation's view over `side` ids, reusing the last one when nothing changed.
    fn view(&mut self, side: u32) -> SnapRelation {
        if let Some(v) = &self.view {
            let fits = match v {
                SnapRelation::Ready(_, t) => t.rows() == side as u64,
                SnapRelation::Pending(p) => p.side == side,
            };
            if fits {
                return v.clone();
            }
        }
        let v = match &self.base {
            Some((id, t))
                if self.added.is_empty() && self.deleted.is_empty() && t.rows() == side as u64 =>
            {
                SnapRelation::Ready(*id, Arc::clone(t))
            }
            _ => SnapRelation::Pending(self.pending(side)),
        };
        self.view = Some(v.clone());
        v
    }

    /// The tree of the relation as it is now, over `side` ids, to be built.
    fn pending(&self, side: u32) -> Arc<PendingTree> {
        Arc::new(PendingTree {
            id: next_tree_id(),
            side,
            base_id: self.base.as_ref().map(|(id, _)| *id),
            base: self.base.as_ref().map(|(_, t)| Arc::clone(t)),
            added: self.added.iter().copied().collect(),
            added_set: self.added.clone(),
            deleted: self.deleted.clone(),
            tree: OnceLock::new(),
        })
    }

    /// Makes the view's tree the base once it is built and the delta it folds in is still
    /// the whole delta. Returns whether it did.
    fn adopt(&mut self) -> bool {
        let Some(SnapRelation::Pending(p)) = &self.view else {
            return false;
        };
        if !p.is_built() {
            return false;
        }
        let tree = Arc::clone(p.tree());
        let id = p.id;
        self.base = Some((id, Arc::clone(&tree)));
        self.added.clear();
        self.deleted.clear();
        self.view = Some(SnapRelation::Ready(id, tree));
        true
    }
}

/// One graph of the live store.
#[derive(Default)]
struct LiveGraph {
    relations: BTreeMap<PredId, LiveRelation>,
    /// How many times each node occurs as a subject or an object.
    occurrences: HashMap<u32, u32>,
    /// The nodes with a non-zero count (copied on write while a snapshot holds it).
    nodes: Arc<RoaringBitmap>,
}

impl LiveGraph {
    fn count(&mut self, node: u32, inserted: bool) {
        if inserted {
            let c = self.occurrences.entry(node).or_insert(0);
            *c += 1;
            if *c == 1 {
                Arc::make_mut(&mut self.nodes).insert(node);
            }
        } else if let Some(c) = self.occurrences.get_mut(&node) {
            *c -= 1;
            if *c == 0 {
                self.occurrences.remove(&node);
                Arc::make_mut(&mut self.nodes).remove(node);
            }
        }
    }

    fn is_empty(&self) -> bool {
        self.occurrences.is_empty()
    }
}

/// The term dictionary of a live store: append-only, shared by all its snapshots (each
/// sees the terms that existed when it was taken).
pub(crate) type SharedDictionary = Arc<RwLock<MemoryDictionary>>;

/// The relations of a live store, changed by [`Live::apply`] and read through
/// [`Live::snapshot`].
pub(crate) struct Live {
    dictionary: SharedDictionary,
    graphs: BTreeMap<GraphKey, LiveGraph>,
    version: u64,
    snapshot: Option<Arc<Snapshot>>,
}

impl Default for Live {
    fn default() -> Self {
        Live {
            dictionary: Arc::new(RwLock::new(MemoryDictionary::default())),
            graphs: BTreeMap::new(),
            version: 0,
            snapshot: None,
        }
    }
}

/// `(a − b) ∪ (c − d)`.
fn union_of_differences(
    a: &HashSet<(u32, u32)>,
    b: &HashSet<(u32, u32)>,
    c: &HashSet<(u32, u32)>,
    d: &HashSet<(u32, u32)>,
) -> HashSet<(u32, u32)> {
    a.difference(b).chain(c.difference(d)).copied().collect()
}

/// The ids of one quad.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) struct QuadIds {
    pub graph: GraphKey,
    pub subject: u32,
    pub predicate: PredId,
    pub object: u32,
}

impl QuadIds {
    /// The ids of `quad`'s terms in `d`, giving new terms the next ids.
    pub(crate) fn intern(d: &mut MemoryDictionary, quad: QuadRef<'_>) -> QuadIds {
        QuadIds::of(quad, |t| Some(d.intern(t))).expect("interning gives every term an id")
    }

    /// The ids of `quad`, `id` giving each term's; `None` when a term has none.
    pub(crate) fn of(
        quad: QuadRef<'_>,
        mut id: impl FnMut(TermRef<'_>) -> Option<u32>,
    ) -> Option<QuadIds> {
        let graph = match quad.graph_name {
            GraphNameRef::DefaultGraph => None,
            GraphNameRef::NamedNode(g) => Some(id(g.into())?),
            GraphNameRef::BlankNode(g) => Some(id(g.into())?),
        };
        Some(QuadIds {
            graph,
            subject: id(quad.subject.into())?,
            predicate: id(quad.predicate.into())?,
            object: id(quad.object)?,
        })
    }
}

impl Live {
    /// Number of terms in the dictionary.
    pub(crate) fn term_count(&self) -> usize {
        self.dictionary
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .len()
    }

    /// The term of `id`.
    pub(crate) fn term(&self, id: u32) -> Option<Term> {
        self.dictionary
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .term(id)
    }

    /// Whether the quad of `ids` is present.
    pub(crate) fn contains(&self, ids: QuadIds) -> bool {
        self.graphs
            .get(&ids.graph)
            .and_then(|g| g.relations.get(&ids.predicate))
            .is_some_and(|r| r.contains((ids.subject, ids.object)))
    }

    /// Records that the quad of `ids` was inserted (`true`) or deleted. The caller
    /// guarantees the change is exact: an inserted quad was absent, a deleted one present.
    pub(crate) fn apply(&mut self, ids: QuadIds, inserted: bool) {
        let g = self.graphs.entry(ids.graph).or_default();
        g.relations
            .entry(ids.predicate)
            .or_default()
            .apply((ids.subject, ids.object), inserted);
        g.count(ids.subject, inserted);
        g.count(ids.object, inserted);
        if !inserted {
            if g.relations.get(&ids.predicate).is_some_and(|r| r.len == 0) {
                g.relations.remove(&ids.predicate);
            }
            if g.is_empty() {
                self.graphs.remove(&ids.graph);
            }
        }
        self.version += 1;
        self.snapshot = None;
    }

    /// Sets the base trees (a rebuild): `relations` per graph and predicate over
    /// `side` ids; replaces everything but the dictionary's terms.
    pub(crate) fn set_base(
        &mut self,
        relations: BTreeMap<GraphKey, BTreeMap<PredId, Arc<K2Tree>>>,
        mut occurrences: BTreeMap<GraphKey, HashMap<u32, u32>>,
    ) {
        self.graphs.clear();
        for (g, rels) in relations {
            let occ = occurrences.remove(&g).unwrap_or_default();
            let mut nodes = RoaringBitmap::new();
            nodes.extend(occ.keys().copied());
            let graph = LiveGraph {
                relations: rels
                    .into_iter()
                    .map(|(p, t)| {
                        let len = t.nnz();
                        let id = next_tree_id();
                        (
                            p,
                            LiveRelation {
                                base: Some((id, t)),
                                len,
                                ..LiveRelation::default()
                            },
                        )
                    })
                    .collect(),
                occurrences: occ,
                nodes: Arc::new(nodes),
            };
            self.graphs.insert(g, graph);
        }
        self.version += 1;
        self.snapshot = None;
    }

    /// Adds `term` to the dictionary (a rebuild's first pass).
    pub(crate) fn dictionary(&self) -> &SharedDictionary {
        &self.dictionary
    }

    /// The version: the number of changes applied.
    pub(crate) fn version(&self) -> u64 {
        self.version
    }

    /// The current snapshot, taken now if the relations changed since the last one.
    /// Relations whose last view was built meanwhile become base trees first.
    pub(crate) fn snapshot(&mut self) -> Arc<Snapshot> {
        if let Some(s) = &self.snapshot {
            return Arc::clone(s);
        }
        let terms = self.term_count();
        let side = id_space(terms);
        let mut graphs = BTreeMap::new();
        for (g, live) in &mut self.graphs {
            let relations = live
                .relations
                .iter_mut()
                .map(|(p, r)| {
                    r.adopt();
                    (*p, r.view(side))
                })
                .collect();
            graphs.insert(
                *g,
                SnapGraph {
                    side,
                    nodes: Arc::clone(&live.nodes),
                    relations,
                },
            );
        }
        let s = Arc::new(Snapshot {
            version: self.version,
            dictionary: DictionaryView {
                shared: Arc::clone(&self.dictionary),
                len: terms as u32,
            },
            empty: SnapGraph {
                side,
                nodes: Arc::default(),
                relations: BTreeMap::new(),
            },
            graphs,
        });
        self.snapshot = Some(Arc::clone(&s));
        s
    }

    /// The version of the last snapshot taken, while it is current.
    pub(crate) fn snapshot_version(&self) -> Option<u64> {
        self.snapshot.as_ref().map(|s| s.version)
    }

    /// A background merge of relation `(g, p)` when its delta holds at least
    /// `threshold` changes and no merge of it is running: the tree to build.
    pub(crate) fn merge_job(
        &mut self,
        g: GraphKey,
        p: PredId,
        threshold: usize,
    ) -> Option<Arc<PendingTree>> {
        let side = id_space(self.term_count());
        let r = self.graphs.get_mut(&g)?.relations.get_mut(&p)?;
        if r.merging || r.delta_len() < threshold {
            return None;
        }
        r.merging = true;
        Some(r.pending(side))
    }

    /// Swaps in the tree a background merge built from `job` as the base of `(g, p)`,
    /// keeping as the delta the changes made since the job was taken.
    pub(crate) fn finish_merge(&mut self, g: GraphKey, p: PredId, job: &PendingTree) {
        let side = id_space(self.term_count());
        let Some(r) = self
            .graphs
            .get_mut(&g)
            .and_then(|g| g.relations.get_mut(&p))
        else {
            return;
        };
        r.merging = false;
        if job.side != side || job.base_id != r.base.as_ref().map(|(id, _)| *id) {
            // New terms changed the id space meanwhile (the tree no longer fits), or a
            // query built the relation's tree and made it the base first.
            return;
        }
        // Now = (base − deleted) ∪ added; merged = (base − job.deleted) ∪ job.added.
        // The new delta is now against merged.
        let added = union_of_differences(&r.added, &job.added_set, &job.deleted, &r.deleted);
        let deleted = union_of_differences(&job.added_set, &r.added, &r.deleted, &job.deleted);
        r.base = Some((job.id, Arc::clone(job.tree())));
        r.added = added;
        r.deleted = deleted;
        r.view = None;
        self.snapshot = None;
    }

    /// The dictionary's terms from id `from` on.
    pub(crate) fn terms_from(&self, from: u32) -> Vec<Term> {
        let d = self.dictionary.read().unwrap_or_else(|e| e.into_inner());
        (from..d.len() as u32).filter_map(|id| d.term(id)).collect()
    }

    /// Every relation's tree, as of now.
    pub(crate) fn relation_trees(&mut self) -> Vec<super::log::RelationTree> {
        let s = self.snapshot();
        let mut out = Vec::new();
        for (g, graph) in &s.graphs {
            for (p, r) in &graph.relations {
                out.push((*g, *p, r.tree()));
            }
        }
        out
    }

    /// Changes held in deltas, over all relations.
    pub(crate) fn delta_len(&self) -> usize {
        self.graphs
            .values()
            .flat_map(|g| g.relations.values())
            .map(LiveRelation::delta_len)
            .sum()
    }

    /// Quads held, over all graphs.
    pub(crate) fn len(&self) -> u64 {
        self.graphs
            .values()
            .flat_map(|g| g.relations.values())
            .map(|r| r.len)
            .sum()
    }
}

/// The dictionary as a snapshot sees it: the terms that existed when it was taken.
pub(crate) struct DictionaryView {
    shared: SharedDictionary,
    len: u32,
}

impl TermDictionary for DictionaryView {
    fn id(&self, term: TermRef<'_>) -> Option<u32> {
        let id = self
            .shared
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .id(term)?;
        (id < self.len).then_some(id)
    }
    fn term(&self, id: u32) -> Option<Term> {
        if id >= self.len {
            return None;
        }
        self.shared
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .term(id)
    }
}

/// One graph of a snapshot.
pub(crate) struct SnapGraph {
    side: u32,
    nodes: Arc<RoaringBitmap>,
    relations: BTreeMap<PredId, SnapRelation>,
}

impl SnapGraph {
    /// The relation of `p` as this snapshot sees it.
    pub(crate) fn view(&self, p: PredId) -> Option<&SnapRelation> {
        self.relations.get(&p)
    }
}

impl PathGraph for SnapGraph {
    fn node_count(&self) -> u32 {
        self.side
    }
    fn nodes(&self) -> &RoaringBitmap {
        &self.nodes
    }
    fn predicates(&self) -> Vec<PredId> {
        self.relations.keys().copied().collect()
    }
    fn relation(&self, p: PredId) -> Option<Arc<K2Tree>> {
        self.relations.get(&p).map(SnapRelation::tree)
    }
}

/// The relations of a live store at one version: immutable, read by queries.
pub(crate) struct Snapshot {
    version: u64,
    dictionary: DictionaryView,
    empty: SnapGraph,
    graphs: BTreeMap<GraphKey, SnapGraph>,
}

impl Snapshot {
    /// The version it shows.
    pub(crate) fn version(&self) -> u64 {
        self.version
    }

    /// The graph `name` (`None`: the default graph), if it holds quads.
    pub(crate) fn graph(&self, name: GraphKey) -> Option<&SnapGraph> {
        self.graphs.get(&name)
    }
}

impl PathDataset for Snapshot {
    fn dictionary(&self) -> &dyn TermDictionary {
        &self.dictionary
    }
    fn default_graph(&self) -> &dyn PathGraph {
        self.graphs.get(&None).unwrap_or(&self.empty)
    }
    fn named_graphs(&self) -> Vec<u32> {
        self.graphs.keys().filter_map(|g| *g).collect()
    }
    fn named_graph(&self, name: u32) -> Option<&dyn PathGraph> {
        self.graphs.get(&Some(name)).map(|g| g as &dyn PathGraph)
    }
}
