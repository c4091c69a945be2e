//! Benchmark drivers and what they need: edge-list readers, synthetic graph generators,
//! and the construction benchmark behind `k2rpq bench-build`.

pub mod build;
pub mod cache;
pub mod gen;
pub mod input;
pub mod oxigraph_runner;
pub mod rpq;
pub mod scaling;
pub mod spmv;
pub mod stats;
pub mod svg;
pub mod workload;
