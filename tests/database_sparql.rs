//! SPARQL through [`Database::query`] (a store on disk, the engine chosen per query)
//! answers exactly what the SPARQL layer answers over the same triples in memory.

use k2rpq::database::{Database, DatabaseOptions, EngineChoice};
use k2rpq::engine::cpu::CpuEngine;
use k2rpq::sparql::{query, MemoryDataset, SparqlError};
use k2rpq::store::{load, Input, LoadOptions};

#[path = "answers/mod.rs"]
mod answers;
use answers::multiset;

const CODEX_M: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/fixtures/codex/codex-m.nt.gz");

#[test]
fn database_query_matches_the_sparql_layer() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("store");
    load(
        &[Input::Path(CODEX_M.into())],
        &store,
        &LoadOptions::default(),
    )
    .unwrap();
    let db = Database::open(
        &store,
        &DatabaseOptions {
            engine: EngineChoice::Cpu,
            ..Default::default()
        },
    )
    .unwrap();
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
