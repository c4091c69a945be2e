//! Oxigraph's own evaluation, as a peer in benchmarks and an oracle in tests: the data
//! copied into an in-memory Oxigraph store ([`copy_store`]), queries run on it and their
//! rows read to the end ([`run_query`], [`drain`]).

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use k2rpq::progress::{Progress, Silent, Unit};
use oxigraph::sparql::{CancellationToken, QueryResults, SparqlEvaluator};
use oxigraph::store::{StorageError, Store};

/// Errors of [`copy_store`].
#[derive(Debug, thiserror::Error)]
pub enum CopyError {
    /// Oxigraph's store failed.
    #[error(transparent)]
    Storage(#[from] StorageError),
    /// Reading the k2rpq store failed.
    #[error(transparent)]
    Store(#[from] k2rpq::store::StoreError),
    /// The k2rpq store contradicts itself (a cell names a term its dictionary lacks, or a
    /// literal subject): the copy stops rather than copy part of it.
    #[error("copying the store into Oxigraph: {0}")]
    Inconsistent(String),
}

/// What one query returned, on Oxigraph or on k2rpq (both through Oxigraph's evaluator
/// and its result types).
#[derive(Clone, Debug, Default)]
pub struct QueryOutcome {
    /// Solutions (triples for CONSTRUCT and DESCRIBE; 1 for a true ASK), with
    /// multiplicity, up to the limit.
    pub rows: u64,
    /// The solutions, each as its bound values in variable order, up to the limit (an
    /// ASK answer `true` is one empty row).
    pub solutions: Vec<Vec<Option<oxrdf::Term>>>,
    /// The triples of a CONSTRUCT or DESCRIBE, up to the limit.
    pub triples: Vec<oxrdf::Triple>,
    /// Wall-clock time of parsing, evaluating and iterating (materializing) every row.
    pub time: Duration,
    /// Cancelled by the timeout.
    pub timed_out: bool,
    /// Stopped at the row limit.
    pub truncated: bool,
}

impl QueryOutcome {
    /// Each solution as its bound values in variable order (N-Triples terms,
    /// tab-separated), each triple as an N-Triples line: the form benchmarks compare
    /// engines in.
    fn texts(&self) -> impl Iterator<Item = String> + '_ {
        self.solutions
            .iter()
            .map(|row| {
                row.iter()
                    .map(|v| v.as_ref().map(|t| t.to_string()).unwrap_or_default())
                    .collect::<Vec<_>>()
                    .join("\t")
            })
            .chain(self.triples.iter().map(|t| t.to_string()))
    }

    /// The distinct rows.
    pub fn distinct(&self) -> BTreeSet<String> {
        self.texts().collect()
    }

    /// The rows with their multiplicities (SPARQL's bag semantics).
    pub fn bag(&self) -> BTreeMap<String, u64> {
        let mut m = BTreeMap::new();
        for t in self.texts() {
            *m.entry(t).or_insert(0) += 1;
        }
        m
    }
}

/// Reads `results` to the end (at most `limit` rows), as a caller receiving every row
/// would; an error after `deadline` is the timeout's cancellation.
pub fn drain(
    results: QueryResults<'_>,
    limit: u64,
    deadline: Instant,
) -> Result<QueryOutcome, String> {
    let mut out = QueryOutcome::default();
    match results {
        QueryResults::Solutions(solutions) => {
            drain_rows(solutions, limit, deadline, &mut out, |out, s| {
                out.solutions.push(s.values().to_vec())
            })?
        }
        QueryResults::Boolean(b) => {
            out.rows = b as u64;
            if b {
                out.solutions.push(Vec::new());
            }
        }
        QueryResults::Graph(triples) => {
            drain_rows(triples, limit, deadline, &mut out, |out, t| {
                out.triples.push(t)
            })?
        }
    }
    Ok(out)
}

/// Reads `rows` into `out` with `keep` until the end, the first error or `limit` rows
/// (`out.truncated` when more were left). An error after `deadline` is the timeout's
/// cancellation: `out.timed_out`, not an error.
fn drain_rows<T, E: std::fmt::Display>(
    rows: impl Iterator<Item = Result<T, E>>,
    limit: u64,
    deadline: Instant,
    out: &mut QueryOutcome,
    mut keep: impl FnMut(&mut QueryOutcome, T),
) -> Result<(), String> {
    for row in rows {
        let row = match row {
            Ok(row) => row,
            Err(_) if Instant::now() >= deadline => {
                out.timed_out = true;
                break;
            }
            Err(e) => return Err(e.to_string()),
        };
        if out.rows >= limit {
            out.truncated = true;
            break;
        }
        out.rows += 1;
        keep(out, row);
    }
    Ok(())
}

/// Runs `query` on `store`, iterating all rows (at most `limit`), cancelled after
/// `timeout` through Oxigraph's cancellation token (by the process's watchdog thread).
pub fn run_query(
    store: &Store,
    query: &str,
    limit: u64,
    timeout: Duration,
) -> Result<QueryOutcome, String> {
    let token = CancellationToken::new();
    let start = Instant::now();
    let deadline = start
        .checked_add(timeout)
        .unwrap_or(start + Duration::from_secs(1 << 30));
    k2rpq::sparql::watchdog::cancel_at(deadline, token.clone());
    let result = SparqlEvaluator::new()
        .with_cancellation_token(token)
        .parse_query(query)
        .map_err(|e| e.to_string())
        .and_then(|prepared| {
            prepared
                .on_store(store)
                .execute()
                .map_err(|e| e.to_string())
        })
        .and_then(|results| drain(results, limit, deadline));
    let cancelled = Instant::now() >= deadline;
    let mut out = match result {
        Ok(o) => o,
        Err(_) if cancelled => QueryOutcome {
            timed_out: true,
            ..Default::default()
        },
        Err(e) => return Err(e),
    };
    out.timed_out |= cancelled;
    out.time = start.elapsed();
    Ok(out)
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
/// with a progress bar on stderr if `progress`: what the benchmark's Oxigraph peer
/// evaluates on. It takes minutes for 100 M triples (Oxigraph's insertion, one thread)
/// and Oxigraph's memory for them.
///
/// Nothing is re-parsed: every term of the dictionary is decoded once, in parallel, into
/// a table; the relations' `(subject, object)` cells are extracted in parallel and sorted
/// by subject, so that consecutive inserts hit the same entries of Oxigraph's indexes;
/// the calling thread inserts borrowed quads (`QuadRef`s into that table) through
/// Oxigraph's transaction API, whose memory backend serialises writers.
pub fn copy_store(
    store: &k2rpq::store::Store,
    progress: Option<&dyn Progress>,
) -> Result<StoreCopy, CopyError> {
    use oxigraph::model::{GraphNameRef, NamedNodeRef, NamedOrBlankNodeRef, QuadRef, Term};
    use rayon::prelude::*;

    let ox = Store::new()?;
    let dict = store.dictionary();
    let missing = |id: u32| CopyError::Inconsistent(format!("node id {id} not in the dictionary"));

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
        .collect::<Result<_, k2rpq::store::StoreError>>()?;
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
    let bar = progress.unwrap_or(&Silent);
    bar.begin("copying into Oxigraph", Unit::Items, Some(all.len() as u64));
    let mut txn = ox.start_transaction()?;
    let mut pending = 0usize;
    for (k, &(s, r, o)) in all.iter().enumerate() {
        let (Some(s), Some(o)) = (terms.get(s as usize), terms.get(o as usize)) else {
            return Err(missing(s.max(o)));
        };
        let subject = match s {
            Term::NamedNode(n) => NamedOrBlankNodeRef::from(n.as_ref()),
            Term::BlankNode(b) => NamedOrBlankNodeRef::from(b.as_ref()),
            _ => return Err(CopyError::Inconsistent(format!("literal subject {s}"))),
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
            bar.position(k as u64);
        }
    }
    txn.commit()?;
    bar.end();
    Ok(StoreCopy {
        store: ox,
        triples: all.len() as u64,
        terms: terms.len() as u64,
        decode_s,
        insert_s: t.elapsed().as_secs_f64(),
    })
}
