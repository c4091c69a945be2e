//! Oxigraph's own evaluation, as a peer in benchmarks and an oracle in tests.

use std::collections::BTreeSet;
use std::sync::{mpsc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use oxigraph::model::{GraphNameRef, NamedNodeRef, NamedOrBlankNodeRef, QuadRef, Term};
use oxigraph::sparql::{CancellationToken, QueryResults, SparqlEvaluator};
use oxigraph::store::Store;
use rayon::prelude::*;

use super::rpq::BenchError;
use crate::database::Database;

impl OxigraphOutcome {
    /// Distinct solutions, each as its bound values in variable order (N-Triples terms,
    /// tab-separated): the form benchmarks compare engines in.
    pub fn distinct(&self) -> BTreeSet<String> {
        self.solutions
            .iter()
            .map(|row| {
                row.iter()
                    .map(|v| v.as_ref().map(|t| t.to_string()).unwrap_or_default())
                    .collect::<Vec<_>>()
                    .join("\t")
            })
            .collect()
    }
}

/// What one query returned on Oxigraph.
#[derive(Clone, Debug, Default)]
pub struct OxigraphOutcome {
    /// Solutions (with multiplicity), up to the limit.
    pub rows: u64,
    /// The solutions, each as its bound values in variable order, up to the limit (an
    /// ASK answer `true` is one empty row).
    pub solutions: Vec<Vec<Option<oxrdf::Term>>>,
    /// Wall-clock time of parsing, evaluating and iterating (materializing) every row.
    pub time: Duration,
    /// Cancelled by the timeout.
    pub timed_out: bool,
    /// Stopped at the row limit.
    pub truncated: bool,
}

/// The process's one watchdog: cancels each registered token once its deadline passes.
/// One long-lived thread instead of a thread per run: spawning and joining one inside a
/// timed run cost up to a scheduler tick (4 ms) on a busy machine, charged to Oxigraph.
fn watch(deadline: Instant, token: CancellationToken) {
    static WATCHDOG: OnceLock<Mutex<mpsc::Sender<(Instant, CancellationToken)>>> = OnceLock::new();
    let tx = WATCHDOG.get_or_init(|| {
        let (tx, rx) = mpsc::channel::<(Instant, CancellationToken)>();
        std::thread::spawn(move || {
            let mut pending: Vec<(Instant, CancellationToken)> = Vec::new();
            loop {
                let now = Instant::now();
                pending.retain(|(d, t)| {
                    if *d <= now {
                        t.cancel();
                    }
                    *d > now
                });
                let wait = pending
                    .iter()
                    .map(|(d, _)| d.saturating_duration_since(now))
                    .min()
                    .unwrap_or(Duration::from_secs(3600));
                match rx.recv_timeout(wait) {
                    Ok(item) => pending.push(item),
                    Err(mpsc::RecvTimeoutError::Timeout) => {}
                    Err(mpsc::RecvTimeoutError::Disconnected) => return,
                }
            }
        });
        Mutex::new(tx)
    });
    let _ = tx
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .send((deadline, token));
}

/// Runs `query` on `store`, iterating all rows (at most `limit`), cancelled after
/// `timeout` through Oxigraph's cancellation token (by the process's watchdog thread).
pub fn run_query(
    store: &Store,
    query: &str,
    limit: u64,
    timeout: Duration,
) -> Result<OxigraphOutcome, String> {
    let token = CancellationToken::new();
    let start = Instant::now();
    watch(start + timeout, token.clone());
    let result = (|| {
        let mut out = OxigraphOutcome::default();
        let prepared = SparqlEvaluator::new()
            .with_cancellation_token(token.clone())
            .parse_query(query)
            .map_err(|e| e.to_string())?;
        match prepared
            .on_store(store)
            .execute()
            .map_err(|e| e.to_string())?
        {
            QueryResults::Solutions(solutions) => {
                for s in solutions {
                    let s = match s {
                        Ok(s) => s,
                        Err(e) => {
                            if start.elapsed() >= timeout {
                                out.timed_out = true;
                                break;
                            }
                            return Err(e.to_string());
                        }
                    };
                    if out.rows >= limit {
                        out.truncated = true;
                        break;
                    }
                    out.rows += 1;
                    out.solutions.push(s.values().to_vec());
                }
            }
            QueryResults::Boolean(b) => {
                out.rows = b as u64;
                if b {
                    out.solutions.push(Vec::new());
                }
            }
            QueryResults::Graph(_) => {
                return Err("CONSTRUCT/DESCRIBE queries are not benchmarked".into())
            }
        }
        Ok(out)
    })();
    let cancelled = start.elapsed() >= timeout;
    let mut out = match result {
        Ok(o) => o,
        Err(_) if cancelled => OxigraphOutcome {
            timed_out: true,
            ..Default::default()
        },
        Err(e) => return Err(e),
    };
    out.timed_out |= cancelled;
    out.time = start.elapsed();
    Ok(out)
}

/// An in-memory Oxigraph copy of a store, and what making it cost.
pub struct OxigraphCopy {
    /// The store.
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

/// Copies every triple of the store (all graphs) into an in-memory Oxigraph store.
///
/// Nothing is re-parsed: every term of the dictionary is decoded once, in parallel, into
/// a table; the relations' `(subject, object)` cells are extracted in parallel and sorted
/// by subject; the calling thread inserts borrowed quads (`QuadRef`s into that table)
/// through Oxigraph's transaction API. Oxigraph 0.5's memory store serialises writers
/// (one transaction at a time; its bulk loader is the same single-threaded insert for
/// this backend), so the insertion is the floor; everything else is taken off that
/// thread. The former version looked both terms of every triple up in the dictionary (a
/// front-coded block scan and a fresh `Term` each) and built owned quads on the
/// inserting thread.
pub fn oxigraph_copy(db: &Database) -> Result<OxigraphCopy, BenchError> {
    let err = |e: &dyn std::fmt::Display| BenchError::Oxigraph(e.to_string());
    let ox = Store::new().map_err(|e| err(&e))?;
    let store = db.store();
    let dict = store.dictionary();

    let t = Instant::now();
    let terms: Vec<Term> = (0..dict.len())
        .into_par_iter()
        .map(|id| {
            dict.term(id)
                .ok_or_else(|| BenchError::Oxigraph(format!("node id {id} not in the dictionary")))
        })
        .collect::<Result<_, _>>()?;
    let decode_s = t.elapsed().as_secs_f64();

    let t = Instant::now();
    let mut relations = Vec::new();
    for (g, info) in store.graphs().iter().enumerate() {
        for p in store.predicates(g) {
            relations.push((g, info.name.clone(), p.id, p.iri.clone()));
        }
    }
    // Every (subject, relation, object), sorted by subject: consecutive inserts then hit
    // the same subject entries of Oxigraph's indexes (its per-subject list head and the
    // subject's string), which stay in cache.
    let cells: Vec<Vec<(u32, u32)>> = relations
        .par_iter()
        .map(|(g, _, pid, _)| match store.relation(*g, *pid) {
            Ok(Some(tree)) => Ok(tree.cells()),
            Ok(None) => Ok(Vec::new()),
            Err(e) => Err(BenchError::Oxigraph(e.to_string())),
        })
        .collect::<Result<_, _>>()?;
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
    let mut txn = ox.start_transaction().map_err(|e| err(&e))?;
    let mut pending = 0usize;
    for &(s, r, o) in &all {
        let (Some(s), Some(o)) = (terms.get(s as usize), terms.get(o as usize)) else {
            return Err(BenchError::Oxigraph(format!(
                "node id {s} or {o} not in the dictionary"
            )));
        };
        let subject = match s {
            Term::NamedNode(n) => NamedOrBlankNodeRef::from(n.as_ref()),
            Term::BlankNode(b) => NamedOrBlankNodeRef::from(b.as_ref()),
            _ => return Err(BenchError::Oxigraph(format!("literal subject {s}"))),
        };
        txn.insert(QuadRef::new(
            subject,
            preds[r as usize],
            o.as_ref(),
            graphs[r as usize],
        ));
        pending += 1;
        if pending >= QUADS_PER_TRANSACTION {
            txn.commit().map_err(|e| err(&e))?;
            txn = ox.start_transaction().map_err(|e| err(&e))?;
            pending = 0;
        }
    }
    txn.commit().map_err(|e| err(&e))?;
    let triples = all.len() as u64;
    Ok(OxigraphCopy {
        store: ox,
        triples,
        terms: terms.len() as u64,
        decode_s,
        insert_s: t.elapsed().as_secs_f64(),
    })
}
