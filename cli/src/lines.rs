//! `k2rpq lines`: keep a store's line lists on disk.

use std::path::PathBuf;

use anyhow::Context;
use k2rpq::cache::MemoryBudget;
use k2rpq::store::{self, KeepLinesOptions, KeepLinesReport};

/// Arguments of `k2rpq lines`.
#[derive(clap::Args)]
pub struct Args {
    /// Store folder written by `k2rpq load`.
    #[arg(long)]
    pub store: PathBuf,
    /// Rewrite the lists the store already keeps.
    #[arg(long)]
    pub force: bool,
    /// Host memory for one list's build (`2GiB`, `512MB`, `10%` of physical memory;
    /// default 25%).
    #[arg(long, value_name = "BYTES|PERCENT")]
    pub line_memory: Option<MemoryBudget>,
    /// Hide the progress bar.
    #[arg(long)]
    pub quiet: bool,
}

/// Runs the command.
pub fn run(args: Args) -> anyhow::Result<()> {
    let report = keep(&args.store, args.force, args.line_memory, 0, args.quiet)?;
    eprintln!("{report}");
    Ok(())
}

/// [`store::keep_lines`] with the command line's options (shared with `load --line-lists`).
pub fn keep(
    dir: &std::path::Path,
    force: bool,
    line_memory: Option<MemoryBudget>,
    min_edges: u64,
    quiet: bool,
) -> anyhow::Result<KeepLinesReport> {
    let options = KeepLinesOptions {
        force,
        min_edges,
        progress: crate::progress::Bars::handle(quiet),
        memory: line_memory
            .map(k2rpq::database::line_memory_bytes)
            .transpose()?,
    };
    store::keep_lines(dir, &options)
        .with_context(|| format!("keeping the line lists of {}", dir.display()))
}
