//! Progress of long operations (loads, line-list builds, copies into Oxigraph), reported
//! to whoever shows it: the `k2rpq` command line draws bars, an embedder may log it or
//! leave it out.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// What a stage counts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Unit {
    /// Bytes of input read.
    Bytes,
    /// Items (relations, lists, quads).
    Items,
}

/// Receives the progress of a long operation, one stage at a time. Every method has a
/// default that ignores the report, so an implementation picks what it shows.
pub trait Progress: Send + Sync {
    /// A stage named `name` begins, of `total` units when known.
    fn begin(&self, name: &str, unit: Unit, total: Option<u64>) {
        let _ = (name, unit, total);
    }
    /// `done` units of the current stage are finished.
    fn position(&self, done: u64) {
        let _ = done;
    }
    /// A short status of the current stage (the item at work, a rate).
    fn message(&self, text: &str) {
        let _ = text;
    }
    /// The current stage is over.
    fn end(&self) {}
}

/// A [`Progress`] that shows nothing.
#[derive(Clone, Copy, Debug, Default)]
pub struct Silent;

impl Progress for Silent {}

/// A shared, optional [`Progress`] receiver, as options hold it (default: none).
#[derive(Clone, Default)]
pub struct ProgressHandle(Option<Arc<dyn Progress>>);

impl ProgressHandle {
    /// Reports to `receiver`.
    pub fn new(receiver: impl Progress + 'static) -> Self {
        ProgressHandle(Some(Arc::new(receiver)))
    }

    /// The receiver, if any.
    pub fn get(&self) -> Option<&dyn Progress> {
        self.0.as_deref()
    }
}

impl std::fmt::Debug for ProgressHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(if self.0.is_some() {
            "ProgressHandle(some)"
        } else {
            "ProgressHandle(none)"
        })
    }
}

/// One stage of an operation: counts its units and forwards them to the receiver.
pub(crate) struct Stage<'a> {
    sink: &'a dyn Progress,
    done: AtomicU64,
}

impl<'a> Stage<'a> {
    /// Begins a stage on `sink` (nothing is shown when it is `None`).
    pub(crate) fn begin(
        sink: Option<&'a dyn Progress>,
        name: &str,
        unit: Unit,
        total: Option<u64>,
    ) -> Self {
        let sink = sink.unwrap_or(&Silent);
        sink.begin(name, unit, total);
        Stage {
            sink,
            done: AtomicU64::new(0),
        }
    }

    /// `n` more units are done.
    pub(crate) fn inc(&self, n: u64) {
        let done = self.done.fetch_add(n, Ordering::Relaxed) + n;
        self.sink.position(done);
    }

    /// `done` units are done in all.
    pub(crate) fn set(&self, done: u64) {
        self.done.store(done, Ordering::Relaxed);
        self.sink.position(done);
    }

    /// A status line.
    pub(crate) fn message(&self, text: &str) {
        self.sink.message(text);
    }
}

impl Drop for Stage<'_> {
    fn drop(&mut self) {
        self.sink.end();
    }
}
