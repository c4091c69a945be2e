//! The one seam between the endpoint and query evaluation: a parsed query (its dataset
//! already set from the request) and a [`Control`] go in; the answer's kind and an
//! iterator over its rows or triples come out. Everything else in the endpoint
//! (negotiation, limits, streaming, errors) is written against [`Evaluator`], so that a
//! new evaluator is a change to [`StoreEvaluator`] alone.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use k2rpq::database::{Database, QueryOptions};
use k2rpq::sparql::{QueryEvaluationError, QueryResults, SparqlError};
use oxrdf::{NamedOrBlankNode, Term, Triple, Variable};
use spargebra::Query;

/// One row of a SELECT answer: a value (or `None`, unbound) per variable.
pub type Row = Vec<Option<Term>>;

/// The rows of a SELECT answer, produced as the evaluator finds them (on the thread that
/// evaluated the query: the rows are read where they are computed).
pub type Rows = Box<dyn Iterator<Item = Result<Row, EvaluationError>>>;

/// The triples of a CONSTRUCT or DESCRIBE answer, produced as the evaluator finds them.
pub type Triples = Box<dyn Iterator<Item = Result<Triple, EvaluationError>>>;

/// What a query returned.
pub enum Answer {
    /// ASK.
    Boolean(bool),
    /// SELECT: the projected variables and the rows.
    Solutions {
        /// Column names.
        variables: Vec<Variable>,
        /// The rows, one value per variable.
        rows: Rows,
    },
    /// CONSTRUCT or DESCRIBE.
    Graph(Triples),
}

/// Why a query has no answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EvaluationError {
    /// The query uses a feature the evaluator does not answer (named here).
    Unsupported(String),
    /// The query ran past its deadline.
    Timeout,
    /// The evaluation stopped because the request was abandoned (the client left).
    Cancelled,
    /// The evaluation failed (a corrupt store, an engine error).
    Failed(String),
}

impl std::fmt::Display for EvaluationError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            EvaluationError::Unsupported(what) => write!(f, "unsupported: {what}"),
            EvaluationError::Timeout => f.write_str("the query ran past its time limit"),
            EvaluationError::Cancelled => f.write_str("the request was abandoned"),
            EvaluationError::Failed(message) => f.write_str(message),
        }
    }
}

/// When an evaluation must stop: a deadline, a flag the endpoint sets when the client
/// leaves or the deadline passes on its side, and the row limit (an evaluator may stop
/// after `row_limit + 1` rows: one more row only tells the endpoint the answer was cut).
#[derive(Clone, Debug)]
pub struct Control {
    deadline: Instant,
    cancelled: Arc<AtomicBool>,
    row_limit: Option<u64>,
}

impl Control {
    /// A control with `timeout` from now and an optional row limit.
    pub fn new(timeout: Duration, row_limit: Option<u64>) -> Control {
        Control {
            deadline: Instant::now() + timeout,
            cancelled: Arc::new(AtomicBool::new(false)),
            row_limit,
        }
    }

    /// The instant past which the evaluation must stop.
    pub fn deadline(&self) -> Instant {
        self.deadline
    }

    /// The most rows the answer may carry, when limited.
    pub fn row_limit(&self) -> Option<u64> {
        self.row_limit
    }

    /// Asks the evaluation to stop at its next check.
    pub fn cancel(&self) {
        self.cancelled.store(true, Ordering::SeqCst);
    }

    /// Why the evaluation must stop now, if it must: the deadline passed or the request
    /// was abandoned.
    pub fn check(&self) -> Result<(), EvaluationError> {
        if self.cancelled.load(Ordering::Relaxed) {
            Err(EvaluationError::Cancelled)
        } else if Instant::now() >= self.deadline {
            Err(EvaluationError::Timeout)
        } else {
            Ok(())
        }
    }
}

/// A graph of the store, for the service description.
#[derive(Clone, Debug)]
pub struct GraphSummary {
    /// Its name (`None`: the default graph).
    pub name: Option<NamedOrBlankNode>,
    /// Its triples.
    pub triples: u64,
}

/// Evaluates queries for the endpoint. Called on a blocking thread of the pool; one
/// evaluator serves every request at once.
pub trait Evaluator: Send + Sync + 'static {
    /// Evaluates `query` (its dataset is the request's). The evaluator should call
    /// [`Control::check`] where it can and stop with its error.
    fn evaluate(&self, query: &Query, control: &Control) -> Result<Answer, EvaluationError>;

    /// The graphs of the data, for the service description.
    fn graphs(&self) -> Vec<GraphSummary>;
}

/// The store's evaluator: [`Database::evaluate`], Oxigraph's evaluator over the store with
/// its paths on k2rpq's engines, one device cache shared by all requests. Rows stream;
/// the evaluation stops at the deadline, and between rows when the request is abandoned.
pub struct StoreEvaluator {
    database: Arc<Database>,
}

impl StoreEvaluator {
    /// An evaluator over an opened store.
    pub fn new(database: Arc<Database>) -> StoreEvaluator {
        StoreEvaluator { database }
    }
}

/// The endpoint's error for an evaluation error: a cancellation is the deadline's or the
/// client's, whichever `control` says.
fn evaluation_error(e: QueryEvaluationError, control: &Control) -> EvaluationError {
    match e {
        QueryEvaluationError::Cancelled => {
            control.check().err().unwrap_or(EvaluationError::Timeout)
        }
        e => EvaluationError::Failed(e.to_string()),
    }
}

impl Evaluator for StoreEvaluator {
    fn evaluate(&self, query: &Query, control: &Control) -> Result<Answer, EvaluationError> {
        control.check()?;
        let options = QueryOptions {
            timeout: Some(control.deadline().saturating_duration_since(Instant::now())),
            ..Default::default()
        };
        let results = self
            .database
            .evaluate(query, &options)
            .map_err(|e| match e {
                SparqlError::Unsupported(what) => EvaluationError::Unsupported(what),
                SparqlError::Timeout => EvaluationError::Timeout,
                SparqlError::Evaluation(e) => evaluation_error(e, control),
                e => EvaluationError::Failed(e.to_string()),
            })?;
        let control = control.clone();
        Ok(match results {
            QueryResults::Boolean(b) => Answer::Boolean(b),
            QueryResults::Solutions(rows) => Answer::Solutions {
                variables: rows.variables().to_vec(),
                rows: Box::new(rows.map(move |row| {
                    control.check()?;
                    row.map(|r| r.values().to_vec())
                        .map_err(|e| evaluation_error(e, &control))
                })),
            },
            QueryResults::Graph(triples) => Answer::Graph(Box::new(triples.map(move |t| {
                control.check()?;
                t.map_err(|e| evaluation_error(e, &control))
            }))),
        })
    }

    fn graphs(&self) -> Vec<GraphSummary> {
        self.database
            .store()
            .graphs()
            .iter()
            .map(|g| GraphSummary {
                name: g.name.clone(),
                triples: g.edges,
            })
            .collect()
    }
}
