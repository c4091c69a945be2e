//! SPARQL through [`Database::query`] on CoDEx-M (a store on disk, the only copy of the
//! data) answers what Oxigraph's own evaluation answers over the same triples in memory,
//! for every construct around the paths.

use k2rpq::database::Database;
use k2rpq::sparql::SparqlError;

#[path = "answers/mod.rs"]
mod answers;
use answers::{cpu_database, named_multiset, oxigraph_answer};

const CODEX_M: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/fixtures/codex/codex-m.nt.gz");

/// CoDEx-M loaded into a store in `dir`, opened on the CPU engine.
fn codex_database(dir: &std::path::Path) -> Database {
    cpu_database(CODEX_M.into(), dir)
}

/// CoDEx-M in Oxigraph's in-memory store.
fn codex_oxigraph() -> oxigraph::store::Store {
    let store = oxigraph::store::Store::new().unwrap();
    let bytes = std::fs::read(CODEX_M).unwrap();
    store
        .load_from_reader(
            oxigraph::io::RdfFormat::NTriples,
            flate2::read::GzDecoder::new(bytes.as_slice()),
        )
        .unwrap();
    store
}

#[test]
fn database_query_matches_oxigraph_on_codex_m() {
    let dir = tempfile::tempdir().unwrap();
    let db = codex_database(dir.path());
    let oxigraph = codex_oxigraph();
    let prefixes = "PREFIX wd: <http://www.wikidata.org/entity/> \
                    PREFIX wdt: <http://www.wikidata.org/prop/direct/> ";
    // Paths where Oxigraph follows the spec (no alternative outside a closure, no absent
    // constant: docs/SEMANTICS.md), so that its own evaluation is the oracle.
    let queries = [
        "SELECT ?y WHERE { wd:Q183 wdt:P530+ ?y }",
        "SELECT ?x ?y WHERE { ?x wdt:P737+ ?y }",
        "SELECT ?x WHERE { ?x ^wdt:P17/wdt:P17 wd:Q183 }",
        "ASK { wd:Q183 wdt:P530* wd:Q183 }",
        "SELECT ?y ?z WHERE { wd:Q183 wdt:P530+ ?y OPTIONAL { ?y wdt:P463 ?z } }",
        "SELECT ?c (COUNT(?x) AS ?n) WHERE { ?x wdt:P19/wdt:P17? ?c } GROUP BY ?c",
        "SELECT ?x WHERE { ?x wdt:P27 wd:Q183 MINUS { ?x wdt:P19/wdt:P131*/wdt:P17 wd:Q183 } }",
        "SELECT ?x WHERE { ?x wdt:P27 wd:Q183 FILTER NOT EXISTS { ?x wdt:P19/wdt:P17 wd:Q183 } }",
        "SELECT ?x ?o WHERE { VALUES ?x { wd:Q1001 wd:Q9358 wd:Q868 } ?x wdt:P737+ ?y . ?y wdt:P106 ?o }",
        "SELECT ?x ?y WHERE { ?x wdt:P40+ ?y FILTER(?x != ?y) } ORDER BY ?x ?y LIMIT 20",
        "SELECT ?p (COUNT(*) AS ?n) WHERE { wd:Q183 ?p ?x . ?x wdt:P463+ ?z } GROUP BY ?p",
        "SELECT ?y WHERE { { SELECT ?y WHERE { wd:Q183 wdt:P530 ?y } ORDER BY ?y LIMIT 10 } ?y wdt:P463/wdt:P463* ?o }",
        "SELECT ?x ?l WHERE { { wd:Q183 wdt:P530/wdt:P530 ?x } UNION { wd:Q183 wdt:P463/^wdt:P463 ?x } BIND(STRLEN(STR(?x)) AS ?l) }",
        "CONSTRUCT { ?y <http://e/reached> wd:Q183 } WHERE { wd:Q183 wdt:P530+ ?y }",
        "DESCRIBE ?c WHERE { wd:Q183 wdt:P530/wdt:P530 ?c } ORDER BY ?c LIMIT 3",
        "ASK { ?x wdt:P40+ ?x }",
    ];
    for q in queries {
        let q = format!("{prefixes}{q}");
        let expected = oxigraph_answer(&oxigraph, &q);
        assert!(!expected.is_empty(), "{q}: an empty answer tests nothing");
        let got = named_multiset(db.query(&q).unwrap_or_else(|e| panic!("{q}: {e}")));
        assert_eq!(got, expected, "{q}");
    }
    let (on_cpu, on_gpu) = db.path_service_runs();
    assert!(
        on_cpu >= 15 && on_gpu == 0,
        "{on_cpu} on the CPU, {on_gpu} on a GPU"
    );
    // A predicate the store does not have: an empty answer, not an error.
    let results = db
        .query("SELECT ?x ?y WHERE { ?x <http://example.org/nothing>+ ?y }")
        .unwrap();
    assert!(named_multiset(results).is_empty());
    // Invalid SPARQL: the parser's message.
    match db.query("SELECT ?x WHERE { ?x <p> }") {
        Err(SparqlError::Syntax(e)) => assert!(!e.to_string().is_empty()),
        Err(other) => panic!("expected a syntax error, got {other}"),
        Ok(_) => panic!("an invalid query was accepted"),
    }
}

#[test]
fn lone_paths_are_answered_from_the_path_rows_as_oxigraph_answers_them() {
    let dir = tempfile::tempdir().unwrap();
    let db = codex_database(dir.path());
    let oxigraph = codex_oxigraph();
    let prefixes = "PREFIX wd: <http://www.wikidata.org/entity/> \
                    PREFIX wdt: <http://www.wikidata.org/prop/direct/> ";
    let parse = |q: &str| k2rpq::sparql::parse_query(&format!("{prefixes}{q}"), None).unwrap();
    let alone = |q: &str| {
        db.explain(&parse(q))
            .unwrap()
            .contains("its rows are the answer")
    };
    // One path group with its projection, DISTINCT and slice around it (in any order of
    // columns, some unbound), or in an ASK: the path rows are the answer.
    let lone = [
        "SELECT ?a WHERE { wd:Q131324 ^wdt:P40+ ?a }",
        "SELECT ?y ?x WHERE { ?x wdt:P530/wdt:P530 ?y }",
        "SELECT ?y ?nothing WHERE { wd:Q183 wdt:P530+ ?y }",
        "SELECT DISTINCT ?y WHERE { wd:Q183 wdt:P530/wdt:P530 ?y }",
        "SELECT ?y WHERE { wd:Q183 wdt:P530+ ?y } LIMIT 0",
        "SELECT ?y WHERE { wd:Q183 wdt:P530+ ?y } OFFSET 1000000",
        "SELECT ?x WHERE { ?x wdt:P27 wd:Q183 . ?x wdt:P19/wdt:P17 ?c }",
        "ASK { wd:Q183 wdt:P530/wdt:P530 wd:Q142 }",
        "ASK { ?x wdt:P40+ ?x }",
        "ASK { wd:Q183 wdt:P530+ ?y . ?y wdt:P463 ?o }",
        // Blank nodes: no column of their own.
        "ASK { wd:Q183 wdt:P530+ [] }",
        "ASK { wd:Q183 wdt:P530+ _:b . _:b wdt:P463 wd:Q458 }",
        "SELECT * WHERE { wd:Q183 wdt:P530 _:b . _:b wdt:P530 ?y }",
    ];
    for q in lone {
        assert!(alone(q), "{q}");
        let q = format!("{prefixes}{q}");
        let expected = oxigraph_answer(&oxigraph, &q);
        let got = named_multiset(db.query(&q).unwrap_or_else(|e| panic!("{q}: {e}")));
        assert_eq!(got, expected, "{q}");
    }
    // A LIMIT keeps that many rows of the whole answer.
    let whole = named_multiset(
        db.query(&format!(
            "{prefixes}SELECT ?y WHERE {{ wd:Q183 wdt:P530+ ?y }}"
        ))
        .unwrap(),
    );
    let some = named_multiset(
        db.query(&format!(
            "{prefixes}SELECT ?y WHERE {{ wd:Q183 wdt:P530+ ?y }} OFFSET 2 LIMIT 5"
        ))
        .unwrap(),
    );
    assert_eq!(some.values().sum::<usize>(), 5);
    assert!(some.keys().all(|k| whole.contains_key(k)), "{some:?}");
    // What Oxigraph's evaluator must do around the group.
    for q in [
        "SELECT ?x WHERE { wd:Q61078 wdt:P19/^wdt:P19 ?x FILTER(?x != wd:Q61078) }",
        "SELECT ?y WHERE { wd:Q183 wdt:P530+ ?y } ORDER BY ?y",
        "SELECT (STR(?y) AS ?s) WHERE { wd:Q183 wdt:P530+ ?y }",
        "SELECT ?y FROM <http://e/g> WHERE { wd:Q183 wdt:P530+ ?y }",
        "CONSTRUCT { ?y <http://e/r> wd:Q183 } WHERE { wd:Q183 wdt:P530+ ?y }",
        "SELECT ?x WHERE { ?x wdt:P27 wd:Q183 }",
    ] {
        assert!(!alone(q), "{q}");
    }
}
