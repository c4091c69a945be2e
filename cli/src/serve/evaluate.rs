//! The one seam between the endpoint and query evaluation: a parsed query (its dataset
//! already set from the request) and a [`Control`] go in; the answer's kind and an
//! iterator over its rows or triples come out. Everything else in the endpoint
//! (negotiation, limits, streaming, errors) is written against [`Evaluator`], so that a
//! new evaluator is a change to [`StoreEvaluator`] alone.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use k2rpq::database::{Database, PreparedQuery, QueryOptions};
use k2rpq::sparql::group::{IdRow, IdRows, QUERY_TERM_BASE};
use k2rpq::sparql::rewrite::LoneService;
use k2rpq::sparql::{with_row_limit, QueryEvaluationError, QueryResults, SparqlError};
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
    /// SELECT answered from the path engines' id rows: the rows of
    /// [`Answer::Solutions`], which a writer may also serialize from their ids, each
    /// distinct term once ([`PathRows::next_ids`]).
    PathSolutions {
        /// Column names.
        variables: Vec<Variable>,
        /// The rows, as ids or as terms (boxed: the answer moves between functions, and
        /// the other variants are small).
        rows: Box<PathRows>,
    },
}

impl Answer {
    /// The answer with its path rows as plain [`Answer::Solutions`] (other answers
    /// unchanged): for code that reads rows as terms only.
    pub fn into_general(self) -> Answer {
        match self {
            Answer::PathSolutions { variables, rows } => Answer::Solutions { variables, rows },
            answer => answer,
        }
    }
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
///
/// A SELECT that the rewrite makes one path service call with nothing around it but its
/// slice (a lone property path, with its projection, DISTINCT, LIMIT and OFFSET) takes a
/// direct route: the service's rows, which Oxigraph's evaluator would pass through
/// unchanged, are decoded in batches and go to the client without the evaluator.
pub struct StoreEvaluator {
    database: Arc<Database>,
    /// Whether the direct route is taken where it applies.
    direct: bool,
}

impl StoreEvaluator {
    /// An evaluator over an opened store.
    pub fn new(database: Arc<Database>) -> StoreEvaluator {
        StoreEvaluator {
            database,
            direct: true,
        }
    }

    /// An evaluator that answers every query through [`Database::evaluate_prepared`], as
    /// rows of terms, even those the direct route would send as rows of ids: the
    /// reference the direct route is compared with.
    pub fn general(database: Arc<Database>) -> StoreEvaluator {
        StoreEvaluator {
            database,
            direct: false,
        }
    }

    /// Whether `query` takes the direct route.
    pub fn answers_directly(&self, query: &Query) -> bool {
        self.service_query(query, &self.database.prepare(query))
            .is_some()
    }

    /// The SELECT `query` as one path service call, when it is one and the direct route
    /// is taken. A lone ASK, whose answer is a boolean, goes to
    /// [`Database::evaluate_prepared`], which answers it from the same service's first row.
    fn service_query<'a>(
        &self,
        query: &Query,
        prepared: &'a PreparedQuery,
    ) -> Option<&'a LoneService> {
        (self.direct && matches!(query, Query::Select { .. }))
            .then(|| prepared.lone())
            .flatten()
    }

    /// Answers a query that is one path service call from the service's rows.
    fn evaluate_service(
        &self,
        service: &LoneService,
        control: &Control,
    ) -> Result<Answer, EvaluationError> {
        let solutions = self
            .database
            .evaluate_path_service(&service.pattern, Some(control.deadline()))
            .map_err(|e| sparql_error(e, control))?;
        let columns = service
            .variables
            .iter()
            .map(|v| solutions.variables.iter().position(|c| c == v))
            .collect();
        let database = Arc::clone(&self.database);
        let rows = PathRows::new(
            solutions.rows,
            service.offset
                ..service
                    .length
                    .map_or(usize::MAX, |l| service.offset.saturating_add(l)),
            columns,
            solutions.query_terms,
            Box::new(move |ids: &[u32]| database.terms(ids)),
            control.clone(),
        );
        Ok(Answer::PathSolutions {
            variables: service.variables.clone(),
            rows: Box::new(rows),
        })
    }
}

/// The endpoint's error for a failed query: what it does not support, its timeout, or
/// its evaluation's error.
fn sparql_error(e: SparqlError, control: &Control) -> EvaluationError {
    match e {
        SparqlError::Unsupported(what) => EvaluationError::Unsupported(what),
        SparqlError::Timeout => EvaluationError::Timeout,
        SparqlError::Evaluation(e) => evaluation_error(e, control),
        e => EvaluationError::Failed(e.to_string()),
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
        // One row past the limit tells a cut answer from a whole one; a lone path's
        // fixed point stops there instead of running to its end.
        let limited;
        let query = match control.row_limit() {
            Some(n) => {
                limited = with_row_limit(query, n.saturating_add(1));
                &limited
            }
            None => query,
        };
        let prepared = self.database.prepare(query);
        if let Some(service) = self.service_query(query, &prepared) {
            match self.evaluate_service(service, control) {
                // The general route names what it does not support as it always has.
                Err(EvaluationError::Unsupported(_)) => {}
                answer => return answer,
            }
        }
        let options = QueryOptions {
            timeout: Some(control.deadline().saturating_duration_since(Instant::now())),
            ..Default::default()
        };
        let results = self
            .database
            .evaluate_prepared(prepared, &options)
            .map_err(|e| sparql_error(e, control))?;
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

/// Rows decoded together: one batch's distinct ids go to the dictionary at once, in
/// order, which overlaps their cache misses ([`Database::terms`]).
const DECODE_BATCH: usize = 1024;

/// Terms an answer keeps decoded for its later rows: answers repeat their terms (the 46,214
/// rows of `?x wdt:P530+ ?y` on CoDEx-M hold 222 distinct terms).
const DECODED_TERMS: usize = 1 << 16;

/// Decodes store ids (below [`QUERY_TERM_BASE`]) to terms, in order: [`Database::terms`].
pub type Decoder = Box<dyn Fn(&[u32]) -> Vec<Option<Term>>>;

/// The rows of a path service call as ids, the query's slice applied. Read as an
/// iterator, they are decoded a batch at a time and the control is checked at each row,
/// as on the general route; [`PathRows::next_ids`] and [`PathRows::terms`] let a writer
/// take the ids instead and decode each distinct one once (use one way or the other).
pub struct PathRows {
    rows: IdRows,
    /// Rows of `rows` still to skip (the slice's offset), then still to read.
    skip: usize,
    left: usize,
    /// For each column of the answer, its column in the service's rows.
    columns: Vec<Option<usize>>,
    /// The terms of ids from [`QUERY_TERM_BASE`] up.
    query_terms: Vec<Term>,
    decode: Decoder,
    /// Rows decoded, not read yet (reversed: the next one last).
    decoded: Vec<Row>,
    /// Terms decoded for earlier batches, by id (up to [`DECODED_TERMS`]).
    terms: HashMap<u32, Term>,
    control: Control,
    /// The evaluation failed: nothing more comes.
    done: bool,
}

impl PathRows {
    /// The rows `slice` of `rows` (service rows: an id or none per service column), each
    /// answer column taken from the service column `columns` names (`None`: unbound);
    /// ids from [`QUERY_TERM_BASE`] up are `query_terms`, the others go to `decode`.
    pub fn new(
        rows: IdRows,
        slice: std::ops::Range<usize>,
        columns: Vec<Option<usize>>,
        query_terms: Vec<Term>,
        decode: Decoder,
        control: Control,
    ) -> PathRows {
        PathRows {
            rows,
            skip: slice.start,
            left: slice.end.saturating_sub(slice.start),
            columns,
            query_terms,
            decode,
            decoded: Vec::new(),
            terms: HashMap::new(),
            control,
            done: false,
        }
    }

    /// The next service row of the slice, or its evaluation's error.
    fn next_row(&mut self) -> Option<Result<IdRow, EvaluationError>> {
        if self.left == 0 {
            return None;
        }
        while self.skip > 0 {
            self.skip -= 1;
            if let Err(e) = self.rows.next()? {
                return Some(Err(self.error(e)));
            }
        }
        let row = self.rows.next()?;
        self.left -= 1;
        Some(row.map_err(|e| self.error(e)))
    }

    /// The endpoint's error for a failure of the rows' evaluation.
    fn error(&self, e: SparqlError) -> EvaluationError {
        sparql_error(e, &self.control)
    }

    /// Appends the cells of the next `max` rows (or fewer, at the end) to `cells`: an id
    /// or none per answer column, row after row. Returns the number of rows (0: the end),
    /// or the error that ended the evaluation early.
    pub fn next_ids(
        &mut self,
        max: usize,
        cells: &mut Vec<Option<u32>>,
    ) -> Result<usize, EvaluationError> {
        let mut n = 0;
        while n < max {
            let Some(row) = self.next_row() else {
                break;
            };
            let row = row?;
            cells.extend(self.columns.iter().map(|c| c.and_then(|c| row[c])));
            n += 1;
        }
        Ok(n)
    }

    /// The terms of `ids` (ascending, as [`Database::terms`] reads them fastest), in
    /// order; an id without a term is the error of a corrupt store.
    pub fn terms(&self, ids: &[u32]) -> Result<Vec<Term>, EvaluationError> {
        debug_assert!(ids.is_sorted());
        let split = ids.partition_point(|&id| id < QUERY_TERM_BASE);
        let mut terms = Vec::with_capacity(ids.len());
        for (&id, term) in ids[..split].iter().zip((self.decode)(&ids[..split])) {
            terms.push(term.ok_or_else(|| missing(id))?);
        }
        for &id in &ids[split..] {
            terms.push(
                self.query_terms
                    .get((id - QUERY_TERM_BASE) as usize)
                    .cloned()
                    .ok_or_else(|| missing(id))?,
            );
        }
        Ok(terms)
    }

    /// Decodes the next batch into `decoded`.
    fn decode_batch(&mut self) -> Result<(), EvaluationError> {
        let mut batch: Vec<IdRow> = Vec::with_capacity(DECODE_BATCH);
        while batch.len() < DECODE_BATCH {
            match self.next_row() {
                Some(row) => batch.push(row?),
                None => break,
            }
        }
        let mut ids: Vec<u32> = batch
            .iter()
            .flat_map(|row| self.columns.iter().map(|c| c.and_then(|c| row[c])))
            .flatten()
            .filter(|id| *id < QUERY_TERM_BASE && !self.terms.contains_key(id))
            .collect();
        ids.sort_unstable();
        ids.dedup();
        let new_terms = (self.decode)(&ids);
        let mut decoded = Vec::with_capacity(batch.len());
        for row in &batch {
            let mut values = Vec::with_capacity(self.columns.len());
            for c in &self.columns {
                let value = match c.and_then(|c| row[c]) {
                    None => None,
                    Some(id) if id >= QUERY_TERM_BASE => Some(
                        self.query_terms
                            .get((id - QUERY_TERM_BASE) as usize)
                            .cloned()
                            .ok_or_else(|| missing(id))?,
                    ),
                    Some(id) => Some(match self.terms.get(&id) {
                        Some(t) => t.clone(),
                        None => ids
                            .binary_search(&id)
                            .ok()
                            .and_then(|i| new_terms[i].clone())
                            .ok_or_else(|| missing(id))?,
                    }),
                };
                values.push(value);
            }
            decoded.push(values);
        }
        let room = DECODED_TERMS.saturating_sub(self.terms.len());
        self.terms.extend(
            ids.into_iter()
                .zip(new_terms)
                .filter_map(|(id, t)| Some((id, t?)))
                .take(room),
        );
        decoded.reverse();
        self.decoded = decoded;
        Ok(())
    }
}

/// The error of an id the dictionary does not hold (a corrupt store).
fn missing(id: u32) -> EvaluationError {
    EvaluationError::Failed(SparqlError::MissingTerm(id).to_string())
}

impl Iterator for PathRows {
    type Item = Result<Row, EvaluationError>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.done {
            return None;
        }
        if self.decoded.is_empty() {
            if let Err(e) = self.decode_batch() {
                self.done = true;
                return Some(Err(e));
            }
        }
        let row = self.decoded.pop()?;
        if let Err(e) = self.control.check() {
            self.done = true;
            return Some(Err(e));
        }
        Some(Ok(row))
    }
}
