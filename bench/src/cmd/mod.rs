//! One module per `k2rpq-bench` subcommand: its clap arguments and a `run`.

pub mod build;
pub mod build_tree;
pub mod cache;
pub mod embedding;
pub mod endpoint;
pub mod gen;
pub mod spmv;
pub mod workload;
