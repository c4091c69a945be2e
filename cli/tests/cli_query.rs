//! `k2rpq query` as a user runs it: any SPARQL query over a store or an RDF file, the same
//! answers both ways; rows written as they come, at most `--limit` of them, within
//! `--timeout` (both stated with a non-zero exit when they cut the answer); relative IRIs
//! against `--base` or the query file's location; bad input refused with a clear error
//! before any data are read.

use std::path::Path;

#[path = "cli_run/mod.rs"]
mod cli_run;
use cli_run::{failed, k2rpq, succeeded};

/// A small family graph: a, b, c in a `parent` chain, d a parent of c; names for some.
fn graph(dir: &Path) {
    std::fs::write(
        dir.join("g.nt"),
        "<http://e/a> <http://e/parent> <http://e/b> .\n\
         <http://e/b> <http://e/parent> <http://e/c> .\n\
         <http://e/d> <http://e/parent> <http://e/c> .\n\
         <http://e/b> <http://e/name> \"Bea\" .\n\
         <http://e/c> <http://e/name> \"Cy\" .\n",
    )
    .unwrap();
    assert!(k2rpq(&["load", "g.nt", "--store", "s", "--quiet"], dir)
        .status
        .success());
}

/// The lines of a TSV answer, its header first and the rows sorted.
fn sorted_rows(tsv: &str) -> Vec<String> {
    let mut lines: Vec<String> = tsv.lines().map(str::to_owned).collect();
    lines[1..].sort();
    lines
}

#[test]
fn any_query_runs_over_a_store_and_over_a_file() {
    let dir = tempfile::tempdir().unwrap();
    graph(dir.path());
    let q = "SELECT ?x ?y ?name WHERE { ?x <http://e/parent>+ ?y OPTIONAL { ?y <http://e/name> ?name } }";
    let expected = vec![
        "?x\t?y\t?name",
        "<http://e/a>\t<http://e/b>\t\"Bea\"",
        "<http://e/a>\t<http://e/c>\t\"Cy\"",
        "<http://e/b>\t<http://e/c>\t\"Cy\"",
        "<http://e/d>\t<http://e/c>\t\"Cy\"",
    ];
    for source in [["--store", "s"], ["--nt", "g.nt"]] {
        let mut args = vec!["query", "--engine", "cpu", "--format", "tsv"];
        args.extend(source);
        args.push(q);
        let rows = sorted_rows(&succeeded(&k2rpq(&args, dir.path())));
        assert_eq!(rows, expected, "{source:?}");
    }
    // An aggregate over a path; CSV ends with its last row, no blank line after it.
    let count = "SELECT (COUNT(*) AS ?n) WHERE { ?x <http://e/parent>/<http://e/parent>* ?y }";
    let args = [
        "query", "--engine", "cpu", "--store", "s", "--format", "csv", count,
    ];
    assert_eq!(succeeded(&k2rpq(&args, dir.path())), "n\r\n4\r\n");
    let args = [
        "query", "--engine", "cpu", "--store", "s", "--format", "tsv", count,
    ];
    let tsv = succeeded(&k2rpq(&args, dir.path()));
    assert!(tsv.ends_with('4') || tsv.ends_with("4\n"), "{tsv:?}");
    assert!(!tsv.ends_with("\n\n"), "{tsv:?}");
    // An ASK answer is a line of its own, as rows are.
    let ask = "ASK { <http://e/a> <http://e/parent>+ ?y }";
    for (format, line) in [("csv", "true\r\n"), ("tsv", "true\n")] {
        let args = [
            "query", "--engine", "cpu", "--store", "s", "--format", format, ask,
        ];
        assert_eq!(succeeded(&k2rpq(&args, dir.path())), line);
    }
    // `SELECT *` lists the variables as they appear.
    let star = "SELECT * WHERE { ?z <http://e/parent> ?a . ?a <http://e/name> ?m }";
    let args = [
        "query", "--engine", "cpu", "--store", "s", "--format", "tsv", star,
    ];
    let out = succeeded(&k2rpq(&args, dir.path()));
    assert_eq!(out.lines().next(), Some("?z\t?a\t?m"), "{out}");
}

#[test]
fn construct_writes_n_triples_or_turtle() {
    let dir = tempfile::tempdir().unwrap();
    graph(dir.path());
    let q = "CONSTRUCT { ?x <http://e/ancestor> ?y } WHERE { ?y <http://e/parent>+ ?x }";
    let args = |format: &'static str| {
        vec![
            "query", "--engine", "cpu", "--store", "s", "--format", format, q,
        ]
    };
    let nt = succeeded(&k2rpq(&args("nt"), dir.path()));
    let mut lines: Vec<&str> = nt.lines().collect();
    lines.sort();
    assert_eq!(
        lines,
        [
            "<http://e/b> <http://e/ancestor> <http://e/a> .",
            "<http://e/c> <http://e/ancestor> <http://e/a> .",
            "<http://e/c> <http://e/ancestor> <http://e/b> .",
            "<http://e/c> <http://e/ancestor> <http://e/d> .",
        ]
    );
    // `table` writes the same N-Triples; Turtle groups by subject.
    let table = succeeded(&k2rpq(&args("table"), dir.path()));
    assert_eq!(table.lines().count(), 4, "{table}");
    let ttl = succeeded(&k2rpq(&args("ttl"), dir.path()));
    let mut parsed: Vec<String> = oxttl::TurtleParser::new()
        .for_slice(ttl.as_bytes())
        .map(|t| format!("{} .", t.unwrap()))
        .collect();
    parsed.sort();
    assert_eq!(parsed, lines, "{ttl}");
    // Turtle groups a subject's triples: fewer statements than triples.
    assert!(ttl.matches(" .").count() < 4, "{ttl}");
}

#[test]
fn a_limit_that_cuts_the_answer_is_stated() {
    let dir = tempfile::tempdir().unwrap();
    graph(dir.path());
    let q = "SELECT ?x ?y WHERE { ?x <http://e/parent>+ ?y }";
    for format in ["tsv", "json", "table"] {
        let args = [
            "query", "--engine", "cpu", "--store", "s", "--format", format, "--limit", "2", q,
        ];
        let out = k2rpq(&args, dir.path());
        let err = failed(&out);
        assert!(err.contains("--limit 2"), "{format}: {err}");
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert_eq!(stdout.matches("http://e/").count(), 4, "{format}: {stdout}");
    }
    // A limit the answer fits in is no error.
    let args = [
        "query", "--engine", "cpu", "--store", "s", "--format", "tsv", "--limit", "4", q,
    ];
    assert_eq!(succeeded(&k2rpq(&args, dir.path())).lines().count(), 5);
}

#[test]
fn a_query_past_its_timeout_stops_with_an_error() {
    let dir = tempfile::tempdir().unwrap();
    // A complete graph of 60 nodes: three joined hops have 60^4 solutions.
    let mut nt = String::new();
    for i in 0..60 {
        for j in 0..60 {
            nt.push_str(&format!("<http://e/n{i}> <http://e/p> <http://e/n{j}> .\n"));
        }
    }
    std::fs::write(dir.path().join("k.nt"), nt).unwrap();
    assert!(
        k2rpq(&["load", "k.nt", "--store", "k", "--quiet"], dir.path())
            .status
            .success()
    );
    for q in [
        "SELECT (COUNT(*) AS ?n) WHERE { ?a <http://e/p> ?b . ?b <http://e/p> ?c . ?c <http://e/p> ?d }",
        "SELECT * WHERE { ?a <http://e/p> ?b . ?c <http://e/p>/<http://e/p>+ ?d }",
    ] {
        let started = std::time::Instant::now();
        let args = [
            "query", "--engine", "cpu", "--store", "k", "--format", "tsv", "--timeout", "0.2",
            q,
        ];
        let err = failed(&k2rpq(&args, dir.path()));
        assert!(err.contains("ran past --timeout 0.2 s"), "{err}");
        assert!(
            started.elapsed() < std::time::Duration::from_secs(60),
            "{:?}",
            started.elapsed()
        );
    }
}

#[test]
fn absurd_limits_and_timeouts_are_refused_without_a_panic() {
    let dir = tempfile::tempdir().unwrap();
    graph(dir.path());
    let q = "SELECT * WHERE { ?x <http://e/parent>+ ?y }";
    for (flag, value) in [
        ("--timeout", "1e20"),
        ("--timeout", "-1"),
        ("--timeout", "0"),
        ("--timeout", "nan"),
        ("--timeout", "inf"),
        ("--timeout", "soon"),
        ("--limit", "0"),
        ("--limit", "-1"),
        ("--limit", "1e3"),
        ("--limit", "99999999999999999999999"),
    ] {
        let given = format!("{flag}={value}");
        for command in [
            vec!["query", "--store", "s", &given, q],
            vec![
                "rpq",
                "--store",
                "s",
                &given,
                "<http://e/a> <http://e/parent>+ ?y",
            ],
        ] {
            let err = failed(&k2rpq(&command, dir.path()));
            assert!(
                err.contains(flag) && err.contains(value),
                "{command:?}: {err}"
            );
        }
    }
    // Large finite values within range are accepted.
    let args = [
        "query",
        "--store",
        "s",
        "--timeout",
        "1e6",
        "--limit",
        "1000000",
        q,
    ];
    succeeded(&k2rpq(&args, dir.path()));
}

#[test]
fn relative_iris_resolve_against_the_query_files_location_or_the_base() {
    let dir = tempfile::tempdir().unwrap();
    let root = std::fs::canonicalize(dir.path()).unwrap();
    let people = format!("file://{}/people.ttl", root.display());
    std::fs::write(
        root.join("d.trig"),
        format!("<{people}> {{ <http://e/a> <http://e/knows> <http://e/b> . <http://e/b> <http://e/knows> <http://e/c> . }}\n"),
    )
    .unwrap();
    assert!(k2rpq(&["load", "d.trig", "--store", "s", "--quiet"], &root)
        .status
        .success());
    std::fs::write(
        root.join("q.rq"),
        "SELECT ?x WHERE { GRAPH <people.ttl> { <http://e/a> <http://e/knows>+ ?x } }",
    )
    .unwrap();
    let args = [
        "query", "--engine", "cpu", "--store", "s", "--format", "tsv", "--file", "q.rq",
    ];
    let out = succeeded(&k2rpq(&args, &root));
    assert_eq!(sorted_rows(&out), ["?x", "<http://e/b>", "<http://e/c>"]);
    // `--base` names the base instead.
    let q = "SELECT ?x WHERE { <a> <knows>/<knows> ?x }";
    std::fs::write(
        root.join("e.nt"),
        "<http://e/a> <http://e/knows> <http://e/b> .\n<http://e/b> <http://e/knows> <http://e/c> .\n",
    )
    .unwrap();
    let args = [
        "query",
        "--engine",
        "cpu",
        "--nt",
        "e.nt",
        "--base",
        "http://e/",
        "--format",
        "tsv",
        q,
    ];
    assert_eq!(succeeded(&k2rpq(&args, &root)), "?x\n<http://e/c>\n");
    let err = failed(&k2rpq(&["query", "--nt", "e.nt", q], &root));
    assert!(err.contains("invalid SPARQL"), "{err}");
}

#[test]
fn errors_come_before_any_data_are_read() {
    let dir = tempfile::tempdir().unwrap();
    // No store `nothere`: each error must be the query's, found before opening it.
    for (args, says) in [
        (
            vec![
                "--format",
                "json",
                "CONSTRUCT { ?x <http://e/p> ?y } WHERE { ?x <http://e/q> ?y }",
            ],
            "a CONSTRUCT or DESCRIBE result is RDF",
        ),
        (
            vec!["--format", "nt", "SELECT * WHERE { ?x <http://e/q>+ ?y }"],
            "a format of CONSTRUCT and DESCRIBE results",
        ),
        (
            vec!["SELECT * WHERE { ?x <http://e/q>+ }"],
            "invalid SPARQL",
        ),
        (
            vec!["INSERT DATA { <http://e/a> <http://e/p> <http://e/b> }"],
            "updates are not supported: the store is read-only",
        ),
        (vec!["--base", "not an iri", "ASK {}"], "invalid base IRI"),
        (vec!["--oxigraph", "ASK {}"], "--oxigraph is gone"),
    ] {
        let mut all = vec!["query", "--store", "nothere"];
        all.extend(args);
        let err = failed(&k2rpq(&all, dir.path()));
        assert!(err.contains(says), "{err}");
        assert!(!err.contains("nothere"), "{err}");
    }
}

#[test]
fn explain_shows_each_path_group_without_answering() {
    let dir = tempfile::tempdir().unwrap();
    graph(dir.path());
    let q = "SELECT ?y ?n WHERE { VALUES ?x { <http://e/a> <http://e/d> } ?x <http://e/parent>+ ?y . ?y <http://e/name> ?n }";
    let args = ["query", "--engine", "cpu", "--store", "s", "--explain", q];
    let out = succeeded(&k2rpq(&args, dir.path()));
    assert!(out.contains("SERVICE <urn:k2rpq:paths>"), "{out}");
    assert!(out.contains("path group 1:"), "{out}");
    assert!(
        out.contains("values: ?x, 2 rows, 2 distinct values"),
        "{out}"
    );
    // The closure from the values first, then the link from the closure's ends.
    let first = out
        .find("1. ?x (<http://e/parent>)+ ?y: 3 edges")
        .expect(&out);
    let second = out.find("2. ?y <http://e/name> ?n: 2 edges").expect(&out);
    assert!(first < second, "{out}");
    assert!(
        out.contains("subject ?x: 2 values; object ?y: free"),
        "{out}"
    );
    assert!(
        out.contains("subject ?y: the values of pattern 1; object ?n: free"),
        "{out}"
    );
    assert!(!out.contains("Bea"), "explained, not answered: {out}");
    let count = "SELECT (COUNT(*) AS ?c) WHERE { ?x <http://e/parent>/<http://e/parent> ?y }";
    let args = [
        "query",
        "--engine",
        "cpu",
        "--store",
        "s",
        "--explain",
        count,
    ];
    let out = succeeded(&k2rpq(&args, dir.path()));
    assert!(out.contains("without rows, from weights pushed"), "{out}");
}
