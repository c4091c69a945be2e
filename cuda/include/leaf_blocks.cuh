// A leaf step's arithmetic on 4x4 blocks of cells (a node of the last internal level, or
// a block entry of the cached frontier): the step's shape, a block's inputs, its
// per-output sums and their updates of y. `Op` is a semiring of semirings.cuh.
#ifndef K2RPQ_LEAF_BLOCKS_CUH
#define K2RPQ_LEAF_BLOCKS_CUH

#include "semirings.cuh"
#include "tree.cuh"

// What a kernel knows of its step before reading the parameters. `AnyStep` reads the
// direction, the mask and the width from them. `Single<DIR>` is an unmasked product of
// one vector (or one word of a bit batch) per row in direction DIR: with its constants
// the compiler drops the other direction's, the masked and the batched paths and the
// 64-bit division by the width, all of which a general kernel executes. `runs` over
// entries sorted by output block takes it (`sorted_runs`): 13 % less time on the
// bit-packed right batch (`rows` left products gained 3 % at most and do not take it).
struct AnyStep {
    __device__ __forceinline__ static u32 dir(const StepParams &p) { return p.dir; }
    __device__ __forceinline__ static bool masked(const StepParams &p) { return p.pyramid != nullptr; }
    __device__ __forceinline__ static u64 width(const StepParams &p) { return p.width; }
};
template <u32 DIR>
struct Single {
    __device__ __forceinline__ static u32 dir(const StepParams &) { return DIR; }
    __device__ __forceinline__ static bool masked(const StepParams &) { return false; }
    __device__ __forceinline__ static u64 width(const StepParams &) { return 1; }
    // Whether a step has this shape (the kernel then takes the specialised path).
    __device__ __forceinline__ static bool fits(const StepParams &p) {
        return p.dir == DIR && !p.pyramid && p.width == 1;
    }
};

// Four consecutive entries of x at input indices i0 .. i0 + 3 (i0 a multiple of 4).
__device__ __forceinline__ void load_quad(const float *src, float v[4]) {
    float4 q = *(const float4 *)src;
    v[0] = q.x, v[1] = q.y, v[2] = q.z, v[3] = q.w;
}
__device__ __forceinline__ void load_quad(const u32 *src, u32 v[4]) {
    uint4 q = *(const uint4 *)src;
    v[0] = q.x, v[1] = q.y, v[2] = q.z, v[3] = q.w;
}
__device__ __forceinline__ void load_quad(const u64 *src, u64 v[4]) {
    ulonglong2 a = *(const ulonglong2 *)src, b = *(const ulonglong2 *)(src + 2);
    v[0] = a.x, v[1] = a.y, v[2] = b.x, v[3] = b.y;
}

// The inputs of a block for vector b: xv[i] = the contribution of input index i0 + i
// where bit i of `present` is set (CLIP: where i0 + i is inside x, for callers that do
// not know the block's inputs). A single vector's four entries are one aligned 16- or
// 32-byte load (one sector, one instruction instead of up to four) unless the block
// hangs over the end of x; batches load entry by entry (lanes of consecutive b are
// coalesced).
template <typename Op, typename S = AnyStep, bool CLIP = false>
__device__ __forceinline__ void load_inputs(const StepParams &p, u64 i0, u64 b, u32 present,
                                            typename Op::T xv[4]) {
    typedef typename Op::Raw R;
    const R *x = (const R *)p.x;
    if (S::width(p) == 1 && i0 + 4 <= p.inputs) {
        R raw[4];
        load_quad(x + i0, raw);
#pragma unroll
        for (u32 i = 0; i < 4; ++i) xv[i] = Op::convert(raw[i]);
    } else {
#pragma unroll
        for (u32 i = 0; i < 4; ++i) {
            const bool read = CLIP ? i0 + i < p.inputs : (present >> i) & 1;
            xv[i] = read ? Op::convert(x[(i0 + i) * S::width(p) + b]) : Op::identity();
        }
    }
}

// The inputs of the block of cells bm at (r0, c0): right products read the block's
// columns, left ones its rows.
template <typename Op, typename S = AnyStep>
__device__ __forceinline__ void block_inputs(const StepParams &p, u32 bm, u64 r0, u64 c0, u64 b,
                                             typename Op::T xv[4]) {
    if (S::dir(p) == 0) {
        u32 cols = (bm | (bm >> 4) | (bm >> 8) | (bm >> 12)) & 15u;
        load_inputs<Op, S>(p, c0, b, cols, xv);
    } else {
        u32 rows = 0;
#pragma unroll
        for (u32 r = 0; r < 4; ++r) rows |= ((bm >> (4 * r)) & 15u) ? 1u << r : 0u;
        load_inputs<Op, S>(p, r0, b, rows, xv);
    }
}

// The per-output-entry sums of a block from its inputs: acc[i] for output index o0 + i
// (right: rows, left: columns).
template <typename Op>
__device__ __forceinline__ void block_combine(u32 dir, u32 bm, const typename Op::T xv[4],
                                              typename Op::T acc[4]) {
    typedef typename Op::T T;
#pragma unroll
    for (u32 o = 0; o < 4; ++o) {
        T a = Op::identity();
        // Right: row o of the block over its columns i; left: column o over its rows i.
        u32 line = dir == 0 ? (bm >> (4 * o)) & 15u : (bm >> o) & 0x1111u;
#pragma unroll
        for (u32 i = 0; i < 4; ++i)
            if ((line >> (dir == 0 ? i : 4 * i)) & 1) a = Op::combine(a, xv[i]);
        acc[o] = a;
    }
}

// The per-output-entry sums of one node's block for vector b (inputs read once each).
template <typename Op>
__device__ __forceinline__ void block_sums(const StepParams &p, u32 bm, u64 r0, u64 c0, u64 b,
                                           typename Op::T acc[4]) {
    typename Op::T xv[4];
    block_inputs<Op>(p, bm, r0, c0, b, xv);
    block_combine<Op>(p.dir, bm, xv, acc);
}

// The entry's bitmap, or 0 when a masked product's pyramid says its input block (right:
// its column of blocks, left: its row) has no active input.
template <typename S = AnyStep>
__device__ __forceinline__ u32 entry_active_bitmap(const StepParams &p, u64 e) {
    u32 bm = entry_bitmap(e);
    if (bm && S::masked(p)) {
        u64 i0 = S::dir(p) == 0 ? entry_col0(e) : entry_row0(e);
        if (!input_active(p, (u32)(i0 >> 2), p.level)) bm = 0u;
    }
    return bm;
}

// Updates y at the non-identity entries of acc (output indices o0 .. o0 + 3, o0 a
// multiple of 4, vector b) and clears acc; a single vector's f32 sums go as one quad.
// `read`: idempotent semirings read y first and skip an update that would change
// nothing (worth it while updates of one entry are many). The four reads are issued
// before any update, so they wait for the memory once, not four times.
template <typename Op, typename S = AnyStep>
__device__ __forceinline__ void flush_block(const StepParams &p, u64 o0, u64 b, typename Op::T acc[4],
                                            bool read = true) {
    if constexpr (Op::QUAD_UPDATE) {
        if (S::width(p) == 1) {
            Op::update_quad(p, o0, acc);
#pragma unroll
            for (u32 i = 0; i < 4; ++i) acc[i] = Op::identity();
            return;
        }
    }
    const bool check = Op::IDEMPOTENT && read;
    typename Op::T old[4];
#pragma unroll
    for (u32 i = 0; i < 4; ++i)
        old[i] = check && !Op::is_identity(acc[i]) ? Op::seen(p, (o0 + i) * S::width(p) + b) : Op::identity();
#pragma unroll
    for (u32 i = 0; i < 4; ++i) {
        if (!Op::is_identity(acc[i]) && (!check || Op::changes(old[i], acc[i])))
            Op::update(p, (o0 + i) * S::width(p) + b, acc[i]);
        acc[i] = Op::identity();
    }
}

// One update of y at element `at`, read first where the semiring is idempotent.
template <typename Op>
__device__ __forceinline__ void send_update(const StepParams &p, u64 at, typename Op::T v) {
    if (!Op::IDEMPOTENT || Op::changes(Op::seen(p, at), v)) Op::update(p, at, v);
}

#endif
