//! Kernel arguments and launch shapes shared by the engine's launches.

use cudarc::driver::{DeviceRepr, LaunchConfig};

/// Mirror of `struct StepParams` in `cuda/common.cuh` (same field order and sizes: every
/// pointer and count is 8 bytes, then four u32). Pointers are raw device addresses.
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
    pub width: u64,
    pub sample_log2: u32,
    pub level: u32,
    pub height: u32,
    pub dir: u32,
}

// SAFETY: plain old data with the C layout the kernels expect.
unsafe impl DeviceRepr for StepParams {}

/// Threads per block of the element-wise and traversal kernels.
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

/// The scan's launch: one block per tile of [`super::tile_plan::SCAN_TILE_NODES`] nodes.
pub fn scan_config(tiles: u64) -> LaunchConfig {
    LaunchConfig {
        grid_dim: (tiles.max(1) as u32, 1, 1),
        block_dim: (256, 1, 1),
        shared_mem_bytes: 0,
    }
}
