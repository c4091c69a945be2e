//! One thread for the whole process that cancels queries at their deadlines.
//!
//! Oxigraph's evaluator checks its [`CancellationToken`] as it reads the data; something
//! must set it when a query's time is up. One long-lived thread does it for every query
//! instead of a thread per query: spawning and joining one inside a timed query cost up
//! to a scheduler tick (4 ms) on a busy machine.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::sync::{Condvar, Mutex, OnceLock};
use std::time::{Duration, Instant};

use spareval::{
    CancellationToken, QueryEvaluationError, QueryResults, QuerySolutionIter, QueryTripleIter,
};

/// A token and its deadline, ordered by the deadline alone.
struct Pending(Instant, CancellationToken);

impl PartialEq for Pending {
    fn eq(&self, other: &Self) -> bool {
        self.0 == other.0
    }
}

impl Eq for Pending {}

impl PartialOrd for Pending {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Pending {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.0.cmp(&other.0)
    }
}

/// The deadlines not yet reached, earliest first, and the watchdog's wake-up.
///
/// A heap, and a wake-up only for a deadline earlier than every pending one: queries
/// share a timeout, so each new deadline is the latest and the watchdog sleeps on. A list
/// scanned at every registration, with a wake-up each, holds a minute of deadlines on a
/// busy server: an `ASK` on CoDEx-M took 40 µs with it, 26 µs with the heap.
struct Watchdog {
    pending: Mutex<BinaryHeap<Reverse<Pending>>>,
    wake: Condvar,
}

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
    static WATCHDOG: OnceLock<Option<&'static Watchdog>> = OnceLock::new();
    if deadline <= Instant::now() {
        token.cancel();
        return;
    }
    let watchdog = WATCHDOG.get_or_init(|| {
        let watchdog: &'static Watchdog = Box::leak(Box::new(Watchdog {
            pending: Mutex::new(BinaryHeap::new()),
            wake: Condvar::new(),
        }));
        std::thread::Builder::new()
            .name("k2rpq-watchdog".into())
            .spawn(move || watch(watchdog))
            .ok()
            .map(|_| watchdog)
    });
    let Some(watchdog) = watchdog else {
        // Where no thread could be had, a query is cancelled by a thread of its own.
        std::thread::spawn(move || {
            std::thread::sleep(deadline.saturating_duration_since(Instant::now()));
            token.cancel();
        });
        return;
    };
    let mut pending = watchdog.pending.lock().unwrap_or_else(|p| p.into_inner());
    let earliest = pending
        .peek()
        .is_none_or(|Reverse(first)| deadline < first.0);
    pending.push(Reverse(Pending(deadline, token)));
    drop(pending);
    if earliest {
        watchdog.wake.notify_one();
    }
}

/// The watchdog's loop: cancels each token whose deadline has passed, sleeping until the
/// earliest deadline left or an earlier one is registered.
fn watch(watchdog: &Watchdog) {
    let mut pending = watchdog.pending.lock().unwrap_or_else(|p| p.into_inner());
    loop {
        let now = Instant::now();
        while pending.peek().is_some_and(|Reverse(first)| first.0 <= now) {
            if let Some(Reverse(Pending(_, token))) = pending.pop() {
                token.cancel();
            }
        }
        let wait = pending
            .peek()
            .map_or(Duration::from_secs(3600), |Reverse(first)| {
                first.0.saturating_duration_since(now)
            });
        pending = watchdog
            .wake
            .wait_timeout(pending, wait)
            .unwrap_or_else(|p| p.into_inner())
            .0;
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_earlier_deadline_wakes_the_watchdog() {
        let late = CancellationToken::new();
        cancel_at(Instant::now() + Duration::from_secs(3600), late.clone());
        // The watchdog now sleeps until the late deadline; the early one must wake it.
        std::thread::sleep(Duration::from_millis(50));
        let early = CancellationToken::new();
        cancel_at(Instant::now() + Duration::from_millis(20), early.clone());
        let start = Instant::now();
        while !early.is_cancelled() && start.elapsed() < Duration::from_secs(10) {
            std::thread::sleep(Duration::from_millis(5));
        }
        assert!(early.is_cancelled());
        assert!(!late.is_cancelled());
    }

    #[test]
    fn a_passed_deadline_cancels_at_once() {
        let token = CancellationToken::new();
        cancel_at(Instant::now(), token.clone());
        assert!(token.is_cancelled());
    }
}
