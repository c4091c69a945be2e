//! `k2rpq-bench`: the benchmarks of k2rpq as subcommands.

use std::process::ExitCode;

use clap::{Parser, Subcommand};
use k2rpq_cli::report;

mod cmd;

// Oxigraph hands RocksDB's error messages, allocated by C, to `CString::from_raw`, which
// frees them through Rust's allocator: under mimalloc a RocksDB error (a store folder that
// is a file) crashed the process. A RocksDB build keeps the system allocator.
#[cfg(all(feature = "mimalloc", not(feature = "rocksdb")))]
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// Benchmarks of k2rpq: query workloads against Oxigraph, products against cuSPARSE,
/// construction, the device cache; synthetic data.
#[derive(Parser)]
#[command(name = "k2rpq-bench", version, about, long_about = None)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run a query workload on k2rpq (GPU, CPU) and Oxigraph side by side.
    Workload(cmd::workload::Args),
    /// Products on one matrix: k2rpq's engines against cuSPARSE CSR and a Boolean CSR.
    Spmv(cmd::spmv::Args),
    /// k²-tree construction on edge lists and synthetic graphs.
    Build(cmd::build::Args),
    /// The device cache: a mixed workload of products at several budgets.
    Cache(cmd::cache::Args),
    /// Build a k²-tree from an edge list and print its statistics.
    BuildTree(cmd::build_tree::Args),
    /// Generate synthetic datasets (see `gen wikidata-like --help`).
    Gen(cmd::gen::Args),
    /// Load-test a SPARQL endpoint: N clients replay a workload for a fixed time.
    Endpoint(cmd::endpoint::Args),
    /// The Oxigraph embedding: insert throughput against Oxigraph's own, query overhead.
    Embedding(cmd::embedding::Args),
}

fn main() -> ExitCode {
    report::exit_quietly_on_broken_pipe();
    let result = match Cli::parse().command {
        Command::Workload(a) => cmd::workload::run(a),
        Command::Spmv(a) => cmd::spmv::run(a),
        Command::Build(a) => cmd::build::run(a),
        Command::Cache(a) => cmd::cache::run(a),
        Command::BuildTree(a) => cmd::build_tree::run(a),
        Command::Gen(a) => cmd::gen::run(a),
        Command::Endpoint(a) => cmd::endpoint::run(a),
        Command::Embedding(a) => cmd::embedding::run(a),
    };
    report::exit_code(result)
}

#[cfg(test)]
mod tests {
    /// Every subcommand's arguments are consistent (no two flags of one name, valid
    /// defaults): clap checks this only when a command is parsed.
    #[test]
    fn the_command_line_is_consistent() {
        use clap::CommandFactory;
        super::Cli::command().debug_assert();
    }
}
