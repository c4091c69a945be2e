// The subtree descent of a tree-only product (`Tuning::subtree_levels`): a block takes
// SUBTREE_ROOTS consecutive nodes of the step's level and descends their subtrees to the
// leaves by itself, one level's buffer of at most SUBTREE_THREADS nodes in shared memory
// per level below, so the levels in between need neither global scratch nor launches of
// their own. In level order the descendants of consecutive nodes are consecutive on every
// level, so a buffer is a range of a level's nodes: an exclusive scan of their fan-outs
// gives each node's first child from the buffer's first one, and a level needs one
// directory rank per block (its first buffer), after which the next buffer's first child is
// the previous one's plus its fan-out. Buffers are filled depth first: the parents whose
// children fit the buffer below are expanded, that buffer is descended, then the next
// parents. The last internal level's buffer visits its leaves as the `rows` step does (a
// thread per node and vector, read before update). The level-by-level descent writes and
// reads every level's codes in global memory (8 bytes per node each way) and launches a
// kernel per tile and level; this keeps them on chip, for the smallest tree-only working
// set. It is slower, though (cnr-2000 1.7-1.9x, a 200M-edge web graph 1.5-1.9x): a block's
// steps are a chain of loads and barriers, and its subtrees' sizes vary.

#include "leaf_blocks.cuh"

#define SUBTREE_THREADS 256
#define SUBTREE_ROOTS 64
#define SUBTREE_LEVELS 8

// What a block of the subtree descent keeps per level of its subtrees (buffer k holds
// nodes of level `p.level + k`).
struct SubtreeBuffers {
    u64 code[SUBTREE_LEVELS][SUBTREE_THREADS];     // Morton codes (PRUNED: pruned)
    u32 off[SUBTREE_LEVELS][SUBTREE_THREADS + 1];  // exclusive scan of fan-outs, total last
    unsigned char sig[SUBTREE_LEVELS][SUBTREE_THREADS];
    u64 node[SUBTREE_LEVELS];        // global index of the buffer's first node
    u64 first[SUBTREE_LEVELS];       // global index of that node's first child
    u64 next_first[SUBTREE_LEVELS];  // first child of the node after the buffer (~0: unknown)
    u32 fill[SUBTREE_LEVELS];        // nodes in the buffer
    u32 done[SUBTREE_LEVELS];        // nodes whose children have gone to the buffer below
    u32 warp_sums[SUBTREE_THREADS / 32];
};

// Exclusive sum of v over the block's threads, and the total. Ends with a barrier, so
// the sums' scratch may be reused at once.
__device__ __forceinline__ u32 block_exclusive_sum(u32 v, u32 *warp_sums, u32 &total) {
    const u32 lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    u32 incl = warp_inclusive_sum(v);
    if (lane == 31) warp_sums[warp] = incl;
    __syncthreads();
    u32 before = 0, all = 0;
#pragma unroll
    for (u32 w = 0; w < SUBTREE_THREADS / 32; ++w) {
        u32 s = warp_sums[w];
        before += w < warp ? s : 0u;
        all += s;
    }
    total = all;
    __syncthreads();
    return before + incl - v;
}

// Reads the signatures of buffer k's nodes and scans their fan-outs; finds the buffer's
// first child (a warp's directory rank on the level's first buffer, the running count
// after). Ends with a barrier.
__device__ __forceinline__ void subtree_scan(const StepParams &p, SubtreeBuffers &sb, u32 k) {
    const u32 t = threadIdx.x;
    const u32 n = sb.fill[k];
    const u64 node = sb.node[k];
    u32 s = t < n ? signature(p.nib, node + t) : 0u;
    u64 known = sb.next_first[k];
    u64 rank = 0;
    if (known == ~0ull && t < 32) rank = warp_dir_rank(p, node, t);
    sb.sig[k][t] = (unsigned char)s;
    u32 total;
    u32 ex = block_exclusive_sum(__popc(s), sb.warp_sums, total);
    if (t < n) sb.off[k][t] = ex;
    if (t == 0) {
        u64 first = known == ~0ull ? 1 + rank : known;
        sb.off[k][n] = total;
        sb.first[k] = first;
        sb.next_first[k] = first + total;
    }
    __syncthreads();
}

template <typename Op>
__device__ __forceinline__ void subtrees(const StepParams &p) {
    typedef typename Op::T T;
    __shared__ SubtreeBuffers sb;
    start_dependents();
    wait_prerequisites();
    const u32 t = threadIdx.x;
    // Buffer `depth` holds nodes of the last internal level (4x4 blocks of leaves).
    const u32 depth = p.height - 2 - p.level;
    const u64 a = (u64)blockIdx.x * SUBTREE_ROOTS;
    if (a >= p.count) return;
    const u32 roots = (u32)min((u64)SUBTREE_ROOTS, p.count - a);
    if (t < roots) sb.code[0][t] = code_at(p, p.src_off + a + t);
    if (t < SUBTREE_LEVELS) sb.next_first[t] = ~0ull;
    if (t == 0) {
        sb.node[0] = p.node0 + a;
        sb.fill[0] = roots;
        sb.done[0] = 0;
    }
    __syncthreads();
    subtree_scan(p, sb, 0);
    u32 k = 0;
    while (true) {
        const u32 n = sb.fill[k];
        if (k == depth) {
            const u64 leaf0 = sb.first[k];
            const u64 items = (u64)n * p.width;
            for (u64 g = t; g < items; g += SUBTREE_THREADS) {
                u32 q = (u32)(g / p.width);
                u64 b = g - (u64)q * p.width;
                u64 code = sb.code[k][q];
                if (!live(p, code != PRUNED, code, p.level + k)) continue;
                u32 bm = block_bitmap(p.nib, sb.sig[k][q], leaf0 + sb.off[k][q]);
                if (!bm) continue;
                u64 r0 = code_row0(code);
                u64 c0 = code_col0(code);
                T acc[4];
                block_sums<Op>(p, bm, r0, c0, b, acc);
                flush_block<Op>(p, p.dir == 0 ? r0 : c0, b, acc);
            }
            // The level above may refill this buffer next.
            __syncthreads();
            if (k == 0) break;
            --k;
            continue;
        }
        const u32 i = sb.done[k];
        if (i == n) {
            if (k == 0) break;
            --k;
            continue;
        }
        // Parents i .. j: as many as have at most SUBTREE_THREADS children together (the
        // offsets grow with the node, and one node has at most four children).
        const u32 base = sb.off[k][i];
        const u32 q1 = i + 1 + t;
        const u32 j = i + (u32)__syncthreads_count(q1 <= n && sb.off[k][q1] - base <= SUBTREE_THREADS);
        if (t < j - i) {
            const u32 q = i + t;
            const u64 code = sb.code[k][q];
            const u32 s = sb.sig[k][q];
            const bool alive = live(p, code != PRUNED, code, p.level + k);
            u32 o = sb.off[k][q] - base;
#pragma unroll
            for (u32 c = 0; c < 4; ++c) {
                if (s & (1u << c)) {
                    u64 child = (code << 2) | c;
                    sb.code[k + 1][o++] = live(p, alive, child, p.level + k + 1) ? child : PRUNED;
                }
            }
        }
        if (t == 0) {
            sb.done[k] = j;
            sb.node[k + 1] = sb.first[k] + base;
            sb.fill[k + 1] = sb.off[k][j] - base;
            sb.done[k + 1] = 0;
        }
        __syncthreads();
        ++k;
        subtree_scan(p, sb, k);
    }
}

// A block of SUBTREE_THREADS threads.
#define SUBTREE_BOUNDS(Op) __launch_bounds__(SUBTREE_THREADS)

#define K2RPQ_IN_subtrees K2RPQ_FAMILIES
#include "kernels.cuh"
