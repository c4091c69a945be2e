//! `k2rpq serve`: a read-only SPARQL endpoint over a store (SPARQL 1.1 Protocol).
//!
//! - `GET /query?query=…`, `POST /query` (a form or `application/sparql-query`), `/sparql`
//!   the same; `default-graph-uri` and `named-graph-uri` set the query's dataset.
//! - Answers in SPARQL JSON, XML, CSV or TSV (SELECT, ASK) and N-Triples or Turtle
//!   (CONSTRUCT, DESCRIBE), by `Accept` or a `format` parameter; 406 when none fits.
//! - `GET /` (and `/query` without a query): the query page, or the service description
//!   when the client asks for Turtle, N-Triples or RDF/XML.
//! - Statuses: 400 for a query that does not parse (with the parser's message and a caret
//!   under the position), 403 for an update, 415 for an unsupported `Content-Type`, 501 for
//!   a query the evaluator does not support, 500 for a failure or a timeout before the
//!   first row, 503 when no worker frees up within `--queue-timeout`.
//! - Queries run on a pool of `--workers` blocking threads sharing one opened store and
//!   device cache; answers stream out as rows come.
//!
//! What a client sees of an answer cut by `--limit` or `--timeout` (or by an evaluation
//! error after the first row):
//! - SPARQL JSON: a complete document with one more top-level member after `results`,
//!   `"cut": {"reason": "limit" | "timeout" | "error", "rows": N, "message": "..."}`;
//! - SPARQL XML, CSV, TSV, N-Triples, Turtle: the rows sent so far (XML, N-Triples and
//!   Turtle then a comment saying why), and a response body that ends without its last
//!   chunk, which HTTP clients report as an error (curl: "transfer closed with
//!   outstanding read data remaining"); the XML document also lacks its closing tags.
//!
//! A timeout before the first row is a 500 whose message starts `timeout:`.
//!
//! Evaluation sits behind [`evaluate::Evaluator`]: [`router`] serves any evaluator.

mod describe;
pub mod evaluate;
mod log;
mod negotiate;
mod page;
mod protocol;
mod stream;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use axum::routing::get;
use axum::serve::ListenerExt;
use axum::Router;
use tokio::sync::Semaphore;
use tower_http::cors::{Any, CorsLayer};

use crate::args::DeviceArgs;
use crate::rpq::EngineChoice;
use evaluate::{Evaluator, StoreEvaluator};

/// Arguments of `k2rpq serve`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// A store folder written by `k2rpq load`.
    #[arg(long)]
    pub store: PathBuf,
    /// The address to listen on.
    #[arg(long, default_value = "127.0.0.1:7878", value_name = "HOST:PORT")]
    pub bind: String,
    /// Seconds a query may run; an answer cut by it says so (decimals allowed).
    #[arg(long, default_value = "60", value_name = "SECONDS", value_parser = parse_seconds)]
    pub timeout: Duration,
    /// The most rows (or triples) an answer carries; a cut answer says so.
    #[arg(long, value_name = "ROWS", value_parser = clap::value_parser!(u64).range(1..))]
    pub limit: Option<u64>,
    /// Queries evaluated at once (default: two per core).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
    pub workers: Option<u32>,
    /// Seconds a request waits for a free worker before a 503 (decimals allowed).
    #[arg(long, default_value = "5", value_name = "SECONDS", value_parser = parse_seconds)]
    pub queue_timeout: Duration,
    /// Add CORS headers, so that pages of other origins may query the endpoint.
    #[arg(long)]
    pub cors: bool,
    /// Engine of the path products.
    #[arg(long, default_value = "auto", value_parser = crate::args::engine_parser())]
    pub engine: EngineChoice,
    /// GPUs, GPU budget, cache statistics: one device cache serves all requests.
    #[command(flatten)]
    pub device: DeviceArgs,
    /// No notices on stderr (such as the one saying that no GPU is usable and the CPU
    /// engine runs instead); errors are still printed.
    #[arg(long, short)]
    pub quiet: bool,
}

/// A number of seconds, decimals allowed.
fn parse_seconds(s: &str) -> Result<Duration, String> {
    s.trim()
        .parse::<f64>()
        .ok()
        .filter(|v| v.is_finite() && *v > 0.0 && *v < 1e9)
        .map(Duration::from_secs_f64)
        .ok_or_else(|| {
            format!("invalid number of seconds {s:?} (a positive number like 60 or 0.5)")
        })
}

/// The endpoint's limits.
#[derive(Clone, Debug)]
pub struct Limits {
    /// How long a query may run.
    pub timeout: Duration,
    /// The most rows an answer carries.
    pub row_limit: Option<u64>,
    /// Queries evaluated at once.
    pub workers: usize,
    /// How long a request waits for a worker.
    pub queue_timeout: Duration,
}

/// Workers per core by default: a worker also waits (on the path engine's threads, on a
/// client reading its answer), and with one per core the cores idle. On CoDEx-M's path
/// workload (64 clients, 2 cores) 2 workers gave 161 queries/s (p99 804 ms), 4 gave 341
/// (p99 515 ms), 8 gave 282 (p99 814 ms); 64 gave a p50 of 83 ms but a p99 of 3.6 s.
const WORKERS_PER_CORE: usize = 2;

impl Default for Limits {
    fn default() -> Self {
        Limits {
            timeout: Duration::from_secs(60),
            row_limit: None,
            workers: WORKERS_PER_CORE * std::thread::available_parallelism().map_or(1, |n| n.get()),
            queue_timeout: Duration::from_secs(5),
        }
    }
}

/// What every request shares.
pub struct Endpoint {
    evaluator: Arc<dyn Evaluator>,
    limits: Limits,
    /// One permit per worker.
    pool: Arc<Semaphore>,
    /// The address served, for the service description when a request has no `Host`.
    address: String,
}

/// The endpoint's routes over `evaluator`, serving at `address`.
pub fn router(evaluator: Arc<dyn Evaluator>, limits: Limits, cors: bool, address: &str) -> Router {
    let endpoint = Arc::new(Endpoint {
        pool: Arc::new(Semaphore::new(limits.workers)),
        evaluator,
        limits,
        address: address.to_owned(),
    });
    let assets = format!("/yasgui/{}", page::YASGUI_VERSION);
    let mut app = Router::new()
        .route("/", get(protocol::get_root))
        .route(
            "/query",
            get(protocol::get_query).post(protocol::post_query),
        )
        .route(
            "/sparql",
            get(protocol::get_query).post(protocol::post_query),
        )
        .route("/update", get(protocol::update).post(protocol::update))
        .route(&format!("{assets}/yasgui.min.js"), get(page::yasgui_js))
        .route(&format!("{assets}/yasgui.min.css"), get(page::yasgui_css))
        .with_state(endpoint);
    if cors {
        app = app.layer(
            CorsLayer::new()
                .allow_origin(Any)
                .allow_methods([axum::http::Method::GET, axum::http::Method::POST])
                .allow_headers(Any),
        );
    }
    app.layer(axum::middleware::from_fn(log::log_requests))
}

/// Waits for SIGINT or SIGTERM.
async fn signal() {
    let interrupt = tokio::signal::ctrl_c();
    #[cfg(unix)]
    let terminate = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    #[cfg(not(unix))]
    let terminate = std::future::pending::<()>();
    tokio::select! {
        _ = interrupt => {}
        _ = terminate => {}
    }
}

/// Resolves at the first SIGINT or SIGTERM, which starts the graceful shutdown: no new
/// connections, answers in progress finish (within their timeout). A second signal
/// exits at once.
async fn shutdown_signal() {
    signal().await;
    eprintln!(
        "k2rpq serve: stopping; answers in progress finish first (a second signal stops at once)"
    );
    tokio::spawn(async {
        signal().await;
        eprintln!("k2rpq serve: stopped at once");
        std::process::exit(130);
    });
}

/// Runs `k2rpq serve`.
pub fn run(args: Args) -> anyhow::Result<()> {
    crate::report::silence_notices(args.quiet);
    let address: SocketAddr = args
        .bind
        .parse()
        .or_else(|_| {
            std::net::ToSocketAddrs::to_socket_addrs(&args.bind)
                .ok()
                .and_then(|mut a| a.next())
                .ok_or(())
        })
        .map_err(|()| {
            anyhow::anyhow!(
                "invalid --bind {:?} (HOST:PORT, like 127.0.0.1:7878)",
                args.bind
            )
        })?;
    let database = Arc::new(args.device.open_database(&args.store, args.engine)?);
    let limits = Limits {
        timeout: args.timeout,
        row_limit: args.limit,
        workers: args
            .workers
            .map_or_else(|| Limits::default().workers, |w| w as usize),
        queue_timeout: args.queue_timeout,
    };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .thread_name("k2rpq-serve")
        .build()
        .context("starting the server's runtime")?;
    let engine = if database.has_gpu() { "gpu" } else { "cpu" };
    let served = runtime.block_on(async {
        let listener = tokio::net::TcpListener::bind(address)
            .await
            .with_context(|| format!("cannot listen on {address}"))?;
        let bound = listener.local_addr()?;
        eprintln!(
            "k2rpq serve: {} on http://{bound}/ ({engine} engine, {} workers, timeout {} s{})",
            args.store.display(),
            limits.workers,
            limits.timeout.as_secs_f64(),
            limits
                .row_limit
                .map(|l| format!(", limit {l} rows"))
                .unwrap_or_default()
        );
        let app = router(
            Arc::new(StoreEvaluator::new(Arc::clone(&database))),
            limits,
            args.cors,
            &bound.to_string(),
        );
        // Without TCP_NODELAY an answer written in more than one segment waits for the
        // client's delayed acknowledgement: 40 ms on half of CoDEx-M's small answers.
        let listener = listener.tap_io(|tcp| {
            if let Err(e) = tcp.set_nodelay(true) {
                ::log::debug!("TCP_NODELAY not set: {e}");
            }
        });
        axum::serve(listener, app)
            .with_graceful_shutdown(shutdown_signal())
            .await
            .context("serving")
    });
    // Evaluations still running past the last response (a query whose client left) are
    // not waited for.
    runtime.shutdown_timeout(Duration::from_secs(1));
    served?;
    args.device.print_stats(&database);
    eprintln!("k2rpq serve: stopped");
    Ok(())
}
