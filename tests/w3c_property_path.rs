//! The W3C SPARQL 1.1 property-path tests, read from their manifest and run through both
//! ways in: a k2rpq store loaded from the data ([`Database::query`]: Oxigraph's evaluator
//! over the store, the paths on k2rpq's engines) and the Oxigraph embedding over the data
//! in memory ([`K2Paths`]). Results are compared as multisets of solutions, blank nodes up
//! to renaming.

#[path = "data/mod.rs"]
mod data;

#[path = "answers/mod.rs"]
mod answers;

use std::collections::HashMap;
use std::fs::File;
use std::io::BufReader;
use std::path::{Path, PathBuf};

use k2rpq::database::Database;
use k2rpq::oxigraph::K2Paths;
use oxigraph::sparql::QueryResults;
use oxigraph::store::Store;
use oxrdf::{GraphName, NamedNode, NamedOrBlankNode, Quad, Term, Triple};
use oxttl::TurtleParser;
use sparesults::{
    QueryResultsFormat, QueryResultsParser, QuerySolution, ReaderQueryResultsParserOutput,
};

const MF: &str = "http://www.w3.org/2001/sw/DataAccess/tests/test-manifest#";
const QT: &str = "http://www.w3.org/2001/sw/DataAccess/tests/test-query#";
const RDF: &str = "http://www.w3.org/1999/02/22-rdf-syntax-ns#";

/// The W3C property-path tests under the shared folder.
fn suite_dir() -> Option<PathBuf> {
    data::shared_file("testsuites/w3c-property-path/manifest.ttl")
        .map(|m| m.parent().unwrap().canonicalize().expect("canonical path"))
}

fn file_iri(p: &Path) -> String {
    format!("file://{}", p.display())
}

fn iri_path(iri: &str) -> PathBuf {
    PathBuf::from(iri.strip_prefix("file://").expect("file IRI"))
}

fn parse_turtle(path: &Path) -> Vec<Triple> {
    let parser = TurtleParser::new()
        .with_base_iri(file_iri(path))
        .expect("base IRI");
    parser
        .for_reader(BufReader::new(File::open(path).expect("open")))
        .collect::<Result<_, _>>()
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// Row of a result: variable name -> term, unbound variables absent.
type Row = Vec<(String, Term)>;

#[derive(Debug)]
enum Answer {
    Boolean(bool),
    Rows(Vec<Row>),
}

struct Test {
    name: String,
    query: PathBuf,
    data: Vec<PathBuf>,
    graph_data: Vec<(String, PathBuf)>,
    result: PathBuf,
}

fn read_manifest(dir: &Path) -> Vec<Test> {
    let triples = parse_turtle(&dir.join("manifest.ttl"));
    let objects = |s: &NamedOrBlankNode, p: &str| -> Vec<Term> {
        triples
            .iter()
            .filter(|t| &t.subject == s && t.predicate.as_str() == p)
            .map(|t| t.object.clone())
            .collect()
    };
    let as_node = |t: &Term| -> NamedOrBlankNode {
        match t {
            Term::NamedNode(n) => n.clone().into(),
            Term::BlankNode(b) => b.clone().into(),
            other => panic!("not a node: {other}"),
        }
    };
    let manifest: NamedOrBlankNode = NamedNode::new(file_iri(&dir.join("manifest.ttl")))
        .unwrap()
        .into();
    let mut list = as_node(&objects(&manifest, &format!("{MF}entries"))[0]);
    let mut tests = Vec::new();
    loop {
        if let NamedOrBlankNode::NamedNode(n) = &list {
            if n.as_str() == format!("{RDF}nil") {
                break;
            }
        }
        let entry = as_node(&objects(&list, &format!("{RDF}first"))[0]);
        let name = match &objects(&entry, &format!("{MF}name"))[0] {
            Term::Literal(l) => l.value().to_owned(),
            other => other.to_string(),
        };
        let action = as_node(&objects(&entry, &format!("{MF}action"))[0]);
        let path_of = |t: &Term| match t {
            Term::NamedNode(n) => iri_path(n.as_str()),
            other => panic!("not an IRI: {other}"),
        };
        let query = path_of(&objects(&action, &format!("{QT}query"))[0]);
        let data = objects(&action, &format!("{QT}data"))
            .iter()
            .map(path_of)
            .collect();
        let graph_data = objects(&action, &format!("{QT}graphData"))
            .iter()
            .map(|t| {
                (
                    t.to_string().trim_matches(['<', '>']).to_owned(),
                    path_of(t),
                )
            })
            .collect();
        let result = path_of(&objects(&entry, &format!("{MF}result"))[0]);
        tests.push(Test {
            name,
            query,
            data,
            graph_data,
            result,
        });
        list = as_node(&objects(&list, &format!("{RDF}rest"))[0]);
    }
    tests
}

fn load_store(t: &Test) -> Store {
    let store = Store::new().unwrap();
    for d in &t.data {
        for tr in parse_turtle(d) {
            store.insert(&tr.in_graph(GraphName::DefaultGraph)).unwrap();
        }
    }
    for (g, d) in &t.graph_data {
        let g = NamedNode::new(g.clone()).unwrap();
        for tr in parse_turtle(d) {
            store
                .insert(&Quad::new(tr.subject, tr.predicate, tr.object, g.clone()))
                .unwrap();
        }
    }
    store
}

fn expected(path: &Path) -> Answer {
    let parser = QueryResultsParser::from_format(QueryResultsFormat::Xml);
    match parser.for_reader(File::open(path).unwrap()).unwrap() {
        ReaderQueryResultsParserOutput::Boolean(b) => Answer::Boolean(b),
        ReaderQueryResultsParserOutput::Solutions(s) => rows_of(s),
    }
}

/// The rows of a stream of solutions (from a results file or Oxigraph).
fn rows_of<E: std::fmt::Debug>(
    solutions: impl Iterator<Item = Result<QuerySolution, E>>,
) -> Answer {
    Answer::Rows(
        solutions
            .map(|r| {
                r.unwrap()
                    .iter()
                    .map(|(v, t)| (v.as_str().to_owned(), t.clone()))
                    .collect()
            })
            .collect(),
    )
}

fn from_oxigraph(r: QueryResults<'_>) -> Answer {
    match r {
        QueryResults::Boolean(b) => Answer::Boolean(b),
        QueryResults::Solutions(s) => rows_of(s),
        QueryResults::Graph(_) => panic!("graph results are not expected here"),
    }
}

/// Whether two multisets of rows are equal with blank nodes up to a consistent renaming
/// (backtracking over row matchings).
fn isomorphic(a: &[Row], b: &[Row]) -> bool {
    fn norm(r: &Row) -> Row {
        let mut r = r.clone();
        r.sort_by(|x, y| x.0.cmp(&y.0));
        r
    }
    fn compatible(
        x: &Row,
        y: &Row,
        map: &mut HashMap<String, String>,
        back: &mut HashMap<String, String>,
    ) -> Option<Vec<String>> {
        if x.len() != y.len() {
            return None;
        }
        let mut added = Vec::new();
        for ((vx, tx), (vy, ty)) in x.iter().zip(y) {
            if vx != vy {
                undo(map, back, &added);
                return None;
            }
            match (tx, ty) {
                (Term::BlankNode(bx), Term::BlankNode(by)) => {
                    match (map.get(bx.as_str()), back.get(by.as_str())) {
                        (Some(m), _) if m == by.as_str() => {}
                        (None, None) => {
                            map.insert(bx.as_str().to_owned(), by.as_str().to_owned());
                            back.insert(by.as_str().to_owned(), bx.as_str().to_owned());
                            added.push(bx.as_str().to_owned());
                        }
                        _ => {
                            undo(map, back, &added);
                            return None;
                        }
                    }
                }
                _ if tx == ty => {}
                _ => {
                    undo(map, back, &added);
                    return None;
                }
            }
        }
        Some(added)
    }
    fn undo(
        map: &mut HashMap<String, String>,
        back: &mut HashMap<String, String>,
        added: &[String],
    ) {
        for k in added {
            if let Some(v) = map.remove(k) {
                back.remove(&v);
            }
        }
    }
    fn go(
        a: &[Row],
        b: &[Row],
        used: &mut [bool],
        map: &mut HashMap<String, String>,
        back: &mut HashMap<String, String>,
    ) -> bool {
        let Some((first, rest)) = a.split_first() else {
            return true;
        };
        for j in 0..b.len() {
            if used[j] {
                continue;
            }
            if let Some(added) = compatible(first, &b[j], map, back) {
                used[j] = true;
                if go(rest, b, used, map, back) {
                    return true;
                }
                used[j] = false;
                undo(map, back, &added);
            }
        }
        false
    }
    if a.len() != b.len() {
        return false;
    }
    let a: Vec<Row> = a.iter().map(norm).collect();
    let b: Vec<Row> = b.iter().map(norm).collect();
    go(
        &a,
        &b,
        &mut vec![false; b.len()],
        &mut HashMap::new(),
        &mut HashMap::new(),
    )
}

fn same(a: &Answer, b: &Answer) -> bool {
    match (a, b) {
        (Answer::Boolean(x), Answer::Boolean(y)) => x == y,
        (Answer::Rows(x), Answer::Rows(y)) => isomorphic(x, y),
        _ => false,
    }
}

#[test]
fn isomorphism_check_renames_blank_nodes_consistently() {
    let b = |s: &str| Term::BlankNode(oxrdf::BlankNode::new(s).unwrap());
    let n = |s: &str| Term::NamedNode(NamedNode::new(format!("http://e/{s}")).unwrap());
    let row = |x: Term, y: Term| vec![("x".to_owned(), x), ("y".to_owned(), y)];
    let a = vec![row(b("a"), n("1")), row(b("a"), n("2"))];
    let same_node = vec![row(b("z"), n("2")), row(b("z"), n("1"))];
    let two_nodes = vec![row(b("z"), n("1")), row(b("w"), n("2"))];
    assert!(isomorphic(&a, &same_node));
    assert!(!isomorphic(&a, &two_nodes));
    assert!(!isomorphic(&a, &a[..1]));
}

#[test]
fn w3c_property_path_suite_every_way_in() {
    let Some(dir) = suite_dir() else {
        eprintln!("skipped: data not found (../shared/testsuites/w3c-property-path)");
        return;
    };
    let tests = read_manifest(&dir);
    assert_eq!(tests.len(), 21, "the manifest lists 21 tests");
    let mut failures = Vec::new();
    let mut served = 0;
    for t in &tests {
        let store = load_store(t);
        let text = std::fs::read_to_string(&t.query).unwrap();
        let want = expected(&t.result);
        match K2Paths::cpu().evaluate(&store, &text) {
            Ok(r) => {
                let got = from_oxigraph(r);
                if !same(&got, &want) {
                    failures.push(format!("oxigraph {}: got {got:?}, want {want:?}", t.name));
                }
            }
            Err(e) => failures.push(format!("oxigraph {}: error {e}", t.name)),
        }
        let folder = tempfile::tempdir().unwrap();
        let db: Database = answers::database_of(&store, folder.path());
        match db.query(&text) {
            Ok(r) => {
                let got = from_oxigraph(r);
                if !same(&got, &want) {
                    failures.push(format!("store {}: got {got:?}, want {want:?}", t.name));
                }
            }
            Err(e) => failures.push(format!("store {}: error {e}", t.name)),
        }
        if db.path_service_runs().0 > 0 {
            served += 1;
        }
    }
    // The suite's paths go to k2rpq's engines, not to Oxigraph's own path evaluation.
    assert!(served >= 20, "only {served} tests reached the path service");
    assert!(
        failures.is_empty(),
        "{} failures:\n{}",
        failures.len(),
        failures.join("\n")
    );
}
