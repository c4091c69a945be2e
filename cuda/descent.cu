// The descent of the level-synchronous k²-tree traversal (the paper's Algorithm 1): an
// expand step writes the codes of a tile of an internal level's children, or descendants
// a few levels down, into the next frontier; leaf steps (leaves_codes.cu, octets.cu)
// finish the product.
//
// Node t of the step writes the codes of its descendants `p.width` levels down
// (1-3; its children when 1), in level order, at codes_out[first descendant - child0]
// (child0: the first descendant of node0 at that level). A masked traversal writes PRUNED
// for descendants on a path through a node whose input range meets no active input (and
// for all descendants of a pruned node), so the positions stay those of the static tile
// plan. Expanding several levels in one launch (small ones, or thin ones that hardly
// grow: `TilePlan::descend`) saves the launches and the scratch of the levels in
// between: the descendants of consecutive nodes are contiguous on each level, so one
// rank per warp and level finds them, and the signatures of a node's children (at most 4)
// and grandchildren (at most 16) are one or two words.

#include "tree.cuh"

// What node t of an expand step reads from the tree: its signature, its children's and
// grandchildren's (as far as the step goes), and its first descendant's global index.
struct Descent {
    u32 s0;
    u64 sig1, sig2;
    u64 first;
};

// Node t of a one-level step: its signature and first child.
__device__ __forceinline__ Descent descent(const StepParams &p, u64 t) {
    Descent d;
    d.s0 = signature(p.nib, p.node0 + t);
    d.sig1 = d.sig2 = 0;
    d.first = first_child(p, t);
    return d;
}

// Node base + lane of a step of p.width ≥ 2 levels, for all 32 lanes of a warp with the
// same base (lanes past the step's end have no children). The warp's nodes are
// consecutive, so on each level below their descendants are too: the warp's first
// descendant there plus a shuffle scan of the lanes' counts gives every lane's first
// descendant. `next` holds, per level below, the first descendant of the warp's chunk:
// ranked from the directory once per warp (`ranked` false: one rank per level, its
// popcounts spread over the lanes), then carried from chunk to chunk. A rank per lane and
// level made this kernel issue-bound on the web graph (`ncu`: 85 % of the SMs' issue slots,
// 3 % of DRAM), and a rank per warp and chunk still took ~150 of its ~770 instructions per
// warp. Such steps have no scanned offsets (their child0 is a descendant's).
__device__ __forceinline__ Descent warp_descent(const StepParams &p, u64 base, u32 lane, u64 next[3],
                                                bool ranked) {
    Descent d;
    u64 t = base + lane;
    d.s0 = t < p.count ? signature(p.nib, p.node0 + t) : 0u;
    d.sig2 = 0;
    if (!ranked) {
        next[0] = 1 + warp_dir_rank(p, p.node0 + base, lane);
        next[1] = 1 + warp_dir_rank(p, next[0], lane);
        if (p.width >= 3) next[2] = 1 + warp_dir_rank(p, next[1], lane);
    }
    u32 n = __popc(d.s0);
    u64 f = warp_level(next[0], n);
    d.sig1 = signatures(p.nib, f, n);
    n = __popcll(d.sig1);
    f = warp_level(next[1], n);
    if (p.width >= 3) {
        d.sig2 = signatures(p.nib, f, n);
        n = __popcll(d.sig2);
        f = warp_level(next[2], n);
    }
    d.first = f;
    return d;
}

// Writes the codes of node `code`'s children (read as `d`), in order from out: PRUNED for
// those a masked traversal prunes.
__device__ __forceinline__ void write_children(const StepParams &p, const Descent &d, u64 code, u64 *out) {
    bool alive = live(p, code != PRUNED, code, p.level);
    for (u32 b1 = 0; b1 < 4; ++b1) {
        if (!(d.s0 & (1u << b1))) continue;
        u64 c1 = (code << 2) | b1;
        *out++ = live(p, alive, c1, p.level + 1) ? c1 : PRUNED;
    }
}

// The same for the descendants `levels` (2 or 3) levels below, one iteration per
// descendant. The signatures below the node are first spread by quadrant path: bit
// 4 q1 + q2 of `deep` is grandchild (q1, q2), bit 16 q1 + 4 q2 + q3 great-grandchild
// (q1, q2, q3), so a set bit's position is the low bits of its code and its ancestors'
// are its high bits. Ascending positions are level order within the node's subtree.
// Finding the ancestors by bit selects instead (`__fns`, ~55 instructions each) took
// ~155 instructions per descendant on the web graph (`ncu` source counters), and nested
// loops over the quadrants of each level ~1,700 per warp.
__device__ __forceinline__ void write_descendants(const StepParams &p, u32 levels, const Descent &d,
                                                  u64 code, u64 *out) {
    const bool alive = live(p, code != PRUNED, code, p.level);
    u32 spread = 0;  // the children's signatures, nibble q1 for child q1
    u64 kids = d.sig1;
#pragma unroll
    for (u32 q = 0; q < 4; ++q) {
        if (d.s0 & (1u << q)) {
            spread |= ((u32)kids & 15u) << (4 * q);
            kids >>= 4;
        }
    }
    u64 deep = spread;
    if (levels == 3) {
        // The grandchildren's signatures, nibble 4 q1 + q2 for grandchild (q1, q2).
        u64 grand = d.sig2;
        deep = 0;
        for (u32 rest = spread; rest; rest &= rest - 1) {
            deep |= (grand & 15ull) << (4 * (__ffs(rest) - 1));
            grand >>= 4;
        }
    }
    const u32 shift = 2 * levels;
    while (deep) {
        const u32 pos = (u32)__ffsll((long long)deep) - 1;
        deep &= deep - 1;
        const u64 c = (code << shift) | pos;
        bool a = alive;
        if (p.pyramid) {
            // Masked: the input blocks of the ancestors below the node and its own.
            a = live(p, a, c >> (shift - 2), p.level + 1);
            if (levels == 3) a = live(p, a, c >> 2, p.level + 2);
            a = live(p, a, c, p.level + levels);
        }
        *out++ = a ? c : PRUNED;
    }
}

// The one-level kernel (`expand`) is compiled apart from the several-level one: with the
// deeper levels' code in it, a one-level step ran 6-16 % slower.
__device__ __forceinline__ void expand_nodes(const StepParams &p) {
    start_dependents();
    u64 t = global_thread();
    // The first node's signatures and directory ranks read only the resident tree: with an
    // overlapped launch they are fetched while the previous step finishes. Scanned
    // offsets are written by the scan, so they wait.
    bool early = !p.offsets && t < p.count;
    Descent d;
    if (early) d = descent(p, t);
    wait_prerequisites();
    for (; t < p.count; t += thread_stride(), early = false) {
        if (!early) d = descent(p, t);
        u64 code = code_at(p, p.src_off + t);
        write_children(p, d, code, p.codes_out + (d.first - p.child0));
    }
}

// Steps of 2-3 levels (`expand_levels`): a warp takes its chunks of 32 nodes in order
// (`warp_chunks`); the loop is warp-uniform, as the warp's ranks and scans need all 32
// lanes.
__device__ __forceinline__ void expand_levels_nodes(const StepParams &p) {
    start_dependents();
    const u32 lane = threadIdx.x & 31;
    u64 c, cend;
    warp_chunks(p.count, c, cend);
    u64 next[3];
    Descent d;
    if (c < cend) d = warp_descent(p, c << 5, lane, next, false);
    wait_prerequisites();
    for (bool first = true; c < cend; ++c, first = false) {
        const u64 t = (c << 5) + lane;
        // The chunk's codes are loaded before its descent's chain of signature loads and
        // scans, so that they are in flight with it (0.5 % less time on the web graph).
        const u64 code = t < p.count ? code_at(p, p.src_off + t) : 0;
        if (!first) d = warp_descent(p, c << 5, lane, next, true);
        if (t >= p.count) continue;
        write_descendants(p, (u32)p.width, d, code, p.codes_out + (d.first - p.child0));
    }
}

extern "C" __global__ void expand(StepParams p) { expand_nodes(p); }
// Bounded to 5 blocks of 256 per SM (48 registers, no spills; 56 unbounded: 4 blocks): the
// web graph's tree-only products took 2.8 % less time; 6 blocks (40 registers, 16 B
// spilled) gained less.
extern "C" __global__ void __launch_bounds__(256, 5) expand_levels(StepParams p) { expand_levels_nodes(p); }

// `expand` with the child offsets of `warp_children` (no per-thread
// directory rank): used by the wrank and agg variants on tree-only descents.
extern "C" __global__ void expand_wrank(StepParams p) {
    start_dependents();
    wait_prerequisites();
    const u32 lane = threadIdx.x & 31;
    for (u64 base = global_thread() - lane; base < p.count; base += thread_stride()) {
        u64 t = base + lane;
        bool valid = t < p.count;
        u64 tc = valid ? t : p.count - 1;
        u32 s;
        u64 first;
        if (!p.offsets) {
            warp_children(p, base, p.count, tc, lane, s, first);
        } else {
            s = signature(p.nib, p.node0 + tc);
            first = first_child(p, tc);
        }
        if (!valid) continue;
        u64 code = code_at(p, p.src_off + t);
        u64 out = first - p.child0;
        bool alive = live(p, code != PRUNED, code, p.level);
#pragma unroll
        for (u32 b = 0; b < 4; ++b) {
            if (s & (1u << b)) {
                u64 child = (code << 2) | b;
                if (!live(p, alive, child, p.level + 1)) child = PRUNED;
                p.codes_out[out++] = child;
            }
        }
    }
}
