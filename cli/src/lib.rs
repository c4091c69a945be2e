//! The `k2rpq` command line: one module per command, each its clap arguments and a `run`
//! that calls the library. The benchmark tool (`k2rpq-bench`) shares the argument types
//! of [`args`].

pub mod args;
pub mod dump;
pub mod explain;
pub mod info;
pub mod lines;
pub mod load;
pub mod progress;
pub mod query;
pub mod report;
pub mod rpq;
pub mod serve;
pub mod source;
