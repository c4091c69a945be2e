// Bit-packed right products that store each word of y once: over row windows
// (`rowwindows_bits`) and over row groups (`rowgroups_bits`), with the clear of the rows
// whose parts several warps OR into (`clear_block_rows`).
//
// Bit-packed right products y = A x (one u64 word per node) over a frontier laid out in row
// windows (src/engine/gpu/frontier.rs, `RowWindows`): windows of WINDOW block entries,
// sorted by block row, that no block row's run crosses. The warp that takes a window is the
// only writer of its rows' words, so it stores them once: no clear of y, no atomics, no
// reads of y. The exceptions are the runs longer than a window, cut into *shared parts*
// (each starts a window behind a marker): their rows are cleared first (`clear_block_rows`)
// and take atomic ORs. The product may start with the clear (an overlapped launch,
// src/engine/gpu/mod.rs): it waits for the clear before its first atomic OR only, so its
// loads and gathers overlap the clear's launch.
//
// Entries without cells are markers: an empty block row's (`row << 40`: its words are
// stored as zeros), padding (row PAD_ROW: nothing) and a shared part's start (`row << 40
// | 1 << 16`).
//
// Who owns what: lane i of a warp takes entries 4i .. 4i + 3 of the window. A run that
// starts in a lane goes on through the lanes after it up to the next lane where a run
// starts; the starting lane owns the run. Each lane hands the sums of its entries before
// its first start (its leading part) to the owner through shared memory, and the owner
// stores the run's four words.

#include "base.cuh"

#define WINDOW 128
#define WINDOW_WARPS 8
#define PAD_ROW 0xFFFFFFu
#define SHARED_PART 0x80000000u
#define NO_ROW 0x7FFFFFFFu

__device__ __forceinline__ u32 window_bitmap(u64 e) { return (u32)(e & 0xFFFFull); }
__device__ __forceinline__ u64 window_col(u64 e) { return (e >> 16) & 0xFFFFFFull; }

// Whether entry e starts a run, after entry `prev` of the window: every marker does, and
// every change of block row.
__device__ __forceinline__ bool starts_run(u64 e, u64 prev) {
    return window_bitmap(e) == 0 || (e >> 40) != (prev >> 40);
}

// The block row a run that starts at entry e writes (NO_ROW: none, padding), with
// SHARED_PART set for a shared part.
__device__ __forceinline__ u32 run_row(u64 e) {
    u32 row = (u32)(e >> 40);
    if (row == PAD_ROW) return NO_ROW;
    return window_bitmap(e) == 0 && window_col(e) == 1 ? row | SHARED_PART : row;
}

// Writes the four words of block row `head` (n: words of y).
__device__ __forceinline__ void store_run(u64 *y, u64 n, u32 head, const u64 acc[4]) {
    u32 row = head & ~SHARED_PART;
    if (row == NO_ROW) return;
    u64 r0 = (u64)row * 4;
    if (head & SHARED_PART) {
        wait_prerequisites();  // for the clear of the shared rows (at once after a first call)
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

// x words p[0], p[1] into (a, b) when `cells` is not 0; otherwise a and b keep what they
// held. One load under a predicate: the lanes that skip it zero no registers, since
// `or_cells_under` reads a word only under a cell of its column (`rowgroups_bits`).
__device__ __forceinline__ void load_half(const u64 *p, u32 cells, u64 &a, u64 &b) {
    asm("{\n\t.reg .pred q;\n\tsetp.ne.u32 q, %2, 0;\n\t@q ld.global.v2.u64 {%0, %1}, [%3];\n\t}"
        : "+l"(a), "+l"(b)
        : "r"(cells), "l"(p));
}

// acc[r] |= xv[c] for every cell (r, c) of bitmap bm, each OR under its cell's predicate:
// one instruction per cell and 32-bit half, and xv[c] read only where column c has a cell.
// Written as C (`if (bit) acc[r] |= xv[c]`), NVRTC selected every word and ORed the
// selections: ~55 instructions per entry instead of ~36. Both kernels sum this way
// (`rowgroups_bits` 12 % and `rowwindows_bits` 3 % less time on cnr-2000).
__device__ __forceinline__ void or_cells_under(u32 bm, const u64 xv[4], u64 acc[4]) {
#pragma unroll
    for (int r = 0; r < 4; ++r)
#pragma unroll
        for (int c = 0; c < 4; ++c)
            asm("{\n\t.reg .pred q;\n\t.reg .b32 t;\n\tand.b32 t, %1, %3;\n\tsetp.ne.u32 q, t, 0;\n\t@q or.b64 %0, %0, %2;\n\t}"
                : "+l"(acc[r])
                : "r"(bm), "l"(xv[c]), "r"(1u << (4 * r + c)));
}

// y = A x over `windows` windows of `entries` (fewer than 2^32); x has `inputs` words, y
// `n`. Blocks of WINDOW_WARPS warps; a warp takes windows with the grid stride and loads
// the next window's entries before this one's gathers, so its chain of loads per window is
// the x gathers alone. Bounded to 64 registers (4 blocks per SM): the product is bound by
// latency, and 75 registers (3 blocks) made it 10 % slower; window indices are 32 bits.
// The window loads are written out here, with the thread index computed in 64 bits: so
// written, ptxas emits 1157 instructions (8 B spilled), 3.6 % faster on the web graph
// than the same loads through a helper taking `u32 w` (1237 instructions, none spilled).
extern "C" __global__ void __launch_bounds__(32 * WINDOW_WARPS, 4)
    rowwindows_bits(const u64 *entries, u64 windows, const u64 *x, u64 inputs, u64 *y, u64 n) {
    // The leading parts of a warp's lanes, for the owners of their runs.
    __shared__ u64 leading[WINDOW_WARPS][32][4];
    const u32 lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const u32 stride = (u32)(((u64)gridDim.x * blockDim.x) >> 5), count = (u32)windows;
    u32 w = (u32)(((u64)blockIdx.x * blockDim.x + threadIdx.x) >> 5);
    ulonglong2 na, nb;
    if (w < count) {
        const u64 *src = entries + (u64)w * WINDOW + lane * 4;
        na = *(const ulonglong2 *)src, nb = *(const ulonglong2 *)(src + 2);
    }
    for (; w < count; w += stride) {
        ulonglong2 a = na, b = nb;
        if (w + stride < count) {
            const u64 *src = entries + (u64)(w + stride) * WINDOW + lane * 4;
            na = *(const ulonglong2 *)src, nb = *(const ulonglong2 *)(src + 2);
        }
        u64 e[4] = {a.x, a.y, b.x, b.y};
        // The entry before this lane's first (lane 0's first always starts a run).
        u64 before = __shfl_up_sync(FULL_MASK, e[3], 1);
        // Every entry's x words before any sum: the gathers in flight together. Only the
        // halves (columns 0-1, 2-3) the entry's cells read: fewer load instructions, 5 %
        // less time on the web graph.
        u64 xv[4][4];
#pragma unroll
        for (int j = 0; j < 4; ++j) {
            u64 c0 = window_col(e[j]) * 4;
            u32 bm = window_bitmap(e[j]);
            bool cells = bm != 0;
            if (cells && c0 + 4 <= inputs) {
                ulonglong2 p = make_ulonglong2(0ull, 0ull), q = p;
                if (bm & 0x3333u) p = *(const ulonglong2 *)(x + c0);
                if (bm & 0xCCCCu) q = *(const ulonglong2 *)(x + c0 + 2);
                xv[j][0] = p.x, xv[j][1] = p.y, xv[j][2] = q.x, xv[j][3] = q.y;
            } else {
#pragma unroll
                for (int c = 0; c < 4; ++c) xv[j][c] = cells && c0 + c < inputs ? x[c0 + c] : 0ull;
            }
        }
        u64 acc[4] = {0ull, 0ull, 0ull, 0ull};
        bool open = false;
        u32 head = NO_ROW;
#pragma unroll
        for (int j = 0; j < 4; ++j) {
            if ((lane == 0 && j == 0) || starts_run(e[j], j == 0 ? before : e[j - 1])) {
                // A start ends the lane's run before it (whole: stored) or its leading part.
                if (open) {
                    store_run(y, n, head, acc);
                } else {
                    *(ulonglong2 *)&leading[warp][lane][0] = make_ulonglong2(acc[0], acc[1]);
                    *(ulonglong2 *)&leading[warp][lane][2] = make_ulonglong2(acc[2], acc[3]);
                }
#pragma unroll
                for (int r = 0; r < 4; ++r) acc[r] = 0ull;
                open = true;
                head = run_row(e[j]);
            }
            or_cells_under(window_bitmap(e[j]), xv[j], acc);
        }
        if (!open) {
            *(ulonglong2 *)&leading[warp][lane][0] = make_ulonglong2(acc[0], acc[1]);
            *(ulonglong2 *)&leading[warp][lane][2] = make_ulonglong2(acc[2], acc[3]);
        }
        // An owner's run goes on through the lanes after it up to the next lane with a
        // start, whose leading part ends the run.
        u32 owners = __ballot_sync(FULL_MASK, open);
        u32 next = owners & ~((2u << lane) - 1u);
        u32 last = next ? __ffs(next) - 1 : 31;
        __syncwarp();
        if (open) {
            for (u32 k = lane + 1; k <= last; ++k) {
                ulonglong2 lo = *(const ulonglong2 *)&leading[warp][k][0];
                ulonglong2 hi = *(const ulonglong2 *)&leading[warp][k][2];
                acc[0] |= lo.x, acc[1] |= lo.y, acc[2] |= hi.x, acc[3] |= hi.y;
            }
            store_run(y, n, head, acc);
        }
        // The leading parts are rewritten by the next window only after every lane read.
        __syncwarp();
    }
}

// Bit-packed right products y = A x over a frontier's row groups
// (src/engine/gpu/row_groups.rs): a warp owns 32 / g block rows, a group of g lanes each
// (g a power of two, the same for the warp), and every lane of the warp runs the same
// iterations (its rows were binned by length). Lane k of a group reads entries k, k + g,
// ... of its row from slot j * 32 + lane (a slot: cols[] and cells[], the entry's block
// column and bitmap, each loaded coalesced per iteration), ORs their cells' x words into
// four words, and the group combines them by shuffles; its first lane stores the row. No
// run logic crosses lanes, so a warp issues 42 % fewer instructions than over row windows
// (cnr-2000). A block whose warps are marked BLOCK_ROW holds one long row (the
// layout puts such blocks first, whole): its warps combine their words in shared memory
// and one stores the row, so it needs no clear. Longer rows are cut into pieces of a warp
// (SHARED_PART: cleared first, atomic ORs, as `store_run`).
// desc[w] = (first slot, iterations, log2 g | BLOCK_ROW, first entry of rows[]).
#define GROUP_WARPS 8
#define BLOCK_ROW 0x100u

// Iterations per round: a round's slot loads, then its gathers, then its sums (the loads
// of a round in flight together).
#define GROUP_ROUND 2

// Two iterations per round (four spilled registers and ran 5-7 % slower). The sums are
// ORs under predicates and the x halves predicated loads (`or_cells_under`,
// `load_half`): 113 instructions a round where the C form took 176.
extern "C" __global__ void __launch_bounds__(32 * GROUP_WARPS, 4)
    rowgroups_bits(const u32 *cols, const unsigned short *cells, const uint4 *desc, u32 warps, const u32 *rows,
                   const u64 *x, u64 inputs, u64 *y, u64 n) {
    const u32 lane = threadIdx.x & 31;
    const u32 w = (u32)(((u64)blockIdx.x * blockDim.x + threadIdx.x) >> 5);
    if (w >= warps) return;  // warp-uniform; a BLOCK_ROW block has all its warps
    const uint4 d = desc[w];
    // The lane's row, loaded beside the first slots rather than after the gathers: one load
    // fewer in the chain that ends each warp. (A BLOCK_ROW warp's lanes all read rows[d.w].)
    const u32 lg = d.z & 0xFFu, g = 1u << lg;
    const u32 head = rows[d.w + (lane >> lg)];
    // Block columns whose four words all lie in x (the last one may not: it is read word by
    // word). Passed through an empty asm so that ptxas keeps it in a register instead of
    // computing it again each round (4 instructions a round).
    u32 whole = inputs / 4 < 0xFFFFFFFFull ? (u32)(inputs / 4) : 0xFFFFFFFFu;
    asm("mov.u32 %0, %0;" : "+r"(whole));
    const u32 *c = cols + d.x + lane;
    const unsigned short *b = cells + d.x + lane;
    u64 acc[4] = {0ull, 0ull, 0ull, 0ull};
    // Each round's x words; a word is set only where its column has a cell (`load_half`).
    u64 xv[GROUP_ROUND][4];
    for (u32 j = 0; j < d.y; j += GROUP_ROUND, c += GROUP_ROUND * 32, b += GROUP_ROUND * 32) {
        u32 col[GROUP_ROUND], bm[GROUP_ROUND];
#pragma unroll
        for (int u = 0; u < GROUP_ROUND; ++u) {
            const bool in = j + u < d.y;
            col[u] = in ? c[u * 32] : 0u;
            bm[u] = in ? b[u * 32] : 0u;
        }
#pragma unroll
        for (int u = 0; u < GROUP_ROUND; ++u) {
            const u64 *p = x + (u64)col[u] * 4;
            const u32 inside = col[u] < whole ? bm[u] : 0u;
            load_half(p, inside & 0x3333u, xv[u][0], xv[u][1]);
            load_half(p + 2, inside & 0xCCCCu, xv[u][2], xv[u][3]);
            if (inside != bm[u]) {
#pragma unroll
                for (int k = 0; k < 4; ++k) xv[u][k] = (u64)col[u] * 4 + k < inputs ? p[k] : 0ull;
            }
        }
#pragma unroll
        for (int u = 0; u < GROUP_ROUND; ++u) or_cells_under(bm[u], xv[u], acc);
    }
    for (u32 off = 1; off < g; off <<= 1)
#pragma unroll
        for (int i = 0; i < 4; ++i) acc[i] |= __shfl_xor_sync(FULL_MASK, acc[i], off);
    if (d.z & BLOCK_ROW) {
        // Block-uniform: every warp of this block holds a piece of the same row.
        __shared__ u64 part[GROUP_WARPS][4];
        const u32 warp = threadIdx.x >> 5;
        if (lane < 4) part[warp][lane] = lane == 0 ? acc[0] : lane == 1 ? acc[1] : lane == 2 ? acc[2] : acc[3];
        __syncthreads();
        if (warp == 0 && lane < 4) {
            u64 v = 0ull;
#pragma unroll
            for (int k = 0; k < GROUP_WARPS; ++k) v |= part[k][lane];
            const u64 at = (u64)head * 4 + lane;
            if (at < n) y[at] = v;
        }
        return;
    }
    if ((lane & (g - 1)) == 0) store_run(y, n, head, acc);
}

// Zeroes the four words of each block row in rows[0 .. count) (y: n words), before a
// product whose shared parts OR into them.
extern "C" __global__ void clear_block_rows(const u32 *rows, u64 count, u64 *y, u64 n) {
    start_dependents();  // the product's blocks may start now (they wait before their ORs)
    for (u64 i = (u64)blockIdx.x * blockDim.x + threadIdx.x; i < count * 4; i += (u64)gridDim.x * blockDim.x) {
        u64 at = (u64)rows[i / 4] * 4 + i % 4;
        if (at < n) y[at] = 0ull;
    }
}

