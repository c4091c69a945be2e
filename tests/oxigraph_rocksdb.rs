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

/// The queries compared after each kill.
const PATH_QUERIES: &[&str] = &[
    "SELECT ?x ?y WHERE { ?x <http://e/p>+ ?y }",
    "SELECT ?x ?y WHERE { ?x <http://e/p>* ?y }",
    "SELECT ?x ?y WHERE { ?x (<http://e/p>|<http://e/q>)+ ?y }",
    "SELECT ?x ?y WHERE { ?x <http://e/p>/^<http://e/q> ?y }",
    "SELECT ?g ?x ?y WHERE { GRAPH ?g { ?x <http://e/q>+ ?y } }",
];

/// The environment variable that makes [`writer_process`] write.
const WRITER: &str = "K2RPQ_EMBEDDING_WRITER";

/// A writer in a loop on the `K2Store` in `$K2RPQ_EMBEDDING_WRITER`: the process
/// [`killed_writers_leave_consistent_relations`] starts and kills.
#[test]
#[ignore = "the child process of killed_writers_leave_consistent_relations"]
fn writer_process() {
    use rand::{Rng, SeedableRng};
    let dir = std::env::var_os(WRITER).expect("K2RPQ_EMBEDDING_WRITER names the store");
    let store = k2rpq::oxigraph::K2Store::open(std::path::Path::new(&dir)).expect("open");
    let mut rng = rand::rngs::StdRng::seed_from_u64(std::process::id() as u64);
    let n = |rng: &mut rand::rngs::StdRng| {
        NamedNode::new(format!("http://e/n{}", rng.random_range(0..40))).unwrap()
    };
    for i in 0u64.. {
        let p = NamedNode::new(["http://e/p", "http://e/q"][rng.random_range(0..2)]).unwrap();
        let g = if rng.random_ratio(1, 4) {
            GraphName::NamedNode(NamedNode::new("http://e/g").unwrap())
        } else {
            GraphName::DefaultGraph
        };
        let q = Quad::new(n(&mut rng), p, n(&mut rng), g);
        match rng.random_range(0..10) {
            0..6 => {
                store.insert(&q).unwrap();
            }
            6..9 => {
                store.remove(&q).unwrap();
            }
            _ => store
                .update(&format!(
                    "DELETE {{ {} ?p ?o }} INSERT {{ ?o ?p {} }} WHERE {{ {} ?p ?o }}",
                    q.subject, q.subject, q.subject
                ))
                .unwrap(),
        }
        if i % 97 == 0 {
            store.checkpoint().unwrap();
        }
    }
}

#[test]
fn killed_writers_leave_consistent_relations() {
    use rand::Rng;
    let dir = tempfile::tempdir().unwrap();
    let mut rng = rand::rng();
    for round in 0..8 {
        let mut child = std::process::Command::new(std::env::current_exe().unwrap())
            .args([
                "--exact",
                "writer_process",
                "--ignored",
                "--nocapture",
                "--test-threads=1",
            ])
            .env(WRITER, dir.path())
            .stdout(std::process::Stdio::null())
            .spawn()
            .expect("writer");
        std::thread::sleep(std::time::Duration::from_millis(
            rng.random_range(300..2_000),
        ));
        // Still writing when killed: a writer that failed would make the check vacuous.
        assert!(
            child.try_wait().unwrap().is_none(),
            "round {round}: the writer stopped"
        );
        child.kill().unwrap(); // SIGKILL
        child.wait().unwrap();
        let store = k2rpq::oxigraph::K2Store::open(dir.path()).expect("reopen");
        let oxigraph = store.oxigraph().clone();
        assert_eq!(store.len(), oxigraph.len().unwrap() as u64, "round {round}");
        for q in PATH_QUERIES {
            let ours = multiset_of(store.query(q).unwrap());
            let theirs = multiset_of(
                oxigraph::sparql::SparqlEvaluator::new()
                    .parse_query(q)
                    .unwrap()
                    .on_store(&oxigraph)
                    .execute()
                    .unwrap(),
            );
            assert_eq!(ours, theirs, "round {round}: {q}");
        }
        assert!(store.len() > 0, "round {round}: nothing was written");
    }
}

fn multiset_of(r: QueryResults<'_>) -> Vec<String> {
    let QueryResults::Solutions(s) = r else {
        panic!("expected solutions")
    };
    let mut rows: Vec<String> = s
        .map(|row| {
            let row = row.unwrap();
            let mut cells: Vec<String> = row.iter().map(|(v, t)| format!("{v}={t}")).collect();
            cells.sort();
            cells.join(" ")
        })
        .collect();
    rows.sort();
    rows
}
