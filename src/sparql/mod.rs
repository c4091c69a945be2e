//! SPARQL front end: spargebra algebra, exact SPARQL 1.1 property-path semantics, a
//! standalone evaluator for a query subset, result formats, and the algebra rewrites the
//! Oxigraph embedding ([`crate::oxigraph`]) uses.
//!
//! Terms become ids at the edges ([`TermDictionary`]); everything below (the RPQ engine)
//! sees only ids. See `docs/SEMANTICS.md` for the semantics and Oxigraph's deviations.

pub mod dataset;
pub mod query;
pub mod results;
pub mod rewrite;
pub mod semantics;

pub use dataset::{MemoryDataset, MemoryDictionary, PathDataset, TermDictionary};
pub use query::{
    evaluate_pattern, evaluate_query, evaluate_query_with, query, PerQueryProvider, QueryAnswer,
    RelationProvider,
};
pub use results::{write_answer, ResultFormat};

/// Errors of the SPARQL layer.
#[derive(Debug, thiserror::Error)]
pub enum SparqlError {
    /// The query does not parse (the message gives the line and column).
    #[error("invalid SPARQL: {0}")]
    Syntax(#[from] spargebra::SparqlSyntaxError),
    /// The query uses a construct outside the supported subset, named here.
    #[error("unsupported: {0}")]
    Unsupported(String),
    /// Path evaluation failed.
    #[error(transparent)]
    Rpq(#[from] crate::rpq::RpqError),
    /// A data file that cannot be read or parsed.
    #[error("{file}{}: {reason}", line.map(|l| format!(" line {l}")).unwrap_or_default())]
    Load {
        /// The file.
        file: String,
        /// The line, when known (1-based).
        line: Option<u64>,
        /// What is wrong.
        reason: String,
    },
    /// Writing results failed.
    #[error("cannot write results: {0}")]
    Results(String),
    /// The store could not be read (a corrupt relation file).
    #[error(transparent)]
    Store(#[from] crate::store::StoreError),
}
