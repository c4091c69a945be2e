//! Benchmark: RPQs on an edge list (default `../shared/data/cnr-2000`) with the CPU
//! engine against Oxigraph's in-memory store in the same process.
//!
//! `cargo run --release --example rpq_cnr -- [EDGES.tsv.gz] [CONSTANTS] [TIMEOUT_S]`
//!
//! Runs `<c> p+ ?y` and `?x p* <c>` from CONSTANTS (default 100) random nodes (seeded),
//! checking that both engines count the same pairs, then `?x p+ ?y` (count only) with
//! TIMEOUT_S (default 60) seconds each.

use std::sync::mpsc;
use std::time::{Duration, Instant};

use k2rpq::engine::cpu::CpuEngine;
use k2rpq::engine::Engine;
use k2rpq::rpq::terms::{load_tsv, TSV_NODE_PREFIX, TSV_PREDICATE};
use k2rpq::rpq::{
    evaluate_with, plan, Endpoint, EvalOptions, MemoryGraph, Path, PathGraph, PerQueryRelations,
    PredId,
};
use oxigraph::model::{GraphName, NamedNode, Quad};
use oxigraph::sparql::{CancellationToken, QueryResults, SparqlEvaluator};
use oxigraph::store::Store;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    if v.is_empty() {
        f64::NAN
    } else {
        v[v.len() / 2]
    }
}

/// Runs a COUNT query on Oxigraph with a deadline: `None` when it did not finish in time.
fn oxigraph_count(store: &Store, query: &str, timeout: Duration) -> Option<(u64, f64)> {
    let token = CancellationToken::new();
    let (tx, rx) = mpsc::channel();
    let (store, query, tok) = (store.clone(), query.to_string(), token.clone());
    std::thread::spawn(move || {
        let t0 = Instant::now();
        let res = SparqlEvaluator::new()
            .with_cancellation_token(tok)
            .parse_query(&query)
            .unwrap()
            .on_store(&store)
            .execute();
        let n = match res {
            Ok(QueryResults::Solutions(mut s)) => match s.next() {
                Some(Ok(sol)) => sol
                    .get("n")
                    .and_then(|t| match t {
                        oxigraph::model::Term::Literal(l) => l.value().parse().ok(),
                        _ => None,
                    })
                    .unwrap_or(0),
                _ => return,
            },
            _ => return,
        };
        let _ = tx.send((n, t0.elapsed().as_secs_f64()));
    });
    let r = rx.recv_timeout(timeout).ok();
    if r.is_none() {
        token.cancel();
    }
    r
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let file = args.get(1).cloned().unwrap_or_else(|| {
        concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../shared/data/cnr-2000/cnr-2000.arcs.tsv.gz"
        )
        .into()
    });
    let k: usize = args.get(2).map_or(100, |s| s.parse().unwrap());
    let timeout = Duration::from_secs(args.get(3).map_or(60, |s| s.parse().unwrap()));
    let t0 = Instant::now();
    let (graph, dict) = load_tsv(std::path::Path::new(&file)).unwrap();
    let p = dict.iri_id(TSV_PREDICATE).unwrap();
    let tree = graph.relation(p).unwrap();
    println!(
        "loaded {file}: {} nodes, {} edges, tree {} levels, in {:.1} s (rayon threads: {})",
        graph.nodes().len(),
        tree.nnz(),
        tree.height(),
        t0.elapsed().as_secs_f64(),
        rayon::current_num_threads()
    );
    let t0 = Instant::now();
    let store = Store::new().unwrap();
    let pn = NamedNode::new(TSV_PREDICATE).unwrap();
    let node = |i: u32| NamedNode::new_unchecked(format!("{TSV_NODE_PREFIX}{i}"));
    store
        .extend(
            tree.cells()
                .into_iter()
                .map(|(s, o)| Quad::new(node(s), pn.clone(), node(o), GraphName::DefaultGraph)),
        )
        .unwrap();
    println!(
        "oxigraph in-memory store loaded in {:.1} s",
        t0.elapsed().as_secs_f64()
    );

    match std::env::var("RPQ_ENGINE").as_deref() {
        Ok("gpu") => {
            let gpu = k2rpq::engine::gpu::GpuEngine::new(0).unwrap_or_else(|e| {
                eprintln!("rpq_cnr: RPQ_ENGINE=gpu needs a GPU: {e}");
                std::process::exit(2)
            });
            run(&gpu, &graph, &store, p, k, timeout);
        }
        _ => run(&CpuEngine::new(), &graph, &store, p, k, timeout),
    }
    std::process::exit(0);
}

fn run<E: Engine>(
    engine: &E,
    graph: &MemoryGraph,
    store: &Store,
    p: PredId,
    k: usize,
    timeout: Duration,
) {
    println!("engine: {}", engine.name());
    let traversal = match std::env::var("RPQ_TRAVERSAL").as_deref() {
        Ok("dense") => k2rpq::rpq::TraversalPolicy::Dense,
        Ok("masked") => k2rpq::rpq::TraversalPolicy::Masked,
        _ => k2rpq::rpq::TraversalPolicy::Auto,
    };
    let opts = EvalOptions {
        traversal,
        count_only: true,
        timeout: Some(timeout),
        ..EvalOptions::default()
    };
    let mut rels = PerQueryRelations::new(engine, graph, opts.config);
    let mut rng = StdRng::seed_from_u64(2000);
    let nodes: Vec<u32> = graph.nodes().iter().collect();
    let constants: Vec<u32> = (0..k)
        .map(|_| nodes[rng.random_range(0..nodes.len())])
        .collect();
    let plus = Path::OneOrMore(Path::link(p));
    let star = Path::ZeroOrMore(Path::link(p));
    for (name, path, forward) in [("<c> p+ ?y", &plus, true), ("?x p* <c>", &star, false)] {
        let (mut ours, mut oxi) = (Vec::new(), Vec::new());
        let (mut oxi_timeouts, mut mismatches, mut pairs, mut our_timeouts) = (0, 0, 0u64, 0);
        for &c in &constants {
            let (s, o) = if forward {
                (Endpoint::Const(c), Endpoint::Var)
            } else {
                (Endpoint::Var, Endpoint::Const(c))
            };
            let t = Instant::now();
            let pl = plan(graph, path, s, o, &opts);
            let r = evaluate_with(engine, graph, &pl, &opts, &mut rels).unwrap();
            ours.push(t.elapsed().as_secs_f64());
            if std::env::var_os("RPQ_TRACE").is_some() && ours.len() == 1 {
                print!("{pl}{}", r.trace);
            }
            pairs += r.count;
            our_timeouts += r.timed_out as u32;
            let q = if forward {
                format!("SELECT (COUNT(*) AS ?n) WHERE {{ <{TSV_NODE_PREFIX}{c}> <{TSV_PREDICATE}>+ ?y }}")
            } else {
                format!("SELECT (COUNT(*) AS ?n) WHERE {{ ?x <{TSV_PREDICATE}>* <{TSV_NODE_PREFIX}{c}> }}")
            };
            match oxigraph_count(store, &q, timeout) {
                Some((n, secs)) => {
                    oxi.push(secs);
                    if !r.timed_out && n != r.count {
                        mismatches += 1;
                        eprintln!("MISMATCH {name} c={c}: ours {} oxigraph {n}", r.count);
                    }
                }
                None => oxi_timeouts += 1,
            }
        }
        let (mo, mx) = (median(&mut ours), median(&mut oxi));
        println!(
            "{name}: {} constants, {pairs} pairs in all; median ours {:.2} ms, oxigraph {:.2} ms ({:.1}x); ours total {:.2} s; timeouts: ours {our_timeouts}, oxigraph {oxi_timeouts}; count mismatches {mismatches}",
            constants.len(),
            mo * 1e3,
            mx * 1e3,
            mx / mo,
            ours.iter().sum::<f64>(),
        );
    }
    // All pairs, counted.
    let t = Instant::now();
    let pl = plan(graph, &plus, Endpoint::Var, Endpoint::Var, &opts);
    let r = evaluate_with(engine, graph, &pl, &opts, &mut rels).unwrap();
    println!(
        "?x p+ ?y (count) ours: {} pairs{} in {:.1} s ({} of {} batches, {} steps)",
        r.count,
        if r.timed_out {
            " so far, TIMED OUT"
        } else {
            ""
        },
        t.elapsed().as_secs_f64(),
        r.trace.batches,
        pl.batches(),
        r.trace.total_steps
    );
    let q = format!("SELECT (COUNT(*) AS ?n) WHERE {{ ?x <{TSV_PREDICATE}>+ ?y }}");
    match oxigraph_count(store, &q, timeout) {
        Some((n, secs)) => println!("?x p+ ?y (count) oxigraph: {n} pairs in {secs:.1} s"),
        None => println!(
            "?x p+ ?y (count) oxigraph: no answer within {} s",
            timeout.as_secs()
        ),
    }
}
