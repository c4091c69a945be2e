//! Whole SPARQL queries over a k2rpq store against Oxigraph's own evaluation of the same
//! quads, for every construct (OPTIONAL, MINUS, UNION, BIND, VALUES, FILTER, aggregates,
//! subqueries, ORDER BY with LIMIT, ASK, CONSTRUCT, DESCRIBE, GRAPH, FROM, FROM NAMED),
//! through both ways in (a store, and the embedding over Oxigraph's store); GRAPH scoping,
//! result formats, store change detection, syntax edge cases, updates and time limits.

#[path = "answers/mod.rs"]
mod answers;

use std::time::Duration;

use answers::{database_of, multiset, named_multiset, oxigraph_answer, rows};
use k2rpq::database::{Database, QueryOptions};
use k2rpq::oxigraph::{ChangeCheck, K2Paths};
use k2rpq::sparql::results::write_results;
use k2rpq::sparql::{QueryEvaluationError, QueryResults, ResultFormat, SparqlError};
use oxigraph::store::Store;
use oxrdf::{GraphName, NamedNode, Quad};
use sparesults::{QueryResultsFormat, QueryResultsParser, ReaderQueryResultsParserOutput};

const DATA: &str = r#"
@prefix : <http://e/> .
:a :p :b , :c ; :q :c ; :age 30 .
:b :p :c ; :q :d ; :age 25 .
:c :p :a ; :r "x" .
:d :q :e ; :age 41 .
<http://e/a> <http://e/b> 11 .
:g1 { :a :link :b . :a :age 7 . }
:g2 { :b :link :c . :c :link :d . }
"#;

fn store() -> Store {
    let store = Store::new().unwrap();
    store
        .load_from_reader(oxigraph::io::RdfFormat::TriG, DATA.as_bytes())
        .unwrap();
    store
}

/// The data in Oxigraph and in a k2rpq store (kept in the returned folder).
fn both() -> (Store, Database, tempfile::TempDir) {
    let store = store();
    let dir = tempfile::tempdir().unwrap();
    let db = database_of(&store, dir.path());
    (store, db, dir)
}

const PREFIX: &str = "PREFIX : <http://e/> ";

#[test]
fn every_construct_matches_oxigraph() {
    let (store, db, _dir) = both();
    let paths = K2Paths::cpu();
    // Row order matters for these (ORDER BY with a total order).
    let ordered = [
        "SELECT ?x ?a WHERE { ?x :age ?a } ORDER BY DESC(?a) ?x",
        "SELECT ?x ?y WHERE { ?x :p+ ?y } ORDER BY ?x ?y LIMIT 3 OFFSET 2",
        "SELECT ?x (COUNT(?y) AS ?n) WHERE { ?x :p ?y } GROUP BY ?x ORDER BY ?x",
        "SELECT ?y (COUNT(*) AS ?n) WHERE { ?x :p*/:q ?y } GROUP BY ?y ORDER BY DESC(?n) ?y",
    ];
    let unordered = [
        // Paths joined with triples, VALUES, FILTER.
        "SELECT ?x ?y WHERE { ?x :p/:q ?y }",
        "SELECT DISTINCT ?y WHERE { ?x :p* ?y }",
        "SELECT ?x ?z WHERE { ?x :p ?y . ?y :q ?z }",
        "SELECT ?x ?a WHERE { ?x :p+ ?y . ?y :age ?a }",
        "SELECT ?x WHERE { VALUES ?x { :a :d :zz } ?x :q+ ?y }",
        "SELECT ?x ?y WHERE { VALUES (?x ?y) { (:a :c) (:b UNDEF) } ?x :p+ ?y }",
        "SELECT ?x ?a WHERE { ?x :age ?a FILTER(?a > 26 && ?a != 41) }",
        "SELECT ?x WHERE { ?x :p ?y FILTER(?y = :c || ?y IN (:a)) }",
        "SELECT ?x WHERE { ?x :r ?l FILTER(isLiteral(?l) && bound(?x)) }",
        "SELECT ?x ?y WHERE { ?x :p+ ?y FILTER(STRENDS(STR(?y), \"c\")) }",
        "SELECT ?x ?y WHERE { ?x :p+ ?y FILTER(?x != ?y) }",
        // OPTIONAL, MINUS, UNION, EXISTS.
        "SELECT ?x ?y ?a WHERE { ?x :p+ ?y OPTIONAL { ?y :age ?a } }",
        "SELECT ?x ?r WHERE { ?x :p* :a OPTIONAL { ?x :r ?r } }",
        "SELECT ?x WHERE { ?x :p ?y MINUS { ?x :q+ :e } }",
        "SELECT ?x WHERE { { :a :p+ ?x } UNION { :a :q/:q ?x } }",
        "SELECT ?x ?y WHERE { ?x :age ?a { ?x :p+ ?y } UNION { ?x :q ?y } UNION { ?y :p/:q ?x } }",
        "SELECT ?x WHERE { ?x :p ?y FILTER NOT EXISTS { ?y :q+ :e } }",
        "SELECT ?x WHERE { ?x :age ?a FILTER EXISTS { ?x :p/:p ?z } }",
        // BIND, expressions, aggregates, subqueries.
        "SELECT ?x ?k WHERE { ?x :p :c BIND(:k AS ?k) }",
        "SELECT ?x ?s WHERE { ?x :p+ :c BIND(CONCAT(STR(?x), \"!\") AS ?s) }",
        "SELECT (COUNT(*) AS ?n) WHERE { ?x :p* ?y }",
        "SELECT (COUNT(DISTINCT ?y) AS ?n) WHERE { ?x :p/:p ?y }",
        "SELECT ?x (COUNT(?y) AS ?n) WHERE { ?x :p/:p? ?y } GROUP BY ?x",
        "SELECT (SUM(?a) AS ?s) (MAX(?a) AS ?m) (AVG(?a) AS ?v) WHERE { ?x :p* :c . ?x :age ?a }",
        "SELECT ?x (MIN(STR(?y)) AS ?first) (SAMPLE(?x) AS ?same) WHERE { ?x :p+ ?y } GROUP BY ?x",
        "SELECT ?x ?n WHERE { { SELECT ?x (COUNT(?y) AS ?n) WHERE { ?x :p+ ?y } GROUP BY ?x } FILTER(?n > 2) }",
        "SELECT ?y WHERE { { SELECT ?y WHERE { :a :p+ ?y } ORDER BY ?y LIMIT 2 } ?y :q ?z }",
        "SELECT ?x ?z WHERE { { SELECT ?x WHERE { ?x :age ?a } ORDER BY DESC(?a) LIMIT 2 } ?x :p/:q* ?z }",
        "SELECT ?x ?z WHERE { { SELECT ?x WHERE { ?x :age ?a } ORDER BY ?a LIMIT 2000 } ?x :p+ ?z }",
        "SELECT ?x (COUNT(?y) AS ?n) WHERE { ?x :p+ ?y } GROUP BY ?x HAVING (COUNT(?y) > 1)",
        "SELECT ?x WHERE { { SELECT ?x (COUNT(?y) AS ?n) WHERE { ?x :p+ ?y } GROUP BY ?x } VALUES ?n { 2 } }",
        // GRAPH, and paths that must not cross graphs.
        "SELECT ?g ?x WHERE { GRAPH ?g { :a :link+ ?x } }",
        "SELECT ?g ?x ?y WHERE { GRAPH ?g { ?x :link/:link ?y } }",
        "SELECT ?x WHERE { GRAPH :g2 { :b :link* ?x } }",
        "SELECT ?x WHERE { GRAPH :nosuch { :b :link* ?x } }",
        "SELECT ?g ?x WHERE { GRAPH ?g { ?x :link+ ?y . ?x :age ?a } }",
        "SELECT ?g WHERE { GRAPH ?g { } }",
        // FROM and FROM NAMED.
        "SELECT ?x WHERE { :b :link+ ?x }",
        "SELECT ?x FROM :g2 WHERE { :b :link+ ?x }",
        "SELECT ?x FROM :g1 FROM :g2 WHERE { ?x :link ?y }",
        "SELECT ?x FROM :g1 FROM :g2 WHERE { :a :link+ ?x }",
        "SELECT ?g ?x FROM NAMED :g2 WHERE { GRAPH ?g { ?s :link+ ?x } }",
        "SELECT ?x FROM NAMED :g1 WHERE { GRAPH :g2 { :b :link+ ?x } }",
        "SELECT * FROM :g1 WHERE { ?s ?p ?o }",
        // Variable predicates, unknown terms, ASK.
        "SELECT ?p ?x WHERE { :a ?p ?x . ?x :p+ :a }",
        "SELECT ?x WHERE { :a :nosuch* ?x }",
        "SELECT * WHERE { ?s :nosuch ?o }",
        "ASK { :a :p/:p/:p :a }",
        "ASK { :a ^:p :c }",
        "ASK { :d :p+ ?x }",
        // CONSTRUCT and DESCRIBE.
        "CONSTRUCT { ?x :reaches ?y } WHERE { ?x :p+ ?y }",
        "CONSTRUCT WHERE { ?x :q ?y }",
        "DESCRIBE ?x WHERE { :c :p ?x }",
        "DESCRIBE :d",
    ];
    for (q, ordered) in ordered
        .iter()
        .map(|q| (q, true))
        .chain(unordered.iter().map(|q| (q, false)))
    {
        let q = format!("{PREFIX}{q}");
        let want = rows(
            oxigraph::sparql::SparqlEvaluator::new()
                .parse_query(&q)
                .unwrap()
                .on_store(&store)
                .execute()
                .unwrap(),
        );
        let want = by_name(want);
        let on_store = by_name(rows(db.query(&q).unwrap_or_else(|e| panic!("{q}: {e}"))));
        let embedded = by_name(rows(paths.evaluate(&store, &q).unwrap()));
        for (name, got) in [("store", &on_store), ("embedded", &embedded)] {
            assert_eq!(got.0, want.0, "{name} variables: {q}");
            if ordered {
                assert_eq!(got.1, want.1, "{name}: {q}");
            } else {
                let (mut a, mut b) = (got.1.clone(), want.1.clone());
                a.sort();
                b.sort();
                assert_eq!(a, b, "{name}: {q}");
            }
        }
    }
    let (cpu, _) = db.path_service_runs();
    assert!(cpu > 30, "only {cpu} groups went to the path service");
}

/// Rows with their columns sorted by variable name (`SELECT *` lists variables in order
/// of appearance, Oxigraph by name).
fn by_name((vars, rows): (Vec<String>, Vec<Vec<String>>)) -> (Vec<String>, Vec<Vec<String>>) {
    let mut order: Vec<usize> = (0..vars.len()).collect();
    order.sort_by_key(|&i| &vars[i]);
    (
        order.iter().map(|&i| vars[i].clone()).collect(),
        rows.into_iter()
            .map(|r| {
                if r.len() == vars.len() {
                    order.iter().map(|&i| r[i].clone()).collect()
                } else {
                    r
                }
            })
            .collect(),
    )
}

#[test]
fn every_quad_pattern_reads_what_oxigraph_reads() {
    // Each position of a quad pattern free, bound to a term of the data, or bound to one
    // the store lacks: rows, columns, cells and scans of the trees, every relation of a
    // graph for a free predicate, every named graph for a free graph.
    let (store, db, _dir) = both();
    let subjects = ["?s", ":a", ":c", ":zz", "11"];
    let predicates = ["?p", ":p", ":link", ":age", ":zz"];
    let objects = ["?o", ":c", ":b", "30", "\"x\"", ":zz"];
    let graphs = [
        "",
        "GRAPH ?g",
        "GRAPH :g1",
        "GRAPH :g2",
        "GRAPH :zz",
        "GRAPH :a",
    ];
    let mut non_empty = 0;
    for s in subjects {
        for p in predicates {
            for o in objects {
                for g in graphs {
                    let q = format!("{PREFIX}SELECT * WHERE {{ {g} {{ {s} {p} {o} }} }}");
                    let want = oxigraph_answer(&store, &q);
                    let got = named_multiset(db.query(&q).unwrap());
                    assert_eq!(got, want, "{q}");
                    non_empty += !want.is_empty() as usize;
                }
            }
        }
    }
    assert!(non_empty > 40, "{non_empty}");
}

#[test]
fn select_star_lists_variables_in_order_of_appearance() {
    let (store, db, _dir) = both();
    let q = format!("{PREFIX}SELECT * WHERE {{ ?z :p ?a . ?a :q+ ?m OPTIONAL {{ ?m :age ?b }} }}");
    let (vars, _) = rows(db.query(&q).unwrap());
    assert_eq!(vars, ["z", "a", "m", "b"]);
    // The embedding lists them alike.
    let (vars, _) = rows(K2Paths::cpu().evaluate(&store, &q).unwrap());
    assert_eq!(vars, ["z", "a", "m", "b"]);
    // Strings, IRIs and comments hold no variables; DISTINCT and subqueries keep the order.
    let q =
        "# ?c\nSELECT DISTINCT * WHERE { ?y <http://e/p> \"?b\" . <http://e/?a> <http://e/q> ?x \
             { SELECT * WHERE { ?w <http://e/r> ?v } } }";
    let (vars, _) = rows(db.query(q).unwrap());
    assert_eq!(vars, ["y", "x", "w", "v"]);
    // An explicit list keeps its own order.
    let (vars, _) = rows(
        db.query("SELECT ?b ?a WHERE { ?a <http://e/p> ?b }")
            .unwrap(),
    );
    assert_eq!(vars, ["b", "a"]);
}

#[test]
fn oxigraph_deduplicates_a_mixed_negated_set() {
    // `!(:p|^:q)` is the bag union of a forward and an inverse part (§18.4): (a, c) comes
    // once from `:a :q :c` and once from `:c :p :a`. Oxigraph 0.5.13 returns it once.
    let (store, db, _dir) = both();
    let q = "PREFIX : <http://e/> SELECT ?s ?o WHERE { ?s !(:p|^:q) ?o }";
    let theirs = oxigraph_answer(&store, q);
    let ours = named_multiset(db.query(q).unwrap());
    assert_eq!(
        ours,
        named_multiset(K2Paths::cpu().evaluate(&store, q).unwrap())
    );
    let pair = "o=<http://e/c>\ts=<http://e/a>";
    assert_eq!(ours[pair], 2);
    assert_eq!(theirs[pair], 1);
    // Same set otherwise.
    assert!(ours.keys().eq(theirs.keys()));
}

#[test]
fn oxigraph_deduplicates_a_sequence_evaluated_per_binding() {
    // `:n2` reaches `:n1` through `^:r/!:r` along two triples (`:n2 :p :n2`, `:n2 :q :n2`):
    // two solutions (§18.4), which Oxigraph 0.5.13 also gives for the group alone, but
    // once where its optimizer evaluates the path per binding of `?x` from the pattern
    // joined to a UNION around it.
    let store = Store::new().unwrap();
    let e = |s: &str| NamedNode::new(format!("http://e/{s}")).unwrap();
    for (s, p, o) in [("n2", "r", "n1"), ("n2", "p", "n2"), ("n2", "q", "n2")] {
        store
            .insert(&Quad::new(e(s), e(p), e(o), GraphName::DefaultGraph))
            .unwrap();
    }
    let dir = tempfile::tempdir().unwrap();
    let db = database_of(&store, dir.path());
    let row = "x=<http://e/n2>\ty=<http://e/n1>";
    let alone = format!("{PREFIX}SELECT ?x ?y WHERE {{ ?y ^:r/!:r ?x }}");
    let joined = format!(
        "{PREFIX}SELECT ?x ?y WHERE {{ ?x :r ?a {{ ?y ^:r/!:r ?x }} UNION {{ ?x :none ?y }} }}"
    );
    let twice = |q: &str| named_multiset(db.query(q).unwrap())[row];
    assert_eq!((twice(&alone), twice(&joined)), (2, 2));
    assert_eq!(
        named_multiset(K2Paths::cpu().evaluate(&store, &joined).unwrap())[row],
        2
    );
    assert_eq!(oxigraph_answer(&store, &alone)[row], 2);
    assert_eq!(oxigraph_answer(&store, &joined)[row], 1);
}

#[test]
fn paths_stay_inside_each_named_graph() {
    let (store, db, _dir) = both();
    // :a :link :b is in g1, :b :link :c in g2: no path crosses from one to the other.
    for q in [
        "PREFIX : <http://e/> SELECT ?g ?x WHERE { GRAPH ?g { :a :link/:link ?x } }",
        // The default graph holds no :link triple at all.
        "PREFIX : <http://e/> SELECT ?x WHERE { :a :link+ ?x }",
    ] {
        assert!(multiset(db.query(q).unwrap()).is_empty(), "{q}");
        assert!(
            multiset(K2Paths::cpu().evaluate(&store, q).unwrap()).is_empty(),
            "{q}"
        );
    }
}

#[test]
fn a_number_after_a_predicate_is_not_a_path() {
    let (_, db, _dir) = both();
    let ask = |q: &str| match db.query(q).unwrap() {
        QueryResults::Boolean(b) => b,
        _ => panic!("not a boolean"),
    };
    // `+11` is the integer 11, not `<b>+` followed by 11.
    assert!(ask("ASK { <http://e/a> <http://e/b> +11 }"));
    assert!(!ask("ASK { <http://e/a> <http://e/b> +12 }"));
    // With a space the `+` is the path operator: a :b+ path to 11 exists too.
    assert!(ask("ASK { <http://e/a> <http://e/b>+ 11 }"));
}

#[test]
fn invalid_sparql_reports_the_position() {
    let (_, db, _dir) = both();
    let Err(e) = db.query("SELECT ?x WHERE { ?x <http://e/p>+ ?y") else {
        panic!("an invalid query was accepted")
    };
    assert!(matches!(e, SparqlError::Syntax(_)));
    let msg = e.to_string();
    assert!(msg.contains("1:"), "no position in: {msg}");
    // The message is the error's own: a chain of sources would print it twice.
    assert!(std::error::Error::source(&e).is_none());
    // The excerpt points past the last term, where the closing brace is missing.
    let text = "SELECT ?x\nWHERE { ?x <http://e/p>+ ?y";
    let Err(e) = db.query(text) else {
        panic!("an invalid query was accepted")
    };
    let excerpt = e.excerpt(text).expect("an excerpt");
    let (line, caret) = excerpt.split_once('\n').unwrap();
    assert_eq!(line, "line 2: WHERE { ?x <http://e/p>+ ?y");
    assert_eq!(caret.find('^'), Some(line.chars().count()), "{excerpt}");
    assert!(SparqlError::Timeout.excerpt(text).is_none());
    let Err(e) = K2Paths::cpu().evaluate(&Store::new().unwrap(), "SELECT ?x WHERE {\n ?x <p ?y }")
    else {
        panic!("an invalid query was accepted")
    };
    assert!(e.to_string().contains("invalid SPARQL"), "{e}");
}

#[test]
fn updates_are_refused_and_relative_iris_resolve_against_the_base() {
    let (_, db, _dir) = both();
    for update in [
        "INSERT DATA { <http://e/a> <http://e/p> <http://e/z> }",
        "PREFIX : <http://e/> DELETE WHERE { :a :p ?x }",
        "CLEAR ALL",
    ] {
        let Err(e) = db.query(update) else {
            panic!("{update} was accepted")
        };
        assert!(matches!(e, SparqlError::Update), "{update}: {e}");
        assert_eq!(
            e.to_string(),
            "updates are not supported: the store is read-only"
        );
    }
    // `<g2>` against the base `http://e/`: the named graph `:g2`.
    let options = QueryOptions {
        base_iri: Some("http://e/".into()),
        ..QueryOptions::default()
    };
    let q = "SELECT ?x WHERE { GRAPH <g2> { <b> <link>+ ?x } }";
    let got = multiset(db.query_with(q, &options).unwrap());
    assert_eq!(got.len(), 2, "{got:?}");
    // Without a base the relative IRI does not parse.
    assert!(matches!(db.query(q), Err(SparqlError::Syntax(_))));
    let bad = QueryOptions {
        base_iri: Some("not an iri".into()),
        ..QueryOptions::default()
    };
    assert!(matches!(
        db.query_with(q, &bad),
        Err(SparqlError::BaseIri { .. })
    ));
}

/// Whether reading `results` to the end meets an error (the rows read before it are
/// counted in `read`).
fn ends_in_error(results: QueryResults<'_>, read: &mut u64) -> Option<QueryEvaluationError> {
    let QueryResults::Solutions(rows) = results else {
        panic!("not solutions")
    };
    for r in rows {
        match r {
            Ok(_) => *read += 1,
            Err(e) => return Some(e),
        }
    }
    None
}

#[test]
fn a_query_past_its_time_limit_is_cancelled() {
    // A complete graph of 200 nodes: three joined hops have 200^4 solutions.
    let store = Store::new().unwrap();
    let n = |i: usize| NamedNode::new(format!("http://e/n{i}")).unwrap();
    let p = NamedNode::new("http://e/p").unwrap();
    for i in 0..200 {
        for j in 0..200 {
            store
                .insert(&Quad::new(n(i), p.clone(), n(j), GraphName::DefaultGraph))
                .unwrap();
        }
    }
    let dir = tempfile::tempdir().unwrap();
    let db = database_of(&store, dir.path());
    let limited = |ms| QueryOptions {
        timeout: Some(Duration::from_millis(ms)),
        ..QueryOptions::default()
    };
    // Oxigraph's evaluator stops as it reads the data.
    let started = std::time::Instant::now();
    let q = "SELECT (COUNT(*) AS ?n) WHERE { ?a <http://e/p> ?b . ?b <http://e/p> ?c . ?c <http://e/p> ?d }";
    let mut read = 0;
    let e = ends_in_error(db.query_with(q, &limited(200)).unwrap(), &mut read);
    assert!(matches!(e, Some(QueryEvaluationError::Cancelled)), "{e:?}");
    assert_eq!(read, 0);
    assert!(
        started.elapsed() < Duration::from_secs(20),
        "{:?}",
        started.elapsed()
    );
    // The path service stops at the deadline too: no answer, whole or cut. The error
    // comes before the first row or while the rows are read, as the clock decides.
    let q = "SELECT * WHERE { ?a <http://e/p>/<http://e/p>+ ?b }";
    let mut read = 0;
    if let Ok(results) = db.query_with(q, &limited(1)) {
        let e = ends_in_error(results, &mut read);
        assert!(e.is_some(), "{read} rows and no error");
    }
    // Rows handed out past the deadline end in the cancellation too.
    let q = "SELECT * WHERE { ?a <http://e/p> ?b . ?c <http://e/p> ?d }";
    let QueryResults::Solutions(mut rows) = db.query_with(q, &limited(300)).unwrap() else {
        panic!("not solutions")
    };
    assert!(rows.next().unwrap().is_ok());
    std::thread::sleep(Duration::from_millis(400));
    // The clock is read every 64 rows.
    let rest: Vec<_> = rows.by_ref().take(100).collect();
    assert!(
        matches!(rest.last(), Some(Err(QueryEvaluationError::Cancelled))),
        "{} rows after the deadline",
        rest.len()
    );
    assert!(rest.len() <= 64);
    assert!(rows.next().is_none());
}

#[test]
fn store_changes_are_noticed() {
    let store = store();
    let paths = K2Paths::cpu().with_change_check(ChangeCheck::Full);
    let q = "SELECT ?x WHERE { <http://e/d> <http://e/q>+ ?x }";
    let count = |paths: &K2Paths<_>| multiset(paths.evaluate(&store, q).unwrap()).len();
    assert_eq!(count(&paths), 1);
    let n = |s: &str| NamedNode::new(format!("http://e/{s}")).unwrap();
    store
        .insert(&Quad::new(n("e"), n("q"), n("f"), GraphName::DefaultGraph))
        .unwrap();
    assert_eq!(count(&paths), 2);
    // Same number of quads, different content.
    store
        .remove(&Quad::new(n("e"), n("q"), n("f"), GraphName::DefaultGraph))
        .unwrap();
    store
        .insert(&Quad::new(n("e"), n("r"), n("f"), GraphName::DefaultGraph))
        .unwrap();
    assert_eq!(count(&paths), 1);
    // The default, sampled check notices a change of the count.
    let sampled = K2Paths::cpu();
    assert_eq!(count(&sampled), 1);
    store
        .insert(&Quad::new(n("e"), n("q"), n("g"), GraphName::DefaultGraph))
        .unwrap();
    assert_eq!(count(&sampled), 2);
}

#[test]
fn result_formats_round_trip_and_limits_are_reported() {
    let (_, db, _dir) = both();
    let q = "PREFIX : <http://e/> SELECT ?x ?l WHERE { ?x :p* :c OPTIONAL { ?x :r ?l } }";
    let (vars, want) = rows(db.query(q).unwrap());
    let mut want_sorted = want.clone();
    want_sorted.sort();
    for (format, parse) in [
        (ResultFormat::Json, Some(QueryResultsFormat::Json)),
        (ResultFormat::Xml, Some(QueryResultsFormat::Xml)),
        (ResultFormat::Tsv, Some(QueryResultsFormat::Tsv)),
        (ResultFormat::Csv, None),
        (ResultFormat::Table, None),
    ] {
        let mut out = Vec::new();
        let written = write_results(db.query(q).unwrap(), format, None, &mut out).unwrap();
        assert_eq!(written.rows, want.len() as u64);
        assert!(!written.truncated);
        let text = String::from_utf8(out).unwrap();
        assert!(text.contains("http://e/a"), "{format:?}: {text}");
        assert!(!text.ends_with("\n\n"), "{format:?}: {text:?}");
        if let Some(f) = parse {
            let ReaderQueryResultsParserOutput::Solutions(s) = QueryResultsParser::from_format(f)
                .for_reader(text.as_bytes())
                .unwrap()
            else {
                panic!("{format:?}: not solutions")
            };
            let mut back: Vec<Vec<String>> = s
                .map(|x| {
                    let x = x.unwrap();
                    vars.iter()
                        .map(|v| x.get(v.as_str()).map(|t| t.to_string()).unwrap_or_default())
                        .collect()
                })
                .collect();
            back.sort();
            assert_eq!(back, want_sorted, "{format:?}");
        }
        // A limit below the answer's size writes that many rows and says more were left.
        let mut out = Vec::new();
        let written = write_results(db.query(q).unwrap(), format, Some(2), &mut out).unwrap();
        assert_eq!((written.rows, written.truncated), (2, true), "{format:?}");
        let mut out = Vec::new();
        let all = want.len() as u64;
        let written = write_results(db.query(q).unwrap(), format, Some(all), &mut out).unwrap();
        assert_eq!(
            (written.rows, written.truncated),
            (all, false),
            "{format:?}"
        );
    }
    // CONSTRUCT writes RDF, SELECT results formats; each refuses the other's.
    let construct = "CONSTRUCT { ?x <http://e/r2> ?y } WHERE { ?x <http://e/p>+ ?y }";
    let mut out = Vec::new();
    let written = write_results(
        db.query(construct).unwrap(),
        ResultFormat::Turtle,
        Some(3),
        &mut out,
    )
    .unwrap();
    assert_eq!((written.rows, written.truncated), (3, true));
    let parsed = spargebra::SparqlParser::new()
        .parse_query(construct)
        .unwrap();
    assert!(ResultFormat::Json.check(&parsed).is_err());
    assert!(ResultFormat::NTriples.check(&parsed).is_ok());
    assert!(write_results(db.query(q).unwrap(), ResultFormat::NTriples, None, &mut out).is_err());
}
