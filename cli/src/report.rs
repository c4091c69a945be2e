//! What a user sees of a failed command.

/// The error and its causes, one per line. No backtrace even where `RUST_BACKTRACE` is
/// set (anyhow's `Debug` would print one): the errors are about the input, not the
/// program. For a bug report, `K2RPQ_BACKTRACE=1` (with `RUST_BACKTRACE=1`) adds where the
/// error arose.
pub fn error_report(e: &anyhow::Error) -> String {
    let mut report = format!("k2rpq: error: {e}\n");
    for cause in e.chain().skip(1) {
        report.push_str(&format!("  caused by: {cause}\n"));
    }
    if std::env::var_os("K2RPQ_BACKTRACE").is_some_and(|v| v == "1") {
        report.push_str(&format!("backtrace:\n{}\n", e.backtrace()));
    }
    report
}

/// The process's exit status for a command's `result`: success, or failure after
/// printing the [`error_report`] to stderr.
pub fn exit_code(result: anyhow::Result<()>) -> std::process::ExitCode {
    match result {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprint!("{}", error_report(&e));
            std::process::ExitCode::FAILURE
        }
    }
}

/// Restores the default disposition of SIGPIPE, so that a command whose stdout is closed
/// early (`k2rpq info DIR | head`) exits quietly, like other Unix tools, instead of
/// panicking on a broken pipe. Call before any thread starts.
pub fn exit_quietly_on_broken_pipe() {
    #[cfg(unix)]
    // SAFETY: called at the start of `main`, before any other thread exists.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
}

/// A flag that SIGINT and SIGTERM set, for long work to stop cleanly (a load removes its
/// temporary folder and leaves the store as it was). A second signal exits at once with
/// status 130. The handler is installed on the first call.
pub fn interrupt_flag() -> std::sync::Arc<std::sync::atomic::AtomicBool> {
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::{Arc, OnceLock};
    static FLAG: OnceLock<Arc<AtomicBool>> = OnceLock::new();
    FLAG.get_or_init(|| {
        let flag = Arc::new(AtomicBool::new(false));
        let set = flag.clone();
        let installed = ctrlc::set_handler(move || {
            if set.swap(true, Ordering::SeqCst) {
                std::process::exit(130);
            }
            eprintln!("k2rpq: interrupted; stopping (again to exit at once)");
        });
        if let Err(e) = installed {
            eprintln!("k2rpq: cannot catch interrupts ({e}); an interrupted load may leave a temporary folder for the next load to remove");
        }
        flag
    })
    .clone()
}

/// Prints the library's warnings (through the [`log`] facade) on stderr as
/// `k2rpq: message`; `--quiet` turns them off with [`log::set_max_level`]. The
/// environment variable `K2RPQ_LOG` (`error`, `warn`, `info`, `debug`, `trace`, `off`)
/// sets another level: `debug` adds the timings of the device's set-up.
pub fn print_notices() {
    struct Notices;
    impl log::Log for Notices {
        fn enabled(&self, metadata: &log::Metadata<'_>) -> bool {
            metadata.level() <= log::max_level() && metadata.target().starts_with("k2rpq")
        }
        fn log(&self, record: &log::Record<'_>) {
            if self.enabled(record.metadata()) {
                eprintln!("k2rpq: {}", record.args());
            }
        }
        fn flush(&self) {}
    }
    static NOTICES: Notices = Notices;
    if log::set_logger(&NOTICES).is_ok() {
        let level = std::env::var("K2RPQ_LOG").ok().and_then(|l| l.parse().ok());
        log::set_max_level(level.unwrap_or(log::LevelFilter::Warn));
    }
}

/// With `quiet` (`--quiet`), no notice of the library reaches stderr from here on.
pub fn silence_notices(quiet: bool) {
    if quiet {
        log::set_max_level(log::LevelFilter::Off);
    }
}
