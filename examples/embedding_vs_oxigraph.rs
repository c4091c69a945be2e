//! Benchmark: full SPARQL queries (OPTIONAL, MINUS, NOT EXISTS, aggregates, CONSTRUCT)
//! answered the way `k2rpq query --oxigraph --store` answers them (Oxigraph evaluates the
//! query over a copy of the store, k2rpq the property paths from the store's trees)
//! against Oxigraph's own evaluation over the same copy, in one process.
//!
//! `cargo run --release --example embedding_vs_oxigraph -- [--repeats N] [DATA.nt.gz [QUERIES.rq]]`
//!
//! DATA defaults to the bundled CoDEx-M, QUERIES to `sparql/codex-m-mixed.rq` (queries
//! separated by lines holding only `;`), N to 5. The data are loaded into a k2rpq
//! store in a temporary folder, opened on the CPU engine (the GPU's turn is the device
//! suite's). Every query runs once untimed on each side, then REPEATS times alternately;
//! the table gives medians, and the row multisets of both sides must agree.

use std::sync::Arc;
use std::time::Instant;

use k2rpq::database::{Database, DatabaseOptions, EngineChoice};
use k2rpq::oxigraph::{copy_store, StorePaths};
use k2rpq::store::{load, Input, LoadOptions};
use oxigraph::sparql::SparqlEvaluator;
use oxigraph::store::Store;

// The tests' row multisets (`tests/answers/mod.rs`), so that both compare rows alike.
#[path = "../tests/answers/mod.rs"]
mod answers;
use answers::{try_oxigraph_multiset as rows, Multiset};

const DEFAULT_DATA: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/fixtures/codex/codex-m.nt.gz");
const DEFAULT_QUERIES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/sparql/codex-m-mixed.rq");

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// One side's run of a query: its rows, read in full (reading is part of the time, as a
/// user waits for every row).
type Run<'a> = dyn Fn() -> Result<Multiset, String> + 'a;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args: Vec<String> = std::env::args().skip(1).collect();
    let mut repeats = 5usize;
    if let Some(at) = args.iter().position(|a| a == "--repeats") {
        repeats = args.get(at + 1).ok_or("--repeats N")?.parse()?;
        args.drain(at..at + 2);
    }
    let repeats = repeats.max(1);
    let data = args.first().map_or(DEFAULT_DATA, String::as_str);
    let queries = args.get(1).map_or(DEFAULT_QUERIES, String::as_str);
    let text = std::fs::read_to_string(queries)?;
    let queries: Vec<&str> = text
        .split("\n;\n")
        .map(str::trim)
        .filter(|q| {
            q.lines()
                .any(|l| !l.trim().is_empty() && !l.trim().starts_with('#'))
        })
        .collect();

    let dir = tempfile::tempdir()?;
    let store_dir = dir.path().join("store");
    let options = LoadOptions {
        progress: false,
        ..Default::default()
    };
    load(&[Input::Path(data.into())], &store_dir, &options)?;
    let db = Arc::new(Database::open(
        &store_dir,
        &DatabaseOptions {
            engine: EngineChoice::Cpu,
            ..Default::default()
        },
    )?);
    let t = Instant::now();
    let copy = copy_store(db.store(), false)?;
    println!(
        "{data}: {} triples copied into Oxigraph in {:.3} s; {repeats} repeats, CPU engine",
        copy.triples,
        t.elapsed().as_secs_f64()
    );
    let paths = StorePaths::new(Arc::clone(&db));
    let store: &Store = &copy.store;
    println!("\n| query | rows | k2rpq + Oxigraph ms | Oxigraph ms | ratio |");
    println!("|---|---:|---:|---:|---:|");
    let mut ratios = Vec::new();
    for (i, q) in queries.iter().enumerate() {
        let ours: &Run = &|| rows(paths.evaluate(store, q).map_err(|e| e.to_string())?);
        let theirs: &Run = &|| {
            let r = SparqlEvaluator::new()
                .parse_query(q)
                .map_err(|e| e.to_string())?
                .on_store(store)
                .execute()
                .map_err(|e| e.to_string())?;
            rows(r)
        };
        let (a, b) = (ours()?, theirs()?);
        if a != b {
            return Err(format!("query {}: the two sides disagree\n{q}", i + 1).into());
        }
        let (mut ta, mut tb) = (Vec::new(), Vec::new());
        for _ in 0..repeats {
            for (f, times) in [(ours, &mut ta), (theirs, &mut tb)] {
                let t = Instant::now();
                f()?;
                times.push(t.elapsed().as_secs_f64() * 1e3);
            }
        }
        let (ma, mb) = (median(ta), median(tb));
        ratios.push(ma / mb);
        let first = q
            .lines()
            .find(|l| l.trim_start().starts_with("# "))
            .map_or(String::new(), |l| l.trim_start()[2..].to_string());
        println!(
            "| {} {first} | {} | {ma:.3} | {mb:.3} | {:.3}x |",
            i + 1,
            a.values().sum::<usize>(),
            ma / mb
        );
    }
    let geo = (ratios.iter().map(|r| r.ln()).sum::<f64>() / ratios.len() as f64).exp();
    println!("\ngeometric mean of the ratios: {geo:.3}x (below 1: k2rpq's paths are faster)");
    Ok(())
}
