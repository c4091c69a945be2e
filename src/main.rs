//! `k2rpq`: the command-line interface, a thin layer over the library.

mod cli;

/// The binary's allocator (feature `mimalloc`, on by default): answers allocate and free a
/// string per term, and glibc's allocator measured ~15 % slower on the 100M store's median
/// queries (docs/BENCHMARKS.md, session 8).
#[cfg(feature = "mimalloc")]
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

use std::process::ExitCode;

use clap::{Parser, Subcommand};

/// k²-tree compressed RDF relations on the GPU: property paths and regular path queries
/// as Boolean matrix–vector products iterated to a fixed point.
#[derive(Parser)]
#[command(name = "k2rpq", version, about, long_about = None)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run a query workload on k2rpq (GPU, CPU) and Oxigraph side by side.
    Bench(cli::bench::Args),
    /// Build a k²-tree from an edge list and print its statistics.
    BuildTree(cli::build_tree::Args),
    /// Benchmark k²-tree construction on edge lists and synthetic graphs.
    BenchBuild(cli::bench_build::Args),
    /// SpMV benchmark: our engines vs cuSPARSE CSR and a Boolean CSR.
    BenchSpmv(cli::bench_spmv::Args),
    /// Benchmark the device cache: a mixed workload of products at several budgets.
    BenchCache(cli::bench_cache::Args),
    /// Load RDF (N-Triples, N-Quads, Turtle, TriG; plain, .gz, .bz2; files or stdin) into a store.
    Load(cli::load::Args),
    /// Show what a store holds: graphs, predicates, edges, bits per edge, sizes.
    Info(cli::info::Args),
    /// Keep a store's line lists (successors and predecessors of every relation) on disk,
    /// so that its first queries read them instead of building them.
    Lines(cli::lines::Args),
    /// Generate synthetic datasets (see `gen wikidata-like --help`).
    Gen(cli::gen::Args),
    /// Evaluate regular path queries `S REGEX O` and print the (start, end) pairs as TSV.
    Rpq(cli::rpq::Args),
    /// Print the plan of a path query and the steps of its run.
    Explain(cli::explain::Args),
    /// Answer a SPARQL query (property paths, BGPs, joins, VALUES, FILTER, COUNT, ...).
    Query(cli::query::Args),
}

fn main() -> ExitCode {
    // Exit quietly when stdout is closed early (`k2rpq info DIR | head`), like other Unix
    // tools, instead of panicking on a broken pipe.
    #[cfg(unix)]
    // SAFETY: restoring the default disposition of SIGPIPE before any thread starts.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Bench(a) => cli::bench::run(a),
        Command::BuildTree(a) => cli::build_tree::run(a),
        Command::BenchBuild(a) => cli::bench_build::run(a),
        Command::BenchSpmv(a) => cli::bench_spmv::run(a),
        Command::BenchCache(a) => cli::bench_cache::run(a),
        Command::Load(a) => cli::load::run(a),
        Command::Info(a) => cli::info::run(a),
        Command::Lines(a) => cli::lines::run(a),
        Command::Gen(a) => cli::gen::run(a),
        Command::Rpq(a) => cli::rpq::run(a),
        Command::Explain(a) => cli::explain::run(a),
        Command::Query(a) => cli::query::run(a),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprint!("{}", error_report(&e));
            ExitCode::FAILURE
        }
    }
}

/// What the user sees of a failed command: the error and its causes, one per line. No
/// backtrace even where `RUST_BACKTRACE` is set (anyhow's `Debug` would print one): the
/// errors are about the input, not the program. For a bug report, `K2RPQ_BACKTRACE=1`
/// (with `RUST_BACKTRACE=1`) adds where the error arose.
fn error_report(e: &anyhow::Error) -> String {
    let mut report = format!("k2rpq: error: {e}\n");
    for cause in e.chain().skip(1) {
        report.push_str(&format!("  caused by: {cause}\n"));
    }
    if std::env::var_os("K2RPQ_BACKTRACE").is_some_and(|v| v == "1") {
        report.push_str(&format!("backtrace:\n{}\n", e.backtrace()));
    }
    report
}
