//! `k2rpq-bench gen`: a generated dump loads and holds the relations its workload needs.

use std::path::Path;
use std::process::Command;

use k2rpq::store::{load, Input, LoadOptions, Store};
use oxrdf::NamedNode;

/// Runs `k2rpq-bench gen wikidata-like ARGS` in `dir`, which must succeed.
fn run_gen(dir: &Path, args: &[&str]) {
    let out = Command::new(env!("CARGO_BIN_EXE_k2rpq-bench"))
        .args(["gen", "wikidata-like"])
        .args(args)
        .current_dir(dir)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn generated_dump_loads() {
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("w.nt.gz");
    run_gen(dir.path(), &["--triples", "20000", "-o", "w.nt.gz"]);
    let report = load(
        &[Input::Path(f)],
        &dir.path().join("s"),
        &LoadOptions::default(),
    )
    .unwrap();
    assert_eq!(report.statements, 20000);
    let store = Store::open(Path::new(&dir.path().join("s"))).unwrap();
    let p279 = NamedNode::new_unchecked("http://www.wikidata.org/prop/direct/P279");
    let id = store.dictionary().id(p279.as_ref().into()).unwrap();
    assert!(store.relation(0, id).unwrap().unwrap().nnz() > 0);
}

/// `gen wikidata-like --shards N` writes gzip shards whose concatenation, in name order,
/// is the single file's text, byte for byte; more shards than generator chunks give one
/// shard a chunk.
#[test]
fn shards_concatenate_to_the_single_stream() {
    use std::io::Read;
    let dir = tempfile::tempdir().unwrap();
    let gen = |args: &[&str]| run_gen(dir.path(), &[&["--triples", "600000"], args].concat());
    gen(&["-o", "one.nt"]);
    let one = std::fs::read(dir.path().join("one.nt")).unwrap();
    for (shards, expect) in [("2", 2), ("9", 3)] {
        let folder = format!("shards-{shards}");
        gen(&["-o", &folder, "--shards", shards]);
        let mut names: Vec<_> = std::fs::read_dir(dir.path().join(&folder))
            .unwrap()
            .map(|e| e.unwrap().path())
            .collect();
        names.sort();
        assert_eq!(names.len(), expect, "{names:?}");
        let mut text = Vec::new();
        for name in &names {
            assert!(name.to_string_lossy().ends_with(".nt.gz"), "{name:?}");
            flate2::read::MultiGzDecoder::new(std::fs::File::open(name).unwrap())
                .read_to_end(&mut text)
                .unwrap();
        }
        assert!(text == one, "{shards} shards differ from the single stream");
    }
}
