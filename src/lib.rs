//! # k2rpq
//!
//! RDF predicates stored as k²-trees (compressed Boolean adjacency matrices), products on
//! the GPU or the CPU, and SPARQL 1.1 property paths / regular path queries evaluated as
//! batched Boolean matrix–vector products iterated to a fixed point.
//!
//! Layers, each knowing only the ones below it:
//! - [`k2tree`]: the compressed matrix format and its file;
//! - [`engine`]: right/left semiring products ([`engine::Engine`]) on the CPU and GPU;
//! - [`cache`]: relations resident on the GPU under a byte budget;
//! - [`store`]: loading RDF (N-Triples, N-Quads, Turtle, TriG) into a store of trees and a
//!   term dictionary, and dumping it back;
//! - [`rpq`]: path expressions, automata, plans and their evaluation;
//! - [`sparql`]: SPARQL over a store; [`oxigraph`]: the embedding in an Oxigraph store;
//! - [`database`]: an opened store with its engines, the entry point.
//!
//! A store on disk is opened as a [`database::Database`] (see its example). Paths can
//! also be evaluated over a graph in memory, on any [`engine::Engine`]:
//!
//! ```
//! use k2rpq::engine::cpu::CpuEngine;
//! use k2rpq::rpq::{evaluate, Endpoint, EvalOptions, MemoryGraph, Path};
//!
//! // (subject, predicate, object) ids: 0 -p-> 1 -p-> 2.
//! let graph = MemoryGraph::from_triples(vec![(0, 7, 1), (1, 7, 2)]);
//! let p_plus = Path::OneOrMore(Path::link(7));
//! let answer = evaluate(&CpuEngine::new(), &graph, &p_plus, Endpoint::Const(0), Endpoint::Var,
//!     &EvalOptions::default())?;
//! assert_eq!(answer.pairs, [(0, 1), (0, 2)]);
//! # Ok::<(), k2rpq::rpq::RpqError>(())
//! ```
#![warn(missing_docs)]

pub mod cache;
mod checksum;
pub mod database;
pub mod engine;
pub(crate) mod huge_pages;
pub mod k2tree;
pub mod oxigraph;
pub mod progress;
mod rdf;
pub mod rpq;
pub mod sparql;
pub mod store;

/// The README's Rust examples, compiled as doctests so that they stay true.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
pub struct ReadmeDoctests;
