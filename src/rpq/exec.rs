//! The executor: per automaton state a frontier and a visited bit batch in the engine,
//! batched Boolean products to the fixed point, results as `(start, end)` pairs.

use std::collections::HashMap;
use std::fmt;
use std::sync::Arc;
use std::time::{Duration, Instant};

use roaring::RoaringBitmap;

use super::automaton::Dir;
use super::graph::{union_tree, PathGraph};
use super::plan::{plan, EvalDirection, Plan, RelKey, StartNodes};
use super::sparse;
use super::{Endpoint, EvalOptions, Path, PathResult, RpqError, TraversalPolicy};
use crate::engine::{BitMatrix, Direction, Engine, MatrixConfig, Traversal};

/// [`Trace::engine`] of an evaluation that a device engine left to a walk of the host
/// trees (the query reached too few nodes to pay for the device).
pub const HOST_WALK: &str = "host walk";

/// Steps kept in [`Trace::steps`]; later ones are only counted (a var→var run over a
/// large graph takes many batches).
const MAX_LOGGED_STEPS: usize = 2000;

/// A relation loaded into an engine, with what the executor needs to choose a traversal.
pub struct Loaded<M> {
    /// The engine's matrix: owned by the evaluation, or pinned in a device cache.
    pub matrix: MatrixHandle<M>,
    /// Its non-zero cells.
    pub nnz: u64,
    /// Its tree height.
    pub height: u32,
}

impl<M> Clone for Loaded<M> {
    fn clone(&self) -> Self {
        Loaded {
            matrix: self.matrix.clone(),
            nnz: self.nnz,
            height: self.height,
        }
    }
}

/// A shared handle to a loaded matrix: a plain `Arc` of it, or a cache pin that keeps it
/// resident while the handle lives.
pub type MatrixHandle<M> = Arc<dyn std::ops::Deref<Target = M> + Send + Sync>;

/// Where the executor gets loaded relations: the seam for a device-resident cache. The
/// default, [`PerQueryRelations`], loads each relation once per evaluation.
pub trait RelationSource<E: Engine> {
    /// The relation of `key` loaded into the engine, or `None` when the graph has none.
    fn relation(&mut self, key: &RelKey) -> Result<Option<Loaded<E::Matrix>>, RpqError>;
    /// Loads done so far and the time they took (for the trace).
    fn load_stats(&self) -> (u32, Duration);
}

/// Loads each relation at most once and keeps it for the evaluation (or for as long as
/// the value lives: reuse one across queries to keep relations loaded).
pub struct PerQueryRelations<'a, E: Engine> {
    engine: &'a E,
    graph: &'a dyn PathGraph,
    config: MatrixConfig,
    loaded: HashMap<RelKey, Loaded<E::Matrix>>,
    loads: u32,
    load_time: Duration,
}

impl<'a, E: Engine> PerQueryRelations<'a, E> {
    /// An empty set of loaded relations of `graph`.
    pub fn new(engine: &'a E, graph: &'a dyn PathGraph, config: MatrixConfig) -> Self {
        PerQueryRelations {
            engine,
            graph,
            config,
            loaded: HashMap::new(),
            loads: 0,
            load_time: Duration::ZERO,
        }
    }
}

impl<E: Engine> RelationSource<E> for PerQueryRelations<'_, E> {
    fn relation(&mut self, key: &RelKey) -> Result<Option<Loaded<E::Matrix>>, RpqError> {
        if let Some(l) = self.loaded.get(key) {
            return Ok(Some(l.clone()));
        }
        let t0 = Instant::now();
        let (tree, pred) = match key {
            RelKey::Pred(p) => match self.graph.relation(*p) {
                Some(t) => (t, *p),
                None => return Ok(None),
            },
            RelKey::Union(ps) => (union_tree(self.graph, ps), ps[0]),
        };
        let n = self.graph.node_count();
        if tree.rows() != n as u64 || tree.cols() != n as u64 {
            return Err(RpqError::RelationShape {
                pred,
                rows: tree.rows(),
                cols: tree.cols(),
                nodes: n,
            });
        }
        let matrix: MatrixHandle<E::Matrix> =
            Arc::new(Box::new(self.engine.load(&tree, self.config)?));
        let l = Loaded {
            matrix,
            nnz: tree.nnz(),
            height: tree.height(),
        };
        self.loads += 1;
        self.load_time += t0.elapsed();
        self.loaded.insert(key.clone(), l.clone());
        Ok(Some(l))
    }

    fn load_stats(&self) -> (u32, Duration) {
        (self.loads, self.load_time)
    }
}

/// One fixed-point step of one batch.
#[derive(Clone, Debug, PartialEq)]
pub struct TraceStep {
    /// The batch (0-based).
    pub batch: u64,
    /// The step within the batch (1-based).
    pub step: u32,
    /// Frontier bits entering the step's products (summed over states).
    pub frontier: u64,
    /// Products run.
    pub products: u32,
    /// Of which masked traversals.
    pub masked: u32,
    /// Of which sparse expansions (top-down row/column descents of a few frontier nodes
    /// on the host, no product).
    pub sparse: u32,
    /// New (state, node, source) bits found.
    pub new_bits: u64,
    /// Wall time of the step.
    pub elapsed: Duration,
}

/// What an evaluation did, with times. Its `Display` is the second half of
/// `k2rpq explain`.
#[derive(Clone, Debug, Default)]
pub struct Trace {
    /// The engine's name.
    pub engine: String,
    /// Which engine the caller chose for the query and why (empty where no choice was
    /// made: an engine called directly).
    pub route: String,
    /// Relations loaded, and the time spent loading.
    pub loads: u32,
    /// Time spent loading relations.
    pub load_time: Duration,
    /// Batches of start nodes run.
    pub batches: u64,
    /// Fixed-point steps over all batches.
    pub total_steps: u64,
    /// Products over all steps.
    pub products: u64,
    /// Of which masked traversals.
    pub masked: u64,
    /// Of which sparse expansions.
    pub sparse: u64,
    /// The first steps, in order (at most a few thousand).
    pub steps: Vec<TraceStep>,
    /// Whole evaluation time.
    pub elapsed: Duration,
}

impl Trace {
    /// Adds the counts and the logged steps of `other`, the trace of a later batch of the
    /// same evaluation (run elsewhere: see [`super::evaluate_split`]).
    pub(super) fn append(&mut self, other: Trace) {
        self.batches += other.batches;
        self.total_steps += other.total_steps;
        self.products += other.products;
        self.masked += other.masked;
        self.sparse += other.sparse;
        let room = MAX_LOGGED_STEPS.saturating_sub(self.steps.len());
        self.steps.extend(other.steps.into_iter().take(room));
    }

    pub(super) fn log(&mut self, s: TraceStep) {
        self.total_steps += 1;
        self.products += s.products as u64;
        self.masked += s.masked as u64;
        self.sparse += s.sparse as u64;
        if self.steps.len() < MAX_LOGGED_STEPS {
            self.steps.push(s);
        }
    }
}

impl fmt::Display for Trace {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "engine {}: {} relations loaded in {:.3} ms; {} batches, {} steps, {} products ({} masked, {} sparse, {} dense); total {:.3} ms",
            self.engine,
            self.loads,
            self.load_time.as_secs_f64() * 1e3,
            self.batches,
            self.total_steps,
            self.products,
            self.masked,
            self.sparse,
            self.products - self.masked - self.sparse,
            self.elapsed.as_secs_f64() * 1e3
        )?;
        if !self.route.is_empty() {
            writeln!(f, "route: {}", self.route)?;
        }
        writeln!(
            f,
            "batch\tstep\tfrontier\tproducts\tmasked\tsparse\tnew\tms"
        )?;
        for s in &self.steps {
            writeln!(
                f,
                "{}\t{}\t{}\t{}\t{}\t{}\t{}\t{:.3}",
                s.batch,
                s.step,
                s.frontier,
                s.products,
                s.masked,
                s.sparse,
                s.new_bits,
                s.elapsed.as_secs_f64() * 1e3
            )?;
        }
        if self.total_steps > self.steps.len() as u64 {
            writeln!(
                f,
                "... {} more steps",
                self.total_steps - self.steps.len() as u64
            )?;
        }
        Ok(())
    }
}

/// Plans and evaluates `subject path object` on `graph` with `engine`, loading each
/// relation once. See the [module docs](super) for the semantics.
pub fn evaluate<E: Engine>(
    engine: &E,
    graph: &dyn PathGraph,
    path: &Path,
    subject: Endpoint,
    object: Endpoint,
    options: &EvalOptions,
) -> Result<PathResult, RpqError> {
    let p = plan(graph, path, subject, object, options);
    execute(engine, graph, &p, options)
}

/// Runs a plan, loading each relation once for this evaluation.
pub fn execute<E: Engine>(
    engine: &E,
    graph: &dyn PathGraph,
    plan: &Plan,
    options: &EvalOptions,
) -> Result<PathResult, RpqError> {
    let mut rels = PerQueryRelations::new(engine, graph, options.config);
    evaluate_with(engine, graph, plan, options, &mut rels)
}

/// Runs a plan with relations from `relations` (a device cache, or a
/// [`PerQueryRelations`] shared by several queries).
pub fn evaluate_with<E: Engine>(
    engine: &E,
    graph: &dyn PathGraph,
    plan: &Plan,
    options: &EvalOptions,
    relations: &mut dyn RelationSource<E>,
) -> Result<PathResult, RpqError> {
    let started = Instant::now();
    if options.batch_words == 0 {
        return Err(RpqError::Options("batch_words must be at least 1".into()));
    }
    // On a host engine, walk sparsely from each start node while the reached sets stay
    // small (no batches, no products, no union trees); past the budget, run the batches.
    // In front of a device engine, a constant start or a few candidates are first walked
    // on the host under a small budget: a query that reaches a handful of nodes never
    // pays device round trips.
    if options.traversal == TraversalPolicy::Auto {
        if !engine.host_resident() {
            if let Some(result) = walk_before_device(graph, plan, options, started) {
                return Ok(result);
            }
        } else {
            if let StartNodes::Candidates(cands) = &plan.start {
                if cands.len() > sparse::MAX_JOINT_STARTS {
                    let starts: Vec<u32> = cands.iter().collect();
                    return joint_walk_chunks(
                        engine, graph, plan, options, relations, &starts, started,
                    );
                }
            }
            if let Some(result) = walk(graph, plan, options, started, None) {
                return Ok(finish_walk(result, plan, options, engine.name(), started));
            }
        }
    }
    run_batches(engine, graph, plan, options, relations, started)
}

/// The host walk that runs in front of a device engine when `options` allow it (traversal
/// `Auto`, host walks on): from a constant start, or jointly from at most 4,096
/// candidates (the later links of a sequence bound by the earlier ones). The answer when
/// the walk stays within a small budget; `None` when it gives up (or is not allowed) and
/// the device must run the plan. A device batch pays per step for bit batches of a row
/// per node, however few nodes it reaches: with every path on the GPU, `?x wdt:P20/
/// wdt:P131* ?place` from the few dozen people Nietzsche influenced (CoDEx-M) took
/// 0.68 ms against 0.19 ms on the CPU engine. The walk needs no device, so a caller can
/// try it before setting one up: a query that reaches a handful of nodes never pays for
/// the driver.
pub fn walk_before_device(
    graph: &dyn PathGraph,
    plan: &Plan,
    options: &EvalOptions,
    started: Instant,
) -> Option<PathResult> {
    if options.traversal != TraversalPolicy::Auto || !options.host_walk {
        return None;
    }
    let budget = sparse::device_front_budget(graph.node_count());
    let result = walk(graph, plan, options, started, Some(budget))?;
    Some(finish_walk(result, plan, options, HOST_WALK, started))
}

/// Sparse walks of `plan`: from its constant start, or jointly from at most
/// [`sparse::MAX_JOINT_STARTS`] candidates, within their budget (at most `cap` work when
/// given); `None` when they give up or there are more candidates.
fn walk(
    graph: &dyn PathGraph,
    plan: &Plan,
    options: &EvalOptions,
    started: Instant,
    cap: Option<u64>,
) -> Option<PathResult> {
    match &plan.start {
        StartNodes::Const(c) => sparse::evaluate_sparse(
            graph,
            plan,
            options,
            &mut std::iter::once(*c),
            1,
            started,
            cap,
        ),
        StartNodes::Candidates(cands) if cands.len() <= sparse::MAX_JOINT_STARTS => {
            let starts: Vec<u32> = cands.iter().collect();
            sparse::evaluate_sparse_joint(graph, plan, options, &starts, started, cap)
        }
        StartNodes::Candidates(_) => None,
    }
}

/// A walk's answer as the executor returns it: named, in the plan's pair order, timed.
fn finish_walk(
    mut result: PathResult,
    plan: &Plan,
    options: &EvalOptions,
    engine: &str,
    started: Instant,
) -> PathResult {
    result.trace.engine = engine.to_string();
    if plan.direction == EvalDirection::Backward && !options.count_only {
        result.pairs.sort_unstable();
    }
    result.trace.elapsed = started.elapsed();
    result
}

/// The batched executor: the plan's start nodes in batches of bit-packed sources.
fn run_batches<E: Engine>(
    engine: &E,
    graph: &dyn PathGraph,
    plan: &Plan,
    options: &EvalOptions,
    relations: &mut dyn RelationSource<E>,
    started: Instant,
) -> Result<PathResult, RpqError> {
    let mut run = Run::prepare(engine, graph, plan, options, relations, started)?;
    match &plan.start {
        StartNodes::Const(c) => run.batch(0, &[*c], 1)?,
        StartNodes::Candidates(cands) => {
            let words = run.fitting_words(plan.batch_words);
            let per = 64 * words;
            let mut batch = Vec::with_capacity(per);
            let mut k = 0u64;
            for v in cands.iter() {
                batch.push(v);
                if batch.len() == per {
                    if !run.may_start_batch() {
                        break;
                    }
                    run.batch(k, &batch, words)?;
                    batch.clear();
                    k += 1;
                }
            }
            if !batch.is_empty() && run.may_start_batch() {
                run.batch(k, &batch, words)?;
            }
        }
    }
    let mut result = run.result;
    if plan.direction == EvalDirection::Backward && !options.count_only {
        result.pairs.sort_unstable();
    }
    result.trace.elapsed = started.elapsed();
    Ok(result)
}

/// Start nodes per joint walk when a host engine walks many candidates in chunks: at
/// least this many so that a walk's shared descents pay, and at most
/// [`sparse::MAX_JOINT_STARTS`] so that a walk that gives up has wasted little.
const MIN_CHUNK_STARTS: usize = 512;

/// A var→var plan with more candidate start nodes than one joint walk takes, on a host
/// engine: joint walks over consecutive chunks of the candidates, a wave of chunks at a
/// time in parallel (one walk per thread), the chunks' answers concatenated in candidate
/// order; a chunk whose walk gives up runs the batched executor on its candidates alone.
///
/// Why: the batched executor pays per step for `node_count`-row bit batches of 512
/// sources (zeroing, OR-ing, masking), whatever the frontier; a var→var closure over a
/// sparse relation (e.g. `?x P737+ ?y`, thousands of candidates, a few pairs each) spent
/// ~250 ms per batch on a 0.5 M-node store where the walks of the same starts take
/// milliseconds. The answer is the batched one: the same pairs in the same order (chunks
/// ascending, each grouped by start); cut at the limit, `limit` correct pairs of the
/// first starts (the batched executor may stop a batch's fixed point early instead, so a
/// truncated answer can hold other pairs).
fn joint_walk_chunks<E: Engine>(
    engine: &E,
    graph: &dyn PathGraph,
    plan: &Plan,
    options: &EvalOptions,
    relations: &mut dyn RelationSource<E>,
    starts: &[u32],
    started: Instant,
) -> Result<PathResult, RpqError> {
    use rayon::prelude::*;
    let threads = rayon::current_num_threads().max(1);
    let chunk =
        (starts.len() / (4 * threads)).clamp(MIN_CHUNK_STARTS, sparse::MAX_JOINT_STARTS as usize);
    let chunks: Vec<&[u32]> = starts.chunks(chunk).collect();
    let limit = options.limit.unwrap_or(u64::MAX);
    let mut result = PathResult::default();
    let mut run: Option<Run<'_, E>> = None;
    let mut loads = (0u32, Duration::ZERO);
    let mut batch_index = 0u64;
    let mut next = 0usize;
    let mut starts_walked = 0u64;
    // Waves of a few chunks per thread: a query that hits the limit early does not walk
    // every chunk. Under a limit the first wave is one chunk, and each later one holds the
    // chunks expected to reach the limit at the pairs per start found so far: a query
    // with thousands of pairs per start needs a few hundred starts, not a wave of 2·threads
    // chunks of up to 4096 starts each.
    'waves: while next < chunks.len() {
        let take = wave_chunks(
            options.limit,
            result.count,
            starts_walked,
            chunk as u64,
            2 * threads,
        );
        let wave = &chunks[next..(next + take).min(chunks.len())];
        next += wave.len();
        starts_walked += wave.iter().map(|c| c.len() as u64).sum::<u64>();
        let walked: Vec<Option<PathResult>> = wave
            .par_iter()
            .map(|c| sparse::evaluate_sparse_joint(graph, plan, options, c, started, None))
            .collect();
        for (c, w) in wave.iter().zip(walked) {
            let part = match w {
                Some(mut part) => {
                    // A walk is one batch: its steps are numbered as the batches are.
                    part.trace
                        .steps
                        .iter_mut()
                        .for_each(|s| s.batch = batch_index);
                    batch_index += 1;
                    part.trace.engine = engine.name().to_string();
                    part
                }
                None => {
                    // This chunk's walk gave up: its candidates in batches, as the
                    // batched executor would run them.
                    if run.is_none() {
                        let r = Run::prepare(engine, graph, plan, options, relations, started)?;
                        loads = (r.result.trace.loads, r.result.trace.load_time);
                        run = Some(r);
                    }
                    let r = run.as_mut().expect("prepared above");
                    r.result = PathResult::default();
                    for b in c.chunks(64 * plan.batch_words) {
                        if !r.may_start_batch() {
                            break;
                        }
                        r.batch(batch_index, b, plan.batch_words)?;
                        batch_index += 1;
                    }
                    std::mem::take(&mut r.result)
                }
            };
            absorb(&mut result, part, limit);
            if result.truncated || result.timed_out {
                break 'waves;
            }
        }
        // Between waves as between batches: a passed deadline ends the evaluation.
        if options.timeout.is_some_and(|t| started.elapsed() >= t) {
            result.timed_out = true;
            break;
        }
    }
    drop(run);
    (result.trace.loads, result.trace.load_time) = loads;
    result.trace.engine = engine.name().to_string();
    if plan.direction == EvalDirection::Backward && !options.count_only {
        result.pairs.sort_unstable();
    }
    result.trace.elapsed = started.elapsed();
    Ok(result)
}

/// Chunks of `chunk` start nodes in the next wave of [`joint_walk_chunks`]: `most` without
/// a limit or before any pair was found; under a limit one chunk first, then as many as
/// the pairs per start found so far (`found` pairs from `walked` starts) need to pass it,
/// between one and `most`.
fn wave_chunks(limit: Option<u64>, found: u64, walked: u64, chunk: u64, most: usize) -> usize {
    let Some(limit) = limit else {
        return most;
    };
    if walked == 0 {
        return 1;
    }
    if found == 0 {
        return most;
    }
    let per_start = found as f64 / walked as f64;
    let starts = (limit.saturating_sub(found) + 1) as f64 / per_start;
    let chunks = (starts / chunk.max(1) as f64).ceil();
    (chunks.min(most as f64) as usize).max(1)
}

/// Appends `part`, the answer of the next start nodes in plan order, to `result`, cut at
/// `limit` pairs in all.
fn absorb(result: &mut PathResult, part: PathResult, limit: u64) {
    let room = limit.saturating_sub(result.count);
    let take = part.count.min(room);
    result.truncated |= part.truncated || part.count > room;
    result.timed_out |= part.timed_out;
    result.count += take;
    result
        .pairs
        .extend(part.pairs.into_iter().take(take as usize));
    result.trace.append(part.trace);
}

/// Records the pairs `(start, end)` of source `src` and nodes `ends` in `result`, in
/// plan order (`direction` says which end `src` is), up to the limit of `options`.
pub(super) fn emit(
    result: &mut PathResult,
    options: &EvalOptions,
    direction: EvalDirection,
    src: u32,
    ends: &RoaringBitmap,
) {
    let limit = options.limit.unwrap_or(u64::MAX);
    for e in ends.iter() {
        if result.count >= limit {
            result.truncated = true;
            return;
        }
        result.count += 1;
        if !options.count_only {
            result.pairs.push(match direction {
                EvalDirection::Forward => (src, e),
                EvalDirection::Backward => (e, src),
            });
        }
    }
}

/// A run of products ([`Engine::begin_products`]) that ends when dropped, also on an
/// early return with an error.
struct ProductRun<'a, E: Engine>(&'a E);

impl<'a, E: Engine> ProductRun<'a, E> {
    fn new(engine: &'a E) -> Self {
        engine.begin_products();
        ProductRun(engine)
    }
}

impl<E: Engine> Drop for ProductRun<'_, E> {
    fn drop(&mut self) {
        self.0.end_products();
    }
}

/// State shared by the batches of one evaluation.
pub(super) struct Run<'a, E: Engine> {
    engine: &'a E,
    plan: &'a Plan,
    options: &'a EvalOptions,
    n: usize,
    /// Per state, the relation into it and the product direction.
    mats: Vec<Option<(Loaded<E::Matrix>, Direction)>>,
    sources_of: Vec<Vec<usize>>,
    deadline: Option<Instant>,
    pub(super) result: PathResult,
    /// Open while the batches run: the engine keeps product working memory between steps.
    _products: ProductRun<'a, E>,
}

impl<'a, E: Engine> Run<'a, E> {
    /// Loads the plan's relations from `relations` into `engine` and sets up an empty
    /// result whose trace counts those loads; `started` anchors the deadline.
    pub(super) fn prepare(
        engine: &'a E,
        graph: &dyn PathGraph,
        plan: &'a Plan,
        options: &'a EvalOptions,
        relations: &mut (dyn RelationSource<E> + '_),
        started: Instant,
    ) -> Result<Self, RpqError> {
        let products = ProductRun::new(engine);
        let (loads0, time0) = relations.load_stats();
        let mut mats = Vec::with_capacity(plan.relations.len());
        for r in &plan.relations {
            mats.push(match r {
                None => None,
                Some((key, dir)) => relations.relation(key)?.map(|l| {
                    let d = match dir {
                        Dir::Forward => Direction::Left,
                        Dir::Inverse => Direction::Right,
                    };
                    (l, d)
                }),
            });
        }
        let (loads1, time1) = relations.load_stats();
        let mut run = Run {
            engine,
            plan,
            options,
            n: graph.node_count() as usize,
            mats,
            sources_of: plan.automaton.sources(),
            deadline: options.timeout.map(|t| started + t),
            result: PathResult::default(),
            _products: products,
        };
        run.result.trace.engine = engine.name().to_string();
        run.result.trace.loads = loads1 - loads0;
        run.result.trace.load_time = time1.saturating_sub(time0);
        Ok(run)
    }
}

impl<E: Engine> Run<'_, E> {
    pub(super) fn stopped(&self) -> bool {
        self.result.truncated || self.result.timed_out
    }

    fn out_of_time(&self) -> bool {
        self.deadline.is_some_and(|d| Instant::now() >= d)
    }

    /// `words`, or the widest batch below it whose bit batches (frontier, visited and
    /// next per state, and a scratch batch: `node_count · 8` bytes each per word) fit in
    /// three quarters of the engine's memory for batches, at least one word. At 10⁹
    /// wikidata-like triples (~3·10⁸ nodes) one word of one batch is 2.5 GB, so the
    /// default eight words of a two-state closure would not fit an 80 GB device.
    pub(super) fn fitting_words(&self, words: usize) -> usize {
        super::route::fitting_words(
            self.engine.batch_memory(),
            self.plan.automaton.states(),
            self.n as u64,
            words,
        )
    }

    /// Whether the next batch may start; otherwise records why not. A batch costs
    /// `node_count`-row bit batches whatever it finds (on a device, uploads, products and
    /// a download), so a passed deadline may not start one: the deadline is checked here
    /// as well as between the products of a step. An answer that holds exactly `limit`
    /// pairs goes on: only a later pair shows that it was cut (`truncated`), and the
    /// first batch that finds one stops the run.
    pub(super) fn may_start_batch(&mut self) -> bool {
        if self.stopped() {
            return false;
        }
        if self.out_of_time() {
            self.result.timed_out = true;
            return false;
        }
        true
    }

    /// Picks the traversal of one product from the size of its input frontier.
    fn traversal(&self, input_bits: u64, m: &Loaded<E::Matrix>) -> Traversal {
        match self.options.traversal {
            TraversalPolicy::Dense => Traversal::Dense,
            TraversalPolicy::Masked => Traversal::Masked,
            TraversalPolicy::Auto => {
                // A masked traversal costs about `height · (1 + degree)` node visits per
                // active input row, a dense one about the tree's cells; the bit count
                // bounds the active rows from above.
                let n = self.n.max(1) as u64;
                let active = input_bits.min(n);
                let per_row = m.height as u64 * (1 + m.nnz / n);
                if active.saturating_mul(per_row) < 2 * m.nnz {
                    Traversal::Masked
                } else {
                    Traversal::Dense
                }
            }
        }
    }

    /// Records the pairs of source `src` and the nodes `ends`.
    fn emit(&mut self, src: u32, ends: &RoaringBitmap) {
        emit(
            &mut self.result,
            self.options,
            self.plan.direction,
            src,
            ends,
        );
    }

    /// Runs one batch of start nodes (`sources.len() <= 64·words`) to its fixed point
    /// (or to the target, the limit or the deadline) and records its pairs.
    pub(super) fn batch(
        &mut self,
        index: u64,
        sources: &[u32],
        words: usize,
    ) -> Result<(), RpqError> {
        let engine = self.engine;
        let a = &self.plan.automaton;
        let states = a.states();
        self.result.trace.batches += 1;
        // Nodes outside the id space have no edges: only the empty path can match.
        if sources.iter().all(|&v| v as usize >= self.n) {
            for &v in sources {
                if a.accepts_empty() && self.plan.target.is_none_or(|t| t == v) {
                    self.emit(v, &RoaringBitmap::from_iter([v]));
                }
            }
            return Ok(());
        }
        let n = self.n;
        // The start batch: one source sets one word, so a device engine writes that word
        // into a zeroed batch instead of copying a whole `n × words` batch over.
        let start_batch = || -> Result<E::Bits, RpqError> {
            if let [v] = sources {
                let mut b = engine.bits_zeroed(n, words)?;
                engine.bits_or_word(&mut b, *v as usize * words, 1)?;
                return Ok(b);
            }
            let mut host = BitMatrix::zeroed(n, words);
            for (k, &v) in sources.iter().enumerate() {
                if (v as usize) < n {
                    host.set(v as usize, k);
                }
            }
            Ok(engine.bits_upload(&host)?)
        };
        let live: Vec<bool> = (0..states)
            .map(|j| j == 0 || self.mats[j].is_some())
            .collect();
        let mut frontier = Vec::with_capacity(states);
        let mut visited = Vec::with_capacity(states);
        let mut next = Vec::with_capacity(states);
        for (j, &l) in live.iter().enumerate() {
            let (f, v, x) = if j == 0 {
                (start_batch()?, start_batch()?, None)
            } else if l {
                (
                    engine.bits_zeroed(n, words)?,
                    engine.bits_zeroed(n, words)?,
                    Some(engine.bits_zeroed(n, words)?),
                )
            } else {
                // Unreachable state: never read, so hold no memory.
                (
                    engine.bits_zeroed(0, words)?,
                    engine.bits_zeroed(0, words)?,
                    None,
                )
            };
            frontier.push(f);
            visited.push(v);
            next.push(x);
        }
        let needs_scratch = (1..states)
            .any(|j| live[j] && self.sources_of[j].iter().filter(|&&i| live[i]).count() > 1);
        let mut scratch = if needs_scratch {
            Some(engine.bits_zeroed(n, words)?)
        } else {
            None
        };
        let in_graph = sources.iter().filter(|&&v| (v as usize) < n).count() as u64;
        let mut counts = vec![0u64; states];
        counts[0] = in_graph;
        let mut seen = counts.clone();
        let limit = self.options.limit.unwrap_or(u64::MAX);
        let mut step = 0u32;
        let mut reached = false;
        loop {
            if self.out_of_time() {
                self.result.timed_out = true;
                break;
            }
            // Stop once the answers found pass the limit.
            let lower = self.plan.answers_at_least(|j| seen[j]);
            if self.result.count.saturating_add(lower) > limit {
                self.result.truncated = true;
                break;
            }
            let t0 = Instant::now();
            step += 1;
            let mut touched = vec![false; states];
            let (mut products, mut masked, mut input_total) = (0u32, 0u32, 0u64);
            let mut cut = false;
            for j in 1..states {
                let Some((m, dir)) = &self.mats[j] else {
                    continue;
                };
                // Between the products of a step (each a few kernel launches on a
                // device): a step over many states or a large relation must not overrun
                // the deadline. The visited sets hold the pairs found so far.
                if products > 0 && self.out_of_time() {
                    cut = true;
                    break;
                }
                let active: Vec<usize> = self.sources_of[j]
                    .iter()
                    .copied()
                    .filter(|&i| counts[i] > 0)
                    .collect();
                if active.is_empty() {
                    continue;
                }
                let input_bits: u64 = active.iter().map(|&i| counts[i]).sum();
                input_total += input_bits;
                let trav = self.traversal(input_bits, m);
                let nx = next[j].as_mut().expect("live state has a next batch");
                if active.len() == 1 {
                    engine.bool_product_overwrite(
                        &m.matrix,
                        *dir,
                        &frontier[active[0]],
                        nx,
                        trav,
                    )?;
                } else {
                    let s = scratch.as_mut().expect("scratch allocated");
                    engine.bits_clear(s)?;
                    for &i in &active {
                        engine.bits_or(s, &frontier[i])?;
                    }
                    engine.bool_product_overwrite(&m.matrix, *dir, s, nx, trav)?;
                }
                products += 1;
                masked += (trav == Traversal::Masked) as u32;
                touched[j] = true;
            }
            if cut {
                self.result.timed_out = true;
                break;
            }
            // Advance every touched state at once (one count read-back per step).
            let mut new_bits = 0;
            let order: Vec<usize> = (0..states).filter(|&j| touched[j]).collect();
            let got = {
                let mut pairs: Vec<(&mut E::Bits, &mut E::Bits)> = next
                    .iter_mut()
                    .zip(visited.iter_mut())
                    .enumerate()
                    .filter(|(j, _)| touched[*j])
                    .map(|(_, (nx, v))| (nx.as_mut().expect("touched state is live"), v))
                    .collect();
                engine.bits_advance_all(&mut pairs)?
            };
            counts.iter_mut().for_each(|c| *c = 0);
            for (&j, &c) in order.iter().zip(&got) {
                let nx = next[j].as_mut().expect("touched state is live");
                std::mem::swap(&mut frontier[j], nx);
                counts[j] = c;
                seen[j] += c;
                new_bits += c;
            }
            self.result.trace.log(TraceStep {
                batch: index,
                step,
                frontier: input_total,
                products,
                masked,
                sparse: 0,
                new_bits,
                elapsed: t0.elapsed(),
            });
            if new_bits == 0 {
                break;
            }
            if let Some(t) = self.plan.target {
                if (t as usize) < n {
                    // One word per accepting state, not the whole batch (a target
                    // query has one source: bit 0 of the target's first word).
                    for j in (0..states).filter(|&j| a.accepting[j] && counts[j] > 0) {
                        if engine.bits_word(&frontier[j], t as usize * words)? & 1 != 0 {
                            reached = true;
                        }
                    }
                }
                if reached {
                    break;
                }
            }
        }
        let accepting: Vec<usize> = (0..states)
            .filter(|&j| a.accepting[j] && seen[j] > 0)
            .collect();
        if self.options.count_only && self.plan.target.is_none() {
            // Counting needs no per-source sets and no download: one accepting state's
            // visited count is exact, several are OR-ed and counted in the engine.
            let found = match accepting.as_slice() {
                [] => 0,
                [j] => seen[*j],
                _ => {
                    let mut union = engine.bits_zeroed(n, words)?;
                    for &j in &accepting {
                        engine.bits_or(&mut union, &visited[j])?;
                    }
                    let mut none = engine.bits_zeroed(n, words)?;
                    engine.bits_advance(&mut union, &mut none)?
                }
            };
            let room = limit.saturating_sub(self.result.count);
            self.result.truncated |= found > room;
            self.result.count += found.min(room);
            return Ok(());
        }
        // Answers: the union of the accepting states' visited sets, per source.
        let mut acc = BitMatrix::zeroed(n, words);
        for &j in &accepting {
            let v = engine.bits_download(&visited[j])?;
            for (d, s) in acc.as_words_mut().iter_mut().zip(v.as_words()) {
                *d |= s;
            }
        }
        if let Some(t) = self.plan.target {
            let src = sources[0];
            if (t as usize) < n && acc.get(t as usize, 0) {
                self.emit(src, &RoaringBitmap::from_iter([t]));
            }
            return Ok(());
        }
        let mut ends: Vec<Vec<u32>> = vec![Vec::new(); sources.len()];
        for r in 0..n {
            for (k, &w) in acc.row(r).iter().enumerate() {
                let mut w = w;
                while w != 0 {
                    let b = w.trailing_zeros() as usize;
                    w &= w - 1;
                    if let Some(e) = ends.get_mut(k * 64 + b) {
                        e.push(r as u32);
                    }
                }
            }
        }
        for (k, e) in ends.into_iter().enumerate() {
            if self.result.count >= limit {
                self.result.truncated |= !e.is_empty();
                continue;
            }
            let bm = RoaringBitmap::from_sorted_iter(e).expect("rows ascending");
            self.emit(sources[k], &bm);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::wave_chunks;

    #[test]
    fn waves_under_a_limit_hold_the_chunks_it_needs() {
        // No limit: full waves.
        assert_eq!(wave_chunks(None, 0, 0, 4096, 32), 32);
        // A limit: one chunk to measure, then what the pairs per start ask for.
        assert_eq!(wave_chunks(Some(1_000_000), 0, 0, 4096, 32), 1);
        assert_eq!(wave_chunks(Some(1_000_000), 0, 4096, 4096, 32), 32);
        // 10 pairs per start: ~96k more starts, 24 chunks of 4096.
        assert_eq!(wave_chunks(Some(1_000_000), 40_960, 4096, 4096, 32), 24);
        // 1000 pairs per start: one more chunk is plenty.
        assert_eq!(wave_chunks(Some(1_000_000), 500_000, 500, 4096, 32), 1);
        // Rare pairs: at most a full wave.
        assert_eq!(wave_chunks(Some(1_000_000), 1, 4096, 4096, 32), 32);
    }
}
