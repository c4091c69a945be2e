// Navigation of a k²-tree on the device: signatures, directory ranks, Morton codes, the
// pyramid of active input blocks of a masked traversal, and a node's 4x4 block of cells.
#ifndef K2RPQ_TREE_CUH
#define K2RPQ_TREE_CUH

#include "params.cuh"
#include "warp.cuh"

// A frontier slot whose node was pruned by a masked traversal.
#define PRUNED 0xFFFFFFFFFFFFFFFFull

// The signature of node j (global index in level order): which of its four children exist.
__device__ __forceinline__ u32 signature(const u64 *nib, u64 j) {
    return (u32)((nib[j >> 4] >> ((j & 15) * 4)) & 15);
}

// Signatures of nodes j, j + 1, .. (n ≤ 16 of them, n ≥ 1), node j in the low nibble;
// the bits above the n-th nibble are whatever follows in the words. One or two loads.
__device__ __forceinline__ u64 signature_run(const u64 *nib, u64 j, u32 n) {
    u64 w = j >> 4;
    u32 sh = (u32)(j & 15) * 4;
    u64 run = nib[w] >> sh;
    if (sh + 4 * n > 64) run |= nib[w + 1] << (64 - sh);
    return run;
}

// The signatures of n ≤ 16 consecutive nodes from node j (0 when n = 0), node j in the
// low nibble and nothing above the n-th.
__device__ __forceinline__ u64 signatures(const u64 *nib, u64 j, u32 n) {
    if (n == 0) return 0;
    u64 run = signature_run(nib, j, n);
    return n == 16 ? run : run & ((1ull << (4 * n)) - 1);
}

// rank(j): set bits in the signatures of nodes 0..j, from the sampled directory plus the
// popcount of at most 2^sample_log2 / 16 words.
__device__ __forceinline__ u64 dir_rank(const u64 *nib, const u64 *ranks, u32 sample_log2, u64 j) {
    u64 k = j >> sample_log2;
    u64 r = ranks[k];
    u64 w = (k << sample_log2) >> 4;
    u64 end = j >> 4;
    for (; w < end; ++w) r += __popcll(nib[w]);
    u32 rem = (u32)(j & 15);
    if (rem) r += __popcll(nib[end] & ((1ull << (4 * rem)) - 1));
    return r;
}

// Global index of the first child of the step's node t (global index node0 + t).
__device__ __forceinline__ u64 first_child(const StepParams &p, u64 t) {
    if (p.offsets) return p.child0 + p.offsets[t];
    return 1 + dir_rank(p.nib, p.ranks, p.sample_log2, p.node0 + t);
}

// rank(j) computed by a whole warp (all 32 lanes, the same j): lane i popcounts signature
// words i, i + 32, ... of the sample block, and a warp sum adds them (all lanes get it).
__device__ __forceinline__ u64 warp_dir_rank(const StepParams &p, u64 j, u32 lane) {
    u64 k = j >> p.sample_log2;
    u64 w0 = (k << p.sample_log2) >> 4;
    u64 end = j >> 4;
    u32 c = 0;
    for (u64 w = w0 + lane; w < end; w += 32) c += __popcll(p.nib[w]);
    u32 rem = (u32)(j & 15);
    if (lane == 0 && rem) c += __popcll(p.nib[end] & ((1ull << (4 * rem)) - 1));
    c = __reduce_add_sync(FULL_MASK, c);
    return p.ranks[k] + c;
}

// Signature and first child (global index) of node t of the step, for the lanes of a warp
// whose items g = base + lane (g < total) map to nodes t = g / width. Lane i loads the
// signature of node base / width + i, the warp scans the fan-outs, and each lane picks its
// node's values. Must be called by all 32 lanes with the same base.
__device__ __forceinline__ void warp_children(const StepParams &p, u64 base, u64 total, u64 t,
                                              u32 lane, u32 &s, u64 &first) {
    u64 tf = base / p.width;
    u64 last = min(base + 31, total - 1) / p.width;
    u64 tj = tf + lane;
    u32 sj = tj <= last ? signature(p.nib, p.node0 + tj) : 0u;
    u32 f = __popc(sj);
    u32 incl = warp_inclusive_sum(f);
    u64 first0 = 1 + warp_dir_rank(p, p.node0 + tf, lane);
    u32 src = (u32)(min(t, last) - tf);
    s = __shfl_sync(FULL_MASK, sj, src);
    first = first0 + __shfl_sync(FULL_MASK, incl - f, src);
}

// Gathers the even bits of x (the column of a Morton code; x >> 1 gives the row).
__device__ __forceinline__ u32 compact_bits(u64 x) {
    x &= 0x5555555555555555ull;
    x = (x | (x >> 1)) & 0x3333333333333333ull;
    x = (x | (x >> 2)) & 0x0F0F0F0F0F0F0F0Full;
    x = (x | (x >> 4)) & 0x00FF00FF00FF00FFull;
    x = (x | (x >> 8)) & 0x0000FFFF0000FFFFull;
    x = (x | (x >> 16)) & 0x00000000FFFFFFFFull;
    return (u32)x;
}

// Swaps the bits of x under mask m with those s places above them (a delta swap).
__device__ __forceinline__ u32 delta_swap(u32 x, u32 m, u32 s) {
    u32 t = (x ^ (x >> s)) & m;
    return x ^ t ^ (t << s);
}

// The row (odd bits) and column (even bits) of a Morton code, both at once: an outer
// unshuffle of each 32-bit half (H. S. Warren, Hacker's Delight, 7-2) puts a half's
// column bits in its low 16 bits and its row bits in its high 16, and two byte permutes
// join the halves. 32-bit operations throughout, against two 64-bit `compact_bits`.
__device__ __forceinline__ void morton_row_col(u64 code, u32 &row, u32 &col) {
    u32 h[2] = {(u32)code, (u32)(code >> 32)};
#pragma unroll
    for (u32 i = 0; i < 2; ++i) {
        u32 x = delta_swap(h[i], 0x22222222u, 1);
        x = delta_swap(x, 0x0C0C0C0Cu, 2);
        x = delta_swap(x, 0x00F000F0u, 4);
        h[i] = delta_swap(x, 0x0000FF00u, 8);
    }
    col = __byte_perm(h[0], h[1], 0x5410);
    row = __byte_perm(h[0], h[1], 0x7632);
}

// Words of pyramid level g for a tree of height h: one bit per block of 2^g input indices.
__device__ __forceinline__ u64 pyramid_words(u32 h, u32 g) {
    u64 bits = 1ull << (h - g);
    return (bits + 31) >> 5;
}

// Offset of pyramid level g in words (the levels below it come first).
__device__ __forceinline__ u64 pyramid_offset(u32 h, u32 g) {
    u64 off = 0;
    for (u32 k = 0; k < g; ++k) off += pyramid_words(h, k);
    return off;
}

// Whether input block `idx` of a node at `level` (its input range, right: columns
// idx·2^g .., left: rows, g = height − level) meets an active input row.
__device__ __forceinline__ bool input_active(const StepParams &p, u32 idx, u32 level) {
    u32 g = p.height - level;
    const u32 *lvl = p.pyramid + pyramid_offset(p.height, g);
    return (lvl[idx >> 5] >> (idx & 31)) & 1;
}

// Whether the node of Morton code `code` at `level` has an input range that meets an
// active input row.
__device__ __forceinline__ bool block_active(const StepParams &p, u64 code, u32 level) {
    return input_active(p, p.dir == 0 ? compact_bits(code) : compact_bits(code >> 1), level);
}

// Whether the node of Morton code `code` at `level` takes part in the step: `alive` (its
// parent is live, or for a step's own nodes, its code is not PRUNED), and in a masked
// traversal its input range meets an active input.
__device__ __forceinline__ bool live(const StepParams &p, bool alive, u64 code, u32 level) {
    return alive && (!p.pyramid || block_active(p, code, level));
}

// The first row and column of cells of the 4x4 block of the last-internal-level node with
// Morton code `code`.
__device__ __forceinline__ u64 code_row0(u64 code) { return (u64)compact_bits(code >> 1) << 2; }
__device__ __forceinline__ u64 code_col0(u64 code) { return (u64)compact_bits(code) << 2; }

// A block entry of the cached frontier: `row << 40 | col << 16 | bitmap`
// (src/engine/gpu/frontier.rs): its first row and column of cells, and its bitmap.
__device__ __forceinline__ u64 entry_row0(u64 e) { return (e >> 40) << 2; }
__device__ __forceinline__ u64 entry_col0(u64 e) { return ((e >> 16) & 0xFFFFFFull) << 2; }
__device__ __forceinline__ u32 entry_bitmap(u64 e) { return (u32)(e & 0xFFFFull); }

// The 4x4 block of a node of signature `s` from the signatures of its leaves (`run`, the
// first leaf in the low nibble): bit 4r + c is cell (r, c) of the block.
__device__ __forceinline__ u32 block_of_run(u32 s, u64 run) {
    u32 bm = 0;
#pragma unroll
    for (u32 q = 0; q < 4; ++q) {
        if (s & (1u << q)) {
            u32 lam = (u32)(run & 15);
            run >>= 4;
            // Leaf cell e = 2 * row + col; leaf q = 2 * row + col of the 2x2 leaves.
            u32 spread = (lam & 3u) | ((lam & 12u) << 2);
            bm |= spread << ((q >> 1) * 8 + (q & 1) * 2);
        }
    }
    return bm;
}
// The same for the node whose leaves start at global index `leaf`: the leaves' nibbles
// are contiguous, so one or two word loads fetch them all.
__device__ __forceinline__ u32 block_bitmap(const u64 *nib, u32 s, u64 leaf) {
    u32 n = __popc(s);
    return n == 0 ? 0u : block_of_run(s, signature_run(nib, leaf, n));
}

#endif
