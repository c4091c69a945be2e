//! What the SPARQL layer needs from a store: a term dictionary (terms <-> dense ids) and,
//! per graph, a [`PathGraph`] over those ids. The on-disk store implements both; the
//! in-memory [`MemoryDataset`] is built from quads (an Oxigraph `Store`, parsed files).

use std::collections::BTreeMap;
use std::hash::{BuildHasher, RandomState};

use hashbrown::HashTable;

use oxrdf::{GraphNameRef, QuadRef, Term, TermRef};

use super::SparqlError;
use crate::rpq::{MemoryGraph, PathGraph};

/// Maps RDF terms to the dense `u32` ids of the graphs and back.
pub trait TermDictionary: Sync {
    /// The id of `term`, or `None` when the store does not know it.
    fn id(&self, term: TermRef<'_>) -> Option<u32>;
    /// The term of `id`, or `None` when no term has it.
    fn term(&self, id: u32) -> Option<Term>;
}

/// An RDF dataset the SPARQL layer evaluates over: a dictionary, a default graph and
/// named graphs, each graph a [`PathGraph`] over the dictionary's ids.
pub trait PathDataset: Sync {
    /// The term dictionary shared by all graphs.
    fn dictionary(&self) -> &dyn TermDictionary;
    /// The default graph.
    fn default_graph(&self) -> &dyn PathGraph;
    /// The ids of the named graphs' names, ascending.
    fn named_graphs(&self) -> Vec<u32>;
    /// The named graph whose name has id `name`, if any.
    fn named_graph(&self, name: u32) -> Option<&dyn PathGraph>;
}

/// A term dictionary in memory.
///
/// Each term is stored once, in id order; the table holds ids and is probed with the
/// borrowed term, so a lookup allocates nothing (an owned key per lookup cost the
/// embedding's writes four allocations a quad).
#[derive(Clone, Default)]
pub struct MemoryDictionary {
    ids: HashTable<u32>,
    terms: Vec<Term>,
    hasher: RandomState,
}

impl std::fmt::Debug for MemoryDictionary {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MemoryDictionary")
            .field("terms", &self.terms.len())
            .finish()
    }
}

impl MemoryDictionary {
    fn find(&self, term: TermRef<'_>, hash: u64) -> Option<u32> {
        self.ids
            .find(hash, |&id| self.terms[id as usize].as_ref() == term)
            .copied()
    }

    /// Returns the id of `term`, giving it the next id if it is new.
    pub fn intern(&mut self, term: TermRef<'_>) -> u32 {
        let hash = self.hasher.hash_one(term);
        if let Some(id) = self.find(term, hash) {
            return id;
        }
        let id = self.terms.len() as u32;
        self.terms.push(term.into_owned());
        let (terms, hasher) = (&self.terms, &self.hasher);
        self.ids
            .insert_unique(hash, id, |&i| hasher.hash_one(terms[i as usize].as_ref()));
        id
    }

    /// Number of terms.
    pub fn len(&self) -> usize {
        self.terms.len()
    }

    /// Whether no term is known.
    pub fn is_empty(&self) -> bool {
        self.terms.is_empty()
    }
}

impl TermDictionary for MemoryDictionary {
    fn id(&self, term: TermRef<'_>) -> Option<u32> {
        self.find(term, self.hasher.hash_one(term))
    }
    fn term(&self, id: u32) -> Option<Term> {
        self.terms.get(id as usize).cloned()
    }
}

/// A [`PathDataset`] held in memory: one [`MemoryGraph`] per graph.
///
/// ```
/// use k2rpq::sparql::{MemoryDataset, PathDataset};
/// use oxrdf::{NamedNode, Quad, GraphName};
/// let n = |s: &str| NamedNode::new(format!("http://e/{s}")).unwrap();
/// let quads = vec![Quad::new(n("a"), n("p"), n("b"), GraphName::DefaultGraph)];
/// let d = MemoryDataset::from_quads(quads.iter().map(|q| q.as_ref()));
/// assert_eq!(d.default_graph().nodes().len(), 2);
/// assert!(d.named_graphs().is_empty());
/// ```
#[derive(Clone, Debug, Default)]
pub struct MemoryDataset {
    dictionary: MemoryDictionary,
    default_graph: MemoryGraph,
    named: BTreeMap<u32, MemoryGraph>,
}

impl MemoryDataset {
    /// Builds the dataset of `quads` (duplicates are harmless: relations are sets).
    pub fn from_quads<'a>(quads: impl IntoIterator<Item = QuadRef<'a>>) -> Self {
        let mut dictionary = MemoryDictionary::default();
        let mut default_triples = Vec::new();
        let mut named_triples: BTreeMap<u32, Vec<(u32, u32, u32)>> = BTreeMap::new();
        for q in quads {
            let s = dictionary.intern(q.subject.into());
            let p = dictionary.intern(q.predicate.into());
            let o = dictionary.intern(q.object);
            match q.graph_name {
                GraphNameRef::DefaultGraph => default_triples.push((s, p, o)),
                GraphNameRef::NamedNode(g) => {
                    let g = dictionary.intern(g.into());
                    named_triples.entry(g).or_default().push((s, p, o));
                }
                GraphNameRef::BlankNode(g) => {
                    let g = dictionary.intern(g.into());
                    named_triples.entry(g).or_default().push((s, p, o));
                }
            }
        }
        // One id space for all graphs, so that results of different graphs share ids.
        let n = dictionary.len() as u32;
        MemoryDataset {
            default_graph: MemoryGraph::with_node_count(n, default_triples),
            named: named_triples
                .into_iter()
                .map(|(g, t)| (g, MemoryGraph::with_node_count(n, t)))
                .collect(),
            dictionary,
        }
    }

    /// Loads an RDF file in memory: N-Triples (`.nt`), N-Quads (`.nq`), Turtle (`.ttl`)
    /// or TriG (`.trig`), each optionally gzipped (`.gz`).
    pub fn load_file(path: &std::path::Path) -> Result<Self, SparqlError> {
        let quads = read_quads(path)?;
        Ok(Self::from_quads(quads.iter().map(|q| q.as_ref())))
    }

    /// Builds the dataset of every quad of an Oxigraph store.
    pub fn from_store(
        store: &oxigraph::store::Store,
    ) -> Result<Self, oxigraph::store::StorageError> {
        let quads: Vec<oxrdf::Quad> = store.iter().collect::<Result<_, _>>()?;
        Ok(Self::from_quads(quads.iter().map(|q| q.as_ref())))
    }
}

/// Reads the quads of an RDF file: N-Triples (`.nt`), N-Quads (`.nq`), Turtle (`.ttl`) or
/// TriG (`.trig`), each optionally gzipped (`.gz`); triples are in the default graph. A
/// syntax error names the file and line.
pub fn read_quads(path: &std::path::Path) -> Result<Vec<oxrdf::Quad>, SparqlError> {
    use std::io::Read;
    let file = path.display().to_string();
    let io_err = |e: std::io::Error| SparqlError::Load {
        file: file.clone(),
        line: None,
        reason: e.to_string(),
    };
    let raw = std::fs::File::open(path).map_err(io_err)?;
    let name = path.to_string_lossy();
    let stem = name.strip_suffix(".gz").unwrap_or(&name).to_owned();
    let reader: Box<dyn Read> = if name.ends_with(".gz") {
        Box::new(flate2::read::MultiGzDecoder::new(raw))
    } else {
        Box::new(raw)
    };
    let reader = std::io::BufReader::new(reader);
    let err = |e: oxttl::TurtleParseError| SparqlError::Load {
        file: file.clone(),
        line: match &e {
            oxttl::TurtleParseError::Syntax(s) => Some(s.location().start.line + 1),
            _ => None,
        },
        reason: e.to_string(),
    };
    let quads: Vec<oxrdf::Quad> = if stem.ends_with(".nq") {
        oxttl::NQuadsParser::new()
            .for_reader(reader)
            .collect::<Result<_, _>>()
            .map_err(err)?
    } else if stem.ends_with(".trig") {
        oxttl::TriGParser::new()
            .for_reader(reader)
            .collect::<Result<_, _>>()
            .map_err(err)?
    } else if stem.ends_with(".ttl") {
        oxttl::TurtleParser::new()
            .for_reader(reader)
            .map(|t| t.map(|t| t.in_graph(oxrdf::GraphName::DefaultGraph)))
            .collect::<Result<_, _>>()
            .map_err(err)?
    } else {
        oxttl::NTriplesParser::new()
            .for_reader(reader)
            .map(|t| t.map(|t| t.in_graph(oxrdf::GraphName::DefaultGraph)))
            .collect::<Result<_, _>>()
            .map_err(err)?
    };
    Ok(quads)
}

impl PathDataset for MemoryDataset {
    fn dictionary(&self) -> &dyn TermDictionary {
        &self.dictionary
    }
    fn default_graph(&self) -> &dyn PathGraph {
        &self.default_graph
    }
    fn named_graphs(&self) -> Vec<u32> {
        self.named.keys().copied().collect()
    }
    fn named_graph(&self, name: u32) -> Option<&dyn PathGraph> {
        self.named.get(&name).map(|g| g as &dyn PathGraph)
    }
}
