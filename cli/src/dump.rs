//! `k2rpq dump`: a store written back as N-Quads or N-Triples.

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::PathBuf;

use anyhow::Context;
use k2rpq::store::{self, DumpFormat, Store};
use oxrdf::{NamedNode, Term};

/// Arguments of `k2rpq dump`.
#[derive(clap::Args)]
pub struct Args {
    /// Store folder written by `k2rpq load`.
    #[arg(long)]
    pub store: PathBuf,
    /// Output file (`.nq`, `.nt`, optionally `.gz`); default: standard output.
    #[arg(short, long)]
    pub output: Option<PathBuf>,
    /// `nq` (N-Quads: every graph) or `nt` (N-Triples: one graph); default from the
    /// output's name, else `nq`.
    #[arg(long)]
    pub format: Option<String>,
    /// With `nt`: the named graph to write (an IRI); default: the default graph.
    #[arg(long)]
    pub graph: Option<String>,
    /// Hide the progress bar.
    #[arg(long)]
    pub quiet: bool,
}

/// Runs the command.
pub fn run(args: Args) -> anyhow::Result<()> {
    let store = Store::open(&args.store)
        .with_context(|| format!("opening store {}", args.store.display()))?;
    let name = args
        .output
        .as_ref()
        .map(|p| p.to_string_lossy().to_ascii_lowercase())
        .unwrap_or_default();
    let stem = name.strip_suffix(".gz").unwrap_or(&name);
    let quads = match args
        .format
        .as_deref()
        .map(str::to_ascii_lowercase)
        .as_deref()
    {
        Some("nq" | "nquads" | "n-quads" | "application/n-quads") => true,
        Some("nt" | "ntriples" | "n-triples" | "application/n-triples") => false,
        Some(other) => anyhow::bail!("--format {other}: use nq or nt"),
        None => !stem.ends_with(".nt"),
    };
    let format = if quads {
        anyhow::ensure!(
            args.graph.is_none(),
            "--graph goes with --format nt (N-Quads keeps every graph)"
        );
        DumpFormat::NQuads
    } else {
        let graph = match &args.graph {
            None => 0,
            Some(iri) => {
                let name = NamedNode::new(iri.trim_start_matches('<').trim_end_matches('>'))
                    .with_context(|| format!("--graph {iri}"))?;
                store
                    .graph_id(Some(&Term::NamedNode(name)))
                    .with_context(|| format!("--graph {iri}: no such graph in the store"))?
            }
        };
        DumpFormat::NTriples { graph }
    };
    let out: Box<dyn Write> = match &args.output {
        None => Box::new(std::io::stdout().lock()),
        Some(p) => {
            let f = File::create(p).with_context(|| format!("creating {}", p.display()))?;
            if name.ends_with(".gz") {
                Box::new(flate2::write::GzEncoder::new(
                    f,
                    flate2::Compression::default(),
                ))
            } else {
                Box::new(f)
            }
        }
    };
    let bars = crate::progress::Bars::handle(args.quiet || args.output.is_none());
    let n = store::dump(
        &store,
        BufWriter::with_capacity(1 << 20, out),
        format,
        bars.get(),
    )
    .with_context(|| format!("dumping {}", args.store.display()))?;
    eprintln!("wrote {n} statements");
    Ok(())
}
