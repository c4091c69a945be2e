//! Kernel arguments and launch shapes shared by the engine's launches.

use cudarc::driver::{sys, CudaFunction, CudaStream, DriverError, LaunchConfig};

use super::tile_plan::SUBTREE_ROOTS;

/// Mirror of `struct StepParams` in `cuda/common.cuh` (same field order and sizes: every
/// pointer and count is 8 bytes, then three u32 and two u16: 128 bytes, which the kernels
/// read field by field; a 136-byte block measured slower, docs/BENCHMARKS.md session 10).
/// Pointers are raw device addresses.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct StepParams {
    pub nib: u64,
    pub ranks: u64,
    pub codes_in: u64,
    pub codes_out: u64,
    pub offsets: u64,
    pub x: u64,
    pub y: u64,
    pub pyramid: u64,
    pub node0: u64,
    pub count: u64,
    pub child0: u64,
    pub src_off: u64,
    /// Leaf steps: the batch width (or bit-packed words); expand steps: the levels they
    /// descend (1-3).
    pub width: u64,
    pub inputs: u64,
    pub sample_log2: u32,
    pub level: u32,
    pub height: u32,
    /// 0: right (`y = A x`), 1: left.
    pub dir: u16,
    /// 1: `codes_in` holds 32-bit codes (a narrow host-expanded top level).
    pub narrow: u16,
}

const _: () = assert!(std::mem::size_of::<StepParams>() == 128);

/// Launches traversal kernel `f` with its one argument `p` on `stream`. `overlapped`: as
/// a programmatic dependent launch (sm_90 and later), which may start before the previous
/// kernel of the stream ends; the traversal kernels read only the resident tree until
/// their `wait_prerequisites()` (cuda/common.cuh), so the next step's launch, block
/// scheduling and first directory ranks overlap the previous step's tail. Recorded into
/// CUDA graphs as programmatic edges.
///
/// # Safety
/// `f` must take one `StepParams` whose addresses and counts are valid for it, and when
/// `overlapped` it must call `wait_prerequisites()` before touching memory that earlier
/// work of the stream writes.
pub unsafe fn launch_step(
    stream: &CudaStream,
    f: &CudaFunction,
    cfg: LaunchConfig,
    p: &StepParams,
    overlapped: bool,
) -> Result<(), DriverError> {
    let mut args = [p as *const StepParams as *mut std::ffi::c_void];
    // SAFETY: the caller vouches for `f`, `p` and the wait.
    unsafe { launch_with_args(stream, f, cfg, &mut args, overlapped) }
}

/// Launches kernel `f` on `stream` with the arguments at the addresses in `args` (in
/// order; the driver copies the values at the call). `overlapped`: as a programmatic
/// dependent launch, which may start once the previous kernel of the stream has called
/// `start_dependents()` (or ended), and whose `wait_prerequisites()` returns when that
/// kernel has completed; otherwise after all earlier work of the stream, as usual.
///
/// # Safety
/// `f`'s parameters must be the types `args` points to, with valid addresses and counts,
/// and when `overlapped`, `f` must call `wait_prerequisites()` before touching memory
/// that the previous kernel writes or reads.
pub unsafe fn launch_with_args(
    stream: &CudaStream,
    f: &CudaFunction,
    cfg: LaunchConfig,
    args: &mut [*mut std::ffi::c_void],
    overlapped: bool,
) -> Result<(), DriverError> {
    stream.context().bind_to_thread()?;
    // SAFETY: a zeroed attribute is valid; the id and value set here are the ones the
    // driver reads for this attribute (and only when `numAttrs` counts it).
    let mut attr: sys::CUlaunchAttribute = unsafe { std::mem::zeroed() };
    attr.id = sys::CUlaunchAttributeID::CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION;
    attr.value.programmaticStreamSerializationAllowed = 1;
    let config = sys::CUlaunchConfig {
        gridDimX: cfg.grid_dim.0,
        gridDimY: cfg.grid_dim.1,
        gridDimZ: cfg.grid_dim.2,
        blockDimX: cfg.block_dim.0,
        blockDimY: cfg.block_dim.1,
        blockDimZ: cfg.block_dim.2,
        sharedMemBytes: cfg.shared_mem_bytes,
        hStream: stream.cu_stream(),
        attrs: &mut attr,
        numAttrs: overlapped as u32,
    };
    // SAFETY: `config` and `args` outlive the call; the caller vouches for `f` and `args`.
    unsafe {
        sys::cuLaunchKernelEx(
            &config,
            f.cu_function(),
            args.as_mut_ptr(),
            std::ptr::null_mut(),
        )
    }
    .result()
}

/// Threads per block of the element-wise and traversal kernels (`cuda/leaves.cu` bounds
/// `rowblocks_runs` for blocks of this size).
pub const BLOCK: u32 = 256;

/// At most this many blocks: the kernels loop over their range with a grid stride.
const MAX_BLOCKS: u64 = 132 * 64;

/// A 1-D launch for `n` work items with grid-stride loops.
pub fn config_for(n: u64) -> LaunchConfig {
    let blocks = n.div_ceil(BLOCK as u64).clamp(1, MAX_BLOCKS) as u32;
    LaunchConfig {
        grid_dim: (blocks, 1, 1),
        block_dim: (BLOCK, 1, 1),
        shared_mem_bytes: 0,
    }
}

/// Blocks that give each of the H200's 132 SMs its 2,048 threads' worth twice: an
/// automatically chunked launch keeps at least this many (or a block per 256 items, if
/// fewer), so that a small step still fills the GPU. Chunked down to a quarter, the web
/// graph's small octet steps ran at 24 % occupancy, and with a floor of half this
/// cnr-2000's octet step (348 K nodes) had most warps take two chunks and fell from 1.44x
/// to 1.53x of cuSPARSE's SpMV; at this floor it keeps a chunk per warp, as before
/// (docs/BENCHMARKS.md, session 24).
const FILL_BLOCKS: u64 = 132 * 16;

/// Chunks per warp of an automatically chunked launch (`GpuOptions::warp_chunks` 0).
const AUTO_CHUNKS: u64 = 4;

/// The launch of a fused expand step (`expand_levels`) or an octet leaf step over `items`
/// (nodes × vectors) whose warps take chunks of 32 consecutive items in a row: a warp
/// ranks the directory for its first chunk only and carries the counts on to the next
/// (`warp_chunks` in `cuda/common.cuh`). `chunks` ([`super::GpuOptions::warp_chunks`]):
/// that many per warp, or 0 for up to [`AUTO_CHUNKS`] with at least [`FILL_BLOCKS`].
pub fn chunked_config(items: u64, chunks: u32) -> LaunchConfig {
    let per_block = |chunks: u64| items.div_ceil(BLOCK as u64 * chunks);
    let blocks = match chunks {
        0 => per_block(AUTO_CHUNKS).max(per_block(1).min(FILL_BLOCKS)),
        c => per_block(c as u64),
    };
    LaunchConfig {
        grid_dim: (blocks.clamp(1, MAX_BLOCKS) as u32, 1, 1),
        block_dim: (BLOCK, 1, 1),
        shared_mem_bytes: 0,
    }
}

/// Warps per block of `rowwindows_bits` (`WINDOW_WARPS` in `cuda/windows.cu`).
const WINDOW_WARPS: u64 = 8;

/// The grid of `rowgroups_bits` over `warps` warps of row groups: a block per
/// [`GROUP_WARPS`](super::row_groups::GROUP_WARPS) of them (the first blocks' warps may
/// share a row, so the grid is never capped).
pub fn groups_config(warps: u32) -> LaunchConfig {
    let per_block = super::row_groups::GROUP_WARPS;
    LaunchConfig {
        grid_dim: (warps.div_ceil(per_block).max(1), 1, 1),
        block_dim: (32 * per_block, 1, 1),
        shared_mem_bytes: 0,
    }
}

/// The launch of `rowwindows_bits` over `windows` windows: a warp per window, at most
/// [`MAX_BLOCKS`] blocks (warps then take several with the grid stride, and load each
/// next window's entries ahead).
pub fn windows_config(windows: u64) -> LaunchConfig {
    LaunchConfig {
        grid_dim: (
            windows.div_ceil(WINDOW_WARPS).clamp(1, MAX_BLOCKS) as u32,
            1,
            1,
        ),
        block_dim: (32 * WINDOW_WARPS as u32, 1, 1),
        shared_mem_bytes: 0,
    }
}

/// Items (nodes × vectors) one thread of the `window` leaf kernel takes per chunk
/// (`WINDOW_ITEMS` in `cuda/leaves.cu`).
const WINDOW_ITEMS: u64 = 2;

/// Threads per block of the `window` leaf kernel: a chunk is `WINDOW_ITEMS × WINDOW_BLOCK`
/// = 1024 items, the size counted best for its 16 KB window (docs/BENCHMARKS.md).
const WINDOW_BLOCK: u32 = 512;

/// Block entries one thread of the `runs` kernel takes for `op` (`RUN_ENTRIES` and, for
/// 8-byte bit-packed words, `RUN_ENTRIES_WIDE` in `cuda/leaves.cu`).
fn run_entries(op: LeafOp) -> u64 {
    match op {
        LeafOp::Bits => 4,
        _ => 8,
    }
}

/// The launch of a leaf step of `op` over `nodes` block entries and `width` vectors with
/// `kernel`'s block-entry kernel: a thread per (entry, vector), or for `runs` per (run of
/// [`run_entries`] entries, vector).
pub fn block_leaf_config(kernel: LeafKernel, op: LeafOp, nodes: u64, width: u64) -> LaunchConfig {
    match kernel {
        LeafKernel::Runs => config_for(nodes.div_ceil(run_entries(op)) * width),
        _ => config_for(nodes * width),
    }
}

/// The launch of a leaf step of `items` (nodes × vectors) with `kernel`: one thread per
/// item, except `window`, whose blocks each take chunks of 1024 items (at most one block
/// per chunk; the kernel loops over chunks with the grid stride).
pub fn leaf_config(kernel: LeafKernel, items: u64) -> LaunchConfig {
    if kernel != LeafKernel::Window {
        return config_for(items);
    }
    let chunk = WINDOW_ITEMS * WINDOW_BLOCK as u64;
    LaunchConfig {
        grid_dim: (items.div_ceil(chunk).clamp(1, MAX_BLOCKS) as u32, 1, 1),
        block_dim: (WINDOW_BLOCK, 1, 1),
        shared_mem_bytes: 0,
    }
}

/// The scan's launch: one block per tile of [`super::tile_plan::SCAN_TILE_NODES`] nodes.
pub fn scan_config(tiles: u64) -> LaunchConfig {
    LaunchConfig {
        grid_dim: (tiles.max(1) as u32, 1, 1),
        block_dim: (256, 1, 1),
        shared_mem_bytes: 0,
    }
}

/// Which kernel visits the leaves (and, for the warp-rank variants, expands the levels
/// above them). All give the same results (bit-for-bit on Boolean, counting, tropical and
/// bit-packed products; f32 sums in another order, within the same error bound): they
/// differ in memory traffic. See `cuda/leaves.cu` and docs/BENCHMARKS.md, "Kernel
/// variants (session 2)".
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize,
)]
pub enum LeafKernel {
    /// The variant measured fastest for each product (bench-spmv on the H200, cnr-2000 and
    /// a 200M-edge web graph), per operation, direction, width and frontier layout: see
    /// [`LeafKernel::resolve`].
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
    /// per non-empty output entry of a run. With [`super::FrontierLayout::RowBlocks`] a
    /// right product's runs are block rows; one that continues into the next lanes is
    /// combined with theirs by shuffles, then updated once per warp without reading `y`
    /// first ([`super::FrontierLayout::ColBlocks`]: the same for a left product's block
    /// columns). Over codes it is `Rows`.
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

    /// Short name (`cells`, `rows`, `wrank`, `wagg`, `window`, `runs`), as in benchmark
    /// rows and on the CLI.
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
    /// [`LeafKernel::Tuned`] the measured winner (bench-spmv on the H200, cnr-2000 and a
    /// 200M-edge web graph; docs/BENCHMARKS.md, "Block entries in the cached frontier"):
    ///
    /// - bit-packed batches: right over row-sorted block entries `runs` (a lane sums its
    ///   four entries' block rows in registers, lanes continuing one block row merge their
    ///   words before one blind atomic: −42 % against session 12's `wagg` on the 200M web
    ///   graph, session 13), over Morton-ordered ones `wagg`, otherwise `rows`;
    /// - over codes: `rows` right, `wagg` left (column updates collide within a warp);
    /// - over block entries, right: `runs` (a thread sums a block row's run of entries in
    ///   registers; over Morton-ordered blocks a single vector gains more from `wagg`);
    /// - over block entries, left: `wagg` for single vectors, `rows` for batches;
    /// - over column-sorted block entries, the mirror of row-sorted ones: `runs` left
    ///   (bit-packed left batch on the 200M web graph 0.64 ms against 1.12 over row-sorted
    ///   entries; cnr-2000 left B=1 0.17x of cuSPARSE's; session 14), and right as left
    ///   products over the other layouts;
    /// - over both sorted copies ([`super::FrontierLayout::Both`]), what the copy the
    ///   product reads gets.
    pub fn resolve(
        self,
        op: LeafOp,
        dir: crate::engine::Direction,
        width: u64,
        layout: super::FrontierLayout,
    ) -> LeafKernel {
        use super::FrontierLayout::{Blocks, Both, Codes, ColBlocks, RowBlocks};
        use crate::engine::Direction::{Left, Right};
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

    /// The leaf kernel of this variant for `op`.
    pub fn leaves(self, op: LeafOp) -> &'static str {
        let i = op as usize;
        match self {
            // Without a direction, `Tuned` is `Rows` (callers resolve it first); `Runs`
            // exists over block entries only.
            LeafKernel::Rows | LeafKernel::Tuned | LeafKernel::Runs => LEAF_VARIANT_KERNELS[i],
            LeafKernel::Cells => [
                "leaves_plus_times",
                "leaves_counting",
                "leaves_boolean",
                "leaves_tropical",
                "leaves_bits",
            ][i],
            LeafKernel::RowsWarpRank => LEAF_VARIANT_KERNELS[5 + i],
            LeafKernel::WarpAgg => LEAF_VARIANT_KERNELS[10 + i],
            LeafKernel::Window => LEAF_VARIANT_KERNELS[15 + i],
        }
    }

    /// The leaf kernel of this variant for `op` over block entries of the cached frontier
    /// in `layout` (one of the packed layouts): `rows` (also for `wrank`, which has no
    /// rank to share there), `wagg` or `runs`. Over [`super::FrontierLayout::RowBlocks`]
    /// a right product's `wagg` combines adjacent lanes of a block row instead of
    /// matching keys, and its `runs` also joins the runs that continue across lanes
    /// (over [`super::FrontierLayout::ColBlocks`], a left product's `runs` does).
    /// `cells` and `window` never run over block entries
    /// ([`super::FrontierLayout::for_tree`]); they name `rows` here. `layout` is the one a
    /// product reads ([`super::FrontierLayout::for_dir`]), never `Both`.
    pub fn block_leaves(self, op: LeafOp, layout: super::FrontierLayout) -> &'static str {
        let i = op as usize;
        match self {
            LeafKernel::WarpAgg if layout == super::FrontierLayout::RowBlocks => {
                LEAF_VARIANT_KERNELS[BLOCK_KERNELS + 15 + i]
            }
            LeafKernel::WarpAgg => LEAF_VARIANT_KERNELS[BLOCK_KERNELS + 5 + i],
            LeafKernel::Runs if layout == super::FrontierLayout::RowBlocks => {
                LEAF_VARIANT_KERNELS[BLOCK_KERNELS + 20 + i]
            }
            LeafKernel::Runs if layout == super::FrontierLayout::ColBlocks => {
                LEAF_VARIANT_KERNELS[BLOCK_KERNELS + 25 + i]
            }
            LeafKernel::Runs => LEAF_VARIANT_KERNELS[BLOCK_KERNELS + 10 + i],
            _ => LEAF_VARIANT_KERNELS[BLOCK_KERNELS + i],
        }
    }

    /// Whether the variant visits a node's leaves as a 4x4 block (all but the paper's
    /// `cells` and the `window` kernel, kept over codes as measured baselines): such
    /// variants can read block entries.
    pub fn reads_blocks(self) -> bool {
        !matches!(self, LeafKernel::Cells | LeafKernel::Window)
    }

    /// Whether tree-only descents with this variant may end in octet leaf steps
    /// ([`super::GpuOptions::octets`]): those of `rows` and of the variants that are `rows`
    /// over codes (`tuned`, `runs`). The others are measured baselines of their own leaf
    /// kernels.
    pub fn ends_in_octets(self) -> bool {
        matches!(
            self,
            LeafKernel::Rows | LeafKernel::Tuned | LeafKernel::Runs
        )
    }

    /// The expand kernel of this variant.
    pub fn expand(self) -> &'static str {
        match self {
            LeafKernel::Cells
            | LeafKernel::Rows
            | LeafKernel::Tuned
            | LeafKernel::Window
            | LeafKernel::Runs => "expand",
            LeafKernel::RowsWarpRank | LeafKernel::WarpAgg => "expand_wrank",
        }
    }
}

/// What the leaf kernel applies: a semiring's entries or bit-packed Boolean words.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LeafOp {
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

impl From<crate::engine::SemiringKind> for LeafOp {
    fn from(k: crate::engine::SemiringKind) -> Self {
        use crate::engine::SemiringKind as K;
        match k {
            K::PlusTimes => LeafOp::PlusTimes,
            K::Counting => LeafOp::Counting,
            K::Boolean => LeafOp::Boolean,
            K::Tropical => LeafOp::Tropical,
        }
    }
}

/// Where the block-entry kernels start in [`LEAF_VARIANT_KERNELS`].
const BLOCK_KERNELS: usize = 21;

/// The kernels of `cuda/leaves.cu`, in the order [`LeafKernel::leaves`] and
/// [`LeafKernel::block_leaves`] index them: rows, wrank, agg, window × (plus-times,
/// counting, boolean, tropical, bits), `expand_wrank`, then rows, agg and runs over block
/// entries, then agg and runs over row-sorted block entries, then runs over column-sorted
/// ones, then the subtree descent, the octet leaf step, the aggregating octet leaf step and
/// the lone cells, each × the same five operations.
pub const LEAF_VARIANT_KERNELS: &[&str] = &[
    "leaves_rows_plus_times",
    "leaves_rows_counting",
    "leaves_rows_boolean",
    "leaves_rows_tropical",
    "leaves_rows_bits",
    "leaves_wrank_plus_times",
    "leaves_wrank_counting",
    "leaves_wrank_boolean",
    "leaves_wrank_tropical",
    "leaves_wrank_bits",
    "leaves_agg_plus_times",
    "leaves_agg_counting",
    "leaves_agg_boolean",
    "leaves_agg_tropical",
    "leaves_agg_bits",
    "leaves_window_plus_times",
    "leaves_window_counting",
    "leaves_window_boolean",
    "leaves_window_tropical",
    "leaves_window_bits",
    "expand_wrank",
    "blocks_rows_plus_times",
    "blocks_rows_counting",
    "blocks_rows_boolean",
    "blocks_rows_tropical",
    "blocks_rows_bits",
    "blocks_agg_plus_times",
    "blocks_agg_counting",
    "blocks_agg_boolean",
    "blocks_agg_tropical",
    "blocks_agg_bits",
    "blocks_runs_plus_times",
    "blocks_runs_counting",
    "blocks_runs_boolean",
    "blocks_runs_tropical",
    "blocks_runs_bits",
    "rowblocks_agg_plus_times",
    "rowblocks_agg_counting",
    "rowblocks_agg_boolean",
    "rowblocks_agg_tropical",
    "rowblocks_agg_bits",
    "rowblocks_runs_plus_times",
    "rowblocks_runs_counting",
    "rowblocks_runs_boolean",
    "rowblocks_runs_tropical",
    "rowblocks_runs_bits",
    "colblocks_runs_plus_times",
    "colblocks_runs_counting",
    "colblocks_runs_boolean",
    "colblocks_runs_tropical",
    "colblocks_runs_bits",
    "subtrees_plus_times",
    "subtrees_counting",
    "subtrees_boolean",
    "subtrees_tropical",
    "subtrees_bits",
    "leaves_octets_plus_times",
    "leaves_octets_counting",
    "leaves_octets_boolean",
    "leaves_octets_tropical",
    "leaves_octets_bits",
    "leaves_octets_agg_plus_times",
    "leaves_octets_agg_counting",
    "leaves_octets_agg_boolean",
    "leaves_octets_agg_tropical",
    "leaves_octets_agg_bits",
    "lone_cells_plus_times",
    "lone_cells_counting",
    "lone_cells_boolean",
    "lone_cells_tropical",
    "lone_cells_bits",
];

/// The kernel of an octet leaf step for `op` (a [`super::StepKind::Leaves`] step of two
/// levels) under the resolved leaf variant `kernel`: with warp aggregation where the
/// variant aggregates (`wagg`, the tuned choice for left products over codes), else the
/// plain one.
pub fn octet_kernel(kernel: LeafKernel, op: LeafOp) -> &'static str {
    let agg = if kernel == LeafKernel::WarpAgg { 5 } else { 0 };
    LEAF_VARIANT_KERNELS[BLOCK_KERNELS + 35 + agg + op as usize]
}

/// The kernel that applies a tree-only matrix's lone cells for `op`
/// ([`super::lone_cells`]; one kernel whatever the leaf variant).
pub fn lone_kernel(op: LeafOp) -> &'static str {
    LEAF_VARIANT_KERNELS[BLOCK_KERNELS + 45 + op as usize]
}

/// The subtree descent's kernel for `op` (a [`super::StepKind::Subtrees`] step; one
/// kernel whatever the leaf variant).
pub fn subtree_kernel(op: LeafOp) -> &'static str {
    LEAF_VARIANT_KERNELS[BLOCK_KERNELS + 30 + op as usize]
}

/// The launch of a subtree step over `nodes` nodes: a block of `SUBTREE_THREADS` (256)
/// per [`super::tile_plan::SUBTREE_ROOTS`] nodes, its level buffers in static shared
/// memory.
pub fn subtree_config(nodes: u64) -> LaunchConfig {
    LaunchConfig {
        grid_dim: (nodes.div_ceil(SUBTREE_ROOTS).max(1) as u32, 1, 1),
        block_dim: (256, 1, 1),
        shared_mem_bytes: 0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const OPS: [(LeafOp, &str); 5] = [
        (LeafOp::PlusTimes, "plus_times"),
        (LeafOp::Counting, "counting"),
        (LeafOp::Boolean, "boolean"),
        (LeafOp::Tropical, "tropical"),
        (LeafOp::Bits, "bits"),
    ];

    /// Automatic chunks keep steps that would not fill the GPU at a chunk per warp (cnr-2000's
    /// one octet step of 347,967 nodes keeps the grid of a lane per node), chunk the large
    /// ones down to the floor, and never go past 4 chunks per warp; explicit counts are
    /// exact.
    #[test]
    fn chunked_launches_keep_small_steps_whole() {
        let blocks = |items, chunks| chunked_config(items, chunks).grid_dim.0 as u64;
        let lane_per_item = |items: u64| config_for(items).grid_dim.0 as u64;
        for items in [1, 31, 1000, 347_967, FILL_BLOCKS * BLOCK as u64] {
            assert_eq!(blocks(items, 0), lane_per_item(items), "{items}");
            assert_eq!(blocks(items, 1), lane_per_item(items), "{items}");
        }
        assert_eq!(blocks(2 * FILL_BLOCKS * BLOCK as u64, 0), FILL_BLOCKS);
        assert_eq!(blocks(1 << 21, 0), FILL_BLOCKS);
        assert_eq!(blocks(1 << 23, 0), (1 << 23) / (AUTO_CHUNKS * BLOCK as u64));
        assert_eq!(blocks(3000, 3), 4);
        assert_eq!(blocks(1 << 20, 64), 64);
    }

    /// Each variant launches its own family's kernel for the right operation (the table
    /// is indexed by position, so a reordering would silently swap semirings).
    #[test]
    fn every_variant_names_its_kernel_for_each_operation() {
        for k in LeafKernel::ALL {
            assert_eq!(LeafKernel::from_name(k.name()), Some(k));
            let family = match k {
                LeafKernel::Cells => "leaves_",
                LeafKernel::Rows | LeafKernel::Tuned | LeafKernel::Runs => "leaves_rows_",
                LeafKernel::RowsWarpRank => "leaves_wrank_",
                LeafKernel::WarpAgg => "leaves_agg_",
                LeafKernel::Window => "leaves_window_",
            };
            for (op, suffix) in OPS {
                assert_eq!(k.leaves(op), format!("{family}{suffix}"), "{k:?} {op:?}");
            }
        }
        assert_eq!(LeafKernel::from_name("nope"), None);
        assert_eq!(LeafKernel::default(), LeafKernel::Tuned);
        assert_eq!(LeafKernel::from_name("tuned"), Some(LeafKernel::Tuned));
        use crate::engine::gpu::FrontierLayout::{self, Blocks, Both, Codes, ColBlocks, RowBlocks};
        use crate::engine::Direction::{Left, Right};
        for op in OPS.map(|(op, _)| op) {
            for dir in [Left, Right] {
                for width in [1, 16] {
                    for layout in FrontierLayout::ALL {
                        let k = LeafKernel::Tuned.resolve(op, dir, width, layout);
                        assert!(LeafKernel::ALL.contains(&k), "{op:?} {dir:?} -> {k:?}");
                        // `runs` exists over block entries only.
                        assert!(layout.packed() || k != LeafKernel::Runs);
                        let rows = LeafKernel::Rows.resolve(op, dir, width, layout);
                        assert_eq!(rows, LeafKernel::Rows);
                    }
                }
            }
        }
        use LeafKernel::{Rows, Runs, WarpAgg};
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
        assert!(LEAF_VARIANT_KERNELS.contains(&LeafKernel::WarpAgg.expand()));
        assert_eq!(LeafKernel::from_name("window"), Some(LeafKernel::Window));
        assert_eq!(LEAF_VARIANT_KERNELS[BLOCK_KERNELS - 1], "expand_wrank");
        for (op, suffix) in OPS {
            for k in LeafKernel::ALL {
                for layout in [Blocks, RowBlocks, ColBlocks] {
                    let family = match (k, layout) {
                        (LeafKernel::WarpAgg, RowBlocks) => "rowblocks_agg_",
                        (LeafKernel::WarpAgg, _) => "blocks_agg_",
                        (LeafKernel::Runs, RowBlocks) => "rowblocks_runs_",
                        (LeafKernel::Runs, ColBlocks) => "colblocks_runs_",
                        (LeafKernel::Runs, _) => "blocks_runs_",
                        _ => "blocks_rows_",
                    };
                    assert_eq!(
                        k.block_leaves(op, layout),
                        format!("{family}{suffix}"),
                        "{k:?} {op:?} {layout:?}"
                    );
                }
            }
        }
        for (op, suffix) in OPS {
            assert_eq!(subtree_kernel(op), format!("subtrees_{suffix}"));
            assert_eq!(lone_kernel(op), format!("lone_cells_{suffix}"));
            for k in LeafKernel::ALL {
                let agg = if k == LeafKernel::WarpAgg { "agg_" } else { "" };
                assert_eq!(octet_kernel(k, op), format!("leaves_octets_{agg}{suffix}"));
            }
        }
        assert_eq!(LEAF_VARIANT_KERNELS.len(), BLOCK_KERNELS + 50);
    }

    /// The subtree kernel's constants are the host's: roots per block (the grid), threads
    /// per block, and the levels its buffers hold (the plans' bound).
    #[test]
    fn subtree_launch_matches_the_kernel() {
        let src = include_str!("../../../cuda/leaves.cu");
        let define = |name: &str| -> u64 {
            let line = src
                .lines()
                .find(|l| l.starts_with(&format!("#define {name} ")))
                .unwrap_or_else(|| panic!("{name} not defined"));
            line.split_whitespace().nth(2).unwrap().parse().unwrap()
        };
        assert_eq!(define("SUBTREE_ROOTS"), SUBTREE_ROOTS);
        assert_eq!(define("SUBTREE_THREADS"), 256);
        assert_eq!(
            define("SUBTREE_LEVELS"),
            super::super::tile_plan::MAX_SUBTREE_LEVELS as u64
        );
        for nodes in [0u64, 1, 64, 65, 1 << 30] {
            let c = subtree_config(nodes);
            assert_eq!(c.block_dim.0, 256);
            assert_eq!(c.grid_dim.0 as u64, nodes.div_ceil(SUBTREE_ROOTS).max(1));
        }
    }

    /// A `window` block takes 1024 items: enough blocks for every chunk (up to the cap),
    /// never zero; the other variants keep one thread per item.
    #[test]
    fn window_launch_covers_every_chunk() {
        for items in [0u64, 1, 1023, 1024, 1025, 5 << 20, 1 << 40] {
            let c = leaf_config(LeafKernel::Window, items);
            let blocks = c.grid_dim.0 as u64;
            let chunk = WINDOW_ITEMS * c.block_dim.0 as u64;
            assert_eq!(chunk, 1024);
            assert!((1..=MAX_BLOCKS).contains(&blocks));
            assert!(blocks * chunk >= items || blocks == MAX_BLOCKS, "{items}");
            assert_eq!(c.block_dim.0 % 32, 0);
            let r = leaf_config(LeafKernel::Rows, items);
            assert_eq!(r.block_dim.0, BLOCK);
        }
    }
}
