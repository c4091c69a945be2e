//! `k2rpq serve` as clients use it: each protocol form, content negotiation, the service
//! description and the page, each error status, the row limit and the timeout seen by the
//! client, concurrent clients, the request log, CORS, and shutdown on SIGTERM.

use std::process::Command;

use reqwest::blocking::Response;
use reqwest::StatusCode;

#[path = "serve_run/mod.rs"]
mod serve_run;
use serve_run::{client, load, load_file, Server, FAMILY};

#[path = "../../tests/data/mod.rs"]
mod data;

const CLOSURE: &str = "SELECT ?x ?y WHERE { ?x <http://e/parent>+ ?y }";

/// The (x, y) pairs of `parent+` in the family graph, as SPARQL JSON bindings' values.
fn closure_pairs() -> Vec<(String, String)> {
    let mut v: Vec<(String, String)> = [("a", "b"), ("a", "c"), ("b", "c"), ("d", "c")]
        .iter()
        .map(|(x, y)| (format!("http://e/{x}"), format!("http://e/{y}")))
        .collect();
    v.sort();
    v
}

/// The sorted (x, y) values of a SPARQL JSON answer.
fn json_pairs(body: &str) -> Vec<(String, String)> {
    let v: serde_json::Value = serde_json::from_str(body).unwrap();
    let mut pairs: Vec<(String, String)> = v["results"]["bindings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|b| {
            (
                b["x"]["value"].as_str().unwrap().to_owned(),
                b["y"]["value"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    pairs.sort();
    pairs
}

fn ok_text(response: Response) -> (String, String) {
    let status = response.status();
    let content_type = response
        .headers()
        .get("content-type")
        .map(|v| v.to_str().unwrap().to_owned())
        .unwrap_or_default();
    let body = response.text().unwrap();
    assert_eq!(status, StatusCode::OK, "{body}");
    (content_type, body)
}

fn family_server(args: &[&str]) -> (tempfile::TempDir, Server) {
    let dir = tempfile::tempdir().unwrap();
    let store = load(dir.path(), FAMILY);
    let server = Server::start(&store, args);
    (dir, server)
}

#[test]
fn every_protocol_form_gives_the_same_answer() {
    let (_dir, server) = family_server(&[]);
    let http = client();
    let expected = closure_pairs();
    for path in ["/query", "/sparql"] {
        let get = http
            .get(server.url(path))
            .query(&[("query", CLOSURE)])
            .send()
            .unwrap();
        let (content_type, body) = ok_text(get);
        assert_eq!(content_type, "application/sparql-results+json");
        assert_eq!(json_pairs(&body), expected, "GET {path}");

        let form = http
            .post(server.url(path))
            .header("Content-Type", "application/x-www-form-urlencoded")
            .body(form_body(&[("query", CLOSURE)]))
            .send()
            .unwrap();
        assert_eq!(json_pairs(&ok_text(form).1), expected, "form POST {path}");

        let direct = http
            .post(server.url(path))
            .header("Content-Type", "application/sparql-query; charset=utf-8")
            .body(CLOSURE)
            .send()
            .unwrap();
        assert_eq!(
            json_pairs(&ok_text(direct).1),
            expected,
            "direct POST {path}"
        );
    }
    // ASK.
    let ask = http
        .get(server.url("/query"))
        .query(&[(
            "query",
            "ASK { <http://e/a> <http://e/parent>+ <http://e/c> }",
        )])
        .send()
        .unwrap();
    assert_eq!(ok_text(ask).1, r#"{"head":{},"boolean":true}"#);
    // Every request is logged on one line.
    let line = server.wait_for_log("POST /sparql 200 4 rows");
    assert!(line.ends_with(" ms"), "{line}");
}

fn form_body(pairs: &[(&str, &str)]) -> String {
    let mut s = form_urlencoded::Serializer::new(String::new());
    for (k, v) in pairs {
        s.append_pair(k, v);
    }
    s.finish()
}

#[test]
fn answers_are_those_of_k2rpq_query() {
    let dir = tempfile::tempdir().unwrap();
    let store = load_file(dir.path(), &data::repo_file("fixtures/codex/codex-m.nt.gz"));
    let server = Server::start(&store, &[]);
    let http = client();
    let queries = [
        "SELECT ?y WHERE { <http://www.wikidata.org/entity/Q183> <http://www.wikidata.org/prop/direct/P530>+ ?y }",
        "SELECT ?x WHERE { ?x <http://www.wikidata.org/prop/direct/P27>/<http://www.wikidata.org/prop/direct/P30> <http://www.wikidata.org/entity/Q46> }",
        "SELECT ?x ?y WHERE { ?x <http://www.wikidata.org/prop/direct/P737>+ ?y }",
        // Columns in order of appearance, the header included.
        "SELECT * WHERE { ?y <http://www.wikidata.org/prop/direct/P737>+ ?x }",
    ];
    for q in queries {
        let cli = Command::new(env!("CARGO_BIN_EXE_k2rpq"))
            .args(["query", "--engine", "cpu", "--format", "tsv", "--store"])
            .arg(&store)
            .arg(q)
            .output()
            .unwrap();
        assert!(cli.status.success(), "{cli:?}");
        let cli_rows = sorted_tsv(&String::from_utf8(cli.stdout).unwrap());
        let served = http
            .get(server.url("/query"))
            .query(&[("query", q)])
            .header("Accept", "text/tab-separated-values")
            .send()
            .unwrap();
        let (content_type, body) = ok_text(served);
        assert_eq!(content_type, "text/tab-separated-values; charset=utf-8");
        let served_rows = sorted_tsv(&body);
        assert!(served_rows.len() > 2, "{q}: {served_rows:?}");
        assert_eq!(served_rows[0], cli_rows[0], "{q}: the header");
        assert_eq!(served_rows, cli_rows, "{q}");
    }
}

/// The lines of a TSV answer, the header first and the rows sorted.
fn sorted_tsv(tsv: &str) -> Vec<String> {
    let mut lines: Vec<String> = tsv
        .lines()
        .filter(|l| !l.is_empty())
        .map(str::to_owned)
        .collect();
    lines[1..].sort();
    lines
}

#[test]
fn content_negotiation_picks_the_format() {
    let (_dir, server) = family_server(&[]);
    let http = client();
    let get = |accept: Option<&str>, format: Option<&str>| {
        let mut request = http.get(server.url("/query")).query(&[("query", CLOSURE)]);
        if let Some(f) = format {
            request = request.query(&[("format", f)]);
        }
        if let Some(a) = accept {
            request = request.header("Accept", a);
        }
        request.send().unwrap()
    };
    let (t, body) = ok_text(get(Some("application/sparql-results+xml"), None));
    assert_eq!(t, "application/sparql-results+xml");
    assert!(body.contains("<uri>http://e/d</uri>"), "{body}");
    assert!(body.trim_end().ends_with("</sparql>"), "{body}");
    let (t, body) = ok_text(get(Some("text/csv"), None));
    assert_eq!(t, "text/csv; charset=utf-8");
    assert_eq!(body.lines().next(), Some("x,y"));
    assert_eq!(body.lines().count(), 5);
    let (t, _) = ok_text(get(Some("text/csv;q=0.5, text/tab-separated-values"), None));
    assert_eq!(t, "text/tab-separated-values; charset=utf-8");
    // The `format` parameter wins over Accept.
    let (t, _) = ok_text(get(Some("text/csv"), Some("json")));
    assert_eq!(t, "application/sparql-results+json");
    // A browser's Accept.
    let (t, _) = ok_text(get(
        Some("text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8"),
        None,
    ));
    assert_eq!(t, "application/sparql-results+xml");
    // Nothing acceptable: 406, naming what the answer can be.
    for (accept, format) in [(Some("image/png"), None), (None, Some("ttl"))] {
        let r = get(accept, format);
        assert_eq!(r.status(), StatusCode::NOT_ACCEPTABLE);
        assert!(r
            .text()
            .unwrap()
            .contains("application/sparql-results+json"));
    }
}

#[test]
fn the_root_serves_the_page_or_the_service_description() {
    let (_dir, server) = family_server(&[]);
    let http = client();
    for path in ["/", "/query", "/sparql"] {
        // RDF clients get the description.
        let (t, body) = ok_text(
            http.get(server.url(path))
                .header("Accept", "text/turtle")
                .send()
                .unwrap(),
        );
        assert_eq!(t, "text/turtle; charset=utf-8");
        let triples: Vec<oxrdf::Triple> = oxttl::TurtleParser::new()
            .for_slice(body.as_bytes())
            .collect::<Result<_, _>>()
            .unwrap();
        let sd = "http://www.w3.org/ns/sparql-service-description#";
        let has = |p: &str, o: &str| {
            triples
                .iter()
                .any(|t| t.predicate.as_str() == format!("{sd}{p}") && t.object.to_string() == o)
        };
        assert!(
            has("endpoint", &format!("<{}/query>", server.base)),
            "{body}"
        );
        assert!(
            has("supportedLanguage", &format!("<{sd}SPARQL11Query>")),
            "{body}"
        );
        assert!(
            triples.iter().any(
                |t| t.predicate.as_str() == "http://rdfs.org/ns/void#triples"
                    && t.object.to_string().starts_with("\"5\"")
            ),
            "{body}"
        );
        // Browsers (and clients that accept anything) get the page.
        let (t, body) = ok_text(
            http.get(server.url(path))
                .header("Accept", "text/html,*/*;q=0.8")
                .send()
                .unwrap(),
        );
        assert_eq!(t, "text/html; charset=utf-8");
        assert!(body.contains("new Yasgui("), "{body}");
    }
    for (accept, service) in [
        (
            "application/n-triples",
            "<http://www.w3.org/ns/sparql-service-description#Service>",
        ),
        ("application/rdf+xml", "<sd:Service "),
    ] {
        let (got, body) = ok_text(
            http.get(server.url("/"))
                .header("Accept", accept)
                .send()
                .unwrap(),
        );
        assert_eq!(got, accept);
        assert!(body.contains(service), "{body}");
    }
    // The page's assets are in the binary, cached for long.
    let page = http.get(server.url("/")).send().unwrap().text().unwrap();
    let js = page
        .split('"')
        .find(|s| s.ends_with("yasgui.min.js"))
        .expect("the page loads YASGUI");
    let r = http.get(server.url(js)).send().unwrap();
    assert_eq!(r.status(), StatusCode::OK);
    assert!(r.headers()["cache-control"]
        .to_str()
        .unwrap()
        .contains("max-age"));
    assert!(r.bytes().unwrap().len() > 100_000);
    assert_eq!(
        http.get(server.url("/nothing")).send().unwrap().status(),
        StatusCode::NOT_FOUND
    );
}

#[test]
fn each_error_has_its_status_and_message() {
    let (_dir, server) = family_server(&[]);
    let http = client();
    // A bad query: 400 with the parser's message and a caret under the position.
    let r = http
        .get(server.url("/query"))
        .query(&[("query", "SELECT ?x WHERE {\n ?x <http://e/parent> }")])
        .send()
        .unwrap();
    assert_eq!(r.status(), StatusCode::BAD_REQUEST);
    let body = r.text().unwrap();
    assert!(body.contains("invalid SPARQL: error at 2:"), "{body}");
    assert!(body.contains("line 2:  ?x <http://e/parent> }\n"), "{body}");
    assert!(body.contains('^'), "{body}");
    // No query, or two.
    let r = http
        .post(server.url("/query"))
        .header("Content-Type", "application/x-www-form-urlencoded")
        .body("")
        .send()
        .unwrap();
    assert_eq!(r.status(), StatusCode::BAD_REQUEST);
    assert!(r.text().unwrap().contains("no query given"));
    let r = http
        .get(server.url("/query"))
        .query(&[("query", CLOSURE), ("query", CLOSURE)])
        .send()
        .unwrap();
    assert_eq!(r.status(), StatusCode::BAD_REQUEST);
    // An unsupported media type: 415; none at all: 400.
    let r = http
        .post(server.url("/query"))
        .header("Content-Type", "text/plain")
        .body(CLOSURE)
        .send()
        .unwrap();
    assert_eq!(r.status(), StatusCode::UNSUPPORTED_MEDIA_TYPE);
    assert!(r.text().unwrap().contains("application/sparql-query"));
    let r = http
        .post(server.url("/query"))
        .body(CLOSURE)
        .send()
        .unwrap();
    assert_eq!(r.status(), StatusCode::BAD_REQUEST);
    // Updates, however sent: 403, the store is read-only.
    let update = "INSERT DATA { <http://e/x> <http://e/parent> <http://e/y> }";
    let attempts = [
        http.get(server.url("/query")).query(&[("query", update)]),
        http.post(server.url("/query"))
            .header("Content-Type", "application/sparql-update")
            .body(update),
        http.post(server.url("/sparql"))
            .header("Content-Type", "application/x-www-form-urlencoded")
            .body(form_body(&[("update", update)])),
        http.post(server.url("/update"))
            .header("Content-Type", "application/sparql-update")
            .body(update),
    ];
    for attempt in attempts {
        let r = attempt.send().unwrap();
        assert_eq!(r.status(), StatusCode::FORBIDDEN);
        assert!(r.text().unwrap().contains("the store is read-only"));
    }
    // The protocol's dataset reaches the evaluator: a default graph the store lacks is
    // empty, so the closure has no row.
    let r = http
        .get(server.url("/query"))
        .query(&[("query", CLOSURE), ("default-graph-uri", "http://e/g")])
        .header("Accept", "application/sparql-results+json")
        .send()
        .unwrap();
    assert_eq!(r.status(), StatusCode::OK);
    let v: serde_json::Value = serde_json::from_str(&r.text().unwrap()).unwrap();
    assert_eq!(v["results"]["bindings"].as_array().unwrap().len(), 0);
    let r = http
        .get(server.url("/query"))
        .query(&[("query", CLOSURE), ("named-graph-uri", "not an iri")])
        .send()
        .unwrap();
    assert_eq!(r.status(), StatusCode::BAD_REQUEST);
    assert!(r.text().unwrap().contains("invalid graph IRI"));
    // CONSTRUCT answers in an RDF format.
    let r = http
        .get(server.url("/query"))
        .query(&[(
            "query",
            "CONSTRUCT { ?x <http://e/p> ?y } WHERE { ?x <http://e/parent> ?y }",
        )])
        .header("Accept", "application/n-triples")
        .send()
        .unwrap();
    assert_eq!(r.status(), StatusCode::OK);
    assert!(r.text().unwrap().contains(" <http://e/p> "));
    server.wait_for_log("GET /query 400 0 rows");
    server.wait_for_log("POST /update 403 0 rows");
}

#[test]
fn a_limit_cut_is_seen_in_every_format() {
    let (_dir, server) = family_server(&["--limit", "2"]);
    let http = client();
    let get = |accept: &str| {
        http.get(server.url("/query"))
            .query(&[("query", CLOSURE)])
            .header("Accept", accept)
            .send()
            .unwrap()
    };
    // JSON: a complete document with a `cut` member after the two rows.
    let (_, body) = ok_text(get("application/sparql-results+json"));
    let v: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!(v["results"]["bindings"].as_array().unwrap().len(), 2);
    assert_eq!(v["cut"]["reason"], "limit");
    assert_eq!(v["cut"]["rows"], 2);
    assert!(v["cut"]["message"]
        .as_str()
        .unwrap()
        .contains("limit of 2 rows"));
    // The other formats: the rows, then a body that ends in an error.
    for accept in [
        "application/sparql-results+xml",
        "text/csv",
        "text/tab-separated-values",
    ] {
        let r = get(accept);
        assert_eq!(r.status(), StatusCode::OK);
        let read = r.text();
        assert!(
            read.is_err(),
            "{accept}: a cut answer read as complete: {read:?}"
        );
    }
    // Read by hand, an XML answer shows its rows and why it stops.
    let raw = raw_get(&server, "/query", CLOSURE, "application/sparql-results+xml");
    assert!(raw.contains("<result>"), "{raw}");
    assert!(
        raw.contains("<!-- the answer was cut at the endpoint's limit of 2 rows -->"),
        "{raw}"
    );
    assert!(!raw.contains("</sparql>"), "{raw}");
    // An answer within the limit is complete.
    let (_, body) = ok_text(
        http.get(server.url("/query"))
            .query(&[(
                "query",
                "SELECT ?y WHERE { <http://e/a> <http://e/parent> ?y }",
            )])
            .send()
            .unwrap(),
    );
    assert!(!body.contains("cut"), "{body}");
    server.wait_for_log("cut: limit");
}

/// The raw bytes of a GET (HTTP/1.0, so that the body is not chunked), as far as the
/// server sends them.
fn raw_get(server: &Server, path: &str, query: &str, accept: &str) -> String {
    use std::io::{Read, Write};
    let address = server.base.trim_start_matches("http://");
    let mut stream = std::net::TcpStream::connect(address).unwrap();
    let target = format!("{path}?{}", form_body(&[("query", query)]));
    write!(
        stream,
        "GET {target} HTTP/1.1\r\nHost: {address}\r\nAccept: {accept}\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut bytes = Vec::new();
    let _ = stream.read_to_end(&mut bytes);
    String::from_utf8_lossy(&bytes).into_owned()
}

#[test]
fn a_timeout_is_seen_by_the_client() {
    let dir = tempfile::tempdir().unwrap();
    let store = load_file(dir.path(), &data::repo_file("fixtures/codex/codex-m.nt.gz"));
    let server = Server::start(&store, &["--timeout", "0.01"]);
    // Every relation, joined with a closure: far more than 10 ms.
    let q = "SELECT * WHERE { ?x ?p ?y . ?y <http://www.wikidata.org/prop/direct/P530>* ?z }";
    let r = client()
        .get(server.url("/query"))
        .query(&[("query", q)])
        .send()
        .unwrap();
    let status = r.status();
    let body = r.text();
    // Before the first row: a 500 saying so; once rows went out: a `cut` note.
    match body {
        Ok(body) if status == StatusCode::INTERNAL_SERVER_ERROR => {
            assert!(
                body.contains("timeout: the query ran past the endpoint's limit of 0.01 s"),
                "{body}"
            )
        }
        Ok(body) => {
            assert_eq!(status, StatusCode::OK);
            let v: serde_json::Value = serde_json::from_str(&body).unwrap();
            assert_eq!(v["cut"]["reason"], "timeout", "{body}");
        }
        Err(e) => panic!("{status}: {e}"),
    }
}

#[test]
fn concurrent_clients_get_their_own_answers() {
    let (_dir, server) = family_server(&["--workers", "2", "--queue-timeout", "30"]);
    let queries: Vec<(String, usize)> = vec![
        (CLOSURE.to_owned(), 4),
        (
            "SELECT ?y WHERE { <http://e/a> <http://e/parent>* ?y }".to_owned(),
            3,
        ),
        ("SELECT ?x WHERE { ?x <http://e/name> ?n }".to_owned(), 2),
        (
            "SELECT ?x WHERE { ?x ^<http://e/parent> <http://e/c> }".to_owned(),
            0,
        ),
    ];
    std::thread::scope(|scope| {
        for t in 0..16 {
            let (server, queries) = (&server, &queries);
            scope.spawn(move || {
                let http = client();
                for i in 0..10 {
                    let (q, rows) = &queries[(t + i) % queries.len()];
                    let (_, body) = ok_text(
                        http.get(server.url("/query"))
                            .query(&[("query", q)])
                            .send()
                            .unwrap(),
                    );
                    let v: serde_json::Value = serde_json::from_str(&body).unwrap();
                    assert_eq!(
                        v["results"]["bindings"].as_array().unwrap().len(),
                        *rows,
                        "{q}"
                    );
                }
            });
        }
    });
    let answered = server
        .log()
        .iter()
        .filter(|l| l.contains("GET /query 200"))
        .count();
    assert!(answered >= 150, "{answered} answers logged");
}

#[test]
fn cors_headers_only_with_the_flag() {
    let http = client();
    for (cors, expected) in [(false, None), (true, Some("*"))] {
        let (_dir, server) = family_server(if cors { &["--cors"] } else { &[] });
        let r = http
            .get(server.url("/query"))
            .query(&[("query", CLOSURE)])
            .header("Origin", "http://elsewhere.example")
            .send()
            .unwrap();
        assert_eq!(
            r.headers()
                .get("access-control-allow-origin")
                .map(|v| v.to_str().unwrap()),
            expected
        );
        if cors {
            let preflight = http
                .request(reqwest::Method::OPTIONS, server.url("/query"))
                .header("Origin", "http://elsewhere.example")
                .header("Access-Control-Request-Method", "POST")
                .header("Access-Control-Request-Headers", "content-type")
                .send()
                .unwrap();
            assert!(preflight.status().is_success());
            assert!(preflight.headers()["access-control-allow-methods"]
                .to_str()
                .unwrap()
                .contains("POST"));
        }
    }
}

#[test]
fn sigterm_stops_the_server_cleanly() {
    let (_dir, server) = family_server(&[]);
    let (_, body) = ok_text(
        client()
            .get(server.url("/query"))
            .query(&[("query", CLOSURE)])
            .send()
            .unwrap(),
    );
    assert_eq!(json_pairs(&body).len(), 4);
    let address = server.base.trim_start_matches("http://").to_owned();
    let (status, log) = server.terminate();
    assert!(status.success(), "exit after SIGTERM: {status:?}, {log:?}");
    assert!(
        log.iter().any(|l| l.contains("k2rpq serve: stopped")),
        "{log:?}"
    );
    // The port is free again.
    assert!(std::net::TcpStream::connect(&address).is_err());
}

#[test]
fn sigterm_lets_an_answer_in_progress_finish() {
    let dir = tempfile::tempdir().unwrap();
    let store = load_file(dir.path(), &data::repo_file("fixtures/codex/codex-m.nt.gz"));
    let server = Server::start(&store, &[]);
    // Every triple: long enough (about a second in a debug build) to be in progress at
    // the signal; were it done before, the assertions hold all the same.
    let q = "SELECT * WHERE { ?x ?p ?y }";
    let url = server.url("/query");
    let answer = std::thread::spawn(move || {
        let r = client()
            .get(url)
            .query(&[("query", q)])
            .header("Accept", "text/tab-separated-values")
            .send()
            .unwrap();
        (r.status(), r.text().unwrap())
    });
    std::thread::sleep(std::time::Duration::from_millis(300));
    let (status, log) = server.terminate();
    assert!(status.success(), "{log:?}");
    let (answer_status, body) = answer.join().unwrap();
    assert_eq!(answer_status, StatusCode::OK);
    assert_eq!(body.lines().count(), 1 + 206_205);
    assert!(log.iter().any(|l| l.contains("GET /query 200")), "{log:?}");
}

#[test]
fn bad_arguments_are_refused_before_serving() {
    let dir = tempfile::tempdir().unwrap();
    let store = load(dir.path(), FAMILY);
    for args in [
        vec!["--timeout", "0"],
        vec!["--timeout", "soon"],
        vec!["--limit", "0"],
        vec!["--bind", "not an address"],
    ] {
        let out = Command::new(env!("CARGO_BIN_EXE_k2rpq"))
            .args(["serve", "--engine", "cpu", "--store"])
            .arg(&store)
            .args(&args)
            .output()
            .unwrap();
        assert!(!out.status.success(), "{args:?}");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!stderr.contains("panicked"), "{stderr}");
    }
    let out = Command::new(env!("CARGO_BIN_EXE_k2rpq"))
        .args(["serve", "--engine", "cpu", "--store", "missing"])
        .current_dir(dir.path())
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("k2rpq: error: "));
}
