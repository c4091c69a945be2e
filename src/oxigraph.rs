//! The Oxigraph embedding: any SPARQL query over an Oxigraph [`Store`], with every
//! property-path pattern answered by k2rpq and the rest by Oxigraph.
//!
//! Oxigraph has no hook for paths, so the query is rewritten
//! ([`wrap_paths_in_service`]): each path pattern (with the sequences the parser split
//! re-assembled) becomes `SERVICE <urn:k2rpq:paths> { … }`, which a [`ServiceHandler`]
//! registered with [`SparqlEvaluator::with_service_handler`] answers from k²-tree
//! relations built from the store. The relations are rebuilt when the store changed since
//! they were built (same quad count and order-independent hash of every quad).
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

use crate::engine::cpu::CpuEngine;
use crate::engine::Engine;
use crate::sparql::rewrite::{wrap_paths_in_service, SERVICE_IRI};
use crate::sparql::{evaluate_pattern, MemoryDataset, QueryAnswer, SparqlError};

/// Errors of the embedding.
#[derive(Debug, thiserror::Error)]
pub enum OxigraphError {
    /// The query does not parse.
    #[error("invalid SPARQL: {0}")]
    Syntax(#[from] spargebra::SparqlSyntaxError),
    /// Oxigraph failed to evaluate the query (a k2rpq service error arrives wrapped).
    #[error(transparent)]
    Evaluation(#[from] QueryEvaluationError),
    /// Reading the store failed.
    #[error(transparent)]
    Storage(#[from] StorageError),
}

/// Answers `query` over `store` with a CPU engine, building the relations for this call
/// only (use [`K2Paths`] to keep them between queries).
pub fn evaluate(store: &Store, query: &str) -> Result<QueryResults<'static>, OxigraphError> {
    K2Paths::cpu().evaluate(store, query)
}

/// What identifies a store's content cheaply enough to check before each query.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Fingerprint {
    quads: u64,
    digest: u64,
}

impl Fingerprint {
    /// One pass over the quads: their number and the wrapping sum of their hashes (so
    /// the order of iteration does not matter).
    fn of(store: &Store) -> Result<Fingerprint, StorageError> {
        let mut f = Fingerprint { quads: 0, digest: 0 };
        for q in store.iter() {
            let mut h = DefaultHasher::new();
            q?.hash(&mut h);
            f.quads += 1;
            f.digest = f.digest.wrapping_add(h.finish());
        }
        Ok(f)
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
            snapshot: Mutex::new(None),
        }
    }

    /// The relations of `store`'s current content (rebuilt if it changed).
    fn snapshot(&self, store: &Store) -> Result<Arc<Snapshot>, StorageError> {
        let fingerprint = Fingerprint::of(store)?;
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
    /// [`wrap_paths_in_service`](crate::sparql::rewrite::wrap_paths_in_service).
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
        Ok(self
            .evaluator(store)?
            .for_query(rewritten)
            .on_store(store)
            .execute()?)
    }
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
        let answer = evaluate_pattern(&*self.engine, &self.snapshot.dataset, pattern)?;
        let QueryAnswer::Solutions { variables, rows } = answer else {
            return Err(SparqlError::Unsupported("ASK inside SERVICE".into()));
        };
        let variables: Arc<[Variable]> = variables.into();
        Ok(QuerySolutionIter::from_tuples(
            variables,
            rows.into_iter().map(Ok),
        ))
    }
}
