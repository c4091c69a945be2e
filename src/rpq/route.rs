//! Which engine answers a var→var query: host walks (the CPU engine's sparse joint walks)
//! or the device's batched fixed point, chosen from the costs of both.
//!
//! The device runs `64·W` start nodes per batch over bit batches of `node_count` rows,
//! whatever the frontiers hold: every batch allocates, clears, uploads, downloads and
//! decodes `node_count · W` words, and every step of it streams the same words per live
//! state. A sparse closure (a forest, short chains) reaches a few nodes per start, which a
//! host walk finds in microseconds, while the device pays for every node of the graph per
//! batch: at 10⁹ wikidata-like triples (287 M nodes) a batch of 192 starts costs about a
//! second, so `?x P131+ ?y` ran past 60 s on the device and took 0.58 s on the CPU engine.
//! Dense frontiers are the other way round: all pairs of `p+` on cnr-2000 take 5-6 s on
//! the device and do not finish in 120 s on 16 cores.
//!
//! The rule ([`decide`]) is a pure function of statistics: the query's start nodes,
//! node count, batch width, live states and row limit, a measured host walk of a spread
//! sample of its start nodes ([`HostSample`]: pairs per start, depth, time, and whether the
//! walk passed its work budget, which marks a dense frontier), and a cost model of the
//! device ([`DeviceModel`]). [`route_candidates`] takes the sample and applies the rule.

use std::fmt;
use std::time::{Duration, Instant};

use super::plan::{Plan, StartNodes};
use super::{sparse, EvalOptions, PathGraph};

/// Start nodes walked by the sample of [`route_candidates`]: one joint walk's worth, as
/// the CPU engine's smallest chunk, so that the sample costs about one chunk of the host
/// route.
pub const SAMPLE_STARTS: u32 = 512;

/// Pairs at which the sample of a query with a row limit stops: enough to measure the
/// pairs per start, far fewer than a limit of 10⁶ rows (whose walk would cost as much as
/// the query). A query without a limit samples without a cap: its walk ends, or passes
/// its work budget where the frontiers are dense.
pub const SAMPLE_PAIRS: u64 = 1 << 16;

/// Where a query runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Route {
    /// Sparse walks of the host trees on the CPU engine.
    Host,
    /// The device engine's batched fixed point.
    Device,
}

impl Route {
    /// `host` or `device`.
    pub fn name(self) -> &'static str {
        match self {
            Route::Host => "host",
            Route::Device => "device",
        }
    }
}

/// A host joint walk of sampled start nodes of a query, with what it found and cost.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct HostSample {
    /// Start nodes walked.
    pub starts: u64,
    /// Distinct pairs found from them (up to the query's limit).
    pub pairs: u64,
    /// Steps the walk took (the deepest sampled start's depth, plus the empty last step).
    pub steps: u32,
    /// Its wall time, on one thread.
    pub elapsed: Duration,
    /// Whether the walk passed its work budget and gave up: its frontiers are dense.
    pub gave_up: bool,
    /// Whether the walk stopped at its cap of pairs (the query's limit, at most
    /// [`SAMPLE_PAIRS`]), so that `pairs` bounds their answer's size from below.
    pub truncated: bool,
}

/// What the rule knows of a var→var query.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct QueryStats {
    /// The graph's node id space: the rows of every device bit batch.
    pub nodes: u64,
    /// Candidate start nodes.
    pub starts: u64,
    /// The row limit, if any.
    pub limit: Option<u64>,
    /// Automaton states that hold bit batches on the device (start state included).
    pub live_states: u64,
    /// Words per node of a device batch (64 start nodes each), after fitting the device.
    pub batch_words: u64,
    /// Threads the host walks run on.
    pub host_threads: u64,
    /// The measured host walk of a sample of the start nodes.
    pub sample: HostSample,
}

/// The device's costs per batch and per step, proportional to the words of a bit batch
/// (`nodes · batch_words`). The defaults are a lower bound of what was measured, so that
/// the model never makes the device look dearer than it is: a query goes to the host
/// only where it wins by the model's margin at least.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct DeviceModel {
    /// Fixed cost per batch and per node-word, in nanoseconds: the start batch uploaded,
    /// the states' batches allocated and cleared, the accepting batches downloaded and
    /// decoded into pairs (8 bytes each way over a ~25 GB/s host link, plus the decode).
    pub batch_ns_per_word: f64,
    /// Cost per step, per live state and per node-word, in nanoseconds: the products,
    /// the advance and the count stream the state's batches (all pairs of `p+` on
    /// cnr-2000: 0.27 ms per step over 325,557 nodes × 8 words and two live states on
    /// an H200, i.e. 0.05 ns, products included).
    pub step_ns_per_word: f64,
    /// Launches and the count read-back of one step.
    pub step_latency: Duration,
}

impl Default for DeviceModel {
    fn default() -> Self {
        DeviceModel {
            batch_ns_per_word: 1.0,
            step_ns_per_word: 0.05,
            step_latency: Duration::from_micros(30),
        }
    }
}

impl DeviceModel {
    /// The modelled device time of `batches` batches of `steps` steps each.
    pub fn time(&self, stats: &QueryStats, batches: u64, steps: u32) -> Duration {
        let words = stats.nodes as f64 * stats.batch_words.max(1) as f64;
        let per_step = self.step_latency.as_secs_f64()
            + words * stats.live_states.max(1) as f64 * self.step_ns_per_word * 1e-9;
        let per_batch = words * self.batch_ns_per_word * 1e-9 + steps.max(1) as f64 * per_step;
        Duration::from_secs_f64(per_batch * batches as f64)
    }
}

/// The rule's answer: the route, the estimates behind it and why, in words (what
/// `explain` prints).
#[derive(Clone, Debug, PartialEq)]
pub struct RouteDecision {
    /// Where the query runs.
    pub route: Route,
    /// Start nodes expected to be run before the limit is reached (all without one).
    pub starts_needed: u64,
    /// Estimated host time (`None` when the sample gave up: no estimate).
    pub host: Option<Duration>,
    /// Modelled device time.
    pub device: Duration,
    /// Why, in words.
    pub reason: String,
    /// The statistics decided on.
    pub stats: QueryStats,
}

impl fmt::Display for RouteDecision {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.route.name(), self.reason)
    }
}

/// The route of a var→var query from its statistics (see the [module docs](self)).
///
/// - A sample walk that gave up has dense frontiers: the device.
/// - A sample that walked every start node to its end: the host (it has just done the
///   work).
/// - Otherwise the sample's pairs per start give the start nodes needed to reach the
///   limit (all of them without one); the host time is the sample's time per start times
///   those starts over the host threads (for a sample stopped at its cap of pairs: its
///   time per pair times the limit's pairs, on one thread), the device time is the
///   model's for the batches holding them, each as deep as the sample's walk. The
///   cheaper wins; a tie goes to the host, which holds no device.
pub fn decide(stats: &QueryStats, model: &DeviceModel) -> RouteDecision {
    let s = &stats.sample;
    let per_batch = 64 * stats.batch_words.max(1);
    let all_batches = stats.starts.div_ceil(per_batch);
    if s.gave_up {
        let device = model.time(stats, all_batches, s.steps);
        return RouteDecision {
            route: Route::Device,
            starts_needed: stats.starts,
            host: None,
            device,
            reason: format!(
                "a host walk of {} sampled start nodes passed its work budget (dense \
                 frontiers); {} batches of {} start nodes modelled at {}",
                s.starts,
                all_batches,
                per_batch,
                ms(device)
            ),
            stats: *stats,
        };
    }
    let sampled = s.starts.max(1);
    let per_start = s.pairs as f64 / sampled as f64;
    let (starts_needed, host, threads) = match stats.limit {
        Some(l) if s.truncated => {
            // The walk stopped at its cap of pairs: `per_start` bounds the pairs per start
            // from below, so the starts needed from above; the host's time is the
            // sample's per pair, on one thread (the first chunk of the host walks, where
            // such answers end).
            let pairs = l as f64 + 1.0;
            let starts = (pairs / per_start.max(f64::MIN_POSITIVE)).ceil();
            let host = s.elapsed.mul_f64(pairs / s.pairs.max(1) as f64);
            ((starts.min(stats.starts as f64) as u64).max(1), host, 1)
        }
        _ => {
            let needed = match stats.limit {
                Some(l) if per_start > 0.0 => {
                    let want = ((l as f64 + 1.0) / per_start).ceil();
                    (want.min(stats.starts as f64) as u64).max(1)
                }
                _ => stats.starts,
            };
            let threads = stats.host_threads.max(1);
            let secs = s.elapsed.as_secs_f64() / sampled as f64 * needed as f64 / threads as f64;
            (needed, Duration::from_secs_f64(secs), threads)
        }
    };
    let batches = starts_needed.div_ceil(per_batch).max(1);
    let device = model.time(stats, batches, s.steps);
    let what = format!(
        "{:.1} pairs per start over {} sampled of {} start nodes, {} steps deep; {} starts \
         needed{}: host walks {} on {} threads, device {} batches of {} over {} nodes {}",
        per_start,
        s.starts,
        stats.starts,
        s.steps,
        starts_needed,
        stats
            .limit
            .map(|l| format!(" for {l} rows"))
            .unwrap_or_default(),
        ms(host),
        threads,
        batches,
        per_batch,
        stats.nodes,
        ms(device)
    );
    if s.starts >= stats.starts && !s.truncated {
        return RouteDecision {
            route: Route::Host,
            starts_needed,
            host: Some(host),
            device,
            reason: format!("the sample walked every start node; {what}"),
            stats: *stats,
        };
    }
    let route = if host <= device {
        Route::Host
    } else {
        Route::Device
    };
    RouteDecision {
        route,
        starts_needed,
        host: Some(host),
        device,
        reason: what,
        stats: *stats,
    }
}

fn ms(d: Duration) -> String {
    format!("{:.3} ms", d.as_secs_f64() * 1e3)
}

/// Words per node of a device batch: `words`, or the widest below it whose bit batches
/// (frontier, visited and next per state, and a scratch batch: `nodes · 8` bytes each
/// per word) fit in three quarters of `free` bytes, at least one word; `words` where the
/// engine's batch memory is unbounded (`None`).
pub fn fitting_words(free: Option<u64>, states: usize, nodes: u64, words: usize) -> usize {
    let Some(free) = free else {
        return words;
    };
    let batches = 3 * states as u64 + 1;
    let per_word = nodes.max(1) * 8 * batches;
    usize::try_from(free / 4 * 3 / per_word)
        .unwrap_or(usize::MAX)
        .clamp(1, words.max(1))
}

/// Routes a var→var plan: walks a spread sample of its candidate start nodes on the host
/// ([`SAMPLE_STARTS`] of them, evenly spaced, under the CPU engine's budget of a joint
/// walk) and applies [`decide`] with `model`, batches of `batch_words` words per node and
/// `host_threads` threads. `None` for a plan with a constant start (those walk the host
/// in front of the device under a budget of their own).
pub fn route_candidates(
    graph: &dyn PathGraph,
    plan: &Plan,
    options: &EvalOptions,
    batch_words: usize,
    host_threads: usize,
    model: &DeviceModel,
) -> Option<RouteDecision> {
    let StartNodes::Candidates(cands) = &plan.start else {
        return None;
    };
    let total = cands.len();
    let starts: Vec<u32> = if total <= SAMPLE_STARTS as u64 {
        cands.iter().collect()
    } else {
        let stride = total / SAMPLE_STARTS as u64;
        (0..SAMPLE_STARTS as u64)
            .filter_map(|i| cands.select((i * stride) as u32))
            .collect()
    };
    let capped = EvalOptions {
        limit: options.limit.map(|l| l.min(SAMPLE_PAIRS)),
        ..options.clone()
    };
    let t0 = Instant::now();
    let walked = sparse::evaluate_sparse_joint(graph, plan, &capped, &starts, t0, None);
    let elapsed = t0.elapsed();
    let sample = match &walked {
        Some(r) => HostSample {
            starts: starts.len() as u64,
            pairs: r.count,
            steps: r.trace.total_steps as u32,
            elapsed,
            gave_up: false,
            truncated: r.truncated,
        },
        None => HostSample {
            starts: starts.len() as u64,
            pairs: 0,
            steps: 0,
            elapsed,
            gave_up: true,
            truncated: false,
        },
    };
    let live_states = (0..plan.automaton.states())
        .filter(|&j| j == 0 || plan.relations[j].is_some())
        .count() as u64;
    let stats = QueryStats {
        nodes: graph.node_count() as u64,
        starts: total,
        limit: options.limit,
        live_states,
        batch_words: batch_words as u64,
        host_threads: host_threads as u64,
        sample,
    };
    Some(decide(&stats, model))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The statistics of the 10⁹-triple wikidata-like store (287,311,241 nodes, three
    /// words per batch for a two-state closure on an 80 GB device, 16 threads) with a
    /// sample.
    fn wikidata_1b(starts: u64, limit: Option<u64>, sample: HostSample) -> QueryStats {
        QueryStats {
            nodes: 287_311_241,
            starts,
            limit,
            live_states: 2,
            batch_words: 3,
            host_threads: 16,
            sample,
        }
    }

    fn sample(pairs: u64, steps: u32, micros: u64) -> HostSample {
        HostSample {
            starts: 512,
            pairs,
            steps,
            elapsed: Duration::from_micros(micros),
            gave_up: false,
            truncated: false,
        }
    }

    #[test]
    fn a_sparse_closure_at_scale_walks_the_host() {
        // `?x P131+ ?y`: a forest, ~10 ancestors per start, a few ms for 512 starts.
        let stats = wikidata_1b(25_000_000, Some(1_000_000), sample(5_000, 12, 4_000));
        let d = decide(&stats, &DeviceModel::default());
        assert_eq!(d.route, Route::Host, "{d}");
        assert_eq!(d.starts_needed, 102_401);
        assert!(d.host.unwrap() < Duration::from_secs(1), "{d}");
        assert!(d.device > Duration::from_secs(60), "{d}");
    }

    #[test]
    fn a_reflexive_closure_over_every_node_walks_the_host() {
        // `?x P361* ?y`: every node starts, most reach only themselves.
        let stats = wikidata_1b(287_311_241, Some(1_000_000), sample(530, 3, 900));
        let d = decide(&stats, &DeviceModel::default());
        assert_eq!(d.route, Route::Host, "{d}");
    }

    #[test]
    fn a_dense_sample_goes_to_the_device() {
        let stats = QueryStats {
            nodes: 325_557,
            starts: 325_557,
            limit: None,
            live_states: 2,
            batch_words: 8,
            host_threads: 16,
            sample: HostSample {
                starts: 512,
                pairs: 0,
                steps: 0,
                elapsed: Duration::from_millis(40),
                gave_up: true,
                truncated: false,
            },
        };
        let d = decide(&stats, &DeviceModel::default());
        assert_eq!(d.route, Route::Device, "{d}");
        assert_eq!(d.host, None);
        assert!(d.reason.contains("work budget"), "{d}");
    }

    #[test]
    fn large_answers_per_start_without_a_limit_go_to_the_device() {
        // cnr-2000-like all pairs had the walk not given up: ~10⁵ pairs per start, a
        // few ms per start on the host.
        let stats = QueryStats {
            nodes: 325_557,
            starts: 325_557,
            limit: None,
            live_states: 2,
            batch_words: 8,
            host_threads: 16,
            sample: sample(512 * 100_000, 40, 2_000_000),
        };
        let d = decide(&stats, &DeviceModel::default());
        assert_eq!(d.route, Route::Device, "{d}");
        assert!(d.device < d.host.unwrap());
    }

    #[test]
    fn a_limit_shrinks_the_work_of_both_routes() {
        let unlimited = wikidata_1b(10_000_000, None, sample(5_120, 8, 3_000));
        let limited = QueryStats {
            limit: Some(100),
            ..unlimited
        };
        let m = DeviceModel::default();
        let (a, b) = (decide(&unlimited, &m), decide(&limited, &m));
        assert_eq!(a.starts_needed, 10_000_000);
        assert_eq!(b.starts_needed, 11);
        assert!(b.host.unwrap() < a.host.unwrap());
        assert!(b.device < a.device);
        // One batch is the least the device runs.
        assert_eq!(b.device, m.time(&limited, 1, 8));
    }

    #[test]
    fn a_sample_stopped_at_its_cap_scales_its_time_per_pair() {
        // `?x P279+ ?y` from the classes: thousands of subclasses per start; the sample
        // stops at 2^16 pairs, at least 128 per start.
        let mut s = sample(SAMPLE_PAIRS, 4, 300_000);
        s.truncated = true;
        let stats = wikidata_1b(100_000_000, Some(1_000_000), s);
        let d = decide(&stats, &DeviceModel::default());
        assert_eq!(d.route, Route::Host, "{d}");
        assert_eq!(d.starts_needed, 7_813);
        let host = d.host.unwrap().as_secs_f64();
        assert!((host - 0.3 * 1_000_001.0 / 65_536.0).abs() < 1e-6, "{d}");
        // A limit under the cap: the sample's time, once.
        let mut s = sample(1_001, 3, 2_000);
        s.truncated = true;
        let d = decide(
            &wikidata_1b(100_000_000, Some(1_000), s),
            &DeviceModel::default(),
        );
        assert_eq!(d.host, Some(Duration::from_millis(2)));
        assert_eq!(d.route, Route::Host, "{d}");
    }

    #[test]
    fn a_sample_of_every_start_stays_on_the_host() {
        let stats = QueryStats {
            nodes: 1_000,
            starts: 300,
            limit: None,
            live_states: 2,
            batch_words: 8,
            host_threads: 1,
            sample: HostSample {
                starts: 300,
                pairs: 300_000,
                steps: 50,
                elapsed: Duration::from_secs(5),
                gave_up: false,
                truncated: false,
            },
        };
        let d = decide(&stats, &DeviceModel::default());
        assert_eq!(d.route, Route::Host, "{d}");
        assert!(d.reason.starts_with("the sample walked every start node"));
    }

    #[test]
    fn the_device_wins_where_its_batches_are_cheap_against_slow_walks() {
        // A small graph (batches of a few KB) whose walks cost 1 ms per start.
        let stats = QueryStats {
            nodes: 10_000,
            starts: 10_000,
            limit: None,
            live_states: 3,
            batch_words: 8,
            host_threads: 4,
            sample: sample(512 * 2_000, 20, 512_000),
        };
        assert_eq!(decide(&stats, &DeviceModel::default()).route, Route::Device);
    }

    #[test]
    fn the_model_grows_with_nodes_words_states_and_steps() {
        let m = DeviceModel::default();
        let base = wikidata_1b(1, None, sample(1, 1, 1));
        let t = |s: &QueryStats, steps| m.time(s, 1, steps);
        let wider = QueryStats {
            batch_words: 6,
            ..base
        };
        let more_states = QueryStats {
            live_states: 4,
            ..base
        };
        assert!(t(&wider, 5) > t(&base, 5));
        assert!(t(&more_states, 5) > t(&base, 5));
        assert!(t(&base, 10) > t(&base, 5));
        let (three, one) = (m.time(&base, 3, 5), t(&base, 5));
        assert!(three.abs_diff(one * 3) < Duration::from_micros(1));
        // A batch over 287 M nodes × 3 words costs close to a second before any step.
        assert!(t(&base, 1) > Duration::from_millis(800));
    }

    #[test]
    fn fitting_words_narrows_batches_to_the_device() {
        assert_eq!(fitting_words(None, 2, 1 << 28, 8), 8);
        // 287 M nodes, two states: 7 batches of 2.3 GB per word; 75 GB free fits 3.
        assert_eq!(fitting_words(Some(75 << 30), 2, 287_311_241, 8), 3);
        assert_eq!(fitting_words(Some(1 << 20), 2, 287_311_241, 8), 1);
        assert_eq!(fitting_words(Some(u64::MAX), 2, 1_000, 8), 8);
    }
}
