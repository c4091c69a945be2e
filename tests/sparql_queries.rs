//! Whole queries of the supported subset against Oxigraph, GRAPH scoping, result formats,
//! store change detection, syntax edge cases and bad input.

use std::collections::HashMap;

use k2rpq::engine::cpu::CpuEngine;
use k2rpq::oxigraph::{ChangeCheck, K2Paths};
use k2rpq::sparql::{query, write_answer, MemoryDataset, QueryAnswer, ResultFormat, SparqlError};
use oxigraph::sparql::{QueryResults, SparqlEvaluator};
use oxigraph::store::Store;
use oxrdf::{GraphName, Literal, NamedNode, Quad, Term};
use sparesults::{QueryResultsFormat, QueryResultsParser, ReaderQueryResultsParserOutput};

const DATA: &str = r#"
@prefix : <http://e/> .
:a :p :b , :c ; :q :c ; :age 30 .
:b :p :c ; :q :d ; :age 25 .
:c :p :a ; :r "x" .
:d :q :e ; :age 41 .
<http://e/a> <http://e/b> 11 .
:g1 { :a :link :b . }
:g2 { :b :link :c . :c :link :d . }
"#;

fn store() -> Store {
    let store = Store::new().unwrap();
    store
        .load_from_reader(oxigraph::io::RdfFormat::TriG, DATA.as_bytes())
        .unwrap();
    store
}

type Row = Vec<Option<Term>>;

fn rows_of_answer(a: QueryAnswer) -> (Vec<String>, Vec<Row>) {
    match a {
        QueryAnswer::Solutions { variables, rows } => (
            variables.iter().map(|v| v.as_str().to_owned()).collect(),
            rows,
        ),
        QueryAnswer::Boolean(b) => (vec![], vec![vec![Some(Literal::from(b).into())]]),
    }
}

fn rows_of_results(r: QueryResults<'static>) -> (Vec<String>, Vec<Row>) {
    match r {
        QueryResults::Solutions(s) => {
            let vars = s.variables().to_vec();
            let rows = s
                .map(|x| {
                    let x = x.unwrap();
                    vars.iter().map(|v| x.get(v).cloned()).collect()
                })
                .collect();
            (vars.iter().map(|v| v.as_str().to_owned()).collect(), rows)
        }
        QueryResults::Boolean(b) => (vec![], vec![vec![Some(Literal::from(b).into())]]),
        QueryResults::Graph(_) => panic!("no graphs"),
    }
}

fn counts(rows: &[Row]) -> HashMap<Row, usize> {
    let mut m = HashMap::new();
    for r in rows {
        *m.entry(r.clone()).or_insert(0) += 1;
    }
    m
}

#[test]
fn supported_subset_matches_oxigraph() {
    let store = store();
    let dataset = MemoryDataset::from_store(&store).unwrap();
    let paths = K2Paths::cpu();
    let prefix = "PREFIX : <http://e/> ";
    let ordered = [
        "SELECT ?x ?a WHERE { ?x :age ?a } ORDER BY DESC(?a)",
        "SELECT ?x ?y WHERE { ?x :p+ ?y } ORDER BY ?x ?y LIMIT 3 OFFSET 2",
        "SELECT ?x (COUNT(?y) AS ?n) WHERE { ?x :p ?y } GROUP BY ?x ORDER BY ?x",
    ];
    let unordered = [
        "SELECT ?x ?y WHERE { ?x :p/:q ?y }",
        "SELECT ?x ?y WHERE { ?x (:p|:q)/:q ?y }",
        "SELECT DISTINCT ?y WHERE { ?x :p* ?y }",
        "SELECT ?x ?z WHERE { ?x :p ?y . ?y :q ?z }",
        "SELECT ?x WHERE { VALUES ?x { :a :d :zz } ?x :q+ ?y }",
        "SELECT ?x ?a WHERE { ?x :age ?a FILTER(?a > 26 && ?a != 41) }",
        "SELECT ?x WHERE { ?x :p ?y FILTER(?y = :c || ?y IN (:a)) }",
        "SELECT ?x WHERE { ?x :r ?l FILTER(isLiteral(?l) && bound(?x)) }",
        "SELECT (COUNT(*) AS ?n) WHERE { ?x :p* ?y }",
        "SELECT (COUNT(DISTINCT ?y) AS ?n) WHERE { ?x :p/:p ?y }",
        "SELECT ?x (COUNT(?y) AS ?n) WHERE { ?x :p/:p? ?y } GROUP BY ?x",
        "SELECT ?g ?x WHERE { GRAPH ?g { :a :link+ ?x } }",
        "SELECT ?g ?x ?y WHERE { GRAPH ?g { ?x :link/:link ?y } }",
        "SELECT ?x WHERE { GRAPH :g2 { :b :link* ?x } }",
        "SELECT ?x WHERE { { :a :p ?x } UNION { :a :q ?x } }",
        "SELECT ?x ?k WHERE { ?x :p :c BIND(:k AS ?k) }",
        "ASK { :a :p/:p/:p :a }",
        "ASK { :a ^:p :c }",
        "SELECT ?x WHERE { :a :nosuch* ?x }",
    ];
    for (q, ordered) in ordered
        .iter()
        .map(|q| (q, true))
        .chain(unordered.iter().map(|q| (q, false)))
    {
        let q = format!("{prefix}{q}");
        let want = rows_of_results(
            SparqlEvaluator::new()
                .parse_query(&q)
                .unwrap()
                .on_store(&store)
                .execute()
                .unwrap(),
        );
        let mine = rows_of_answer(
            query(&CpuEngine::new(), &dataset, &q).unwrap_or_else(|e| panic!("{q}: {e}")),
        );
        let embedded = rows_of_results(paths.evaluate(&store, &q).unwrap());
        for (name, got) in [("standalone", &mine), ("embedded", &embedded)] {
            assert_eq!(got.0, want.0, "{name} variables: {q}");
            if ordered {
                assert_eq!(got.1, want.1, "{name}: {q}");
            } else {
                assert_eq!(counts(&got.1), counts(&want.1), "{name}: {q}");
            }
        }
    }
}

#[test]
fn oxigraph_deduplicates_a_mixed_negated_set() {
    // `!(:p|^:q)` is the bag union of a forward and an inverse part (§18.4): (a, c) comes
    // once from `:a :q :c` and once from `:c :p :a`. Oxigraph 0.5.13 returns it once.
    let store = store();
    let dataset = MemoryDataset::from_store(&store).unwrap();
    let q = "PREFIX : <http://e/> SELECT ?s ?o WHERE { ?s !(:p|^:q) ?o }";
    let want = rows_of_results(
        SparqlEvaluator::new()
            .parse_query(q)
            .unwrap()
            .on_store(&store)
            .execute()
            .unwrap(),
    );
    let mine = rows_of_answer(query(&CpuEngine::new(), &dataset, q).unwrap());
    let embedded = rows_of_results(K2Paths::cpu().evaluate(&store, q).unwrap());
    assert_eq!(counts(&mine.1), counts(&embedded.1));
    let (ours, theirs) = (counts(&mine.1), counts(&want.1));
    let n = |s: &str| Some(Term::from(NamedNode::new(format!("http://e/{s}")).unwrap()));
    assert_eq!(ours[&vec![n("a"), n("c")]], 2);
    assert_eq!(theirs[&vec![n("a"), n("c")]], 1);
    // Same set otherwise.
    let keys = |m: &HashMap<Row, usize>| {
        let mut k: Vec<String> = m.keys().map(|r| format!("{r:?}")).collect();
        k.sort();
        k
    };
    assert_eq!(keys(&ours), keys(&theirs));
}

#[test]
fn paths_stay_inside_each_named_graph() {
    let store = store();
    let dataset = MemoryDataset::from_store(&store).unwrap();
    // :a :link :b is in g1, :b :link :c in g2: no path crosses from one to the other.
    let q = "PREFIX : <http://e/> SELECT ?g ?x WHERE { GRAPH ?g { :a :link/:link ?x } }";
    let (_, rows) = rows_of_answer(query(&CpuEngine::new(), &dataset, q).unwrap());
    assert!(rows.is_empty());
    let (_, rows) = rows_of_results(K2Paths::cpu().evaluate(&store, q).unwrap());
    assert!(rows.is_empty());
    // The default graph holds no :link triple at all.
    let q = "PREFIX : <http://e/> SELECT ?x WHERE { :a :link+ ?x }";
    let (_, rows) = rows_of_answer(query(&CpuEngine::new(), &dataset, q).unwrap());
    assert!(rows.is_empty());
}

#[test]
fn a_number_after_a_predicate_is_not_a_path() {
    let store = store();
    let dataset = MemoryDataset::from_store(&store).unwrap();
    // `+11` is the integer 11, not `<b>+` followed by 11.
    let q = "ASK { <http://e/a> <http://e/b> +11 }";
    assert_eq!(
        query(&CpuEngine::new(), &dataset, q).unwrap(),
        QueryAnswer::Boolean(true)
    );
    let q = "ASK { <http://e/a> <http://e/b> +12 }";
    assert_eq!(
        query(&CpuEngine::new(), &dataset, q).unwrap(),
        QueryAnswer::Boolean(false)
    );
    // With a space the `+` is the path operator: a :b+ path to 11 exists too.
    let q = "ASK { <http://e/a> <http://e/b>+ 11 }";
    assert_eq!(
        query(&CpuEngine::new(), &dataset, q).unwrap(),
        QueryAnswer::Boolean(true)
    );
}

#[test]
fn invalid_sparql_reports_the_position() {
    let dataset = MemoryDataset::default();
    let e = query(
        &CpuEngine::new(),
        &dataset,
        "SELECT ?x WHERE { ?x <http://e/p>+ ?y",
    )
    .unwrap_err();
    assert!(matches!(e, SparqlError::Syntax(_)));
    let msg = e.to_string();
    assert!(msg.contains("1:"), "no position in: {msg}");
    // The message is the error's own: a chain of sources would print it twice.
    assert!(std::error::Error::source(&e).is_none());
    // The excerpt points past the last term, where the closing brace is missing.
    let text = "SELECT ?x\nWHERE { ?x <http://e/p>+ ?y";
    let e = query(&CpuEngine::new(), &dataset, text).unwrap_err();
    let excerpt = e.excerpt(text).expect("an excerpt");
    let (line, caret) = excerpt.split_once('\n').unwrap();
    assert_eq!(line, "line 2: WHERE { ?x <http://e/p>+ ?y");
    assert_eq!(caret.find('^'), Some(line.chars().count()), "{excerpt}");
    assert!(SparqlError::Unsupported("MINUS".into())
        .excerpt(text)
        .is_none());
    let Err(e) = K2Paths::cpu().evaluate(&Store::new().unwrap(), "SELECT ?x WHERE {\n ?x <p ?y }")
    else {
        panic!("an invalid query was accepted")
    };
    assert!(e.to_string().contains("invalid SPARQL"), "{e}");
}

#[test]
fn unsupported_constructs_name_themselves() {
    let dataset = MemoryDataset::default();
    for (q, name) in [
        (
            "SELECT * WHERE { ?s ?p ?o OPTIONAL { ?o ?q ?r } }",
            "OPTIONAL",
        ),
        ("SELECT * WHERE { ?s ?p ?o MINUS { ?o ?q ?r } }", "MINUS"),
        ("CONSTRUCT { ?s ?p ?o } WHERE { ?s ?p ?o }", "CONSTRUCT"),
        ("SELECT * FROM <http://e/g> WHERE { ?s ?p ?o }", "FROM"),
        ("SELECT (SUM(?o) AS ?x) WHERE { ?s ?p ?o }", "aggregate"),
        ("SELECT * WHERE { ?s ?p ?o BIND(STR(?o) AS ?x) }", "BIND"),
        (
            "SELECT * WHERE { ?s ?p ?o FILTER(REGEX(STR(?o), \"a\")) }",
            "FILTER",
        ),
    ] {
        let e = query(&CpuEngine::new(), &dataset, q).unwrap_err();
        assert!(matches!(e, SparqlError::Unsupported(_)), "{q}: {e}");
        assert!(e.to_string().contains(name), "{q}: {e}");
    }
    // The embedding delegates all of these to Oxigraph.
    let store = store();
    let q = "SELECT ?s ?r WHERE { ?s <http://e/p>+ ?o OPTIONAL { ?o <http://e/r> ?r } }";
    let (_, rows) = rows_of_results(K2Paths::cpu().evaluate(&store, q).unwrap());
    assert_eq!(rows.len(), 9);
}

#[test]
fn unknown_predicate_gives_the_empty_result() {
    let store = store();
    let dataset = MemoryDataset::from_store(&store).unwrap();
    for q in [
        "SELECT * WHERE { ?s <http://e/nosuch> ?o }",
        "SELECT * WHERE { ?s <http://e/nosuch>+ ?o }",
        "SELECT * WHERE { ?s <http://e/p>/<http://e/nosuch> ?o }",
    ] {
        let (_, rows) = rows_of_answer(query(&CpuEngine::new(), &dataset, q).unwrap());
        assert!(rows.is_empty(), "{q}");
        let (_, rows) = rows_of_results(K2Paths::cpu().evaluate(&store, q).unwrap());
        assert!(rows.is_empty(), "{q}");
    }
}

#[test]
fn store_changes_are_noticed() {
    let store = store();
    let paths = K2Paths::cpu().with_change_check(ChangeCheck::Full);
    let q = "SELECT ?x WHERE { <http://e/d> <http://e/q>+ ?x }";
    let (_, rows) = rows_of_results(paths.evaluate(&store, q).unwrap());
    assert_eq!(rows.len(), 1);
    let n = |s: &str| NamedNode::new(format!("http://e/{s}")).unwrap();
    store
        .insert(&Quad::new(n("e"), n("q"), n("f"), GraphName::DefaultGraph))
        .unwrap();
    let (_, rows) = rows_of_results(paths.evaluate(&store, q).unwrap());
    assert_eq!(rows.len(), 2);
    // Same number of quads, different content.
    store
        .remove(&Quad::new(n("e"), n("q"), n("f"), GraphName::DefaultGraph))
        .unwrap();
    store
        .insert(&Quad::new(n("e"), n("r"), n("f"), GraphName::DefaultGraph))
        .unwrap();
    let (_, rows) = rows_of_results(paths.evaluate(&store, q).unwrap());
    assert_eq!(rows.len(), 1);
    // The default, sampled check notices a change of the count.
    let sampled = K2Paths::cpu();
    assert_eq!(
        rows_of_results(sampled.evaluate(&store, q).unwrap())
            .1
            .len(),
        1
    );
    store
        .insert(&Quad::new(n("e"), n("q"), n("g"), GraphName::DefaultGraph))
        .unwrap();
    assert_eq!(
        rows_of_results(sampled.evaluate(&store, q).unwrap())
            .1
            .len(),
        2
    );
}

#[test]
fn result_formats_round_trip() {
    let store = store();
    let dataset = MemoryDataset::from_store(&store).unwrap();
    let q = "PREFIX : <http://e/> SELECT ?x ?l WHERE { ?x :p* :c OPTIONAL {} }";
    let q = q.replace(" OPTIONAL {}", "");
    let answer = query(&CpuEngine::new(), &dataset, &q).unwrap();
    let (vars, rows) = rows_of_answer(answer.clone());
    for (format, parse) in [
        (ResultFormat::Json, Some(QueryResultsFormat::Json)),
        (ResultFormat::Xml, Some(QueryResultsFormat::Xml)),
        (ResultFormat::Tsv, Some(QueryResultsFormat::Tsv)),
        (ResultFormat::Csv, None),
        (ResultFormat::Table, None),
    ] {
        let mut out = Vec::new();
        write_answer(&answer, format, &mut out).unwrap();
        let text = String::from_utf8(out).unwrap();
        assert!(text.contains("http://e/a"), "{format:?}: {text}");
        if let Some(f) = parse {
            let ReaderQueryResultsParserOutput::Solutions(s) = QueryResultsParser::from_format(f)
                .for_reader(text.as_bytes())
                .unwrap()
            else {
                panic!("{format:?}: not solutions")
            };
            let back: Vec<Row> = s
                .map(|x| {
                    let x = x.unwrap();
                    vars.iter().map(|v| x.get(v.as_str()).cloned()).collect()
                })
                .collect();
            assert_eq!(counts(&back), counts(&rows), "{format:?}");
        }
    }
}
