//! Round trips: every triple of CoDEx-S, CoDEx-M and WN18RR is found again through the
//! dictionary and `relation(..).contains`, and the stores hold no extra edge.

use std::collections::HashSet;
use std::io::Read;
use std::path::{Path, PathBuf};

use k2rpq::store::{load, Input, LoadOptions, Store};
use oxrdf::Triple;

/// `REL` under `$K2RPQ_DATA` when set (for checkouts, such as git worktrees, with no
/// `shared/` beside them), else `../shared/data/` beside the repository, else the
/// repository's own `fixtures/` (which bundles CoDEx-M).
fn data(rel: &str) -> Option<PathBuf> {
    let here = env!("CARGO_MANIFEST_DIR");
    let mut roots: Vec<PathBuf> = std::env::var_os("K2RPQ_DATA")
        .map(PathBuf::from)
        .into_iter()
        .collect();
    roots.push(Path::new(here).join("../shared/data"));
    roots.push(Path::new(here).join("fixtures"));
    let found = roots.iter().map(|r| r.join(rel)).find(|p| p.exists());
    if found.is_none() {
        eprintln!("skipped: {rel} not found under {roots:?}");
    }
    found
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

/// Every file of the store at `dir` except the manifest, and the manifest without the
/// load's timings and memory figures.
fn store_contents(dir: &Path) -> (Vec<(String, Vec<u8>)>, serde_json::Value) {
    let mut files: Vec<(String, Vec<u8>)> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap())
        .filter(|e| e.file_name() != "manifest.json")
        .map(|e| {
            (
                e.file_name().to_string_lossy().into_owned(),
                std::fs::read(e.path()).unwrap(),
            )
        })
        .collect();
    files.sort();
    let mut manifest: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.join("manifest.json")).unwrap()).unwrap();
    for l in manifest["loads"].as_array_mut().unwrap() {
        let l = l.as_object_mut().unwrap();
        for k in [
            "parse_seconds",
            "parse_read_seconds",
            "parse_chunks_seconds",
            "parse_wait_seconds",
            "number_seconds",
            "build_seconds",
            "sort_seconds",
            "dictionary_seconds",
            "trees_seconds",
            "total_seconds",
            "peak_rss_bytes",
            "runs_spilled",
        ] {
            l.remove(k);
        }
    }
    (files, manifest)
}

#[test]
fn store_bytes_do_not_depend_on_memory_budget_or_chunk_size() {
    // One load with everything in memory (one wave of trees, few batches) and one with a
    // budget of one record (sorted runs spilled and read back per relation, each tree in
    // a wave of its own) and 16 KiB chunks (many groups of batches numbered together):
    // the same files, byte for byte.
    let Some(path) = data("codex/codex-m.nt.gz") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let (a, b) = (dir.path().join("a"), dir.path().join("b"));
    load(&[Input::Path(path.clone())], &a, &LoadOptions::default()).unwrap();
    let small = LoadOptions {
        memory: 1,
        chunk_bytes: 16 << 10,
        ..LoadOptions::default()
    };
    let report = load(&[Input::Path(path)], &b, &small).unwrap();
    assert!(report.runs_spilled >= 2, "{} runs", report.runs_spilled);
    let (fa, ma) = store_contents(&a);
    let (fb, mb) = store_contents(&b);
    assert_eq!(
        fa.iter().map(|f| &f.0).collect::<Vec<_>>(),
        fb.iter().map(|f| &f.0).collect::<Vec<_>>()
    );
    for (x, y) in fa.iter().zip(&fb) {
        assert!(x.1 == y.1, "{} differs", x.0);
    }
    assert_eq!(ma, mb);
}
