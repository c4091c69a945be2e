//! [`K2Store`]: an Oxigraph store whose writes go through k2rpq, so that its relations
//! follow every change exactly and no query scans the store.

use std::collections::BTreeMap;
use std::io::Read;
use std::path::Path;
use std::sync::{Arc, Mutex, MutexGuard, RwLockReadGuard};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use indexmap::map::IndexMap;
use oxigraph::io::{RdfFormat, RdfParser};
use oxigraph::model::{
    GraphName, GraphNameRef, NamedNode, NamedOrBlankNodeRef, Quad, QuadRef, TermRef,
};
use oxigraph::sparql::{QueryResults, SparqlEvaluator};
use oxigraph::store::{Store, Transaction};

use rustc_hash::{FxBuildHasher, FxHashMap as HashMap};

use super::live::{id_space, GraphKey, Live, PendingTree, QuadIds, Snapshot, TreeId};
use super::log::{read_checkpoint, Log};
use super::{answer_path_service, execute, path_evaluator, OxigraphError};
use crate::cache::{available_host_memory, CacheOptions, DeviceCache, DEFAULT_BUDGET};
use crate::database::CachedRelations;
use crate::engine::cpu::CpuEngine;
use crate::engine::{Engine, MatrixConfig};
use crate::k2tree::K2Tree;
use crate::rpq::{PathGraph, PredId, RelKey, RelationSource};
use crate::sparql::dataset::TermKey;
use crate::sparql::group::RelationProvider;
use crate::sparql::{MemoryDictionary, PathDataset};

/// Changes a relation's delta holds before the background merge rebuilds its tree.
pub const DEFAULT_MERGE_THRESHOLD: usize = 1 << 16;

/// A write that a test makes fail on purpose, on one side of the embedding.
#[doc(hidden)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum InjectedFailure {
    /// k2rpq's side fails while preparing the relations' changes (before Oxigraph commits).
    Relations,
    /// Oxigraph's commit fails (after k2rpq prepared its changes and logged them).
    Commit,
    /// The process "dies" between the fsync of the log record and Oxigraph's commit:
    /// nothing commits and the store takes no more writes (reopen it to recover).
    CrashAfterLog,
}

/// What identifies a relation resident in the engine: the graph (`u32::MAX` for the
/// default graph), the relation, and the content of its tree (a tree id for one
/// predicate, the snapshot's version for a union), so a changed relation is never served
/// from the cache.
type ResidentKey = (u32, RelKey, u64);

fn graph_code(g: GraphKey) -> u32 {
    g.unwrap_or(u32::MAX)
}

/// An Oxigraph [`Store`] together with k²-tree relations of its content, kept current
/// by owning the write path; see the [module docs](super).
pub struct K2Store<E: Engine + 'static = CpuEngine> {
    store: Store,
    engine: Arc<E>,
    cache: DeviceCache<E, ResidentKey>,
    live: Arc<Mutex<Live>>,
    writer: Mutex<()>,
    failure: Mutex<Option<InjectedFailure>>,
    merge_threshold: usize,
    merges: Mutex<Vec<JoinHandle<()>>>,
    /// The relations on disk, when opened with a folder.
    log: Option<Mutex<Log>>,
    /// Set when an injected crash left a record Oxigraph did not commit: the store then
    /// takes no more writes (as a killed process would not).
    crashed: std::sync::atomic::AtomicBool,
}

impl K2Store<CpuEngine> {
    /// An empty store in memory, queried on the CPU engine.
    pub fn new() -> Result<Self, OxigraphError> {
        Self::with_engine(Store::new()?, CpuEngine::new())
    }

    /// A RocksDB-backed Oxigraph store in `path/oxigraph` with its relations in
    /// `path/relations` (see [`K2Store::open_with`]), queried on the CPU engine.
    ///
    /// Keep the system allocator in a program that opens RocksDB stores: Oxigraph frees
    /// RocksDB's error messages, allocated by C, through Rust's global allocator, so
    /// under another one (mimalloc, jemalloc) an error RocksDB reports crashes the
    /// process.
    #[cfg(feature = "rocksdb")]
    pub fn open(path: &Path) -> Result<Self, OxigraphError> {
        // RocksDB creates its own folder, not the ones above it.
        std::fs::create_dir_all(path).map_err(|e| super::log::io("cannot create", path, e))?;
        let store = Store::open(path.join("oxigraph"))?;
        K2Store::open_with(store, &path.join("relations"), CpuEngine::new())
    }

    /// `store` (with its content) queried on the CPU engine.
    pub fn from_store(store: Store) -> Result<Self, OxigraphError> {
        Self::with_engine(store, CpuEngine::new())
    }
}

impl<E: Engine + 'static> K2Store<E> {
    /// `store`, with relations built from its content by streaming its quads once, and
    /// queries on `engine` (loaded relations kept under [`DEFAULT_BUDGET`] of the host's
    /// free memory; see [`K2Store::with_cache_budget`] for a GPU's).
    pub fn with_engine(store: Store, engine: E) -> Result<Self, OxigraphError> {
        let s = Self::empty(store, engine);
        s.rebuild()?;
        Ok(s)
    }

    /// `store` with its relations on disk in `folder`: a checkpoint and a log of the
    /// writes since, each record fsynced before Oxigraph commits. The first open builds
    /// the relations by streaming the store's quads once; later opens read the
    /// checkpoint and replay the log, dropping a record Oxigraph did not commit (see
    /// the log's docs), so the relations match Oxigraph's content after a kill at any
    /// point of a write.
    pub fn open_with(store: Store, folder: &Path, engine: E) -> Result<Self, OxigraphError> {
        let mut s = Self::empty(store, engine);
        // The checkpoint streams into the dictionary and the trees: its terms are interned
        // as they are read, and each relation's pairs become its tree before the next
        // relation is read.
        let mut trees: BTreeMap<GraphKey, BTreeMap<PredId, Arc<K2Tree>>> = BTreeMap::new();
        let mut occurrences: BTreeMap<GraphKey, HashMap<u32, u32>> = BTreeMap::new();
        let checkpoint = {
            let dictionary = Arc::clone(s.live().dictionary());
            let mut d = dictionary.write().unwrap_or_else(|e| e.into_inner());
            read_checkpoint(folder, &mut d, |terms, (g, p, pairs)| {
                let n = id_space(terms as usize) as u64;
                let occ = occurrences.entry(g).or_default();
                for &(a, b) in &pairs {
                    *occ.entry(a).or_insert(0) += 1;
                    *occ.entry(b).or_insert(0) += 1;
                }
                trees
                    .entry(g)
                    .or_default()
                    .insert(p, Arc::new(K2Tree::from_edges(n, n, pairs)));
            })?
        };
        let (mut log, mut records) = Log::open(folder, checkpoint)?;
        if checkpoint.terms == 0 && records.is_empty() {
            s.log = Some(Mutex::new(log));
            s.rebuild()?;
            return Ok(s);
        }
        // The last write recorded may not have committed: Oxigraph tells.
        let aborted: std::collections::HashSet<u64> = records
            .iter()
            .filter(|(r, _)| r.abort)
            .map(|(r, _)| r.seq)
            .collect();
        // Aborted writes keep their record for the terms it numbered.
        records.retain(|(r, _)| !r.abort);
        s.live().set_base(trees, occurrences);
        let last = records.len().saturating_sub(1);
        for (i, (r, offset)) in records.iter().enumerate() {
            {
                let live = s.live();
                let mut d = live.dictionary().write().unwrap_or_else(|e| e.into_inner());
                if d.len() as u32 != r.first_term {
                    return Err(OxigraphError::Relations(format!(
                        "the log's record {} numbers terms from {}, the dictionary holds {}",
                        r.seq,
                        r.first_term,
                        d.len()
                    )));
                }
                for t in &r.terms {
                    d.intern(t.as_ref());
                }
            }
            if aborted.contains(&r.seq) {
                continue;
            }
            if i == last && !r.changes.is_empty() {
                // The last write may not have committed: Oxigraph tells.
                let (q, inserted) = r.changes[0];
                let quad = {
                    let live = s.live();
                    quad_of(q, |id| live.term(id))
                }
                .ok_or_else(|| {
                    OxigraphError::Relations("the log names a term it does not hold".into())
                })?;
                if s.store.contains(&quad)? != inserted {
                    log.drop_from(*offset, r.first_term)?;
                    continue;
                }
            }
            let mut live = s.live();
            for (q, inserted) in &r.changes {
                live.apply(*q, *inserted);
            }
        }
        s.log = Some(Mutex::new(log));
        Ok(s)
    }

    fn empty(store: Store, engine: E) -> Self {
        let engine = Arc::new(engine);
        K2Store {
            cache: DeviceCache::new(
                Arc::clone(&engine),
                CacheOptions::with_budget(
                    DEFAULT_BUDGET
                        .bytes_of(available_host_memory().unwrap_or(1 << 32))
                        .unwrap_or(1 << 30),
                ),
            ),
            store,
            engine,
            live: Arc::new(Mutex::new(Live::default())),
            writer: Mutex::new(()),
            failure: Mutex::new(None),
            merge_threshold: DEFAULT_MERGE_THRESHOLD,
            merges: Mutex::new(Vec::new()),
            log: None,
            crashed: Default::default(),
        }
    }

    /// Writes the relations' checkpoint and empties the log (when on disk; otherwise
    /// nothing to do).
    pub fn checkpoint(&self) -> Result<(), OxigraphError> {
        let _writer = self.writer.lock().unwrap_or_else(|e| e.into_inner());
        self.checkpoint_locked()
    }

    fn checkpoint_locked(&self) -> Result<(), OxigraphError> {
        let Some(log) = &self.log else {
            return Ok(());
        };
        let (dictionary, relations) = {
            let mut live = self.live();
            (Arc::clone(live.dictionary()), live.relation_trees())
        };
        use crate::sparql::TermDictionary;
        // Writers wait on the writer lock meanwhile; queries only read the dictionary.
        let d = dictionary.read().unwrap_or_else(|e| e.into_inner());
        log.lock().unwrap_or_else(|e| e.into_inner()).checkpoint(
            d.len() as u32,
            |id| d.term(id),
            &relations,
        )
    }

    /// Bytes in the relations' log (0 in memory).
    pub fn log_bytes(&self) -> u64 {
        self.log
            .as_ref()
            .map_or(0, |l| l.lock().unwrap_or_else(|e| e.into_inner()).len())
    }

    /// Keeps the relations loaded into the engine (resident on a GPU) under `bytes`.
    pub fn with_cache_budget(mut self, bytes: u64) -> Self {
        self.cache = DeviceCache::new(Arc::clone(&self.engine), CacheOptions::with_budget(bytes));
        self
    }

    /// Sets how many changes a relation's delta holds before the background merge
    /// rebuilds its tree (default [`DEFAULT_MERGE_THRESHOLD`]).
    pub fn with_merge_threshold(mut self, changes: usize) -> Self {
        self.merge_threshold = changes.max(1);
        self
    }

    /// The Oxigraph store, for reading. Writing to it directly bypasses the relations:
    /// call [`K2Store::rebuild`] after such writes.
    pub fn oxigraph(&self) -> &Store {
        &self.store
    }

    fn live(&self) -> MutexGuard<'_, Live> {
        self.live.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Rebuilds every relation from the Oxigraph store's content, streaming its quads
    /// once: for writes that bypassed this wrapper.
    pub fn rebuild(&self) -> Result<(), OxigraphError> {
        let _writer = self.writer.lock().unwrap_or_else(|e| e.into_inner());
        let mut edges: BTreeMap<GraphKey, BTreeMap<PredId, Vec<(u32, u32)>>> = BTreeMap::new();
        let mut occurrences: BTreeMap<GraphKey, HashMap<u32, u32>> = BTreeMap::new();
        let dictionary = Arc::clone(self.live().dictionary());
        for q in self.store.iter() {
            let q = q?;
            let ids = {
                let mut d = dictionary.write().unwrap_or_else(|e| e.into_inner());
                QuadIds::intern(&mut d, q.as_ref())
            };
            edges
                .entry(ids.graph)
                .or_default()
                .entry(ids.predicate)
                .or_default()
                .push((ids.subject, ids.object));
            let occ = occurrences.entry(ids.graph).or_default();
            *occ.entry(ids.subject).or_insert(0) += 1;
            *occ.entry(ids.object).or_insert(0) += 1;
        }
        let mut live = self.live();
        let n = id_space(live.term_count()) as u64;
        let trees = edges
            .into_iter()
            .map(|(g, rels)| {
                let rels = rels
                    .into_iter()
                    .map(|(p, e)| (p, Arc::new(K2Tree::from_edges(n, n, e))))
                    .collect();
                (g, rels)
            })
            .collect();
        live.set_base(trees, occurrences);
        drop(live);
        self.cache.evict_where(|_| true);
        self.checkpoint_locked()
    }

    /// Makes the next write fail on `side` (for tests of the failure paths).
    #[doc(hidden)]
    pub fn inject_failure(&self, side: InjectedFailure) {
        *self.failure.lock().unwrap_or_else(|e| e.into_inner()) = Some(side);
    }

    fn take_failure(&self, side: InjectedFailure) -> bool {
        let mut f = self.failure.lock().unwrap_or_else(|e| e.into_inner());
        if *f == Some(side) {
            *f = None;
            true
        } else {
            false
        }
    }

    /// Runs `f` in one Oxigraph transaction and applies the quads it inserted and
    /// deleted to the relations, in the same order, once Oxigraph committed. An error of
    /// `f`, of Oxigraph or of k2rpq rolls the whole write back: neither side changes.
    pub fn transaction<T>(
        &self,
        f: impl FnOnce(&mut K2Transaction<'_>) -> Result<T, OxigraphError>,
    ) -> Result<T, OxigraphError> {
        let _writer = self.writer.lock().unwrap_or_else(|e| e.into_inner());
        if self.crashed.load(std::sync::atomic::Ordering::Relaxed) {
            return Err(OxigraphError::Relations(
                "the store stopped taking writes after a failure: reopen it".into(),
            ));
        }
        let dictionary = Arc::clone(self.live().dictionary());
        let known = dictionary.read().unwrap_or_else(|e| e.into_inner());
        let first_fresh = known.len() as u32;
        let mut t = K2Transaction {
            tx: self.store.start_transaction()?,
            fresh: known.sibling(),
            dictionary: known,
            first_fresh,
            touched: IndexMap::default(),
            live: &self.live,
        };
        let value = f(&mut t)?;
        let (tx, fresh, ids) = t.finish();
        // k2rpq's side first: the new terms get the next ids (a term numbered for a write
        // that does not commit is never used by a relation).
        if self.take_failure(InjectedFailure::Relations) {
            return Err(OxigraphError::Relations(
                "injected failure while preparing the relations' changes".into(),
            ));
        }
        {
            let mut d = dictionary.write().unwrap_or_else(|e| e.into_inner());
            for (i, (key, term)) in fresh.into_keyed_terms().into_iter().enumerate() {
                if d.intern_key(key, term.as_ref()) != first_fresh + i as u32 {
                    return Err(OxigraphError::Relations(
                        "the dictionary changed during the write".into(),
                    ));
                }
            }
        }
        // Durable before Oxigraph commits: a kill after the commit finds the record.
        let mut seq = None;
        if let Some(log) = &self.log {
            let mut log = log.lock().unwrap_or_else(|e| e.into_inner());
            let terms = self.live().terms_from(log.persisted_terms());
            seq = Some(log.append(&terms, &ids)?);
        }
        let abort = |e: OxigraphError| {
            if let (Some(log), Some(seq)) = (&self.log, seq) {
                if log
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .abort(seq)
                    .is_err()
                {
                    // Without the abort marker a later record would follow one that
                    // did not commit: take no more writes until reopened.
                    self.crashed
                        .store(true, std::sync::atomic::Ordering::Relaxed);
                }
            }
            e
        };
        if self.take_failure(InjectedFailure::CrashAfterLog) {
            self.crashed
                .store(true, std::sync::atomic::Ordering::Relaxed);
            return Err(OxigraphError::Relations(
                "injected crash after the log record".into(),
            ));
        }
        if self.take_failure(InjectedFailure::Commit) {
            return Err(abort(OxigraphError::Relations(
                "injected failure of the Oxigraph commit".into(),
            )));
        }
        tx.commit().map_err(|e| abort(e.into()))?;
        let jobs = {
            let mut live = self.live();
            for (q, inserted) in &ids {
                live.apply(*q, *inserted);
            }
            let mut touched: Vec<(GraphKey, PredId)> =
                ids.iter().map(|(q, _)| (q.graph, q.predicate)).collect();
            touched.sort_unstable();
            touched.dedup();
            touched
                .into_iter()
                .filter_map(|(g, p)| {
                    live.merge_job(g, p, self.merge_threshold)
                        .map(|j| (g, p, j))
                })
                .collect::<Vec<_>>()
        };
        for (g, p, job) in jobs {
            self.spawn_merge(g, p, job);
        }
        Ok(value)
    }

    /// Builds `job`'s tree on a background thread and swaps it in as the relation's base.
    fn spawn_merge(&self, g: GraphKey, p: PredId, job: Arc<PendingTree>) {
        let live = Arc::clone(&self.live);
        let handle = std::thread::spawn(move || {
            job.tree();
            live.lock()
                .unwrap_or_else(|e| e.into_inner())
                .finish_merge(g, p, &job);
        });
        let mut merges = self.merges.lock().unwrap_or_else(|e| e.into_inner());
        merges.retain(|h| !h.is_finished());
        merges.push(handle);
    }

    /// Waits for the background merges started so far.
    pub fn wait_for_merges(&self) {
        let handles = std::mem::take(&mut *self.merges.lock().unwrap_or_else(|e| e.into_inner()));
        for h in handles {
            // A panic of a merge leaves the relation's delta in place: nothing is lost.
            let _ = h.join();
        }
    }

    /// Inserts `quad`; whether it was new.
    pub fn insert<'a>(&self, quad: impl Into<QuadRef<'a>>) -> Result<bool, OxigraphError> {
        let quad = quad.into();
        self.transaction(|t| t.insert(quad))
    }

    /// Removes `quad`; whether it was there.
    pub fn remove<'a>(&self, quad: impl Into<QuadRef<'a>>) -> Result<bool, OxigraphError> {
        let quad = quad.into();
        self.transaction(|t| t.remove(quad))
    }

    /// Inserts `quads` in one transaction; how many were new.
    pub fn extend<'a>(
        &self,
        quads: impl IntoIterator<Item = impl Into<QuadRef<'a>>>,
    ) -> Result<usize, OxigraphError> {
        self.transaction(|t| t.extend(quads))
    }

    /// Whether the store holds `quad`.
    pub fn contains<'a>(&self, quad: impl Into<QuadRef<'a>>) -> Result<bool, OxigraphError> {
        Ok(self.store.contains(quad)?)
    }

    /// Quads held.
    pub fn len(&self) -> u64 {
        self.live().len()
    }

    /// Whether the store holds no quad.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Loads an RDF document in one transaction (all or nothing); `graph` receives its
    /// triples (quads keep their own graph). Returns how many quads were new.
    pub fn load_from_reader(
        &self,
        format: RdfFormat,
        reader: impl Read,
        graph: GraphNameRef<'_>,
    ) -> Result<usize, OxigraphError> {
        let parser = RdfParser::from_format(format).with_default_graph(graph.into_owned());
        let quads = parser
            .for_reader(reader)
            .collect::<Result<Vec<Quad>, _>>()
            .map_err(|e| OxigraphError::Load(e.to_string()))?;
        self.extend(quads.iter())
    }

    /// Loads a large RDF document with Oxigraph's bulk loader, all or nothing (a document
    /// that fails to parse leaves the store as it was), and then rebuilds the relations
    /// by streaming the store's quads once.
    pub fn bulk_load(&self, format: RdfFormat, reader: impl Read) -> Result<(), OxigraphError> {
        {
            let _writer = self.writer.lock().unwrap_or_else(|e| e.into_inner());
            let mut loader = self.store.bulk_loader();
            loader
                .load_from_reader(format, reader)
                .map_err(|e| OxigraphError::Load(e.to_string()))?;
            // Oxigraph's loader keeps what it read apart until its commit.
            loader.commit()?;
        }
        self.rebuild()
    }

    /// Runs a SPARQL 1.1 UPDATE request in one transaction, with the exact quads each of
    /// its operations inserts and deletes applied to the relations.
    pub fn update(&self, update: &str) -> Result<(), OxigraphError> {
        let parsed = spargebra::SparqlParser::new().parse_update(update)?;
        self.transaction(|t| super::update::apply(t, &parsed))
    }

    /// The relations as of now: queries started on it keep this version.
    fn snapshot(&self) -> Arc<Snapshot> {
        let mut live = self.live();
        let before = live.snapshot_version();
        let s = live.snapshot();
        drop(live);
        if before != Some(s.version()) {
            // Exactly the relations whose tree changed leave the cache (and unions
            // built over an older version).
            self.cache.evict_where(|(g, rel, id)| {
                let graph = s.graph((*g != u32::MAX).then_some(*g));
                match rel {
                    RelKey::Pred(p) => graph
                        .and_then(|gr| gr.view(*p))
                        .is_none_or(|v| v.tree_id() != *id),
                    RelKey::Union(_) => *id != s.version(),
                }
            });
        }
        s
    }

    /// A [`SparqlEvaluator`] whose `SERVICE <urn:k2rpq:paths>` calls k2rpq on the
    /// relations as of now; use it with queries rewritten by
    /// [`crate::sparql::rewrite::wrap_paths_in_service`].
    pub fn evaluator(&self) -> SparqlEvaluator {
        let engine = Arc::clone(&self.engine);
        let cache = self.cache.clone();
        let snapshot = self.snapshot();
        path_evaluator(move |pattern| {
            let provider = CachedProvider {
                cache: &cache,
                snapshot: &snapshot,
            };
            let terms = Arc::clone(&snapshot);
            answer_path_service(&*engine, &*snapshot, &provider, pattern, move |id| {
                terms.dictionary().term(id)
            })
        })
    }

    /// Answers any SPARQL query: property paths by k2rpq over the relations (no scan of
    /// the store), the rest by Oxigraph.
    pub fn query(&self, query: &str) -> Result<QueryResults<'static>, OxigraphError> {
        execute(&self.store, query, || Ok(self.evaluator()))
    }

    /// Numbers about the relations (for tests and benchmarks).
    pub fn stats(&self) -> EmbeddingStats {
        let live = self.live();
        EmbeddingStats {
            version: live.version(),
            quads: live.len(),
            terms: live.term_count() as u64,
            delta_changes: live.delta_len() as u64,
        }
    }

    /// Time to take a snapshot of the relations, as a query does (for benchmarks).
    #[doc(hidden)]
    pub fn time_snapshot(&self) -> Duration {
        let t0 = Instant::now();
        let _ = self.snapshot();
        t0.elapsed()
    }
}

impl<E: Engine + 'static> Drop for K2Store<E> {
    fn drop(&mut self) {
        self.wait_for_merges();
    }
}

/// Numbers about a [`K2Store`]'s relations.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EmbeddingStats {
    /// Changes applied since it was opened.
    pub version: u64,
    /// Quads in the relations.
    pub quads: u64,
    /// Terms in the dictionary.
    pub terms: u64,
    /// Changes held in deltas, not yet merged into trees.
    pub delta_changes: u64,
}

/// The quad of `q`'s ids, with `term` giving each id's term.
fn quad_of(q: QuadIds, term: impl Fn(u32) -> Option<oxrdf::Term>) -> Option<Quad> {
    let subject = match term(q.subject)? {
        oxrdf::Term::NamedNode(n) => oxrdf::NamedOrBlankNode::from(n),
        oxrdf::Term::BlankNode(b) => b.into(),
        oxrdf::Term::Literal(_) => return None,
    };
    let oxrdf::Term::NamedNode(predicate) = term(q.predicate)? else {
        return None;
    };
    let graph_name = match q.graph {
        None => GraphName::DefaultGraph,
        Some(g) => match term(g)? {
            oxrdf::Term::NamedNode(n) => GraphName::NamedNode(n),
            oxrdf::Term::BlankNode(b) => GraphName::BlankNode(b),
            oxrdf::Term::Literal(_) => return None,
        },
    };
    Some(Quad::new(subject, predicate, term(q.object)?, graph_name))
}

/// The dictionary keys of one quad's terms, computed on a first pass over them and
/// replayed on the next ([`QuadIds::of`] visits them in the same order each time), so a
/// new quad's terms are hashed once.
#[derive(Default)]
struct QuadKeys {
    keys: [TermKey; 4],
    len: usize,
    next: usize,
}

impl QuadKeys {
    /// The key of `t`, the next term of the pass.
    fn key(&mut self, d: &MemoryDictionary, t: TermRef<'_>) -> TermKey {
        if self.next < self.len {
            self.next += 1;
            return self.keys[self.next - 1];
        }
        let k = d.key(t);
        self.keys[self.len] = k;
        self.len += 1;
        self.next = self.len;
        k
    }

    /// Starts the next pass.
    fn rewind(&mut self) {
        self.next = 0;
    }
}

/// The writes of one [`K2Store::transaction`]: each call goes to Oxigraph's transaction
/// and is recorded as an exact change (a quad inserted that was absent, or deleted that
/// was present).
pub struct K2Transaction<'a> {
    tx: Transaction<'a>,
    /// The store's dictionary, read-locked once for the whole transaction rather than
    /// per quad. Only a writer adds terms to it and the store's writer lock is held, so
    /// no one waits for this lock meanwhile.
    dictionary: RwLockReadGuard<'a, MemoryDictionary>,
    /// Terms of changes that the dictionary lacks, numbered from `first_fresh` on (kept
    /// apart so that a write that does not commit leaves the dictionary as it was). Its
    /// keys are the dictionary's, so each term is hashed once for both.
    fresh: MemoryDictionary,
    first_fresh: u32,
    /// Per quad touched (by its ids: no owned quad, and a cheap hash), in the order first
    /// touched: (present before the transaction, present now). Keying by the owned quad
    /// cost an allocation per term and a SipHash of the strings: 16 % of insert time,
    /// measured with k2rpq-bench embedding.
    touched: IndexMap<QuadIds, (bool, bool), FxBuildHasher>,
    /// The store's relations, which answer whether a quad without literals is present.
    live: &'a Mutex<Live>,
}

impl<'a> K2Transaction<'a> {
    /// The ids of `quad`'s terms (of `keys`, their dictionary keys) if each is known, to
    /// the dictionary or as a term this transaction numbered (otherwise the quad was
    /// never touched).
    fn known_ids(&self, quad: QuadRef<'_>, keys: &mut QuadKeys) -> Option<QuadIds> {
        let (d, fresh, first) = (&*self.dictionary, &self.fresh, self.first_fresh);
        QuadIds::of(quad, |t| {
            let key = keys.key(d, t);
            d.id_of_key(key)
                .or_else(|| Some(first + fresh.id_of_key(key)?))
        })
    }

    /// The ids of `quad`'s terms, numbering those known nowhere.
    fn number_ids(&mut self, quad: QuadRef<'_>, keys: &mut QuadKeys) -> QuadIds {
        keys.rewind();
        let (d, fresh, first) = (&*self.dictionary, &mut self.fresh, self.first_fresh);
        QuadIds::of(quad, |t| {
            let key = keys.key(d, t);
            Some(
                d.id_of_key(key)
                    .unwrap_or_else(|| first + fresh.intern_key(key, t)),
            )
        })
        .expect("numbering gives every term an id")
    }

    /// Whether `quad` (with `known` ids, if all its terms have one) was present before
    /// this transaction, from the relations when they can tell: Oxigraph identifies IRIs
    /// and blank nodes by their lexical form as the dictionary does, so without a literal
    /// a term the dictionary lacks is in no quad, and otherwise the relations hold the
    /// quad exactly when Oxigraph does. Asking Oxigraph costs encoding the quad and a
    /// probe of its index: 6 % of an insert's time, measured with k2rpq-bench embedding.
    fn was_present(
        &self,
        quad: QuadRef<'_>,
        known: Option<QuadIds>,
    ) -> Result<bool, OxigraphError> {
        if !matches!(quad.object, TermRef::NamedNode(_) | TermRef::BlankNode(_)) {
            // A typed literal is one of its values' forms ("01" and "1" as xsd:integer are
            // one term to Oxigraph, two to the dictionary): only Oxigraph can tell.
            return Ok(self.tx.contains(quad)?);
        }
        Ok(match known {
            // A term this transaction numbered was in no quad before it.
            Some(ids) if !self.is_fresh(ids) => self
                .live
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .contains(ids),
            _ => false,
        })
    }

    /// Whether one of `ids` is a term this transaction numbered.
    fn is_fresh(&self, ids: QuadIds) -> bool {
        let first = self.first_fresh;
        ids.graph.is_some_and(|g| g >= first)
            || ids.subject >= first
            || ids.predicate >= first
            || ids.object >= first
    }

    /// Sets `quad` present (`now`) if it is not already; whether it changed. Terms are
    /// numbered only for a change, so a no-op leaves no term behind.
    fn change(&mut self, quad: QuadRef<'_>, now: bool) -> Result<bool, OxigraphError> {
        let mut keys = QuadKeys::default();
        let known = self.known_ids(quad, &mut keys);
        if let Some(state) = known.and_then(|ids| self.touched.get_mut(&ids)) {
            if state.1 == now {
                return Ok(false);
            }
            state.1 = now;
        } else {
            if self.was_present(quad, known)? == now {
                return Ok(false);
            }
            let ids = match known {
                Some(ids) => ids,
                None => self.number_ids(quad, &mut keys),
            };
            self.touched.insert(ids, (!now, now));
        }
        if now {
            self.tx.insert(quad);
        } else {
            self.tx.remove(quad);
        }
        Ok(true)
    }

    /// Inserts `quad`; whether it was new.
    pub fn insert<'b>(&mut self, quad: impl Into<QuadRef<'b>>) -> Result<bool, OxigraphError> {
        self.change(quad.into(), true)
    }

    /// Removes `quad`; whether it was there.
    pub fn remove<'b>(&mut self, quad: impl Into<QuadRef<'b>>) -> Result<bool, OxigraphError> {
        self.change(quad.into(), false)
    }

    /// Inserts `quads`; how many were new.
    pub fn extend<'b>(
        &mut self,
        quads: impl IntoIterator<Item = impl Into<QuadRef<'b>>>,
    ) -> Result<usize, OxigraphError> {
        let mut n = 0;
        for q in quads {
            n += usize::from(self.insert(q)?);
        }
        Ok(n)
    }

    /// Whether `quad` is present (writes of this transaction included).
    pub fn contains<'b>(&self, quad: impl Into<QuadRef<'b>>) -> Result<bool, OxigraphError> {
        let quad = quad.into();
        let known = self.known_ids(quad, &mut QuadKeys::default());
        match known.and_then(|ids| self.touched.get(&ids)) {
            Some(&(_, now)) => Ok(now),
            None => self.was_present(quad, known),
        }
    }

    /// Runs a SPARQL UPDATE request inside this transaction.
    pub fn update(&mut self, update: &str) -> Result<(), OxigraphError> {
        let parsed = spargebra::SparqlParser::new().parse_update(update)?;
        super::update::apply(self, &parsed)
    }

    pub(crate) fn oxigraph(&self) -> &Transaction<'a> {
        &self.tx
    }

    pub(crate) fn oxigraph_mut(&mut self) -> &mut Transaction<'a> {
        &mut self.tx
    }

    pub(crate) fn contains_named_graph(&self, g: &NamedNode) -> Result<bool, OxigraphError> {
        Ok(self.tx.contains_named_graph(g)?)
    }

    /// Removes every quad of graph `g`.
    pub(crate) fn clear_graph(&mut self, g: &GraphName) -> Result<(), OxigraphError> {
        let quads: Vec<Quad> = self
            .tx
            .quads_for_pattern(None, None, None, Some(g.as_ref()))
            .collect::<Result<_, _>>()?;
        for q in &quads {
            self.remove(q)?;
        }
        Ok(())
    }

    /// Removes every quad of every named graph, and the graphs too when `drop`.
    pub(crate) fn clear_named_graphs(&mut self, drop: bool) -> Result<(), OxigraphError> {
        let graphs: Vec<_> = self.tx.named_graphs().collect::<Result<_, _>>()?;
        for g in &graphs {
            self.clear_graph(&g.clone().into())?;
            if drop {
                self.tx.remove_named_graph(NamedOrBlankNodeRef::from(g))?;
            }
        }
        Ok(())
    }

    /// The Oxigraph transaction, the terms the dictionary lacks (to number from
    /// `first_fresh` on, in order) and the net changes, in the order first touched. The
    /// dictionary's read lock is released.
    fn finish(self) -> (Transaction<'a>, MemoryDictionary, Vec<(QuadIds, bool)>) {
        let changes = self
            .touched
            .into_iter()
            .filter_map(|(q, (before, now))| (before != now).then_some((q, now)))
            .collect();
        (self.tx, self.fresh, changes)
    }
}

/// Relation sources over the engine's cache, keyed by the content of each tree.
struct CachedProvider<'c, E: Engine> {
    cache: &'c DeviceCache<E, ResidentKey>,
    snapshot: &'c Snapshot,
}

impl<'a, E: Engine + 'static> RelationProvider<'a, E> for CachedProvider<'a, E> {
    fn source(
        &self,
        name: Option<u32>,
        graph: &'a dyn PathGraph,
    ) -> Box<dyn RelationSource<E> + 'a> {
        let snapshot = self.snapshot;
        let code = graph_code(name);
        Box::new(CachedRelations::new(
            self.cache,
            graph,
            MatrixConfig::default(),
            move |key| {
                let content: TreeId = match key {
                    RelKey::Pred(p) => snapshot.graph(name)?.view(*p)?.tree_id(),
                    RelKey::Union(_) => snapshot.version(),
                };
                Some((code, key.clone(), content))
            },
        ))
    }
}
