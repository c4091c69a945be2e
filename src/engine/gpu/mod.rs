//! The GPU engine: the paper's level-synchronous k²-tree SpMV (Algorithm 1) in CUDA C++
//! kernels (`cuda/`: kernel files by job over shared headers, and the policy table
//! `cuda/kernels.def` that names the kernel of each step), compiled at run time by NVRTC
//! for the device's architecture.
//!
//! A product follows a [`TilePlan`] made once per matrix: from the level expanded on the
//! host ([`Tuning::top_nodes`]), one `expand` kernel per tile and level writes the next
//! frontier's Morton codes into a per-level scratch buffer of at most `M` codes, and the
//! last internal level visits its leaves in place, one thread per (node, vector) pair,
//! applying the semiring's atomic. Child offsets come from the sampled directory or from a
//! single-pass scan of the fan-outs ([`OffsetSource`]). With the cached frontier (`k2+F`) a
//! dense product is one kernel over the leaves per tile. Masked Boolean products look up,
//! per node, a per-product pyramid of active input blocks (one bit per block of 2^g input
//! rows, every g): tree-only, the descent writes a `PRUNED` code for each child whose input
//! range meets no active row, so pruned subtrees issue no leaf reads or atomics; with the
//! cached frontier each last-internal-level node checks its own block. Threads are still
//! launched for every planned node (the plan is static, so there is no compaction): the
//! saving is in leaf work, not in launches.
//!
//! Without libcuda, libnvrtc or a device, [`GpuEngine::new`] returns
//! [`EngineError::Unavailable`]; it never panics. [`GpuEngine::new_or_notice`] prints the
//! one-line notice callers show before falling back to the CPU engine.
//!
//! [`GpuOptions`] holds what a user chooses (the layout of resident relations' cached
//! frontiers); everything else is [`Tuning`], measured defaults that only benchmarks and
//! tests change.

mod context;
mod device_tree;
mod devices;
mod frontier;
mod hold;
mod kernel_cache;
mod launch;
mod lone_cells;
mod policy;
mod product_graph;
mod row_groups;
mod tile_plan;

use std::sync::{Arc, Mutex};

use cudarc::driver::{
    CudaFunction, CudaGraph, CudaSlice, CudaStream, DevicePtr, DeviceRepr, PushKernelArg,
    ValidAsZeroBits,
};

pub use context::{compile_kernels, nvrtc_present, CompiledFile};
use context::{cuda_err, driver_present, GpuContext};
use device_tree::{ClearedRows, DeviceGroups, DeviceWindows};
pub use device_tree::{DeviceTree, TopLevel};
pub use devices::{check_driver, device_count, open_or_notice_with, DevicesError, GpuSelection};
use frontier::row_windows_size;
pub use frontier::FrontierLayout;
pub use hold::{hold_stream, set_timing_hold_ns, timing_hold_ns};
use launch::{
    block_leaf_config, chunked_config, config_for, launch_step, launch_with_args, leaf_config,
    scan_config, subtree_config, StepParams,
};
use lone_cells::{lone_count, LoneCount};
pub use policy::LeafKernel;
use policy::{KernelStep, LeafOp};
pub use product_graph::{BitsGraph, ProductGraph};
use row_groups::{row_groups_bytes, GROUP_ITERATIONS, MAX_GROUP_ITERATIONS};
pub use tile_plan::{CodeSource, Step, StepKind, TilePlan, TileSizes};
use tile_plan::{MAX_FUSED_LEVELS, MAX_SUBTREE_LEVELS, SCAN_TILE_NODES};

use super::{
    check_bits_shape, check_product_shape, BitMatrix, Direction, Element, Engine, EngineError,
    MatrixConfig, Result, Semiring, Traversal,
};
use crate::k2tree::K2Tree;

/// Where the child offsets of a level come from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
pub enum OffsetSource {
    /// The sampled directory: one rank sample every 256 nodes plus popcounts; no scan.
    /// Fastest for single vectors.
    Directory,
    /// A per-step exclusive scan of the fan-outs: paid once per batch, so it wins for
    /// batches.
    Scan,
}

/// What a user of the GPU engine chooses. Everything else is [`Tuning`], whose defaults
/// are the measured best and which users never need to change.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct GpuOptions {
    /// What the cached frontier of a resident relation holds (`CachedFrontier`
    /// matrices). Default [`FrontierLayout::RowBlocks`] (the fastest right products with
    /// the tuned kernels; [`FrontierLayout::ColBlocks`] serves left products best,
    /// [`FrontierLayout::Both`] both directions for twice the frontier's bytes). A matrix
    /// keeps codes anyway when its tree is too tall for block entries (more than 26
    /// levels) or its leaf variant reads the tree's leaves itself (`cells`, `window`).
    pub frontier: FrontierLayout,
    /// The engine's tuning (kernel variants, tiles, launches, extra layouts).
    pub tuning: Tuning,
}

/// The GPU engine's tuning: how products are planned and launched, and which extra
/// layouts resident matrices keep. The defaults are the measured best (on an H200, over
/// cnr-2000 and web graphs of up to 200M edges) and users never need to change them; benchmarks and tests vary them to measure the alternatives, and the command
/// line exposes the few that trade memory for time (`--top-nodes`, `--row-groups`,
/// `--lone-paths`, `--no-row-windows`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Tuning {
    /// Tile size `M`: at most this many nodes (and children) per launch; the scratch is
    /// `O(M × depth)`. `None` (default): chosen per plan when a matrix is loaded (one
    /// launch over a cached frontier; descents and scanned frontier products with the
    /// largest tile whose scratch stays within the matrix's resident bytes or 16 MiB,
    /// whichever is more). `Some(m)`: `m` for every plan (e.g. `Some(1 << 15)` for a
    /// tree-only working set of 0.19x cuSPARSE's on cnr-2000, at 5.7x the time).
    pub tile_nodes: Option<u64>,
    /// Tree-only products start from a level the host expands at load: the deepest one with
    /// at most this many nodes whose codes take no more bytes than the tree itself (or any
    /// level of at most 2^16 nodes; [`DeviceTree::top_level`]). Default 2^20: on cnr-2000
    /// level 16 (348 K nodes, 1.39 MB of 32-bit codes beside its 1.46 MB tree), the level
    /// of its octet leaf steps, so a tree-only product is one launch with no scratch:
    /// 1.43-1.47x cuSPARSE's time for the right product against 1.56-1.59x from level 15
    /// (2^18), and a working set of 5.5 MB against 7.7.
    pub top_nodes: u64,
    /// Force an offset source; `None`: the scan for semiring batches of width > 1, the
    /// directory for single vectors and every bit-packed batch (measured fastest).
    pub offset_source: Option<OffsetSource>,
    /// Which leaf (and expand) kernels products use. Default [`LeafKernel::Tuned`].
    pub leaf_kernel: LeafKernel,
    /// Launch each traversal step so that it may start before the previous kernel ends
    /// (programmatic dependent launch, on devices of compute capability 9.0 and later;
    /// ignored before): the step's launch and its first reads of the resident tree overlap
    /// the previous step's tail. Default `true`.
    pub overlapped_launches: bool,
    /// At most this many levels per expand launch of a tree-only descent (1 to
    /// [`Tuning::MAX_FUSED_LEVELS`]): a thread per node writes its descendants that many
    /// levels down, through levels that are small or thin (the next level holds at most a
    /// few times the step's nodes), so the levels in between need no scratch and no
    /// launches; the warp ranks once per level. Default [`Tuning::MAX_FUSED_LEVELS`] (3):
    /// a 200M-edge web graph's descent takes 40 launches instead of 410 and writes half
    /// the codes. 1: a launch per level.
    pub fused_levels: u32,
    /// Levels at the bottom of a tree-only descent left to subtree launches (2 to
    /// [`Tuning::MAX_SUBTREE_LEVELS`]; 0 or 1: none): level-by-level expand steps stop
    /// that many internal levels above the leaves, and one launch per tile of that level
    /// descends the rest, each block keeping its subtrees' codes in shared memory (no
    /// scratch and no launches for the levels below). Default 0: on the H200 it gives the
    /// smallest tree-only working set (cnr-2000: 4.4 MB against 15.5 MB) but made the
    /// product 1.7-1.9x slower there.
    pub subtree_levels: u32,
    /// Lay a `RowBlocks` frontier out in row windows when its markers and pads stay
    /// within 10 % of its entries: bit-packed right products of one word per row that
    /// overwrite `y` ([`BitsUpdate::Overwrite`], [`Engine::bool_product_overwrite`]) then
    /// store each output word once, with no clear, atomics or reads of `y`; every other
    /// product reads the windows as row-sorted entries. Default `true`.
    pub row_windows: bool,
    /// Also keep a `RowBlocks` frontier's entries in row groups (a second copy of the
    /// entries, 6 bytes per entry and its pads: cnr-2000 4.5 MB), which bit-packed right
    /// products of one word per row that overwrite `y` then read instead of the row
    /// windows: on cnr-2000 0.70x their time, on graphs whose `x` does not stay in L2
    /// 1.0-1.3x. Default `false`.
    pub row_groups: bool,
    /// The most iterations a warp of the row groups runs (1 to
    /// [`Tuning::MAX_GROUP_ITERATIONS`]; others are clamped): a block row of up to 32
    /// times as many entries takes one warp, a longer one a block of warps or pieces. A
    /// larger cap makes fewer warps (cnr-2000: 4,544 at 8, 3,846 at 10, 3,400 at 12) with
    /// longer chains of loads. Default 8.
    pub row_group_iterations: u32,
    /// End tree-only descents one level above the leaves' parents with leaf steps in
    /// which a thread owns a node's 8x8 block of cells (octet leaf steps): the widest
    /// internal level then needs neither a launch nor scratch, and children side by side
    /// share their rows' updates. For the `rows` family of leaf kernels (`rows`, and
    /// `tuned` and `runs`, which are `rows` over codes); ignored with subtree levels.
    /// Default `true`.
    pub octets: bool,
    /// Chunks of 32 consecutive nodes a warp of a fused expand step or of an octet leaf
    /// step takes in a row: it ranks the directory for the first only and carries the
    /// counts on from chunk to chunk, so the launch has a lane per that many nodes. 0
    /// (the default): up to 4, as long as the launch keeps two SMs' worth of threads per
    /// SM (steps of fewer than 540 K nodes keep a chunk per warp); n ≥ 1: n. A web
    /// graph's fused expand then issues 433 instructions per warp of nodes instead of
    /// 772, and its tree-only products run ~22 % faster.
    pub warp_chunks: u32,
    /// Tree-only matrices keep each cell that hangs alone below a unary path of at least
    /// this many nodes in a list beside the tree they descend, applied by one flat launch
    /// after the descent: its path's nodes leave every expand and octet step. 16 bytes per
    /// listed cell (a copy sorted by output per direction) against about half a byte per
    /// node removed. On a synthetic 200M-edge web graph, 4 lists 10 % of the cells and
    /// removes 46 % of the nodes: tree-only right products take 0.81 ms instead of 1.81
    /// (1.48x cuSPARSE's time instead of 3.30x) for 344 MB resident instead of 164. 0 (the
    /// default): none, the frugal end, as tree-only is what the device cache falls back
    /// to.
    pub lone_paths: u32,
}

impl Tuning {
    /// The most levels one expand launch descends ([`Tuning::fused_levels`]).
    pub const MAX_FUSED_LEVELS: u32 = MAX_FUSED_LEVELS;
    /// The most levels one subtree launch descends ([`Tuning::subtree_levels`]).
    pub const MAX_SUBTREE_LEVELS: u32 = MAX_SUBTREE_LEVELS;
    /// The largest cap on a row group warp's iterations ([`Tuning::row_group_iterations`]).
    pub const MAX_GROUP_ITERATIONS: u32 = MAX_GROUP_ITERATIONS;
}

impl Default for Tuning {
    fn default() -> Self {
        Tuning {
            tile_nodes: None,
            top_nodes: 1 << 20,
            offset_source: None,
            leaf_kernel: LeafKernel::Tuned,
            overlapped_launches: true,
            fused_levels: MAX_FUSED_LEVELS,
            subtree_levels: 0,
            row_windows: true,
            row_groups: false,
            row_group_iterations: GROUP_ITERATIONS,
            octets: true,
            warp_chunks: 0,
            lone_paths: 0,
        }
    }
}

/// How a recorded bit-packed product ([`GpuEngine::record_bool_product`]) treats its
/// output batch on each replay.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BitsUpdate {
    /// `y |= A x`: the product ORs into what `y` holds.
    Or,
    /// `y = A x`: `y` is cleared first.
    Overwrite,
}

/// A layout a bit-packed product stores each word of `y` through once
/// ([`GpuEngine::row_store`]).
#[derive(Clone, Copy)]
enum RowStore<'m> {
    /// The row groups (`Tuning::row_groups`).
    Groups(&'m DeviceGroups),
    /// The row windows (`Tuning::row_windows`).
    Windows(&'m DeviceWindows),
}

/// What [`available`] found.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DeviceInfo {
    /// Device ordinal.
    pub ordinal: usize,
    /// Device name (e.g. `NVIDIA H200`).
    pub name: String,
    /// Compute capability `(major, minor)`.
    pub compute_capability: (i32, i32),
    /// Device memory in bytes.
    pub total_memory: u64,
}

/// Whether device `ordinal` is usable: libcuda and libnvrtc load and the device exists.
/// The error says what is missing. Never panics.
pub fn available(ordinal: usize) -> std::result::Result<DeviceInfo, String> {
    open_device(ordinal).map(|(_, info)| info)
}

/// The primary context of device `ordinal` and what it is, after the checks of
/// [`available`]. The engine keeps this context: dropping a probe's and retaining it again
/// destroys and rebuilds the primary context, about 90 ms on an H200.
fn open_device(
    ordinal: usize,
) -> std::result::Result<(Arc<cudarc::driver::CudaContext>, DeviceInfo), String> {
    if !driver_present() {
        return Err("libcuda not found (no NVIDIA driver)".into());
    }
    if !nvrtc_present() {
        return Err("libnvrtc not found (install the CUDA runtime compiler)".into());
    }
    let probe = std::panic::catch_unwind(|| {
        // The first driver call initialises the driver (cuInit).
        let started = std::time::Instant::now();
        let n = cudarc::driver::CudaContext::device_count().map_err(|e| format!("{e:?}"))?;
        if ordinal as i64 >= n as i64 {
            return Err(format!("no CUDA device {ordinal} ({n} found)"));
        }
        let ctx = cudarc::driver::CudaContext::new(ordinal).map_err(|e| format!("{e:?}"))?;
        log::debug!(
            "device {ordinal}: driver and context in {:.1} ms",
            started.elapsed().as_secs_f64() * 1e3
        );
        let info = DeviceInfo {
            ordinal,
            name: ctx.name().map_err(|e| format!("{e:?}"))?,
            compute_capability: ctx.compute_capability().map_err(|e| format!("{e:?}"))?,
            total_memory: ctx.total_mem().map_err(|e| format!("{e:?}"))? as u64,
        };
        Ok((ctx, info))
    });
    probe.unwrap_or_else(|_| Err("the CUDA driver panicked while probing".into()))
}

/// Device bytes of one product, known before it runs.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct ProductBytes {
    /// The resident matrix (signatures, directory, top codes, cached frontier).
    pub matrix: u64,
    /// Transient scratch: per-level code buffers, scan offsets and look-back status,
    /// masked-traversal pyramid.
    pub scratch: u64,
    /// Input and output vectors (or bit batches).
    pub vectors: u64,
}

impl ProductBytes {
    /// All of it.
    pub fn total(&self) -> u64 {
        self.matrix + self.scratch + self.vectors
    }
}

/// The kernels of one product's steps (for its resolved leaf variant and operation), each
/// looked up in the policy table once.
struct StepKernels<'g> {
    gpu: &'g GpuContext,
    variant: LeafKernel,
    op: LeafOp,
    found: Vec<((KernelStep, FrontierLayout), &'g CudaFunction)>,
}

impl<'g> StepKernels<'g> {
    /// The kernel of `step` over `frontier`.
    fn get(&mut self, step: KernelStep, frontier: FrontierLayout) -> Result<&'g CudaFunction> {
        let key = (step, frontier);
        if let Some(&(_, f)) = self.found.iter().find(|(k, _)| *k == key) {
            return Ok(f);
        }
        let f = self
            .gpu
            .function(policy::kernel(step, self.variant, frontier, self.op)?)?;
        self.found.push((key, f));
        Ok(f)
    }
}

/// A bit-packed product's plan, its offset source and whether it is masked.
type BitsPlan<'a> = (&'a TilePlan, OffsetSource, bool);

/// Sizes of the scratch buffers of one product (elements, 0 = not allocated).
#[derive(Clone, Debug, PartialEq, Eq)]
struct ScratchLayout {
    /// Codes per level (index = level).
    codes: Vec<u64>,
    /// Scan offsets (u32).
    offsets: u64,
    /// Look-back status words plus the tile counter (u64).
    status: u64,
    /// Pyramid words (u32).
    pyramid: u64,
}

impl ScratchLayout {
    fn new(plan: &TilePlan, source: OffsetSource, masked: bool, height: u32) -> Self {
        let scan = source == OffsetSource::Scan && !plan.steps.is_empty();
        ScratchLayout {
            codes: plan.scratch_codes.clone(),
            offsets: if scan { plan.max_scanned_nodes() } else { 0 },
            status: if scan { plan.scan_tiles() + 1 } else { 0 },
            pyramid: if masked {
                pyramid_layout(height).iter().map(|&(_, w)| w).sum()
            } else {
                0
            },
        }
    }

    fn bytes(&self) -> u64 {
        8 * self.codes.iter().sum::<u64>() + 4 * self.offsets + 8 * self.status + 4 * self.pyramid
    }

    /// Whether buffers of this layout are large enough for a product needing `need`
    /// (every buffer at least as long; the kernels address them only up to the plan's
    /// positions, and overwrite what they read, so longer buffers serve as well).
    fn covers(&self, need: &ScratchLayout) -> bool {
        need.codes.len() <= self.codes.len()
            && need.codes.iter().zip(&self.codes).all(|(n, h)| n <= h)
            && need.offsets <= self.offsets
            && need.status <= self.status
            && need.pyramid <= self.pyramid
    }
}

/// `(offset, words)` of each pyramid level `g = 0..=h` (one bit per 2^g input indices).
fn pyramid_layout(h: u32) -> Vec<(u64, u64)> {
    let mut off = 0;
    (0..=h)
        .map(|g| {
            let w = (1u64 << (h - g)).div_ceil(32);
            let r = (off, w);
            off += w;
            r
        })
        .collect()
}

/// The device buffers of a [`ScratchLayout`].
pub(crate) struct Scratch {
    codes: Vec<Option<CudaSlice<u64>>>,
    offsets: Option<CudaSlice<u32>>,
    status: Option<CudaSlice<u64>>,
    pyramid: Option<CudaSlice<u32>>,
}

impl Scratch {
    fn alloc(gpu: &GpuContext, layout: &ScratchLayout) -> Result<Scratch> {
        let codes = layout
            .codes
            .iter()
            .map(|&n| {
                (n > 0)
                    .then(|| gpu.alloc_zeros::<u64>(n as usize, "frontier scratch"))
                    .transpose()
            })
            .collect::<Result<Vec<_>>>()?;
        let opt = |n: u64, what: &str| -> Result<Option<CudaSlice<u64>>> {
            (n > 0)
                .then(|| gpu.alloc_zeros::<u64>(n as usize, what))
                .transpose()
        };
        Ok(Scratch {
            codes,
            offsets: (layout.offsets > 0)
                .then(|| gpu.alloc_zeros::<u32>(layout.offsets as usize, "scan offsets"))
                .transpose()?,
            status: opt(layout.status, "scan look-back status")?,
            pyramid: (layout.pyramid > 0)
                .then(|| gpu.alloc_zeros::<u32>(layout.pyramid as usize, "active-block pyramid"))
                .transpose()?,
        })
    }
}

fn ptr<T>(s: &CudaStream, b: &Option<CudaSlice<T>>) -> u64 {
    b.as_ref().map_or(0, |b| b.device_ptr(s).0)
}

/// A vector or batch in device memory, for products that stay on the device (benchmarks,
/// graphs).
pub struct DeviceVec<T> {
    buf: CudaSlice<T>,
    len: usize,
}

impl<T> DeviceVec<T> {
    /// Elements.
    pub fn len(&self) -> usize {
        self.len
    }
    /// Whether it has no elements.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
    fn raw(&self, s: &CudaStream) -> u64 {
        self.buf.device_ptr(s).0
    }
}

/// A bit-packed Boolean batch in device memory (`rows × words` u64, row-major).
pub struct GpuBits {
    rows: usize,
    words: usize,
    buf: CudaSlice<u64>,
}

impl GpuBits {
    /// `(rows, words)`.
    pub fn shape(&self) -> (usize, usize) {
        (self.rows, self.words)
    }
    fn len(&self) -> u64 {
        (self.rows * self.words) as u64
    }
    fn raw(&self, s: &CudaStream) -> u64 {
        self.buf.device_ptr(s).0
    }
}

/// Device memory kept between the products of a run ([`Engine::begin_products`]): a
/// fixed-point loop runs tens of small products per query, and allocating and zeroing
/// their scratch each time (stream-ordered allocations are returned to the driver at
/// every synchronisation) cost more than the products themselves.
#[derive(Default)]
struct Kept {
    /// Runs open (they nest and may come from several threads).
    runs: usize,
    /// One product's scratch and the layout it was allocated for: taken by a product
    /// whose layout it covers, replaced (old one freed first) by one that it does not,
    /// so it never exceeds the largest single product's scratch.
    scratch: Option<(ScratchLayout, Scratch)>,
    /// Counters of [`Engine::bits_advance_all`] (one per pair).
    counts: Option<CudaSlice<u64>>,
}

/// The GPU engine on one device. See the [module docs](self).
pub struct GpuEngine {
    gpu: GpuContext,
    options: GpuOptions,
    info: DeviceInfo,
    /// Serialises the work enqueued by concurrent callers, so that a graph capture never
    /// sees another thread's launches.
    lock: Mutex<()>,
    /// Working memory kept while runs of products are open.
    kept: Mutex<Kept>,
}

impl GpuEngine {
    /// The engine on device `ordinal` with default options.
    pub fn new(ordinal: usize) -> Result<Self> {
        Self::with_options(ordinal, GpuOptions::default())
    }

    /// The engine on device `ordinal` with `options`. `EngineError::Unavailable` when
    /// there is no driver, NVRTC or device (never a panic).
    pub fn with_options(ordinal: usize, options: GpuOptions) -> Result<Self> {
        let (ctx, info) = open_device(ordinal).map_err(EngineError::Unavailable)?;
        let gpu = std::panic::catch_unwind(|| GpuContext::new(ctx)).unwrap_or_else(|_| {
            Err(EngineError::Unavailable(
                "the CUDA driver panicked while opening the device".into(),
            ))
        })?;
        Ok(GpuEngine {
            gpu,
            options,
            info,
            lock: Mutex::new(()),
            kept: Mutex::new(Kept::default()),
        })
    }

    /// The engine on device `ordinal`, or `None` after printing one line to stderr saying
    /// why the GPU is unusable (callers then fall back to the CPU engine).
    pub fn new_or_notice(ordinal: usize) -> Option<Self> {
        match Self::new(ordinal) {
            Ok(e) => Some(e),
            Err(e) => {
                eprintln!("k2rpq: {e}; using the CPU engine");
                None
            }
        }
    }

    /// The device.
    pub fn device(&self) -> &DeviceInfo {
        &self.info
    }

    /// The options.
    pub fn options(&self) -> &GpuOptions {
        &self.options
    }

    /// The stream all of the engine's work goes to (for callers that time it or order
    /// their own work after it).
    pub fn stream(&self) -> &Arc<CudaStream> {
        self.gpu.stream()
    }

    /// The CUDA context of the engine's device.
    pub fn cuda_context(&self) -> &Arc<cudarc::driver::CudaContext> {
        self.gpu.context()
    }

    fn source_for(&self, m: &DeviceTree, width: usize, bits: bool) -> OffsetSource {
        // Measured on the H200 (bench-spmv, cnr-2000): the directory is faster for every
        // bit-packed batch (W = 1, 2, 4: 1.3-1.9x), the scan for semiring batches of 16.
        m.offsets(
            self.options
                .tuning
                .offset_source
                .unwrap_or(if width > 1 && !bits {
                    OffsetSource::Scan
                } else {
                    OffsetSource::Directory
                }),
        )
    }

    fn guard(&self) -> std::sync::MutexGuard<'_, ()> {
        self.lock.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn kept(&self) -> std::sync::MutexGuard<'_, Kept> {
        self.kept.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Scratch for a product of `need`: the kept one when it covers `need`, else a new
    /// allocation (the kept one freed first, so the two never coexist).
    fn take_scratch(&self, need: ScratchLayout) -> Result<(ScratchLayout, Scratch)> {
        let old = self.kept().scratch.take();
        if let Some((layout, scratch)) = old {
            if layout.covers(&need) {
                return Ok((layout, scratch));
            }
        }
        let scratch = Scratch::alloc(&self.gpu, &need)?;
        Ok((need, scratch))
    }

    /// Keeps `scratch` for the next product while a run is open; otherwise (or when
    /// another thread's scratch is already kept) frees it, stream-ordered.
    fn put_back_scratch(&self, layout: ScratchLayout, scratch: Scratch) {
        let mut kept = self.kept();
        if kept.runs > 0 && kept.scratch.is_none() {
            kept.scratch = Some((layout, scratch));
        }
    }

    /// Bytes of device memory kept between products now (0 outside runs).
    pub fn kept_bytes(&self) -> u64 {
        let kept = self.kept();
        kept.scratch.as_ref().map_or(0, |(l, _)| l.bytes())
            + kept.counts.as_ref().map_or(0, |c| 8 * c.len() as u64)
    }

    /// Exact device bytes of a semiring product of `batch` vectors of `elem_bytes`-byte
    /// entries (or, with `bits = Some(words)`, a bit-packed product of `words` words per
    /// row with `traversal`), before it runs.
    pub fn product_bytes(
        &self,
        m: &DeviceTree,
        dir: Direction,
        batch: usize,
        elem_bytes: u64,
        bits: Option<(usize, Traversal)>,
    ) -> ProductBytes {
        let t = &m.tree;
        let (n_in, n_out) = dir.lengths(t.rows(), t.cols());
        let (layout, vectors) = match bits {
            None => {
                let source = self.source_for(m, batch, false);
                (
                    ScratchLayout::new(m.dense_plan(source), source, false, t.height()),
                    (n_in + n_out) * batch as u64 * elem_bytes,
                )
            }
            Some((words, traversal)) => (
                self.bits_plan(m, words, traversal).1,
                (n_in + n_out) * words as u64 * 8,
            ),
        };
        ProductBytes {
            matrix: m.bytes,
            scratch: layout.bytes(),
            vectors,
        }
    }

    /// Copies `host` to the device.
    pub fn upload<T: DeviceRepr + ValidAsZeroBits + Copy>(
        &self,
        host: &[T],
    ) -> Result<DeviceVec<T>> {
        let mut v = self.zeros(host.len())?;
        if !host.is_empty() {
            self.gpu
                .stream()
                .memcpy_htod(host, &mut v.buf.slice_mut(0..host.len()))
                .map_err(cuda_err("upload"))?;
        }
        Ok(v)
    }

    /// A zeroed device vector of `n` elements. Its allocation is padded to a multiple of
    /// four elements: leaf kernels update a single f32 vector four entries at a time
    /// (`update_quad` in `cuda/include/semirings.cuh`), and the last quad may reach past `n`.
    pub fn zeros<T: DeviceRepr + ValidAsZeroBits>(&self, n: usize) -> Result<DeviceVec<T>> {
        Ok(DeviceVec {
            buf: self.gpu.alloc_zeros(n.next_multiple_of(4), "vector")?,
            len: n,
        })
    }

    /// Copies a device vector back.
    pub fn download<T: DeviceRepr + Default + Clone>(&self, v: &DeviceVec<T>) -> Result<Vec<T>> {
        let mut out = vec![T::default(); v.len];
        if v.len > 0 {
            let s = self.gpu.stream();
            s.memcpy_dtoh(&v.buf.slice(0..v.len), &mut out[..])
                .map_err(cuda_err("download"))?;
            s.synchronize().map_err(cuda_err("synchronize"))?;
        }
        Ok(out)
    }

    /// Milliseconds per call of `f` over `reps` calls, between two CUDA events on the
    /// engine's stream (after one warm-up call). The stream is held first
    /// ([`timing_hold_ns`], plus 10 µs a call), so the events time the device's
    /// work rather than the host's submission of it.
    pub fn time_ms(&self, reps: usize, mut f: impl FnMut() -> Result<()>) -> Result<f32> {
        use cudarc::driver::sys::CUevent_flags::CU_EVENT_DEFAULT;
        let ctx = self.gpu.context();
        let s = self.gpu.stream();
        f()?;
        let ns = timing_hold_ns();
        if ns > 0 {
            hold_stream(s, (ns + reps as u64 * 10_000).min(50_000_000))?;
        }
        let e0 = ctx
            .new_event(Some(CU_EVENT_DEFAULT))
            .map_err(cuda_err("event"))?;
        let e1 = ctx
            .new_event(Some(CU_EVENT_DEFAULT))
            .map_err(cuda_err("event"))?;
        e0.record(s).map_err(cuda_err("event record"))?;
        for _ in 0..reps.max(1) {
            f()?;
        }
        e1.record(s).map_err(cuda_err("event record"))?;
        e1.synchronize().map_err(cuda_err("event sync"))?;
        Ok(e0.elapsed_ms(&e1).map_err(cuda_err("elapsed"))? / reps.max(1) as f32)
    }

    /// Enqueues `y = A x` (or `xᵀ A`) on device vectors, without synchronising; the
    /// scratch is allocated for the call and freed (stream-ordered) after it.
    pub fn product_device<S: Semiring>(
        &self,
        m: &DeviceTree,
        dir: Direction,
        x: &DeviceVec<S::Elem>,
        batch: usize,
        y: &mut DeviceVec<S::Elem>,
    ) -> Result<()> {
        check_product_shape(&m.tree, dir, x.len, batch, y.len)?;
        let source = self.source_for(m, batch, false);
        let layout = ScratchLayout::new(m.dense_plan(source), source, false, m.tree.height());
        let scratch = Scratch::alloc(&self.gpu, &layout)?;
        let _g = self.guard();
        self.enqueue_semiring::<S>(m, dir, x, batch, y, source, &scratch)
    }

    /// Records `y = A x` (or `xᵀ A`) of a batch of `batch` vectors once as a CUDA graph
    /// over device vectors the graph owns; [`ProductGraph::launch`] replays it.
    pub fn record_product<S: Semiring>(
        &self,
        m: &DeviceTree,
        dir: Direction,
        x: DeviceVec<S::Elem>,
        batch: usize,
        mut y: DeviceVec<S::Elem>,
    ) -> Result<ProductGraph<S::Elem>> {
        check_product_shape(&m.tree, dir, x.len, batch, y.len)?;
        let source = self.source_for(m, batch, false);
        let layout = ScratchLayout::new(m.dense_plan(source), source, false, m.tree.height());
        let scratch = Scratch::alloc(&self.gpu, &layout)?;
        let _g = self.guard();
        let graph = self
            .capture(|| self.enqueue_semiring::<S>(m, dir, &x, batch, &mut y, source, &scratch))?;
        Ok(ProductGraph::new(
            graph,
            x,
            y,
            scratch,
            self.gpu.stream().clone(),
        ))
    }

    /// Records the bit-packed Boolean product `y |= A x` (or `yᵀ |= xᵀ A`) once as a CUDA
    /// graph over batches the graph owns; [`BitsGraph::launch`] replays it. With
    /// [`BitsUpdate::Or`] a replay ORs into `y`, like [`Engine::bool_product`]; with
    /// [`BitsUpdate::Overwrite`] each replay computes `y = A x`: over row windows
    /// ([`Tuning::row_windows`]) by storing every word once, otherwise with a clear of `y`
    /// (part of the graph) first.
    pub fn record_bool_product(
        &self,
        m: &DeviceTree,
        dir: Direction,
        x: GpuBits,
        y: GpuBits,
        traversal: Traversal,
        update: BitsUpdate,
    ) -> Result<BitsGraph> {
        check_bits_shape(&m.tree, dir, x.shape(), y.shape())?;
        if x.len() == 0 || y.len() == 0 {
            return Err(EngineError::Shape(
                "cannot record a product of an empty bit batch".into(),
            ));
        }
        let (plan, layout) = self.bits_plan(m, x.words, traversal);
        let scratch = Scratch::alloc(&self.gpu, &layout)?;
        let store = Self::row_store(m, dir, &x, traversal);
        let _g = self.guard();
        let graph = self.capture(|| match (update, store) {
            (BitsUpdate::Overwrite, Some(store)) => self.enqueue_row_store(m, store, &x, &y),
            (BitsUpdate::Overwrite, None) => {
                self.enqueue_bits_clear(&y)?;
                self.enqueue_bits(m, dir, &x, &y, plan, &scratch)
            }
            (BitsUpdate::Or, _) => self.enqueue_bits(m, dir, &x, &y, plan, &scratch),
        })?;
        Ok(BitsGraph::new(
            graph,
            x,
            y,
            scratch,
            self.gpu.stream().clone(),
        ))
    }

    /// Records what `enqueue` enqueues on the engine's stream as a CUDA graph (the caller
    /// holds the engine's lock).
    fn capture(&self, enqueue: impl FnOnce() -> Result<()>) -> Result<CudaGraph> {
        use cudarc::driver::sys::{CUgraphInstantiate_flags, CUstreamCaptureMode};
        let s = self.gpu.stream();
        s.synchronize().map_err(cuda_err("synchronize"))?;
        s.begin_capture(CUstreamCaptureMode::CU_STREAM_CAPTURE_MODE_THREAD_LOCAL)
            .map_err(cuda_err("begin capture"))?;
        let enqueued = enqueue();
        let graph = s.end_capture(CUgraphInstantiate_flags(0));
        enqueued?;
        graph
            .map_err(cuda_err("end capture"))?
            .ok_or_else(|| EngineError::Cuda("graph capture recorded nothing".into()))
    }

    /// The plan of a bit-packed product of `words` words per row (with its offset source
    /// and whether it is masked) and the scratch it needs.
    fn bits_plan<'m>(
        &self,
        m: &'m DeviceTree,
        words: usize,
        traversal: Traversal,
    ) -> (BitsPlan<'m>, ScratchLayout) {
        let masked = traversal == Traversal::Masked;
        let source = self.source_for(m, words, true);
        let plan = if masked {
            m.masked_plan(source)
        } else {
            m.dense_plan(source)
        };
        let layout = ScratchLayout::new(plan, source, masked, m.tree.height());
        ((plan, source, masked), layout)
    }

    /// Enqueues a bit-packed product of `x` into `y` following `plan` (the pyramid of
    /// active blocks first when `masked`).
    fn enqueue_bits(
        &self,
        m: &DeviceTree,
        dir: Direction,
        x: &GpuBits,
        y: &GpuBits,
        (plan, source, masked): BitsPlan<'_>,
        scratch: &Scratch,
    ) -> Result<()> {
        if masked {
            self.enqueue_pyramid(m, plan, x, scratch)?;
        }
        let s = self.gpu.stream();
        let (xp, yp) = (x.raw(s), y.raw(s));
        self.enqueue_plan(
            m,
            plan,
            (
                self.options.tuning.leaf_kernel.resolve(
                    LeafOp::Bits,
                    dir,
                    x.words as u64,
                    m.layout,
                ),
                LeafOp::Bits,
            ),
            xp,
            yp,
            x.words as u64,
            dir,
            source,
            scratch,
            masked,
        )
    }

    #[allow(clippy::too_many_arguments)]
    fn enqueue_semiring<S: Semiring>(
        &self,
        m: &DeviceTree,
        dir: Direction,
        x: &DeviceVec<S::Elem>,
        batch: usize,
        y: &mut DeviceVec<S::Elem>,
        source: OffsetSource,
        scratch: &Scratch,
    ) -> Result<()> {
        let s = self.gpu.stream();
        let (xp, yp) = (x.raw(s), y.raw(s));
        self.fill_u32(yp, S::zero().bits(), y.len as u64)?;
        let op = LeafOp::from(S::KIND);
        self.enqueue_plan(
            m,
            m.dense_plan(source),
            (
                self.options
                    .tuning
                    .leaf_kernel
                    .resolve(op, dir, batch as u64, m.layout),
                op,
            ),
            xp,
            yp,
            batch as u64,
            dir,
            source,
            scratch,
            false,
        )
    }

    /// Enqueues the zeroing of `bits` (the caller holds the engine's lock). Stream order
    /// puts it before every later use: no synchronisation.
    fn enqueue_bits_clear(&self, bits: &GpuBits) -> Result<()> {
        self.fill_u32(bits.raw(self.gpu.stream()), 0, 2 * bits.len())
    }

    /// The layout through which a product `y = A x` of bit batch `x` stores each word of
    /// `y` once, if it can (a dense right product of one word per row) and the matrix has
    /// one: its row groups, else its row windows.
    fn row_store<'m>(
        m: &'m DeviceTree,
        dir: Direction,
        x: &GpuBits,
        traversal: Traversal,
    ) -> Option<RowStore<'m>> {
        if x.words != 1 || dir != Direction::Right || traversal != Traversal::Dense {
            return None;
        }
        m.groups
            .as_ref()
            .map(RowStore::Groups)
            .or(m.windows.as_ref().map(RowStore::Windows))
    }

    /// Enqueues `y = A x` through `store` (the caller holds the engine's lock and checked
    /// the shapes).
    fn enqueue_row_store(
        &self,
        m: &DeviceTree,
        store: RowStore,
        x: &GpuBits,
        y: &GpuBits,
    ) -> Result<()> {
        match store {
            RowStore::Groups(g) => self.enqueue_groups(g, x, y),
            RowStore::Windows(w) => self.enqueue_windows(m, w, x, y),
        }
    }

    /// Enqueues the clear of the four words of each of the block rows `cleared` (of a
    /// batch at `y`, `n` words), before a product that ORs into them; nothing when there
    /// are none.
    fn enqueue_clear_rows(&self, cleared: &ClearedRows, y: u64, n: u64) -> Result<()> {
        let Some(rows) = &cleared.rows else {
            return Ok(());
        };
        let s = self.gpu.stream();
        let rp = rows.device_ptr(s).0;
        let count = cleared.count;
        // SAFETY: rows holds `count` block rows; the kernel writes only y's n words.
        unsafe {
            s.launch_builder(self.gpu.function("clear_block_rows")?)
                .arg(&rp)
                .arg(&count)
                .arg(&y)
                .arg(&n)
                .launch(config_for(4 * count))
        }
        .map(|_| ())
        .map_err(cuda_err("clear_block_rows"))
    }

    /// Enqueues `y = A x` over the row groups `g` (the caller holds the engine's lock and
    /// checked the shapes): the clear of the rows cut into pieces, if any, then one launch
    /// that stores every other word of `y` once.
    fn enqueue_groups(&self, g: &DeviceGroups, x: &GpuBits, y: &GpuBits) -> Result<()> {
        let s = self.gpu.stream();
        let (xp, yp) = (x.raw(s), y.raw(s));
        let (inputs, n) = (x.len(), y.len());
        self.enqueue_clear_rows(&g.shared, yp, n)?;
        // SAFETY: desc holds four u32 per warp (a uint4), cols, cells and rows what desc names;
        // x has `inputs` words and y `n`, and the kernel reads and writes within them.
        unsafe {
            s.launch_builder(self.gpu.function("rowgroups_bits")?)
                .arg(&g.cols)
                .arg(&g.cells)
                .arg(&g.desc)
                .arg(&g.warps)
                .arg(&g.rows)
                .arg(&xp)
                .arg(&inputs)
                .arg(&yp)
                .arg(&n)
                .launch(launch::groups_config(g.warps))
        }
        .map(|_| ())
        .map_err(cuda_err("rowgroups_bits"))
    }

    /// Whether kernels written to wait for their predecessor are launched to overlap it:
    /// the options allow it and the device has programmatic dependent launches (sm_90).
    fn overlaps_launches(&self) -> bool {
        self.options.tuning.overlapped_launches && self.gpu.supports_overlapped_launches()
    }

    /// Enqueues `y = A x` over the row windows `w` of `m` (the caller holds the engine's
    /// lock and checked the shapes): the clear of the shared parts' rows, if any, then
    /// one launch that stores every other word of `y` once. After a clear the product is
    /// an overlapped launch (where the engine overlaps launches): it starts with the
    /// clear and waits for it only before its first atomic OR into a shared row.
    fn enqueue_windows(
        &self,
        m: &DeviceTree,
        w: &DeviceWindows,
        x: &GpuBits,
        y: &GpuBits,
    ) -> Result<()> {
        let s = self.gpu.stream();
        let (mut xp, mut yp) = (x.raw(s), y.raw(s));
        let (mut inputs, mut n) = (x.len(), y.len());
        // Only a product after a clear overlaps: without one it is the stream's first
        // kernel after earlier work that may read or write y.
        let overlapped = w.shared.rows.is_some() && self.overlaps_launches();
        self.enqueue_clear_rows(&w.shared, yp, n)?;
        let (_, _, _, mut front) = m.pointers(&self.gpu, Direction::Right);
        let mut windows = w.windows;
        let mut args = [
            &mut front as *mut u64,
            &mut windows,
            &mut xp,
            &mut inputs,
            &mut yp,
            &mut n,
        ]
        .map(|a| a.cast::<std::ffi::c_void>());
        // SAFETY: the frontier holds `windows` whole windows; x has `inputs` words and y
        // `n`, and the kernel reads and writes within them. When overlapped: the clear,
        // launched the usual way, starts after all earlier work of the stream, so only its
        // own writes (the shared rows) are unfinished when the product starts, and the
        // product waits for them before its atomic ORs (`store_run` in cuda/row_stores.cu).
        // Every shared row has parts and each part waits, so the product ends after the
        // clear: later work of the stream, ordered after the product, sees the clear done.
        unsafe {
            launch_with_args(
                s,
                self.gpu.function("rowwindows_bits")?,
                launch::windows_config(w.windows),
                &mut args,
                overlapped,
            )
        }
        .map_err(cuda_err("rowwindows_bits"))
    }

    fn fill_u32(&self, p: u64, value: u32, n: u64) -> Result<()> {
        if n == 0 {
            return Ok(());
        }
        let f = self.gpu.function("fill_u32")?;
        // SAFETY: p addresses at least n u32 words (callers pass their own buffers).
        unsafe {
            self.gpu
                .stream()
                .launch_builder(f)
                .arg(&p)
                .arg(&value)
                .arg(&n)
                .launch(config_for(n))
        }
        .map(|_| ())
        .map_err(cuda_err("fill_u32"))
    }

    /// Enqueues every step of `plan`: scans (if `source` is the scan), expansions and
    /// leaf visits with `kernel`'s kernels for `op`, over raw device addresses `x` and `y`. Only a
    /// `masked` product hands the kernels the pyramid of active blocks: a kept scratch
    /// may hold a pyramid left by an earlier masked product, which a dense one must not see.
    #[allow(clippy::too_many_arguments)]
    fn enqueue_plan(
        &self,
        m: &DeviceTree,
        plan: &TilePlan,
        (kernel, op): (LeafKernel, LeafOp),
        x: u64,
        y: u64,
        width: u64,
        dir: Direction,
        source: OffsetSource,
        scratch: &Scratch,
        masked: bool,
    ) -> Result<()> {
        let s = self.gpu.stream();
        let (nib, ranks, top, front) = m.pointers(&self.gpu, dir);
        let layout = m.layout.for_dir(dir);
        let codes: Vec<u64> = scratch.codes.iter().map(|b| ptr(s, b)).collect();
        let offsets = ptr(s, &scratch.offsets);
        let status = ptr(s, &scratch.status);
        let pyramid = if masked { ptr(s, &scratch.pyramid) } else { 0 };
        let mut kernels = StepKernels {
            gpu: &self.gpu,
            variant: kernel,
            op,
            found: Vec::new(),
        };
        let scan = self.gpu.function("scan_fanout")?;
        let scanning = source == OffsetSource::Scan;
        let overlapped = self.overlaps_launches();
        let chunks = self.options.tuning.warp_chunks;
        // `StepParams::dir` of every launch of the product.
        let dir_code = match dir {
            Direction::Right => 0,
            Direction::Left => 1,
        };
        for step in &plan.steps {
            let codes_in = match step.src {
                CodeSource::Top => top,
                CodeSource::Frontier => front,
                CodeSource::Scratch(d) => codes[d as usize],
            };
            let expanding = step.kind == StepKind::Expand;
            let scanned = scanning && step.takes_scan();
            if scanned {
                let tiles = step.count.div_ceil(SCAN_TILE_NODES);
                self.fill_u32(status, 0, 2 * (tiles + 1))?;
                // SAFETY: offsets holds max_scanned_nodes() >= count u32 (this step is
                // scanned), status tiles + 1 u64.
                unsafe {
                    s.launch_builder(scan)
                        .arg(&nib)
                        .arg(&step.node0)
                        .arg(&step.count)
                        .arg(&offsets)
                        .arg(&status)
                        .arg(&tiles)
                        .launch(scan_config(tiles))
                }
                .map_err(cuda_err("scan_fanout"))?;
            }
            let p = StepParams {
                nib,
                ranks,
                codes_in,
                codes_out: if expanding {
                    codes[(step.level + step.levels) as usize]
                } else {
                    0
                },
                offsets: if scanned { offsets } else { 0 },
                x,
                y,
                pyramid,
                node0: step.node0,
                count: step.count,
                child0: step.child0,
                src_off: step.src_off,
                // An expand step's width is the levels it descends.
                width: if expanding { step.levels as u64 } else { width },
                inputs: dir.lengths(m.tree.rows(), m.tree.cols()).0,
                sample_log2: m.sample_log2,
                level: step.level,
                height: m.tree.height(),
                dir: dir_code,
                // Only expand, subtree and octet leaf steps start from a narrow top level
                // (it lies above the leaves' parents), and they read codes by width.
                narrow: (step.src == CodeSource::Top && m.top.narrow) as u16,
            };
            use FrontierLayout::Codes;
            let (f, cfg) = if step.kind == StepKind::Subtrees {
                let f = kernels.get(KernelStep::Subtrees, Codes)?;
                (f, subtree_config(step.count))
            } else if expanding && step.levels > 1 {
                let f = kernels.get(KernelStep::ExpandLevels, Codes)?;
                (f, chunked_config(step.count, chunks))
            } else if expanding {
                (
                    kernels.get(KernelStep::Expand, Codes)?,
                    config_for(step.count),
                )
            } else if step.levels == 2 {
                let f = kernels.get(KernelStep::Octets, Codes)?;
                (f, chunked_config(step.count * width, chunks))
            } else if layout.packed() && step.src == CodeSource::Frontier {
                // Over block entries the leaf kernel reads each node's block from its entry.
                let f = kernels.get(KernelStep::Leaves, layout)?;
                (f, block_leaf_config(kernel, op, step.count, width))
            } else {
                let f = kernels.get(KernelStep::Leaves, Codes)?;
                (f, leaf_config(kernel, step.count * width))
            };
            // SAFETY: the plan's positions lie within the buffers sized from it, and x/y
            // were checked against the matrix's shape; every traversal kernel waits for
            // its prerequisites before touching them.
            unsafe { launch_step(s, f, cfg, &p, overlapped) }
                .map_err(cuda_err("traversal kernel"))?;
        }
        if let Some(lone) = &m.lone {
            let p = StepParams {
                codes_in: match dir {
                    Direction::Right => lone.by_row.device_ptr(s).0,
                    Direction::Left => lone.by_col.device_ptr(s).0,
                },
                x,
                y,
                count: lone.count,
                width,
                dir: dir_code,
                ..StepParams::default()
            };
            let f = kernels.get(KernelStep::Lone, FrontierLayout::Codes)?;
            // SAFETY: the cells lie inside the matrix, whose shape x and y were checked
            // against; the kernel waits for the descent before touching y.
            unsafe { launch_step(s, f, config_for(lone.count * width), &p, overlapped) }
                .map_err(cuda_err("lone_cells"))?;
        }
        Ok(())
    }

    /// Builds the pyramid of active input blocks of bit batch `x` into `scratch`, up to
    /// the highest level `plan` looks up (the block of its topmost nodes): with the cached
    /// frontier that is level 2 only, so two small launches.
    fn enqueue_pyramid(
        &self,
        m: &DeviceTree,
        plan: &TilePlan,
        x: &GpuBits,
        scratch: &Scratch,
    ) -> Result<()> {
        let s = self.gpu.stream();
        let base = ptr(s, &scratch.pyramid);
        let layout = pyramid_layout(m.tree.height());
        let xp = x.raw(s);
        let (rows, words) = (x.rows as u64, x.words as u64);
        let (_, w0) = layout[0];
        // SAFETY: the pyramid buffer holds every level of `layout`; x holds rows × words.
        unsafe {
            s.launch_builder(self.gpu.function("pyramid_base")?)
                .arg(&xp)
                .arg(&rows)
                .arg(&words)
                .arg(&base)
                .arg(&w0)
                .launch(config_for(w0))
        }
        .map_err(cuda_err("pyramid_base"))?;
        let up = self.gpu.function("pyramid_up")?;
        let top = plan.steps.iter().map(|st| st.level).min().unwrap_or(0);
        let highest = (m.tree.height() - top) as usize;
        for g in 1..=highest.min(layout.len() - 1) {
            let (below_off, below_words) = layout[g - 1];
            let (above_off, above_words) = layout[g];
            let below = base + 4 * below_off;
            let above = base + 4 * above_off;
            // SAFETY: as above.
            unsafe {
                s.launch_builder(up)
                    .arg(&below)
                    .arg(&below_words)
                    .arg(&above)
                    .arg(&above_words)
                    .launch(config_for(above_words))
            }
            .map_err(cuda_err("pyramid_up"))?;
        }
        Ok(())
    }

    fn check_same_shape(what: &str, a: &GpuBits, b: &GpuBits) -> Result<()> {
        if a.shape() != b.shape() {
            return Err(EngineError::Shape(format!(
                "{what} of {:?} and {:?}",
                a.shape(),
                b.shape()
            )));
        }
        Ok(())
    }

    fn sync(&self) -> Result<()> {
        self.gpu
            .stream()
            .synchronize()
            .map_err(cuda_err("synchronize"))
    }
}

impl Engine for GpuEngine {
    type Matrix = DeviceTree;
    type Bits = GpuBits;

    fn name(&self) -> &'static str {
        "gpu"
    }

    fn batch_memory(&self) -> Option<u64> {
        self.cuda_context()
            .mem_get_info()
            .ok()
            .map(|(free, _)| free as u64)
    }

    fn load(&self, tree: &Arc<K2Tree>, config: MatrixConfig) -> Result<DeviceTree> {
        let _g = self.guard();
        let m = DeviceTree::load(&self.gpu, tree, config, &self.options)?;
        self.sync()?;
        Ok(m)
    }

    fn matrix_tree<'m>(&self, m: &'m DeviceTree) -> &'m Arc<K2Tree> {
        m.tree()
    }

    fn matrix_bytes(&self, m: &DeviceTree) -> u64 {
        m.bytes
    }

    fn load_bytes(&self, tree: &K2Tree, config: MatrixConfig) -> u64 {
        // What `DeviceTree::load` uploads: signatures, directory and, tree-only, the
        // host-expanded top level or, with `CachedFrontier`, the frontier.
        // Lone cells (an option, off by default): counted without splitting the tree.
        let lone = lone_count(tree, DeviceTree::lone_paths(config, &self.options));
        let lone_bytes = lone.as_ref().map_or(0, LoneCount::list_bytes);
        let s = lone.map_or_else(|| tree.stats(), |l| l.kept);
        lone_bytes
            + s.tree_bytes
            + s.directory_bytes
            + if config == MatrixConfig::CachedFrontier {
                let layout = self
                    .options
                    .frontier
                    .for_tree(tree, self.options.tuning.leaf_kernel);
                // Row windows: their entries and shared rows, counted as `load` lays them
                // (a `RowBlocks` frontier holds an entry per frontier node).
                let entries = (s.frontier_bytes / 8) as usize;
                let windows = DeviceTree::window_allowance(&self.options, layout, entries)
                    .and_then(|max_extra| row_windows_size(tree, max_extra));
                let frontier = windows
                    .map_or(layout.copies() * s.frontier_bytes, |(entries, shared)| {
                        8 * entries + 4 * shared
                    });
                // Row groups: planned from the block rows' lengths (an option, off by
                // default).
                let groups = (layout == FrontierLayout::RowBlocks
                    && self.options.tuning.row_groups)
                    .then(|| {
                        row_groups_bytes(tree, self.options.tuning.row_group_iterations)
                            .unwrap_or(0)
                    });
                frontier + groups.unwrap_or(0)
            } else {
                TopLevel::for_stats(&s, self.options.tuning.top_nodes).bytes(&s)
            }
    }

    fn product<S: Semiring>(
        &self,
        m: &DeviceTree,
        dir: Direction,
        x: &[S::Elem],
        batch: usize,
        y: &mut [S::Elem],
    ) -> Result<()> {
        check_product_shape(&m.tree, dir, x.len(), batch, y.len())?;
        if y.is_empty() {
            return Ok(());
        }
        let xd = self.upload(x)?;
        let mut yd = self.zeros::<S::Elem>(y.len())?;
        self.product_device::<S>(m, dir, &xd, batch, &mut yd)?;
        let s = self.gpu.stream();
        s.memcpy_dtoh(&yd.buf.slice(0..y.len()), y)
            .map_err(cuda_err("download"))?;
        self.sync()
    }

    fn bits_zeroed(&self, rows: usize, words: usize) -> Result<GpuBits> {
        Ok(GpuBits {
            rows,
            words,
            buf: self.gpu.alloc_zeros(rows * words, "bit batch")?,
        })
    }

    fn bits_upload(&self, host: &BitMatrix) -> Result<GpuBits> {
        let buf = self.gpu.upload(host.as_words(), "bit batch")?;
        self.sync()?;
        Ok(GpuBits {
            rows: host.rows(),
            words: host.words(),
            buf,
        })
    }

    fn bits_download(&self, bits: &GpuBits) -> Result<BitMatrix> {
        let n = bits.rows * bits.words;
        let mut data = vec![0u64; n];
        if n > 0 {
            self.gpu
                .stream()
                .memcpy_dtoh(&bits.buf.slice(0..n), &mut data[..])
                .map_err(cuda_err("download"))?;
            self.sync()?;
        }
        Ok(BitMatrix::from_words(bits.rows, bits.words, data))
    }

    fn bits_clear(&self, bits: &mut GpuBits) -> Result<()> {
        let _g = self.guard();
        self.enqueue_bits_clear(bits)
    }

    fn bits_or(&self, dst: &mut GpuBits, src: &GpuBits) -> Result<()> {
        Self::check_same_shape("bits_or", dst, src)?;
        let n = dst.len();
        if n == 0 {
            return Ok(());
        }
        let _g = self.guard();
        let s = self.gpu.stream();
        let (d, sp) = (dst.raw(s), src.raw(s));
        // SAFETY: both hold n words.
        unsafe {
            s.launch_builder(self.gpu.function("bits_or")?)
                .arg(&d)
                .arg(&sp)
                .arg(&n)
                .launch(config_for(n))
        }
        .map_err(cuda_err("bits_or"))
        .map(|_| ())
    }

    fn bits_advance(&self, next: &mut GpuBits, visited: &mut GpuBits) -> Result<u64> {
        Ok(self.bits_advance_all(&mut [(next, visited)])?[0])
    }

    fn bits_advance_all(&self, pairs: &mut [(&mut GpuBits, &mut GpuBits)]) -> Result<Vec<u64>> {
        for (next, visited) in pairs.iter() {
            Self::check_same_shape("bits_advance", next, visited)?;
        }
        let k = pairs.len();
        let mut out = vec![0u64; k];
        if pairs.iter().all(|(next, _)| next.len() == 0) {
            return Ok(out);
        }
        let _g = self.guard();
        let s = self.gpu.stream();
        let mut kept = self.kept();
        // One counter per pair, zeroed and read back together: one synchronisation
        // for the whole step instead of an allocation and a synchronisation per state.
        let mut counts = match kept.counts.take() {
            Some(c) if c.len() >= k => c,
            other => {
                drop(other);
                self.gpu.alloc_zeros::<u64>(k.max(8), "popcounts")?
            }
        };
        let result = (|| -> Result<()> {
            s.memset_zeros(&mut counts.slice_mut(0..k))
                .map_err(cuda_err("memset"))?;
            let base = counts.device_ptr(s).0;
            let f = self.gpu.function("bits_advance")?;
            for (i, (next, visited)) in pairs.iter_mut().enumerate() {
                let n = next.len();
                if n == 0 {
                    continue;
                }
                let (np, vp, cp) = (next.raw(s), visited.raw(s), base + 8 * i as u64);
                // SAFETY: next and visited hold n words, cp addresses counter i < k.
                unsafe {
                    s.launch_builder(f)
                        .arg(&np)
                        .arg(&vp)
                        .arg(&n)
                        .arg(&cp)
                        .launch(config_for(n))
                }
                .map_err(cuda_err("bits_advance"))?;
            }
            s.memcpy_dtoh(&counts.slice(0..k), &mut out[..])
                .map_err(cuda_err("download"))?;
            self.sync()
        })();
        if kept.runs > 0 {
            kept.counts = Some(counts);
        }
        result.map(|_| out)
    }

    fn bits_word(&self, bits: &GpuBits, index: usize) -> Result<u64> {
        if index as u64 >= bits.len() {
            return Err(EngineError::Shape(format!(
                "word {index} of a {:?} batch",
                bits.shape()
            )));
        }
        let mut out = [0u64; 1];
        let _g = self.guard();
        self.gpu
            .stream()
            .memcpy_dtoh(&bits.buf.slice(index..index + 1), &mut out[..])
            .map_err(cuda_err("download"))?;
        self.sync()?;
        Ok(out[0])
    }

    fn bits_or_word(&self, bits: &mut GpuBits, index: usize, mask: u64) -> Result<()> {
        let word = self.bits_word(bits, index)? | mask;
        let _g = self.guard();
        // A pageable copy of a few bytes returns once they are staged: stream order
        // then puts it before every later use of the batch.
        self.gpu
            .stream()
            .memcpy_htod(&[word], &mut bits.buf.slice_mut(index..index + 1))
            .map_err(cuda_err("upload"))
    }

    fn begin_products(&self) {
        self.kept().runs += 1;
    }

    fn end_products(&self) {
        let mut kept = self.kept();
        kept.runs = kept.runs.saturating_sub(1);
        if kept.runs == 0 {
            // Stream-ordered frees: work still queued on them finishes first.
            kept.scratch = None;
            kept.counts = None;
        }
    }

    fn bool_product(
        &self,
        m: &DeviceTree,
        dir: Direction,
        x: &GpuBits,
        y: &mut GpuBits,
        traversal: Traversal,
    ) -> Result<()> {
        check_bits_shape(&m.tree, dir, x.shape(), y.shape())?;
        if x.len() == 0 || y.len() == 0 {
            return Ok(());
        }
        let (plan, need) = self.bits_plan(m, x.words, traversal);
        let (layout, scratch) = self.take_scratch(need)?;
        let _g = self.guard();
        let enqueued = self.enqueue_bits(m, dir, x, y, plan, &scratch);
        // No synchronisation: the next use of `y` (an advance, a copy back) is ordered
        // after the product on the engine's one stream, and the scratch is reused or
        // freed in stream order too.
        self.put_back_scratch(layout, scratch);
        enqueued
    }

    fn bool_product_overwrite(
        &self,
        m: &DeviceTree,
        dir: Direction,
        x: &GpuBits,
        y: &mut GpuBits,
        traversal: Traversal,
    ) -> Result<()> {
        check_bits_shape(&m.tree, dir, x.shape(), y.shape())?;
        let Some(store) = Self::row_store(m, dir, x, traversal) else {
            self.bits_clear(y)?;
            return self.bool_product(m, dir, x, y, traversal);
        };
        if x.len() == 0 || y.len() == 0 {
            return self.bits_clear(y);
        }
        let _g = self.guard();
        self.enqueue_row_store(m, store, x, y)
    }
}
