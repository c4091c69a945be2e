// Leaf steps over the block entries of a cached frontier (`row << 40 | col << 16 |
// bitmap`, src/engine/gpu/frontier.rs): each entry brings its node's 4x4 block, so
// nothing of the tree is read. The `rows` family (include/leaf_rows.cuh) and the `runs`
// family; which one runs is the host's choice (kernels.def).

#include "leaf_rows.cuh"

// The `rows` family over block entries: plain and with warp aggregation, which over
// entries sorted by block row combines a right product's runs of adjacent lanes.
template <typename Op>
__device__ __forceinline__ void blocks_rows(const StepParams &p) { rows_step<Op, false, false, true>(p); }
template <typename Op>
__device__ __forceinline__ void blocks_agg(const StepParams &p) { rows_step<Op, false, true, true>(p); }
template <typename Op>
__device__ __forceinline__ void rowblocks_agg(const StepParams &p) { rows_step<Op, false, true, true, true>(p); }

// The `runs` family, over block entries only: a thread takes N consecutive entries (for
// one vector) and sums the blocks of a run of entries with the same output block in
// registers, with one update per non-empty output entry when the run ends. Over
// `RowBlocks` a right product's runs are the blocks of one block row (11 on average on a
// 200M-edge web graph), with no cross-lane traffic (`wagg` shuffles). Two phases: every
// entry's inputs are loaded before any update is issued, so a thread's N input loads are
// in flight together (loads placed after an update could not be hoisted above it: x and y
// might alias for all the compiler knows). The inputs in flight cost 4N registers per
// 4-byte element: N = 8 for the semirings, N = 4 for bit-packed words, which at N = 8
// fall to a third of the occupancy.
#define RUN_ENTRIES 8
#define RUN_ENTRIES_WIDE 4

// Entries t0 .. t0 + N − 1 of the step (0, an empty block, past its end): N / 2 aligned
// 16-byte loads when the run is whole and aligned.
template <u32 N>
__device__ __forceinline__ void load_run(const StepParams &p, u64 t0, u64 entry[N]) {
    const u64 *src = p.codes_in + p.src_off + t0;
    if (t0 + N <= p.count && ((size_t)src & 15) == 0) {
#pragma unroll
        for (u32 j = 0; j < N; j += 2) {
            ulonglong2 q = *(const ulonglong2 *)(src + j);
            entry[j] = q.x, entry[j + 1] = q.y;
        }
    } else {
#pragma unroll
        for (u32 j = 0; j < N; ++j) entry[j] = t0 + j < p.count ? src[j] : 0ull;
    }
}

// One thread's N entries (for vector b): every entry's inputs are loaded first, then the
// blocks of each run of entries with the same output block are summed. Every run but the
// last is flushed here; the last is left in `acc`, its output block in `cur` (~0 when the
// entries are all empty). Returns whether the entries held more than one run.
template <typename Op, u32 N, typename S = AnyStep>
__device__ __forceinline__ bool lane_runs(const StepParams &p, const u64 entry[N], u64 b, bool read,
                                          u64 &cur, typename Op::T acc[4]) {
    typedef typename Op::T T;
    u32 bm[N];
    T xv[N][4];
#pragma unroll
    for (u32 j = 0; j < N; ++j) {
        bm[j] = entry_active_bitmap<S>(p, entry[j]);
        if (bm[j]) block_inputs<Op, S>(p, bm[j], entry_row0(entry[j]), entry_col0(entry[j]), b, xv[j]);
    }
    cur = ~0ull;  // output block of the open run; never a multiple of 4 when none
    bool several = false;
#pragma unroll
    for (u32 i = 0; i < 4; ++i) acc[i] = Op::identity();
#pragma unroll
    for (u32 j = 0; j < N; ++j) {
        if (!bm[j]) continue;
        u64 o0 = S::dir(p) == 0 ? entry_row0(entry[j]) : entry_col0(entry[j]);
        if (o0 != cur) {
            if (cur != ~0ull) {
                flush_block<Op, S>(p, cur, b, acc, read);
                several = true;
            }
            cur = o0;
        }
        T part[4];
        block_combine<Op>(S::dir(p), bm[j], xv[j], part);
#pragma unroll
        for (u32 i = 0; i < 4; ++i) acc[i] = Op::combine(acc[i], part[i]);
    }
    return several;
}

// The runs of entries in any order.
template <typename Op, u32 N>
__device__ __forceinline__ void runs_step(const StepParams &p) {
    typedef typename Op::T T;
    start_dependents();
    const u64 runs = (p.count + N - 1) / N;
    const u64 total = runs * p.width;
    u64 g = global_thread();
    // The first run's entries (resident) before waiting for the previous step.
    u64 entry[N];
    bool early = g < total;
    if (early) load_run<N>(p, g / p.width * N, entry);
    wait_prerequisites();
    for (; g < total; g += thread_stride(), early = false) {
        u64 r = g / p.width;
        u64 b = g - r * p.width;
        if (!early) load_run<N>(p, r * N, entry);
        u64 cur;
        T acc[4];
        lane_runs<Op, N>(p, entry, b, true, cur, acc);
        if (cur != ~0ull) flush_block<Op>(p, cur, b, acc);
    }
}

// `runs` over entries sorted by the output blocks of direction SORTED: by block row
// (`RowBlocks`, SORTED = 0) for right products, by block column (`ColBlocks`, SORTED = 1)
// for left ones. Lanes take consecutive groups of N entries, so an output block's run
// that spans lanes ends one lane's entries and starts the next lane's. Each lane's last
// run is combined with the runs of the lanes after it that continue it (`reduce_runs`),
// and the first lane of each such run updates y: an atomic per output entry per warp and
// run, with the shuffles of one scan shared by 32 N entries. Updates are blind (see
// `rows_step`). A product in the other direction (no adjacency) takes the per-lane
// flush of `runs_step`.
template <typename Op, u32 N, u32 SORTED, typename S>
__device__ __forceinline__ void sorted_runs_as(const StepParams &p) {
    typedef typename Op::T T;
    start_dependents();
    const u32 lane = threadIdx.x & 31;
    const u64 width = S::width(p);
    const u64 runs = (p.count + N - 1) / N;
    const u64 total = runs * width;
    const bool joined = S::dir(p) == SORTED;
    // Warp-uniform base: every lane takes part in the scan. A lane past the end loads
    // empty entries (`load_run` gives zeros past the step's count).
    u64 base = global_thread() - lane;
    u64 entry[N];
    bool early = base < total;
    if (early) load_run<N>(p, (base + lane) / width * N, entry);
    wait_prerequisites();
    for (; base < total; base += thread_stride(), early = false) {
        u64 g = base + lane;
        u64 r = g / width;
        u64 b = g - r * width;
        if (!early) load_run<N>(p, r * N, entry);
        u64 cur;
        T acc[4];
        bool several = lane_runs<Op, N, S>(p, entry, b, !joined, cur, acc);
        if (joined) {
            u64 key = cur != ~0ull ? cur * width + b : ~0ull;
            // A lane whose entries held several runs starts its last one.
            if (join_runs<Op>(key, several, lane, acc)) flush_block<Op, S>(p, cur, b, acc, false);
        } else if (cur != ~0ull) {
            flush_block<Op, S>(p, cur, b, acc);
        }
    }
}

template <typename Op, u32 N, u32 SORTED>
__device__ __forceinline__ void sorted_runs(const StepParams &p) {
    if (Single<SORTED>::fits(p)) sorted_runs_as<Op, N, SORTED, Single<SORTED>>(p);
    else sorted_runs_as<Op, N, SORTED, AnyStep>(p);
}

// The `runs` family: over entries in level order, sorted by block row, sorted by block
// column.
template <typename Op>
__device__ __forceinline__ void blocks_runs(const StepParams &p) {
    runs_step<Op, sizeof(typename Op::T) == 8 ? RUN_ENTRIES_WIDE : RUN_ENTRIES>(p);
}
template <typename Op>
__device__ __forceinline__ void rowblocks_runs(const StepParams &p) {
    sorted_runs<Op, sizeof(typename Op::T) == 8 ? RUN_ENTRIES_WIDE : RUN_ENTRIES, 0>(p);
}
template <typename Op>
__device__ __forceinline__ void colblocks_runs(const StepParams &p) {
    sorted_runs<Op, sizeof(typename Op::T) == 8 ? RUN_ENTRIES_WIDE : RUN_ENTRIES, 1>(p);
}

// The kernels over sorted entries are bounded to 80 registers (3 blocks of the host's 256
// threads per SM): their general path would take 84, which allocate only 2 blocks per SM,
// and their specialised product then ran 14 % slower.
#define RUN_BOUNDS(Op) __launch_bounds__(256, 3)

#define K2RPQ_IN_leaves_blocks K2RPQ_FAMILIES
#include "kernels.cuh"

