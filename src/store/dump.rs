//! Writing a store back as RDF: N-Quads (every graph) or N-Triples (one graph), so that a
//! store is never a one-way door.

use std::io::Write;

use oxrdf::{GraphNameRef, NamedNodeRef, NamedOrBlankNodeRef, QuadRef, Term};
use oxttl::{NQuadsSerializer, NTriplesSerializer};
use rayon::prelude::*;

use super::{GraphId, Store, StoreError};
use crate::progress::{Progress, Stage, Unit};

/// What [`dump`] writes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum DumpFormat {
    /// N-Quads: every graph, the named ones with their names.
    NQuads,
    /// N-Triples: the triples of one graph.
    NTriples {
        /// The graph (0: the default graph; see [`Store::graph_id`]).
        graph: GraphId,
    },
}

/// Cells decoded and written at a time: bounds the memory of a dump by this, not by the
/// largest relation's terms.
const CELLS_PER_PIECE: usize = 1 << 16;

/// Writes the statements of `store` to `out` in `format`, relation by relation, and
/// returns how many were written. Statements are the store's distinct `(s, p, o, g)`
/// quads: duplicates in the loaded files were merged by the load.
pub fn dump(
    store: &Store,
    out: impl Write,
    format: DumpFormat,
    progress: Option<&dyn Progress>,
) -> Result<u64, StoreError> {
    let graphs: Vec<GraphId> = match format {
        DumpFormat::NQuads => (0..store.graphs().len()).collect(),
        DumpFormat::NTriples { graph } if graph < store.graphs().len() => vec![graph],
        DumpFormat::NTriples { graph } => return Err(StoreError::NoGraph(graph)),
    };
    let total: u64 = graphs
        .iter()
        .flat_map(|&g| store.predicates(g).iter().map(|p| p.edges))
        .sum();
    let stage = Stage::begin(progress, "dump", Unit::Items, Some(total));
    let mut writer = Writer::new(out, format);
    let mut written = 0u64;
    for &g in &graphs {
        let graph_name = match &store.graphs()[g].name {
            None => GraphNameRef::DefaultGraph,
            Some(n) => n.as_ref().into(),
        };
        for p in store.predicates(g) {
            let Some(tree) = store.relation(g, p.id)? else {
                continue;
            };
            let predicate = NamedNodeRef::new_unchecked(&p.iri);
            let mut cells = tree.cells();
            // By subject, so that each piece decodes few distinct subjects.
            cells.par_sort_unstable();
            for piece in cells.chunks(CELLS_PER_PIECE) {
                let ids: Vec<u32> = piece.iter().flat_map(|&(s, o)| [s, o]).collect();
                let terms = decode(store, &ids)?;
                for pair in terms.chunks(2) {
                    let subject = match &pair[0] {
                        Term::NamedNode(n) => NamedOrBlankNodeRef::from(n.as_ref()),
                        Term::BlankNode(b) => NamedOrBlankNodeRef::from(b.as_ref()),
                        other => {
                            return Err(StoreError::File {
                                path: store.dir().to_path_buf(),
                                reason: format!("a literal subject in the dictionary: {other}"),
                            })
                        }
                    };
                    let quad = QuadRef::new(subject, predicate, pair[1].as_ref(), graph_name);
                    writer.write(quad).map_err(StoreError::Dump)?;
                }
                written += piece.len() as u64;
                stage.inc(piece.len() as u64);
            }
        }
    }
    writer.finish().map_err(StoreError::Dump)?;
    Ok(written)
}

/// The terms of `ids`, in order; an id the dictionary lacks is a corrupt store.
fn decode(store: &Store, ids: &[u32]) -> Result<Vec<Term>, StoreError> {
    let terms: Vec<Option<Term>> = ids
        .par_chunks(4096)
        .flat_map_iter(|c| store.dictionary().terms(c))
        .collect();
    terms
        .into_iter()
        .zip(ids)
        .map(|(t, &id)| {
            t.ok_or_else(|| StoreError::File {
                path: store.dir().to_path_buf(),
                reason: format!("node id {id} is not in the dictionary"),
            })
        })
        .collect()
}

/// The serializer of a [`DumpFormat`].
enum Writer<W: Write> {
    Quads(oxttl::nquads::WriterNQuadsSerializer<W>),
    Triples(oxttl::ntriples::WriterNTriplesSerializer<W>),
}

impl<W: Write> Writer<W> {
    fn new(out: W, format: DumpFormat) -> Self {
        match format {
            DumpFormat::NQuads => Writer::Quads(NQuadsSerializer::new().for_writer(out)),
            DumpFormat::NTriples { .. } => {
                Writer::Triples(NTriplesSerializer::new().for_writer(out))
            }
        }
    }

    fn write(&mut self, quad: QuadRef<'_>) -> std::io::Result<()> {
        match self {
            Writer::Quads(w) => w.serialize_quad(quad),
            Writer::Triples(w) => w.serialize_triple(quad),
        }
    }

    fn finish(self) -> std::io::Result<()> {
        let mut out = match self {
            Writer::Quads(w) => w.finish(),
            Writer::Triples(w) => w.finish(),
        };
        out.flush()
    }
}
