//! `k2rpq-bench embedding`: the Oxigraph embedding against Oxigraph alone. Inserts the
//! same synthetic quads in batches (one transaction each) into a plain Oxigraph store
//! and through a `K2Store`, and times both (medians of alternating runs, after an
//! untimed warm-up load of each); then times path queries through the
//! `K2Store` (the embedding's own per-query work, a snapshot of the relations, apart)
//! with and without a write before each, and reports the peak memory of the process.

use std::time::Instant;

use k2rpq::oxigraph::K2Store;

use k2rpq_bench::stats::Summary;
use oxigraph::model::{GraphName, NamedNode, Quad};
use oxigraph::sparql::QueryResults;
use oxigraph::store::Store;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

/// Arguments of `k2rpq-bench embedding`.
#[derive(clap::Args)]
pub struct Args {
    /// Quads to insert.
    #[arg(long, default_value_t = 200_000)]
    pub quads: usize,
    /// Quads per write (one transaction each).
    #[arg(long, default_value_t = 1_000)]
    pub batch: usize,
    /// Path queries timed in each setting.
    #[arg(long, default_value_t = 200)]
    pub queries: usize,
    /// Predicates of the synthetic graph.
    #[arg(long, default_value_t = 8)]
    pub predicates: usize,
    /// Random seed.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Timed loads of each store, alternating (after one untimed load of each).
    #[arg(long, default_value_t = 5)]
    pub repeats: usize,
    /// Instead of the in-memory insert comparison: a RocksDB-backed `K2Store` in this
    /// folder (opened, or created and filled by `--load`), whose per-query overhead is
    /// timed. Needs a build with `--features rocksdb`.
    #[arg(long, value_name = "DIR")]
    pub location: Option<std::path::PathBuf>,
    /// With `--location`: an RDF file (`.nt`, `.nq`, `.ttl`, `.trig`; `.gz` or `.bz2` too)
    /// bulk-loaded into the store first.
    #[arg(long, value_name = "FILE", requires = "location")]
    pub load: Option<std::path::PathBuf>,
    /// The path query timed (default: a closure from a node of the synthetic graph).
    #[arg(long)]
    pub query: Option<String>,
}

fn iri(s: String) -> NamedNode {
    NamedNode::new_unchecked(s)
}

/// Random quads over `quads / 4` nodes: a graph with long paths through each predicate.
fn synthetic(args: &Args) -> Vec<Quad> {
    let mut rng = StdRng::seed_from_u64(args.seed);
    let nodes = (args.quads / 4).max(2);
    (0..args.quads)
        .map(|_| {
            Quad::new(
                iri(format!("http://e/n{}", rng.random_range(0..nodes))),
                iri(format!(
                    "http://e/p{}",
                    rng.random_range(0..args.predicates)
                )),
                iri(format!("http://e/n{}", rng.random_range(0..nodes))),
                GraphName::DefaultGraph,
            )
        })
        .collect()
}

fn peak_rss_kib() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

fn rows(r: QueryResults<'_>) -> anyhow::Result<usize> {
    match r {
        QueryResults::Solutions(s) => {
            let mut n = 0;
            for row in s {
                row?;
                n += 1;
            }
            Ok(n)
        }
        QueryResults::Boolean(_) => Ok(1),
        QueryResults::Graph(g) => Ok(g.count()),
    }
}

/// Per-query times of a run of queries (µs): the queries', and the embedding's work
/// (its snapshot) before each.
struct QueryTimes {
    queries: Vec<f64>,
    overhead: Vec<f64>,
}

impl QueryTimes {
    /// "mean µs/query (median, max and which query)" of the queries, then the
    /// overhead's mean.
    fn describe(&self) -> (String, f64) {
        let q = Summary::of(&self.queries);
        let slowest = (self.queries.iter())
            .position(|&t| t == q.max)
            .map_or(0, |i| i + 1);
        (
            format!(
                "{:.1} µs/query (median {:.1}, max {:.1} in query {slowest})",
                q.mean, q.median, q.max
            ),
            Summary::of(&self.overhead).mean,
        )
    }
}

/// Runs `query` on `store` `n` times, `before(i)` (untimed) before the `i`th; returns the
/// time of each query and that of the embedding's snapshot before it.
fn time_queries(
    store: &K2Store,
    query: &str,
    n: usize,
    mut before: impl FnMut(usize) -> anyhow::Result<()>,
) -> anyhow::Result<QueryTimes> {
    let mut times = QueryTimes {
        queries: Vec::with_capacity(n),
        overhead: Vec::with_capacity(n),
    };
    for i in 0..n {
        before(i)?;
        times
            .overhead
            .push(store.time_snapshot().as_secs_f64() * 1e6);
        let t = Instant::now();
        rows(store.query(query)?)?;
        times.queries.push(t.elapsed().as_secs_f64() * 1e6);
    }
    Ok(times)
}

/// Runs the command.
pub fn run(args: Args) -> anyhow::Result<()> {
    let store = match &args.location {
        Some(dir) => open_on_disk(dir, args.load.as_deref())?,
        None => compare_inserts(&args)?,
    };
    time_path_queries(&store, &args)
}

/// The in-memory insert comparison; returns the last `K2Store` loaded.
fn compare_inserts(args: &Args) -> anyhow::Result<K2Store> {
    let quads = synthetic(args);
    let batch = args.batch.max(1);

    // Oxigraph's side does what `K2Store::extend` does: one transaction per batch, fed
    // borrowed quads (`Store::extend` wants owned ones, and cloning them is work the
    // K2Store side does not do).
    let load_oxigraph = || -> anyhow::Result<f64> {
        let oxigraph = Store::new()?;
        let t = Instant::now();
        for chunk in quads.chunks(batch) {
            let mut tx = oxigraph.start_transaction()?;
            tx.extend(chunk.iter());
            tx.commit()?;
        }
        Ok(t.elapsed().as_secs_f64())
    };
    let load_k2store = || -> anyhow::Result<(f64, K2Store)> {
        let store = K2Store::new()?;
        let t = Instant::now();
        for chunk in quads.chunks(batch) {
            store.extend(chunk.iter())?;
        }
        let s = t.elapsed().as_secs_f64();
        store.wait_for_merges();
        Ok((s, store))
    };
    // An untimed load of each first, so that no timed load pays the heap's first growth
    // (the kernel zeroing fresh pages: a third of a cold load's time, measured with
    // perf); then the two alternate, and the medians are compared.
    load_oxigraph()?;
    drop(load_k2store()?);
    let (mut oxigraph_runs, mut k2_runs): (Vec<f64>, Vec<f64>) = (Vec::new(), Vec::new());
    let mut store = None;
    for _ in 0..args.repeats.max(1) {
        oxigraph_runs.push(load_oxigraph()?);
        let (s, loaded) = load_k2store()?;
        k2_runs.push(s);
        store = Some(loaded);
    }
    let store = store.expect("at least one run");
    let (oxigraph_s, k2_s) = (
        Summary::of(&oxigraph_runs).median,
        Summary::of(&k2_runs).median,
    );
    println!(
        "quads            {} in batches of {batch}; medians of {} alternating runs",
        quads.len(),
        k2_runs.len()
    );
    println!(
        "insert oxigraph  {:.2} s  ({:.0} quads/s)",
        oxigraph_s,
        quads.len() as f64 / oxigraph_s
    );
    println!(
        "insert k2store   {:.2} s  ({:.0} quads/s, {:.2}x oxigraph)",
        k2_s,
        quads.len() as f64 / k2_s,
        k2_s / oxigraph_s
    );
    Ok(store)
}

/// Times `args.query` through `store` with and without a write before each.
fn time_path_queries(store: &K2Store, args: &Args) -> anyhow::Result<()> {
    let query = args
        .query
        .as_deref()
        .unwrap_or("SELECT (COUNT(*) AS ?c) WHERE { <http://e/n0> <http://e/p0>+ ?y }");
    // The first query builds the relations' trees from the deltas of the load.
    let t = Instant::now();
    rows(store.query(query)?)?;
    println!(
        "first query      {:.1} ms (builds the loaded relations)",
        t.elapsed().as_secs_f64() * 1e3
    );

    // A mean well above the median is a few slow queries: the one that crosses a tree's
    // line-list threshold builds the lists inline (see the performance docs).
    let (queries, overhead) = time_queries(store, query, args.queries, |_| Ok(()))?.describe();
    println!("query, no writes {queries}; embedding overhead {overhead:.2} µs/query");

    let mut rng = StdRng::seed_from_u64(args.seed + 1);
    // One write to `http://e/p0` before each query: the relation the default query reads.
    let nodes = (args.quads / 4).max(2);
    let (queries, overhead) = time_queries(store, query, args.queries, |i| {
        let q = Quad::new(
            iri(format!("http://e/w{i}")),
            iri("http://e/p0".into()),
            iri(format!("http://e/n{}", rng.random_range(0..nodes))),
            GraphName::DefaultGraph,
        );
        store.insert(&q)?;
        Ok(())
    })?
    .describe();
    println!(
        "query after a write {queries}; snapshot {overhead:.2} µs/query (the changed relation is rebuilt in the query)"
    );
    if let Some(kib) = peak_rss_kib() {
        println!("peak memory      {:.1} MiB", kib as f64 / 1024.0);
    }
    Ok(())
}

/// A RocksDB-backed `K2Store` in `dir`, bulk-loaded from `load` when given.
#[cfg(feature = "rocksdb")]
fn open_on_disk(dir: &std::path::Path, load: Option<&std::path::Path>) -> anyhow::Result<K2Store> {
    let t = Instant::now();
    let store = K2Store::open(dir)?;
    println!(
        "open             {:.2} s ({} quads)",
        t.elapsed().as_secs_f64(),
        store.len()
    );
    if let Some(file) = load {
        use k2rpq::store::Format;
        use oxigraph::io::RdfFormat;
        let Some((format, compression)) = Format::guess(file) else {
            anyhow::bail!(
                "{}: unknown RDF format (.nt, .nq, .ttl or .trig, optionally .gz or .bz2)",
                file.display()
            );
        };
        let format = match format {
            Format::NTriples => RdfFormat::NTriples,
            Format::NQuads => RdfFormat::NQuads,
            Format::Turtle => RdfFormat::Turtle,
            Format::TriG => RdfFormat::TriG,
        };
        let raw = std::io::BufReader::with_capacity(1 << 20, std::fs::File::open(file)?);
        let t = Instant::now();
        store.bulk_load(format, compression.decoder(raw))?;
        let s = t.elapsed().as_secs_f64();
        println!(
            "bulk load        {:.1} s ({} quads, {:.0} quads/s, relations rebuilt by streaming)",
            s,
            store.len(),
            store.len() as f64 / s
        );
    }
    Ok(store)
}

#[cfg(not(feature = "rocksdb"))]
fn open_on_disk(_: &std::path::Path, _: Option<&std::path::Path>) -> anyhow::Result<K2Store> {
    anyhow::bail!("--location needs RocksDB: build k2rpq-bench with --features rocksdb")
}
