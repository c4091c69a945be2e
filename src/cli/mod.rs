//! One module per subcommand: its clap arguments and a `run` that calls the library.

pub mod bench_build;
pub mod bench_cache;
pub mod build_tree;
pub mod explain;
pub mod graph_source;
pub mod query;
pub mod rpq;
