//! SPARQL through [`Database::query`] (a store on disk, the engine chosen per query)
//! answers exactly what the SPARQL layer answers over the same triples in memory.

use k2rpq::database::{Database, DatabaseOptions, EngineChoice};
use k2rpq::engine::cpu::CpuEngine;
use k2rpq::sparql::{query, MemoryDataset, SparqlError};
use k2rpq::store::{load, Input, LoadOptions};

#[path = "answers/mod.rs"]
mod answers;
use answers::{multiset, oxigraph_multiset};

const CODEX_M: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/fixtures/codex/codex-m.nt.gz");

/// CoDEx-M loaded into a store in `dir`, opened on the CPU engine.
fn codex_database(dir: &std::path::Path) -> Database {
    let store = dir.join("store");
    load(
        &[Input::Path(CODEX_M.into())],
        &store,
        &LoadOptions::default(),
    )
    .unwrap();
    Database::open(
        &store,
        &DatabaseOptions {
            engine: EngineChoice::Cpu,
            ..Default::default()
        },
    )
    .unwrap()
}

#[test]
fn database_query_matches_the_sparql_layer() {
    let dir = tempfile::tempdir().unwrap();
    let db = codex_database(dir.path());
    let memory = MemoryDataset::load_file(CODEX_M.as_ref()).unwrap();
    for q in [
        "SELECT ?y WHERE { <http://www.wikidata.org/entity/Q183> <http://www.wikidata.org/prop/direct/P530>+ ?y }",
        "SELECT ?x ?y WHERE { ?x <http://www.wikidata.org/prop/direct/P737>+ ?y }",
        "SELECT ?x WHERE { ?x ^<http://www.wikidata.org/prop/direct/P17>/<http://www.wikidata.org/prop/direct/P17> <http://www.wikidata.org/entity/Q183> }",
        "SELECT ?y WHERE { <http://www.wikidata.org/entity/Q183> !(<http://www.wikidata.org/prop/direct/P530>|^<http://www.wikidata.org/prop/direct/P463>) ?y }",
        "ASK { <http://www.wikidata.org/entity/Q183> <http://www.wikidata.org/prop/direct/P530>* <http://www.wikidata.org/entity/Q183> }",
    ] {
        let (answer, engine) = db.query(q).unwrap();
        assert_eq!(engine, "cpu");
        let expected = multiset(query(&CpuEngine::new(), &memory, q).unwrap());
        assert!(!expected.is_empty(), "{q}: empty answer tests nothing");
        assert_eq!(multiset(answer), expected, "{q}");
    }
    // A predicate the store does not have: an empty answer, not an error.
    let (answer, _) = db
        .query("SELECT ?x ?y WHERE { ?x <http://example.org/nothing>+ ?y }")
        .unwrap();
    assert!(multiset(answer).is_empty());
    // Invalid SPARQL: the parser's message.
    match db.query("SELECT ?x WHERE { ?x <p> }") {
        Err(SparqlError::Syntax(e)) => assert!(!e.to_string().is_empty()),
        other => panic!("expected a syntax error, got {other:?}"),
    }
}

#[test]
fn store_paths_answer_any_query_as_oxigraph_does() {
    use k2rpq::oxigraph::{copy_store, K2Paths, StorePaths};
    use oxigraph::sparql::SparqlEvaluator;
    use std::sync::Arc;

    let dir = tempfile::tempdir().unwrap();
    let db = Arc::new(codex_database(dir.path()));
    let copy = copy_store(db.store(), None).unwrap();
    let edges: u64 = db.store().graphs().iter().map(|g| g.edges).sum();
    assert_eq!(copy.triples, edges);
    assert_eq!(copy.store.len().unwrap() as u64, edges);
    let from_store = StorePaths::new(Arc::clone(&db));
    let in_memory = K2Paths::cpu();
    // Outside the standalone subset (OPTIONAL, MINUS, NOT EXISTS, aggregates, CONSTRUCT,
    // DESCRIBE), with paths where Oxigraph follows the spec (no alternatives, no absent
    // constants: docs/SEMANTICS.md), so that its own evaluation is the oracle.
    let wdt = |p: &str| format!("<http://www.wikidata.org/prop/direct/{p}>");
    let germany = "<http://www.wikidata.org/entity/Q183>";
    for q in [
        format!(
            "SELECT ?y ?z WHERE {{ {germany} {}+ ?y OPTIONAL {{ ?y {} ?z }} }}",
            wdt("P530"),
            wdt("P463")
        ),
        format!(
            "SELECT ?c (COUNT(?x) AS ?n) WHERE {{ ?x {}/{}? ?c }} GROUP BY ?c",
            wdt("P19"),
            wdt("P17")
        ),
        format!(
            "SELECT ?x WHERE {{ ?x {} {germany} MINUS {{ ?x {}/{}+ {germany} }} }}",
            wdt("P27"),
            wdt("P19"),
            wdt("P17")
        ),
        format!(
            "SELECT ?x WHERE {{ ?x {} ?c FILTER NOT EXISTS {{ ?c ^{}/{} ?x }} }} LIMIT 50",
            wdt("P27"),
            wdt("P27"),
            wdt("P106")
        ),
        format!(
            "CONSTRUCT {{ ?y <http://e/reached> {germany} }} WHERE {{ {germany} {}+ ?y }}",
            wdt("P530")
        ),
        format!(
            "ASK {{ {germany} {}* ?y FILTER(?y != {germany}) }}",
            wdt("P530")
        ),
    ] {
        let expected = oxigraph_multiset(
            SparqlEvaluator::new()
                .parse_query(&q)
                .unwrap()
                .on_store(&copy.store)
                .execute()
                .unwrap(),
        );
        assert!(!expected.is_empty(), "{q}: an empty answer tests nothing");
        let got = oxigraph_multiset(from_store.evaluate(&copy.store, &q).unwrap());
        assert_eq!(got, expected, "{q}");
        let memory = oxigraph_multiset(in_memory.evaluate(&copy.store, &q).unwrap());
        assert_eq!(memory, expected, "{q}");
    }
}
