//! What `k2rpq bench-spmv` reports: every figure (JSON), and a compact table.

use std::fmt::Write as _;
use std::path::Path;

use super::SpmvOptions;
use crate::baseline::Timing;
use k2rpq::engine::Direction;

/// Sizes of the benchmarked graph and of its representations.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct GraphInfo {
    /// Name (file or generator).
    pub name: String,
    /// Matrix rows.
    pub rows: u64,
    /// Matrix columns.
    pub cols: u64,
    /// Edges read or generated, duplicates included.
    pub input_edges: u64,
    /// Distinct cells.
    pub nnz: u64,
    /// Tree levels.
    pub levels: u32,
    /// Tree nodes.
    pub nodes: u64,
    /// Signature bits per cell.
    pub bits_per_edge: f64,
    /// Bytes of the signatures.
    pub tree_bytes: u64,
    /// Bytes of the sampled directory.
    pub directory_bytes: u64,
    /// Bytes of the cached frontier.
    pub frontier_bytes: u64,
    /// Bytes of the cuSPARSE CSR (row pointers, columns, f32 values).
    pub csr_bytes: u64,
    /// Bytes of the Boolean CSR (row pointers, columns).
    pub bcsr_bytes: u64,
}

/// The time of one variant of a contender.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct VariantTime {
    /// Variant (algorithm, kernel, offset source).
    pub variant: String,
    /// Median, milliseconds.
    pub median_ms: f64,
    /// Working set of this variant.
    pub working_set_bytes: u64,
}

/// One contender's product of one direction and width (its fastest variant).
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct Measurement {
    /// Who (`cusparse`, `bcsr`, `cpu k2+F`, ...).
    pub contender: String,
    /// The fastest variant.
    pub variant: String,
    /// Right or left.
    pub direction: Direction,
    /// Vectors in the batch (sources, for bit-packed batches).
    pub batch: usize,
    /// A bit-packed Boolean batch rather than f32 vectors.
    pub bit_packed: bool,
    /// Bytes of the matrix representation.
    pub representation_bytes: u64,
    /// Every byte allocated for the product: matrix, vectors, scratch.
    pub working_set_bytes: u64,
    /// Median and minimum time.
    pub timing: Timing,
    /// Median time divided by the batch width.
    pub per_vector_ms: f64,
    /// Median time over cuSPARSE's for the same direction and width (for bit-packed
    /// batches: per-source time over cuSPARSE SpMM's per-vector time at the same width).
    pub time_vs_cusparse: Option<f64>,
    /// Working set over cuSPARSE's for the same direction and width.
    pub working_set_vs_cusparse: Option<f64>,
    /// Every variant that agreed with the reference, with its time.
    pub variants: Vec<VariantTime>,
}

/// A product not measured, and why (no GPU, budget, rejected, error).
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct Skipped {
    /// Who.
    pub contender: String,
    /// Direction, when the skip concerns one product.
    pub direction: Option<Direction>,
    /// Batch width, when the skip concerns one product.
    pub batch: Option<usize>,
    /// Whether a bit-packed product.
    pub bit_packed: bool,
    /// Why. Starts with `REJECTED` for a contender that disagreed with the reference,
    /// `budget` for one that did not fit the budget.
    pub reason: String,
}

/// Everything one run of the benchmark found.
#[derive(Clone, Debug, serde::Serialize)]
pub struct SpmvReport {
    /// The graph.
    pub graph: GraphInfo,
    /// The options it ran with.
    pub options: SpmvOptions,
    /// Rayon threads of the CPU contenders.
    pub cpu_threads: usize,
    /// Measured products.
    pub measurements: Vec<Measurement>,
    /// Products or contenders not measured.
    pub skipped: Vec<Skipped>,
}

impl SpmvReport {
    /// An empty report.
    pub fn new(graph: GraphInfo, options: SpmvOptions) -> Self {
        SpmvReport {
            graph,
            options,
            cpu_threads: rayon::current_num_threads(),
            measurements: Vec::new(),
            skipped: Vec::new(),
        }
    }

    /// Records a skip.
    pub fn skip(
        &mut self,
        contender: &str,
        direction: Option<Direction>,
        batch: Option<usize>,
        bit_packed: bool,
        reason: String,
    ) {
        self.skipped.push(Skipped {
            contender: contender.to_string(),
            direction,
            batch,
            bit_packed,
            reason,
        });
    }

    /// cuSPARSE's measurement of `(dir, batch)`, if any.
    pub fn cusparse(&self, dir: Direction, batch: usize) -> Option<&Measurement> {
        self.measurements
            .iter()
            .find(|m| m.contender == "cusparse" && m.direction == dir && m.batch == batch)
    }

    /// Fills the ratios to cuSPARSE.
    pub fn compute_ratios(&mut self) {
        let base: Vec<Option<(f64, u64)>> = self
            .measurements
            .iter()
            .map(|m| {
                self.cusparse(m.direction, m.batch)
                    .map(|c| (c.timing.median_ms, c.working_set_bytes))
            })
            .collect();
        for (m, b) in self.measurements.iter_mut().zip(base) {
            if let Some((t, ws)) = b {
                // Same width on both sides, so the per-source / per-vector ratio of a
                // bit-packed batch equals the ratio of the medians.
                m.time_vs_cusparse = Some(m.timing.median_ms / t);
                m.working_set_vs_cusparse = Some(m.working_set_bytes as f64 / ws as f64);
            }
        }
    }

    /// The report as pretty JSON.
    pub fn to_json(&self) -> String {
        serde_json::to_string_pretty(self).expect("the report serialises")
    }

    /// Writes the JSON to a file.
    pub fn write_json(&self, path: &Path) -> std::io::Result<()> {
        std::fs::write(path, self.to_json())
    }

    /// The compact table printed at the end of a run.
    pub fn table(&self) -> String {
        let g = &self.graph;
        let mut s = String::new();
        let _ = writeln!(
            s,
            "{}: {}×{}, {} cells, {} levels, {:.2} bits/cell; tree {} + dir {} + frontier {}; CSR {} (cuSPARSE), {} (bCSR)",
            g.name,
            g.rows,
            g.cols,
            g.nnz,
            g.levels,
            g.bits_per_edge,
            mib(g.tree_bytes),
            mib(g.directory_bytes),
            mib(g.frontier_bytes),
            mib(g.csr_bytes),
            mib(g.bcsr_bytes)
        );
        let _ = writeln!(
            s,
            "{:<22} {:<14} {:1} {:>4} {:>7} {:>7} {:>10} {:>9} {:>6} {:>6}",
            "contender", "variant", "d", "B", "repr", "ws", "median_ms", "us/vec", "x_time", "x_ws"
        );
        let mut rows: Vec<&Measurement> = self.measurements.iter().collect();
        rows.sort_by_key(|m| (m.bit_packed, m.direction == Direction::Left, m.batch));
        for m in rows {
            let _ = writeln!(
                s,
                "{:<22} {:<14} {:1} {:>4} {:>7} {:>7} {:>10.4} {:>9.1} {:>6} {:>6}",
                truncate(&m.contender, 22),
                truncate(&m.variant, 14),
                if m.direction == Direction::Right {
                    "R"
                } else {
                    "L"
                },
                m.batch,
                mib(m.representation_bytes),
                mib(m.working_set_bytes),
                m.timing.median_ms,
                m.per_vector_ms * 1e3,
                ratio(m.time_vs_cusparse),
                ratio(m.working_set_vs_cusparse),
            );
        }
        for k in &self.skipped {
            let what = match (k.direction, k.batch) {
                (Some(d), Some(b)) => format!(
                    " {d:?} B={b}{}",
                    if k.bit_packed { " bit-packed" } else { "" }
                ),
                _ => String::new(),
            };
            let _ = writeln!(s, "skipped {}{what}: {}", k.contender, k.reason);
        }
        s
    }
}

fn mib(bytes: u64) -> String {
    let b = bytes as f64;
    if b >= 1e9 {
        format!("{:.2}G", b / 1e9)
    } else if b >= 1e6 {
        format!("{:.2}M", b / 1e6)
    } else if b >= 1e3 {
        format!("{:.1}K", b / 1e3)
    } else {
        format!("{bytes}B")
    }
}

fn ratio(r: Option<f64>) -> String {
    r.map_or_else(|| "-".into(), |r| format!("{r:.3}"))
}

fn truncate(s: &str, n: usize) -> String {
    s.chars().take(n).collect()
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    pub(crate) fn sample() -> SpmvReport {
        let graph = GraphInfo {
            name: "g".into(),
            rows: 10,
            cols: 10,
            input_edges: 20,
            nnz: 18,
            levels: 4,
            nodes: 30,
            bits_per_edge: 6.7,
            tree_bytes: 16,
            directory_bytes: 8,
            frontier_bytes: 40,
            csr_bytes: 188,
            bcsr_bytes: 116,
        };
        let mut r = SpmvReport::new(graph, SpmvOptions::default());
        let m = |contender: &str, batch, ms, ws| Measurement {
            contender: contender.into(),
            variant: "v".into(),
            direction: Direction::Right,
            batch,
            bit_packed: false,
            representation_bytes: ws / 2,
            working_set_bytes: ws,
            timing: Timing {
                median_ms: ms,
                min_ms: ms,
                repeats: 3,
            },
            per_vector_ms: ms / batch as f64,
            time_vs_cusparse: None,
            working_set_vs_cusparse: None,
            variants: vec![],
        };
        r.measurements.push(m("cusparse", 1, 2.0, 1000));
        r.measurements.push(m("cpu k2+F", 1, 5.0, 100));
        r.measurements.push(m("cpu k2", 4, 5.0, 100));
        r.skip(
            "bcsr",
            None,
            None,
            false,
            "no GPU: libcuda not found".into(),
        );
        r
    }

    #[test]
    fn ratios_only_where_cusparse_ran_at_the_same_width() {
        let mut r = sample();
        r.compute_ratios();
        assert_eq!(r.measurements[0].time_vs_cusparse, Some(1.0));
        assert_eq!(r.measurements[1].time_vs_cusparse, Some(2.5));
        assert_eq!(r.measurements[1].working_set_vs_cusparse, Some(0.1));
        assert_eq!(r.measurements[2].time_vs_cusparse, None);
    }

    #[test]
    fn json_has_every_figure_and_table_every_row() {
        let mut r = sample();
        r.compute_ratios();
        let v: serde_json::Value = serde_json::from_str(&r.to_json()).unwrap();
        assert_eq!(v["measurements"].as_array().unwrap().len(), 3);
        assert_eq!(v["measurements"][1]["time_vs_cusparse"], 2.5);
        assert_eq!(v["measurements"][1]["timing"]["median_ms"], 5.0);
        assert_eq!(v["graph"]["csr_bytes"], 188);
        assert_eq!(v["skipped"][0]["reason"], "no GPU: libcuda not found");
        let t = r.table();
        assert_eq!(t.lines().count(), 1 + 1 + 3 + 1, "{t}");
        assert!(t.contains("skipped bcsr: no GPU"), "{t}");
        assert!(t.contains("2.500"), "{t}");
    }
}
