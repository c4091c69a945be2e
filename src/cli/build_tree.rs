//! `k2rpq build-tree`: placeholder until the edge-list readers land.

use std::path::PathBuf;

/// Arguments of `k2rpq build-tree`.
#[derive(clap::Args)]
pub struct Args {
    /// Edge list: `src<TAB>dst` per line (`.gz` allowed).
    pub input: PathBuf,
}

/// Runs the command.
pub fn run(args: Args) -> anyhow::Result<()> {
    anyhow::bail!("build-tree {}: not implemented yet", args.input.display())
}
