//! Line lists kept on disk: [`keep_lines`] builds every relation's successor and
//! predecessor lists ([`Lines`]) once and writes them beside the trees, so that the
//! first queries after opening a store read them (milliseconds) instead of paying their
//! build on descents (up to ~1 s per list on a 100M-triple store; see
//! [`crate::k2tree::LINE_BUILD_SHARE`]).
//!
//! The lists are a cache: a query never needs them, a missing, damaged or stale file is
//! reported by `k2rpq info --verify` and rebuilt as if absent, and an incremental load
//! keeps the files of the relations it does not rebuild.

use std::path::Path;
use std::time::Instant;

use super::{LineFileInfo, Store, StoreError, MANIFEST};
use crate::k2tree::file::write_atomically;
use crate::k2tree::{lines_file, LineBudget, Lines};
use crate::progress::{ProgressHandle, Stage, Unit};

/// How [`keep_lines`] works.
#[derive(Clone, Debug, Default)]
pub struct KeepLinesOptions {
    /// Rewrite files the manifest already lists (by default they are kept).
    pub force: bool,
    /// Where the build reports its progress; `None`: nowhere.
    pub progress: ProgressHandle,
    /// Memory for one build, in bytes (default: [`LineBudget::with_default_limit`]).
    pub memory: Option<u64>,
    /// Keep the lists of relations with at least this many edges only (default 0: all).
    /// A small relation's lists are built on its first descent in well under a
    /// millisecond, while each kept file costs a synchronised write (milliseconds on a
    /// busy disk: a store of thousands of tiny predicates spent 33 s on them).
    pub min_edges: u64,
}

/// The `min_edges` `k2rpq load` keeps line lists from: 2^16 edges, where a list's build
/// on first use starts to cost about a millisecond.
pub const LOAD_LINES_MIN_EDGES: u64 = 1 << 16;

/// What [`keep_lines`] did.
#[derive(Clone, Debug, Default, PartialEq, serde::Serialize)]
pub struct KeepLinesReport {
    /// Files written (one per relation and orientation).
    pub written: usize,
    /// Files the manifest already listed, left as they were.
    pub kept: usize,
    /// Relations left without files because they have fewer than `min_edges` edges.
    pub small: usize,
    /// Bytes of all the store's lines files afterwards.
    pub bytes: u64,
    /// The store's trees' bytes, for comparison.
    pub tree_bytes: u64,
    /// Wall time.
    pub seconds: f64,
}

impl std::fmt::Display for KeepLinesReport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "line lists: {} files written, {} kept, {} small relations left to first use, {:.1} MiB on disk (trees {:.1} MiB), {:.2}s",
            self.written,
            self.kept,
            self.small,
            self.bytes as f64 / (1 << 20) as f64,
            self.tree_bytes as f64 / (1 << 20) as f64,
            self.seconds
        )
    }
}

/// Builds and writes the line lists of every relation of the store at `dir`, both
/// orientations, one list at a time (each build on all of rayon's threads), then lists
/// them in the manifest.
///
/// Each file and then the manifest are replaced atomically: an interrupted run leaves
/// the store as it was plus, at most, files the manifest does not list (overwritten by
/// the next run). A list that does not fit the memory is an error and nothing of this
/// run is listed.
pub fn keep_lines(dir: &Path, options: &KeepLinesOptions) -> Result<KeepLinesReport, StoreError> {
    let start = Instant::now();
    let store = Store::open(dir)?;
    let budget = match options.memory {
        Some(bytes) => LineBudget::new(bytes),
        None => LineBudget::with_default_limit(),
    };
    let mut manifest = store.manifest().clone();
    let relations: usize = manifest.graphs.iter().map(|g| g.predicates.len()).sum();
    let pb = Stage::begin(
        options.progress.get(),
        "line lists",
        Unit::Items,
        Some(2 * relations as u64),
    );
    let mut report = KeepLinesReport::default();
    for (g, graph) in manifest.graphs.iter_mut().enumerate() {
        for p in &mut graph.predicates {
            report.tree_bytes += p.bytes;
            if p.edges < options.min_edges && p.lines.is_empty() {
                report.small += 1;
                pb.inc(2);
                continue;
            }
            for by_column in [false, true] {
                pb.message(&format!(
                    "{} {}",
                    p.iri,
                    if by_column { "cols" } else { "rows" }
                ));
                let listed = p.lines.iter().position(|l| l.by_column == by_column);
                let present = listed.is_some_and(|i| {
                    std::fs::metadata(dir.join(&p.lines[i].file))
                        .is_ok_and(|m| m.len() == p.lines[i].bytes)
                });
                if present && !options.force {
                    report.kept += 1;
                    pb.inc(1);
                    continue;
                }
                let tree = store.relation(g, p.id)?.expect("listed in the manifest");
                let name = lines_file::file_name(&p.file, by_column);
                let path = dir.join(&name);
                let lines = Lines::build_parallel(&tree, by_column, &budget).map_err(|e| {
                    StoreError::File {
                        path: path.clone(),
                        reason: format!("building the line lists: {e}"),
                    }
                })?;
                let written = lines_file::write(&lines, by_column, p.crc32, &path);
                budget.release(lines.bytes());
                let bytes = written.map_err(|e| StoreError::File {
                    path: path.clone(),
                    reason: e.to_string(),
                })?;
                let info = LineFileInfo {
                    by_column,
                    file: name,
                    bytes,
                };
                match listed {
                    Some(i) => p.lines[i] = info,
                    None => p.lines.push(info),
                }
                p.lines.sort_by_key(|l| l.by_column);
                report.written += 1;
                pb.inc(1);
            }
        }
    }
    drop(pb);
    report.bytes = manifest
        .graphs
        .iter()
        .flat_map(|g| &g.predicates)
        .flat_map(|p| &p.lines)
        .map(|l| l.bytes)
        .sum();
    let mpath = dir.join(MANIFEST);
    let json = serde_json::to_vec_pretty(&manifest).map_err(|e| StoreError::Manifest {
        path: mpath.clone(),
        reason: e.to_string(),
    })?;
    write_atomically(&mpath, |w| w.write_all(&json)).map_err(|e| StoreError::File {
        path: mpath.clone(),
        reason: format!("cannot write: {e}"),
    })?;
    report.seconds = start.elapsed().as_secs_f64();
    Ok(report)
}
