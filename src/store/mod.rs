//! The on-disk store: a folder holding
//! - `manifest.json`: format version, node count, dictionary segments, and per graph its
//!   name and per predicate its edge count, bits per edge, bytes, file and checksum;
//! - `dict-NNNN.fc`: front-coded dictionary segments ([`Dictionary`]);
//! - `g{G}-p{P}.k2`: one k²-tree per (graph index `G`, predicate term id `P`), square with
//!   side = node count;
//! - `g{G}.nodes`: the ids occurring as subject or object in graph `G` (a roaring bitmap);
//! - optionally `g{G}-p{P}.rows` / `.cols`: a tree's successor / predecessor lists
//!   ([`crate::k2tree::lines_file`], written by [`keep_lines`]), read on a relation's first
//!   walk instead of being built; a missing or damaged one is rebuilt as if absent.
//!
//! [`Store::open`] reads the manifest, maps and checksums the dictionary and checks that
//! every listed file exists with its recorded size; trees are mapped lazily, on first
//! [`Store::relation`], and their own checksums are verified then. Files are never changed
//! in place: [`load()`] builds a new folder beside the store and swaps it in.

mod dictionary;
mod dump;
mod key_sort;
mod lines;
mod load;
mod prefetch;
mod term_cache;

use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};

use oxrdf::{BlankNode, NamedNode, NamedOrBlankNode, Term};
use roaring::RoaringBitmap;
use serde::{Deserialize, Serialize};

pub use dictionary::Dictionary;
pub use dump::{dump, DumpFormat};
pub use lines::{keep_lines, KeepLinesOptions, KeepLinesReport, LOAD_LINES_MIN_EDGES};
pub use load::{load, LoadError, LoadOptions, LoadReport};

use crate::k2tree::{file, height_for, lines_file, K2Tree, LineBudget};
pub use crate::rdf::parse::{BadStatement, Compression, Format, Input, ParseError, Skipped};

/// Name of the manifest file inside a store folder.
pub const MANIFEST: &str = "manifest.json";
/// `format` field of every manifest.
pub const FORMAT_NAME: &str = "k2rpq-store";
/// Manifest version written and understood by this build.
pub const FORMAT_VERSION: u32 = 1;

/// Index of a graph in [`Store::graphs`]; 0 is the default graph.
pub type GraphId = usize;

/// What went wrong opening or reading a store.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StoreError {
    /// The folder or its manifest is missing.
    #[error("{path}: not a k2rpq store ({reason})")]
    NotAStore {
        /// The folder.
        path: PathBuf,
        /// Why.
        reason: String,
    },
    /// The manifest does not parse or is inconsistent.
    #[error("{path}: corrupt manifest: {reason}")]
    Manifest {
        /// The manifest file.
        path: PathBuf,
        /// Why.
        reason: String,
    },
    /// The store was written by an incompatible version.
    #[error("{path}: store format {found} version {version}, this build reads {FORMAT_NAME} version {FORMAT_VERSION}")]
    Version {
        /// The manifest file.
        path: PathBuf,
        /// Format name found.
        found: String,
        /// Version found.
        version: u32,
    },
    /// A dictionary segment is missing or corrupt.
    #[error(transparent)]
    Dictionary(#[from] dictionary::DictionaryError),
    /// A data file is missing, truncated or corrupt.
    #[error("{path}: {reason}")]
    File {
        /// The file.
        path: PathBuf,
        /// Why.
        reason: String,
    },
    /// A relation's `.k2` file cannot be read, or is truncated or corrupt (the error
    /// names the file).
    #[error(transparent)]
    Tree(#[from] file::FileError),
    /// No graph with this index.
    #[error("no graph {0} in the store")]
    NoGraph(GraphId),
    /// Writing a dump failed.
    #[error("writing the dump: {0}")]
    Dump(#[source] std::io::Error),
}

/// One dictionary segment as listed in the manifest.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SegmentInfo {
    /// File name inside the store.
    pub file: String,
    /// First id of the segment.
    pub first_id: u32,
    /// Terms in it.
    pub count: u32,
    /// File size.
    pub bytes: u64,
    /// CRC-32 of the file up to its own trailing CRC.
    pub crc32: u32,
}

/// One (graph, predicate) relation as listed in the manifest.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PredicateInfo {
    /// The predicate IRI.
    pub iri: String,
    /// Term id of the predicate IRI.
    pub id: u32,
    /// Distinct edges (cells of the tree).
    pub edges: u64,
    /// Tree bits per edge (signatures only).
    pub bits_per_edge: f64,
    /// Size of the `.k2` file.
    pub bytes: u64,
    /// File name inside the store.
    pub file: String,
    /// CRC-32 of the whole `.k2` file.
    pub crc32: u32,
    /// Side of the tree when it was written (≤ node count; see [`Store::relation`]).
    pub side: u64,
    /// The relation's line lists kept on disk (`k2rpq lines`), if any.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub lines: Vec<LineFileInfo>,
}

/// One orientation of a relation's line lists kept beside its tree
/// ([`crate::k2tree::lines_file`]).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct LineFileInfo {
    /// Predecessor lists (by column) rather than successor lists (by row).
    pub by_column: bool,
    /// File name inside the store.
    pub file: String,
    /// File size.
    pub bytes: u64,
}

/// One graph as listed in the manifest (its default: the default graph, with no relations
/// yet).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct GraphEntry {
    /// `None` for the default graph, else the name in N-Triples form (`<iri>` or `_:b`).
    pub name: Option<String>,
    /// Term id of the name.
    pub id: Option<u32>,
    /// Distinct edges over all predicates.
    pub edges: u64,
    /// Distinct subjects and objects.
    pub nodes: u64,
    /// Node bitmap file.
    pub nodes_file: String,
    /// CRC-32 of the node bitmap file.
    pub nodes_crc32: u32,
    /// Size of the node bitmap file.
    pub nodes_bytes: u64,
    /// Relations, sorted by predicate id.
    pub predicates: Vec<PredicateInfo>,
}

/// The manifest: everything `open` needs to know, in JSON.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Manifest {
    /// Always [`FORMAT_NAME`].
    pub format: String,
    /// [`FORMAT_VERSION`] of the writer.
    pub version: u32,
    /// Size of the shared id space.
    pub node_count: u32,
    /// Dictionary segments in id order.
    pub dictionary: Vec<SegmentInfo>,
    /// Graphs; index 0 is the default graph.
    pub graphs: Vec<GraphEntry>,
    /// Loads that built this store, oldest first.
    pub loads: Vec<LoadReport>,
}

/// A graph of an opened store.
#[derive(Clone, Debug, PartialEq)]
pub struct GraphInfo {
    /// `None` for the default graph.
    pub name: Option<NamedOrBlankNode>,
    /// Term id of the name.
    pub id: Option<u32>,
    /// Distinct edges over all predicates.
    pub edges: u64,
    /// Distinct subjects and objects.
    pub nodes: u64,
}

/// An opened store.
pub struct Store {
    dir: PathBuf,
    manifest: Manifest,
    dictionary: Dictionary,
    graphs: Vec<GraphInfo>,
    /// The relations mapped so far, by graph and by position among the graph's
    /// predicates: a read takes no lock (every triple pattern of a query reads one, and
    /// an endpoint's requests read them at once).
    trees: Vec<Vec<OnceLock<Arc<K2Tree>>>>,
    /// Host memory for the line lists of the store's relations (each tree counts against it).
    line_budget: Arc<LineBudget>,
    /// Terms and ids that queries decoded and looked up, for the queries after them.
    kept_terms: term_cache::TermCache,
}

impl std::fmt::Debug for Store {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Store")
            .field("dir", &self.dir)
            .field("node_count", &self.manifest.node_count)
            .finish()
    }
}

/// Maps a `.k2` file, verifying its checksums and structure.
pub(crate) fn open_tree(path: &Path) -> Result<K2Tree, file::FileError> {
    file::open(path, file::OpenOptions::default())
}

/// Parses a graph name stored as `<iri>` or `_:b`.
fn parse_graph_name(s: &str) -> Option<NamedOrBlankNode> {
    if let Some(iri) = s.strip_prefix('<').and_then(|r| r.strip_suffix('>')) {
        Some(NamedNode::new_unchecked(iri).into())
    } else {
        s.strip_prefix("_:")
            .map(|b| BlankNode::new_unchecked(b).into())
    }
}

impl Store {
    /// Opens the store in `dir`: manifest, version, dictionary (mapped and checksummed),
    /// presence and size of every tree and bitmap file. Trees themselves are mapped lazily.
    pub fn open(dir: &Path) -> Result<Store, StoreError> {
        let mpath = dir.join(MANIFEST);
        if !dir.is_dir() {
            let reason = if dir.exists() {
                "a file, not a store folder; `k2rpq load FILE --store DIR` makes a store of it"
            } else {
                "no such folder"
            };
            return Err(StoreError::NotAStore {
                path: dir.to_path_buf(),
                reason: reason.into(),
            });
        }
        let text = std::fs::read(&mpath).map_err(|e| StoreError::NotAStore {
            path: dir.to_path_buf(),
            reason: format!("cannot read {MANIFEST}: {e}"),
        })?;
        let bad = |reason: String| StoreError::Manifest {
            path: mpath.clone(),
            reason,
        };
        // Check format and version before the full shape, so an old or foreign manifest
        // gets the version message rather than a missing-field one.
        let head: serde_json::Value =
            serde_json::from_slice(&text).map_err(|e| bad(e.to_string()))?;
        let found = head.get("format").and_then(|v| v.as_str()).unwrap_or("");
        let version = head.get("version").and_then(|v| v.as_u64()).unwrap_or(0) as u32;
        if found != FORMAT_NAME || version != FORMAT_VERSION {
            return Err(StoreError::Version {
                path: mpath.clone(),
                found: found.to_string(),
                version,
            });
        }
        let manifest: Manifest = serde_json::from_value(head).map_err(|e| bad(e.to_string()))?;
        let mut segments = Vec::with_capacity(manifest.dictionary.len());
        for s in &manifest.dictionary {
            let seg = dictionary::Segment::open(&dir.join(&s.file), Some(s.crc32))?;
            if seg.first_id() != s.first_id || seg.count() != s.count {
                return Err(bad(format!("{} does not hold the ids it lists", s.file)));
            }
            segments.push(seg);
        }
        let dictionary = Dictionary::from_segments(segments)?;
        if dictionary.len() != manifest.node_count {
            return Err(bad(format!(
                "node count {} but the dictionary holds {} terms",
                manifest.node_count,
                dictionary.len()
            )));
        }
        let mut graphs = Vec::with_capacity(manifest.graphs.len());
        for (i, g) in manifest.graphs.iter().enumerate() {
            let name = match (&g.name, i) {
                (None, 0) => None,
                (Some(s), i) if i > 0 => {
                    Some(parse_graph_name(s).ok_or_else(|| bad(format!("bad graph name {s}")))?)
                }
                _ => return Err(bad("graph 0 must be the default graph, and only it".into())),
            };
            check_size(dir, &g.nodes_file, g.nodes_bytes)?;
            let mut last = None;
            for p in &g.predicates {
                if last >= Some(p.id) || p.id >= manifest.node_count {
                    return Err(bad(format!(
                        "predicate ids of graph {i} out of order or range"
                    )));
                }
                last = Some(p.id);
                check_size(dir, &p.file, p.bytes)?;
            }
            graphs.push(GraphInfo {
                name,
                id: g.id,
                edges: g.edges,
                nodes: g.nodes,
            });
        }
        let trees = manifest
            .graphs
            .iter()
            .map(|g| g.predicates.iter().map(|_| OnceLock::new()).collect())
            .collect();
        Ok(Store {
            dir: dir.to_path_buf(),
            manifest,
            dictionary,
            graphs,
            trees,
            line_budget: Arc::new(LineBudget::with_default_limit()),
            kept_terms: term_cache::TermCache::new(),
        })
    }

    /// Size of the shared id space: every tree is `node_count × node_count`.
    pub fn node_count(&self) -> u32 {
        self.manifest.node_count
    }

    /// Term ↔ id.
    pub fn dictionary(&self) -> &Dictionary {
        &self.dictionary
    }

    /// [`Dictionary::term`], kept for later calls: a query decodes the same terms at many
    /// rows, and queries after it decode them again (at most 65,536 kept).
    pub fn kept_term(&self, id: u32) -> Option<Term> {
        self.kept_terms.term(id, || self.dictionary.term(id))
    }

    /// [`Dictionary::id`], kept for later calls as [`Store::kept_term`] is.
    pub fn kept_id(&self, term: &Term) -> Option<u32> {
        self.kept_terms
            .id(term, || self.dictionary.id(term.as_ref()))
    }

    /// Graphs; index 0 is the default graph (present even when empty).
    pub fn graphs(&self) -> &[GraphInfo] {
        &self.graphs
    }

    /// The relations of `graph`, sorted by predicate id (empty for an unknown graph).
    pub fn predicates(&self, graph: GraphId) -> &[PredicateInfo] {
        self.manifest
            .graphs
            .get(graph)
            .map_or(&[], |g| g.predicates.as_slice())
    }

    /// The graph named `name` (`None`: the default graph).
    pub fn graph_id(&self, name: Option<&Term>) -> Option<GraphId> {
        self.graphs.iter().position(|g| match (&g.name, name) {
            (None, None) => true,
            (Some(a), Some(b)) => Term::from(a.clone()) == *b,
            _ => false,
        })
    }

    /// The tree of `predicate` (a term id) in `graph`, `None` when the graph has no such
    /// edge. Mapped on first use (checksum verified then) and cached.
    ///
    /// Trees untouched by a later incremental load keep their old side when the padded
    /// side (next power of two) did not change; they are re-labelled here, without a copy,
    /// to `node_count × node_count`, so every returned tree has that shape.
    pub fn relation(
        &self,
        graph: GraphId,
        predicate: u32,
    ) -> Result<Option<Arc<K2Tree>>, StoreError> {
        let g = self
            .manifest
            .graphs
            .get(graph)
            .ok_or(StoreError::NoGraph(graph))?;
        let Ok(i) = g.predicates.binary_search_by_key(&predicate, |p| p.id) else {
            return Ok(None);
        };
        if let Some(t) = self.trees[graph][i].get() {
            return Ok(Some(t.clone()));
        }
        let info = &g.predicates[i];
        let path = self.dir.join(&info.file);
        let err = |reason: String| StoreError::File {
            path: path.clone(),
            reason,
        };
        let mut tree = open_tree(&path)?;
        if tree.nnz() != info.edges {
            return Err(err(format!(
                "{} cells but the manifest lists {} edges",
                tree.nnz(),
                info.edges
            )));
        }
        let n = self.node_count() as u64;
        if tree.rows() != n || tree.cols() != n {
            if tree.rows() > n || tree.height() != height_for(n, n) {
                return Err(err(format!(
                    "tree is {}×{} but the store has {n} nodes",
                    tree.rows(),
                    tree.cols()
                )));
            }
            let levels: Vec<u64> = (0..tree.height()).map(|d| tree.level_nodes(d)).collect();
            // Directory and frontier depend only on the signatures: carry the mapped ones.
            let mut wider = K2Tree::from_parts(n, n, tree.nnz(), &levels, tree.nibbles().clone())
                .map_err(|e| err(e.to_string()))?;
            if tree.has_directory() {
                wider = wider.with_directory(tree.directory().clone());
            }
            if tree.has_frontier() {
                wider = wider.with_frontier(tree.frontier().clone());
            }
            tree = wider;
        }
        tree.set_line_budget(self.line_budget.clone());
        for l in &info.lines {
            tree.set_line_file(l.by_column, self.dir.join(&l.file), info.crc32);
        }
        // Two threads that map the same tree at once keep the first mapping.
        Ok(Some(
            self.trees[graph][i].get_or_init(|| Arc::new(tree)).clone(),
        ))
    }

    /// The host memory budget of the line lists of this store's relations
    /// ([`crate::k2tree::Lines`]; default [`crate::k2tree::DEFAULT_LINE_MEMORY`]).
    pub fn line_budget(&self) -> &Arc<LineBudget> {
        &self.line_budget
    }

    /// The relations mapped so far, with their graph and predicate, by predicate.
    pub fn mapped_relations(&self) -> Vec<(GraphId, u32, Arc<K2Tree>)> {
        let mut v: Vec<_> = self
            .manifest
            .graphs
            .iter()
            .zip(&self.trees)
            .enumerate()
            .flat_map(|(g, (info, trees))| {
                info.predicates
                    .iter()
                    .zip(trees)
                    .filter_map(move |(p, t)| Some((g, p.id, t.get()?.clone())))
            })
            .collect();
        v.sort_by_key(|&(g, p, _)| (g, p));
        v
    }

    /// Ids occurring as subject or object of some edge in `graph`.
    pub fn graph_nodes(&self, graph: GraphId) -> Result<RoaringBitmap, StoreError> {
        let g = self
            .manifest
            .graphs
            .get(graph)
            .ok_or(StoreError::NoGraph(graph))?;
        let path = self.dir.join(&g.nodes_file);
        let err = |reason: String| StoreError::File {
            path: path.clone(),
            reason,
        };
        let bytes = std::fs::read(&path).map_err(|e| err(format!("cannot read: {e}")))?;
        if crc32fast::hash(&bytes) != g.nodes_crc32 {
            return Err(err("checksum mismatch: the file is corrupt".into()));
        }
        RoaringBitmap::deserialize_from(&bytes[..]).map_err(|e| err(e.to_string()))
    }

    /// Opens every tree and bitmap and checks them against the manifest (a full check;
    /// `open` alone only checks sizes).
    pub fn verify(&self) -> Result<(), StoreError> {
        for (g, entry) in self.manifest.graphs.iter().enumerate() {
            self.graph_nodes(g)?;
            for p in &entry.predicates {
                let path = self.dir.join(&p.file);
                let bytes = std::fs::read(&path).map_err(|e| StoreError::File {
                    path: path.clone(),
                    reason: format!("cannot read: {e}"),
                })?;
                if crc32fast::hash(&bytes) != p.crc32 {
                    return Err(StoreError::File {
                        path,
                        reason: "checksum differs from the manifest: the file is corrupt".into(),
                    });
                }
                let tree = self.relation(g, p.id)?.expect("listed in the manifest");
                for l in &p.lines {
                    let path = self.dir.join(&l.file);
                    let all = LineBudget::new(u64::MAX);
                    lines_file::read(&path, l.by_column, &tree, p.crc32, &all).map_err(|e| {
                        StoreError::File {
                            path,
                            reason: format!("line lists: {e}"),
                        }
                    })?;
                }
            }
        }
        for s in self.dictionary.segments() {
            if !s.check_blocks() {
                return Err(StoreError::Manifest {
                    path: self.dir.join(MANIFEST),
                    reason: format!("dictionary segment from id {} is malformed", s.first_id()),
                });
            }
        }
        Ok(())
    }

    /// The manifest as read.
    pub fn manifest(&self) -> &Manifest {
        &self.manifest
    }

    /// The store folder.
    pub fn dir(&self) -> &Path {
        &self.dir
    }
}

fn check_size(dir: &Path, file: &str, bytes: u64) -> Result<(), StoreError> {
    let path = dir.join(file);
    match std::fs::metadata(&path) {
        Ok(m) if m.len() == bytes => Ok(()),
        Ok(m) => Err(StoreError::File {
            path,
            reason: format!(
                "{} bytes but the manifest lists {bytes}: truncated or replaced",
                m.len()
            ),
        }),
        Err(e) => Err(StoreError::File {
            path,
            reason: format!("missing: {e}"),
        }),
    }
}
