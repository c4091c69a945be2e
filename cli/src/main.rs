//! `k2rpq`: the command line, a thin layer over the library.

use std::process::ExitCode;

use clap::{Parser, Subcommand};
use k2rpq_cli::{dump, explain, info, lines, load, query, report, rpq, serve};

/// The binary's allocator (feature `mimalloc`, on by default): an answer allocates and
/// frees a string per term, and glibc's allocator measured 10-15 % slower on the median
/// query of a 100M-triple store.
#[cfg(feature = "mimalloc")]
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// k²-tree compressed RDF relations on the GPU: SPARQL queries, property paths and
/// regular path queries as Boolean matrix–vector products iterated to a fixed point.
#[derive(Parser)]
#[command(name = "k2rpq", version, about, long_about = None)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Load RDF (N-Triples, N-Quads, Turtle, TriG; plain, .gz, .bz2; files or stdin) into a store.
    Load(load::Args),
    /// Show what a store holds: graphs, predicates, edges, bits per edge, sizes.
    Info(info::Args),
    /// Keep a store's line lists (successors and predecessors of every relation) on disk,
    /// so that its first queries read them instead of building them.
    Lines(lines::Args),
    /// Answer a SPARQL query over a store or an RDF file.
    Query(query::Args),
    /// Evaluate regular path queries `S REGEX O` and print the (start, end) pairs as TSV.
    Rpq(rpq::Args),
    /// Print the plan of a path query and the steps of its run.
    Explain(explain::Args),
    /// Write a store back as N-Quads or N-Triples.
    Dump(dump::Args),
    /// Serve a store as a read-only SPARQL endpoint (SPARQL 1.1 Protocol) with a query page.
    Serve(serve::Args),
}

fn main() -> ExitCode {
    let command = Cli::parse().command;
    report::print_notices();
    // A server writes to sockets its clients may close at any time: a closed socket is an
    // error of that request (SIGPIPE stays ignored), not the end of the process.
    if !matches!(command, Command::Serve(_)) {
        report::exit_quietly_on_broken_pipe();
    }
    let result = match command {
        Command::Load(a) => load::run(a),
        Command::Info(a) => info::run(a),
        Command::Lines(a) => lines::run(a),
        Command::Query(a) => query::run(a),
        Command::Rpq(a) => rpq::run(a),
        Command::Explain(a) => explain::run(a),
        Command::Dump(a) => dump::run(a),
        Command::Serve(a) => serve::run(a),
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
