//! An opened store together with the engines that evaluate on it: the entry point for
//! path queries from the CLI, the benchmarks and embedders.
//!
//! Queries run on the GPU engine when one is usable and the query touches enough edges to
//! pay for the device (see [`EngineChoice::Auto`]), except var→var queries whose sparse
//! host walks cost less than the device's batches ([`crate::rpq::route`]); relations stay
//! resident on the device across queries in a [`DeviceCache`] under a byte budget.
//!
//! ```no_run
//! use k2rpq::database::{Database, DatabaseOptions};
//! use k2rpq::rpq::{parse_log_line, EvalOptions};
//! let db = Database::open("codex.store".as_ref(), &DatabaseOptions::default()).unwrap();
//! let q = parse_log_line("<http://www.wikidata.org/entity/Q183> <http://www.wikidata.org/prop/direct/P530>+ ?y").unwrap();
//! let answer = db.run_log_query(&q, &EvalOptions::default()).unwrap();
//! println!("{} rows on the {} engine", answer.result.count, answer.engine);
//! ```

use std::path::Path as FsPath;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use oxrdf::{NamedNode, NamedNodeRef, Term, TermRef};
use roaring::RoaringBitmap;

use crate::cache::{
    CacheError, CacheOptions, CacheStats, DeviceCache, MemoryBudget, DEFAULT_BUDGET,
};
use crate::engine::cpu::CpuEngine;
use crate::engine::gpu::{
    check_driver, open_or_notice_with, DevicesError, GpuEngine, GpuOptions, GpuSelection,
};
use crate::engine::host_probe::HostProbe;
use crate::engine::{Engine, MatrixConfig};
use crate::k2tree::K2Tree;
use crate::rpq::terms::TermLookup;
use crate::rpq::{
    self, union_tree, Endpoint, EvalOptions, Loaded, LogEndpoint, LogQuery, MatrixHandle, Path,
    PathGraph, PathResult, PerQueryRelations, Plan, PredId, RelKey, RelationSource, RpqError,
    Share,
};
use crate::sparql::group::{
    evaluate_group, evaluate_group_in_batches, small_streamed_answer, DefaultGraph, GraphScope,
    GroupSolutions, IdRow, IdRows, PathGroup, RowBatch, ValuesTable,
};
use crate::sparql::rewrite::{
    wrap_paths_and_small_subqueries_in_service, wrap_paths_in_service, SERVICE_IRI,
};
use crate::sparql::semantics::Deadline;
use crate::sparql::{
    self, watchdog, CancellationToken, PathDataset, QueryResults, QuerySolutionIter,
    RelationProvider, SparqlError, StoreQuads,
};
use crate::store::{GraphId, Store, StoreError};
use spareval::{QueryEvaluator, ServiceHandler};

/// Which engine evaluates queries.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum EngineChoice {
    /// The GPU when one is usable, except for queries whose relations hold fewer than
    /// [`AUTO_GPU_MIN_EDGES`] edges (they run on the CPU: there a device round trip costs
    /// more than the whole query) and var→var queries that host walks answer faster (as
    /// with [`EngineChoice::Gpu`]); the CPU without a GPU, after a one-line notice.
    #[default]
    Auto,
    /// Always the CPU engine.
    Cpu,
    /// The GPU engine; an error when no GPU is usable and a query needs one. A
    /// constant start, or up to 4,096 bound start nodes, that the host walks in front of
    /// the device under a small budget needs none. A var→var query whose sampled
    /// host walk and the device's cost model say the CPU engine's sparse walks win
    /// ([`crate::rpq::route`]) runs on those walks, unless
    /// [`EvalOptions::host_walk`] is off, which keeps every query on the device.
    Gpu,
}

impl EngineChoice {
    /// Every choice, in the order the CLI lists them.
    pub const ALL: [EngineChoice; 3] = [EngineChoice::Auto, EngineChoice::Cpu, EngineChoice::Gpu];

    /// Its name: `auto`, `cpu` or `gpu`.
    pub fn name(self) -> &'static str {
        match self {
            EngineChoice::Auto => "auto",
            EngineChoice::Cpu => "cpu",
            EngineChoice::Gpu => "gpu",
        }
    }
}

impl std::fmt::Display for EngineChoice {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

impl std::str::FromStr for EngineChoice {
    type Err = DatabaseError;

    fn from_str(s: &str) -> Result<Self, DatabaseError> {
        EngineChoice::ALL
            .into_iter()
            .find(|c| c.name().eq_ignore_ascii_case(s.trim()))
            .ok_or_else(|| DatabaseError::UnknownEngine(s.to_owned()))
    }
}

impl EngineChoice {
    /// The GPU engines this choice runs on, one per device of `selection` (`None`: GPU
    /// 0), each with `options`: none for `Cpu`; for `Gpu`, an error when a device is not
    /// usable; for `Auto`, none after a one-line notice when the default or `all`
    /// selection finds no usable GPU (an explicit list must still be honoured). An empty
    /// answer means: run on the CPU engine.
    ///
    /// ```
    /// use k2rpq::database::EngineChoice;
    /// use k2rpq::engine::gpu::GpuOptions;
    /// assert!(EngineChoice::Cpu.gpu_engines(None, GpuOptions::default()).unwrap().is_empty());
    /// ```
    pub fn gpu_engines(
        self,
        selection: Option<&GpuSelection>,
        options: GpuOptions,
    ) -> Result<Vec<GpuEngine>, DatabaseError> {
        Ok(match self {
            EngineChoice::Cpu => Vec::new(),
            EngineChoice::Gpu => selection
                .cloned()
                .unwrap_or_default()
                .open_with(options)
                .map_err(|e| DatabaseError::NoGpu(e.to_string()))?,
            EngineChoice::Auto => open_or_notice_with(selection, options)?.unwrap_or_default(),
        })
    }
}

/// Queries whose relations hold fewer edges than this run on the CPU under
/// [`EngineChoice::Auto`].
pub const AUTO_GPU_MIN_EDGES: u64 = 1 << 20;

/// How to open a [`Database`].
#[derive(Clone, Debug, Default)]
pub struct DatabaseOptions {
    /// Engine selection.
    pub engine: EngineChoice,
    /// Device memory for resident relations plus query working memory (`8GiB`, `60%` of
    /// the free memory, ...); default [`DEFAULT_BUDGET`]. Applies to each GPU on its own
    /// (each has its own cache under this budget).
    pub gpu_budget: Option<MemoryBudget>,
    /// The GPUs (`--gpus`); `None`: GPU 0 only, as a single-GPU build. With
    /// [`EngineChoice::Auto`], `None` and `all` fall back to the CPU with a notice when no
    /// GPU is usable, and an explicit list naming an absent device is an error.
    pub gpus: Option<GpuSelection>,
    /// Host memory for the line lists of the store's relations (`2GiB`, `512MB`, `10%`
    /// of physical memory, `0` for none); default [`crate::k2tree::DEFAULT_LINE_MEMORY`].
    /// See [`crate::k2tree::K2Tree::lines_after`] for when lists are built.
    pub line_memory: Option<MemoryBudget>,
    /// Tunables of the GPU engines (e.g. [`GpuOptions::frontier`], the layout of the
    /// resident relations' cached frontiers).
    pub gpu_options: GpuOptions,
}

/// Errors of the database layer.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum DatabaseError {
    /// The store cannot be opened or read.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// Planning or evaluation failed.
    #[error(transparent)]
    Rpq(#[from] RpqError),
    /// The GPU was asked for and is not usable.
    #[error("no usable GPU: {0}")]
    NoGpu(String),
    /// A GPU budget that grants no memory.
    #[error("GPU budget: {0}")]
    Budget(#[source] crate::cache::BudgetError),
    /// An engine name other than `auto`, `cpu` and `gpu`.
    #[error("unknown engine {0:?} (one of auto, cpu, gpu)")]
    UnknownEngine(String),
    /// A line memory budget that cannot be applied.
    #[error("line memory: {0}")]
    LineMemory(#[source] crate::cache::BudgetError),
    /// A `--gpus` list naming a device that is absent or unusable.
    #[error(transparent)]
    Gpus(#[from] DevicesError),
}

/// The bytes of a line memory budget: a share is taken of
/// [`crate::k2tree::physical_memory`]; `0` builds no lists.
pub fn line_memory_bytes(budget: MemoryBudget) -> Result<u64, DatabaseError> {
    budget
        .bytes_of(crate::k2tree::physical_memory())
        .map_err(DatabaseError::LineMemory)
}

/// The bytes of a GPU budget on a device with `free` bytes free; zero is refused.
fn gpu_budget_bytes(budget: Option<MemoryBudget>, free: u64) -> Result<u64, DatabaseError> {
    let budget = budget.unwrap_or(DEFAULT_BUDGET);
    match budget.bytes_of(free).map_err(DatabaseError::Budget)? {
        0 => Err(DatabaseError::Budget(crate::cache::BudgetError {
            text: budget.to_string(),
            reason: "a GPU budget must be at least one byte".into(),
        })),
        bytes => Ok(bytes),
    }
}

/// Whether a GPU is usable here; the reason when not.
pub fn gpu_available() -> Result<(), String> {
    crate::engine::gpu::available(0).map(|_| ())
}

/// One graph of a store seen as a [`PathGraph`].
///
/// Store errors met while mapping a relation (a corrupt file) cannot cross the
/// `PathGraph` interface, so the first one is kept and reported after the evaluation.
pub struct StoreGraph {
    store: Arc<Store>,
    graph: GraphId,
    nodes: OnceLock<RoaringBitmap>,
    error: Mutex<Option<StoreError>>,
}

impl StoreGraph {
    /// Graph `graph` of `store`.
    pub fn new(store: Arc<Store>, graph: GraphId) -> Self {
        StoreGraph {
            store,
            graph,
            nodes: OnceLock::new(),
            error: Mutex::new(None),
        }
    }

    /// The first store error met so far, if any (taking it).
    pub fn take_error(&self) -> Option<StoreError> {
        self.error.lock().unwrap().take()
    }

    fn record(&self, e: StoreError) {
        self.error.lock().unwrap().get_or_insert(e);
    }
}

impl PathGraph for StoreGraph {
    fn node_count(&self) -> u32 {
        self.store.node_count()
    }

    fn nodes(&self) -> &RoaringBitmap {
        self.nodes
            .get_or_init(|| match self.store.graph_nodes(self.graph) {
                Ok(b) => b,
                Err(e) => {
                    self.record(e);
                    RoaringBitmap::new()
                }
            })
    }

    fn predicates(&self) -> Vec<PredId> {
        self.store
            .predicates(self.graph)
            .iter()
            .map(|p| p.id)
            .collect()
    }

    fn relation(&self, p: PredId) -> Option<Arc<K2Tree>> {
        match self.store.relation(self.graph, p) {
            Ok(r) => r,
            Err(e) => {
                self.record(e);
                None
            }
        }
    }
}

/// The store's dictionary as the RPQ layer's [`TermLookup`].
pub struct StoreTerms(pub Arc<Store>);

impl TermLookup for StoreTerms {
    fn iri_id(&self, iri: &str) -> Option<u32> {
        self.0
            .dictionary()
            .id(TermRef::NamedNode(NamedNodeRef::new_unchecked(iri)))
    }
    fn term(&self, id: u32) -> Option<String> {
        self.0.dictionary().term(id).map(|t| t.to_string())
    }
}

/// Key of a resident relation: graph and predicate (or union of predicates).
type ResidentKey = (GraphId, RelKey);

/// The cache key of a relation; `None` for one the graph lacks, which is not cached.
type RelationKey<'a, K> = Box<dyn Fn(&RelKey) -> Option<K> + Send + 'a>;

/// Relations served from a [`DeviceCache`] under keys of type `K`: pinned for the
/// evaluation, resident after.
pub(crate) struct CachedRelations<'a, E: Engine, K> {
    cache: &'a DeviceCache<E, K>,
    graph: &'a dyn PathGraph,
    key: RelationKey<'a, K>,
    config: MatrixConfig,
    loads: u32,
    load_time: Duration,
}

impl<'a, E: Engine, K> CachedRelations<'a, E, K> {
    /// The relations of `graph` in `cache` under the keys `key` gives, loaded in `config`.
    pub(crate) fn new(
        cache: &'a DeviceCache<E, K>,
        graph: &'a dyn PathGraph,
        config: MatrixConfig,
        key: impl Fn(&RelKey) -> Option<K> + Send + 'a,
    ) -> Self {
        CachedRelations {
            cache,
            graph,
            key: Box::new(key),
            config,
            loads: 0,
            load_time: Duration::ZERO,
        }
    }
}

impl<'a, E: Engine> CachedRelations<'a, E, ResidentKey> {
    /// The relations of the store's graph `graph_id`, `graph`.
    fn of_store_graph(
        cache: &'a DeviceCache<E, ResidentKey>,
        graph: &'a dyn PathGraph,
        graph_id: GraphId,
        config: MatrixConfig,
    ) -> Self {
        CachedRelations::new(cache, graph, config, move |key| match key {
            // Absent relations are not cached: the store answers that from its manifest.
            RelKey::Pred(p) if graph.relation(*p).is_none() => None,
            _ => Some((graph_id, key.clone())),
        })
    }
}

impl<E, K> RelationSource<E> for CachedRelations<'_, E, K>
where
    E: Engine + 'static,
    K: std::hash::Hash + Eq + Clone + Send + Sync + 'static,
{
    fn relation(&mut self, key: &RelKey) -> Result<Option<Loaded<E::Matrix>>, RpqError> {
        let t0 = Instant::now();
        let Some(cache_key) = (self.key)(key) else {
            return Ok(None);
        };
        let loaded = load_resident(self.cache, cache_key, self.graph, key, self.config)?;
        self.loads += 1;
        self.load_time += t0.elapsed();
        Ok(Some(loaded))
    }

    fn load_stats(&self) -> (u32, Duration) {
        (self.loads, self.load_time)
    }
}

/// The relation `rel` of `graph` from `cache` under `key` (built from the graph's tree, or
/// the union of its predicates' trees, when absent), pinned for as long as the returned
/// matrix lives.
pub(crate) fn load_resident<E, K>(
    cache: &DeviceCache<E, K>,
    key: K,
    graph: &dyn PathGraph,
    rel: &RelKey,
    config: MatrixConfig,
) -> Result<Loaded<E::Matrix>, RpqError>
where
    E: Engine + 'static,
    K: std::hash::Hash + Eq + Clone + Send + Sync + 'static,
{
    let pinned = cache
        .get(
            key,
            || match rel {
                RelKey::Pred(p) => graph.relation(*p).expect("checked by the caller"),
                RelKey::Union(ps) => union_tree(graph, ps),
            },
            config,
        )
        .map_err(|e| match e {
            CacheError::Engine(e) => RpqError::Engine(e),
            other => RpqError::Options(format!("device cache: {other}")),
        })?;
    let tree = cache.engine().matrix_tree(&pinned);
    let (nnz, height) = (tree.nnz(), tree.height());
    let matrix: MatrixHandle<E::Matrix> = Arc::new(pinned);
    Ok(Loaded {
        matrix,
        nnz,
        height,
    })
}

/// The answer to one path query.
#[derive(Debug)]
pub struct PathAnswer {
    /// Distinct `(start, end)` id pairs and the trace.
    pub result: PathResult,
    /// The engine that ran it (`cpu`, `gpu`, or `none` when no engine was needed).
    pub engine: &'static str,
}

/// One GPU of a [`Database`]: its engine and relation cache (under its own budget), and
/// the queries running on it now (for placement).
struct Device {
    cache: DeviceCache<GpuEngine, ResidentKey>,
    busy: AtomicUsize,
}

/// Counts a query as running on a device while it lives.
struct Busy<'a>(&'a AtomicUsize);

impl<'a> Busy<'a> {
    fn claim(d: &'a Device) -> Self {
        d.busy.fetch_add(1, Ordering::SeqCst);
        Busy(&d.busy)
    }
}

impl Drop for Busy<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

/// The GPUs of a [`Database`], set up (contexts, kernels, device caches) the first time a
/// query needs one: a query that runs on the CPU, or is rejected, never pays for them.
struct Gpus {
    choice: EngineChoice,
    selection: Option<GpuSelection>,
    options: GpuOptions,
    budget: Option<MemoryBudget>,
    /// The devices once set up, or why they could not be.
    devices: OnceLock<Result<Arc<[Device]>, String>>,
}

impl Gpus {
    /// The GPUs `options` ask for, not set up yet. An explicit `--gpus` list is checked
    /// against the devices the driver reports (no context is made): naming a GPU that is
    /// absent is an error here, not at the first query. `--engine gpu` alone only checks
    /// that the driver's library loads: initialising the driver takes about 0.1 s in a
    /// new process, paid when a query first needs a device (a missing one is an error
    /// then).
    fn new(options: &DatabaseOptions) -> Result<Gpus, DatabaseError> {
        match (options.engine, &options.gpus) {
            (EngineChoice::Cpu, _) => {}
            (EngineChoice::Gpu, Some(s @ GpuSelection::List(_))) => {
                s.ordinals()
                    .map_err(|e| DatabaseError::NoGpu(e.to_string()))?;
            }
            (EngineChoice::Gpu, _) => {
                check_driver().map_err(|e| DatabaseError::NoGpu(e.to_string()))?;
            }
            (EngineChoice::Auto, Some(s @ GpuSelection::List(_))) => {
                s.ordinals()?;
            }
            (EngineChoice::Auto, _) => {}
        }
        Ok(Gpus {
            choice: options.engine,
            selection: options.gpus.clone(),
            options: options.gpu_options,
            budget: options.gpu_budget,
            devices: OnceLock::new(),
        })
    }

    /// The devices, set up on the first call: none on the CPU, and none (after a notice)
    /// under [`EngineChoice::Auto`] when no GPU is usable; with [`EngineChoice::Gpu`] a
    /// GPU that cannot be set up is an error.
    fn get(&self) -> Result<&[Device], DatabaseError> {
        let devices = self.devices.get_or_init(|| {
            let started = Instant::now();
            let engines = self
                .choice
                .gpu_engines(self.selection.as_ref(), self.options)
                .map_err(|e| e.to_string())?;
            let mut gpus = Vec::with_capacity(engines.len());
            for engine in engines {
                // Each device's budget is taken from its own free memory.
                let free = engine
                    .cuda_context()
                    .mem_get_info()
                    .map(|(free, _)| free as u64)
                    .unwrap_or(engine.device().total_memory);
                let budget = gpu_budget_bytes(self.budget, free).map_err(|e| e.to_string())?;
                gpus.push(Device {
                    cache: DeviceCache::new(Arc::new(engine), CacheOptions::with_budget(budget)),
                    busy: AtomicUsize::new(0),
                });
            }
            log::debug!(
                "{} GPU engine(s) set up in {:.1} ms",
                gpus.len(),
                started.elapsed().as_secs_f64() * 1e3
            );
            Ok(gpus.into())
        });
        match devices {
            Ok(d) => Ok(d),
            Err(e) => Err(DatabaseError::NoGpu(e.clone())),
        }
    }

    /// Whether the devices were set up, or found unusable, already.
    fn attempted(&self) -> bool {
        self.devices.get().is_some()
    }

    /// The devices if they are set up already (none otherwise).
    fn ready(&self) -> &[Device] {
        match self.devices.get() {
            Some(Ok(d)) => d,
            _ => &[],
        }
    }
}

/// An opened store and its engines.
///
/// With several GPUs ([`DatabaseOptions::gpus`]) each has its own [`DeviceCache`]. A plan
/// with one batch (a constant end, or few start candidates) runs on one GPU: the least
/// busy one, and among those the one already holding most of the plan's edges, so that
/// relations used together stay together and a relation is loaded on a second GPU only
/// when queries on it run there at the same time (hot relations end up replicated, cold
/// ones are evicted by each device's LRU). A var→var plan with several batches is split
/// across all the GPUs ([`rpq::evaluate_split`]): each loads the plan's relations (they
/// must fit each device's budget) and takes batches from a shared counter.
pub struct Database {
    store: Arc<Store>,
    /// The store as the SPARQL layer's dataset (graph node sets are cached in it), shared
    /// with the path service of each query.
    dataset: Arc<StoreDataset>,
    choice: EngineChoice,
    cpu: CpuEngine,
    gpus: Arc<Gpus>,
    /// Groups the path service evaluated on the CPU (0) and on a GPU (1).
    path_runs: Arc<[AtomicU64; 2]>,
}

impl Database {
    /// Opens the store in `dir`; the GPU engine, unless the CPU is asked for, is set up
    /// when a query first needs it (a query the host walks answer never does). With
    /// [`EngineChoice::Gpu`] a missing driver is an error here and a missing device an
    /// error of the first query that needs it; with `Auto` an unusable GPU is a one-line
    /// notice once a query asks for it.
    pub fn open(dir: &FsPath, options: &DatabaseOptions) -> Result<Database, DatabaseError> {
        // A budget that grants nothing is an error even where no GPU will use it (`auto`
        // on a host without one), so that a command line means the same on every host.
        gpu_budget_bytes(options.gpu_budget, 1 << 30)?;
        let store = Arc::new(Store::open(dir)?);
        if let Some(budget) = options.line_memory {
            store.line_budget().set_limit(line_memory_bytes(budget)?);
        }
        let gpus = Gpus::new(options)?;
        Ok(Database {
            dataset: Arc::new(StoreDataset::new(store.clone())),
            store,
            choice: options.engine,
            cpu: CpuEngine::new(),
            gpus: Arc::new(gpus),
            path_runs: Default::default(),
        })
    }

    /// The store.
    pub fn store(&self) -> &Arc<Store> {
        &self.store
    }

    /// Whether queries may run on the GPU (setting the GPUs up if no query has yet).
    pub fn has_gpu(&self) -> bool {
        self.gpus.get().is_ok_and(|d| !d.is_empty())
    }

    /// The ordinals of the GPUs in use (empty on the CPU), setting them up if no query
    /// has yet.
    pub fn gpu_ordinals(&self) -> Vec<usize> {
        self.gpus
            .get()
            .unwrap_or_default()
            .iter()
            .map(|d| d.cache.engine().device().ordinal)
            .collect()
    }

    /// Device cache statistics (hits, misses, evictions, bytes uploaded, peak), when a
    /// GPU is set up: summed over the GPUs (peak: the sum of the per-device peaks).
    pub fn gpu_stats(&self) -> Option<CacheStats> {
        let mut all = self.gpu_device_stats().into_iter().map(|(_, s)| s);
        let first = all.next()?;
        Some(all.fold(first, |mut a, s| {
            a.hits += s.hits;
            a.misses += s.misses;
            a.evictions += s.evictions;
            a.bytes_uploaded += s.bytes_uploaded;
            a.upload_time += s.upload_time;
            a.peak_bytes += s.peak_bytes;
            a.resident_bytes += s.resident_bytes;
            a.reserved_bytes += s.reserved_bytes;
            a.budget += s.budget;
            a.entries += s.entries;
            a.pinned_entries += s.pinned_entries;
            a.tree_only_loads += s.tree_only_loads;
            a.upgrades += s.upgrades;
            a.waits += s.waits;
            a
        }))
    }

    /// Device cache statistics per GPU, by ordinal (none before a query set them up).
    pub fn gpu_device_stats(&self) -> Vec<(usize, CacheStats)> {
        self.gpus
            .ready()
            .iter()
            .map(|d| (d.cache.engine().device().ordinal, d.cache.stats()))
            .collect()
    }

    /// The GPU a one-batch plan runs on: the least busy, then the one holding most of
    /// the plan's edges already, then the first.
    fn pick<'d>(&self, gpus: &'d [Device], graph: GraphId, plan: &Plan) -> &'d Device {
        let preds = self.store.predicates(graph);
        let edges = |p: PredId| {
            preds
                .iter()
                .find(|i| i.id == p)
                .map(|i| i.edges)
                .unwrap_or(0)
        };
        let resident = |d: &Device| -> u64 {
            plan.relations
                .iter()
                .flatten()
                .filter(|(k, _)| d.cache.contains(&(graph, k.clone())))
                .map(|(k, _)| match k {
                    RelKey::Pred(p) => edges(*p),
                    RelKey::Union(ps) => ps.iter().map(|&p| edges(p)).sum(),
                })
                .sum()
        };
        gpus.iter()
            .enumerate()
            .min_by_key(|(i, d)| {
                (
                    d.busy.load(Ordering::SeqCst),
                    std::cmp::Reverse(resident(d)),
                    *i,
                )
            })
            .map(|(_, d)| d)
            .expect("called with at least one GPU")
    }

    /// The term id of an IRI, if the store knows it.
    pub fn iri_id(&self, iri: &str) -> Option<u32> {
        self.store
            .dictionary()
            .id(TermRef::NamedNode(NamedNodeRef::new_unchecked(iri)))
    }

    /// The term of an id.
    pub fn term(&self, id: u32) -> Option<Term> {
        self.store.dictionary().term(id)
    }

    /// The terms of `ids`, in order: an answer's column decoded at once, faster than
    /// [`Database::term`] per id ([`Dictionary::terms`] overlaps their cache misses).
    ///
    /// [`Dictionary::terms`]: crate::store::Dictionary::terms
    pub fn terms(&self, ids: &[u32]) -> Vec<Option<Term>> {
        self.store.dictionary().terms(ids)
    }

    /// Resolves a log query's path against the dictionary.
    pub fn path_of(&self, q: &LogQuery) -> Path {
        rpq::parse_path_expr(&q.path, |iri| self.iri_id(iri))
    }

    /// Evaluates a log query on the default graph.
    ///
    /// An IRI endpoint the store does not know has no node id: it can only be reached by
    /// the empty word, and there is no id pair to return, so the answer is empty here (the
    /// SPARQL layer, which returns terms, answers it with the constant itself).
    pub fn run_log_query(
        &self,
        q: &LogQuery,
        options: &EvalOptions,
    ) -> Result<PathAnswer, DatabaseError> {
        let path = self.path_of(q);
        let end = |e: &LogEndpoint| match e {
            LogEndpoint::Var(_) => Some(Endpoint::Var),
            LogEndpoint::Iri(i) => self.iri_id(i).map(Endpoint::Const),
        };
        match (end(&q.subject), end(&q.object)) {
            (Some(s), Some(o)) => self.run_path(0, &path, s, o, options),
            _ => Ok(PathAnswer {
                result: PathResult::default(),
                engine: "none",
            }),
        }
    }

    /// Edges of the relations `path` reads in `graph` (all of them for negated sets).
    fn edges_read(&self, graph: GraphId, path: &Path) -> u64 {
        let preds = self.store.predicates(graph);
        if path.has_negated_set() {
            return preds.iter().map(|p| p.edges).sum();
        }
        let mut used = path.predicates();
        used.sort_unstable();
        used.dedup();
        preds
            .iter()
            .filter(|p| used.binary_search(&p.id).is_ok())
            .map(|p| p.edges)
            .sum()
    }

    /// Whether a path query over `path` may run on a GPU: never on the CPU engine, always
    /// with `--engine gpu`, and under `auto` when the relations read hold at least
    /// [`AUTO_GPU_MIN_EDGES`] edges (whether a GPU is usable is not asked here).
    fn may_use_device(&self, graph: GraphId, path: &Path) -> bool {
        match self.choice {
            EngineChoice::Cpu => false,
            EngineChoice::Gpu => true,
            EngineChoice::Auto => self.edges_read(graph, path) >= AUTO_GPU_MIN_EDGES,
        }
    }

    /// The GPUs a path query runs on (none: the CPU engine) and why, in words (the
    /// trace's [`route`](rpq::Trace::route), which `explain` prints).
    ///
    /// [`EngineChoice::Cpu`] runs on the CPU. [`EngineChoice::Auto`] runs on the CPU
    /// when no GPU is usable or the relations read hold fewer than [`AUTO_GPU_MIN_EDGES`]
    /// edges. Otherwise a query with a constant start runs on a GPU (its host walk in
    /// front of the device is the executor's), and a var→var query on a GPU or on the
    /// CPU engine's host walks as [`rpq::route::route_candidates`] decides from a sampled
    /// walk and the device's cost model, unless `options.host_walk` is off: that insists
    /// on the device (`k2rpq rpq --engine gpu`, `k2rpq-bench workload --no-host-walk`).
    fn route(
        &self,
        graph: GraphId,
        g: &StoreGraph,
        path: &Path,
        plan: &Plan,
        options: &EvalOptions,
    ) -> Result<(&[Device], String), DatabaseError> {
        let edges = match self.choice {
            EngineChoice::Cpu => return Ok((&[], "cpu: the CPU engine was asked for".into())),
            EngineChoice::Gpu => None,
            EngineChoice::Auto => {
                let edges = self.edges_read(graph, path);
                if edges < AUTO_GPU_MIN_EDGES {
                    return Ok((
                        &[],
                        format!(
                            "cpu: the relations read hold {edges} edges, fewer than \
                             {AUTO_GPU_MIN_EDGES}: a device round trip costs more"
                        ),
                    ));
                }
                Some(edges)
            }
        };
        let gpus = self.gpus.get()?;
        let Some(first) = gpus.first() else {
            return Ok((&[], "cpu: no usable GPU".into()));
        };
        let why = match edges {
            Some(e) => format!("engine auto, {e} edges read"),
            None => "engine gpu".to_string(),
        };
        if !options.host_walk {
            return Ok((
                gpus,
                format!("device: {why}, host walks off (every product on the device)"),
            ));
        }
        if options.traversal != rpq::TraversalPolicy::Auto {
            return Ok((
                gpus,
                format!("device: {why}, a fixed traversal asks for the device's products"),
            ));
        }
        // A constant start walks the host in front of the device under a budget of its
        // own: nothing to route, and no need to ask the driver for its free memory.
        if !matches!(plan.start, rpq::StartNodes::Candidates(_)) {
            return Ok((
                gpus,
                format!(
                    "device: {why}, a constant start (walked on the host first, under a \
                     budget)"
                ),
            ));
        }
        let engine = first.cache.engine();
        let words = rpq::route::fitting_words(
            engine.batch_memory(),
            plan.automaton.states(),
            g.node_count() as u64,
            plan.batch_words,
        );
        match rpq::route::route_candidates(
            g,
            plan,
            options,
            words,
            rayon::current_num_threads(),
            &rpq::route::DeviceModel::default(),
        ) {
            None => Ok((gpus, format!("device: {why}"))),
            Some(d) if d.route == rpq::route::Route::Host => Ok((&[], format!("{why}; {d}"))),
            Some(d) => Ok((gpus, format!("{why}; {d}"))),
        }
    }

    /// Evaluates `subject path object` on graph `graph`.
    pub fn run_path(
        &self,
        graph: GraphId,
        path: &Path,
        subject: Endpoint,
        object: Endpoint,
        options: &EvalOptions,
    ) -> Result<PathAnswer, DatabaseError> {
        let g = StoreGraph::new(self.store.clone(), graph);
        let plan = rpq::plan(&g, path, subject, object, options);
        let routed = Instant::now();
        // A constant start bound for a device is walked on the host before any device is
        // set up: a query that reaches a few nodes never pays for the driver (about
        // 0.2 s of `cuInit` and context in a new process on an H100 host).
        let walked_first =
            self.may_use_device(graph, path) && matches!(plan.start, rpq::StartNodes::Const(_));
        if walked_first {
            if let Some(mut result) = rpq::walk_before_device(&g, &plan, options, routed) {
                if let Some(e) = g.take_error() {
                    return Err(e.into());
                }
                result.trace.route = "host walk in front of the device: a constant start \
                                      that reaches few nodes (no device needed)"
                    .into();
                return Ok(PathAnswer {
                    result,
                    engine: "cpu",
                });
            }
        }
        let (gpus, route) = self.route(graph, &g, path, &plan, options)?;
        let on_gpu = !gpus.is_empty();
        // The walks so far count against the query's time; one that gave up is not
        // walked again.
        let rest;
        let options = if options.timeout.is_some() || walked_first {
            rest = EvalOptions {
                timeout: options.timeout.map(|t| t.saturating_sub(routed.elapsed())),
                host_walk: options.host_walk && !walked_first,
                ..options.clone()
            };
            &rest
        } else {
            options
        };
        fn cached<'a>(
            d: &'a Device,
            g: &'a StoreGraph,
            graph_id: GraphId,
            config: MatrixConfig,
        ) -> CachedRelations<'a, GpuEngine, ResidentKey> {
            CachedRelations::of_store_graph(&d.cache, g, graph_id, config)
        }
        let (result, engine) = if !on_gpu {
            let mut rels = PerQueryRelations::new(&self.cpu, &g, options.config);
            (
                rpq::evaluate_with(&self.cpu, &g, &plan, options, &mut rels),
                "cpu",
            )
        } else if gpus.len() > 1
            && !rpq::runs_on_one(gpus[0].cache.engine().as_ref(), &plan, options)
        {
            let _busy: Vec<Busy<'_>> = gpus.iter().map(Busy::claim).collect();
            let mut rels: Vec<CachedRelations<'_, GpuEngine, ResidentKey>> = gpus
                .iter()
                .map(|d| cached(d, &g, graph, options.config))
                .collect();
            let mut shares: Vec<Share<'_, GpuEngine>> = gpus
                .iter()
                .zip(rels.iter_mut())
                .map(|(d, r)| Share {
                    engine: d.cache.engine().as_ref(),
                    relations: r,
                })
                .collect();
            (rpq::evaluate_split(&g, &plan, options, &mut shares), "gpu")
        } else {
            let d = self.pick(gpus, graph, &plan);
            let _busy = Busy::claim(d);
            let mut rels = cached(d, &g, graph, options.config);
            (
                rpq::evaluate_with(d.cache.engine().as_ref(), &g, &plan, options, &mut rels),
                "gpu",
            )
        };
        if let Some(e) = g.take_error() {
            return Err(e.into());
        }
        let mut result = result?;
        result.trace.route = route;
        // A device engine leaves queries that reach a handful of nodes to a host walk.
        let engine = if result.trace.engine == rpq::HOST_WALK {
            "cpu"
        } else {
            engine
        };
        Ok(PathAnswer { result, engine })
    }
}

/// A query rewritten for a database's path service ([`Database::prepare`]): each group of
/// paths and the patterns joined to them is a `SERVICE <urn:k2rpq:paths>` call.
#[derive(Clone, Debug)]
pub struct PreparedQuery {
    rewritten: spargebra::Query,
    /// The query's dataset as the path service sees it; `None` where the default graph
    /// merges several graphs and the query is evaluated without the service.
    scope: Option<GraphScope>,
    lone: Option<sparql::rewrite::LoneService>,
}

impl PreparedQuery {
    /// The query as Oxigraph's evaluator receives it.
    pub fn rewritten(&self) -> &spargebra::Query {
        &self.rewritten
    }

    /// The one path service call that is the whole query, when it is
    /// ([`sparql::rewrite::lone_service`]): its rows are the answer.
    pub fn lone(&self) -> Option<&sparql::rewrite::LoneService> {
        self.lone.as_ref()
    }
}

/// Options of one SPARQL query ([`Database::query_with`]).
#[derive(Clone, Debug, Default)]
pub struct QueryOptions {
    /// The IRI the query's relative IRIs resolve against (`GRAPH <people.ttl>`).
    pub base_iri: Option<String>,
    /// Stop the query after this long, counted from the call until the last row is
    /// read: Oxigraph's evaluator is cancelled (its rows then end in
    /// [`QueryEvaluationError::Cancelled`](crate::sparql::QueryEvaluationError::Cancelled)) and the path service stops its runs with
    /// [`SparqlError::Timeout`].
    pub timeout: Option<Duration>,
}

impl Database {
    /// Parses and answers any SPARQL 1.1 query over the whole store: Oxigraph's evaluator
    /// over the store's trees ([`StoreQuads`]), every group of patterns that holds a
    /// property path answered by k2rpq (on the GPU, with relations from the device cache,
    /// when the relations the group reads hold at least [`AUTO_GPU_MIN_EDGES`] edges, or
    /// always with [`EngineChoice::Gpu`]; else on the CPU engine). Rows stream: they are
    /// computed as they are read.
    ///
    /// ```no_run
    /// use k2rpq::database::{Database, DatabaseOptions};
    /// use k2rpq::sparql::QueryResults;
    /// let db = Database::open("codex.store".as_ref(), &DatabaseOptions::default()).unwrap();
    /// let results = db
    ///     .query("SELECT ?y WHERE { <http://www.wikidata.org/entity/Q183> <http://www.wikidata.org/prop/direct/P530>+ ?y }")
    ///     .unwrap();
    /// if let QueryResults::Solutions(rows) = results {
    ///     for row in rows {
    ///         println!("{:?}", row.unwrap());
    ///     }
    /// }
    /// ```
    pub fn query(&self, text: &str) -> Result<QueryResults<'static>, SparqlError> {
        self.query_with(text, &QueryOptions::default())
    }

    /// [`Database::query`] with a base IRI and a time limit.
    pub fn query_with(
        &self,
        text: &str,
        options: &QueryOptions,
    ) -> Result<QueryResults<'static>, SparqlError> {
        let query = sparql::parse_query(text, options.base_iri.as_deref())?;
        self.evaluate(&query, options)
    }

    /// Answers a parsed query (see [`Database::query`]); `options.base_iri` is not used
    /// (the parser resolved the query's IRIs).
    pub fn evaluate(
        &self,
        query: &spargebra::Query,
        options: &QueryOptions,
    ) -> Result<QueryResults<'static>, SparqlError> {
        self.evaluate_prepared(self.prepare(query), options)
    }

    /// `query` rewritten for this database's path service, once: what
    /// [`Database::evaluate_prepared`] answers and [`Database::explain`] shows.
    pub fn prepare(&self, query: &spargebra::Query) -> PreparedQuery {
        let scope = self.scope_of(query);
        let rewritten = match &scope {
            // A subquery in the service is evaluated over the store's own dataset: only
            // where the query names none.
            Some(_) if query.dataset().is_none() => {
                wrap_paths_and_small_subqueries_in_service(query)
            }
            Some(_) => wrap_paths_in_service(query),
            // The default graph merges several graphs: paths cross them, which the
            // engines' per-graph relations cannot follow; Oxigraph's evaluator answers
            // them from the scans.
            None => query.clone(),
        };
        let lone = scope
            .is_some()
            .then(|| sparql::rewrite::lone_service(&rewritten))
            .flatten();
        PreparedQuery {
            rewritten,
            scope,
            lone,
        }
    }

    /// Answers a query as [`Database::prepare`] rewrote it (see [`Database::evaluate`]).
    pub fn evaluate_prepared(
        &self,
        mut prepared: PreparedQuery,
        options: &QueryOptions,
    ) -> Result<QueryResults<'static>, SparqlError> {
        let started = Instant::now();
        // A limit too far away to be an instant is no limit.
        let deadline = options.timeout.and_then(|t| started.checked_add(t));
        if let Some(lone) = prepared.lone.take() {
            match self.evaluate_lone(&prepared.rewritten, lone, deadline) {
                // Oxigraph's evaluator names what it does not support as it always has.
                Err(SparqlError::Unsupported(_)) => {}
                answer => return answer,
            }
        }
        let token = CancellationToken::new();
        if let Some(d) = deadline {
            watchdog::cancel_at(d, token.clone());
        }
        let quads = StoreQuads::new(self.store.clone());
        let mut evaluator = QueryEvaluator::new().with_cancellation_token(token);
        if let Some(scope) = prepared.scope {
            evaluator = evaluator.with_service_handler(
                NamedNode::new_unchecked(SERVICE_IRI),
                StorePathService {
                    engines: self.path_engines(),
                    scope,
                    deadline,
                },
            );
        }
        let results = evaluator.prepare(&prepared.rewritten).execute(quads)?;
        Ok(match deadline {
            Some(d) => watchdog::end_at(results, d),
            None => results,
        })
    }

    /// The answer of a query that is one path service call ([`sparql::rewrite::LoneService`]):
    /// the service's rows, without Oxigraph's evaluator, whose set-up (three readings of
    /// the clock, its plan) cost a small query a third of its time.
    fn evaluate_lone(
        &self,
        query: &spargebra::Query,
        lone: sparql::rewrite::LoneService,
        deadline: Option<Instant>,
    ) -> Result<QueryResults<'static>, SparqlError> {
        let store = self.store.clone();
        let mut solutions = self
            .evaluate_path_service(&lone.pattern, deadline)?
            .into_projected_solutions(
                lone.variables,
                lone.offset,
                lone.length,
                move |id| store.dictionary().term(id),
                Deadline(deadline),
            );
        Ok(match query {
            spargebra::Query::Ask { .. } => QueryResults::Boolean(match solutions.next() {
                None => false,
                Some(Ok(_)) => true,
                Some(Err(e)) => return Err(e.into()),
            }),
            _ => QueryResults::Solutions(solutions),
        })
    }

    /// How `query` would be answered, without evaluating it: the query as rewritten for
    /// Oxigraph's evaluator, then for each `SERVICE <urn:k2rpq:paths>` group its plan and
    /// the estimates behind it ([`sparql::group::explain_group`]).
    pub fn explain(&self, query: &spargebra::Query) -> Result<String, SparqlError> {
        use std::fmt::Write;
        let PreparedQuery {
            rewritten,
            scope,
            lone,
        } = self.prepare(query);
        let Some(scope) = scope else {
            return Ok(format!(
                "{query}\n\nthe default graph merges several graphs: Oxigraph's evaluator \
                 answers every path from its scans\n"
            ));
        };
        let mut out = format!("{rewritten}\n");
        if lone.is_some() {
            out.push_str(
                "\none path group and nothing around it: its rows are the answer, without \
                 Oxigraph's evaluator\n",
            );
        }
        let pattern = match &rewritten {
            spargebra::Query::Select { pattern, .. }
            | spargebra::Query::Ask { pattern, .. }
            | spargebra::Query::Construct { pattern, .. }
            | spargebra::Query::Describe { pattern, .. } => pattern,
        };
        let services = sparql::rewrite::path_services(pattern);
        if services.is_empty() {
            out.push_str("\nno path group: Oxigraph's evaluator answers the query alone\n");
        }
        for (i, service) in services.into_iter().enumerate() {
            let group = PathGroup::from_pattern(service)?;
            let _ = write!(
                out,
                "\npath group {}:\n{}",
                i + 1,
                sparql::group::explain_group(&*self.dataset, &scope, &group)
            );
        }
        Ok(out)
    }

    /// The rows of one `SERVICE <urn:k2rpq:paths>` call of a query without `FROM`, as
    /// [`Database::evaluate`] computes them for Oxigraph's evaluator: `pattern` is the
    /// call's pattern after [`wrap_paths_and_small_subqueries_in_service`], and the
    /// evaluation stops with [`SparqlError::Timeout`] at `deadline`. For a query that is
    /// one such call with nothing around it but its slice, these rows are its answer.
    pub fn evaluate_path_service(
        &self,
        pattern: &spargebra::algebra::GraphPattern,
        deadline: Option<Instant>,
    ) -> Result<GroupSolutions, SparqlError> {
        StorePathService {
            engines: self.path_engines(),
            scope: GraphScope::default(),
            deadline,
        }
        .solutions(pattern)
    }

    /// How many groups the path service evaluated on the CPU and on the GPU since the
    /// database was opened.
    pub fn path_service_runs(&self) -> (u64, u64) {
        (
            self.path_runs[0].load(Ordering::Relaxed),
            self.path_runs[1].load(Ordering::Relaxed),
        )
    }

    /// The path service's view of `query`'s dataset (`FROM`, `FROM NAMED`), or `None`
    /// when its default graph merges several graphs.
    fn scope_of(&self, query: &spargebra::Query) -> Option<GraphScope> {
        let Some(dataset) = query.dataset() else {
            return Some(GraphScope::default());
        };
        let named_id = |n: &NamedNode| -> Option<u32> {
            let id = self.iri_id(n.as_str())?;
            self.store
                .graphs()
                .iter()
                .any(|g| g.id == Some(id))
                .then_some(id)
        };
        let default = match dataset.default.as_slice() {
            [] => DefaultGraph::Empty,
            [g] => named_id(g).map_or(DefaultGraph::Empty, DefaultGraph::Named),
            _ => return None,
        };
        let named = dataset
            .named
            .as_ref()
            .map(|names| names.iter().filter_map(named_id).collect());
        Some(GraphScope { default, named })
    }

    /// What the path service of a query needs of this database.
    fn path_engines(&self) -> PathEngines {
        PathEngines {
            store: self.store.clone(),
            dataset: self.dataset.clone(),
            choice: self.choice,
            gpus: self.gpus.clone(),
            runs: self.path_runs.clone(),
        }
    }
}

/// The store and engines the path service evaluates groups on, shared with the database.
#[derive(Clone)]
struct PathEngines {
    store: Arc<Store>,
    dataset: Arc<StoreDataset>,
    choice: EngineChoice,
    gpus: Arc<Gpus>,
    /// Groups evaluated on the CPU (0) and on a GPU (1).
    runs: Arc<[AtomicU64; 2]>,
}

impl PathEngines {
    /// Evaluates `group` on the least busy GPU, with relations from its cache, when the
    /// relations it reads are large enough (or always, with [`EngineChoice::Gpu`]); else
    /// on the CPU engine. A group that [`PathGroup::streams`] is evaluated here when its
    /// answer is small, else on a thread of its own that sends its rows a batch at a
    /// time, a few batches ahead of the reader: its answer may be larger than memory.
    fn evaluate(
        &self,
        group: &PathGroup,
        scope: &GraphScope,
        deadline: Option<Instant>,
    ) -> Result<GroupSolutions, SparqlError> {
        if group.streams() {
            // A small answer is computed here, whole: a thread of its own and the
            // hand-over of its rows cost more than it does, most of all where the
            // scheduler is slow to run the thread on a busy machine.
            let mut small = None;
            self.run(group, scope, deadline, Run::Small(&mut small))?;
            if let Some(rows) = small {
                return Ok(GroupSolutions {
                    variables: group.columns(),
                    rows: IdRows::whole(rows),
                    query_terms: Vec::new(),
                });
            }
            return self.evaluate_in_batches(group, scope, deadline);
        }
        let mut solutions = None;
        self.run(group, scope, deadline, Run::Whole(&mut solutions))?;
        solutions.ok_or(SparqlError::Interrupted)
    }

    /// [`PathEngines::evaluate`] of a group that streams.
    fn evaluate_in_batches(
        &self,
        group: &PathGroup,
        scope: &GraphScope,
        deadline: Option<Instant>,
    ) -> Result<GroupSolutions, SparqlError> {
        let (sender, receiver) = std::sync::mpsc::sync_channel(BATCHES_AHEAD);
        let (engines, job, job_scope) = (self.clone(), group.clone(), scope.clone());
        std::thread::Builder::new()
            .name("k2rpq-path-rows".into())
            .spawn(move || {
                let mut send = |rows| sender.send(RowBatch::Rows(rows)).is_ok();
                let end = match engines.run(&job, &job_scope, deadline, Run::Batches(&mut send)) {
                    Ok(()) => RowBatch::End,
                    Err(e) => RowBatch::Failed(e),
                };
                // The reader may have gone: it wanted no more rows.
                let _ = sender.send(end);
            })
            .map_err(|e| SparqlError::Unsupported(format!("cannot start a thread: {e}")))?;
        Ok(GroupSolutions {
            variables: group.columns(),
            rows: IdRows::batches(receiver),
            query_terms: Vec::new(),
        })
    }

    /// Runs `group` on the engine [`PathEngines::evaluate`] picks, as `run` says.
    fn run(
        &self,
        group: &PathGroup,
        scope: &GraphScope,
        deadline: Option<Instant>,
        mut run: Run<'_>,
    ) -> Result<(), SparqlError> {
        let wants_gpu = match self.choice {
            EngineChoice::Cpu => false,
            EngineChoice::Gpu => true,
            EngineChoice::Auto => self.group_edges(group) >= AUTO_GPU_MIN_EDGES,
        };
        if wants_gpu && !self.gpus.attempted() {
            if let Some(done) = self.probe(group, scope, deadline, &mut run) {
                if let Some(e) = self.dataset.take_error() {
                    return Err(SparqlError::Store(e));
                }
                return done;
            }
        }
        let gpus: &[Device] = if wants_gpu {
            self.gpus
                .get()
                .map_err(|e| SparqlError::Unsupported(e.to_string()))?
        } else {
            &[]
        };
        let on_gpu = gpus.iter().min_by_key(|d| d.busy.load(Ordering::SeqCst));
        // Batches follow the group's whole-answer attempt, which counted it.
        let counted = !matches!(run, Run::Batches(_));
        let dataset: &dyn PathDataset = &*self.dataset;
        let done = match on_gpu {
            Some(d) => {
                let _busy = Busy::claim(d);
                let provider = CachedProvider {
                    cache: &d.cache,
                    store: &self.store,
                    config: MatrixConfig::default(),
                };
                let engine = d.cache.engine().as_ref();
                if counted {
                    self.runs[1].fetch_add(1, Ordering::Relaxed);
                }
                run.on(engine, dataset, scope, group, &provider, deadline)
            }
            None => {
                let cpu = CpuEngine::new();
                if counted {
                    self.runs[0].fetch_add(1, Ordering::Relaxed);
                }
                let provider = sparql::PerQueryProvider(&cpu);
                run.on(&cpu, dataset, scope, group, &provider, deadline)
            }
        };
        if let Some(e) = self.dataset.take_error() {
            return Err(SparqlError::Store(e));
        }
        done
    }

    /// Runs `group` against a [`HostProbe`] while no device is set up: its outcome when the
    /// run needed no device (the constant starts' host walks answered it), `None` when it
    /// asked for device work and must run on the device. A query whose paths reach a few
    /// nodes then never pays for setting a device up. Batches of a streamed group are not
    /// probed: a refused run must not have handed rows over.
    fn probe(
        &self,
        group: &PathGroup,
        scope: &GraphScope,
        deadline: Option<Instant>,
        run: &mut Run<'_>,
    ) -> Option<Result<(), SparqlError>> {
        let probe = HostProbe::new();
        let provider = sparql::PerQueryProvider(&probe);
        let dataset: &dyn PathDataset = &*self.dataset;
        // The run's answer goes to `out` only when it needed no device.
        fn kept<T>(
            probe: &HostProbe,
            out: &mut Option<T>,
            run: impl FnOnce(&mut Option<T>) -> Result<(), SparqlError>,
        ) -> Result<(), SparqlError> {
            let mut got = None;
            let done = run(&mut got);
            if !probe.device_needed() {
                *out = got;
            }
            done
        }
        let on = |run: Run<'_>| run.on(&probe, dataset, scope, group, &provider, deadline);
        let done = match run {
            Run::Whole(out) => kept(&probe, out, |got| on(Run::Whole(got))),
            Run::Small(out) => kept(&probe, out, |got| on(Run::Small(got))),
            Run::Batches(_) => return None,
        };
        if probe.device_needed() {
            return None;
        }
        self.runs[1].fetch_add(1, Ordering::Relaxed);
        Some(done)
    }

    /// Edges of the relations a group may read, over every graph.
    fn group_edges(&self, group: &PathGroup) -> u64 {
        let used = group.predicates_read();
        (0..self.store.graphs().len())
            .flat_map(|g| self.store.predicates(g))
            .filter(|p| {
                used.as_ref()
                    .is_none_or(|u| u.binary_search(&p.iri).is_ok())
            })
            .map(|p| p.edges)
            .sum()
    }
}

/// Batches of rows a streamed group's evaluation may run ahead of its reader.
const BATCHES_AHEAD: usize = 2;

/// How [`PathEngines::run`] hands over a group's rows.
enum Run<'r> {
    /// All at once, here.
    Whole(&'r mut Option<GroupSolutions>),
    /// All at once, here, for a group that [`PathGroup::streams`] and whose answer is
    /// small; left `None` where it must be computed in batches.
    Small(&'r mut Option<Vec<IdRow>>),
    /// A batch at a time to this sink, which says whether it wants more (after
    /// [`Run::Small`] found the answer large).
    Batches(&'r mut dyn FnMut(Vec<IdRow>) -> bool),
}

impl Run<'_> {
    /// Evaluates `group` on `engine`, handing the rows over as `self` says.
    fn on<'a, E: Engine>(
        self,
        engine: &'a E,
        dataset: &'a dyn PathDataset,
        scope: &GraphScope,
        group: &PathGroup,
        provider: &'a dyn RelationProvider<'a, E>,
        deadline: Option<Instant>,
    ) -> Result<(), SparqlError> {
        match self {
            Run::Whole(out) => {
                *out = Some(evaluate_group(
                    engine, dataset, scope, group, provider, deadline,
                )?);
                Ok(())
            }
            Run::Small(out) => {
                *out = small_streamed_answer(engine, dataset, scope, group, provider, deadline)?;
                Ok(())
            }
            Run::Batches(sink) => evaluate_group_in_batches(
                engine, dataset, scope, group, provider, deadline, false, sink,
            ),
        }
    }
}

/// The `SERVICE <urn:k2rpq:paths>` handler of one [`Database::query`]: evaluates each
/// group on the database's engines, over the query's dataset, until its deadline; its
/// rows reach the evaluator as store ids, never decoded. A small subquery the rewrite
/// joined to the group is evaluated first, by Oxigraph's evaluator over the store, and its
/// rows join the group as values.
#[derive(Clone)]
struct StorePathService {
    engines: PathEngines,
    scope: GraphScope,
    deadline: Option<Instant>,
}

impl ServiceHandler for StorePathService {
    type Error = SparqlError;

    fn handle(
        &self,
        pattern: &spargebra::algebra::GraphPattern,
        _base_iri: Option<&oxiri::Iri<String>>,
    ) -> Result<QuerySolutionIter<'static>, SparqlError> {
        let solutions = self.solutions(pattern)?;
        Ok(solutions.into_id_solutions(Deadline(self.deadline)))
    }
}

impl StorePathService {
    /// The rows of one call, as store ids.
    fn solutions(
        &self,
        pattern: &spargebra::algebra::GraphPattern,
    ) -> Result<GroupSolutions, SparqlError> {
        let mut group = PathGroup::from_pattern(pattern)?;
        for sub in std::mem::take(&mut group.subqueries) {
            let values = self.subquery_values(sub)?;
            group.values.push(values);
        }
        self.engines.evaluate(&group, &self.scope, self.deadline)
    }

    /// The rows of a subquery, by Oxigraph's evaluator over the store (the rewrite moves
    /// only subqueries of queries without `FROM`, with a LIMIT of at most
    /// [`SMALL_SUBQUERY_ROWS`](crate::sparql::rewrite::SMALL_SUBQUERY_ROWS) rows).
    fn subquery_values(
        &self,
        pattern: spargebra::algebra::GraphPattern,
    ) -> Result<ValuesTable, SparqlError> {
        let token = CancellationToken::new();
        if let Some(d) = self.deadline {
            watchdog::cancel_at(d, token.clone());
        }
        let evaluator = QueryEvaluator::new()
            .with_cancellation_token(token)
            .with_service_handler(NamedNode::new_unchecked(SERVICE_IRI), self.clone());
        let query = spargebra::Query::Select {
            dataset: None,
            pattern,
            base_iri: None,
        };
        let quads = StoreQuads::new(self.engines.store.clone());
        let QueryResults::Solutions(solutions) = evaluator.prepare(&query).execute(quads)? else {
            return Err(SparqlError::Unsupported(
                "a subquery that is not a SELECT".into(),
            ));
        };
        let variables = solutions.variables().to_vec();
        let rows = solutions
            .map(|s| s.map(|s| s.values().to_vec()))
            .collect::<Result<_, _>>()?;
        Ok(ValuesTable { variables, rows })
    }
}

/// Hands the SPARQL layer relation sources backed by the device cache.
struct CachedProvider<'c> {
    cache: &'c DeviceCache<GpuEngine, ResidentKey>,
    store: &'c Store,
    config: MatrixConfig,
}

impl<'a> RelationProvider<'a, GpuEngine> for CachedProvider<'a> {
    fn source(
        &self,
        name: Option<u32>,
        graph: &'a dyn PathGraph,
    ) -> Box<dyn RelationSource<GpuEngine> + 'a> {
        let graph_id = match name {
            None => 0,
            Some(n) => self
                .store
                .graphs()
                .iter()
                .position(|g| g.id == Some(n))
                .unwrap_or(usize::MAX),
        };
        Box::new(CachedRelations::of_store_graph(
            self.cache,
            graph,
            graph_id,
            self.config,
        ))
    }
}

/// A whole store as the SPARQL layer's dataset: its dictionary, default graph and named
/// graphs (each a [`StoreGraph`]).
pub struct StoreDataset {
    store: Arc<Store>,
    default_graph: StoreGraph,
    /// `(name id, graph)` for every named graph, by name id.
    named: Vec<(u32, StoreGraph)>,
}

impl StoreDataset {
    /// Opens the dataset view of `store`.
    pub fn new(store: Arc<Store>) -> Self {
        let mut named: Vec<(u32, StoreGraph)> = store
            .graphs()
            .iter()
            .enumerate()
            .skip(1)
            .filter_map(|(g, info)| info.id.map(|id| (id, StoreGraph::new(store.clone(), g))))
            .collect();
        named.sort_by_key(|(id, _)| *id);
        StoreDataset {
            default_graph: StoreGraph::new(store.clone(), 0),
            store,
            named,
        }
    }

    /// The first store error met by any graph (a corrupt relation file), if any.
    pub fn take_error(&self) -> Option<StoreError> {
        self.default_graph
            .take_error()
            .or_else(|| self.named.iter().find_map(|(_, g)| g.take_error()))
    }
}

impl crate::sparql::dataset::TermDictionary for StoreDataset {
    fn id(&self, term: TermRef<'_>) -> Option<u32> {
        self.store.dictionary().id(term)
    }
    fn term(&self, id: u32) -> Option<Term> {
        self.store.dictionary().term(id)
    }
}

impl crate::sparql::dataset::PathDataset for StoreDataset {
    fn dictionary(&self) -> &dyn crate::sparql::dataset::TermDictionary {
        self
    }
    fn default_graph(&self) -> &dyn PathGraph {
        &self.default_graph
    }
    fn named_graphs(&self) -> Vec<u32> {
        self.named.iter().map(|(id, _)| *id).collect()
    }
    fn named_graph(&self, name: u32) -> Option<&dyn PathGraph> {
        self.named
            .binary_search_by_key(&name, |(id, _)| *id)
            .ok()
            .map(|i| &self.named[i].1 as &dyn PathGraph)
    }
}
