//! One module per subcommand: its clap arguments and a `run` that calls the library.

pub mod bench;
pub mod bench_build;
pub mod bench_cache;
pub mod bench_spmv;
pub mod build_tree;
pub mod explain;
pub mod gen;
pub mod graph_source;
pub mod info;
pub mod load;
pub mod query;
pub mod rpq;
