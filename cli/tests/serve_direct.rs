//! The endpoint's direct route (a query that is one path service call, answered by the
//! path engines without Oxigraph's evaluator) against the general route, on the same
//! store: the same bag of rows for closures, inverses, sequences, alternatives, negated
//! sets, constants the store lacks, absent predicates, DISTINCT and LIMIT.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use k2rpq::database::{Database, DatabaseOptions, EngineChoice};
use k2rpq_cli::serve::evaluate::{Answer, Control, EvaluationError, Evaluator, StoreEvaluator};
use spargebra::SparqlParser;

#[path = "serve_run/mod.rs"]
mod serve_run;
use serve_run::{load, load_file};

#[path = "../../tests/data/mod.rs"]
mod data;

/// A graph where paths meet more than once: two links a→b (p and q), two middles between
/// a and d, a cycle, a literal, and a node only reachable backwards.
const GRAPH: &str = "<http://e/a> <http://e/p> <http://e/b> .\n\
     <http://e/a> <http://e/q> <http://e/b> .\n\
     <http://e/a> <http://e/p> <http://e/c> .\n\
     <http://e/b> <http://e/p> <http://e/d> .\n\
     <http://e/c> <http://e/p> <http://e/d> .\n\
     <http://e/d> <http://e/p> <http://e/a> .\n\
     <http://e/d> <http://e/q> <http://e/e> .\n\
     <http://e/f> <http://e/q> <http://e/a> .\n\
     <http://e/b> <http://e/name> \"Bea\" .\n\
     <http://e/e> <http://e/r> <http://e/e> .\n";

/// A row as text, unbound as `None`.
type TextRow = Vec<Option<String>>;

/// The columns and the rows of an answer, or its error.
fn rows(evaluator: &StoreEvaluator, text: &str) -> Result<(Vec<String>, Vec<TextRow>), String> {
    let query = SparqlParser::new().parse_query(text).unwrap();
    let control = Control::new(Duration::from_secs(60), None);
    match evaluator
        .evaluate(&query, &control)
        .map(Answer::into_general)
    {
        Ok(Answer::Solutions { variables, rows }) => {
            let rows = rows
                .map(|row| {
                    row.map(|r| {
                        r.iter()
                            .map(|t| t.as_ref().map(|t| t.to_string()))
                            .collect()
                    })
                    .map_err(|e| e.to_string())
                })
                .collect::<Result<Vec<TextRow>, String>>()?;
            Ok((variables.iter().map(|v| v.to_string()).collect(), rows))
        }
        Ok(_) => Err("not a SELECT answer".into()),
        Err(e) => Err(e.to_string()),
    }
}

fn bag(rows: &[TextRow]) -> HashMap<&TextRow, usize> {
    let mut bag = HashMap::new();
    for r in rows {
        *bag.entry(r).or_default() += 1;
    }
    bag
}

/// Asserts that both routes give `query` the same columns and bag of rows (with a LIMIT:
/// as many rows, each one of the answer without the LIMIT); returns the row count and
/// whether the query took the direct route.
fn same_answer(direct: &StoreEvaluator, general: &StoreEvaluator, query: &str) -> (usize, bool) {
    let parsed = SparqlParser::new().parse_query(query).unwrap();
    assert!(!general.answers_directly(&parsed));
    let (columns, fast) = rows(direct, query).unwrap_or_else(|e| panic!("{query}: {e}"));
    let (expected_columns, slow) = rows(general, query).unwrap_or_else(|e| panic!("{query}: {e}"));
    assert_eq!(columns, expected_columns, "{query}");
    match query.find(" LIMIT ") {
        None => assert_eq!(bag(&fast), bag(&slow), "{query}"),
        Some(at) => {
            assert_eq!(fast.len(), slow.len(), "{query}");
            let (_, all) = rows(general, &query[..at]).unwrap();
            let all = bag(&all);
            for (row, n) in bag(&fast) {
                assert!(all.get(row).is_some_and(|&m| m >= n), "{query}: {row:?}");
            }
        }
    }
    (fast.len(), direct.answers_directly(&parsed))
}

fn open(store: &std::path::Path) -> Arc<Database> {
    let options = DatabaseOptions {
        engine: EngineChoice::Cpu,
        ..Default::default()
    };
    Arc::new(Database::open(store, &options).unwrap())
}

#[test]
fn the_direct_route_answers_as_the_general_one() {
    let dir = tempfile::tempdir().unwrap();
    let database = open(&load(dir.path(), GRAPH));
    let direct = StoreEvaluator::new(Arc::clone(&database));
    let general = StoreEvaluator::general(database);
    let queries = [
        "SELECT * WHERE { ?x <http://e/p>+ ?y }",
        "SELECT * WHERE { ?x <http://e/p>* ?y }",
        "SELECT * WHERE { ?x <http://e/p>? ?y }",
        "SELECT * WHERE { <http://e/a> <http://e/p>* ?y }",
        "SELECT * WHERE { ?x <http://e/p>+ <http://e/a> }",
        "SELECT * WHERE { <http://e/a> <http://e/p>+ <http://e/a> }",
        "SELECT * WHERE { <http://e/a> <http://e/p>+ <http://e/f> }",
        "SELECT * WHERE { ?x ^<http://e/p> ?y }",
        "SELECT * WHERE { ?x (^<http://e/p>)+ <http://e/d> }",
        "SELECT * WHERE { ?x <http://e/p>/<http://e/p> ?y }",
        "SELECT * WHERE { <http://e/a> <http://e/p>/<http://e/p>/<http://e/p> ?y }",
        "SELECT * WHERE { ?x (<http://e/p>|<http://e/q>) ?y }",
        "SELECT * WHERE { ?x (<http://e/p>|<http://e/q>)/<http://e/p> ?y }",
        "SELECT * WHERE { ?x (<http://e/p>|<http://e/q>)+ ?y }",
        "SELECT * WHERE { ?x <http://e/q>/<http://e/p>* ?y }",
        "SELECT * WHERE { ?x !(<http://e/p>) ?y }",
        "SELECT * WHERE { ?x !(<http://e/p>|^<http://e/q>) <http://e/a> }",
        "SELECT * WHERE { ?x <http://e/p>* ?x }",
        "SELECT * WHERE { _:b <http://e/p>/<http://e/p> ?y }",
        "SELECT ?y WHERE { ?x <http://e/p>/<http://e/p> ?y }",
        "SELECT DISTINCT ?y WHERE { ?x <http://e/p>/<http://e/p> ?y }",
        "SELECT REDUCED ?x WHERE { ?x (<http://e/p>|<http://e/q>) ?y }",
        "SELECT ?y ?x WHERE { ?x <http://e/p>+ ?y }",
        "SELECT * WHERE { <http://e/absent> <http://e/p>* ?y }",
        "SELECT * WHERE { ?x <http://e/p>* <http://e/absent> }",
        "SELECT * WHERE { ?x <http://e/absent>+ ?y }",
        "SELECT * WHERE { ?x <http://e/absent>* <http://e/a> }",
        "SELECT * WHERE { ?x <http://e/p>/<http://e/name> ?n }",
        "SELECT * WHERE { ?x <http://e/p>* \"Bea\" }",
        "SELECT * WHERE { ?x <http://e/p>+ ?y . ?y <http://e/name> ?n }",
        "SELECT * WHERE { VALUES ?x { <http://e/a> <http://e/f> } ?x <http://e/q>/<http://e/p>* ?y }",
        "SELECT * WHERE { ?x <http://e/p>+ ?y } LIMIT 3",
        "SELECT * WHERE { ?x <http://e/p>/<http://e/p> ?y } LIMIT 2 OFFSET 1",
        "SELECT DISTINCT ?x WHERE { ?x <http://e/p>+ ?y } LIMIT 2",
        "SELECT * WHERE { ?x <http://e/p>+ ?y } OFFSET 100",
    ];
    let (mut total, mut directly) = (0, Vec::new());
    for q in queries {
        let (rows, direct) = same_answer(&direct, &general, q);
        total += rows;
        if !direct {
            directly.push(q);
        }
    }
    assert!(total > 100, "{total} rows in all");
    // The parser makes `?x ^p ?y` the triple pattern `?y p ?x`: no path to answer. (The
    // VALUES, which only the path reads, goes into the service: answered directly.)
    assert_eq!(directly, [queries[7]]);
    // Duplicates are kept: two middles (b and c) between a and d.
    let (_, two_steps) = rows(&direct, queries[9]).unwrap();
    let a_to_d = two_steps
        .iter()
        .filter(|r| {
            r[0].as_deref() == Some("<http://e/a>") && r[1].as_deref() == Some("<http://e/d>")
        })
        .count();
    assert_eq!(a_to_d, 2, "{two_steps:?}");
}

#[test]
fn queries_outside_the_direct_route_take_the_general_one() {
    let dir = tempfile::tempdir().unwrap();
    let database = open(&load(dir.path(), GRAPH));
    let direct = StoreEvaluator::new(Arc::clone(&database));
    let general = StoreEvaluator::general(database);
    for q in [
        "SELECT * WHERE { ?x <http://e/p> ?y }",
        "SELECT * WHERE { ?x <http://e/p>+ ?y FILTER(?x != ?y) }",
        "SELECT * WHERE { ?x <http://e/p>+ ?y } ORDER BY ?x",
        "SELECT (COUNT(*) AS ?n) WHERE { ?x <http://e/p>+ ?y }",
        "SELECT * FROM <http://e/g> WHERE { ?x <http://e/p>+ ?y }",
        "SELECT * WHERE { { ?x <http://e/p> ?y } UNION { ?x <http://e/q>+ ?y } }",
        "ASK { <http://e/a> <http://e/p>+ <http://e/a> }",
    ] {
        let parsed = SparqlParser::new().parse_query(q).unwrap();
        assert!(!direct.answers_directly(&parsed), "{q}");
        let control = Control::new(Duration::from_secs(60), None);
        match (
            direct.evaluate(&parsed, &control).map(Answer::into_general),
            general
                .evaluate(&parsed, &control)
                .map(Answer::into_general),
        ) {
            (Ok(Answer::Solutions { rows: a, .. }), Ok(Answer::Solutions { rows: b, .. })) => {
                assert_eq!(a.count(), b.count(), "{q}");
            }
            (Ok(Answer::Boolean(a)), Ok(Answer::Boolean(b))) => assert_eq!(a, b, "{q}"),
            _ => panic!("{q}: different kinds of answers"),
        }
    }
}

#[test]
fn a_passed_deadline_stops_the_direct_route() {
    let dir = tempfile::tempdir().unwrap();
    let database = open(&load(dir.path(), GRAPH));
    let direct = StoreEvaluator::new(database);
    let query = SparqlParser::new()
        .parse_query("SELECT * WHERE { ?x <http://e/p>+ ?y }")
        .unwrap();
    let control = Control::new(Duration::from_nanos(1), None);
    std::thread::sleep(Duration::from_millis(2));
    assert_eq!(
        direct.evaluate(&query, &control).err(),
        Some(EvaluationError::Timeout)
    );
    // Cancelled between rows: the rows end with the cancellation.
    let control = Control::new(Duration::from_secs(60), None);
    let Ok(Answer::Solutions { mut rows, .. }) =
        direct.evaluate(&query, &control).map(Answer::into_general)
    else {
        panic!("no rows");
    };
    assert!(rows.next().unwrap().is_ok());
    control.cancel();
    assert_eq!(rows.next(), Some(Err(EvaluationError::Cancelled)));
    assert!(rows.next().is_none());
}

#[test]
fn the_codex_workload_answers_as_the_general_route() {
    let dir = tempfile::tempdir().unwrap();
    let store = load_file(dir.path(), &data::repo_file("fixtures/codex/codex-m.nt.gz"));
    let database = open(&store);
    let direct = StoreEvaluator::new(Arc::clone(&database));
    let general = StoreEvaluator::general(database);
    let workload = std::fs::read_to_string(data::repo_file("sparql/codex-m.rpq")).unwrap();
    let (mut checked, mut general_only) = (0, Vec::new());
    for line in workload.lines().filter(|l| !l.starts_with('#')) {
        let Some((id, pattern)) = line.split_once(", ") else {
            continue;
        };
        let query = format!("SELECT * WHERE {{ {pattern} }}");
        if !same_answer(&direct, &general, &query).1 {
            general_only.push(id);
        }
        checked += 1;
    }
    assert!(checked >= 40, "{checked} queries");
    // `?x ^wdt:P40 ?y` is a triple pattern once parsed.
    assert_eq!(general_only, ["q38"]);
}
