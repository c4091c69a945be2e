//! The Oxigraph embedding over a RocksDB-backed store on disk (`--features rocksdb`):
//! the same answers as over an in-memory store, and a change to the store is noticed.
#![cfg(feature = "rocksdb")]

use k2rpq::oxigraph::K2Paths;
use oxigraph::model::{GraphName, NamedNode, Quad};
use oxigraph::sparql::QueryResults;
use oxigraph::store::Store;

fn count(r: QueryResults<'_>) -> usize {
    match r {
        QueryResults::Solutions(s) => s.map(|row| row.expect("solution")).count(),
        _ => panic!("expected solutions"),
    }
}

#[test]
fn rocksdb_store_answers_like_memory() {
    let dir = tempfile::tempdir().unwrap();
    let disk = Store::open(dir.path()).expect("RocksDB store");
    let memory = Store::new().unwrap();
    let n = |s: &str| NamedNode::new(format!("http://e/{s}")).unwrap();
    for (a, b) in [("a", "b"), ("b", "c"), ("c", "d"), ("x", "a")] {
        let q = Quad::new(n(a), n("p"), n(b), GraphName::DefaultGraph);
        disk.insert(&q).unwrap();
        memory.insert(&q).unwrap();
    }
    let paths = K2Paths::cpu();
    let q = "SELECT ?y WHERE { <http://e/a> <http://e/p>+ ?y }";
    assert_eq!(count(paths.evaluate(&disk, q).unwrap()), 3);
    assert_eq!(
        count(paths.evaluate(&disk, q).unwrap()),
        count(K2Paths::cpu().evaluate(&memory, q).unwrap())
    );
    // The store changes: the relations are rebuilt before the next answer.
    disk.insert(&Quad::new(n("d"), n("p"), n("e"), GraphName::DefaultGraph))
        .unwrap();
    assert_eq!(count(paths.evaluate(&disk, q).unwrap()), 4);
}
