//! Oxigraph's own evaluation, as a peer in benchmarks and an oracle in tests.

use std::collections::BTreeSet;
use std::sync::{mpsc, Mutex, OnceLock};
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
