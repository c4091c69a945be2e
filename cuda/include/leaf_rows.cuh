// The `rows` leaf step and its refinements, over the descent's codes (leaves_codes.cu)
// and over the block entries of the cached frontier (leaves_blocks.cu).
//
// The last internal level and its leaves form a 4x4 block per node: the node's signature
// says which of its four 2x2 leaves exist, the leaves' signatures which cells. Without
// changing the format, a thread gathers that block into a 16-bit bitmap in registers
// (bit 4r + c = cell (r0 + r, c0 + c)). Then, for a right product y = A x, it reads each
// present column's x once (independent loads, issued together), OR/sums each present row
// in a register and issues one update per non-empty row: at most 4 atomics per node
// instead of one per cell (left product: the same over columns). The paper (section 5.6)
// finds the tree bound by exactly these per-non-zero atomics.
//
// Two refinements, template flags of `rows_step`, each a kernel family of its own so
// that they can be measured one at a time:
//  - WRANK (`wrank`): child offsets without a per-thread directory rank: one rank per
//    warp, its popcounts spread over the lanes, then a shuffle scan of the fan-outs of the
//    warp's nodes (with a scanned offset array the offsets are used as they are).
//  - AGG (`wagg`): warp-level aggregation: lanes whose nodes share the output block
//    (Morton order keeps them adjacent) combine their rows with a shuffle tree reduction,
//    and only the lowest such lane updates y: one atomic per distinct output entry per
//    warp. Over block entries sorted by block row, a right product's peers are runs of
//    adjacent lanes, combined by a segmented shuffle scan without a key match
//    (`rowblocks_agg`).
// Idempotent semirings (Boolean, tropical, bit-packed) read y first and skip the atomic
// when it would change nothing (y only grows, so a skip is never wrong). The step keeps
// all 32 lanes of a warp in the loop together (its base index is warp-uniform), as the
// WRANK and AGG paths shuffle across lanes.
#ifndef K2RPQ_LEAF_ROWS_CUH
#define K2RPQ_LEAF_ROWS_CUH

#include "leaf_blocks.cuh"

// What an item (node or block entry, vector) of a leaf step reads from the resident tree:
// with an overlapped launch the first item's is fetched before the previous step ends.
struct TreeItem {
    u64 t, b;      // node (or entry) of the step, vector
    bool valid;    // the warp's lane has an item (lanes past the end mirror the last one)
    u32 s;         // codes: the node's signature
    u64 leaf;      // codes: global index of its first leaf
    u64 entry;     // block entries: the entry
    u32 raw;       // codes: the node's block, when fetched early (the step's first item)
};

// The tree data of item base + lane. Over codes the leaves (the block) are fetched too
// when `fetch`: the first item fetches them before knowing whether its node is pruned;
// later items only for live nodes.
template <bool WRANK, bool BLOCKS>
__device__ __forceinline__ TreeItem tree_item(const StepParams &p, u64 base, u64 total, u32 lane,
                                              bool fetch) {
    TreeItem it;
    u64 g = base + lane;
    it.valid = g < total;
    it.t = (it.valid ? g : total - 1) / p.width;
    it.b = it.valid ? g - it.t * p.width : 0;
    if (BLOCKS) {
        it.entry = p.codes_in[p.src_off + it.t];
    } else {
        if (WRANK && !p.offsets) {
            warp_children(p, base, total, it.t, lane, it.s, it.leaf);
        } else {
            it.s = signature(p.nib, p.node0 + it.t);
            it.leaf = first_child(p, it.t);
        }
        if (fetch) it.raw = block_bitmap(p.nib, it.s, it.leaf);
    }
    return it;
}

// The `rows` step. BLOCKS: the step's nodes are block entries of the cached frontier (`row
// << 40 | col << 16 | bitmap`, src/engine/gpu/frontier.rs): the block comes with the entry,
// so nothing of the tree is read (no signature, rank or leaves) and no Morton code is
// decoded. Entries are never PRUNED (only descents write that) and may come in any order.
// ROW_SORTED: the entries come sorted by block row (`RowBlocks`), so in a right product the
// lanes of one block row are adjacent and AGG combines runs of adjacent lanes
// (`reduce_runs`) instead of matching keys across the warp.
template <typename Op, bool WRANK, bool AGG, bool BLOCKS, bool ROW_SORTED = false>
__device__ __forceinline__ void rows_step(const StepParams &p) {
    typedef typename Op::T T;
    start_dependents();
    const u32 lane = threadIdx.x & 31;
    const u64 total = p.count * p.width;
    // Warp-uniform base: blockDim and the grid stride are multiples of 32.
    u64 base = global_thread() - lane;
    // Scanned offsets are written by the scan: those wait.
    bool early = base < total && (BLOCKS || !p.offsets);
    TreeItem it;
    if (early) it = tree_item<WRANK, BLOCKS>(p, base, total, lane, true);
    wait_prerequisites();
    for (; base < total; base += thread_stride(), early = false) {
        if (!early) it = tree_item<WRANK, BLOCKS>(p, base, total, lane, false);
        u64 r0, c0;
        u32 bm;
        if (BLOCKS) {
            r0 = entry_row0(it.entry);
            c0 = entry_col0(it.entry);
            bm = it.valid ? entry_active_bitmap(p, it.entry) : 0u;
        } else {
            u64 code = p.codes_in[p.src_off + it.t];
            bool active = live(p, it.valid && code != PRUNED, code, p.level);
            // Only the early (first) item's block was fetched with it.
            bm = !active ? 0u : early ? it.raw : block_bitmap(p.nib, it.s, it.leaf);
            r0 = code_row0(code);
            c0 = code_col0(code);
        }
        u64 b = it.b;
        u64 o0 = p.dir == 0 ? r0 : c0;
        T acc[4];
        if (bm) {
            block_sums<Op>(p, bm, r0, c0, b, acc);
        } else {
#pragma unroll
            for (u32 i = 0; i < 4; ++i) acc[i] = Op::identity();
        }
        bool leader = bm != 0u;
        // After aggregation a right product over block entries updates an output entry
        // about once per warp, so reading y first would rarely save an atomic; a left
        // product's column updates still collide across warps, and the read pays there.
        const bool read = !(AGG && BLOCKS && p.dir == 0);
        if (AGG) {
            // Nodes with the same output block and vector have the same key; o0 is a
            // multiple of 4 and b < width, so distinct (o0, b) give distinct keys.
            const u64 none = ~0ull;
            u64 key = bm ? o0 * p.width + b : none;
            if (ROW_SORTED && p.dir == 0) {
                leader = join_runs<Op>(key, false, lane, acc);
            } else {
                u32 peers = __match_any_sync(FULL_MASK, key);
                reduce_peers<Op>(peers, lane, acc);
                leader = key != none && (__ffs(peers) - 1) == (int)lane;
            }
        }
        if (leader) flush_block<Op>(p, o0, b, acc, read);
    }
}

#endif
