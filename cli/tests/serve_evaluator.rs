//! The endpoint over evaluators that behave as the store's cannot be made to on demand:
//! triples (CONSTRUCT) in N-Triples and Turtle, rows that come slowly (a timeout after
//! the first row), a worker held busy (503 past the queue), a failure (500), and the
//! request's dataset as the evaluator receives it.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

use k2rpq_cli::serve::evaluate::{Answer, Control, EvaluationError, Evaluator, GraphSummary};
use k2rpq_cli::serve::{router, Limits};
use oxrdf::{Literal, NamedNode, Term, Triple, Variable};
use reqwest::blocking::{Client, Response};
use reqwest::StatusCode;
use spargebra::Query;

#[path = "serve_run/mod.rs"]
mod serve_run;
use serve_run::client;

/// An endpoint over `evaluator`, served on a free port by a runtime of its own; its base
/// URL.
fn serve(evaluator: Arc<dyn Evaluator>, limits: Limits) -> String {
    let (found, address) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let runtime = tokio::runtime::Runtime::new().unwrap();
        runtime.block_on(async move {
            let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
            let bound = listener.local_addr().unwrap();
            found.send(bound).unwrap();
            let app = router(evaluator, limits, false, &bound.to_string());
            axum::serve(listener, app).await.unwrap();
        });
    });
    format!("http://{}", address.recv().unwrap())
}

/// `GET BASE/query?query=QUERY` through `http`, with `Accept: ACCEPT` where given.
fn get_query(http: &Client, base: &str, query: &str, accept: Option<&str>) -> Response {
    let mut request = http.get(format!("{base}/query")).query(&[("query", query)]);
    if let Some(a) = accept {
        request = request.header("Accept", a);
    }
    request.send().unwrap()
}

fn n(s: &str) -> NamedNode {
    NamedNode::new(format!("http://e/{s}")).unwrap()
}

/// Answers every query with what its closure makes of the query.
struct Scripted<F>(F);

impl<F> Evaluator for Scripted<F>
where
    F: Fn(&Query, &Control) -> Result<Answer, EvaluationError> + Send + Sync + 'static,
{
    fn evaluate(&self, query: &Query, control: &Control) -> Result<Answer, EvaluationError> {
        (self.0)(query, control)
    }

    fn graphs(&self) -> Vec<GraphSummary> {
        Vec::new()
    }
}

fn triples(count: usize) -> Vec<Triple> {
    (0..count)
        .map(|i| {
            Triple::new(
                n(&format!("s{i}")),
                n("p"),
                Term::from(Literal::new_simple_literal(format!("v{i}"))),
            )
        })
        .collect()
}

fn graph_evaluator(count: usize) -> Arc<dyn Evaluator> {
    Arc::new(Scripted(move |_: &Query, _: &Control| {
        Ok(Answer::Graph(Box::new(triples(count).into_iter().map(Ok))))
    }))
}

const CONSTRUCT: &str = "CONSTRUCT { ?s <http://e/p> ?o } WHERE { ?s <http://e/q> ?o }";

#[test]
fn construct_answers_in_n_triples_and_turtle() {
    let base = serve(graph_evaluator(3), Limits::default());
    let http = client();
    for (accept, content_type) in [
        (None, "application/n-triples"),
        (Some("application/n-triples"), "application/n-triples"),
        (Some("text/turtle"), "text/turtle; charset=utf-8"),
    ] {
        let r = get_query(&http, &base, CONSTRUCT, accept);
        assert_eq!(r.status(), StatusCode::OK);
        assert_eq!(r.headers()["content-type"], content_type);
        let body = r.text().unwrap();
        let parsed: Vec<Triple> = oxttl::TurtleParser::new()
            .for_slice(body.as_bytes())
            .collect::<Result<_, _>>()
            .unwrap();
        assert_eq!(parsed, triples(3), "{body}");
    }
    // Results formats do not fit triples.
    let json = Some("application/sparql-results+json");
    let r = get_query(&http, &base, CONSTRUCT, json);
    assert_eq!(r.status(), StatusCode::NOT_ACCEPTABLE);
}

#[test]
fn a_limit_cuts_triples_visibly() {
    let limits = Limits {
        row_limit: Some(2),
        ..Limits::default()
    };
    let base = serve(graph_evaluator(5), limits);
    let r = get_query(&client(), &base, CONSTRUCT, None);
    assert_eq!(r.status(), StatusCode::OK);
    assert!(r.text().is_err(), "a cut answer read as complete");
}

/// Rows that come one every 20 ms, as a streaming evaluator's would.
fn slow_rows(count: usize) -> Arc<dyn Evaluator> {
    Arc::new(Scripted(move |_: &Query, _: &Control| {
        let rows = (0..count).map(|i| {
            std::thread::sleep(Duration::from_millis(20));
            Ok(vec![Some(Term::from(n(&format!("r{i}"))))])
        });
        Ok(Answer::Solutions {
            variables: vec![Variable::new("x").unwrap()],
            rows: Box::new(rows),
        })
    }))
}

#[test]
fn a_timeout_after_the_first_rows_ends_the_answer_visibly() {
    let limits = Limits {
        timeout: Duration::from_millis(300),
        ..Limits::default()
    };
    let base = serve(slow_rows(1000), limits);
    let http = client();
    let q = "SELECT ?x WHERE { ?x <http://e/p> ?y }";
    // JSON: the rows found in time, then the `cut` note.
    let started = std::time::Instant::now();
    let r = get_query(&http, &base, q, None);
    assert_eq!(r.status(), StatusCode::OK);
    let body = r.text().unwrap();
    assert!(started.elapsed() < Duration::from_secs(5));
    let v: serde_json::Value = serde_json::from_str(&body).unwrap();
    let rows = v["results"]["bindings"].as_array().unwrap().len();
    assert!(rows > 0 && rows < 1000, "{rows} rows");
    assert_eq!(v["cut"]["reason"], "timeout");
    assert_eq!(v["cut"]["rows"], rows);
    // CSV: the body ends in an error.
    let r = get_query(&http, &base, q, Some("text/csv"));
    assert_eq!(r.status(), StatusCode::OK);
    assert!(r.text().is_err());
}

/// Holds every evaluation until released.
struct Gate {
    open: Mutex<bool>,
    opened: Condvar,
    entered: AtomicUsize,
}

impl Gate {
    fn new() -> Arc<Gate> {
        Arc::new(Gate {
            open: Mutex::new(false),
            opened: Condvar::new(),
            entered: AtomicUsize::new(0),
        })
    }

    fn wait(&self) {
        self.entered.fetch_add(1, Ordering::SeqCst);
        let mut open = self.open.lock().unwrap();
        while !*open {
            open = self.opened.wait(open).unwrap();
        }
    }

    fn release(&self) {
        *self.open.lock().unwrap() = true;
        self.opened.notify_all();
    }
}

#[test]
fn past_the_pool_and_the_queue_a_request_gets_503() {
    let gate = Gate::new();
    let held = Arc::clone(&gate);
    let evaluator: Arc<dyn Evaluator> = Arc::new(Scripted(move |_: &Query, _: &Control| {
        held.wait();
        Ok(Answer::Boolean(true))
    }));
    let limits = Limits {
        workers: 1,
        queue_timeout: Duration::from_millis(200),
        ..Limits::default()
    };
    let base = serve(evaluator, limits);
    let url = format!("{base}/query");
    let ask = "ASK { ?x ?p ?y }";
    let first = {
        let url = url.clone();
        std::thread::spawn(move || client().get(url).query(&[("query", ask)]).send().unwrap())
    };
    while gate.entered.load(Ordering::SeqCst) == 0 {
        std::thread::sleep(Duration::from_millis(5));
    }
    // The one worker is busy: the next request waits 200 ms, then 503.
    let r = client().get(&url).query(&[("query", ask)]).send().unwrap();
    assert_eq!(r.status(), StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(r.headers()["retry-after"], "1");
    assert!(r.text().unwrap().contains("busy: all 1 workers"));
    gate.release();
    let first = first.join().unwrap();
    assert_eq!(first.status(), StatusCode::OK);
    assert_eq!(first.text().unwrap(), r#"{"head":{},"boolean":true}"#);
    // Free again.
    let r = client().get(&url).query(&[("query", ask)]).send().unwrap();
    assert_eq!(r.status(), StatusCode::OK);
}

#[test]
fn failures_and_panics_are_500_with_the_message() {
    let evaluator: Arc<dyn Evaluator> = Arc::new(Scripted(|q: &Query, _: &Control| {
        if q.to_string().contains("panic") {
            panic!("an evaluator bug");
        }
        Err(EvaluationError::Failed(
            "relation file p.k2 is corrupt".into(),
        ))
    }));
    let base = serve(evaluator, Limits::default());
    let r = get_query(&client(), &base, "ASK { ?x ?p ?y }", None);
    assert_eq!(r.status(), StatusCode::INTERNAL_SERVER_ERROR);
    assert_eq!(r.text().unwrap(), "relation file p.k2 is corrupt\n");
    // A panic in the evaluator is that request's 500; the server goes on.
    let r = get_query(&client(), &base, "ASK { ?x <http://e/panic> ?y }", None);
    assert_eq!(r.status(), StatusCode::INTERNAL_SERVER_ERROR);
    let r = get_query(&client(), &base, "ASK { ?x ?p ?y }", None);
    assert_eq!(r.status(), StatusCode::INTERNAL_SERVER_ERROR);
}

#[test]
fn the_request_dataset_replaces_the_query_dataset() {
    let seen: Arc<Mutex<Vec<String>>> = Arc::default();
    let record = Arc::clone(&seen);
    let evaluator: Arc<dyn Evaluator> = Arc::new(Scripted(move |q: &Query, _: &Control| {
        record.lock().unwrap().push(match q.dataset() {
            None => "none".to_owned(),
            Some(d) => format!(
                "default {:?} named {:?}",
                d.default.iter().map(|g| g.as_str()).collect::<Vec<_>>(),
                d.named
                    .iter()
                    .flatten()
                    .map(|g| g.as_str())
                    .collect::<Vec<_>>()
            ),
        });
        Ok(Answer::Boolean(false))
    }));
    let base = serve(evaluator, Limits::default());
    let http = client();
    let q = "ASK FROM <http://e/in-query> { ?x ?p ?y }";
    for params in [
        vec![("query", q)],
        vec![
            ("query", q),
            ("default-graph-uri", "http://e/g1"),
            ("default-graph-uri", "http://e/g2"),
            ("named-graph-uri", "http://e/n"),
        ],
    ] {
        let r = http
            .get(format!("{base}/query"))
            .query(&params)
            .send()
            .unwrap();
        assert_eq!(r.status(), StatusCode::OK);
    }
    // By form, too.
    let body = "query=ASK%20%7B%20%3Fx%20%3Fp%20%3Fy%20%7D&named-graph-uri=http%3A%2F%2Fe%2Fn2";
    let r = http
        .post(format!("{base}/query"))
        .header("Content-Type", "application/x-www-form-urlencoded")
        .body(body)
        .send()
        .unwrap();
    assert_eq!(r.status(), StatusCode::OK);
    assert_eq!(
        *seen.lock().unwrap(),
        [
            r#"default ["http://e/in-query"] named []"#,
            r#"default ["http://e/g1", "http://e/g2"] named ["http://e/n"]"#,
            r#"default [] named ["http://e/n2"]"#,
        ]
    );
}
