//! `k2rpq`: the command-line interface, a thin layer over the library.

mod cli;

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
    /// Build a k²-tree from an edge list and print its statistics.
    BuildTree(cli::build_tree::Args),
    /// Benchmark k²-tree construction on edge lists and synthetic graphs.
    BenchBuild(cli::bench_build::Args),
    /// Benchmark the device cache: a mixed workload of products at several budgets.
    BenchCache(cli::bench_cache::Args),
    /// Evaluate regular path queries `S REGEX O` and print the (start, end) pairs as TSV.
    Rpq(cli::rpq::Args),
    /// Print the plan of a path query and the steps of its run.
    Explain(cli::explain::Args),
    /// Answer a SPARQL query (property paths, BGPs, joins, VALUES, FILTER, COUNT, ...).
    Query(cli::query::Args),
}

fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    match cli.command {
        Command::BuildTree(a) => cli::build_tree::run(a),
        Command::BenchBuild(a) => cli::bench_build::run(a),
        Command::BenchCache(a) => cli::bench_cache::run(a),
        Command::Rpq(a) => cli::rpq::run(a),
        Command::Explain(a) => cli::explain::run(a),
        Command::Query(a) => cli::query::run(a),
    }
}
