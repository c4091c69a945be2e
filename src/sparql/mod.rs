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
    /// The query does not parse (the message gives the line and column;
    /// [`SparqlError::excerpt`] shows where). The parser's message is this error's own,
    /// not a source, so that an error chain prints it once.
    #[error("invalid SPARQL: {0}")]
    Syntax(spargebra::SparqlSyntaxError),
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

impl From<spargebra::SparqlSyntaxError> for SparqlError {
    fn from(e: spargebra::SparqlSyntaxError) -> Self {
        SparqlError::Syntax(e)
    }
}

impl SparqlError {
    /// For a syntax error in `query`, the line the parser stopped on with a caret under
    /// its column; `None` for other errors, or when the message names no position.
    ///
    /// ```
    /// use k2rpq::sparql::SparqlError;
    /// let text = "SELECT ?x\nWHERE { ?x <http://p>+ }";
    /// let e: SparqlError = spargebra::SparqlParser::new().parse_query(text).unwrap_err().into();
    /// assert_eq!(
    ///     e.excerpt(text).unwrap(),
    ///     "line 2: WHERE { ?x <http://p>+ }\n                               ^"
    /// );
    /// ```
    pub fn excerpt(&self, query: &str) -> Option<String> {
        let SparqlError::Syntax(e) = self else {
            return None;
        };
        // The parser's message starts `error at LINE:COLUMN:` (1-based, columns in chars).
        let message = e.to_string();
        let (line, column) = message
            .strip_prefix("error at ")?
            .split_once(':')
            .and_then(|(l, rest)| Some((l, rest.split_once(':')?.0)))?;
        let (line, column): (usize, usize) = (line.parse().ok()?, column.parse().ok()?);
        let text = query.lines().nth(line.checked_sub(1)?)?;
        let label = format!("line {line}: ");
        let pad = label.chars().count() + column.checked_sub(1)?;
        Some(format!("{label}{text}\n{:pad$}^", ""))
    }
}
