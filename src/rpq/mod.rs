//! Regular path queries and SPARQL 1.1 property paths, evaluated by Boolean products only.
//!
//! A [`Path`] and its two ends ([`Endpoint`]) are planned ([`plan`]) into a Glushkov
//! automaton over (predicate class, direction) symbols ([`Automaton`]), a direction of
//! evaluation and a batching of start nodes. The executor keeps, per automaton state, a
//! frontier and a visited bit batch in the engine ([`Engine::Bits`], 64·W start nodes at
//! once); each step applies, for every state with a non-empty incoming frontier, one
//! batched Boolean product per relation of its symbol (forward = [`Direction::Left`],
//! inverse = [`Direction::Right`]), ORs into the state's next frontier and masks it with
//! the visited set ([`Engine::bits_advance`]) until no frontier changes.
//!
//! Semantics: distinct `(start, end)` pairs (set semantics per start node, as SPARQL
//! closures). A path that accepts the empty word relates every node of the graph to itself
//! when both ends are variables, and a constant to itself always, even when the constant
//! does not occur in the graph (SPARQL 1.1 §18.4; Oxigraph 0.5.13 drops such constants).
//!
//! ```
//! use k2rpq::engine::cpu::CpuEngine;
//! use k2rpq::rpq::{evaluate, Endpoint, EvalOptions, MemoryGraph, Path};
//! // 0 -p-> 1 -p-> 2
//! let g = MemoryGraph::from_triples(vec![(0, 9, 1), (1, 9, 2)]);
//! let path = Path::OneOrMore(Path::link(9));
//! let r = evaluate(&CpuEngine::new(), &g, &path, Endpoint::Const(0), Endpoint::Var, &EvalOptions::default()).unwrap();
//! assert_eq!(r.pairs, vec![(0, 1), (0, 2)]);
//! ```
//!
//! [`Engine::Bits`]: crate::engine::Engine::Bits
//! [`Engine::bits_advance`]: crate::engine::Engine::bits_advance
//! [`Direction::Left`]: crate::engine::Direction::Left
//! [`Direction::Right`]: crate::engine::Direction::Right

mod automaton;
mod exec;
mod graph;
mod log;
mod node_set;
mod path;
mod plan;
pub mod route;
mod sparse;
mod split;
pub mod terms;

use std::time::Duration;

pub use automaton::{Automaton, Dir, PredClass, Symbol};
pub use exec::{
    evaluate, evaluate_with, execute, walk_before_device, Loaded, MatrixHandle, PerQueryRelations,
    RelationSource, Trace, TraceStep, HOST_WALK,
};
pub use graph::{union_tree, MemoryGraph, PathGraph};
pub use log::{parse_log_line, parse_log_line_with, LogEndpoint, LogQuery, Prefixes};
pub use path::{parse_path_expr, path_iris, Path, UNKNOWN_PREDICATE};
pub(crate) use plan::starting_nodes;
pub use plan::{plan, subject_candidates, EvalDirection, Plan, RelKey, StartNodes};
pub use split::{evaluate_split, runs_on_one, Share};

use crate::engine::{EngineError, MatrixConfig};

/// A predicate: the term id of its IRI in the store dictionary. An IRI the store does not
/// know maps to an id with no relation ([`UNKNOWN_PREDICATE`]).
pub type PredId = u32;

/// One end of a path pattern.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Endpoint {
    /// A variable: every node that fits.
    Var,
    /// A fixed node id (it need not occur in the graph).
    Const(u32),
}

/// How each product visits the tree.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum TraversalPolicy {
    /// Per step, masked while the frontier is small against the relation, dense otherwise
    /// (like direction-optimizing BFS).
    #[default]
    Auto,
    /// Always [`Traversal::Dense`](crate::engine::Traversal::Dense).
    Dense,
    /// Always [`Traversal::Masked`](crate::engine::Traversal::Masked).
    Masked,
}

/// Options of one evaluation.
#[derive(Clone, Debug)]
pub struct EvalOptions {
    /// Stop after this many distinct pairs (reported as `truncated`).
    pub limit: Option<u64>,
    /// Stop after this long (reported as `timed_out`); the pairs found so far are kept.
    /// Checked between products: one product is never interrupted.
    pub timeout: Option<Duration>,
    /// `W`: words per node of a frontier batch, so `64·W` start nodes run together when
    /// both ends are variables (a constant start uses one word).
    pub batch_words: usize,
    /// Dense or masked products.
    pub traversal: TraversalPolicy,
    /// What the engine keeps with each loaded relation.
    pub config: MatrixConfig,
    /// Only count the pairs ([`PathResult::count`]); `pairs` stays empty.
    pub count_only: bool,
    /// Let a device engine leave a constant-start query that reaches few nodes to a walk
    /// of the host trees ([`HOST_WALK`] in its trace) under `TraversalPolicy::Auto`;
    /// `false` keeps every product on the engine (what `--engine gpu` asks for).
    pub host_walk: bool,
}

impl Default for EvalOptions {
    fn default() -> Self {
        EvalOptions {
            limit: None,
            timeout: None,
            batch_words: 8,
            traversal: TraversalPolicy::Auto,
            config: MatrixConfig::default(),
            count_only: false,
            host_walk: true,
        }
    }
}

/// The answer of one evaluation.
#[derive(Clone, Debug, Default)]
pub struct PathResult {
    /// Distinct `(start, end)` node id pairs, ascending (empty when counting only).
    pub pairs: Vec<(u32, u32)>,
    /// Number of distinct pairs found (equals `pairs.len()` unless counting only).
    pub count: u64,
    /// Whether `limit` cut the answer short.
    pub truncated: bool,
    /// Whether `timeout` cut the answer short (the pairs found so far are correct).
    pub timed_out: bool,
    /// The steps taken, with times.
    pub trace: Trace,
}

/// Errors of planning and evaluation.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RpqError {
    /// A query text that does not parse.
    #[error("cannot parse `{input}` at byte {position}: {reason}")]
    Parse {
        /// The text.
        input: String,
        /// Byte offset of the problem.
        position: usize,
        /// What is wrong.
        reason: String,
    },
    /// A relation whose shape does not match the graph's node id space.
    #[error("relation of predicate {pred} is {rows}×{cols}, the graph has {nodes} node ids")]
    RelationShape {
        /// The predicate.
        pred: PredId,
        /// Its rows.
        rows: u64,
        /// Its columns.
        cols: u64,
        /// The graph's node id space.
        nodes: u32,
    },
    /// A data file that cannot be read or parsed.
    #[error("{file}{}: {reason}", line.map(|l| format!(" line {l}")).unwrap_or_default())]
    Load {
        /// The file.
        file: String,
        /// The line, when known.
        line: Option<u64>,
        /// What is wrong.
        reason: String,
    },
    /// Bad options.
    #[error("invalid options: {0}")]
    Options(String),
    /// The engine failed.
    #[error(transparent)]
    Engine(#[from] EngineError),
}
