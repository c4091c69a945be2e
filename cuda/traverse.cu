// Level-synchronous k²-tree traversal (the paper's Algorithm 1): one kernel expands a tile
// of an internal level into the next frontier; the last internal level visits its leaves
// in place and applies the semiring's atomic to y.

// Expand: node t of the step writes the codes of its descendants `p.width` levels down
// (1-3; its children when 1), in level order, at codes_out[first descendant - child0]
// (child0: the first descendant of node0 at that level). A masked traversal writes PRUNED
// for descendants on a path through a node whose input range meets no active input (and
// for all descendants of a pruned node), so the positions stay those of the static tile
// plan. Expanding several small levels in one launch saves the launches and the scratch
// of the levels in between: the descendants of a node are contiguous on each level, so
// one directory rank per level finds them, and the signatures of a node's children (at
// most 4) and grandchildren (at most 16) are one or two words.

// The signatures of n ≤ 16 consecutive nodes from node j (0 when n = 0), node j in the
// low nibble and nothing above the n-th.
__device__ __forceinline__ u64 signatures(const u64 *nib, u64 j, u32 n) {
    if (n == 0) return 0;
    u64 run = signature_run(nib, j, n);
    return n == 16 ? run : run & ((1ull << (4 * n)) - 1);
}

// What node t of an expand step reads from the tree: its signature, its children's and
// grandchildren's (as far as the step goes), and its first descendant's global index.
struct Descent {
    u32 s0;
    u64 sig1, sig2;
    u64 first;
};

template <bool SEVERAL>
__device__ __forceinline__ Descent descent(const StepParams &p, u64 t) {
    Descent d;
    d.s0 = signature(p.nib, p.node0 + t);
    d.sig1 = d.sig2 = 0;
    // Steps of several levels have no scanned offsets (their child0 is a descendant's).
    u64 f = first_child(p, t);
    if (SEVERAL && p.width >= 2) {
        d.sig1 = signatures(p.nib, f, __popc(d.s0));
        f = 1 + dir_rank(p.nib, p.ranks, p.sample_log2, f);
        if (p.width >= 3) {
            d.sig2 = signatures(p.nib, f, __popcll(d.sig1));
            f = 1 + dir_rank(p.nib, p.ranks, p.sample_log2, f);
        }
    }
    d.first = f;
    return d;
}

// SEVERAL: the step may expand more than one level (`expand_levels`). The one-level
// kernel (`expand`) is compiled apart: with the deeper levels' code in it, a one-level
// step measured 6-16 % slower (docs/BENCHMARKS.md, session 12).
template <bool SEVERAL>
__device__ __forceinline__ void expand_nodes(const StepParams &p) {
    const u32 levels = SEVERAL ? (u32)p.width : 1u;
    start_dependents();
    u64 t = global_thread();
    // The first node's signatures and directory ranks read only the resident tree: with an
    // overlapped launch they are fetched while the previous step finishes. Scanned
    // offsets are written by the scan, so they wait.
    bool early = !p.offsets && t < p.count;
    Descent d;
    if (early) d = descent<SEVERAL>(p, t);
    wait_prerequisites();
    for (; t < p.count; t += thread_stride(), early = false) {
        if (!early) d = descent<SEVERAL>(p, t);
        u64 code = code_at(p, p.src_off + t);
        u64 *out = p.codes_out + (d.first - p.child0);
        bool alive = live(p, code != PRUNED, code, p.level);
        u64 s1 = d.sig1, s2 = d.sig2;
        for (u32 b1 = 0; b1 < 4; ++b1) {
            if (!(d.s0 & (1u << b1))) continue;
            u64 c1 = (code << 2) | b1;
            bool alive1 = live(p, alive, c1, p.level + 1);
            if (levels == 1) {
                *out++ = alive1 ? c1 : PRUNED;
                continue;
            }
            u32 g1 = (u32)(s1 & 15);
            s1 >>= 4;
            for (u32 b2 = 0; b2 < 4; ++b2) {
                if (!(g1 & (1u << b2))) continue;
                u64 c2 = (c1 << 2) | b2;
                bool alive2 = live(p, alive1, c2, p.level + 2);
                if (levels == 2) {
                    *out++ = alive2 ? c2 : PRUNED;
                    continue;
                }
                u32 g2 = (u32)(s2 & 15);
                s2 >>= 4;
                for (u32 b3 = 0; b3 < 4; ++b3) {
                    if (!(g2 & (1u << b3))) continue;
                    u64 c3 = (c2 << 2) | b3;
                    *out++ = live(p, alive2, c3, p.level + 3) ? c3 : PRUNED;
                }
            }
        }
    }
}

extern "C" __global__ void expand(StepParams p) { expand_nodes<false>(p); }
extern "C" __global__ void expand_levels(StepParams p) { expand_nodes<true>(p); }

// The semirings of Table 1 as one `apply(y, i_in, i_out, b)` each.
struct PlusTimesOp {
    __device__ __forceinline__ static void apply(const StepParams &p, u64 in, u64 out, u64 b) {
        float v = ((const float *)p.x)[in * p.width + b];
        if (v != 0.0f) atomicAdd(&((float *)p.y)[out * p.width + b], v);
    }
};
struct CountingOp {
    __device__ __forceinline__ static void apply(const StepParams &p, u64 in, u64 out, u64 b) {
        u32 v = ((const u32 *)p.x)[in * p.width + b];
        if (v != 0) atomicAdd(&((u32 *)p.y)[out * p.width + b], v);
    }
};
struct BooleanOp {
    __device__ __forceinline__ static void apply(const StepParams &p, u64 in, u64 out, u64 b) {
        u32 v = ((const u32 *)p.x)[in * p.width + b];
        if (v != 0) atomicMax(&((u32 *)p.y)[out * p.width + b], 1u);
    }
};
// (min, +) with unit edges: inputs are non-negative or +inf, so their bit patterns order
// like unsigned integers and the integer atomicMin is the float minimum.
struct TropicalOp {
    __device__ __forceinline__ static void apply(const StepParams &p, u64 in, u64 out, u64 b) {
        float v = ((const float *)p.x)[in * p.width + b];
        if (v != __int_as_float(0x7f800000)) {
            atomicMin(&((u32 *)p.y)[out * p.width + b], __float_as_uint(1.0f + v));
        }
    }
};
// Bit-packed Boolean batches: word b of row `in`, OR-ed into word b of row `out`.
struct BitsOp {
    __device__ __forceinline__ static void apply(const StepParams &p, u64 in, u64 out, u64 b) {
        u64 v = ((const u64 *)p.x)[in * p.width + b];
        if (v != 0) atomicOr(&((u64 *)p.y)[out * p.width + b], v);
    }
};

// Last internal level: thread (t, b) owns vector b (or word b) of node t and visits the
// node's leaves in place: leaf signatures are contiguous from first_child(t).
template <typename Op>
__device__ __forceinline__ void leaves(const StepParams &p) {
    start_dependents();
    wait_prerequisites();
    u64 total = p.count * p.width;
    for (u64 g = global_thread(); g < total; g += thread_stride()) {
        u64 t = g / p.width;
        u64 b = g - t * p.width;
        u64 code = p.codes_in[p.src_off + t];
        if (!live(p, code != PRUNED, code, p.level)) continue;
        u32 s = signature(p.nib, p.node0 + t);
        u64 leaf = first_child(p, t);
#pragma unroll
        for (u32 q = 0; q < 4; ++q) {
            if (s & (1u << q)) {
                u32 lam = signature(p.nib, leaf++);
                u64 base = ((code << 2) | q) << 2;
                u64 r0 = compact_bits(base >> 1);
                u64 c0 = compact_bits(base);
#pragma unroll
                for (u32 e = 0; e < 4; ++e) {
                    if (lam & (1u << e)) {
                        u64 r = r0 + (e >> 1), c = c0 + (e & 1);
                        if (p.dir == 0) Op::apply(p, c, r, b);
                        else Op::apply(p, r, c, b);
                    }
                }
            }
        }
    }
}

extern "C" __global__ void leaves_plus_times(StepParams p) { leaves<PlusTimesOp>(p); }
extern "C" __global__ void leaves_counting(StepParams p) { leaves<CountingOp>(p); }
extern "C" __global__ void leaves_boolean(StepParams p) { leaves<BooleanOp>(p); }
extern "C" __global__ void leaves_tropical(StepParams p) { leaves<TropicalOp>(p); }
extern "C" __global__ void leaves_bits(StepParams p) { leaves<BitsOp>(p); }
