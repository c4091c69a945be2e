//! RDF input: term keys ([`terms`]), parsing of N-Triples, N-Quads, Turtle and TriG from
//! plain or compressed files and stdin ([`parse`], gzip through [`gzip`]), and edge
//! collection in bounded memory with sorted runs on disk ([`edges`]).
//!
//! Nothing here knows about k²-trees: [`crate::store`] turns the numbered edges into trees.

pub mod edges;
pub mod gzip;
pub mod ntfast;
pub mod parse;
pub mod terms;
