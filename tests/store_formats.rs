//! Formats, compression, named graphs, literals and blank nodes as endpoints, stdin.

use std::io::Write;
use std::path::{Path, PathBuf};

use k2rpq::store::{load, Format, Input, LoadOptions, Store};
use oxrdf::{BlankNode, Literal, NamedNode, Term};

fn iri(s: &str) -> Term {
    NamedNode::new_unchecked(format!("http://ex.org/{s}")).into()
}

/// Writes `bytes` to `dir/name`; the file's path.
fn write_file(dir: &Path, name: &str, bytes: impl AsRef<[u8]>) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, bytes).unwrap();
    path
}

/// Loads the file `input` into the store `store` with `options`, and opens the store.
fn load_store(input: PathBuf, store: &Path, options: &LoadOptions) -> Store {
    load(&[Input::Path(input)], store, options).unwrap();
    Store::open(store).unwrap()
}

fn has(store: &Store, graph: usize, s: &Term, p: &str, o: &Term) -> bool {
    let d = store.dictionary();
    let (Some(s), Some(p), Some(o)) = (d.id(s.as_ref()), d.id(iri(p).as_ref()), d.id(o.as_ref()))
    else {
        return false;
    };
    store
        .relation(graph, p)
        .unwrap()
        .is_some_and(|t| t.contains(s, o))
}

const NQ: &str = r#"<http://ex.org/a> <http://ex.org/p> <http://ex.org/b> .
<http://ex.org/a> <http://ex.org/p> <http://ex.org/c> <http://ex.org/g1> .
<http://ex.org/b> <http://ex.org/p> <http://ex.org/c> <http://ex.org/g2> .
_:x <http://ex.org/q> "lit"@en <http://ex.org/g1> .
<http://ex.org/a> <http://ex.org/q> "42"^^<http://www.w3.org/2001/XMLSchema#integer> _:g .
<http://ex.org/a> <http://ex.org/q> "plain" .
"#;

/// The quads of [`NQ`], in TriG.
const TRIG: &str = r#"@prefix : <http://ex.org/> .
:a :p :b .
:a :q "plain" .
:g1 { :a :p :c . _:x :q "lit"@en . }
GRAPH :g2 { :b :p :c }
_:g { :a :q 42 }
"#;

fn check_quads(store: &Store) {
    let g = |name: &str| {
        store
            .graph_id(Some(&iri(name)))
            .unwrap_or_else(|| panic!("graph {name}"))
    };
    assert_eq!(
        store.graphs().len(),
        4,
        "default, g1, g2 and the blank graph"
    );
    assert!(store.graphs()[0].name.is_none());
    let (g1, g2) = (g("g1"), g("g2"));
    assert!(has(store, 0, &iri("a"), "p", &iri("b")));
    assert!(
        !has(store, 0, &iri("a"), "p", &iri("c")),
        "graphs kept apart"
    );
    assert!(has(store, g1, &iri("a"), "p", &iri("c")));
    assert!(!has(store, g1, &iri("b"), "p", &iri("c")));
    assert!(has(store, g2, &iri("b"), "p", &iri("c")));
    let x: Term = BlankNode::new_unchecked("x").into();
    assert!(has(
        store,
        g1,
        &x,
        "q",
        &Literal::new_language_tagged_literal_unchecked("lit", "en").into()
    ));
    assert!(has(
        store,
        0,
        &iri("a"),
        "q",
        &Literal::new_simple_literal("plain").into()
    ));
    let int = Literal::new_typed_literal(
        "42",
        NamedNode::new_unchecked("http://www.w3.org/2001/XMLSchema#integer"),
    );
    let blank_graph = store
        .graphs()
        .iter()
        .position(|gi| matches!(gi.name, Some(oxrdf::NamedOrBlankNode::BlankNode(_))))
        .unwrap();
    assert!(has(store, blank_graph, &iri("a"), "q", &int.into()));
    assert_eq!(store.graphs()[g1].edges, 2);
    let nodes = store.graph_nodes(g2).unwrap();
    let d = store.dictionary();
    let expect: Vec<u32> = ["b", "c"]
        .iter()
        .map(|n| d.id(iri(n).as_ref()).unwrap())
        .collect();
    assert_eq!(nodes.iter().collect::<Vec<_>>(), {
        let mut e = expect;
        e.sort();
        e
    });
}

#[test]
fn nquads_plain_gzip_and_bzip2_keep_graphs_apart() {
    let dir = tempfile::tempdir().unwrap();
    let plain = write_file(dir.path(), "d.nq", NQ);
    let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    e.write_all(NQ.as_bytes()).unwrap();
    let gz = write_file(dir.path(), "d.nq.gz", e.finish().unwrap());
    let mut e = bzip2::write::BzEncoder::new(Vec::new(), bzip2::Compression::fast());
    e.write_all(NQ.as_bytes()).unwrap();
    let bz = write_file(dir.path(), "d.nq.bz2", e.finish().unwrap());
    for (i, input) in [plain, gz, bz].into_iter().enumerate() {
        let store_dir = dir.path().join(format!("s{i}"));
        check_quads(&load_store(input, &store_dir, &LoadOptions::default()));
    }
}

#[test]
fn trig_and_turtle() {
    let dir = tempfile::tempdir().unwrap();
    let trig = write_file(dir.path(), "d.trig", TRIG);
    let default = LoadOptions::default();
    check_quads(&load_store(trig, &dir.path().join("trig"), &default));

    let ttl = write_file(
        dir.path(),
        "d.ttl",
        "@prefix : <http://ex.org/> .\n:a :p :b , :c ; :q [ :p :a ] .\n",
    );
    let store = load_store(ttl, &dir.path().join("ttl"), &default);
    assert_eq!(store.graphs().len(), 1);
    assert!(has(&store, 0, &iri("a"), "p", &iri("c")));
    assert_eq!(store.graphs()[0].edges, 4);
}

#[test]
fn explicit_format_overrides_the_name() {
    let dir = tempfile::tempdir().unwrap();
    let line = "<http://ex.org/a> <http://ex.org/p> <http://ex.org/b> .\n";
    let f = write_file(dir.path(), "data.txt", line);
    let options = LoadOptions {
        format: Some(Format::NTriples),
        ..LoadOptions::default()
    };
    let store = load_store(f, &dir.path().join("s"), &options);
    assert!(has(&store, 0, &iri("a"), "p", &iri("b")));
}
