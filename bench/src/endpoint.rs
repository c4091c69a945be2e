//! A load test of a SPARQL endpoint: N clients replay a workload over HTTP for a fixed
//! time and report throughput, latency percentiles, errors and, given the server's pid,
//! its resident memory over time. Any SPARQL 1.1 Protocol server works (`k2rpq serve`,
//! `oxigraph serve`): queries go as `POST` with `application/sparql-query`, answers are
//! asked for as SPARQL JSON and read to their end.

use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::workload::read_workload;

/// A workload for an endpoint: SPARQL texts, named.
#[derive(Clone, Debug)]
pub struct EndpointQuery {
    /// Its name (the log line's id, or the first `# ` comment of a `.rq` text).
    pub id: String,
    /// The SPARQL text.
    pub sparql: String,
}

/// Reads a workload: SPARQL texts separated by lines holding only `;` (a `.rq` file or a
/// file with such lines), or `[id,] S REGEX O` lines, each made a `SELECT *` query.
pub fn read_endpoint_workload(path: &Path) -> anyhow::Result<Vec<EndpointQuery>> {
    let text = if path.is_file() {
        std::fs::read_to_string(path)
            .map_err(|e| anyhow::anyhow!("cannot read {}: {e}", path.display()))?
    } else {
        String::new()
    };
    let separated = text.lines().any(|l| l.trim() == ";");
    let rq = path.extension().is_some_and(|e| e == "rq");
    let queries: Vec<EndpointQuery> = if separated || rq {
        let mut queries = Vec::new();
        let mut current = String::new();
        for line in text.lines().chain(std::iter::once(";")) {
            if line.trim() != ";" {
                current.push_str(line);
                current.push('\n');
                continue;
            }
            let body = std::mem::take(&mut current);
            let has_query = body
                .lines()
                .any(|l| !l.trim().is_empty() && !l.trim_start().starts_with('#'));
            if !has_query {
                continue;
            }
            let id = body
                .lines()
                .find_map(|l| l.trim().strip_prefix("# ").map(str::to_owned))
                .unwrap_or_else(|| format!("q{:02}", queries.len() + 1));
            queries.push(EndpointQuery { id, sparql: body });
        }
        queries
    } else {
        read_workload(path)?
            .into_iter()
            .map(|q| EndpointQuery {
                sparql: q.sparql(),
                id: q.id,
            })
            .collect()
    };
    anyhow::ensure!(!queries.is_empty(), "no query in {}", path.display());
    Ok(queries)
}

/// How a load test runs.
#[derive(Clone, Debug)]
pub struct LoadOptions {
    /// The endpoint (`http://127.0.0.1:7878/query`).
    pub url: String,
    /// Concurrent clients.
    pub clients: usize,
    /// Measured time.
    pub duration: Duration,
    /// Time run before, not measured.
    pub warmup: Duration,
    /// The server's process, whose resident memory is sampled.
    pub server_pid: Option<u32>,
    /// Time between two memory samples.
    pub rss_interval: Duration,
    /// How long one request may take before it counts as an error.
    pub request_timeout: Duration,
}

/// Latency percentiles, milliseconds.
#[derive(Clone, Copy, Debug, Default, serde::Serialize)]
pub struct Latency {
    /// Median.
    pub p50: f64,
    /// 95th percentile.
    pub p95: f64,
    /// 99th percentile.
    pub p99: f64,
    /// Mean.
    pub mean: f64,
    /// Largest.
    pub max: f64,
}

impl Latency {
    /// Nearest-rank percentiles of `samples` (milliseconds).
    ///
    /// ```
    /// use k2rpq_bench::endpoint::Latency;
    /// let l = Latency::of(&mut (1..=100).map(f64::from).collect::<Vec<_>>());
    /// assert_eq!((l.p50, l.p95, l.p99, l.max), (50.0, 95.0, 99.0, 100.0));
    /// ```
    pub fn of(samples: &mut [f64]) -> Latency {
        if samples.is_empty() {
            return Latency::default();
        }
        samples.sort_by(|a, b| a.total_cmp(b));
        let n = samples.len();
        let rank = |p: f64| samples[((p * n as f64).ceil() as usize).clamp(1, n) - 1];
        Latency {
            p50: rank(0.50),
            p95: rank(0.95),
            p99: rank(0.99),
            mean: samples.iter().sum::<f64>() / n as f64,
            max: samples[n - 1],
        }
    }
}

/// A memory sample of the server.
#[derive(Clone, Copy, Debug, serde::Serialize)]
pub struct RssSample {
    /// Seconds since the measured run started (negative: during the warm-up).
    pub t_s: f64,
    /// Resident set, MiB.
    pub rss_mib: f64,
}

/// What a load test measured.
#[derive(Clone, Debug, Default, serde::Serialize)]
pub struct LoadReport {
    /// The endpoint.
    pub url: String,
    /// Concurrent clients.
    pub clients: usize,
    /// Queries in the workload.
    pub queries: usize,
    /// Measured seconds.
    pub duration_s: f64,
    /// Answers read whole with status 200 in the measured time.
    pub completed: u64,
    /// Completed answers per second.
    pub throughput_qps: f64,
    /// Latency of the completed answers.
    pub latency_ms: Latency,
    /// Failed requests in the measured time: a status other than 200, a transport error,
    /// a request timeout, or an answer that says it was cut.
    pub errors: u64,
    /// Failed requests by kind (`status 503`, `transport`, `cut`, ...), with counts.
    pub error_kinds: Vec<(String, u64)>,
    /// Bytes of answers read in the measured time.
    pub bytes: u64,
    /// The server's resident memory over time (empty without its pid).
    pub rss: Vec<RssSample>,
    /// CPU time (user and system, all threads) the server spent in the measured time,
    /// seconds (given its pid): unlike the throughput, it does not depend on what else
    /// runs on the machine.
    pub server_cpu_s: Option<f64>,
    /// The server's CPU time per completed answer, milliseconds.
    pub server_cpu_ms_per_answer: Option<f64>,
    /// Per query: id, completed count, median latency (ms).
    pub per_query: Vec<(String, u64, f64)>,
}

/// What one client saw.
#[derive(Default)]
struct ClientTally {
    latencies: Vec<f64>,
    per_query: Vec<Vec<f64>>,
    errors: Vec<String>,
    bytes: u64,
}

/// Resident memory of a process, MiB (`/proc/PID/status`, Linux).
pub fn rss_mib(pid: u32) -> Option<f64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = status.lines().find(|l| l.starts_with("VmRSS:"))?;
    let kib: f64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib / 1024.0)
}

/// CPU time (user and system) a process has used, seconds (`/proc/PID/stat`, Linux).
pub fn cpu_seconds(pid: u32) -> Option<f64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The fields after the command name, which is in parentheses and may hold spaces:
    // utime and stime are the 14th and 15th fields of the line.
    let rest = &stat[stat.rfind(')')? + 2..];
    let mut fields = rest.split_whitespace().skip(11);
    let utime: f64 = fields.next()?.parse().ok()?;
    let stime: f64 = fields.next()?.parse().ok()?;
    // SAFETY: sysconf reads a constant of the system.
    let ticks = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    (ticks > 0).then(|| (utime + stime) / ticks as f64)
}

/// Runs the load test.
pub fn run_load(queries: &[EndpointQuery], options: &LoadOptions) -> anyhow::Result<LoadReport> {
    anyhow::ensure!(options.clients > 0, "give at least one client");
    // The clients share one thread: the server under test usually runs on the same
    // machine, and the clients' work is small next to its.
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    runtime.block_on(load(queries, options))
}

async fn load(queries: &[EndpointQuery], options: &LoadOptions) -> anyhow::Result<LoadReport> {
    let client = reqwest::Client::builder()
        .pool_max_idle_per_host(options.clients)
        .timeout(options.request_timeout)
        .build()?;
    let queries: Arc<Vec<EndpointQuery>> = Arc::new(queries.to_vec());
    let start = Instant::now();
    let measure_from = start + options.warmup;
    let end = measure_from + options.duration;
    let stop = Arc::new(AtomicBool::new(false));
    let rss: Arc<Mutex<Vec<RssSample>>> = Arc::default();
    let sampler = options.server_pid.map(|pid| {
        let (rss, stop, interval) = (Arc::clone(&rss), Arc::clone(&stop), options.rss_interval);
        tokio::spawn(async move {
            while !stop.load(Ordering::Relaxed) {
                if let Some(mib) = rss_mib(pid) {
                    let now = Instant::now();
                    let t_s = if now >= measure_from {
                        (now - measure_from).as_secs_f64()
                    } else {
                        -(measure_from - now).as_secs_f64()
                    };
                    rss.lock().unwrap().push(RssSample { t_s, rss_mib: mib });
                }
                tokio::time::sleep(interval).await;
            }
        })
    });
    // The server's CPU time when the measured time starts and ends.
    let cpu = options.server_pid.map(|pid| {
        tokio::spawn(async move {
            tokio::time::sleep_until(measure_from.into()).await;
            let first = cpu_seconds(pid);
            tokio::time::sleep_until(end.into()).await;
            Some(cpu_seconds(pid)? - first?)
        })
    });
    let mut tasks = Vec::with_capacity(options.clients);
    for c in 0..options.clients {
        let (client, queries, url) = (client.clone(), Arc::clone(&queries), options.url.clone());
        tasks.push(tokio::spawn(async move {
            let mut tally = ClientTally {
                per_query: vec![Vec::new(); queries.len()],
                ..ClientTally::default()
            };
            // Clients start at different queries, so that the mix is even at any time.
            let mut next = c % queries.len();
            while Instant::now() < end {
                let i = next;
                next = (next + 1) % queries.len();
                let q = &queries[i];
                let sent = Instant::now();
                let outcome = request(&client, &url, &q.sparql).await;
                let done = Instant::now();
                if sent < measure_from || done > end {
                    continue;
                }
                match outcome {
                    Ok(bytes) => {
                        let ms = (done - sent).as_secs_f64() * 1e3;
                        tally.latencies.push(ms);
                        tally.per_query[i].push(ms);
                        tally.bytes += bytes;
                    }
                    Err(kind) => tally.errors.push(kind),
                }
            }
            tally
        }));
    }
    let mut tallies = Vec::with_capacity(tasks.len());
    for t in tasks {
        tallies.push(t.await?);
    }
    stop.store(true, Ordering::Relaxed);
    if let Some(s) = sampler {
        s.await?;
    }
    let mut latencies: Vec<f64> = tallies
        .iter()
        .flat_map(|t| t.latencies.iter().copied())
        .collect();
    let mut kinds: Vec<(String, u64)> = Vec::new();
    for e in tallies.iter().flat_map(|t| &t.errors) {
        match kinds.iter_mut().find(|(k, _)| k == e) {
            Some((_, n)) => *n += 1,
            None => kinds.push((e.clone(), 1)),
        }
    }
    kinds.sort();
    let per_query = queries
        .iter()
        .enumerate()
        .map(|(i, q)| {
            let mut v: Vec<f64> = tallies
                .iter()
                .flat_map(|t| t.per_query[i].iter().copied())
                .collect();
            (q.id.clone(), v.len() as u64, Latency::of(&mut v).p50)
        })
        .collect();
    let duration_s = options.duration.as_secs_f64();
    let completed = latencies.len() as u64;
    let errors = kinds.iter().map(|(_, n)| n).sum();
    let samples = rss.lock().unwrap().clone();
    let server_cpu_s = match cpu {
        Some(c) => c.await?,
        None => None,
    };
    Ok(LoadReport {
        url: options.url.clone(),
        clients: options.clients,
        queries: queries.len(),
        duration_s,
        completed,
        throughput_qps: completed as f64 / duration_s,
        latency_ms: Latency::of(&mut latencies),
        errors,
        error_kinds: kinds,
        bytes: tallies.iter().map(|t| t.bytes).sum(),
        rss: samples,
        server_cpu_s,
        server_cpu_ms_per_answer: server_cpu_s
            .filter(|_| completed > 0)
            .map(|s| s * 1e3 / completed as f64),
        per_query,
    })
}

/// One query: the bytes of its answer, or the kind of failure.
async fn request(client: &reqwest::Client, url: &str, sparql: &str) -> Result<u64, String> {
    let response = client
        .post(url)
        .header("Content-Type", "application/sparql-query")
        .header("Accept", "application/sparql-results+json")
        .body(sparql.to_owned())
        .send()
        .await
        .map_err(|e| {
            if e.is_timeout() {
                "timeout".to_owned()
            } else {
                "transport".to_owned()
            }
        })?;
    let status = response.status();
    let body = response.bytes().await.map_err(|e| {
        if e.is_timeout() {
            "timeout".to_owned()
        } else {
            "transport".to_owned()
        }
    })?;
    if !status.is_success() {
        return Err(format!("status {}", status.as_u16()));
    }
    // A `k2rpq serve` answer cut by its limit or timeout ends with a `cut` member.
    if body.ends_with(b"}}") && memchr_last(&body, b"\"cut\":{") {
        return Err("cut".to_owned());
    }
    Ok(body.len() as u64)
}

/// Whether `needle` occurs in the last 512 bytes of `body`.
fn memchr_last(body: &[u8], needle: &[u8]) -> bool {
    let tail = &body[body.len().saturating_sub(512)..];
    tail.windows(needle.len()).any(|w| w == needle)
}

impl LoadReport {
    /// The report for people.
    pub fn summary(&self) -> String {
        let mut s = format!(
            "{} with {} clients, {} queries, {:.0} s: {} answers, {:.1} queries/s; latency ms p50 {:.2} p95 {:.2} p99 {:.2} max {:.2}; {} errors",
            self.url,
            self.clients,
            self.queries,
            self.duration_s,
            self.completed,
            self.throughput_qps,
            self.latency_ms.p50,
            self.latency_ms.p95,
            self.latency_ms.p99,
            self.latency_ms.max,
            self.errors
        );
        if !self.error_kinds.is_empty() {
            let kinds: Vec<String> = self
                .error_kinds
                .iter()
                .map(|(k, n)| format!("{k}: {n}"))
                .collect();
            s.push_str(&format!(" ({})", kinds.join(", ")));
        }
        if let (Some(cpu), Some(per)) = (self.server_cpu_s, self.server_cpu_ms_per_answer) {
            s.push_str(&format!(
                "\nserver CPU: {cpu:.1} s in the measured time, {per:.2} ms per answer"
            ));
        }
        let measured: Vec<&RssSample> = self.rss.iter().filter(|r| r.t_s >= 0.0).collect();
        if let (Some(first), Some(last)) = (measured.first(), measured.last()) {
            let peak = measured.iter().map(|r| r.rss_mib).fold(0.0, f64::max);
            s.push_str(&format!(
                "\nserver RSS: {:.1} MiB at the start, {:.1} MiB at the end, peak {:.1} MiB ({} samples)",
                first.rss_mib,
                last.rss_mib,
                peak,
                measured.len()
            ));
        }
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k2rpq_cli::serve::evaluate::{Answer, Control, EvaluationError, Evaluator, GraphSummary};
    use k2rpq_cli::serve::{router, Limits};

    #[test]
    fn workloads_of_both_kinds_are_read() {
        let dir = tempfile::tempdir().unwrap();
        let rq = dir.path().join("w.rq");
        std::fs::write(
            &rq,
            "# header comment only\n;\n# first\nASK { ?x ?p ?y }\n;\nSELECT * WHERE { ?x ?p ?y }\n;\n",
        )
        .unwrap();
        let queries = read_endpoint_workload(&rq).unwrap();
        assert_eq!(queries.len(), 2);
        assert_eq!(queries[0].id, "first");
        assert!(queries[0].sparql.contains("ASK"));
        assert_eq!(queries[1].id, "q02");
        let log = dir.path().join("w.rpq");
        std::fs::write(&log, "a1, <http://e/a> <http://e/p>+ ?y\n").unwrap();
        let queries = read_endpoint_workload(&log).unwrap();
        assert_eq!(queries[0].id, "a1");
        assert_eq!(
            queries[0].sparql,
            "SELECT * WHERE { <http://e/a> (<http://e/p>)+ ?y }"
        );
        std::fs::write(&rq, "# nothing\n").unwrap();
        assert!(read_endpoint_workload(&rq).is_err());
    }

    /// Answers `true`, or fails for queries that mention `fail`.
    struct Answering;

    impl Evaluator for Answering {
        fn evaluate(
            &self,
            query: &spargebra::Query,
            _: &Control,
        ) -> Result<Answer, EvaluationError> {
            if query.to_string().contains("fail") {
                return Err(EvaluationError::Failed("asked to fail".into()));
            }
            Ok(Answer::Boolean(true))
        }

        fn graphs(&self) -> Vec<GraphSummary> {
            Vec::new()
        }
    }

    #[test]
    fn a_load_test_counts_answers_and_errors() {
        let (found, address) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_multi_thread()
                .enable_all()
                .build()
                .unwrap();
            runtime.block_on(async move {
                let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
                let bound = listener.local_addr().unwrap();
                found.send(bound).unwrap();
                let app = router(
                    Arc::new(Answering),
                    Limits::default(),
                    false,
                    &bound.to_string(),
                );
                axum::serve(listener, app).await.unwrap();
            });
        });
        let address = address.recv().unwrap();
        let queries = vec![
            EndpointQuery {
                id: "ok".into(),
                sparql: "ASK { ?x ?p ?y }".into(),
            },
            EndpointQuery {
                id: "fails".into(),
                sparql: "ASK { ?x <http://e/fail> ?y }".into(),
            },
        ];
        let options = LoadOptions {
            url: format!("http://{address}/query"),
            clients: 4,
            duration: Duration::from_millis(500),
            warmup: Duration::from_millis(100),
            server_pid: Some(std::process::id()),
            rss_interval: Duration::from_millis(100),
            request_timeout: Duration::from_secs(10),
        };
        let report = run_load(&queries, &options).unwrap();
        assert!(report.completed > 10, "{report:?}");
        assert!(report.errors > 10, "{report:?}");
        assert_eq!(report.error_kinds.len(), 1, "{report:?}");
        assert_eq!(report.error_kinds[0].0, "status 500");
        assert_eq!(report.per_query[0].0, "ok");
        assert_eq!(report.per_query[0].1, report.completed);
        assert_eq!(report.per_query[1].1, 0);
        assert!(report.latency_ms.p50 > 0.0 && report.latency_ms.p50 <= report.latency_ms.p99);
        assert!(!report.rss.is_empty());
        assert!(report.server_cpu_s.is_some_and(|s| s >= 0.0), "{report:?}");
        assert!(report.summary().contains("server CPU:"));
        assert!(report.summary().contains("errors (status 500:"));
    }
}
