//! The inputs of `k2rpq bench-spmv`: edge-list files and synthetic graphs (through
//! [`crate::input`] and [`crate::gen`]), BVGraph files through the
//! `webgraph` crate (cargo feature `webgraph`), and trees already built (a predicate of
//! a store).

use std::path::{Path, PathBuf};
use std::sync::Arc;

use indicatif::ProgressBar;

use crate::build::{Source, Synthetic};
use crate::gen::{Rmat, Web};
use crate::input::{read_edges, EdgeList, InputError};
use k2rpq::k2tree::{morton, K2Tree};

/// Where the benchmark's matrix comes from.
#[derive(Clone, Debug)]
pub enum SpmvInput {
    /// An edge-list file or a synthetic generator.
    Source(Source),
    /// A BVGraph (WebGraph) `BASENAME.graph` + `BASENAME.properties`, read sequentially.
    BvGraph(PathBuf),
    /// A tree already built (for instance a predicate of a store).
    Tree {
        /// Name for reports.
        name: String,
        /// The tree.
        tree: Arc<K2Tree>,
    },
}

/// Errors loading an input.
#[derive(Debug, thiserror::Error)]
pub enum GraphError {
    /// An edge-list file could not be read.
    #[error(transparent)]
    Input(#[from] InputError),
    /// `--copies` of a tree (only edge lists and generators can be copied), or copies whose
    /// side would not fit 32-bit ids.
    #[error("{name}: {reason}")]
    Copies {
        /// The input.
        name: String,
        /// What is wrong.
        reason: String,
    },
    /// A BVGraph could not be read.
    #[error("BVGraph {path}: {reason}")]
    BvGraph {
        /// The basename.
        path: PathBuf,
        /// What went wrong.
        reason: String,
    },
}

/// A graph ready for [`super::prepare`]: its cells as Morton codes, or its tree.
#[derive(Clone, Debug)]
pub struct LoadedGraph {
    /// Name for reports.
    pub name: String,
    /// Matrix rows.
    pub rows: u64,
    /// Matrix columns.
    pub cols: u64,
    /// Edges read or generated (duplicates included).
    pub input_edges: u64,
    /// The tree, when the input was one.
    pub tree: Option<Arc<K2Tree>>,
    /// The cells, when the input was an edge list.
    pub codes: Option<Vec<u64>>,
}

impl LoadedGraph {
    /// From `(row, col)` pairs (tests and small callers).
    pub fn from_edges(name: &str, rows: u64, cols: u64, edges: &[(u32, u32)]) -> Self {
        LoadedGraph {
            name: name.into(),
            rows,
            cols,
            input_edges: edges.len() as u64,
            tree: None,
            codes: Some(edges.iter().map(|&(r, c)| morton::encode(r, c)).collect()),
        }
    }
}

impl LoadedGraph {
    /// The graph as `copies` copies of itself along the diagonal
    /// ([`EdgeList::diagonal_copies`]), named `NAME x COPIES`; one copy is the graph itself.
    pub fn diagonal_copies(self, copies: u32) -> Result<LoadedGraph, GraphError> {
        if copies <= 1 {
            return Ok(self);
        }
        let LoadedGraph {
            name,
            rows,
            cols,
            input_edges,
            codes,
            ..
        } = self;
        let fail = |reason: String| GraphError::Copies {
            name: name.clone(),
            reason,
        };
        let Some(codes) = codes else {
            return Err(fail(
                "copies need an edge list or a generator, not a built tree".into(),
            ));
        };
        let copied = EdgeList { rows, cols, codes }
            .diagonal_copies(copies)
            .map_err(|e| fail(e.to_string()))?;
        Ok(LoadedGraph {
            name: format!("{name} x {copies}"),
            rows: copied.rows,
            cols: copied.cols,
            input_edges: input_edges * copies as u64,
            tree: None,
            codes: Some(copied.codes),
        })
    }
}

/// Reads or generates the input.
pub fn load(input: &SpmvInput, progress: Option<&ProgressBar>) -> Result<LoadedGraph, GraphError> {
    match input {
        SpmvInput::Source(src @ Source::File { path, format }) => {
            let e = read_edges(path, *format, progress)?;
            Ok(LoadedGraph {
                name: src.name(),
                rows: e.rows,
                cols: e.cols,
                input_edges: e.codes.len() as u64,
                tree: None,
                codes: Some(e.codes),
            })
        }
        SpmvInput::Source(src @ Source::Synthetic { kind, edges, seed }) => {
            let g = match kind {
                Synthetic::Rmat => Rmat::graph500(*edges, *seed).generate(),
                Synthetic::Web => Web::like_cnr(*edges, *seed).generate(),
            };
            Ok(LoadedGraph {
                name: src.name(),
                rows: g.nodes,
                cols: g.nodes,
                input_edges: g.codes.len() as u64,
                tree: None,
                codes: Some(g.codes),
            })
        }
        SpmvInput::BvGraph(base) => {
            let (nodes, codes) = read_bvgraph(base)?;
            Ok(LoadedGraph {
                name: base.file_name().map_or_else(
                    || base.display().to_string(),
                    |n| n.to_string_lossy().into(),
                ),
                rows: nodes,
                cols: nodes,
                input_edges: codes.len() as u64,
                tree: None,
                codes: Some(codes),
            })
        }
        SpmvInput::Tree { name, tree } => Ok(LoadedGraph {
            name: name.clone(),
            rows: tree.rows(),
            cols: tree.cols(),
            input_edges: tree.nnz(),
            tree: Some(tree.clone()),
            codes: None,
        }),
    }
}

/// Reads a big-endian BVGraph sequentially (only `.graph` and `.properties` are needed,
/// so no `.ef` offsets index has to be built): `(nodes, Morton codes of the arcs)`.
#[cfg(feature = "webgraph")]
pub fn read_bvgraph(basename: &Path) -> Result<(u64, Vec<u64>), GraphError> {
    use lender::Lender;
    use webgraph::prelude::*;
    let err = |reason: String| GraphError::BvGraph {
        path: basename.to_path_buf(),
        reason,
    };
    // Big-endian, the default (and what the Java WebGraph writes).
    let graph = BvGraphSeq::with_basename(basename)
        .load()
        .map_err(|e| err(format!("{e:#}")))?;
    let nodes = graph.num_nodes() as u64;
    if nodes > u32::MAX as u64 + 1 {
        return Err(err(format!("{nodes} nodes do not fit 32-bit ids")));
    }
    let mut codes = Vec::with_capacity(graph.num_arcs_hint().unwrap_or(0) as usize);
    let mut iter = graph.iter();
    while let Some((src, succ)) = iter.next() {
        for dst in succ {
            codes.push(morton::encode(src as u32, dst as u32));
        }
    }
    Ok((nodes, codes))
}

/// Without the `webgraph` feature a BVGraph input is a clear error.
#[cfg(not(feature = "webgraph"))]
pub fn read_bvgraph(basename: &Path) -> Result<(u64, Vec<u64>), GraphError> {
    Err(GraphError::BvGraph {
        path: basename.to_path_buf(),
        reason: "this build has no BVGraph reader: rebuild with `--features webgraph`".into(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::input::InputFormat;

    #[test]
    fn loads_tsv_and_tree_inputs() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("g.tsv");
        std::fs::write(&path, "0\t1\n2\t0\n# comment\n2\t0\n").unwrap();
        let g = load(
            &SpmvInput::Source(Source::File {
                path,
                format: InputFormat::Tsv,
            }),
            None,
        )
        .unwrap();
        assert_eq!((g.rows, g.cols, g.input_edges), (3, 3, 3));
        let tree = Arc::new(K2Tree::from_edges(3, 3, vec![(0, 1), (2, 0)]));
        let t = load(
            &SpmvInput::Tree {
                name: "p".into(),
                tree,
            },
            None,
        )
        .unwrap();
        assert_eq!((t.rows, t.input_edges), (3, 2));
        assert!(t.codes.is_none());
        let err = t.diagonal_copies(2).unwrap_err().to_string();
        assert!(err.contains("not a built tree"), "{err}");
        let g2 = g.diagonal_copies(2).unwrap();
        assert_eq!((g2.rows, g2.cols, g2.input_edges), (6, 6, 6));
        assert!(g2.name.ends_with(" x 2"), "{}", g2.name);
    }

    #[test]
    fn generates_synthetic_inputs() {
        for kind in [Synthetic::Rmat, Synthetic::Web] {
            let g = load(
                &SpmvInput::Source(Source::Synthetic {
                    kind,
                    edges: 5000,
                    seed: 1,
                }),
                None,
            )
            .unwrap();
            assert_eq!(g.input_edges, 5000);
            assert!(g.rows > 0 && g.rows == g.cols);
        }
    }

    /// `shared/` beside the repository (as in CI), or `$K2RPQ_SHARED` when set.
    fn cnr() -> Option<PathBuf> {
        let shared = std::env::var_os("K2RPQ_SHARED")
            .map(PathBuf::from)
            .unwrap_or_else(|| PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../../shared")));
        let base = shared.join("data/cnr-2000/cnr-2000");
        if base.with_extension("graph").exists() {
            Some(base)
        } else {
            println!("skipped: data not found ({})", base.display());
            None
        }
    }

    #[cfg(feature = "webgraph")]
    #[test]
    fn bvgraph_cnr_2000_matches_its_tsv() {
        let Some(base) = cnr() else { return };
        let (nodes, mut codes) = read_bvgraph(&base).unwrap();
        assert_eq!((nodes, codes.len()), (325_557, 3_216_152));
        let tsv = read_edges(&base.with_extension("arcs.tsv.gz"), InputFormat::Tsv, None).unwrap();
        let mut want = tsv.codes;
        codes.sort_unstable();
        want.sort_unstable();
        assert!(codes == want, "BVGraph and TSV arcs differ");
    }

    #[cfg(not(feature = "webgraph"))]
    #[test]
    fn bvgraph_without_feature_is_a_clear_error() {
        let base = cnr().unwrap_or_else(|| PathBuf::from("cnr-2000"));
        let e = load(&SpmvInput::BvGraph(base), None).unwrap_err();
        assert!(e.to_string().contains("--features webgraph"), "{e}");
    }
}
