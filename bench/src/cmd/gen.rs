//! `k2rpq-bench gen`: synthetic RDF dumps for load and query benchmarks.

use std::fs::File;
use std::io::BufWriter;
use std::path::PathBuf;

use anyhow::Context;
use k2rpq_bench::wikidata::{wikidata_like_workload, write_wikidata_like, GenOptions};

/// Arguments of `k2rpq gen`.
#[derive(clap::Args)]
pub struct Args {
    /// What to generate.
    #[command(subcommand)]
    pub kind: Kind,
}

/// Generators.
#[derive(clap::Subcommand)]
pub enum Kind {
    /// SYNTHETIC data, not real Wikidata: a truthy-style N-Triples dump with real Wikidata
    /// IRI forms and predicate numbers (P31, P279, P131, P17, P361, P2860, P50, P737, P530,
    /// P577, P1082, P1448) and made-up, skewed, hierarchy-shaped edges, for exercising
    /// load and queries at scale.
    WikidataLike {
        /// Number of triples (lines) to write.
        #[arg(long)]
        triples: u64,
        /// RNG seed: the same triples and seed give the same file.
        #[arg(long, default_value_t = 42)]
        seed: u64,
        /// Output file (.nt, or .nt.gz for multi-member gzip).
        #[arg(short, long, required_unless_present = "workload")]
        output: Option<PathBuf>,
        /// Also write the property-path workload for this size here (`k2rpq bench
        /// --queries` format), its constants taken from the generator's layout.
        #[arg(long)]
        workload: Option<PathBuf>,
    },
}

/// Runs the command.
pub fn run(args: Args) -> anyhow::Result<()> {
    match args.kind {
        Kind::WikidataLike {
            triples,
            seed,
            output,
            workload,
        } => {
            if let Some(w) = &workload {
                std::fs::write(w, wikidata_like_workload(triples))
                    .with_context(|| format!("writing {}", w.display()))?;
                eprintln!(
                    "wrote the workload for {triples} triples to {}",
                    w.display()
                );
            }
            let Some(output) = output else {
                return Ok(());
            };
            let gzip = output.extension().is_some_and(|e| e == "gz");
            let file = File::create(&output)
                .with_context(|| format!("cannot create {}", output.display()))?;
            let mut w = BufWriter::with_capacity(1 << 20, file);
            let start = std::time::Instant::now();
            let bytes = write_wikidata_like(
                &mut w,
                &GenOptions {
                    triples,
                    seed,
                    gzip,
                },
            )
            .with_context(|| format!("writing {}", output.display()))?;
            eprintln!(
                "wrote {triples} synthetic triples ({:.1} MiB) to {} in {:.2}s",
                bytes as f64 / (1 << 20) as f64,
                output.display(),
                start.elapsed().as_secs_f64()
            );
            Ok(())
        }
    }
}
