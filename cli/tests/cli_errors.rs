//! What the command line says about bad input: a query file with a bad line stops before
//! any query runs, an invalid SPARQL query is shown with a caret at the parser's position,
//! and a corrupt relation file is named once. No panics, no backtraces, a failing exit
//! status.

use std::path::Path;
use std::process::{Command, Output};

#[path = "cli_run/mod.rs"]
mod cli_run;
use cli_run::{failed, k2rpq, succeeded};

fn graph(dir: &Path) {
    std::fs::write(
        dir.join("g.nt"),
        "<http://e/a> <http://e/p> <http://e/b> .\n<http://e/b> <http://e/p> <http://e/c> .\n",
    )
    .unwrap();
}

/// Runs `k2rpq COMMAND --engine cpu --nt g.nt REST` in `dir`, over the graph of `graph`.
fn on_graph_cpu(dir: &Path, command: &str, rest: &[&str]) -> Output {
    let mut args = vec![command, "--engine", "cpu", "--nt", "g.nt"];
    args.extend_from_slice(rest);
    k2rpq(&args, dir)
}

#[test]
fn a_bad_line_in_a_query_file_stops_before_any_query() {
    let dir = tempfile::tempdir().unwrap();
    graph(dir.path());
    std::fs::write(
        dir.path().join("q.rpq"),
        "<http://e/a> <http://e/p>+ ?y\n# a comment\n<http://e/a> (<http://e/p> ?y\n",
    )
    .unwrap();
    let out = on_graph_cpu(dir.path(), "rpq", &["--file", "q.rpq"]);
    let stderr = failed(&out);
    assert!(stderr.contains("q.rpq line 3"), "{stderr}");
    assert!(stderr.contains("expected `)`"), "{stderr}");
    // The first query did not run.
    assert!(
        out.stdout.is_empty(),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    assert!(!stderr.contains("pairs in"), "{stderr}");
}

#[test]
fn invalid_sparql_is_shown_with_a_caret() {
    let dir = tempfile::tempdir().unwrap();
    graph(dir.path());
    let out = on_graph_cpu(
        dir.path(),
        "query",
        &["SELECT ?x\nWHERE { ?x <http://e/p>+ }"],
    );
    let stderr = failed(&out);
    assert_eq!(stderr.matches("error at 2:").count(), 1, "{stderr}");
    let line = "line 2: WHERE { ?x <http://e/p>+ }";
    let at = stderr.find(line).expect("the query's line");
    let caret = stderr[at + line.len()..]
        .lines()
        .nth(1)
        .expect("a caret line");
    // The parser stops at the closing brace, where the object is missing.
    assert_eq!(caret.find('^'), Some(line.len() - 1), "{stderr}");
}

#[test]
fn a_corrupt_relation_file_is_named_once() {
    let dir = tempfile::tempdir().unwrap();
    graph(dir.path());
    let out = k2rpq(&["load", "g.nt", "--store", "s"], dir.path());
    assert!(out.status.success(), "{out:?}");
    let tree = std::fs::read_dir(dir.path().join("s"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.extension().is_some_and(|e| e == "k2"))
        .expect("a relation file");
    let mut bytes = std::fs::read(&tree).unwrap();
    bytes[20] ^= 0xFF;
    std::fs::write(&tree, bytes).unwrap();
    let out = k2rpq(
        &[
            "rpq",
            "--engine",
            "cpu",
            "--store",
            "s",
            "<http://e/a> <http://e/p>+ ?y",
        ],
        dir.path(),
    );
    let stderr = failed(&out);
    let name = tree.file_name().unwrap().to_str().unwrap();
    assert_eq!(stderr.matches(name).count(), 1, "{stderr}");
    assert!(stderr.contains("corrupt"), "{stderr}");
}

#[test]
fn an_error_shows_its_causes_and_no_backtrace_where_rust_backtrace_is_set() {
    let dir = tempfile::tempdir().unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_k2rpq"))
        .args(["info", "nothere"])
        .current_dir(dir.path())
        .env("RUST_BACKTRACE", "1")
        .env_remove("K2RPQ_BACKTRACE")
        .output()
        .unwrap();
    let stderr = failed(&out);
    assert!(stderr.starts_with("k2rpq: error: "), "{stderr}");
    assert!(stderr.contains("\n  caused by: "), "{stderr}");
    assert!(!stderr.to_lowercase().contains("backtrace"), "{stderr}");
}

#[test]
fn a_missing_file_is_reported_once() {
    let dir = tempfile::tempdir().unwrap();
    {
        let args = ["load", "nothere.nt", "--store", "s"];
        let stderr = failed(&k2rpq(&args, dir.path()));
        // The OS's reason once: an error that shows its cause is not also its source.
        assert_eq!(stderr.matches("nothere").count(), 1, "{args:?}: {stderr}");
        assert_eq!(
            stderr.matches("No such file").count(),
            1,
            "{args:?}: {stderr}"
        );
    }
}

#[test]
fn a_malformed_gpu_budget_is_an_error_with_or_without_a_gpu() {
    let dir = tempfile::tempdir().unwrap();
    graph(dir.path());
    assert!(k2rpq(&["load", "g.nt", "--store", "s"], dir.path())
        .status
        .success());
    let stderr = failed(&k2rpq(
        &[
            "rpq",
            "--store",
            "s",
            "--gpu-budget",
            "12XB",
            "<http://e/a> <http://e/p>+ ?y",
        ],
        dir.path(),
    ));
    assert!(
        stderr.contains("--gpu-budget") && stderr.contains("XB"),
        "{stderr}"
    );
}

/// `k2rpq rpq --engine cpu` of `<a> p+ ?y` over a small graph with `flag bad` fails,
/// naming `message`, and with `flag good` runs and finds `<c>`.
fn refused_then_runs(flag: &str, bad: &str, message: &str, good: &str) {
    let dir = tempfile::tempdir().unwrap();
    graph(dir.path());
    let rpq = |value: &str| {
        let query = "<http://e/a> <http://e/p>+ ?y";
        on_graph_cpu(dir.path(), "rpq", &[flag, value, query])
    };
    let stderr = failed(&rpq(bad));
    assert!(stderr.contains(message), "{stderr}");
    let stdout = succeeded(&rpq(good));
    assert!(stdout.contains("http://e/c"), "{stdout}");
}

#[test]
fn a_bad_top_level_size_is_refused_and_a_good_one_runs() {
    // Accepted by every engine (the CPU engine has no device top level to expand).
    refused_then_runs("--top-nodes", "2^41", "invalid top-level size", "2^24");
}

#[test]
fn a_bad_lone_path_length_is_refused_and_a_good_one_runs() {
    // Accepted by every engine (the CPU engine descends its own tree).
    refused_then_runs("--lone-paths", "many", "--lone-paths", "4");
}

#[test]
fn explain_names_a_predicate_the_graph_lacks() {
    let dir = tempfile::tempdir().unwrap();
    graph(dir.path());
    let out = on_graph_cpu(dir.path(), "explain", &["?x <http://e/nope>+ ?y"]);
    let stdout = succeeded(&out);
    assert!(
        stdout.contains("<http://e/nope> (not in the graph)"),
        "{stdout}"
    );
    assert!(!stdout.contains("4294967295"), "{stdout}");
}

#[test]
fn a_cut_path_answer_prints_its_pairs_and_fails() {
    let dir = tempfile::tempdir().unwrap();
    graph(dir.path());
    let out = on_graph_cpu(dir.path(), "rpq", &["--limit", "1", "?x <http://e/p>+ ?y"]);
    let stderr = failed(&out);
    assert!(stderr.contains("partial answers"), "{stderr}");
    assert!(stderr.contains("--limit"), "{stderr}");
    // The pair found before the limit is printed.
    assert_eq!(String::from_utf8_lossy(&out.stdout).lines().count(), 1);
    // A limit the answer fits in is no cut.
    let rest = ["--limit", "3", "--count", "?x <http://e/p>+ ?y"];
    let out = on_graph_cpu(dir.path(), "rpq", &rest);
    assert_eq!(succeeded(&out).trim(), "3");
}

#[test]
fn result_formats_take_aliases_and_media_types() {
    let dir = tempfile::tempdir().unwrap();
    graph(dir.path());
    let q = "SELECT ?y WHERE { <http://e/a> <http://e/p>+ ?y }";
    for (format, marker) in [
        ("srj", "\"bindings\""),
        ("application/sparql-results+json", "\"bindings\""),
        ("application/sparql-results+xml", "<sparql"),
        ("text/csv", "y\r\n"),
        ("TSV", "?y\n"),
    ] {
        let stdout = succeeded(&on_graph_cpu(dir.path(), "query", &["--format", format, q]));
        assert!(stdout.contains(marker), "{format}: {stdout}");
    }
    let out = on_graph_cpu(dir.path(), "query", &["--format", "yaml", q]);
    assert!(failed(&out).contains("unknown format `yaml`"));
}
