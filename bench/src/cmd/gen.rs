//! `k2rpq-bench gen`: synthetic RDF dumps for load and query benchmarks.

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::PathBuf;

use anyhow::Context;
use k2rpq_bench::wikidata::{
    wikidata_like_workload, write_wikidata_like, write_wikidata_like_shards, GenOptions,
    DEFAULT_PREDICATES,
};

/// Arguments of `k2rpq-bench gen`.
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
    /// IRI forms, thousands of predicates of Zipf-distributed sizes (P31, P279, P131,
    /// P361, P2860, … named; a long tail of identifiers and links), class hierarchies,
    /// part-of and located-in trees, citations and literals, over scattered Q numbers.
    WikidataLike {
        /// Number of triples (lines) to write.
        #[arg(long, value_parser = k2rpq_cli::args::parse_count)]
        triples: u64,
        /// RNG seed: the same triples, seed and predicates give the same file.
        #[arg(long, default_value_t = 42)]
        seed: u64,
        /// Distinct predicates: twelve named ones and a Zipf tail (at least 13).
        #[arg(long, default_value_t = DEFAULT_PREDICATES,
              value_parser = clap::value_parser!(u32).range(13..))]
        predicates: u32,
        /// Output file (.nt, or .nt.gz for multi-member gzip), or `-` for stdout; with
        /// --shards, the folder of the shards.
        #[arg(short, long, required_unless_present = "workload")]
        output: Option<PathBuf>,
        /// Write the triples as this many gzip files `part-NNNNN.nt.gz` in the --output
        /// folder (fewer when there are fewer 262,144-triple chunks), which read in name
        /// order are the single file's triples; `k2rpq load FOLDER` reads them in parallel.
        #[arg(long, value_parser = clap::value_parser!(u64).range(1..))]
        shards: Option<u64>,
        /// Also write the property-path workload for this size here (`k2rpq-bench
        /// workload --queries` format), its constants taken from the generator's layout.
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
            predicates,
            output,
            shards,
            workload,
        } => {
            if let Some(w) = &workload {
                std::fs::write(w, wikidata_like_workload(triples, predicates))
                    .with_context(|| format!("writing {}", w.display()))?;
                eprintln!(
                    "wrote the workload for {triples} triples to {}",
                    w.display()
                );
            }
            let Some(output) = output else {
                return Ok(());
            };
            if let Some(shards) = shards {
                anyhow::ensure!(
                    output.as_os_str() != "-",
                    "--shards writes files: give a folder as --output"
                );
                let start = std::time::Instant::now();
                let options = GenOptions {
                    triples,
                    seed,
                    gzip: true,
                    predicates,
                };
                let files = write_wikidata_like_shards(&output, &options, shards as usize)
                    .with_context(|| format!("writing shards into {}", output.display()))?;
                let bytes: u64 = files.iter().map(|f| f.1).sum();
                let secs = start.elapsed().as_secs_f64();
                eprintln!(
                    "wrote {triples} synthetic triples ({:.1} MiB) as {} shards in {} in {secs:.2}s ({:.2} M triples/s)",
                    bytes as f64 / (1 << 20) as f64,
                    files.len(),
                    output.display(),
                    triples as f64 / secs.max(1e-9) / 1e6
                );
                return Ok(());
            }
            let to_stdout = output.as_os_str() == "-";
            let gzip = !to_stdout && output.extension().is_some_and(|e| e == "gz");
            let mut w: Box<dyn Write> = if to_stdout {
                Box::new(BufWriter::with_capacity(1 << 20, std::io::stdout().lock()))
            } else {
                let file = File::create(&output)
                    .with_context(|| format!("cannot create {}", output.display()))?;
                Box::new(BufWriter::with_capacity(1 << 20, file))
            };
            let start = std::time::Instant::now();
            let options = GenOptions {
                triples,
                seed,
                gzip,
                predicates,
            };
            let bytes = write_wikidata_like(&mut w, &options)
                .with_context(|| format!("writing {}", output.display()))?;
            let secs = start.elapsed().as_secs_f64();
            eprintln!(
                "wrote {triples} synthetic triples ({:.1} MiB) to {} in {secs:.2}s ({:.2} M triples/s)",
                bytes as f64 / (1 << 20) as f64,
                output.display(),
                triples as f64 / secs.max(1e-9) / 1e6
            );
            Ok(())
        }
    }
}
