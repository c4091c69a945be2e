// Bit-packed right products y = A x (one u64 word per node) over a frontier laid out in
// row windows (src/engine/gpu/frontier.rs, `RowWindows`): windows of WINDOW block entries,
// sorted by block row, that no block row's run crosses. The warp that takes a window is
// the only writer of its rows' words, so it stores them once: no clear of y, no atomics,
// no reads of y (docs/BENCHMARKS.md, sessions 18-19). The exceptions are the runs longer
// than a window, cut into *shared parts* (each starts a window behind a marker): their
// rows are cleared first (`clear_block_rows`) and take atomic ORs. The product may start
// with the clear (an overlapped launch, src/engine/gpu/mod.rs): it waits for the clear
// before its first atomic OR only, so its loads and gathers overlap the clear's launch.
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

#define WINDOW 128
#define WINDOW_WARPS 8
#define PAD_ROW 0xFFFFFFu
#define SHARED_PART 0x80000000u
#define NO_ROW 0x7FFFFFFFu
#define FULL_MASK 0xffffffffu

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

// y = A x over `windows` windows of `entries` (fewer than 2^32); x has `inputs` words, y
// `n`. Blocks of WINDOW_WARPS warps; a warp takes windows with the grid stride and loads
// the next window's entries before this one's gathers, so its chain of loads per window is
// the x gathers alone. Bounded to 64 registers (4 blocks per SM): the product is bound by
// latency, and 75 registers (3 blocks) made it 10 % slower (docs/BENCHMARKS.md, session
// 18); window indices in 32 bits (session 19). The window loads are written out here, with
// the thread index computed in 64 bits: so written, ptxas emits the SASS of the experiment's
// `rowwin_u32_half` (1157 instructions, 8 B spilled), 3.6 % faster on the web graph than
// the same loads through a helper taking `u32 w` (1237, none spilled; session 21).
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
        // halves (columns 0-1, 2-3) the entry's cells read: fewer load instructions, −5 %
        // on the web graph (docs/BENCHMARKS.md, session 19).
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
            u32 bm = window_bitmap(e[j]);
#pragma unroll
            for (int r = 0; r < 4; ++r)
#pragma unroll
                for (int c = 0; c < 4; ++c)
                    if ((bm >> (4 * r + c)) & 1) acc[r] |= xv[j][c];
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

// Zeroes the four words of each block row in rows[0 .. count) (y: n words), before a
// product whose shared parts OR into them.
extern "C" __global__ void clear_block_rows(const u32 *rows, u64 count, u64 *y, u64 n) {
    start_dependents();  // the product's blocks may start now (they wait before their ORs)
    for (u64 i = (u64)blockIdx.x * blockDim.x + threadIdx.x; i < count * 4; i += (u64)gridDim.x * blockDim.x) {
        u64 at = (u64)rows[i / 4] * 4 + i % 4;
        if (at < n) y[at] = 0ull;
    }
}
