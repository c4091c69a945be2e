//! The construction benchmark behind `k2rpq bench-build`: reads or generates a graph as
//! Morton codes, builds the k²-tree (sort + level emission + validation), then the sampled
//! directory and the cached frontier, and reports throughput, bits per edge and peak memory.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use indicatif::{ProgressBar, ProgressStyle};

use super::gen::{Rmat, Web};
use super::input::{read_edges, InputError, InputFormat};
use k2rpq::k2tree::{Directory, InvalidTree, K2Tree};

/// Which synthetic generator.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum, serde::Serialize)]
pub enum Synthetic {
    /// R-MAT with Graph500 parameters (a = 0.57, b = c = 0.19, edge factor 16, ids scrambled).
    Rmat,
    /// Web-like: hosts of consecutive ids, mostly intra-host links (see [`Web::like_cnr`]).
    Web,
}

/// What to build a tree from.
#[derive(Clone, Debug)]
pub enum Source {
    /// An edge-list file.
    File {
        /// The file.
        path: PathBuf,
        /// Its format.
        format: InputFormat,
    },
    /// A generated graph.
    Synthetic {
        /// The generator.
        kind: Synthetic,
        /// Edges to generate.
        edges: u64,
        /// Seed.
        seed: u64,
    },
}

impl Source {
    /// A short name for reports.
    pub fn name(&self) -> String {
        match self {
            Source::File { path, .. } => path.file_name().map_or_else(
                || path.display().to_string(),
                |n| n.to_string_lossy().into(),
            ),
            Source::Synthetic { kind, edges, .. } => {
                format!(
                    "{}-{}",
                    format!("{kind:?}").to_lowercase(),
                    human(*edges as f64)
                )
            }
        }
    }
}

/// Options of the benchmark.
#[derive(Clone, Copy, Debug)]
pub struct BenchOptions {
    /// Directory sampling period.
    pub directory_sample: u32,
    /// Also build the cached frontier.
    pub frontier: bool,
    /// Show a progress bar on stderr (only drawn on a terminal).
    pub progress: bool,
}

/// One benchmark result. Times in seconds; `build_*` covers sorting the codes, emitting
/// the levels and validating the tree (not reading or generating the input).
#[derive(Clone, Debug, serde::Serialize)]
pub struct BuildReport {
    /// Input name.
    pub name: String,
    /// Rayon threads used.
    pub threads: usize,
    /// Matrix rows.
    pub rows: u64,
    /// Matrix columns.
    pub cols: u64,
    /// Edges read or generated (with duplicates).
    pub input_edges: u64,
    /// Distinct cells.
    pub nnz: u64,
    /// Tree levels.
    pub levels: u32,
    /// Tree nodes.
    pub nodes: u64,
    /// Seconds to read or generate the input.
    pub load_s: f64,
    /// Seconds to build the tree from the codes.
    pub build_s: f64,
    /// Input edges per second of `build_s`.
    pub edges_per_s: f64,
    /// CPU seconds (user + system, all threads) the build took, if the OS reports it:
    /// with `threads`, it tells a slow machine from a busy one.
    pub build_cpu_s: Option<f64>,
    /// Seconds to build the directory.
    pub directory_s: f64,
    /// Seconds to build the cached frontier (0 when not asked).
    pub frontier_s: f64,
    /// Signature bits per distinct cell.
    pub bits_per_edge: f64,
    /// Bytes of the signatures.
    pub tree_bytes: u64,
    /// Bytes of the directory.
    pub directory_bytes: u64,
    /// Bytes of the frontier (0 when not asked).
    pub frontier_bytes: u64,
    /// Peak resident memory of the process during the build (VmHWM after resetting it;
    /// includes the 8-byte-per-edge input codes), if the OS reports it.
    pub build_peak_bytes: Option<u64>,
    /// `build_peak_bytes / input_edges`.
    pub build_bytes_per_edge: Option<f64>,
    /// Peak resident memory of the whole run so far (VmHWM, including reading).
    pub process_peak_bytes: Option<u64>,
}

/// Errors of the benchmark.
#[derive(Debug, thiserror::Error)]
pub enum BenchError {
    /// The input could not be read.
    #[error(transparent)]
    Input(#[from] InputError),
    /// The input does not form a tree (a cell outside the stated shape).
    #[error("{name}: {error}")]
    Tree {
        /// Input name.
        name: String,
        /// What is wrong.
        error: InvalidTree,
    },
}

/// A `/proc/self/status` field in bytes (Linux only; `None` elsewhere).
pub fn proc_status_bytes(field: &str) -> Option<u64> {
    let s = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = s.lines().find(|l| l.starts_with(field))?;
    let kb: u64 = line[field.len()..]
        .trim_start_matches(':')
        .trim()
        .trim_end_matches("kB")
        .trim()
        .parse()
        .ok()?;
    Some(kb * 1024)
}

/// CPU time (user + system) of this process so far, in seconds, from `/proc/self/stat`
/// (Linux reports it in USER_HZ = 100 ticks per second).
pub fn proc_cpu_seconds() -> Option<f64> {
    let s = std::fs::read_to_string("/proc/self/stat").ok()?;
    // Fields after the command name, which is in parentheses and may hold spaces.
    let rest = &s[s.rfind(')')? + 2..];
    let f: Vec<&str> = rest.split_whitespace().collect();
    // utime and stime are fields 14 and 15 of the line, 12 and 13 after the name.
    let ticks = f.get(11)?.parse::<u64>().ok()? + f.get(12)?.parse::<u64>().ok()?;
    Some(ticks as f64 / 100.0)
}

/// Resets the peak-RSS counter (VmHWM) to the current RSS, so the next reading is the
/// peak of what follows. Returns whether the kernel accepted it.
fn reset_peak_rss() -> bool {
    std::fs::write("/proc/self/clear_refs", "5").is_ok()
}

fn spinner(on: bool, msg: &str) -> ProgressBar {
    if !on {
        return ProgressBar::hidden();
    }
    let pb = ProgressBar::new_spinner();
    pb.set_style(ProgressStyle::with_template("{spinner} [{elapsed_precise}] {msg}").unwrap());
    pb.enable_steady_tick(Duration::from_millis(200));
    pb.set_message(msg.to_string());
    pb
}

/// Runs the benchmark on one source.
pub fn run(source: &Source, opts: &BenchOptions) -> Result<BuildReport, BenchError> {
    let name = source.name();
    let t = Instant::now();
    let (rows, cols, mut codes) = match source {
        Source::File { path, format } => {
            let pb = if opts.progress {
                let pb = ProgressBar::new(0);
                pb.set_style(
                    ProgressStyle::with_template(
                        "reading {msg} [{elapsed_precise}] {wide_bar} {bytes}/{total_bytes}",
                    )
                    .unwrap(),
                );
                pb.set_message(name.clone());
                pb
            } else {
                ProgressBar::hidden()
            };
            let e = read_edges(path, *format, Some(&pb))?;
            pb.finish_and_clear();
            (e.rows, e.cols, e.codes)
        }
        Source::Synthetic { kind, edges, seed } => {
            let pb = spinner(opts.progress, &format!("generating {name}"));
            let g = match kind {
                Synthetic::Rmat => Rmat::graph500(*edges, *seed).generate(),
                Synthetic::Web => Web::like_cnr(*edges, *seed).generate(),
            };
            pb.finish_and_clear();
            (g.nodes, g.nodes, g.codes)
        }
    };
    let load_s = t.elapsed().as_secs_f64();
    let input_edges = codes.len() as u64;

    let peak_reset = reset_peak_rss();
    let pb = spinner(
        opts.progress,
        &format!("building {name} ({input_edges} edges)"),
    );
    let cpu0 = proc_cpu_seconds();
    let t = Instant::now();
    let tree = K2Tree::from_codes(rows, cols, &mut codes).map_err(|error| BenchError::Tree {
        name: name.clone(),
        error,
    })?;
    let build_s = t.elapsed().as_secs_f64();
    let build_cpu_s = cpu0.and_then(|a| Some(proc_cpu_seconds()? - a));
    let build_peak_bytes = peak_reset.then(|| proc_status_bytes("VmHWM")).flatten();
    drop(codes);

    pb.set_message(format!("directory of {name}"));
    let t = Instant::now();
    let dir = Directory::build(&tree, opts.directory_sample);
    let directory_s = t.elapsed().as_secs_f64();
    let directory_bytes = dir.bytes();
    let tree = tree.with_directory(dir);
    let (frontier_s, frontier_bytes) = if opts.frontier {
        pb.set_message(format!("frontier of {name}"));
        let t = Instant::now();
        let f = tree.frontier();
        (t.elapsed().as_secs_f64(), f.bytes())
    } else {
        (0.0, 0)
    };
    pb.finish_and_clear();
    let s = tree.stats();
    Ok(BuildReport {
        name,
        threads: rayon::current_num_threads(),
        rows,
        cols,
        input_edges,
        nnz: s.nnz,
        levels: s.levels,
        nodes: s.nodes,
        load_s,
        build_s,
        edges_per_s: input_edges as f64 / build_s.max(1e-9),
        build_cpu_s,
        directory_s,
        frontier_s,
        bits_per_edge: s.bits_per_edge,
        tree_bytes: s.tree_bytes,
        directory_bytes,
        frontier_bytes,
        build_peak_bytes,
        build_bytes_per_edge: build_peak_bytes.map(|b| b as f64 / input_edges.max(1) as f64),
        process_peak_bytes: proc_status_bytes("VmHWM"),
    })
}

/// `1.2M`-style numbers.
pub fn human(x: f64) -> String {
    let (v, unit) = if x >= 1e9 {
        (x / 1e9, "G")
    } else if x >= 1e6 {
        (x / 1e6, "M")
    } else if x >= 1e3 {
        (x / 1e3, "k")
    } else {
        (x, "")
    };
    if v >= 100.0 || unit.is_empty() {
        format!("{v:.0}{unit}")
    } else {
        format!("{v:.1}{unit}")
    }
}

/// A compact Markdown table of reports, one row per input.
pub fn table(reports: &[BuildReport]) -> String {
    let mut s = String::from(
        "| input | threads | edges | nnz | levels | nodes | load s | build s | build cpu s | M edges/s | bits/edge | tree MB | dir MB | frontier MB | build peak B/edge |\n\
         |---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n",
    );
    for r in reports {
        s += &format!(
            "| {} | {} | {} | {} | {} | {} | {:.2} | {:.3} | {} | {:.1} | {:.2} | {:.1} | {:.2} | {:.1} | {} |\n",
            r.name,
            r.threads,
            r.input_edges,
            r.nnz,
            r.levels,
            r.nodes,
            r.load_s,
            r.build_s,
            r.build_cpu_s
                .map_or_else(|| "n/a".into(), |c| format!("{c:.2}")),
            r.edges_per_s / 1e6,
            r.bits_per_edge,
            r.tree_bytes as f64 / 1e6,
            r.directory_bytes as f64 / 1e6,
            r.frontier_bytes as f64 / 1e6,
            r.build_bytes_per_edge
                .map_or_else(|| "n/a".into(), |b| format!("{b:.1}")),
        );
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn synthetic_run_reports_consistent_sizes() {
        let src = Source::Synthetic {
            kind: Synthetic::Web,
            edges: 100_000,
            seed: 1,
        };
        let r = run(
            &src,
            &BenchOptions {
                directory_sample: 256,
                frontier: true,
                progress: false,
            },
        )
        .unwrap();
        assert_eq!(r.input_edges, 100_000);
        assert!(r.nnz <= r.input_edges && r.nnz > 50_000);
        assert_eq!(r.tree_bytes, r.nodes.div_ceil(16) * 8);
        assert_eq!(r.bits_per_edge, r.nodes as f64 * 4.0 / r.nnz as f64);
        assert!(r.frontier_bytes > 0);
        assert_eq!(src.name(), "web-100k");
        let cpu = r.build_cpu_s;
        let t = table(&[r]);
        assert_eq!(t.lines().count(), 3);
        assert!(t.contains("| web-100k |"));
        if cfg!(target_os = "linux") {
            assert!(proc_status_bytes("VmHWM").unwrap() > 0);
            assert!(cpu.unwrap() >= 0.0);
        }
    }
}
