//! What the SPARQL layer needs from a store: a term dictionary (terms <-> dense ids) and,
//! per graph, a [`PathGraph`] over those ids. The on-disk store implements both; the
//! in-memory [`MemoryDataset`] is built from quads (an Oxigraph `Store`, parsed files).

use std::collections::BTreeMap;
use std::hash::{BuildHasher, Hash, RandomState};

use hashbrown::HashTable;
use siphasher::sip128::{Hasher128, SipHasher13};

use oxrdf::{GraphNameRef, QuadRef, Term, TermRef};

use super::SparqlError;
use crate::rdf::parse::{Compression, Format};
use crate::rdf::terms;
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
/// Each term is stored once, in id order, as its byte key. The table holds per term a
/// 128-bit keyed hash of it (its key) and its id, and is probed with the key alone: a
/// lookup hashes the borrowed term once and reads no stored term (comparing stored
/// terms cost two cache misses a lookup, most of the embedding's dictionary time). Two
/// terms share an id only if their keys collide, a chance of about `n² / 2¹²⁹` for `n`
/// terms under a key drawn at random per dictionary (Oxigraph itself identifies strings
/// by a 128-bit SipHash, unkeyed).
#[derive(Clone)]
pub struct MemoryDictionary {
    ids: HashTable<Slot>,
    terms: TermArena,
    /// The SipHash key of the terms' keys.
    sip_key: (u64, u64),
}

/// Terms in id order as their byte keys ([`crate::rdf::terms`]), end to end in chunks.
///
/// A term costs its key's bytes and 8 bytes of position, where a `Term` costs its own
/// size, a heap string and the allocator's rounding. Chunks of [`TermArena::CHUNK`]
/// bytes grow the arena without the copy and the doubled peak of one growing buffer;
/// a key never spans two chunks.
#[derive(Clone, Default)]
struct TermArena {
    chunks: Vec<Vec<u8>>,
    /// Per term: its chunk (high 32 bits) and its offset there (low 32 bits).
    starts: Vec<u64>,
    key: Vec<u8>,
}

impl TermArena {
    const CHUNK: usize = 4 << 20;

    fn push(&mut self, term: TermRef<'_>) {
        self.key.clear();
        terms::encode_into(term, &mut self.key);
        let fits = self
            .chunks
            .last()
            .is_some_and(|c| c.capacity() - c.len() >= self.key.len());
        if !fits {
            self.chunks
                .push(Vec::with_capacity(Self::CHUNK.max(self.key.len())));
        }
        let chunk = self.chunks.len() - 1;
        let c = &mut self.chunks[chunk];
        self.starts.push(((chunk as u64) << 32) | c.len() as u64);
        c.extend_from_slice(&self.key);
    }

    fn get(&self, id: u32) -> Option<Term> {
        let i = id as usize;
        let at = |i: usize| {
            self.starts
                .get(i)
                .map(|&p| ((p >> 32) as usize, p as u32 as usize))
        };
        let (chunk, start) = at(i)?;
        let c = &self.chunks[chunk];
        let end = match at(i + 1) {
            Some((next, end)) if next == chunk => end,
            _ => c.len(),
        };
        terms::decode(&c[start..end])
    }

    fn len(&self) -> usize {
        self.starts.len()
    }
}

/// A table entry: a term's key (as four words, so that the entry packs in 20 bytes) and
/// its id.
#[derive(Clone, Copy)]
struct Slot {
    key: [u32; 4],
    id: u32,
}

/// A term's key in a [`MemoryDictionary`]: a 128-bit keyed hash of the term. Keys of
/// one dictionary are valid for the dictionaries made from it by
/// [`MemoryDictionary::sibling`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct TermKey([u32; 4]);

impl TermKey {
    /// The table's hash: the key's first half (the key is a uniform hash already).
    fn hash(self) -> u64 {
        u64::from(self.0[0]) | (u64::from(self.0[1]) << 32)
    }
}

impl Default for MemoryDictionary {
    fn default() -> Self {
        // Two random words from the standard library's per-process randomness.
        let random = RandomState::new();
        MemoryDictionary {
            ids: HashTable::new(),
            terms: TermArena::default(),
            sip_key: (random.hash_one(0u8), random.hash_one(1u8)),
        }
    }
}

impl std::fmt::Debug for MemoryDictionary {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MemoryDictionary")
            .field("terms", &self.terms.len())
            .finish()
    }
}

impl MemoryDictionary {
    /// An empty dictionary whose keys are this one's: a key computed by either is
    /// valid in both.
    pub(crate) fn sibling(&self) -> MemoryDictionary {
        MemoryDictionary {
            ids: HashTable::new(),
            terms: TermArena::default(),
            sip_key: self.sip_key,
        }
    }

    /// The key of `term`.
    pub(crate) fn key(&self, term: TermRef<'_>) -> TermKey {
        let mut h = SipHasher13::new_with_keys(self.sip_key.0, self.sip_key.1);
        term.hash(&mut h);
        let k = h.finish128();
        TermKey([
            k.h1 as u32,
            (k.h1 >> 32) as u32,
            k.h2 as u32,
            (k.h2 >> 32) as u32,
        ])
    }

    /// The id of the term of `key`, if it is known.
    pub(crate) fn id_of_key(&self, key: TermKey) -> Option<u32> {
        self.ids.find(key.hash(), |s| s.key == key.0).map(|s| s.id)
    }

    /// Returns the id of `term`, whose key is `key`, giving it the next id if it is new.
    pub(crate) fn intern_key(&mut self, key: TermKey, term: TermRef<'_>) -> u32 {
        if let Some(id) = self.id_of_key(key) {
            return id;
        }
        let id = self.terms.len() as u32;
        self.terms.push(term);
        self.ids
            .insert_unique(key.hash(), Slot { key: key.0, id }, |s| {
                TermKey(s.key).hash()
            });
        id
    }

    /// The terms with their keys, in id order.
    pub(crate) fn into_keyed_terms(self) -> Vec<(TermKey, Term)> {
        let mut keys = vec![TermKey([0; 4]); self.terms.len()];
        for s in &self.ids {
            keys[s.id as usize] = TermKey(s.key);
        }
        keys.into_iter()
            .enumerate()
            .filter_map(|(id, k)| Some((k, self.terms.get(id as u32)?)))
            .collect()
    }

    /// Returns the id of `term`, giving it the next id if it is new.
    pub fn intern(&mut self, term: TermRef<'_>) -> u32 {
        self.intern_key(self.key(term), term)
    }

    /// Number of terms.
    pub fn len(&self) -> usize {
        self.terms.len()
    }

    /// Whether no term is known.
    pub fn is_empty(&self) -> bool {
        self.terms.len() == 0
    }
}

impl TermDictionary for MemoryDictionary {
    fn id(&self, term: TermRef<'_>) -> Option<u32> {
        self.id_of_key(self.key(term))
    }
    fn term(&self, id: u32) -> Option<Term> {
        self.terms.get(id)
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
/// TriG (`.trig`), each optionally compressed (`.gz`, `.bz2`); triples are in the default
/// graph. A syntax error names the file and line.
pub fn read_quads(path: &std::path::Path) -> Result<Vec<oxrdf::Quad>, SparqlError> {
    let file = path.display().to_string();
    let io_err = |e: std::io::Error| SparqlError::Load {
        file: file.clone(),
        line: None,
        reason: e.to_string(),
    };
    let raw = std::fs::File::open(path).map_err(io_err)?;
    let (format, compression) =
        Format::guess(path).unwrap_or((Format::NTriples, Compression::of_path(path)));
    let reader = std::io::BufReader::new(compression.decoder(std::io::BufReader::new(raw)));
    let err = |e: oxttl::TurtleParseError| SparqlError::Load {
        file: file.clone(),
        line: match &e {
            oxttl::TurtleParseError::Syntax(s) => Some(s.location().start.line + 1),
            _ => None,
        },
        reason: e.to_string(),
    };
    let quads: Vec<oxrdf::Quad> = match format {
        Format::NQuads => oxttl::NQuadsParser::new()
            .for_reader(reader)
            .collect::<Result<_, _>>()
            .map_err(err)?,
        Format::TriG => oxttl::TriGParser::new()
            .for_reader(reader)
            .collect::<Result<_, _>>()
            .map_err(err)?,
        Format::Turtle => oxttl::TurtleParser::new()
            .for_reader(reader)
            .map(|t| t.map(|t| t.in_graph(oxrdf::GraphName::DefaultGraph)))
            .collect::<Result<_, _>>()
            .map_err(err)?,
        Format::NTriples => oxttl::NTriplesParser::new()
            .for_reader(reader)
            .map(|t| t.map(|t| t.in_graph(oxrdf::GraphName::DefaultGraph)))
            .collect::<Result<_, _>>()
            .map_err(err)?,
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

#[cfg(test)]
mod tests {
    use super::*;
    use oxrdf::{Literal, NamedNode};

    /// Files are read as their names say: format, and gzip or bzip2 compression.
    #[test]
    fn quads_are_read_in_any_format_and_compression() {
        use std::io::Write;
        let dir = tempfile::tempdir().unwrap();
        let text = "<http://e/a> <http://e/p> <http://e/b> .\n";
        let gz = dir.path().join("a.nt.gz");
        let mut z = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        z.write_all(text.as_bytes()).unwrap();
        std::fs::write(&gz, z.finish().unwrap()).unwrap();
        let bz = dir.path().join("a.ttl.bz2");
        let mut z = bzip2::write::BzEncoder::new(Vec::new(), bzip2::Compression::fast());
        z.write_all(b"@prefix e: <http://e/> . e:a e:p e:b .")
            .unwrap();
        std::fs::write(&bz, z.finish().unwrap()).unwrap();
        let nq = dir.path().join("a.nq");
        std::fs::write(
            &nq,
            "<http://e/a> <http://e/p> <http://e/b> <http://e/g> .\n",
        )
        .unwrap();
        let a = read_quads(&gz).unwrap();
        assert_eq!(a.len(), 1);
        assert_eq!(read_quads(&bz).unwrap(), a);
        let g = read_quads(&nq).unwrap();
        assert_eq!(g[0].graph_name.to_string(), "<http://e/g>");
        // A file that claims gzip but is not: an error naming the file.
        let bad = dir.path().join("bad.nt.gz");
        std::fs::write(&bad, text).unwrap();
        assert!(read_quads(&bad)
            .unwrap_err()
            .to_string()
            .contains("bad.nt.gz"));
    }

    #[test]
    fn keys_tell_terms_apart_and_carry_over_to_siblings() {
        let iri = Term::from(NamedNode::new_unchecked("http://e/a"));
        // The same string as a literal, and literals differing only in datatype.
        let plain = Term::from(Literal::new_simple_literal("http://e/a"));
        let typed = Term::from(Literal::new_typed_literal(
            "http://e/a",
            NamedNode::new_unchecked("http://e/t"),
        ));
        let mut d = MemoryDictionary::default();
        assert_eq!(d.intern(iri.as_ref()), 0);
        assert_eq!(d.intern(plain.as_ref()), 1);
        assert_eq!(d.intern(typed.as_ref()), 2);
        assert_eq!(d.intern(plain.as_ref()), 1);
        assert_eq!(d.id(typed.as_ref()), Some(2));
        assert_eq!(d.term(1), Some(plain.clone()));

        // Terms numbered apart, then moved in with the keys computed for them.
        let mut fresh = d.sibling();
        let b = Term::from(NamedNode::new_unchecked("http://e/b"));
        let key = d.key(b.as_ref());
        assert_eq!(d.id_of_key(key), None);
        assert_eq!(fresh.intern_key(key, b.as_ref()), 0);
        assert_eq!(fresh.id_of_key(key), Some(0));
        for (key, term) in fresh.into_keyed_terms() {
            assert_eq!(d.intern_key(key, term.as_ref()), 3);
        }
        assert_eq!(d.id(b.as_ref()), Some(3));
        assert_eq!(d.len(), 4);
    }
}
