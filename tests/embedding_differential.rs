//! The live embedding against Oxigraph's own answers: random interleaved inserts,
//! deletes, SPARQL updates and path queries through a [`K2Store`], each query's answer
//! (paths by k2rpq over base trees and deltas) compared with Oxigraph's evaluation of
//! the same query on the same store, as multisets of rows.
//!
//! The queries avoid Oxigraph 0.5.13's two known deviations from SPARQL 1.1
//! (`docs/SEMANTICS.md`): no alternative outside a closure (Oxigraph deduplicates it) and
//! no zero-length path from a constant (Oxigraph drops constants absent from the graph).

mod answers;

use answers::{multiset, oxigraph_answer, Multiset};
use k2rpq::oxigraph::{InjectedFailure, K2Store};
use oxigraph::model::{BlankNode, GraphName, Literal, NamedNode, NamedOrBlankNode, Quad, Term};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

const NODES: usize = 14;

fn iri(s: &str) -> NamedNode {
    NamedNode::new(format!("http://e/{s}")).unwrap()
}

/// A random quad; with `blanks`, some of its nodes are blank nodes (not for SPARQL
/// updates, where a blank node is fresh in `INSERT DATA` and a variable in a pattern).
fn random_quad(rng: &mut StdRng, blanks: bool) -> Quad {
    let node = |rng: &mut StdRng| iri(&format!("n{}", rng.random_range(0..NODES)));
    let p = ["p", "q", "r"][rng.random_range(0..3)];
    // Blank nodes too: the embedding tells a quad without literals present from its
    // own relations, and Oxigraph identifies blank nodes by label as it does IRIs.
    let blank = |rng: &mut StdRng| BlankNode::new(format!("b{}", rng.random_range(0..4))).unwrap();
    let object: Term = match rng.random_range(0..12) {
        0 => Literal::from(rng.random_range(0..3) as i64).into(),
        1 if blanks => blank(rng).into(),
        _ => node(rng).into(),
    };
    let subject: NamedOrBlankNode = if blanks && rng.random_ratio(1, 12) {
        blank(rng).into()
    } else {
        node(rng).into()
    };
    let graph = if rng.random_ratio(1, 4) {
        GraphName::NamedNode(iri(["g1", "g2"][rng.random_range(0..2)]))
    } else {
        GraphName::DefaultGraph
    };
    Quad::new(subject, iri(p), object, graph)
}

const QUERIES: &[&str] = &[
    "SELECT ?x ?y WHERE { ?x <http://e/p>+ ?y }",
    "SELECT ?x ?y WHERE { ?x <http://e/p>* ?y }",
    "SELECT ?y WHERE { <http://e/n0> <http://e/p>+ ?y }",
    "SELECT ?x WHERE { ?x <http://e/q>+ <http://e/n1> }",
    "SELECT ?x ?y WHERE { ?x <http://e/p>/<http://e/q> ?y }",
    "SELECT ?x ?y WHERE { ?x ^<http://e/r> ?y }",
    "SELECT ?x ?y WHERE { ?x (<http://e/p>|<http://e/q>)+ ?y }",
    "SELECT ?x ?y WHERE { ?x <http://e/p>? ?y }",
    "SELECT ?x ?y WHERE { ?x !(<http://e/p>|<http://e/q>) ?y }",
    "SELECT ?x ?y WHERE { ?x (<http://e/p>/^<http://e/q>)* ?y }",
    "SELECT ?g ?x ?y WHERE { GRAPH ?g { ?x <http://e/p>+ ?y } }",
    "SELECT ?x ?y WHERE { GRAPH <http://e/g1> { ?x <http://e/q>* ?y } }",
    "SELECT ?x ?z WHERE { ?x <http://e/p> ?y . ?y <http://e/r>+ ?z }",
    "SELECT (COUNT(*) AS ?c) WHERE { ?x <http://e/p>+/<http://e/q> ?y }",
    "ASK { <http://e/n2> (<http://e/p>|<http://e/r>)+ <http://e/n3> }",
];

fn k2_answer(store: &K2Store, query: &str) -> Multiset {
    answers::named_multiset(
        store
            .query(query)
            .unwrap_or_else(|e| panic!("{query}: {e}")),
    )
}

/// Every query's answer from `store` equals Oxigraph's on the store's own Oxigraph store;
/// `what` names the moment in a failure.
fn same_answers(store: &K2Store, what: &str) {
    for q in QUERIES {
        assert_eq!(
            k2_answer(store, q),
            oxigraph_answer(store.oxigraph(), q),
            "{what}: {q}"
        );
    }
}

#[test]
fn random_writes_and_path_queries_match_oxigraph() {
    let mut rng = StdRng::seed_from_u64(0x6b32_7270);
    // A small merge threshold, so background merges run (and race queries) often.
    let store = K2Store::new().unwrap().with_merge_threshold(16);
    let mut present: Vec<Quad> = Vec::new();
    let mut queries = 0;
    for step in 0..10_000 {
        match rng.random_range(0..100) {
            0..40 => {
                let q = random_quad(&mut rng, true);
                let was = store.contains(&q).unwrap();
                assert_eq!(store.insert(&q).unwrap(), !was, "step {step}: insert {q}");
                if !was {
                    present.push(q);
                }
            }
            40..62 => {
                let q = if !present.is_empty() && rng.random_ratio(4, 5) {
                    present.swap_remove(rng.random_range(0..present.len()))
                } else {
                    random_quad(&mut rng, true)
                };
                let was = store.contains(&q).unwrap();
                assert_eq!(store.remove(&q).unwrap(), was, "step {step}: remove {q}");
                present.retain(|p| p != &q);
            }
            62..67 => {
                let a = random_quad(&mut rng, false);
                let b = random_quad(&mut rng, false);
                let update = match rng.random_range(0..5) {
                    0 => format!("INSERT DATA {{ {} . {} }}", as_data(&a), as_data(&b)),
                    1 => format!("DELETE DATA {{ {} }}", as_data(&a)),
                    2 => format!(
                        "DELETE {{ ?x {} ?y }} INSERT {{ ?y {} ?x }} WHERE {{ ?x {} ?y }}",
                        a.predicate, b.predicate, a.predicate
                    ),
                    3 => format!("DELETE WHERE {{ {} ?p ?o }}", a.subject),
                    _ => "CLEAR SILENT GRAPH <http://e/g2>".to_owned(),
                };
                store
                    .update(&update)
                    .unwrap_or_else(|e| panic!("{update}: {e}"));
                present = store.oxigraph().iter().map(|q| q.unwrap()).collect();
            }
            _ => {
                let q = QUERIES[rng.random_range(0..QUERIES.len())];
                assert_eq!(
                    k2_answer(&store, q),
                    oxigraph_answer(store.oxigraph(), q),
                    "step {step}: {q}"
                );
                queries += 1;
            }
        }
        assert_eq!(store.len(), present.len() as u64, "step {step}");
    }
    assert!(queries > 2_000);
    store.wait_for_merges();
    same_answers(&store, "step 10000");
}

fn as_data(q: &Quad) -> String {
    match &q.graph_name {
        GraphName::DefaultGraph => format!("{} {} {}", q.subject, q.predicate, q.object),
        g => format!("GRAPH {g} {{ {} {} {} }}", q.subject, q.predicate, q.object),
    }
}

#[test]
fn sparql_update_operations_give_exact_changes() {
    let store = K2Store::new().unwrap();
    let run = |u: &str| store.update(u).unwrap_or_else(|e| panic!("{u}: {e}"));
    run("PREFIX : <http://e/> INSERT DATA { :a :p :b . :b :p :c . GRAPH :g { :c :p :d } }");
    run("PREFIX : <http://e/> INSERT { ?y :p ?x } WHERE { ?x :p ?y }");
    run("PREFIX : <http://e/> COPY DEFAULT TO :h");
    run("PREFIX : <http://e/> ADD :g TO :h");
    run("PREFIX : <http://e/> MOVE :h TO :k");
    run("PREFIX : <http://e/> WITH :k DELETE { ?x :p ?y } WHERE { ?x :p ?y FILTER(?x = :a) }");
    run("PREFIX : <http://e/> CREATE GRAPH :empty");
    run("PREFIX : <http://e/> INSERT { GRAPH :k { _:n :p ?x } } WHERE { :a :p ?x }");
    same_answers(&store, "step 0");
    let q = "SELECT ?g ?x ?y WHERE { GRAPH ?g { ?x <http://e/p>+ ?y } }";
    assert!(!multiset(store.query(q).unwrap()).is_empty());
    run("PREFIX : <http://e/> DROP GRAPH :k");
    run("DROP NAMED");
    same_answers(&store, "step 1");
    assert_eq!(store.len(), 4);
    run("CLEAR ALL");
    assert!(store.is_empty());
    same_answers(&store, "step 2");
    // Errors Oxigraph would give, and no change on either side.
    run("INSERT DATA { <http://e/a> <http://e/p> <http://e/b> . GRAPH <http://e/g> { <http://e/a> <http://e/p> <http://e/b> } }");
    let before = store.stats();
    for bad in [
        "CREATE GRAPH <http://e/g>",
        "INSERT DATA { <http://e/z> <http://e/p> <http://e/a> } ; DROP GRAPH <http://e/none>",
        "LOAD <http://e/doc.ttl>",
    ] {
        assert!(store.update(bad).is_err(), "{bad}");
        assert_eq!(store.stats(), before, "{bad}");
        same_answers(&store, "step 3");
    }
    run("CLEAR SILENT GRAPH <http://e/none>");
    assert_eq!(store.stats().quads, before.quads);
}

#[test]
fn a_failure_on_either_side_changes_neither() {
    let store = K2Store::new().unwrap();
    let quad = |s: &str, o: &str| Quad::new(iri(s), iri("p"), iri(o), GraphName::DefaultGraph);
    store.insert(&quad("a", "b")).unwrap();
    let q = "SELECT ?x ?y WHERE { ?x <http://e/p>+ ?y }";
    for side in [InjectedFailure::Relations, InjectedFailure::Commit] {
        store.inject_failure(side);
        assert!(store.insert(&quad("b", "c")).is_err(), "{side:?}");
        assert!(!store.contains(&quad("b", "c")).unwrap(), "{side:?}");
        assert_eq!(store.len(), 1);
        assert_eq!(k2_answer(&store, q), oxigraph_answer(store.oxigraph(), q));
        store.inject_failure(side);
        assert!(store.update("DELETE WHERE { ?s ?p ?o }").is_err());
        assert_eq!(store.len(), 1);
        assert_eq!(k2_answer(&store, q), oxigraph_answer(store.oxigraph(), q));
    }
    // A write Oxigraph rejects (a bad update) leaves the relations as they were.
    assert!(store.update("INSERT DATA { <a> <p> }").is_err());
    store
        .transaction(|t| {
            t.insert(&quad("c", "d"))?;
            Err::<(), _>(k2rpq::oxigraph::OxigraphError::Relations(
                "abandoned".into(),
            ))
        })
        .unwrap_err();
    assert!(!store.contains(&quad("c", "d")).unwrap());
    assert_eq!(k2_answer(&store, q), oxigraph_answer(store.oxigraph(), q));
    // Writes that bypass the wrapper are declared with rebuild().
    store.oxigraph().insert(&quad("b", "c")).unwrap();
    store.rebuild().unwrap();
    assert_eq!(k2_answer(&store, q), oxigraph_answer(store.oxigraph(), q));
    assert_eq!(store.len(), 2);
}

#[test]
fn background_merge_swaps_trees_under_running_queries() {
    let store = K2Store::new().unwrap().with_merge_threshold(64);
    let q = "SELECT (COUNT(*) AS ?c) WHERE { ?x <http://e/p>+ ?y }";
    std::thread::scope(|scope| {
        let reader = scope.spawn(|| {
            for _ in 0..200 {
                // Every answer is a count some version of the store gives: the chain's
                // closure over k edges has k(k+1)/2 pairs.
                let m = k2_answer(&store, q);
                let c: u64 = m
                    .keys()
                    .next()
                    .and_then(|k| k.split('"').nth(1))
                    .and_then(|c| c.parse().ok())
                    .unwrap_or(0);
                let k = ((((8 * c + 1) as f64).sqrt() - 1.0) / 2.0).round() as u64;
                assert_eq!(k * (k + 1) / 2, c, "a count of no version: {c}");
            }
        });
        for i in 0..400 {
            store
                .insert(&Quad::new(
                    iri(&format!("c{i}")),
                    iri("p"),
                    iri(&format!("c{}", i + 1)),
                    GraphName::DefaultGraph,
                ))
                .unwrap();
        }
        reader.join().unwrap();
    });
    store.wait_for_merges();
    let _ = store.query(q).unwrap();
    assert_eq!(k2_answer(&store, q), oxigraph_answer(store.oxigraph(), q));
}

/// A temporary folder for the relations, an in-memory Oxigraph store, and a way to open
/// a `K2Store` over both (again and again, as after a restart).
struct OnDisk {
    _dir: tempfile::TempDir,
    folder: std::path::PathBuf,
    oxigraph: oxigraph::store::Store,
}

impl OnDisk {
    fn new() -> Self {
        let dir = tempfile::tempdir().unwrap();
        OnDisk {
            folder: dir.path().join("relations"),
            _dir: dir,
            oxigraph: oxigraph::store::Store::new().unwrap(),
        }
    }

    fn open(&self) -> Result<K2Store, k2rpq::oxigraph::OxigraphError> {
        K2Store::open_with(
            self.oxigraph.clone(),
            &self.folder,
            k2rpq::engine::cpu::CpuEngine::new(),
        )
    }
}

#[test]
fn the_log_recovers_the_relations_exactly() {
    let disk = OnDisk::new();
    let (folder, oxigraph) = (&disk.folder, &disk.oxigraph);
    let open = || disk.open().unwrap();
    let mut rng = StdRng::seed_from_u64(7);
    for round in 0..6 {
        let store = open();
        same_answers(&store, &format!("reopened, round {round}"));
        assert_eq!(store.len(), oxigraph.len().unwrap() as u64, "round {round}");
        for _ in 0..60 {
            let q = random_quad(&mut rng, true);
            if rng.random_ratio(2, 3) {
                store.insert(&q).unwrap();
            } else {
                let existing: Vec<Quad> = oxigraph.iter().map(|q| q.unwrap()).collect();
                if !existing.is_empty() {
                    store
                        .remove(&existing[rng.random_range(0..existing.len())])
                        .unwrap();
                }
            }
        }
        store
            .update("DELETE { ?x <http://e/p> ?y } INSERT { ?y <http://e/fresh> ?x } WHERE { ?x <http://e/p> ?y FILTER(isIRI(?y)) }")
            .unwrap();
        // A failed commit is logged as aborted; a crash after the fsync leaves a
        // record Oxigraph never committed, which the next open drops.
        store.inject_failure(InjectedFailure::Commit);
        let new_term = Quad::new(
            iri(&format!("new{round}")),
            iri("p"),
            iri("n0"),
            GraphName::DefaultGraph,
        );
        assert!(store.insert(&new_term).is_err());
        store.insert(&random_quad(&mut rng, true)).unwrap();
        match round % 3 {
            0 => {
                store.inject_failure(InjectedFailure::CrashAfterLog);
                assert!(store.insert(&random_quad(&mut rng, true)).is_err());
                assert!(store.insert(&random_quad(&mut rng, true)).is_err());
            }
            1 => store.checkpoint().unwrap(),
            _ => {}
        }
        same_answers(&store, &format!("before closing, round {round}"));
        drop(store);
        if round == 4 {
            // A torn record at the end (a kill during the append) is dropped.
            use std::io::Write;
            let mut f = std::fs::OpenOptions::new()
                .append(true)
                .open(folder.join("log"))
                .unwrap();
            f.write_all(&[40, 0, 0, 0, 1, 2, 3]).unwrap();
        }
    }
    let store = open();
    same_answers(&store, "final");
    assert_eq!(store.len(), oxigraph.len().unwrap() as u64);
}

#[test]
fn bulk_load_commits_and_rebuilds_the_relations() {
    let mut rng = StdRng::seed_from_u64(0x0062_6c6b);
    let quads: Vec<Quad> = (0..2_000).map(|_| random_quad(&mut rng, true)).collect();
    let mut document = String::new();
    for q in &quads {
        document.push_str(&format!("{q} .\n"));
    }
    let store = K2Store::new().unwrap();
    store
        .bulk_load(oxigraph::io::RdfFormat::NQuads, document.as_bytes())
        .unwrap();
    let distinct: std::collections::HashSet<&Quad> = quads.iter().collect();
    assert_eq!(store.len(), distinct.len() as u64);
    assert_eq!(store.oxigraph().len().unwrap(), distinct.len());
    same_answers(&store, "after the bulk load");
    // Writes after it are exact too.
    let q = random_quad(&mut rng, false);
    let was = store.contains(&q).unwrap();
    assert_eq!(store.insert(&q).unwrap(), !was);
    same_answers(&store, "after a write");

    // A document that fails to parse loads nothing.
    let before = store.len();
    let bad = format!("{document}<http://e/a> <http://e/p> \"unterminated .\n");
    assert!(store
        .bulk_load(oxigraph::io::RdfFormat::NQuads, bad.as_bytes())
        .is_err());
    assert_eq!(store.len(), before);
    assert_eq!(store.oxigraph().len().unwrap() as u64, before);
    same_answers(&store, "after a failed bulk load");
}

#[test]
fn a_damaged_checkpoint_is_refused_with_its_reason() {
    let disk = OnDisk::new();
    let (folder, oxigraph) = (&disk.folder, &disk.oxigraph);
    let open = || disk.open();
    let mut rng = StdRng::seed_from_u64(11);
    {
        let store = open().unwrap();
        for _ in 0..200 {
            store.insert(&random_quad(&mut rng, true)).unwrap();
        }
        store.checkpoint().unwrap();
    }
    let path = folder.join("checkpoint");
    let good = std::fs::read(&path).unwrap();
    let reason = |bytes: &[u8]| {
        std::fs::write(&path, bytes).unwrap();
        match open() {
            Ok(_) => "opened".to_owned(),
            Err(e) => e.to_string(),
        }
    };
    let mut flipped = good.clone();
    flipped[good.len() / 2] ^= 0x40;
    assert!(
        reason(&flipped).contains("checksum mismatch"),
        "{}",
        reason(&flipped)
    );
    let half = &good[..good.len() / 2];
    assert!(reason(half).contains("corrupt"), "{}", reason(half));
    assert!(reason(b"K2R").contains("not a k2rpq checkpoint"));
    // The intact checkpoint opens again, with every quad.
    std::fs::write(&path, &good).unwrap();
    let store = open().unwrap();
    same_answers(&store, "after the damaged opens");
    assert_eq!(store.len(), oxigraph.len().unwrap() as u64);
}
