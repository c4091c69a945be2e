//! Oxigraph's own evaluation, as a peer in benchmarks and an oracle in tests.

use std::collections::BTreeSet;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use oxigraph::sparql::{CancellationToken, QueryResults, SparqlEvaluator};
use oxigraph::store::Store;

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

/// Runs `query` on `store`, iterating all rows (at most `limit`), cancelled after
/// `timeout` by a watchdog thread through Oxigraph's cancellation token.
pub fn run_query(
    store: &Store,
    query: &str,
    limit: u64,
    timeout: Duration,
) -> Result<OxigraphOutcome, String> {
    let token = CancellationToken::new();
    let (done_tx, done_rx) = mpsc::channel::<()>();
    let watchdog = {
        let token = token.clone();
        std::thread::spawn(move || {
            if done_rx.recv_timeout(timeout).is_err() {
                token.cancel();
                true
            } else {
                false
            }
        })
    };
    let start = Instant::now();
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
    let _ = done_tx.send(());
    let cancelled = watchdog.join().unwrap_or(false);
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
