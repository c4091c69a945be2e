//! Running the `k2rpq` binary in tests: its output, and what a failure must look like.
#![allow(dead_code)]

use std::path::Path;
use std::process::{Command, Output};

/// Runs `k2rpq ARGS` in `dir` (backtraces off, as most users run it).
pub fn k2rpq(args: &[&str], dir: &Path) -> Output {
    Command::new(env!("CARGO_BIN_EXE_k2rpq"))
        .args(args)
        .current_dir(dir)
        .env("RUST_BACKTRACE", "0")
        .output()
        .unwrap()
}

/// The stdout of a run that must have succeeded.
pub fn succeeded(out: &Output) -> String {
    assert!(out.status.success(), "{out:?}");
    String::from_utf8(out.stdout.clone()).unwrap()
}

/// The stderr of a run that must have failed with one error (ours, or clap's for a bad
/// argument) and no panic.
pub fn failed(out: &Output) -> String {
    assert!(!out.status.success(), "succeeded: {out:?}");
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(!stderr.contains("panicked"), "{stderr}");
    let errors = stderr.matches("k2rpq: error: ").count();
    assert!(errors == 1 || stderr.starts_with("error: "), "{stderr}");
    stderr
}
