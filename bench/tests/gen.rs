//! `k2rpq-bench gen`: a generated dump loads and holds the relations its workload needs.

use std::path::Path;
use std::process::Command;

use k2rpq::store::{load, Input, LoadOptions, Store};
use oxrdf::NamedNode;

#[test]
fn generated_dump_loads() {
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("w.nt.gz");
    let out = Command::new(env!("CARGO_BIN_EXE_k2rpq-bench"))
        .args(["gen", "wikidata-like", "--triples", "20000", "-o"])
        .arg(&f)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
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
