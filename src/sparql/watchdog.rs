//! One thread for the whole process that cancels queries at their deadlines.
//!
//! Oxigraph's evaluator checks its [`CancellationToken`] as it reads the data; something
//! must set it when a query's time is up. One long-lived thread does it for every query
//! instead of a thread per query: spawning and joining one inside a timed query cost up
//! to a scheduler tick (4 ms) on a busy machine.

use std::sync::{mpsc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use spareval::{
    CancellationToken, QueryEvaluationError, QueryResults, QuerySolutionIter, QueryTripleIter,
};

/// Cancels `token` once `deadline` passes (at once if it has).
///
/// ```
/// use std::time::{Duration, Instant};
/// use k2rpq::sparql::{watchdog, CancellationToken};
/// let token = CancellationToken::new();
/// watchdog::cancel_at(Instant::now() + Duration::from_millis(5), token.clone());
/// std::thread::sleep(Duration::from_millis(200));
/// assert!(token.is_cancelled());
/// ```
pub fn cancel_at(deadline: Instant, token: CancellationToken) {
    static WATCHDOG: OnceLock<Mutex<mpsc::Sender<(Instant, CancellationToken)>>> = OnceLock::new();
    if deadline <= Instant::now() {
        token.cancel();
        return;
    }
    let sender = WATCHDOG.get_or_init(|| {
        let (tx, rx) = mpsc::channel::<(Instant, CancellationToken)>();
        // Where no thread can be had the receiver is dropped with the closure: every send
        // then fails, and each query is cancelled by a thread of its own (below).
        let _ = std::thread::Builder::new()
            .name("k2rpq-watchdog".into())
            .spawn(move || watch(rx));
        Mutex::new(tx)
    });
    let sent = sender
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .send((deadline, token.clone()));
    if sent.is_err() {
        // Without the watchdog a query is cancelled by a thread of its own.
        std::thread::spawn(move || {
            std::thread::sleep(deadline.saturating_duration_since(Instant::now()));
            token.cancel();
        });
    }
}

/// The watchdog's loop: cancels each token whose deadline has passed, sleeping until the
/// next deadline or the next registration.
fn watch(rx: mpsc::Receiver<(Instant, CancellationToken)>) {
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
}

/// Rows [`end_at`] hands out between two reads of the clock.
const ROWS_PER_CLOCK_READ: u32 = 64;

/// `results`, ending in [`QueryEvaluationError::Cancelled`] once `deadline` passes: the
/// evaluator checks its token only as it reads the data, so rows it combines in memory
/// (a cross product, say) are checked here, as they are handed out.
pub fn end_at(results: QueryResults<'_>, deadline: Instant) -> QueryResults<'_> {
    fn checked<'a, T: 'a>(
        iter: impl Iterator<Item = Result<T, QueryEvaluationError>> + 'a,
        deadline: Instant,
    ) -> impl Iterator<Item = Result<T, QueryEvaluationError>> + 'a {
        let (mut over, mut count) = (false, 0u32);
        iter.map_while(move |item| {
            if over {
                return None;
            }
            // A clock read every few rows: rows come in a few hundred nanoseconds.
            count = count.wrapping_add(1);
            if count % ROWS_PER_CLOCK_READ == 1 && Instant::now() >= deadline {
                over = true;
                return Some(Err(QueryEvaluationError::Cancelled));
            }
            Some(item)
        })
    }
    match results {
        QueryResults::Solutions(s) => {
            let variables: std::sync::Arc<[oxrdf::Variable]> = s.variables().into();
            QueryResults::Solutions(QuerySolutionIter::new(variables, checked(s, deadline)))
        }
        QueryResults::Graph(t) => QueryResults::Graph(QueryTripleIter::new(checked(t, deadline))),
        b @ QueryResults::Boolean(_) => b,
    }
}
