//! `k2rpq load`: RDF files (or stdin) into a store.

use std::path::PathBuf;

use anyhow::Context;
use k2rpq::store::{self, Format, Input, LoadOptions};

/// Arguments of `k2rpq load`.
#[derive(clap::Args)]
pub struct Args {
    /// RDF inputs: .nt .nq .ttl .trig, optionally .gz or .bz2, or folders of them (their
    /// RDF files in name order); `-` reads stdin (needs --format). Several inputs are read
    /// and decompressed in parallel, so a dump cut into gzip shards loads faster than one
    /// gzip stream, which inflates on one thread.
    #[arg(required = true)]
    pub inputs: Vec<String>,
    /// Store folder: created, or extended incrementally when it holds a store.
    #[arg(long)]
    pub store: PathBuf,
    /// Skip and count malformed statements instead of stopping at the first.
    #[arg(long)]
    pub lenient: bool,
    /// Format of every input (nt, nq, ttl, trig) instead of guessing from the names.
    #[arg(long)]
    pub format: Option<String>,
    /// Bytes of edges kept in memory before sorted runs spill to disk, and of relations
    /// whose trees are built at once (16 bytes an edge; suffixes K, M, G; default: a
    /// quarter of physical memory).
    #[arg(long)]
    pub memory: Option<String>,
    /// Size of the line-aligned pieces N-Triples/N-Quads are cut into and parsed in
    /// parallel (suffixes K, M; default 4M). Each piece has its own term table, so the
    /// size trades that table's cache footprint against deduplication within a piece.
    #[arg(long)]
    pub chunk_size: Option<String>,
    /// Do not keep line lists on disk after the load. By default `load` writes the
    /// successor and predecessor lists of every relation of at least 65,536 edges, as
    /// `k2rpq lines` does (timed and reported apart from the load), so that the first
    /// queries read them instead of building them on descents (smaller relations build
    /// theirs on first use in about a millisecond or less). On 10M wikidata-like triples
    /// they took 90 MiB beside 51 MiB of trees (1.8x) and 10 s beside a 57 s load on two
    /// cores; `k2rpq lines` adds them to a store loaded without.
    #[arg(long, conflicts_with = "line_lists")]
    pub no_line_lists: bool,
    /// Keep the line lists of every relation, small ones too (as `k2rpq lines`).
    #[arg(long)]
    pub line_lists: bool,
    /// Hide the progress bars.
    #[arg(long)]
    pub quiet: bool,
}

/// Parses `123`, `64K`, `512M`, `2G` (powers of 1024).
pub fn parse_bytes(s: &str) -> anyhow::Result<usize> {
    let t = s.trim();
    let (num, mult) = match t.chars().last().map(|c| c.to_ascii_uppercase()) {
        Some('K') => (&t[..t.len() - 1], 1usize << 10),
        Some('M') => (&t[..t.len() - 1], 1 << 20),
        Some('G') => (&t[..t.len() - 1], 1 << 30),
        Some('T') => (&t[..t.len() - 1], 1 << 40),
        _ => (t, 1),
    };
    let n: f64 = num
        .trim()
        .parse()
        .with_context(|| format!("--memory {s}: expected a size such as 512M or 2G"))?;
    Ok((n * mult as f64) as usize)
}

/// Runs the command.
pub fn run(args: Args) -> anyhow::Result<()> {
    let format = match &args.format {
        Some(f) => Some(
            Format::from_name(f)
                .with_context(|| format!("--format {f}: unknown (use nt, nq, ttl or trig)"))?,
        ),
        None => None,
    };
    let mut options = LoadOptions {
        format,
        lenient: args.lenient,
        progress: crate::progress::Bars::handle(args.quiet),
        interrupt: Some(crate::report::interrupt_flag()),
        ..LoadOptions::default()
    };
    if let Some(m) = &args.memory {
        options.memory = parse_bytes(m)?;
    }
    if let Some(c) = &args.chunk_size {
        options.chunk_bytes = parse_bytes(c).with_context(|| format!("--chunk-size {c}"))?;
    }
    let inputs: Vec<Input> = args.inputs.iter().map(|a| Input::from_arg(a)).collect();
    let report = store::load(&inputs, &args.store, &options)
        .with_context(|| format!("loading into {}", args.store.display()))?;
    let secs = report.total_seconds.max(1e-9);
    eprintln!(
        "loaded {} statements ({} skipped) into {} in {:.2}s: {:.2} M statements/s end to end, parse {:.2}s ({:.2} M/s), build {:.2}s",
        report.statements,
        report.skipped,
        args.store.display(),
        report.total_seconds,
        report.statements as f64 / secs / 1e6,
        report.parse_seconds,
        report.statements as f64 / report.parse_seconds.max(1e-9) / 1e6,
        report.build_seconds,
    );
    for bad in &report.skipped_first {
        eprintln!("  skipped {bad}");
    }
    let unshown = report.skipped - report.skipped_first.len() as u64;
    if unshown > 0 {
        eprintln!("  ... and {unshown} more skipped statements");
    }
    // Where the phases went; the parse stages overlap, so each is a busy time.
    eprintln!(
        "  parse: read {:.2}s, parse+number chunks {:.2}s (number {:.2} thread-s), hand-on {:.2}s, waited {:.2}s; build: sort {:.2}s (edges {:.2}s, terms {:.2}s), trees {:.2}s, dictionary {:.2}s (beside the trees)",
        report.parse_read_seconds,
        report.parse_chunks_seconds,
        report.number_seconds,
        report.parse_hand_on_seconds,
        report.parse_wait_seconds,
        report.sort_seconds,
        report.sort_edges_seconds,
        report.sort_terms_seconds,
        report.trees_seconds,
        report.dictionary_seconds,
    );
    eprintln!(
        "  {} new terms ({} nodes), {} distinct edges, {} relations built, {} kept, {} runs spilled, store {:.1} MiB, peak RSS {}",
        report.new_terms,
        report.node_count,
        report.distinct_edges,
        report.relations_built,
        report.relations_kept,
        report.runs_spilled,
        report.store_bytes as f64 / (1 << 20) as f64,
        report
            .peak_rss_bytes
            .map_or("unknown".into(), |b| format!("{:.1} MiB", b as f64 / (1 << 20) as f64)),
    );
    if !args.no_line_lists {
        // The lists are a cache no query needs: a load whose lists cannot be built (a
        // list larger than the line memory) still succeeds, and says so.
        let min_edges = if args.line_lists {
            0
        } else {
            store::LOAD_LINES_MIN_EDGES
        };
        match crate::lines::keep(&args.store, false, None, min_edges, args.quiet) {
            Ok(lines) => eprintln!("  {lines}"),
            Err(e) => eprintln!(
                "  line lists not kept ({e:#}); `k2rpq lines --line-memory …` can add them"
            ),
        }
    }
    Ok(())
}
