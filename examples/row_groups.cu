// The right product of a bit-packed batch of 64 (one u64 word per node) over *row groups*
// (examples/row_groups.rs): an experiment of issue 10, session 31, not an engine kernel.
//
// Who owns what: a warp owns 32 / g block rows, a group of g consecutive lanes (g a power
// of two, the same for the warp) each. Lane k of a group reads entries k, k + g, k + 2g,
// ... of its row, which the layout stores so that iteration j of the warp's lanes reads 32
// consecutive slots (one coalesced 256-byte load): slot j * 32 + lane. A lane ORs its
// entries' cells into four words in registers; the group combines them by shuffles; the
// group's first lane stores the row's four words. No run logic, no window ownership and no
// shared memory: every lane of a warp runs the same number of iterations (the warp's
// rows were binned by length). Every block row is in exactly one group (an empty row's
// group stores zeros), so y needs no clear, except for the rows longer than one group
// can take in `iters` iterations: they are cut into pieces of a warp each, marked
// SHARED_ROW, cleared first (`clear_rows4`) and updated with atomics.
//
// desc[w] = (first slot, iterations, log2 g | BLOCK_ROW, first row of rows[]); rows[]: a
// group's block row (SHARED_ROW set: a piece), or NONE_ROW for a group without one. A row
// too long for a warp but not for a block may instead take a block of its own (BLOCK_ROW
// on its 8 warps): they combine their words in shared memory and store the row once, so
// it needs no clear.
typedef unsigned long long u64;
typedef unsigned int u32;

#define FULL_MASK 0xFFFFFFFFu
#define NONE_ROW 0xFFFFFFFFu
#define SHARED_ROW 0x80000000u
#define BLOCK_ROW 0x100u
#define WARPS_PER_BLOCK 8

__device__ __forceinline__ u32 bitmap_of(u64 e) { return (u32)(e & 0xFFFFull); }
__device__ __forceinline__ u64 col_of(u64 e) { return (e >> 16) & 0xFFFFFFull; }

// The x words of the columns entry e's cells read (0 for the others): only the halves
// (columns 0-1, 2-3) with cells, as the engine's rowwindows_bits.
__device__ __forceinline__ void gather(u64 e, const u64 *x, u64 inputs, u64 xv[4]) {
    const u32 bm = bitmap_of(e);
    const u64 c0 = col_of(e) * 4;
    xv[0] = xv[1] = xv[2] = xv[3] = 0ull;
    if (bm == 0) return;
    if (c0 + 4 <= inputs) {
        if (bm & 0x3333u) {
            const ulonglong2 p = *(const ulonglong2 *)(x + c0);
            xv[0] = p.x, xv[1] = p.y;
        }
        if (bm & 0xCCCCu) {
            const ulonglong2 q = *(const ulonglong2 *)(x + c0 + 2);
            xv[2] = q.x, xv[3] = q.y;
        }
    } else {
#pragma unroll
        for (int c = 0; c < 4; ++c) xv[c] = c0 + c < inputs ? x[c0 + c] : 0ull;
    }
}

// acc[r] |= x word of column c for every cell (r, c) of the bitmap.
__device__ __forceinline__ void combine(u32 bm, const u64 xv[4], u64 acc[4]) {
#pragma unroll
    for (int r = 0; r < 4; ++r)
#pragma unroll
        for (int c = 0; c < 4; ++c)
            if ((bm >> (4 * r + c)) & 1u) acc[r] |= xv[c];
}

// Writes the four words of block row `head` (SHARED_ROW: ORs them; n: words of y).
__device__ __forceinline__ void store_row(u64 *y, u64 n, u32 head, const u64 acc[4]) {
    const u64 r0 = (u64)(head & ~SHARED_ROW) * 4;
    if (head & SHARED_ROW) {
#pragma unroll
        for (int i = 0; i < 4; ++i)
            if (r0 + i < n && acc[i]) atomicOr(&y[r0 + i], acc[i]);
    } else if (r0 + 4 <= n) {
        *(ulonglong2 *)(y + r0) = make_ulonglong2(acc[0], acc[1]);
        *(ulonglong2 *)(y + r0 + 2) = make_ulonglong2(acc[2], acc[3]);
    } else {
#pragma unroll
        for (int i = 0; i < 4; ++i)
            if (r0 + i < n) y[r0 + i] = acc[i];
    }
}

// UNROLL iterations' slots are loaded, then all their x gathers, then their sums: the
// loads of an unrolled round are in flight together.
template <int UNROLL>
__device__ __forceinline__ void group_product(const u64 *slots, const uint4 *desc, u32 warps, const u32 *rows,
                                              const u64 *x, u64 inputs, u64 *y, u64 n) {
    const u32 lane = threadIdx.x & 31;
    const u32 w = (u32)(((u64)blockIdx.x * blockDim.x + threadIdx.x) >> 5);
    if (w >= warps) return;  // warp-uniform
    const uint4 d = desc[w];
    const u64 *s = slots + d.x + lane;
    u64 acc[4] = {0ull, 0ull, 0ull, 0ull};
    for (u32 j = 0; j < d.y; j += UNROLL) {
        u64 e[UNROLL];
#pragma unroll
        for (int u = 0; u < UNROLL; ++u) e[u] = j + u < d.y ? s[(u64)(j + u) * 32] : 0ull;
        u64 xv[UNROLL][4];
#pragma unroll
        for (int u = 0; u < UNROLL; ++u) gather(e[u], x, inputs, xv[u]);
#pragma unroll
        for (int u = 0; u < UNROLL; ++u) combine(bitmap_of(e[u]), xv[u], acc);
    }
    const u32 lg = d.z & 0xFFu, g = 1u << lg;
    for (u32 off = 1; off < g; off <<= 1)
#pragma unroll
        for (int i = 0; i < 4; ++i) acc[i] |= __shfl_xor_sync(FULL_MASK, acc[i], off);
    if (d.z & BLOCK_ROW) {
        // All 8 warps of this block hold pieces of one row (block-uniform: the layout
        // aligns them to the block and gives the grid's first blocks to them).
        __shared__ u64 part[WARPS_PER_BLOCK][4];
        const u32 warp = threadIdx.x >> 5;
        if (lane < 4) part[warp][lane] = lane == 0 ? acc[0] : lane == 1 ? acc[1] : lane == 2 ? acc[2] : acc[3];
        __syncthreads();
        if (warp == 0 && lane < 4) {
            u64 v = 0ull;
#pragma unroll
            for (int k = 0; k < WARPS_PER_BLOCK; ++k) v |= part[k][lane];
            const u64 at = (u64)rows[d.w] * 4 + lane;
            if (at < n) y[at] = v;
        }
        return;
    }
    if ((lane & (g - 1)) == 0) {
        const u32 row = rows[d.w + (lane >> lg)];
        if (row != NONE_ROW) store_row(y, n, row, acc);
    }
}

#define GROUP_KERNEL(NAME, UNROLL, MIN_BLOCKS)                                                                   \
    extern "C" __global__ void __launch_bounds__(32 * WARPS_PER_BLOCK, MIN_BLOCKS)                              \
        NAME(const u64 *slots, const uint4 *desc, u32 warps, const u32 *rows, const u64 *x, u64 inputs, u64 *y, \
             u64 n) {                                                                                            \
        group_product<UNROLL>(slots, desc, warps, rows, x, inputs, y, n);                                        \
    }

GROUP_KERNEL(groups_u4, 4, 4)
GROUP_KERNEL(groups_u2, 2, 4)
GROUP_KERNEL(groups_u4_b5, 4, 5)
GROUP_KERNEL(groups_u8, 8, 3)

// Zeroes the four words of each block row in rows[0 .. count) (y: n words).
extern "C" __global__ void clear_rows4(const u32 *rows, u64 count, u64 *y, u64 n) {
    for (u64 i = (u64)blockIdx.x * blockDim.x + threadIdx.x; i < count * 4; i += (u64)gridDim.x * blockDim.x) {
        const u64 at = (u64)rows[i / 4] * 4 + i % 4;
        if (at < n) y[at] = 0ull;
    }
}
