//! The Oxigraph embedding: any SPARQL query over an Oxigraph [`Store`], with every
//! property-path pattern answered by k2rpq and the rest by Oxigraph.
//!
//! Oxigraph has no hook for paths, so the query is rewritten
//! ([`wrap_paths_in_service`]): each group of joined triple and path patterns that holds
//! a path (the sequences the parser split re-assembled) becomes
//! `SERVICE <urn:k2rpq:paths> { … }` with its VALUES and GRAPH context, which a [`ServiceHandler`]
//! registered with [`SparqlEvaluator::with_service_handler`] answers from k²-tree
//! relations built from the store. The relations are rebuilt when the store changed since
//! they were built ([`ChangeCheck`]).
//!
//! ```
//! use oxigraph::model::{GraphName, NamedNode, Quad};
//! use oxigraph::sparql::QueryResults;
//! use oxigraph::store::Store;
//! let store = Store::new()?;
//! let n = |s: &str| NamedNode::new(format!("http://e/{s}")).unwrap();
//! store.insert(&Quad::new(n("a"), n("p"), n("b"), GraphName::DefaultGraph))?;
//! store.insert(&Quad::new(n("b"), n("p"), n("c"), GraphName::DefaultGraph))?;
//! let paths = k2rpq::oxigraph::K2Paths::cpu();
//! let QueryResults::Solutions(rows) =
//!     paths.evaluate(&store, "SELECT ?x WHERE { <http://e/a> <http://e/p>+ ?x }")?
//! else { unreachable!() };
//! assert_eq!(rows.count(), 2);
//! # Ok::<_, Box<dyn std::error::Error>>(())
//! ```
//!
//! Queries with `FROM` / `FROM NAMED` are left to Oxigraph whole (the service would not
//! know their dataset).
//!
//! [`wrap_paths_in_service`]: crate::sparql::rewrite::wrap_paths_in_service

use std::hash::{DefaultHasher, Hash, Hasher};
use std::sync::{Arc, Mutex};

use oxigraph::sparql::{
    QueryEvaluationError, QueryResults, QuerySolutionIter, ServiceHandler, SparqlEvaluator,
};
use oxigraph::store::{StorageError, Store};
use oxrdf::{NamedNode, Variable};
use spargebra::algebra::GraphPattern;

use crate::database::Database;
use crate::engine::cpu::CpuEngine;
use crate::engine::Engine;
use crate::progress::{Progress, Stage, Unit};
use crate::sparql::rewrite::{wrap_paths_in_service, SERVICE_IRI};
use crate::sparql::{evaluate_pattern, MemoryDataset, QueryAnswer, SparqlError};
use crate::store::StoreError;

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
    /// Reading the k2rpq store that [`copy_store`] copies failed.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The k2rpq store contradicts itself (a cell names a term its dictionary lacks, or a
    /// literal subject): [`copy_store`] stops rather than copy part of it.
    #[error("copying the store into Oxigraph: {0}")]
    Copy(String),
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
        let handler = PathService {
            engine: Arc::clone(&self.engine),
            snapshot: self.snapshot(store)?,
        };
        Ok(SparqlEvaluator::new()
            .with_service_handler(NamedNode::new_unchecked(SERVICE_IRI), handler))
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
    let parsed = spargebra::SparqlParser::new().parse_query(query)?;
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

/// The service's answer as Oxigraph's solutions.
fn solutions(answer: QueryAnswer) -> Result<QuerySolutionIter<'static>, SparqlError> {
    let QueryAnswer::Solutions { variables, rows } = answer else {
        return Err(SparqlError::Unsupported("ASK inside SERVICE".into()));
    };
    let variables: Arc<[Variable]> = variables.into();
    Ok(QuerySolutionIter::from_tuples(
        variables,
        rows.into_iter().map(Ok),
    ))
}

/// The `SERVICE <urn:k2rpq:paths>` handler: evaluates the service's pattern on a
/// snapshot of the store.
struct PathService<E: Engine + 'static> {
    engine: Arc<E>,
    snapshot: Arc<Snapshot>,
}

impl<E: Engine + 'static> ServiceHandler for PathService<E> {
    type Error = SparqlError;

    fn handle(
        &self,
        pattern: &GraphPattern,
        _base_iri: Option<&oxiri::Iri<String>>,
    ) -> Result<QuerySolutionIter<'static>, SparqlError> {
        solutions(evaluate_pattern(
            &*self.engine,
            &self.snapshot.dataset,
            pattern,
        )?)
    }
}

/// Any SPARQL query over a k2rpq store: its property paths answered from the store's own
/// trees (on the GPU through its device cache, as [`Database::query`] chooses), the rest
/// by Oxigraph over a copy of the same data ([`copy_store`]). This is what
/// `k2rpq query --oxigraph --store DIR` runs.
///
/// ```no_run
/// use std::sync::Arc;
/// use k2rpq::database::{Database, DatabaseOptions};
/// use k2rpq::oxigraph::{copy_store, StorePaths};
/// let db = Arc::new(Database::open("codex.store".as_ref(), &DatabaseOptions::default())?);
/// let copy = copy_store(db.store(), None)?;
/// let paths = StorePaths::new(Arc::clone(&db));
/// let results = paths.evaluate(&copy.store,
///     "SELECT ?x ?label WHERE { ?x <http://www.wikidata.org/prop/direct/P31>+ ?c \
///      OPTIONAL { ?x <http://www.w3.org/2000/01/rdf-schema#label> ?label } }")?;
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct StorePaths {
    db: Arc<Database>,
}

impl StorePaths {
    /// Paths from the store `db` opened.
    pub fn new(db: Arc<Database>) -> Self {
        StorePaths { db }
    }

    /// Answers `query` over `store`, which must hold the same quads as the database's
    /// store (its [`copy_store`]): the `SERVICE` patterns' rows come from the database, the
    /// joins with everything else from Oxigraph.
    pub fn evaluate(
        &self,
        store: &Store,
        query: &str,
    ) -> Result<QueryResults<'static>, OxigraphError> {
        execute(store, query, || {
            Ok(SparqlEvaluator::new().with_service_handler(
                NamedNode::new_unchecked(SERVICE_IRI),
                StoreService(Arc::clone(&self.db)),
            ))
        })
    }
}

/// The `SERVICE <urn:k2rpq:paths>` handler of [`StorePaths`].
struct StoreService(Arc<Database>);

impl ServiceHandler for StoreService {
    type Error = SparqlError;

    fn handle(
        &self,
        pattern: &GraphPattern,
        _base_iri: Option<&oxiri::Iri<String>>,
    ) -> Result<QuerySolutionIter<'static>, SparqlError> {
        solutions(self.0.evaluate_pattern(pattern)?.0)
    }
}

/// An in-memory Oxigraph copy of a k2rpq store ([`copy_store`]), and what making it cost.
pub struct StoreCopy {
    /// The copy.
    pub store: Store,
    /// Triples (quads) inserted.
    pub triples: u64,
    /// Terms decoded from the store's dictionary.
    pub terms: u64,
    /// Seconds to decode every term of the dictionary (in parallel).
    pub decode_s: f64,
    /// Seconds to extract and sort the relations' cells and insert the quads (one thread:
    /// Oxigraph's in-memory store takes one writer at a time).
    pub insert_s: f64,
}

/// Quads inserted per Oxigraph transaction: bounds the transaction's undo log (an `Arc`
/// per quad) without paying a commit per relation chunk more than a few times.
const QUADS_PER_TRANSACTION: usize = 1 << 22;

/// Copies every quad of a k2rpq store (all graphs) into a new in-memory Oxigraph store,
/// with a progress bar on stderr if `progress`: what [`StorePaths`] and `k2rpq bench`'s
/// Oxigraph peer evaluate on. It takes minutes for 100 M triples (Oxigraph's insertion,
/// one thread) and Oxigraph's memory for them.
///
/// Nothing is re-parsed: every term of the dictionary is decoded once, in parallel, into
/// a table; the relations' `(subject, object)` cells are extracted in parallel and sorted
/// by subject, so that consecutive inserts hit the same entries of Oxigraph's indexes;
/// the calling thread inserts borrowed quads (`QuadRef`s into that table) through
/// Oxigraph's transaction API, whose memory backend serialises writers.
pub fn copy_store(
    store: &crate::store::Store,
    progress: Option<&dyn Progress>,
) -> Result<StoreCopy, OxigraphError> {
    use oxigraph::model::{GraphNameRef, NamedNodeRef, NamedOrBlankNodeRef, QuadRef, Term};
    use rayon::prelude::*;
    use std::time::Instant;

    let ox = Store::new()?;
    let dict = store.dictionary();
    let missing = |id: u32| OxigraphError::Copy(format!("node id {id} not in the dictionary"));

    let t = Instant::now();
    let terms: Vec<Term> = (0..dict.len())
        .into_par_iter()
        .map(|id| dict.term(id).ok_or_else(|| missing(id)))
        .collect::<Result<_, _>>()?;
    let decode_s = t.elapsed().as_secs_f64();

    let t = Instant::now();
    let mut relations = Vec::new();
    for (g, info) in store.graphs().iter().enumerate() {
        for p in store.predicates(g) {
            relations.push((g, info.name.clone(), p.id, p.iri.clone()));
        }
    }
    let cells: Vec<Vec<(u32, u32)>> = relations
        .par_iter()
        .map(|(g, _, pid, _)| {
            Ok(store
                .relation(*g, *pid)?
                .map(|t| t.cells())
                .unwrap_or_default())
        })
        .collect::<Result<_, StoreError>>()?;
    let mut all: Vec<(u32, u32, u32)> = Vec::with_capacity(cells.iter().map(Vec::len).sum());
    for (r, c) in cells.into_iter().enumerate() {
        all.extend(c.into_iter().map(|(s, o)| (s, r as u32, o)));
    }
    all.par_sort_unstable();
    let preds: Vec<NamedNodeRef<'_>> = relations
        .iter()
        .map(|(_, _, _, iri)| NamedNodeRef::new_unchecked(iri))
        .collect();
    let graphs: Vec<GraphNameRef<'_>> = relations
        .iter()
        .map(|(_, name, _, _)| match name {
            None => GraphNameRef::DefaultGraph,
            Some(n) => n.as_ref().into(),
        })
        .collect();
    let bar = Stage::begin(
        progress,
        "copying into Oxigraph",
        Unit::Items,
        Some(all.len() as u64),
    );
    let mut txn = ox.start_transaction()?;
    let mut pending = 0usize;
    for (k, &(s, r, o)) in all.iter().enumerate() {
        let (Some(s), Some(o)) = (terms.get(s as usize), terms.get(o as usize)) else {
            return Err(missing(s.max(o)));
        };
        let subject = match s {
            Term::NamedNode(n) => NamedOrBlankNodeRef::from(n.as_ref()),
            Term::BlankNode(b) => NamedOrBlankNodeRef::from(b.as_ref()),
            _ => return Err(OxigraphError::Copy(format!("literal subject {s}"))),
        };
        txn.insert(QuadRef::new(
            subject,
            preds[r as usize],
            o.as_ref(),
            graphs[r as usize],
        ));
        pending += 1;
        if pending >= QUADS_PER_TRANSACTION {
            txn.commit()?;
            txn = ox.start_transaction()?;
            pending = 0;
        }
        if k % (1 << 16) == 0 {
            bar.set(k as u64);
        }
    }
    txn.commit()?;
    drop(bar);
    Ok(StoreCopy {
        store: ox,
        triples: all.len() as u64,
        terms: terms.len() as u64,
        decode_s,
        insert_s: t.elapsed().as_secs_f64(),
    })
}
