//! Where `rpq` and `explain` get their graph: the one seam that turns a source into a
//! [`PathGraph`] and its term dictionary.

use std::path::PathBuf;

use anyhow::Context;
use k2rpq::rpq::terms::{load_rdf, load_tsv, TermLookup};
use k2rpq::rpq::PathGraph;

/// The graph to query: exactly one source.
#[derive(clap::Args, Debug)]
#[group(required = true, multiple = false)]
pub struct SourceArgs {
    /// An N-Triples (`.nt`) or Turtle (`.ttl`) file, optionally `.gz` or `.bz2`, loaded in
    /// memory.
    #[arg(long)]
    pub nt: Option<PathBuf>,
    /// An edge list (`src<TAB>dst` per line, optionally `.gz` or `.bz2`) as one predicate
    /// `<urn:k2rpq:p>` over nodes `<urn:k2rpq:n:ID>`.
    #[arg(long)]
    pub tsv: Option<PathBuf>,
    /// A store folder written by `k2rpq load`.
    #[arg(long)]
    pub store: Option<PathBuf>,
}

/// A graph and its dictionary.
pub type Source = (Box<dyn PathGraph>, Box<dyn TermLookup>);

/// Opens the source named by the arguments.
pub fn open_source(args: &SourceArgs) -> anyhow::Result<Source> {
    if let Some(p) = &args.nt {
        let (g, d) = load_rdf(p).with_context(|| format!("loading {}", p.display()))?;
        return Ok((Box::new(g), Box::new(d)));
    }
    if let Some(p) = &args.tsv {
        let (g, d) = load_tsv(p).with_context(|| format!("loading {}", p.display()))?;
        return Ok((Box::new(g), Box::new(d)));
    }
    if let Some(dir) = &args.store {
        let store = std::sync::Arc::new(
            k2rpq::store::Store::open(dir)
                .with_context(|| format!("opening store {}", dir.display()))?,
        );
        return Ok((
            Box::new(k2rpq::database::StoreGraph::new(store.clone(), 0)),
            Box::new(k2rpq::database::StoreTerms(store)),
        ));
    }
    anyhow::bail!("give one of --nt, --tsv or --store")
}
