//! `k2rpq query` as a user runs it: the standalone subset, and `--oxigraph` for the rest
//! of SPARQL (OPTIONAL, aggregates, CONSTRUCT), over an RDF file and over a store, with
//! the same answers both ways; format and syntax errors before any data are loaded.

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

/// The rows of a TSV answer, sorted (its header first; the blank line that ends the output
/// left out).
fn sorted_rows(tsv: &str) -> Vec<String> {
    let mut lines: Vec<String> = tsv
        .lines()
        .filter(|l| !l.is_empty())
        .map(str::to_owned)
        .collect();
    lines[1..].sort();
    lines
}

#[test]
fn oxigraph_answers_what_the_standalone_subset_does_not() {
    let dir = tempfile::tempdir().unwrap();
    graph(dir.path());
    let q = "SELECT ?x ?y ?name WHERE { ?x <http://e/parent>+ ?y OPTIONAL { ?y <http://e/name> ?name } }";
    // The standalone subset names what it lacks, and the option that answers it.
    let err = failed(&k2rpq(
        &["query", "--engine", "cpu", "--store", "s", q],
        dir.path(),
    ));
    assert!(err.contains("unsupported: OPTIONAL"), "{err}");
    assert!(err.contains("--oxigraph"), "{err}");
    let expected = vec![
        "?x\t?y\t?name",
        "<http://e/a>\t<http://e/b>\t\"Bea\"",
        "<http://e/a>\t<http://e/c>\t\"Cy\"",
        "<http://e/b>\t<http://e/c>\t\"Cy\"",
        "<http://e/d>\t<http://e/c>\t\"Cy\"",
    ];
    for source in [["--store", "s"], ["--nt", "g.nt"]] {
        let mut args = vec!["query", "--engine", "cpu", "--oxigraph", "--format", "tsv"];
        args.extend(source);
        args.push(q);
        let rows = sorted_rows(&succeeded(&k2rpq(&args, dir.path())));
        assert_eq!(rows, expected, "{source:?}");
    }
    // An aggregate over a path, and the answer the standalone subset gives without it.
    let count = "SELECT (COUNT(*) AS ?n) WHERE { ?x <http://e/parent>/<http://e/parent>* ?y }";
    for extra in [&["--oxigraph"][..], &[]] {
        let mut args = vec![
            "query", "--engine", "cpu", "--store", "s", "--format", "csv",
        ];
        args.extend(extra);
        args.push(count);
        assert_eq!(
            succeeded(&k2rpq(&args, dir.path())).trim(),
            "n\r\n4",
            "{extra:?}"
        );
    }
}

#[test]
fn construct_writes_n_triples_or_turtle() {
    let dir = tempfile::tempdir().unwrap();
    graph(dir.path());
    let q = "CONSTRUCT { ?x <http://e/ancestor> ?y } WHERE { ?y <http://e/parent>+ ?x }";
    let args = |format: &'static str| {
        vec![
            "query",
            "--engine",
            "cpu",
            "--store",
            "s",
            "--oxigraph",
            "--format",
            format,
            q,
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
    assert!(ttl.contains("<http://e/c> <http://e/ancestor> "), "{ttl}");
    assert_eq!(ttl.matches(" .").count(), 2, "two subjects: {ttl}");
}

#[test]
fn format_and_syntax_errors_come_before_any_data_are_read() {
    let dir = tempfile::tempdir().unwrap();
    // No store `nothere`: each error must be the query's, found before opening it.
    for (args, says) in [
        (
            vec![
                "--format",
                "json",
                "CONSTRUCT { ?x <http://e/p> ?y } WHERE { ?x <http://e/q> ?y }",
            ],
            "use --format nt, ttl or table",
        ),
        (
            vec!["--format", "nt", "SELECT * WHERE { ?x <http://e/q>+ ?y }"],
            "for CONSTRUCT and DESCRIBE results",
        ),
        (
            vec!["SELECT * WHERE { ?x <http://e/q>+ }"],
            "invalid SPARQL",
        ),
    ] {
        let mut all = vec!["query", "--oxigraph", "--store", "nothere"];
        all.extend(args);
        let err = failed(&k2rpq(&all, dir.path()));
        assert!(err.contains(says), "{err}");
        assert!(!err.contains("nothere"), "{err}");
    }
}
