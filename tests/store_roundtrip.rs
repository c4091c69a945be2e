//! Round trips: every triple of CoDEx-S, CoDEx-M and WN18RR is found again through the
//! dictionary and `relation(..).contains`, and the stores hold no extra edge.

#[path = "data/mod.rs"]
mod data;

use std::collections::HashSet;
use std::io::Read;
use std::path::{Path, PathBuf};

use k2rpq::store::{load, Input, LoadOptions, Store};
use oxrdf::Triple;

/// `REL` under the shared data folder, else the repository's own `fixtures/` (which
/// bundles CoDEx-M).
fn data(rel: &str) -> Option<PathBuf> {
    let fixture = data::repo_file(&format!("fixtures/{rel}"));
    if fixture.exists() {
        return Some(fixture);
    }
    data::data_file(rel)
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
            "parse_hand_on_seconds",
            "build_seconds",
            "sort_seconds",
            "sort_edges_seconds",
            "sort_terms_seconds",
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

/// N-Triples whose terms stress the term tables: IRIs with a long shared prefix (and one
/// namespace a prefix of another), unicode, literals with datatypes and languages, blank
/// nodes, a named-graph-free mix of all as objects.
fn stress_nt(lines: usize) -> String {
    let mut out = String::new();
    let mut x = 7u64;
    let mut next = move |m: u64| {
        x = x
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (x >> 33) % m
    };
    let ns = "http://www.wikidata.org/entity/";
    for i in 0..lines {
        let s = format!("<{ns}Q{}>", next(5000));
        let p = format!("<http://www.wikidata.org/prop/direct/P{}>", next(40));
        let o = match next(7) {
            0 => format!("<{ns}Q{}>", next(20_000)),
            1 => format!("<{ns}{}>", next(300)),
            2 => format!("\"café {} 😀\"@fr", next(900)),
            3 => format!(
                "\"{}\"^^<http://www.w3.org/2001/XMLSchema#integer>",
                next(900)
            ),
            4 => format!("_:b{}", next(500)),
            5 => format!("\"plain {}\"", next(900)),
            _ => format!("<{ns}Q{}é>", next(100)),
        };
        let s = if i % 11 == 0 {
            format!("_:b{}", next(500))
        } else {
            s
        };
        out.push_str(&format!("{s} {p} {o} .\n"));
    }
    out
}

#[test]
fn store_bytes_do_not_depend_on_thread_count() {
    // Terms are numbered in the parse tasks, which race for the term table's shards:
    // provisional ids differ from run to run, the stored bytes may not. Small chunks make
    // many tasks per group; the plain file is memory-mapped, the `.gz` streamed.
    let dir = tempfile::tempdir().unwrap();
    let text = stress_nt(40_000);
    let nt = dir.path().join("stress.nt");
    std::fs::write(&nt, &text).unwrap();
    let gz = dir.path().join("stress.nt.gz");
    let mut enc = flate2::write::GzEncoder::new(
        std::fs::File::create(&gz).unwrap(),
        flate2::Compression::fast(),
    );
    std::io::Write::write_all(&mut enc, text.as_bytes()).unwrap();
    enc.finish().unwrap();
    let options = LoadOptions {
        chunk_bytes: 8 << 10,
        ..LoadOptions::default()
    };
    let mut contents = Vec::new();
    for (i, (threads, input)) in [(1, &nt), (4, &nt), (3, &gz), (1, &gz)].iter().enumerate() {
        let store = dir.path().join(format!("s{i}"));
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(*threads)
            .build()
            .unwrap();
        let report = pool
            .install(|| load(&[Input::Path((*input).clone())], &store, &options))
            .unwrap();
        assert_eq!(report.statements, 40_000);
        contents.push(store_contents(&store));
    }
    let (f0, m0) = &contents[0];
    for (f, m) in &contents[1..] {
        assert_eq!(
            f0.iter().map(|f| &f.0).collect::<Vec<_>>(),
            f.iter().map(|f| &f.0).collect::<Vec<_>>()
        );
        for (x, y) in f0.iter().zip(f) {
            assert!(x.1 == y.1, "{} differs", x.0);
        }
        // Input names differ between the mapped and the streamed load.
        let strip = |m: &serde_json::Value| {
            let mut m = m.clone();
            for l in m["loads"].as_array_mut().unwrap() {
                l.as_object_mut().unwrap().remove("inputs");
            }
            m
        };
        assert_eq!(strip(m0), strip(m));
    }
    // And the dictionary holds what was read: every term of the input has an id.
    let store = Store::open(&dir.path().join("s1")).unwrap();
    let d = store.dictionary();
    for t in oxttl::NTriplesParser::new().for_slice(text.as_bytes()) {
        let t = t.unwrap();
        let s = d.id(t.subject.as_ref().into()).expect("subject");
        let o = d.id(t.object.as_ref()).expect("object");
        assert_eq!(d.term(s), Some(t.subject.clone().into()));
        assert_eq!(d.term(o), Some(t.object.clone()));
        let p = d.id(t.predicate.as_ref().into()).expect("predicate");
        assert!(store.relation(0, p).unwrap().unwrap().contains(s, o));
    }
}

/// `text` gzip-compressed into `path`.
fn write_gz(path: &Path, text: &str) {
    let mut enc = flate2::write::GzEncoder::new(
        std::fs::File::create(path).unwrap(),
        flate2::Compression::fast(),
    );
    std::io::Write::write_all(&mut enc, text.as_bytes()).unwrap();
    enc.finish().unwrap();
}

/// [`store_contents`] without the names of the inputs.
fn contents_of_any_inputs(dir: &Path) -> (Vec<(String, Vec<u8>)>, serde_json::Value) {
    let (files, mut manifest) = store_contents(dir);
    for l in manifest["loads"].as_array_mut().unwrap() {
        l.as_object_mut().unwrap().remove("inputs");
    }
    (files, manifest)
}

#[test]
fn several_inputs_and_a_folder_of_shards_give_the_single_stream_store() {
    // The stream cut at line breaks into plain and gzip shards, read in parallel, as
    // files and as a folder (with files the loader passes over), in memory and with
    // spilled runs: the same store files, byte for byte, as the one stream.
    let dir = tempfile::tempdir().unwrap();
    let text = stress_nt(30_000);
    let one = dir.path().join("all.nt.gz");
    write_gz(&one, &text);
    let lines: Vec<&str> = text.split_inclusive('\n').collect();
    let shards = dir.path().join("shards");
    std::fs::create_dir(&shards).unwrap();
    let mut files = Vec::new();
    for (k, part) in lines.chunks(7_001).enumerate() {
        let part = part.concat();
        let path = if k % 2 == 0 {
            let p = shards.join(format!("part-{k}.nt.gz"));
            write_gz(&p, &part);
            p
        } else {
            let p = shards.join(format!("part-{k}.nt"));
            std::fs::write(&p, part).unwrap();
            p
        };
        files.push(Input::Path(path));
    }
    assert_eq!(files.len(), 5);
    std::fs::write(shards.join("README.txt"), "not RDF").unwrap();
    std::fs::write(shards.join(".hidden.nt"), "not even N-Triples").unwrap();
    let options = LoadOptions {
        chunk_bytes: 16 << 10,
        ..LoadOptions::default()
    };
    let spilling = LoadOptions {
        memory: 1,
        ..options.clone()
    };
    let expect = dir.path().join("one");
    load(&[Input::Path(one)], &expect, &options).unwrap();
    let expect = contents_of_any_inputs(&expect);
    for (name, inputs, opts) in [
        ("files", files.clone(), &options),
        ("folder", vec![Input::Path(shards.clone())], &options),
        ("spilled", files, &spilling),
    ] {
        let store = dir.path().join(name);
        let report = load(&inputs, &store, opts).unwrap();
        assert_eq!(report.statements, 30_000, "{name}");
        assert_eq!(report.inputs.len(), 5, "{name}: {:?}", report.inputs);
        let got = contents_of_any_inputs(&store);
        assert_eq!(
            got.0.iter().map(|f| &f.0).collect::<Vec<_>>(),
            expect.0.iter().map(|f| &f.0).collect::<Vec<_>>(),
            "{name}"
        );
        for (x, y) in got.0.iter().zip(&expect.0) {
            assert!(x.1 == y.1, "{name}: {} differs", x.0);
        }
        assert_eq!(got.1, expect.1, "{name}");
    }
}

#[test]
fn a_bad_shard_is_named_with_its_line_and_nothing_is_written() {
    let dir = tempfile::tempdir().unwrap();
    let shards = dir.path().join("shards");
    std::fs::create_dir(&shards).unwrap();
    let text = stress_nt(20_000);
    let lines: Vec<&str> = text.split_inclusive('\n').collect();
    for (k, part) in lines.chunks(5_000).enumerate() {
        let mut part = part.concat();
        if k == 2 {
            // Line 4,321 of the third shard loses its closing `>`.
            let mut l: Vec<String> = part.lines().map(|l| format!("{l}\n")).collect();
            l[4320] = "<http://example.org/s> <http://example.org/p> <http://example.org/o .\n"
                .to_string();
            part = l.concat();
        }
        write_gz(&shards.join(format!("part-{k}.nt.gz")), &part);
    }
    let store = dir.path().join("s");
    let err = load(
        &[Input::Path(shards.clone())],
        &store,
        &LoadOptions::default(),
    )
    .unwrap_err()
    .to_string();
    assert!(err.contains("part-2.nt.gz:4321:"), "{err}");
    assert!(!store.exists());
    let left: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(
        left,
        [std::ffi::OsString::from("shards")],
        "nothing half-written"
    );
    // A folder without RDF files is named as such.
    let empty = dir.path().join("empty");
    std::fs::create_dir(&empty).unwrap();
    let err = load(&[Input::Path(empty)], &store, &LoadOptions::default())
        .unwrap_err()
        .to_string();
    assert!(err.contains("is a folder with no RDF files"), "{err}");
}
