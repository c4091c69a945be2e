//! Which kernel runs a step: the leaf variant a product uses ([`LeafKernel`], its tuned
//! choice per product in [`LeafKernel::resolve`]) and the policy table `cuda/kernels.def`,
//! which names the kernel of each step, variant and frontier layout. The kernel files
//! include the same table to define their kernels, so the names come from one place.

use std::sync::LazyLock;

use super::FrontierLayout;
use crate::engine::{Direction, EngineError, Result, SemiringKind};

/// The policy table, as the kernel files include it.
pub(super) const TABLE_SOURCE: &str = include_str!("../../../cuda/kernels.def");

/// Which kernel visits the leaves (and, for the warp-rank variants, expands the levels
/// above them). All give the same results (bit-for-bit on Boolean, counting, tropical and
/// bit-packed products; f32 sums in another order, within the same error bound): they
/// differ in memory traffic. See `cuda/include/leaf_rows.cuh` and the kernel files.
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize,
)]
pub enum LeafKernel {
    /// The variant measured fastest for each product (on an H200, cnr-2000 and a
    /// 200M-edge web graph), per operation, direction, width and frontier layout:
    ///
    /// - bit-packed batches: right over row-sorted block entries `runs` (a lane sums its
    ///   four entries' block rows in registers, lanes continuing one block row merge their
    ///   words before one blind atomic: 42 % less time than `wagg` on the web graph), over
    ///   Morton-ordered ones `wagg`, otherwise `rows`;
    /// - over codes: `rows` right, `wagg` left (column updates collide within a warp);
    /// - over block entries, right: `runs` (a thread sums a block row's run of entries in
    ///   registers; over Morton-ordered blocks a single vector gains more from `wagg`);
    /// - over block entries, left: `wagg` for single vectors, `rows` for batches;
    /// - over column-sorted block entries, the mirror of row-sorted ones: `runs` left (the
    ///   web graph's bit-packed left batch 0.64 ms against 1.12 over row-sorted entries;
    ///   cnr-2000's single left vector in 0.17x of cuSPARSE's time), and right as left
    ///   products over the other layouts;
    /// - over both sorted copies ([`FrontierLayout::Both`]), what the copy the product
    ///   reads gets.
    #[default]
    Tuned,
    /// The paper's kernel: one thread per (node, vector), one atomic per leaf cell.
    Cells,
    /// The node's four leaves as a 4x4 bitmap in registers: each input entry read once,
    /// each output row (right) or column (left) accumulated in a register, at most four
    /// atomics per node; read-before-atomic for the idempotent semirings.
    Rows,
    /// `Rows` with child offsets from one directory rank per warp plus a shuffle scan of
    /// the fan-outs instead of a rank per thread (also for the expand kernel).
    RowsWarpRank,
    /// `RowsWarpRank` with warp-level aggregation: lanes updating the same output block
    /// combine their sums by shuffles; one atomic per distinct output entry per warp.
    WarpAgg,
    /// `Rows` with the output accumulated per block of threads: a block takes 1024
    /// consecutive items (in Morton order their outputs fall in a short range), combines
    /// them in a 16 KB shared-memory window starting at the chunk's lowest output, sends an
    /// output beyond the window to `y` directly, and flushes the window with one global
    /// update per touched entry: one atomic per distinct output entry per chunk.
    Window,
    /// Over block entries of the cached frontier: a thread takes 8 consecutive entries (4
    /// of a bit-packed batch, whose 8-byte words would double the registers in flight)
    /// and sums each run of entries with the same output block in registers, one update
    /// per non-empty output entry of a run. With [`FrontierLayout::RowBlocks`] a right
    /// product's runs are block rows; one that continues into the next lanes is combined
    /// with theirs by shuffles, then updated once per warp without reading `y` first
    /// ([`FrontierLayout::ColBlocks`]: the same for a left product's block columns). Over
    /// codes it is `Rows`.
    Runs,
}

impl LeafKernel {
    /// Every concrete variant (what [`LeafKernel::Tuned`] chooses from), the paper's first.
    pub const ALL: [LeafKernel; 6] = [
        LeafKernel::Cells,
        LeafKernel::Rows,
        LeafKernel::RowsWarpRank,
        LeafKernel::WarpAgg,
        LeafKernel::Window,
        LeafKernel::Runs,
    ];

    /// Short name (`tuned`, `cells`, `rows`, `wrank`, `wagg`, `window`, `runs`), as in
    /// benchmark rows, on the command line and in `cuda/kernels.def`.
    pub fn name(self) -> &'static str {
        match self {
            LeafKernel::Tuned => "tuned",
            LeafKernel::Cells => "cells",
            LeafKernel::Rows => "rows",
            LeafKernel::RowsWarpRank => "wrank",
            LeafKernel::WarpAgg => "wagg",
            LeafKernel::Window => "window",
            LeafKernel::Runs => "runs",
        }
    }

    /// The variant of a [`LeafKernel::name`].
    pub fn from_name(name: &str) -> Option<LeafKernel> {
        std::iter::once(LeafKernel::Tuned)
            .chain(Self::ALL)
            .find(|k| k.name() == name)
    }

    /// The concrete variant that runs a product of `op` in direction `dir` over a batch
    /// of `width` vectors over a frontier in `layout`: itself, or for
    /// [`LeafKernel::Tuned`] the measured winner listed there.
    pub(super) fn resolve(
        self,
        op: LeafOp,
        dir: Direction,
        width: u64,
        layout: FrontierLayout,
    ) -> LeafKernel {
        use Direction::{Left, Right};
        use FrontierLayout::{Blocks, Both, Codes, ColBlocks, RowBlocks};
        if self != LeafKernel::Tuned {
            return self;
        }
        // `Both` serves each direction from the copy sorted for it.
        let layout = layout.for_dir(dir);
        match (op, dir, layout) {
            (LeafOp::Bits, Right, RowBlocks) | (LeafOp::Bits, Left, ColBlocks) => LeafKernel::Runs,
            (LeafOp::Bits, Right, Blocks) => LeafKernel::WarpAgg,
            (LeafOp::Bits, _, _) => LeafKernel::Rows,
            (_, Right, Codes) => LeafKernel::Rows,
            (_, Left, Codes) => LeafKernel::WarpAgg,
            (_, Left, ColBlocks) => LeafKernel::Runs,
            (_, Right, Blocks | ColBlocks) if width == 1 => LeafKernel::WarpAgg,
            (_, Right, ColBlocks) => LeafKernel::Rows,
            // (`Both` is read as `RowBlocks` here.)
            (_, Right, Blocks | RowBlocks | Both) => LeafKernel::Runs,
            (_, Left, _) if width == 1 => LeafKernel::WarpAgg,
            (_, Left, _) => LeafKernel::Rows,
        }
    }

    /// Whether the variant visits a node's leaves as a 4x4 block (all but the paper's
    /// `cells` and the `window` kernel, kept over codes as measured baselines): such
    /// variants can read block entries.
    pub(super) fn reads_blocks(self) -> bool {
        !matches!(self, LeafKernel::Cells | LeafKernel::Window)
    }

    /// Whether tree-only descents with this variant may end in octet leaf steps
    /// ([`Tuning::octets`](super::Tuning::octets)): those of `rows` and of the variants
    /// that are `rows` over codes (`tuned`, `runs`). The others are measured baselines of
    /// their own leaf kernels.
    pub(super) fn ends_in_octets(self) -> bool {
        matches!(
            self,
            LeafKernel::Rows | LeafKernel::Tuned | LeafKernel::Runs
        )
    }
}

/// What a leaf kernel applies: a semiring's entries or bit-packed Boolean words (the
/// operations of `K2RPQ_OPS` in `cuda/kernels.def`, in this order).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum LeafOp {
    /// (+, ×) over f32.
    PlusTimes = 0,
    /// (+, ×) over u32.
    Counting = 1,
    /// (∨, ∧) over u32 entries.
    Boolean = 2,
    /// (min, +) over f32.
    Tropical = 3,
    /// Bit-packed Boolean batches (64 sources per u64 word).
    Bits = 4,
}

impl LeafOp {
    /// Every operation, in the table's order.
    const ALL: [LeafOp; 5] = [
        LeafOp::PlusTimes,
        LeafOp::Counting,
        LeafOp::Boolean,
        LeafOp::Tropical,
        LeafOp::Bits,
    ];
}

impl From<SemiringKind> for LeafOp {
    fn from(k: SemiringKind) -> Self {
        match k {
            SemiringKind::PlusTimes => LeafOp::PlusTimes,
            SemiringKind::Counting => LeafOp::Counting,
            SemiringKind::Boolean => LeafOp::Boolean,
            SemiringKind::Tropical => LeafOp::Tropical,
        }
    }
}

/// The step a kernel of the table runs (its `step` column).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum KernelStep {
    /// An expand step of one level.
    Expand,
    /// An expand step of two or three levels.
    ExpandLevels,
    /// A leaf step over the last internal level (codes or block entries).
    Leaves,
    /// A leaf step over the level above it.
    Octets,
    /// A subtree step.
    Subtrees,
    /// The lone cells of a tree-only matrix.
    Lone,
}

impl KernelStep {
    const ALL: [KernelStep; 6] = [
        KernelStep::Expand,
        KernelStep::ExpandLevels,
        KernelStep::Leaves,
        KernelStep::Octets,
        KernelStep::Subtrees,
        KernelStep::Lone,
    ];

    /// The name in the table's `step` column.
    fn name(self) -> &'static str {
        match self {
            KernelStep::Expand => "expand",
            KernelStep::ExpandLevels => "expand_levels",
            KernelStep::Leaves => "leaves",
            KernelStep::Octets => "octets",
            KernelStep::Subtrees => "subtrees",
            KernelStep::Lone => "lone",
        }
    }
}

/// One row of the table.
#[derive(Debug)]
struct Row {
    /// The kernel file, `cuda/<file>.cu`.
    file: &'static str,
    /// The step it runs (`None`: a helper, launched by name).
    step: Option<KernelStep>,
    /// The variants it serves (`None`: any).
    variants: Option<Vec<&'static str>>,
    /// The frontier layouts it reads (`None`: any).
    frontiers: Option<Vec<&'static str>>,
    /// Whether the engine may launch it to overlap the previous kernel of its stream.
    overlapped: bool,
    /// Its kernels: one per operation for a family (in [`LeafOp`] order), else one.
    kernels: Vec<String>,
}

impl Row {
    fn serves(&self, step: KernelStep, variant: LeafKernel, frontier: FrontierLayout) -> bool {
        let any_of =
            |set: &Option<Vec<&str>>, name: &str| set.as_ref().is_none_or(|s| s.contains(&name));
        self.step == Some(step)
            && any_of(&self.variants, variant.name())
            && any_of(&self.frontiers, frontier.name())
    }
}

/// The parsed table.
#[derive(Debug)]
struct Table {
    rows: Vec<Row>,
}

/// A `|`-separated set of names, `None` for `any`.
fn name_set(column: &'static str) -> Option<Vec<&'static str>> {
    (column != "any").then(|| column.split('|').map(str::trim).collect())
}

impl Table {
    /// Parses the table's rows (`K2RPQ_STEP(...)`, `K2RPQ_LEAF(...)`, `K2RPQ_HELPER(...)`)
    /// and the operations of its `K2RPQ_OPS` (`X(op, Semiring, __VA_ARGS__)`).
    fn parse(text: &'static str) -> std::result::Result<Table, String> {
        let mut ops = Vec::new();
        let mut families = Vec::new();
        let mut rows = Vec::new();
        for (i, line) in text.lines().enumerate() {
            let line = line.trim().trim_end_matches('\\').trim_end();
            let Some((head, rest)) = line.split_once('(') else {
                continue;
            };
            if !matches!(head, "X" | "K2RPQ_STEP" | "K2RPQ_LEAF" | "K2RPQ_HELPER") {
                continue;
            }
            let bad = |what: &str| format!("cuda/kernels.def:{}: {what}: {line}", i + 1);
            let args: Vec<&'static str> = rest
                .strip_suffix(')')
                .ok_or_else(|| bad("no closing parenthesis"))?
                .split(',')
                .map(str::trim)
                .collect();
            let step = |name: &str| {
                KernelStep::ALL
                    .into_iter()
                    .find(|s| s.name() == name)
                    .ok_or_else(|| bad("unknown step"))
            };
            let row = match (head, &args[..]) {
                ("X", &[op, _, _]) => {
                    ops.push(op);
                    continue;
                }
                ("K2RPQ_STEP", &[file, kernel, s, variants]) => Row {
                    file,
                    step: Some(step(s)?),
                    variants: name_set(variants),
                    frontiers: None,
                    overlapped: true,
                    kernels: vec![kernel.to_string()],
                },
                ("K2RPQ_LEAF", &[file, kernel, s, variants, frontiers, _]) => {
                    families.push(rows.len());
                    Row {
                        file,
                        step: Some(step(s)?),
                        variants: name_set(variants),
                        frontiers: name_set(frontiers),
                        overlapped: true,
                        kernels: vec![kernel.to_string()],
                    }
                }
                ("K2RPQ_HELPER", &[file, kernel, launch]) => Row {
                    file,
                    step: None,
                    variants: None,
                    frontiers: None,
                    overlapped: match launch {
                        "overlapped" => true,
                        "plain" => false,
                        _ => return Err(bad("launch is neither overlapped nor plain")),
                    },
                    kernels: vec![kernel.to_string()],
                },
                _ => return Err(bad("wrong number of columns")),
            };
            rows.push(row);
        }
        if ops.len() != LeafOp::ALL.len() {
            return Err(format!(
                "cuda/kernels.def: {} operations in K2RPQ_OPS, the engine has {}",
                ops.len(),
                LeafOp::ALL.len()
            ));
        }
        for i in families {
            let family = &mut rows[i];
            family.kernels = ops
                .iter()
                .map(|op| format!("{}_{op}", family.kernels[0]))
                .collect();
        }
        Ok(Table { rows })
    }

    /// The row that runs `step` for `variant` over `frontier`: the first that serves them.
    fn row(&self, step: KernelStep, variant: LeafKernel, frontier: FrontierLayout) -> Option<&Row> {
        self.rows.iter().find(|r| r.serves(step, variant, frontier))
    }
}

/// The table built into the binary, parsed on first use. A table that does not parse is
/// a defect of the build, which the unit tests rule out.
static TABLE: LazyLock<std::result::Result<Table, String>> =
    LazyLock::new(|| Table::parse(TABLE_SOURCE));

fn table() -> Result<&'static Table> {
    TABLE.as_ref().map_err(|e| EngineError::Cuda(e.clone()))
}

/// The kernel that runs `step` for the resolved variant `variant` over `frontier` (the
/// layout the step reads: [`FrontierLayout::Codes`] for descents) and operation `op`.
pub(super) fn kernel(
    step: KernelStep,
    variant: LeafKernel,
    frontier: FrontierLayout,
    op: LeafOp,
) -> Result<&'static str> {
    let row = table()?.row(step, variant, frontier).ok_or_else(|| {
        EngineError::Cuda(format!(
            "cuda/kernels.def has no kernel for {} steps of {} over {}",
            step.name(),
            variant.name(),
            frontier.name()
        ))
    })?;
    let at = if row.kernels.len() > 1 {
        op as usize
    } else {
        0
    };
    Ok(&row.kernels[at])
}

/// A kernel file's kernels: `(file, [(kernel, overlapped)])`, where `overlapped` says
/// that the engine may launch the kernel to overlap the previous kernel of its stream.
pub(super) type FileKernels = (&'static str, Vec<(&'static str, bool)>);

/// The kernels of each file in the table, files and kernels in the table's order.
pub(super) fn file_kernels() -> Result<Vec<FileKernels>> {
    let mut files: Vec<FileKernels> = Vec::new();
    for row in &table()?.rows {
        let at = match files.iter().position(|(f, _)| *f == row.file) {
            Some(at) => at,
            None => {
                files.push((row.file, Vec::new()));
                files.len() - 1
            }
        };
        let kernels = row.kernels.iter().map(|k| (k.as_str(), row.overlapped));
        files[at].1.extend(kernels);
    }
    Ok(files)
}

#[cfg(test)]
mod tests {
    use super::*;

    const OPS: [LeafOp; 5] = LeafOp::ALL;

    /// The table parses, and a malformed table is an error naming the line or the count
    /// of operations.
    #[test]
    fn the_table_parses() {
        let t = table().unwrap();
        assert!(t.rows.iter().all(|r| !r.kernels.is_empty()));
        let err = Table::parse("X(plus_times, PlusTimes, __VA_ARGS__)").unwrap_err();
        assert!(err.contains("1 operations"), "{err}");
        let err = Table::parse("// x\nK2RPQ_LEAF( a, b, leaves, rows )\n").unwrap_err();
        assert!(
            err.contains("kernels.def:2") && err.contains("columns"),
            "{err}"
        );
        let err = Table::parse("K2RPQ_STEP( a, b, descend, rows )").unwrap_err();
        assert!(err.contains("unknown step"), "{err}");
    }

    /// Exactly one row serves each step the engine runs: expand steps and leaf steps over
    /// codes for every variant, leaf steps over block entries for the variants that read
    /// them, octet steps for those that end in them (after resolving `tuned`), subtree
    /// steps and lone cells for every variant. So no kernel is chosen by the order of rows.
    #[test]
    fn one_row_serves_each_step() {
        use FrontierLayout::{Blocks, Codes, ColBlocks, RowBlocks};
        let t = table().unwrap();
        let mut wanted = Vec::new();
        for v in LeafKernel::ALL {
            for step in [
                KernelStep::Expand,
                KernelStep::ExpandLevels,
                KernelStep::Leaves,
                KernelStep::Subtrees,
                KernelStep::Lone,
            ] {
                wanted.push((step, v, Codes));
            }
            if v.reads_blocks() {
                for f in [Blocks, RowBlocks, ColBlocks] {
                    wanted.push((KernelStep::Leaves, v, f));
                }
            }
        }
        for v in [LeafKernel::Rows, LeafKernel::Runs, LeafKernel::WarpAgg] {
            wanted.push((KernelStep::Octets, v, Codes));
        }
        for (step, v, f) in wanted {
            let n = t.rows.iter().filter(|r| r.serves(step, v, f)).count();
            assert_eq!(n, 1, "{step:?} {v:?} {f:?}");
        }
    }

    /// The kernels the engine launched by fixed positions in a list before the table, for
    /// each variant, layout and operation: the table names the same ones.
    #[test]
    fn each_step_gets_its_kernel() {
        use FrontierLayout::{Blocks, Codes, ColBlocks, RowBlocks};
        use LeafKernel::{Cells, Rows, RowsWarpRank, Runs, WarpAgg, Window};
        let suffix = ["plus_times", "counting", "boolean", "tropical", "bits"];
        let name = |step, v, f, op| kernel(step, v, f, op).unwrap();
        for (i, op) in OPS.into_iter().enumerate() {
            let s = suffix[i];
            for v in LeafKernel::ALL {
                let family = match v {
                    Cells => "leaves",
                    Rows | Runs => "leaves_rows",
                    RowsWarpRank => "leaves_wrank",
                    WarpAgg => "leaves_agg",
                    Window => "leaves_window",
                    LeafKernel::Tuned => unreachable!(),
                };
                assert_eq!(
                    name(KernelStep::Leaves, v, Codes, op),
                    format!("{family}_{s}")
                );
                let expand = match v {
                    RowsWarpRank | WarpAgg => "expand_wrank",
                    _ => "expand",
                };
                assert_eq!(name(KernelStep::Expand, v, Codes, op), expand);
                assert_eq!(
                    name(KernelStep::ExpandLevels, v, Codes, op),
                    "expand_levels"
                );
                assert_eq!(
                    name(KernelStep::Subtrees, v, Codes, op),
                    format!("subtrees_{s}")
                );
                assert_eq!(
                    name(KernelStep::Lone, v, Codes, op),
                    format!("lone_cells_{s}")
                );
                if !v.reads_blocks() {
                    continue;
                }
                for layout in [Blocks, RowBlocks, ColBlocks] {
                    let family = match (v, layout) {
                        (WarpAgg, RowBlocks) => "rowblocks_agg",
                        (WarpAgg, _) => "blocks_agg",
                        (Runs, RowBlocks) => "rowblocks_runs",
                        (Runs, ColBlocks) => "colblocks_runs",
                        (Runs, _) => "blocks_runs",
                        _ => "blocks_rows",
                    };
                    assert_eq!(
                        name(KernelStep::Leaves, v, layout, op),
                        format!("{family}_{s}"),
                        "{v:?} {layout:?}"
                    );
                }
            }
            for (v, family) in [
                (Rows, "leaves_octets"),
                (Runs, "leaves_octets"),
                (WarpAgg, "leaves_octets_agg"),
            ] {
                assert_eq!(
                    name(KernelStep::Octets, v, Codes, op),
                    format!("{family}_{s}")
                );
            }
        }
        let err = kernel(KernelStep::Octets, Cells, Codes, LeafOp::Bits).unwrap_err();
        assert!(err.to_string().contains("octets steps of cells"), "{err}");
    }

    /// Every family kernel and every kernel of a step may be launched to overlap its
    /// predecessor; of the helpers, only the row windows' product (after its clear).
    #[test]
    fn overlapped_kernels_are_the_steps_and_the_row_windows() {
        let files = file_kernels().unwrap();
        let overlapped: Vec<&str> = files
            .iter()
            .flat_map(|(_, k)| k.iter().filter(|(_, o)| *o).map(|(k, _)| *k))
            .collect();
        assert!(overlapped.contains(&"rowwindows_bits"));
        assert!(overlapped.contains(&"expand_levels"));
        assert!(overlapped.contains(&"colblocks_runs_bits"));
        for plain in [
            "fill_u32",
            "scan_fanout",
            "rowgroups_bits",
            "clear_block_rows",
        ] {
            assert!(!overlapped.contains(&plain), "{plain}");
        }
        let all: usize = files.iter().map(|(_, k)| k.len()).sum();
        assert_eq!(all, 3 + 15 * 5 + 9);
    }

    /// Over codes `tuned` resolves to a variant with a kernel for each step, and every
    /// concrete variant resolves to itself.
    #[test]
    fn tuned_choices() {
        use Direction::{Left, Right};
        use FrontierLayout::{Blocks, Both, Codes, ColBlocks, RowBlocks};
        use LeafKernel::{Rows, Runs, WarpAgg};
        for op in OPS {
            for dir in [Left, Right] {
                for width in [1, 16] {
                    for layout in FrontierLayout::ALL {
                        let k = LeafKernel::Tuned.resolve(op, dir, width, layout);
                        assert!(LeafKernel::ALL.contains(&k), "{op:?} {dir:?} -> {k:?}");
                        // `runs` exists over block entries only.
                        assert!(layout.packed() || k != LeafKernel::Runs);
                        for v in LeafKernel::ALL {
                            assert_eq!(v.resolve(op, dir, width, layout), v);
                        }
                    }
                }
            }
        }
        for (op, dir, width, layout, want) in [
            (LeafOp::PlusTimes, Left, 1, Codes, WarpAgg),
            (LeafOp::PlusTimes, Right, 1, Blocks, WarpAgg),
            (LeafOp::PlusTimes, Right, 1, RowBlocks, Runs),
            (LeafOp::Boolean, Left, 16, RowBlocks, Rows),
            (LeafOp::Bits, Right, 1, RowBlocks, Runs),
            (LeafOp::Bits, Right, 1, Blocks, WarpAgg),
            (LeafOp::Bits, Left, 1, RowBlocks, Rows),
            (LeafOp::Bits, Left, 1, ColBlocks, Runs),
            (LeafOp::Bits, Right, 1, ColBlocks, Rows),
            (LeafOp::PlusTimes, Left, 1, ColBlocks, Runs),
            (LeafOp::PlusTimes, Right, 1, ColBlocks, WarpAgg),
            (LeafOp::Bits, Right, 1, Codes, Rows),
            // Both sorted copies: each direction as over the copy sorted for it.
            (LeafOp::Bits, Right, 1, Both, Runs),
            (LeafOp::Bits, Left, 1, Both, Runs),
            (LeafOp::PlusTimes, Right, 1, Both, Runs),
            (LeafOp::PlusTimes, Left, 1, Both, Runs),
            (LeafOp::Boolean, Left, 16, Both, Runs),
        ] {
            let got = LeafKernel::Tuned.resolve(op, dir, width, layout);
            assert_eq!(got, want, "{op:?} {dir:?} B={width} {layout:?}");
        }
        for k in LeafKernel::ALL {
            assert_eq!(LeafKernel::from_name(k.name()), Some(k));
        }
        assert_eq!(LeafKernel::from_name("nope"), None);
        assert_eq!(LeafKernel::default(), LeafKernel::Tuned);
        assert_eq!(LeafKernel::from_name("tuned"), Some(LeafKernel::Tuned));
    }
}
