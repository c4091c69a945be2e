//! Benchmarks of k2rpq and what they need: query workloads against Oxigraph, products
//! against cuSPARSE and a Boolean CSR, construction, the device cache, several GPUs;
//! edge-list readers, synthetic graphs and the wikidata-like dump generator; SVG plots.
//! The `k2rpq-bench` binary runs each as a subcommand.

pub mod baseline;
pub mod build;
pub mod cache;
pub mod endpoint;
pub mod gen;
pub mod input;
pub mod oxigraph_runner;
pub mod rpq;
pub mod scaling;
pub mod spmv;
pub mod stats;
pub mod svg;
pub mod wikidata;
pub mod workload;
