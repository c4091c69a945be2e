// The lone cells of a tree-only matrix (src/engine/gpu/lone_cells.rs): cells a descent
// would reach alone through a unary path, applied after the descent. p.codes_in holds
// p.count (output, input) index pairs sorted by output (the direction's own copy): a
// single vector's lanes combine the runs of equal outputs by `join_runs` and send one
// update per run, to outputs that rise along the warp; a batch's item g = cell g / width,
// vector g % width, one update each (consecutive lanes, consecutive entries of y). In
// Morton order, one random update per cell, this launch took 37 (right) and 76 (left,
// the popular pages' columns) ns per cell on a web graph. A masked product needs no mask
// here: an inactive input's word is zero and skipped.

#include "leaf_blocks.cuh"

template <typename Op>
__device__ __forceinline__ void lone_cells(const StepParams &p) {
    typedef typename Op::T T;
    start_dependents();
    wait_prerequisites();
    const uint2 *cells = (const uint2 *)p.codes_in;
    const typename Op::Raw *x = (const typename Op::Raw *)p.x;
    if (p.width == 1) {
        const u32 lane = threadIdx.x & 31;
        for (u64 base = global_thread() - lane; base < p.count; base += thread_stride()) {
            u64 i = base + lane;
            bool valid = i < p.count;
            uint2 c = valid ? cells[i] : make_uint2(0u, 0u);
            T acc[1] = {valid ? Op::convert(x[c.y]) : Op::identity()};
            if (!join_runs<Op, 1>(valid ? (u64)c.x : ~0ull, false, lane, acc)) continue;
            if (Op::is_identity(acc[0])) continue;
            if (Op::IDEMPOTENT && !Op::changes(Op::seen(p, c.x), acc[0])) continue;
            Op::update(p, c.x, acc[0]);
        }
        return;
    }
    const u64 items = p.count * p.width;
    for (u64 g = global_thread(); g < items; g += thread_stride()) {
        u64 cell = g / p.width;
        u64 b = g - cell * p.width;
        uint2 c = cells[cell];
        T v = Op::convert(x[(u64)c.y * p.width + b]);
        if (Op::is_identity(v)) continue;
        u64 at = (u64)c.x * p.width + b;
        if (Op::IDEMPOTENT && !Op::changes(Op::seen(p, at), v)) continue;
        Op::update(p, at, v);
    }
}

#define K2RPQ_IN_lone_cells K2RPQ_FAMILIES
#include "kernels.cuh"
