//! Kernel arguments and launch shapes shared by the engine's launches.

use cudarc::driver::{sys, CudaFunction, CudaStream, DriverError, LaunchConfig};

use super::policy::{LeafKernel, LeafOp};
use super::tile_plan::SUBTREE_ROOTS;

/// Mirror of `struct StepParams` in `cuda/include/params.cuh` (same field order and sizes:
/// every pointer and count is 8 bytes, then three u32 and two u16: 128 bytes, which the
/// kernels read field by field; a 136-byte block made the bit-packed leaf kernels ~20 %
/// slower). Pointers are raw device addresses.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub(super) struct StepParams {
    pub(super) nib: u64,
    pub(super) ranks: u64,
    pub(super) codes_in: u64,
    pub(super) codes_out: u64,
    pub(super) offsets: u64,
    pub(super) x: u64,
    pub(super) y: u64,
    pub(super) pyramid: u64,
    pub(super) node0: u64,
    pub(super) count: u64,
    pub(super) child0: u64,
    pub(super) src_off: u64,
    /// Leaf steps: the batch width (or bit-packed words); expand steps: the levels they
    /// descend (1-3).
    pub(super) width: u64,
    pub(super) inputs: u64,
    pub(super) sample_log2: u32,
    pub(super) level: u32,
    pub(super) height: u32,
    /// 0: right (`y = A x`), 1: left.
    pub(super) dir: u16,
    /// 1: `codes_in` holds 32-bit codes (a narrow host-expanded top level).
    pub(super) narrow: u16,
}

const _: () = assert!(std::mem::size_of::<StepParams>() == 128);

/// Launches traversal kernel `f` with its one argument `p` on `stream`. `overlapped`: as
/// a programmatic dependent launch (sm_90 and later), which may start before the previous
/// kernel of the stream ends; the traversal kernels read only the resident tree until
/// their `wait_prerequisites()` (`cuda/include/base.cuh`), so the next step's launch, block
/// scheduling and first directory ranks overlap the previous step's tail. Recorded into
/// CUDA graphs as programmatic edges.
///
/// # Safety
/// `f` must take one `StepParams` whose addresses and counts are valid for it, and when
/// `overlapped` it must call `wait_prerequisites()` before touching memory that earlier
/// work of the stream writes.
pub(super) unsafe fn launch_step(
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
pub(super) unsafe fn launch_with_args(
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

/// Threads per block of the element-wise and traversal kernels (the launch bounds of
/// `cuda/leaves_blocks.cu`, `cuda/octets.cu` and `expand_levels` are for blocks of this
/// size).
const BLOCK: u32 = 256;

/// At most this many blocks: the kernels loop over their range with a grid stride.
const MAX_BLOCKS: u64 = 132 * 64;

/// A 1-D launch for `n` work items with grid-stride loops.
pub(super) fn config_for(n: u64) -> LaunchConfig {
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
/// to 1.53x of cuSPARSE's SpMV; at this floor it keeps a chunk per warp.
const FILL_BLOCKS: u64 = 132 * 16;

/// Chunks per warp of an automatically chunked launch (`Tuning::warp_chunks` 0).
const AUTO_CHUNKS: u64 = 4;

/// The launch of a fused expand step (`expand_levels`) or an octet leaf step over `items`
/// (nodes × vectors) whose warps take chunks of 32 consecutive items in a row: a warp
/// ranks the directory for its first chunk only and carries the counts on to the next
/// (`warp_chunks` in `cuda/include/warp.cuh`). `chunks` ([`super::Tuning::warp_chunks`]):
/// that many per warp, or 0 for up to [`AUTO_CHUNKS`] with at least [`FILL_BLOCKS`].
pub(super) fn chunked_config(items: u64, chunks: u32) -> LaunchConfig {
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

/// Warps per block of `rowwindows_bits` (`WINDOW_WARPS` in `cuda/row_stores.cu`).
const WINDOW_WARPS: u64 = 8;

/// The grid of `rowgroups_bits` over `warps` warps of row groups: a block per
/// [`GROUP_WARPS`](super::row_groups::GROUP_WARPS) of them (the first blocks' warps may
/// share a row, so the grid is never capped).
pub(super) fn groups_config(warps: u32) -> LaunchConfig {
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
pub(super) fn windows_config(windows: u64) -> LaunchConfig {
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
/// (`WINDOW_ITEMS` in `cuda/leaves_codes.cu`).
const WINDOW_ITEMS: u64 = 2;

/// Threads per block of the `window` leaf kernel: a chunk is `WINDOW_ITEMS × WINDOW_BLOCK`
/// = 1024 items, the chunk that issued the fewest atomics through its 16 KB window.
const WINDOW_BLOCK: u32 = 512;

/// Block entries one thread of the `runs` kernel takes for `op` (`RUN_ENTRIES` and, for
/// 8-byte bit-packed words, `RUN_ENTRIES_WIDE` in `cuda/leaves_blocks.cu`).
fn run_entries(op: LeafOp) -> u64 {
    match op {
        LeafOp::Bits => 4,
        _ => 8,
    }
}

/// The launch of a leaf step of `op` over `nodes` block entries and `width` vectors with
/// `kernel`'s block-entry kernel: a thread per (entry, vector), or for `runs` per (run of
/// [`run_entries`] entries, vector).
pub(super) fn block_leaf_config(
    kernel: LeafKernel,
    op: LeafOp,
    nodes: u64,
    width: u64,
) -> LaunchConfig {
    match kernel {
        LeafKernel::Runs => config_for(nodes.div_ceil(run_entries(op)) * width),
        _ => config_for(nodes * width),
    }
}

/// The launch of a leaf step of `items` (nodes × vectors) with `kernel`: one thread per
/// item, except `window`, whose blocks each take chunks of 1024 items (at most one block
/// per chunk; the kernel loops over chunks with the grid stride).
pub(super) fn leaf_config(kernel: LeafKernel, items: u64) -> LaunchConfig {
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
pub(super) fn scan_config(tiles: u64) -> LaunchConfig {
    LaunchConfig {
        grid_dim: (tiles.max(1) as u32, 1, 1),
        block_dim: (256, 1, 1),
        shared_mem_bytes: 0,
    }
}

/// The launch of a subtree step over `nodes` nodes: a block of `SUBTREE_THREADS` (256)
/// per [`super::tile_plan::SUBTREE_ROOTS`] nodes, its level buffers in static shared
/// memory.
pub(super) fn subtree_config(nodes: u64) -> LaunchConfig {
    LaunchConfig {
        grid_dim: (nodes.div_ceil(SUBTREE_ROOTS).max(1) as u32, 1, 1),
        block_dim: (256, 1, 1),
        shared_mem_bytes: 0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The value of `#define name value` in kernel source `src`.
    fn define(src: &str, name: &str) -> u64 {
        let line = src
            .lines()
            .find(|l| l.starts_with(&format!("#define {name} ")))
            .unwrap_or_else(|| panic!("{name} not defined"));
        line.split_whitespace().nth(2).unwrap().parse().unwrap()
    }

    /// The constants the host's launches assume are the kernels': items per thread of the
    /// `window` kernel, entries per thread of `runs`, warps per block of the row stores.
    #[test]
    fn launch_constants_match_the_kernels() {
        let codes = include_str!("../../../cuda/leaves_codes.cu");
        assert_eq!(define(codes, "WINDOW_ITEMS"), WINDOW_ITEMS);
        let blocks = include_str!("../../../cuda/leaves_blocks.cu");
        assert_eq!(
            define(blocks, "RUN_ENTRIES"),
            run_entries(LeafOp::PlusTimes)
        );
        assert_eq!(
            define(blocks, "RUN_ENTRIES_WIDE"),
            run_entries(LeafOp::Bits)
        );
        let stores = include_str!("../../../cuda/row_stores.cu");
        assert_eq!(define(stores, "WINDOW_WARPS"), WINDOW_WARPS);
        assert_eq!(
            define(stores, "GROUP_WARPS"),
            super::super::row_groups::GROUP_WARPS as u64
        );
        let scan = include_str!("../../../cuda/scan.cu");
        assert_eq!(
            define(scan, "SCAN_THREADS") * define(scan, "SCAN_ITEMS"),
            super::super::tile_plan::SCAN_TILE_NODES
        );
    }

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

    /// The subtree kernel's constants are the host's: roots per block (the grid), threads
    /// per block, and the levels its buffers hold (the plans' bound).
    #[test]
    fn subtree_launch_matches_the_kernel() {
        let define = |name: &str| define(include_str!("../../../cuda/subtrees.cu"), name);
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
