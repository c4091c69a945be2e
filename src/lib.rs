//! # k2rpq
//!
//! RDF predicates stored as k²-trees (compressed Boolean adjacency matrices), products on
//! the GPU or the CPU, and SPARQL 1.1 property paths / regular path queries evaluated as
//! batched Boolean matrix–vector products iterated to a fixed point.
//!
//! Layers, each knowing only the ones below it:
//! - [`k2tree`]: the compressed matrix format and its file;
//! - [`engine`]: right/left semiring products ([`engine::Engine`]) on the CPU and GPU;
//! - [`bench`](mod@bench): benchmark drivers, edge-list readers and synthetic graph generators.
#![warn(missing_docs)]

pub mod bench;
pub mod cache;
pub mod database;
pub mod engine;
pub(crate) mod huge_pages;
pub mod k2tree;
pub mod oxigraph;
pub mod rdf;
pub mod rpq;
pub mod sparql;
pub mod store;
