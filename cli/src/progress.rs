//! Progress bars on stderr for the library's long operations ([`k2rpq::progress::Progress`]).

use std::sync::Mutex;

use indicatif::{ProgressBar, ProgressStyle};
use k2rpq::progress::{Progress, ProgressHandle, Unit};

/// Draws each stage of an operation as a bar (a spinner when its size is unknown). Hidden
/// where stderr is not a terminal, as indicatif does by default.
#[derive(Default)]
pub struct Bars {
    bar: Mutex<Option<ProgressBar>>,
}

impl Bars {
    /// A handle for the library's options: bars unless `quiet`.
    pub fn handle(quiet: bool) -> ProgressHandle {
        if quiet {
            ProgressHandle::default()
        } else {
            ProgressHandle::new(Bars::default())
        }
    }
}

impl Progress for Bars {
    fn begin(&self, name: &str, unit: Unit, total: Option<u64>) {
        let (bar, template) = match (total, unit) {
            (Some(n), Unit::Bytes) => (
                ProgressBar::new(n),
                "{spinner} {prefix} [{elapsed_precise}] [{bar:30}] {bytes}/{total_bytes} {msg} ETA {eta}",
            ),
            (Some(n), _) => (
                ProgressBar::new(n),
                "{spinner} {prefix} [{elapsed_precise}] [{bar:30}] {human_pos}/{human_len} {msg} ETA {eta}",
            ),
            (None, _) => (
                ProgressBar::new_spinner(),
                "{spinner} {prefix} [{elapsed_precise}] {human_pos} {msg}",
            ),
        };
        if let Ok(style) = ProgressStyle::with_template(template) {
            bar.set_style(style.progress_chars("=> "));
        }
        bar.set_prefix(name.to_owned());
        if let Some(old) = self
            .bar
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .replace(bar)
        {
            old.finish_and_clear();
        }
    }

    fn position(&self, done: u64) {
        if let Some(b) = &*self.bar.lock().unwrap_or_else(|e| e.into_inner()) {
            b.set_position(done);
        }
    }

    fn message(&self, text: &str) {
        if let Some(b) = &*self.bar.lock().unwrap_or_else(|e| e.into_inner()) {
            b.set_message(text.to_owned());
        }
    }

    fn end(&self) {
        if let Some(b) = self.bar.lock().unwrap_or_else(|e| e.into_inner()).take() {
            b.finish_and_clear();
        }
    }
}
