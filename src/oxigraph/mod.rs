//! The Oxigraph embedding: any SPARQL query over an Oxigraph store, with every
//! property-path pattern answered by k2rpq and the rest by Oxigraph. [`K2Store`] owns
//! the store's write path (insert, remove, extend, loads, SPARQL UPDATE, transactions)
//! and keeps k2rpq's relations current from it, so queries never scan the store; **a
//! write that bypasses it (through [`K2Store::oxigraph`] or another handle on the same
//! store) is the caller's to declare with [`K2Store::rebuild`]**, or the relations
//! answer for the store as it was.
//!
//! ```
//! use oxigraph::model::{GraphName, NamedNode, Quad};
//! use oxigraph::sparql::QueryResults;
//! let store = k2rpq::oxigraph::K2Store::new()?;
//! let n = |s: &str| NamedNode::new(format!("http://e/{s}")).unwrap();
//! store.insert(&Quad::new(n("a"), n("p"), n("b"), GraphName::DefaultGraph))?;
//! store.update("INSERT DATA { <http://e/b> <http://e/p> <http://e/c> }")?;
//! let count = |q: &str| match store.query(q).unwrap() {
//!     QueryResults::Solutions(rows) => rows.count(),
//!     _ => unreachable!(),
//! };
//! let q = "SELECT ?x WHERE { <http://e/a> <http://e/p>+ ?x }";
//! assert_eq!(count(q), 2);
//! store.remove(&Quad::new(n("b"), n("p"), n("c"), GraphName::DefaultGraph))?;
//! assert_eq!(count(q), 1); // the next query sees every write
//! # Ok::<_, Box<dyn std::error::Error>>(())
//! ```
//!
//! How it works. Each predicate of each graph is a k²-tree relation over one dictionary
//! of term ids. A write runs in one Oxigraph transaction that records its exact changes
//! (a quad inserted that was absent, deleted that was present; SPARQL UPDATE operations
//! are evaluated one by one for this), and once Oxigraph commits, the changes go in the
//! same order into per-relation deltas (added and deleted `(subject, object)` pairs; new
//! terms numbered after the dictionary's). Queries read an immutable, versioned snapshot:
//! a relation with a delta is rebuilt as one tree at the first query that reads it, or by
//! a background merge once its delta passes a threshold, and swapped in atomically
//! (queries in flight keep their version). Loaded relations are cached in the engine
//! (on a GPU, resident) keyed by their tree's content, so a write drops exactly the
//! relations it changed. With [`K2Store::open_with`] (and `K2Store::open`, RocksDB,
//! `--features rocksdb`) the relations live on disk beside the store: a checkpoint plus
//! a log of writes fsynced before Oxigraph commits, replayed exactly on reopen.
//!
//! For a store written only outside k2rpq, [`K2Paths`] evaluates paths over relations
//! built from it, noticing changes as its [`ChangeCheck`] says (the default samples the
//! store before each query; [`ChangeCheck::Never`] builds once and never scans).
//!
//! The rewrite ([`wrap_paths_in_service`]) turns each group of joined triple and path
//! patterns that holds a path into `SERVICE <urn:k2rpq:paths> { … }` with its VALUES
//! and GRAPH context, which a [`ServiceHandler`] registered with
//! [`SparqlEvaluator::with_service_handler`] answers from the relations.
//!
//! Queries with `FROM` / `FROM NAMED` are left to Oxigraph whole (the service would not
//! know their dataset).
//!
//! A k2rpq store needs none of this: [`crate::database::Database::query`] runs Oxigraph's
//! evaluator over the store itself.
//!
//! [`wrap_paths_in_service`]: crate::sparql::rewrite::wrap_paths_in_service

mod live;
mod log;
mod store;
mod update;

pub use store::{EmbeddingStats, InjectedFailure, K2Store, K2Transaction, DEFAULT_MERGE_THRESHOLD};

use std::hash::{DefaultHasher, Hash, Hasher};
use std::sync::{Arc, Mutex};

use oxigraph::sparql::{
    QueryEvaluationError, QueryResults, QuerySolutionIter, ServiceHandler, SparqlEvaluator,
};
use oxigraph::store::{StorageError, Store};
use oxrdf::NamedNode;
use spargebra::algebra::GraphPattern;

use crate::engine::cpu::CpuEngine;
use crate::engine::Engine;
use crate::sparql::group::{
    evaluate_group, GraphScope, PathGroup, PerQueryProvider, RelationProvider,
};
use crate::sparql::rewrite::{wrap_paths_in_service, SERVICE_IRI};
use crate::sparql::semantics::Deadline;
use crate::sparql::{MemoryDataset, PathDataset, SparqlError};

/// Errors of the embedding.
#[derive(Debug, thiserror::Error)]
pub enum OxigraphError {
    /// The query does not parse (the parser's message is this error's own, not a source,
    /// so that an error chain prints it once).
    #[error("invalid SPARQL: {}", crate::sparql::tidy_syntax_message(&.0.to_string()))]
    Syntax(spargebra::SparqlSyntaxError),
    /// Oxigraph failed to evaluate the query (a k2rpq service error arrives wrapped).
    #[error(transparent)]
    Evaluation(#[from] QueryEvaluationError),
    /// Reading the store failed.
    #[error(transparent)]
    Storage(#[from] StorageError),
    /// An RDF document that cannot be loaded.
    #[error("cannot load the document: {0}")]
    Load(String),
    /// An update operation this embedding cannot run, named here.
    #[error("unsupported: {0}")]
    Unsupported(String),
    /// `CLEAR` or `DROP` of a graph that does not exist (without `SILENT`).
    #[error("the graph <{0}> does not exist")]
    GraphDoesNotExist(String),
    /// `CREATE` of a graph that exists (without `SILENT`).
    #[error("the graph <{0}> already exists")]
    GraphAlreadyExists(String),
    /// k2rpq's relations could not take the write (it was rolled back on both sides).
    #[error("the relations cannot take the write: {0}")]
    Relations(String),
}

impl From<spargebra::SparqlSyntaxError> for OxigraphError {
    fn from(e: spargebra::SparqlSyntaxError) -> Self {
        OxigraphError::Syntax(e)
    }
}

/// Answers `query` over `store`: property paths by k2rpq on the GPU when one is usable
/// (else on the CPU, after a one-line notice), the rest by Oxigraph. Builds the relations
/// for this call only: use [`K2Paths`] to keep them between queries.
pub fn evaluate(store: &Store, query: &str) -> Result<QueryResults<'static>, OxigraphError> {
    match crate::engine::gpu::GpuEngine::new_or_notice(0) {
        Some(gpu) => K2Paths::new(gpu).evaluate(store, query),
        None => K2Paths::cpu().evaluate(store, query),
    }
}

/// How [`K2Paths`] checks, before each query, whether the store changed since it built
/// the relations.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum ChangeCheck {
    /// The quad count plus a hash of the first [`SAMPLED_QUADS`] quads (in Oxigraph's index
    /// order): cheap, and notices every insertion or removal that changes the count; a
    /// change that keeps the count and spares the sampled quads goes unnoticed (call
    /// [`K2Paths::invalidate`] after such updates).
    #[default]
    Sampled,
    /// The quad count plus an order-independent hash of every quad: notices every change,
    /// at the cost of hashing the whole store before each query.
    Full,
    /// No check: the relations are built at the first query and kept, with no scan
    /// per query, until [`K2Paths::invalidate`] (for a store that does not change, or
    /// whose writer says when it did; [`K2Store`] follows writes itself).
    Never,
}

/// Quads hashed by [`ChangeCheck::Sampled`].
pub const SAMPLED_QUADS: usize = 4096;

/// What identifies a store's content.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Fingerprint {
    quads: u64,
    digest: u64,
}

impl Fingerprint {
    fn of(store: &Store, check: ChangeCheck) -> Result<Fingerprint, StorageError> {
        let hash = |q: &oxrdf::Quad| {
            let mut h = DefaultHasher::new();
            q.hash(&mut h);
            h.finish()
        };
        match check {
            ChangeCheck::Sampled => {
                let mut digest = 0u64;
                for q in store.iter().take(SAMPLED_QUADS) {
                    digest = digest.wrapping_mul(31).wrapping_add(hash(&q?));
                }
                Ok(Fingerprint {
                    quads: store.len()? as u64,
                    digest,
                })
            }
            ChangeCheck::Never => Ok(Fingerprint {
                quads: 0,
                digest: 0,
            }),
            ChangeCheck::Full => {
                // A wrapping sum, so the order of iteration does not matter.
                let mut f = Fingerprint {
                    quads: 0,
                    digest: 0,
                };
                for q in store.iter() {
                    f.quads += 1;
                    f.digest = f.digest.wrapping_add(hash(&q?));
                }
                Ok(f)
            }
        }
    }
}

struct Snapshot {
    fingerprint: Fingerprint,
    dataset: MemoryDataset,
}

/// k2rpq path evaluation for Oxigraph stores: keeps the relations of the last store seen
/// and rebuilds them when its content changes.
pub struct K2Paths<E: Engine + 'static> {
    engine: Arc<E>,
    check: ChangeCheck,
    snapshot: Mutex<Option<Arc<Snapshot>>>,
}

impl K2Paths<CpuEngine> {
    /// With the CPU engine.
    pub fn cpu() -> Self {
        Self::new(CpuEngine::new())
    }
}

impl<E: Engine + 'static> K2Paths<E> {
    /// With `engine`.
    pub fn new(engine: E) -> Self {
        K2Paths {
            engine: Arc::new(engine),
            check: ChangeCheck::default(),
            snapshot: Mutex::new(None),
        }
    }

    /// Sets how store changes are noticed (default [`ChangeCheck::Sampled`]).
    pub fn with_change_check(mut self, check: ChangeCheck) -> Self {
        self.check = check;
        self
    }

    /// Drops the relations: the next query rebuilds them.
    pub fn invalidate(&self) {
        *self.snapshot.lock().unwrap_or_else(|e| e.into_inner()) = None;
    }

    /// The relations of `store`'s current content (rebuilt if it changed).
    fn snapshot(&self, store: &Store) -> Result<Arc<Snapshot>, StorageError> {
        let fingerprint = Fingerprint::of(store, self.check)?;
        let mut slot = self.snapshot.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(s) = slot.as_ref() {
            if s.fingerprint == fingerprint {
                return Ok(Arc::clone(s));
            }
        }
        let s = Arc::new(Snapshot {
            fingerprint,
            dataset: MemoryDataset::from_store(store)?,
        });
        *slot = Some(Arc::clone(&s));
        Ok(s)
    }

    /// A [`SparqlEvaluator`] whose `SERVICE <urn:k2rpq:paths>` calls k2rpq on `store`'s
    /// current content; use it with queries rewritten by
    /// [`crate::sparql::rewrite::wrap_paths_in_service`].
    pub fn evaluator(&self, store: &Store) -> Result<SparqlEvaluator, StorageError> {
        let engine = Arc::clone(&self.engine);
        let snapshot = self.snapshot(store)?;
        Ok(path_evaluator(move |pattern| {
            let terms = Arc::clone(&snapshot);
            answer_path_service(
                &*engine,
                &snapshot.dataset,
                &PerQueryProvider(&*engine),
                pattern,
                move |id| terms.dataset.dictionary().term(id),
            )
        }))
    }

    /// Answers any SPARQL query over `store`: property paths by k2rpq, the rest by
    /// Oxigraph.
    pub fn evaluate(
        &self,
        store: &Store,
        query: &str,
    ) -> Result<QueryResults<'static>, OxigraphError> {
        execute(store, query, || Ok(self.evaluator(store)?))
    }
}

/// Parses `query` and runs it on `store` with its paths rewritten into `SERVICE` calls
/// that the evaluator `paths` gives answers; a query with its own dataset (`FROM`,
/// `FROM NAMED`) runs on Oxigraph unchanged.
fn execute(
    store: &Store,
    query: &str,
    paths: impl FnOnce() -> Result<SparqlEvaluator, OxigraphError>,
) -> Result<QueryResults<'static>, OxigraphError> {
    let parsed = crate::sparql::parse_in_order(spargebra::SparqlParser::new(), query)?;
    let has_dataset = match &parsed {
        spargebra::Query::Select { dataset, .. }
        | spargebra::Query::Construct { dataset, .. }
        | spargebra::Query::Describe { dataset, .. }
        | spargebra::Query::Ask { dataset, .. } => dataset.is_some(),
    };
    if has_dataset {
        return Ok(SparqlEvaluator::new()
            .for_query(parsed)
            .on_store(store)
            .execute()?);
    }
    let rewritten = wrap_paths_in_service(&parsed);
    Ok(paths()?.for_query(rewritten).on_store(store).execute()?)
}

/// A [`SparqlEvaluator`] whose `SERVICE <urn:k2rpq:paths>` calls `answer` with the
/// service's pattern.
pub(crate) fn path_evaluator(
    answer: impl Fn(&GraphPattern) -> Result<QuerySolutionIter<'static>, SparqlError>
        + Send
        + Sync
        + 'static,
) -> SparqlEvaluator {
    SparqlEvaluator::new()
        .with_service_handler(NamedNode::new_unchecked(SERVICE_IRI), PathService(answer))
}

/// The `SERVICE <urn:k2rpq:paths>` handler: its function answers the service's pattern.
struct PathService<F>(F);

impl<F> ServiceHandler for PathService<F>
where
    F: Fn(&GraphPattern) -> Result<QuerySolutionIter<'static>, SparqlError> + Send + Sync,
{
    type Error = SparqlError;

    fn handle(
        &self,
        pattern: &GraphPattern,
        _base_iri: Option<&oxiri::Iri<String>>,
    ) -> Result<QuerySolutionIter<'static>, SparqlError> {
        (self.0)(pattern)
    }
}

/// The answer of a `SERVICE <urn:k2rpq:paths>` to `pattern`: its path group evaluated on
/// `dataset` with the relations of `relations`, each id turned into its term by `decode`.
pub(crate) fn answer_path_service<'a, E: Engine>(
    engine: &'a E,
    dataset: &'a dyn PathDataset,
    relations: &'a dyn RelationProvider<'a, E>,
    pattern: &GraphPattern,
    decode: impl Fn(u32) -> Option<oxrdf::Term> + 'static,
) -> Result<QuerySolutionIter<'static>, SparqlError> {
    let group = PathGroup::from_pattern(pattern)?;
    let solutions = evaluate_group(
        engine,
        dataset,
        &GraphScope::default(),
        &group,
        relations,
        None,
    )?;
    Ok(solutions.into_solutions(decode, Deadline::default()))
}
