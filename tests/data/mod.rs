//! Where tests find their files: the repository's own (`fixtures/`, `sparql/`) and the
//! shared datasets and test suites beside it. `K2RPQ_SHARED` names the shared folder
//! (holding `data/` and `testsuites/`) where it is not beside the checkout.
#![allow(dead_code)]

use std::path::{Path, PathBuf};

/// The checkout the tests were built in: the first folder above this crate's manifest
/// that holds `fixtures/`.
fn checkout() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .ancestors()
        .find(|d| d.join("fixtures").is_dir())
        .unwrap_or(Path::new(env!("CARGO_MANIFEST_DIR")))
        .to_path_buf()
}

/// A file of the repository: under the checkout the tests were built in or, on a machine
/// that runs the test binaries from a copy of the repository elsewhere, under the current
/// folder.
pub fn repo_file(rel: &str) -> PathBuf {
    let built = checkout().join(rel);
    if built.exists() {
        built
    } else {
        PathBuf::from(rel)
    }
}

/// `REL` under the shared folder: `$K2RPQ_SHARED`, else `shared/` beside the checkout
/// (as in CI) or beside a folder of worktrees. `None`, with a "skipped" notice, where it
/// is absent.
pub fn shared_file(rel: &str) -> Option<PathBuf> {
    let root = checkout();
    let mut roots: Vec<PathBuf> = std::env::var_os("K2RPQ_SHARED")
        .map(PathBuf::from)
        .into_iter()
        .collect();
    roots.extend([root.join("../shared"), root.join("../../shared")]);
    let found = roots.iter().map(|r| r.join(rel)).find(|p| p.exists());
    if found.is_none() {
        eprintln!("skipped: {rel} not found (set K2RPQ_SHARED to the shared folder)");
    }
    found
}

/// A dataset under `shared/data/`.
pub fn data_file(rel: &str) -> Option<PathBuf> {
    shared_file(&format!("data/{rel}"))
}
