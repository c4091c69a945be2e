//! Round trips: every triple of CoDEx-S, CoDEx-M and WN18RR is found again through the
//! dictionary and `relation(..).contains`, and the stores hold no extra edge.

use std::collections::HashSet;
use std::io::Read;
use std::path::{Path, PathBuf};

use k2rpq::store::{load, Input, LoadOptions, Store};
use oxrdf::Triple;

/// `../shared/data/REL` beside the repository, or under `$K2RPQ_DATA` when set (for
/// checkouts, such as git worktrees, that have no `shared/` beside them).
fn data(rel: &str) -> Option<PathBuf> {
    let root = std::env::var_os("K2RPQ_DATA").map_or_else(
        || Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../shared/data")).to_path_buf(),
        PathBuf::from,
    );
    let p = root.join(rel);
    if p.exists() {
        Some(p)
    } else {
        eprintln!("skipped: data not found at {}", p.display());
        None
    }
}

fn triples(path: &Path) -> Vec<Triple> {
    let mut text = Vec::new();
    flate2::read::MultiGzDecoder::new(std::fs::File::open(path).unwrap())
        .read_to_end(&mut text)
        .unwrap();
    oxttl::NTriplesParser::new()
        .for_slice(&text)
        .collect::<Result<_, _>>()
        .unwrap()
}

fn round_trip(rel: &str, memory: usize) {
    let Some(path) = data(rel) else { return };
    let dir = tempfile::tempdir().unwrap();
    let store_dir = dir.path().join("store");
    let options = LoadOptions {
        memory,
        chunk_bytes: 64 << 10, // many chunks, so the parallel splitter is exercised
        ..LoadOptions::default()
    };
    let report = load(&[Input::Path(path.clone())], &store_dir, &options).unwrap();
    let input = triples(&path);
    assert_eq!(report.statements, input.len() as u64);
    let store = Store::open(&store_dir).unwrap();
    let d = store.dictionary();
    let distinct: HashSet<&Triple> = input.iter().collect();
    for t in &distinct {
        let s = d.id(t.subject.as_ref().into()).expect("subject id");
        let p = d.id(t.predicate.as_ref().into()).expect("predicate id");
        let o = d.id(t.object.as_ref()).expect("object id");
        assert_eq!(d.term(s), Some(t.subject.clone().into()));
        assert_eq!(d.term(o), Some(t.object.clone()));
        let tree = store.relation(0, p).unwrap().expect("predicate has a tree");
        assert_eq!(tree.rows(), store.node_count() as u64);
        assert!(tree.contains(s, o), "{t} missing");
    }
    let edges: u64 = store
        .predicates(0)
        .iter()
        .map(|p| store.relation(0, p.id).unwrap().unwrap().nnz())
        .sum();
    assert_eq!(edges, distinct.len() as u64, "no extra edge");
    assert_eq!(report.distinct_edges, distinct.len() as u64);
    let terms: HashSet<String> = input
        .iter()
        .flat_map(|t| {
            [
                t.subject.to_string(),
                t.predicate.to_string(),
                t.object.to_string(),
            ]
        })
        .collect();
    assert_eq!(
        store.node_count() as usize,
        terms.len(),
        "one id per distinct term"
    );
    let nodes = store.graph_nodes(0).unwrap();
    let ends: HashSet<String> = input
        .iter()
        .flat_map(|t| [t.subject.to_string(), t.object.to_string()])
        .collect();
    assert_eq!(nodes.len() as usize, ends.len());
    store.verify().unwrap();
    assert_eq!(
        std::fs::read_dir(dir.path()).unwrap().count(),
        1,
        "no temporary left"
    );
}

#[test]
fn codex_s_round_trip() {
    round_trip("codex/codex-s.nt.gz", 1 << 30);
}

#[test]
fn codex_s_round_trip_with_spilled_runs() {
    // A tiny budget: sorted runs spill to disk and are merged back.
    round_trip("codex/codex-s.nt.gz", 1);
}

#[test]
fn codex_m_round_trip() {
    round_trip("codex/codex-m.nt.gz", 1 << 30);
}

#[test]
fn wn18rr_round_trip() {
    round_trip("wn18rr/wn18rr.nt.gz", 1 << 30);
}
