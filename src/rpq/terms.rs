//! A small in-memory term dictionary and loaders that turn a file into a
//! [`MemoryGraph`]: the graph source for small inputs and tests, until (and beside) the
//! on-disk store, which has its own dictionary.

use std::collections::HashMap;
use std::fs::File;
use std::io::{BufRead, BufReader, Read};
use std::path::Path as FsPath;

use super::{MemoryGraph, RpqError};
use crate::rdf::parse::{Compression, Format};

/// IRI prefix of the nodes of an edge list loaded with [`load_tsv`]: node `i` is
/// `<urn:k2rpq:n:i>`.
pub const TSV_NODE_PREFIX: &str = "urn:k2rpq:n:";
/// IRI of the one predicate of an edge list loaded with [`load_tsv`].
pub const TSV_PREDICATE: &str = "urn:k2rpq:p";

/// Terms in their N-Triples form (`<iri>`, `"lit"@en`, `_:b`) and their dense ids, shared
/// by nodes and predicates.
#[derive(Clone, Debug, Default)]
pub struct TermDict {
    terms: Vec<String>,
    ids: HashMap<String, u32>,
}

impl TermDict {
    /// An empty dictionary.
    pub fn new() -> Self {
        Self::default()
    }

    /// The id of `term` (N-Triples form), adding it if new.
    pub fn intern(&mut self, term: String) -> u32 {
        if let Some(&id) = self.ids.get(&term) {
            return id;
        }
        let id = self.terms.len() as u32;
        self.ids.insert(term.clone(), id);
        self.terms.push(term);
        id
    }

    /// The id of a term in N-Triples form.
    pub fn id(&self, term: &str) -> Option<u32> {
        self.ids.get(term).copied()
    }

    /// The id of an IRI (without `<>`).
    pub fn iri_id(&self, iri: &str) -> Option<u32> {
        self.id(&format!("<{iri}>"))
    }

    /// The N-Triples form of term `id`.
    pub fn term(&self, id: u32) -> Option<&str> {
        self.terms.get(id as usize).map(String::as_str)
    }

    /// Number of terms.
    pub fn len(&self) -> usize {
        self.terms.len()
    }

    /// Whether there are no terms.
    pub fn is_empty(&self) -> bool {
        self.terms.is_empty()
    }
}

/// `path` opened and decompressed as its suffix says (`.gz`, `.bz2`).
fn open(path: &FsPath) -> Result<Box<dyn Read + Send>, RpqError> {
    let f = File::open(path).map_err(|e| RpqError::Load {
        file: path.display().to_string(),
        line: None,
        reason: e.to_string(),
    })?;
    Ok(Compression::of_path(path).decoder(BufReader::new(f)))
}

/// Loads an N-Triples (`.nt`) or Turtle (`.ttl`) file, optionally compressed (`.gz`,
/// `.bz2`), into a graph
/// and its dictionary (one id space for all terms).
pub fn load_rdf(path: &FsPath) -> Result<(MemoryGraph, TermDict), RpqError> {
    let name = path.display().to_string();
    let turtle = matches!(Format::guess(path), Some((Format::Turtle, _)));
    let reader = open(path)?;
    let mut dict = TermDict::new();
    let mut triples = Vec::new();
    let mut add = |t: oxrdf::Triple, dict: &mut TermDict| {
        let s = dict.intern(t.subject.to_string());
        let p = dict.intern(t.predicate.to_string());
        let o = dict.intern(t.object.to_string());
        triples.push((s, p, o));
    };
    let err = |e: oxttl::TurtleParseError| RpqError::Load {
        file: name.clone(),
        line: match &e {
            oxttl::TurtleParseError::Syntax(s) => Some(s.location().start.line + 1),
            _ => None,
        },
        reason: e.to_string(),
    };
    if turtle {
        for t in oxttl::TurtleParser::new().for_reader(reader) {
            add(t.map_err(err)?, &mut dict);
        }
    } else {
        for t in oxttl::NTriplesParser::new().for_reader(reader) {
            add(t.map_err(err)?, &mut dict);
        }
    }
    let graph = MemoryGraph::with_node_count(dict.len() as u32, triples);
    Ok((graph, dict))
}

/// Loads an edge list, `src<TAB>dst` per line (numeric ids, `#` comments, optionally
/// compressed: `.gz`, `.bz2`), as one predicate [`TSV_PREDICATE`] over nodes `<urn:k2rpq:n:ID>`; node `i`
/// keeps id `i`.
pub fn load_tsv(path: &FsPath) -> Result<(MemoryGraph, TermDict), RpqError> {
    let name = path.display().to_string();
    let reader = BufReader::new(open(path)?);
    let mut edges = Vec::new();
    let mut max = 0u32;
    for (i, line) in reader.lines().enumerate() {
        let bad = |reason: String| RpqError::Load {
            file: name.clone(),
            line: Some(i as u64 + 1),
            reason,
        };
        let line = line.map_err(|e| bad(e.to_string()))?;
        let l = line.trim();
        if l.is_empty() || l.starts_with('#') {
            continue;
        }
        let mut it = l.split_whitespace();
        let mut num = || -> Result<u32, RpqError> {
            let tok = it
                .next()
                .ok_or_else(|| bad("expected `src<TAB>dst`".into()))?;
            tok.parse::<u32>()
                .ok()
                .filter(|&v| v < u32::MAX - 1)
                .ok_or_else(|| bad(format!("`{tok}` is not a node id")))
        };
        let (s, o) = (num()?, num()?);
        max = max.max(s).max(o);
        edges.push((s, o));
    }
    let mut dict = TermDict::new();
    let nodes = if edges.is_empty() { 0 } else { max + 1 };
    for i in 0..nodes {
        dict.intern(format!("<{TSV_NODE_PREFIX}{i}>"));
    }
    let p = dict.intern(format!("<{TSV_PREDICATE}>"));
    let triples = edges.into_iter().map(|(s, o)| (s, p, o)).collect();
    Ok((
        MemoryGraph::with_node_count(dict.len() as u32, triples),
        dict,
    ))
}

/// Looks terms up in a dictionary: [`TermDict`] here, the store's dictionary later.
pub trait TermLookup {
    /// The id of an IRI (without `<>`), if the dictionary knows it.
    fn iri_id(&self, iri: &str) -> Option<u32>;
    /// The N-Triples form of term `id`.
    fn term(&self, id: u32) -> Option<String>;
}

impl TermLookup for TermDict {
    fn iri_id(&self, iri: &str) -> Option<u32> {
        TermDict::iri_id(self, iri)
    }
    fn term(&self, id: u32) -> Option<String> {
        TermDict::term(self, id).map(str::to_string)
    }
}

/// Ids given to constants the dictionary does not know (they are in no graph, but a
/// zero-length path still relates them to themselves): the subject's and the object's.
pub const UNKNOWN_SUBJECT: u32 = u32::MAX;
/// See [`UNKNOWN_SUBJECT`].
pub const UNKNOWN_OBJECT: u32 = u32::MAX - 1;

/// A log query with its IRIs resolved against a dictionary.
#[derive(Clone, Debug)]
pub struct ResolvedQuery {
    /// The path over predicate ids.
    pub path: super::Path,
    /// The subject end.
    pub subject: super::Endpoint,
    /// The object end.
    pub object: super::Endpoint,
    /// Constants unknown to the dictionary, by the placeholder id they were given, with
    /// their N-Triples form (to print them back).
    pub unknown: Vec<(u32, String)>,
}

impl ResolvedQuery {
    /// The N-Triples form of a result id.
    pub fn term(&self, terms: &dyn TermLookup, id: u32) -> String {
        self.unknown
            .iter()
            .find(|u| u.0 == id)
            .map(|u| u.1.clone())
            .or_else(|| terms.term(id))
            .unwrap_or_else(|| format!("_:unknown{id}"))
    }
}

/// Resolves the IRIs of a log query: predicates to ids (unknown ones match nothing),
/// constants to ids (unknown ones to placeholders; equal IRIs to equal ids).
pub fn resolve_log_query(q: &super::LogQuery, terms: &dyn TermLookup) -> ResolvedQuery {
    use super::{Endpoint, LogEndpoint};
    let path = super::parse_path_expr(&q.path, |iri| terms.iri_id(iri));
    let mut unknown = Vec::new();
    let mut end = |e: &LogEndpoint, placeholder: u32| match e {
        LogEndpoint::Var(_) => Endpoint::Var,
        LogEndpoint::Iri(iri) => Endpoint::Const(terms.iri_id(iri).unwrap_or_else(|| {
            let nt = format!("<{iri}>");
            if let Some(u) = unknown.iter().find(|u: &&(u32, String)| u.1 == nt) {
                return u.0;
            }
            unknown.push((placeholder, nt));
            placeholder
        })),
    };
    let subject = end(&q.subject, UNKNOWN_SUBJECT);
    let object = end(&q.object, UNKNOWN_OBJECT);
    ResolvedQuery {
        path,
        subject,
        object,
        unknown,
    }
}
