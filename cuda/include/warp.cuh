// Warp-wide scans, reductions and chunks of work. `Op` is a semiring of semirings.cuh.
#ifndef K2RPQ_WARP_CUH
#define K2RPQ_WARP_CUH

#include "base.cuh"

// Inclusive sum of v over lanes 0 .. this lane of the warp. All 32 lanes must call it.
__device__ __forceinline__ u32 warp_inclusive_sum(u32 v) {
    const u32 lane = threadIdx.x & 31;
#pragma unroll
    for (u32 o = 1; o < 32; o <<= 1) {
        u32 u = __shfl_up_sync(FULL_MASK, v, o);
        if (lane >= o) v += u;
    }
    return v;
}

// The chunks of 32 consecutive items (nodes) that this warp takes in a row, [c, cend):
// the step's chunks split evenly over the grid's warps (the host launches a lane per few
// items: `launch::chunked_config`, `Tuning::warp_chunks`). The descendants of
// consecutive chunks are consecutive too, so a warp ranks the directory for its first
// chunk only and carries the counts on from there (`warp_level`).
__device__ __forceinline__ void warp_chunks(u64 count, u64 &c, u64 &cend) {
    const u64 chunks = (count + 31) >> 5;
    const u64 warps = thread_stride() >> 5;
    const u64 per = (chunks + warps - 1) / warps;
    c = (global_thread() >> 5) * per;
    cend = min(c + per, chunks);
}

// One level of a warp's descent: lane i has n children, the warp's first is `first` (a
// global index on the level below). Returns lane i's first child and advances `first` to
// the first child of the warp's next chunk.
__device__ __forceinline__ u64 warp_level(u64 &first, u32 n) {
    const u32 incl = warp_inclusive_sum(n);
    const u64 mine = first + incl - n;
    first += __shfl_sync(FULL_MASK, incl, 31);
    return mine;
}

// Combines acc[0..4] over the lanes of `peers` (all lanes with the same key, this lane
// included) into the lowest peer, by a shuffle tree reduction (E. Westphal's
// reduce_peers): log2(peers) rounds. All 32 lanes must call it.
template <typename Op>
__device__ __forceinline__ void reduce_peers(u32 peers, u32 lane, typename Op::T acc[4]) {
    typedef typename Op::T T;
    u32 rel = __popc(peers & ((1u << lane) - 1u));  // rank among the peers
    u32 rest = lane == 31 ? 0u : peers & (FULL_MASK << (lane + 1));  // higher peers
    while (__any_sync(FULL_MASK, rest != 0u)) {
        int next = __ffs(rest);  // 1 + lane of the next higher remaining peer, 0 if none
        int src = next ? next - 1 : (int)lane;
#pragma unroll
        for (u32 i = 0; i < 4; ++i) {
            T v = __shfl_sync(FULL_MASK, acc[i], src);
            if (next) acc[i] = Op::combine(acc[i], v);
        }
        // Odd ranks have handed their sums down and leave; ranks halve.
        u32 done = __ballot_sync(FULL_MASK, rel & 1u);
        rest = (rel & 1u) ? 0u : rest & ~done;
        rel >>= 1;
    }
}

// Combines acc[0..4] over each run of consecutive lanes with the same key (`heads`: the
// lanes that start a run) into the run's first lane: a segmented suffix scan (Hillis and
// Steele), log2 of the longest run's length rounds of shuffles. Where equal keys are
// adjacent (block entries sorted by block row, in a right product) this finds every peer
// that `reduce_peers` finds, without `__match_any_sync`. All 32 lanes must call it.
template <typename Op, u32 N = 4>
__device__ __forceinline__ void reduce_runs(u32 heads, u32 lane, typename Op::T acc[N]) {
    typedef typename Op::T T;
    for (u32 d = 1; d < 32; d <<= 1) {
        // Lane + d is in this lane's run when no run starts in lanes lane + 1 .. lane + d.
        bool take = lane + d < 32 && ((heads >> (lane + 1)) & ((1u << d) - 1u)) == 0u;
        // Runs no longer than d need no further round (uniform: all lanes agree).
        if (!__any_sync(FULL_MASK, take)) break;
#pragma unroll
        for (u32 i = 0; i < N; ++i) {
            T v = __shfl_down_sync(FULL_MASK, acc[i], d);
            if (take) acc[i] = Op::combine(acc[i], v);
        }
    }
}

// The runs of adjacent lanes with equal `key` (~0: no output), combined into each run's
// first lane by `reduce_runs`; `starts`: this lane starts a run whatever its left
// neighbour's key. Returns whether this lane then holds a run's sum to send to y. All 32
// lanes must call it.
template <typename Op, u32 N = 4>
__device__ __forceinline__ bool join_runs(u64 key, bool starts, u32 lane, typename Op::T acc[N]) {
    u64 prev = __shfl_up_sync(FULL_MASK, key, 1);
    bool head = lane == 0 || starts || key != prev;
    reduce_runs<Op, N>(__ballot_sync(FULL_MASK, head), lane, acc);
    return head && key != ~0ull;
}

#endif
