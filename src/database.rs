//! An opened store together with the engine that evaluates on it: the entry point for
//! path queries from the CLI, the benchmarks and embedders.
//!
//! ```no_run
//! use k2rpq::database::{Database, EngineChoice};
//! use k2rpq::rpq::{parse_log_line, EvalOptions};
//! let db = Database::open("codex.store".as_ref(), EngineChoice::Auto).unwrap();
//! let q = parse_log_line("<http://www.wikidata.org/entity/Q183> <http://www.wikidata.org/prop/direct/P530>+ ?y").unwrap();
//! let answer = db.run_log_query(&q, &EvalOptions::default()).unwrap();
//! println!("{} rows on the {} engine", answer.result.count, answer.engine);
//! ```

use std::path::Path as FsPath;
use std::sync::{Arc, Mutex, OnceLock};

use oxrdf::{NamedNodeRef, Term, TermRef};
use roaring::RoaringBitmap;

use crate::engine::cpu::CpuEngine;
use crate::k2tree::K2Tree;
use crate::rpq::{
    self, Endpoint, EvalOptions, LogEndpoint, LogQuery, Path, PathGraph, PathResult, PredId,
    RpqError,
};
use crate::store::{GraphId, Store, StoreError};

/// Which engine evaluates queries.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default, clap::ValueEnum, serde::Serialize)]
pub enum EngineChoice {
    /// The GPU when one is usable, except for queries whose relations are too small to
    /// pay for the device round trips (they run on the CPU); the CPU without a GPU.
    #[default]
    Auto,
    /// Always the CPU engine.
    Cpu,
    /// The GPU engine; an error when no GPU is usable.
    Gpu,
}

/// Relations of fewer edges than this (summed over a query) run on the CPU under
/// [`EngineChoice::Auto`]: below it a GPU product costs more in launches and copies
/// than the whole query does on the host.
pub const AUTO_GPU_MIN_EDGES: u64 = 1 << 20;

/// Errors of the database layer.
#[derive(Debug, thiserror::Error)]
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
}

/// One graph of a store seen as a [`PathGraph`].
///
/// Store errors met while mapping a relation (a corrupt file) cannot cross the
/// `PathGraph` interface, so the first one is kept and reported after the evaluation.
pub struct StoreGraph<'a> {
    store: &'a Store,
    graph: GraphId,
    nodes: OnceLock<RoaringBitmap>,
    error: Mutex<Option<StoreError>>,
}

impl<'a> StoreGraph<'a> {
    /// Graph `graph` of `store`.
    pub fn new(store: &'a Store, graph: GraphId) -> Self {
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

impl PathGraph for StoreGraph<'_> {
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

/// The answer to one path query.
#[derive(Debug)]
pub struct PathAnswer {
    /// Distinct `(start, end)` id pairs and the trace.
    pub result: PathResult,
    /// The engine that ran it (`cpu` or `gpu`).
    pub engine: &'static str,
}

/// An opened store and its engines.
pub struct Database {
    store: Store,
    choice: EngineChoice,
    cpu: CpuEngine,
}

impl Database {
    /// Opens the store in `dir`; with [`EngineChoice::Gpu`] fails when no GPU is usable.
    pub fn open(dir: &FsPath, choice: EngineChoice) -> Result<Database, DatabaseError> {
        let store = Store::open(dir)?;
        Ok(Database {
            store,
            choice,
            cpu: CpuEngine::new(),
        })
    }

    /// The store.
    pub fn store(&self) -> &Store {
        &self.store
    }

    /// The engine choice.
    pub fn engine_choice(&self) -> EngineChoice {
        self.choice
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

    /// Resolves a log query's path against the dictionary.
    pub fn path_of(&self, q: &LogQuery) -> Path {
        rpq::parse_path_expr(&q.path, |iri| self.iri_id(iri))
    }

    /// Evaluates a log query on the default graph. An IRI endpoint the store does not know
    /// still matches itself through a zero-length path (SPARQL 1.1): such queries are
    /// answered without the engine.
    pub fn run_log_query(
        &self,
        q: &LogQuery,
        options: &EvalOptions,
    ) -> Result<PathAnswer, DatabaseError> {
        let path = self.path_of(q);
        let end = |e: &LogEndpoint| -> Result<Endpoint, Option<String>> {
            match e {
                LogEndpoint::Var(_) => Ok(Endpoint::Var),
                LogEndpoint::Iri(i) => self
                    .iri_id(i)
                    .map(Endpoint::Const)
                    .ok_or_else(|| Some(i.clone())),
            }
        };
        match (end(&q.subject), end(&q.object)) {
            (Ok(s), Ok(o)) => self.run_path(0, &path, s, o, options),
            // A constant outside the dictionary has no edges: only the empty word can
            // reach it, and it is not a node id, so there is no pair of ids to return.
            // Callers that need the term itself (the SPARQL layer) handle it there.
            _ => Ok(PathAnswer {
                result: PathResult::default(),
                engine: "none",
            }),
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
        let g = StoreGraph::new(&self.store, graph);
        let result = rpq::evaluate(&self.cpu, &g, path, subject, object, options);
        if let Some(e) = g.take_error() {
            return Err(e.into());
        }
        Ok(PathAnswer {
            result: result?,
            engine: "cpu",
        })
    }
}

/// Whether a GPU is usable here; the reason when not.
pub fn gpu_available() -> Result<(), String> {
    Err("this build has no GPU engine yet".into())
}
