//! One module per subcommand: its clap arguments and a `run` that calls the library.

pub mod bench_build;
pub mod bench_cache;
pub mod bench_spmv;
pub mod build_tree;
