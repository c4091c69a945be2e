// Leaf-visiting kernel variants of issue 10 (selected by `LeafKernel` on the host; the
// paper's one-atomic-per-cell kernel stays in traverse.cu as the default).
//
// The last internal level and its leaves form a 4x4 block per node: the node's signature
// says which of its four 2x2 leaves exist, the leaves' signatures which cells. Without
// changing the format, a thread gathers that block into a 16-bit bitmap in registers
// (bit 4r + c = cell (r0 + r, c0 + c)). Then, for a right product y = A x, it reads each
// present column's x once (independent loads, issued together), OR/sums each present row
// in a register and issues one update per non-empty row: at most 4 atomics per node
// instead of one per cell (left product: the same over columns). The paper (section 5.6)
// finds the tree bound by exactly these per-non-zero atomics.
//
// Three refinements, each a kernel family of its own so they can be measured one at a
// time (template flags WRANK, AGG):
//  - rows:  the bitmap and per-row accumulation above; idempotent semirings (Boolean,
//           tropical, bit-packed) read y first and skip the atomic when it would change
//           nothing (read-before-atomic: y only grows, so a skip is never wrong).
//  - wrank: child offsets without a per-thread directory rank: one rank per warp, its
//           popcounts spread over the lanes, then a shuffle scan of the fan-outs of the
//           warp's nodes (with a scanned offset array the offsets are used as they are).
//  - agg:   warp-level aggregation: lanes whose nodes share the output block (Morton order
//           keeps them adjacent) combine their rows with a shuffle tree reduction, and only
//           the lowest such lane updates y: one atomic per distinct output entry per warp.
//           Over block entries sorted by block row, a right product's peers are runs of
//           adjacent lanes, combined by a segmented shuffle scan without a key match
//           (`rowblocks_agg`).
//
// The WRANK and AGG kernels keep all 32 lanes of a warp in the loop together (their base
// index is warp-uniform) because they shuffle across lanes.

#define FULL_MASK 0xffffffffu

// How idempotent semirings read y before an update: through L1 (`ld.global.ca`). A line
// in L1 may be stale (other SMs' atomics go to L2), but y only grows, so a stale value
// can only cost an atomic that a fresh one would have skipped, never skip a needed one.
// Hot output entries (a web graph's navigation pages) are then read from L1: bit-packed
// left products −12 % (web 200M) and −25 % (cnr-2000) against reads from L2
// (docs/BENCHMARKS.md, session 14).
#define LOAD_SEEN __ldca

// What a kernel knows of its step before reading the parameters. `AnyStep` reads the
// direction, the mask and the width from them. `Single<DIR>` is an unmasked product of
// one vector (or one word of a bit batch) per row in direction DIR: with its constants
// the compiler drops the other direction's, the masked and the batched paths and the
// 64-bit division by the width, all of which a general kernel executes. `runs` over
// entries sorted by output block takes it (`sorted_runs`): −13 % on the bit-packed right
// batch (docs/BENCHMARKS.md, session 14; for `rows` left products it gained 3 % at most,
// not taken).
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

// One semiring's accumulator: T, its identity, the element type of x (Raw) and the
// contribution of one of its entries (convert), the combine, and the atomic update of y
// at element `at` (output index x width + vector). Idempotent semirings (IDEMPOTENT) may
// read y first (`seen`, through LOAD_SEEN) and skip an update that `changes` nothing: y
// only grows there, so a skip is never wrong, whatever other threads do meanwhile.
struct PlusTimesAcc {
    typedef float T;
    typedef float Raw;
    __device__ __forceinline__ static T identity() { return 0.0f; }
    __device__ __forceinline__ static T convert(Raw v) { return v; }
    __device__ __forceinline__ static T combine(T a, T b) { return a + b; }
    // The cell kernel skips zero inputs: adding a zero sum changes nothing either.
    __device__ __forceinline__ static bool is_identity(T a) { return a == 0.0f; }
    static const bool IDEMPOTENT = false;
    __device__ __forceinline__ static T seen(const StepParams &, u64) { return identity(); }
    __device__ __forceinline__ static bool changes(T, T) { return true; }
    __device__ __forceinline__ static void update(const StepParams &p, u64 at, T v) {
        atomicAdd(&((float *)p.y)[at], v);
    }
    // Combine into a shared-memory window entry (the `window` kernel).
    __device__ __forceinline__ static void local(T *w, T v) { atomicAdd(w, v); }
    // The four entries at..at + 3 of a single vector's y (at a multiple of 4: 16-byte
    // aligned, inside y's allocation, which the host pads to whole quads) in one vector
    // atomic from sm_90 on (`REDG.E.ADD.F32x4`): one request instead of up to four.
    // Adding 0 to an entry without cells leaves it as it is: y starts at +0, so it never
    // holds -0, and only a subnormal sum would change (float atomics flush those to zero,
    // the scalar ones too). Octet steps −13-27 % (docs/BENCHMARKS.md, session 27).
    static const bool QUAD_UPDATE = true;
    __device__ __forceinline__ static void update_quad(const StepParams &p, u64 at, const T v[4]) {
#if __CUDA_ARCH__ >= 900
        atomicAdd((float4 *)((float *)p.y + at), make_float4(v[0], v[1], v[2], v[3]));
#else
#pragma unroll
        for (u32 i = 0; i < 4; ++i)
            if (!is_identity(v[i])) update(p, at + i, v[i]);
#endif
    }
};
struct CountingAcc {
    typedef u32 T;
    typedef u32 Raw;
    __device__ __forceinline__ static T identity() { return 0u; }
    __device__ __forceinline__ static T convert(Raw v) { return v; }
    __device__ __forceinline__ static T combine(T a, T b) { return a + b; }
    __device__ __forceinline__ static bool is_identity(T a) { return a == 0u; }
    static const bool IDEMPOTENT = false;
    __device__ __forceinline__ static T seen(const StepParams &, u64) { return identity(); }
    __device__ __forceinline__ static bool changes(T, T) { return true; }
    __device__ __forceinline__ static void update(const StepParams &p, u64 at, T v) {
        atomicAdd(&((u32 *)p.y)[at], v);
    }
    __device__ __forceinline__ static void local(T *w, T v) { atomicAdd(w, v); }
    static const bool QUAD_UPDATE = false;  // no vector atomic for this element
};
struct BooleanAcc {
    typedef u32 T;
    typedef u32 Raw;
    __device__ __forceinline__ static T identity() { return 0u; }
    __device__ __forceinline__ static T convert(Raw v) { return v != 0u ? 1u : 0u; }
    __device__ __forceinline__ static T combine(T a, T b) { return a | b; }
    __device__ __forceinline__ static bool is_identity(T a) { return a == 0u; }
    static const bool IDEMPOTENT = true;
    __device__ __forceinline__ static T seen(const StepParams &p, u64 at) { return LOAD_SEEN(&((const u32 *)p.y)[at]); }
    __device__ __forceinline__ static bool changes(T old, T) { return old == 0u; }
    __device__ __forceinline__ static void update(const StepParams &p, u64 at, T) {
        atomicMax(&((u32 *)p.y)[at], 1u);
    }
    // Every writer stores the same 1: racing plain stores are enough.
    __device__ __forceinline__ static void local(T *w, T v) { *(volatile T *)w = 1u; }
    static const bool QUAD_UPDATE = false;  // no vector atomic for this element
};
// (min, +) with unit edges. The combine is the unsigned minimum of the bit patterns,
// exactly what the cell kernel's atomicMin computes, so every input (even a negative or
// NaN one) gives the cell kernel's result.
struct TropicalAcc {
    typedef float T;
    typedef float Raw;
    __device__ __forceinline__ static T identity() { return __int_as_float(0x7f800000); }
    __device__ __forceinline__ static T convert(Raw v) {
        return v != __int_as_float(0x7f800000) ? 1.0f + v : identity();
    }
    __device__ __forceinline__ static T combine(T a, T b) {
        return __uint_as_float(min(__float_as_uint(a), __float_as_uint(b)));
    }
    __device__ __forceinline__ static bool is_identity(T a) {
        return __float_as_uint(a) >= 0x7f800000u;
    }
    static const bool IDEMPOTENT = true;
    __device__ __forceinline__ static T seen(const StepParams &p, u64 at) {
        return __uint_as_float(LOAD_SEEN(&((const u32 *)p.y)[at]));
    }
    __device__ __forceinline__ static bool changes(T old, T v) { return __float_as_uint(old) > __float_as_uint(v); }
    __device__ __forceinline__ static void update(const StepParams &p, u64 at, T v) {
        atomicMin(&((u32 *)p.y)[at], __float_as_uint(v));
    }
    __device__ __forceinline__ static void local(T *w, T v) {
        if (changes(__uint_as_float(*(volatile u32 *)w), v)) atomicMin((u32 *)w, __float_as_uint(v));
    }
    static const bool QUAD_UPDATE = false;  // no vector atomic for this element
};
struct BitsAcc {
    typedef u64 T;
    typedef u64 Raw;
    __device__ __forceinline__ static T identity() { return 0ull; }
    __device__ __forceinline__ static T convert(Raw v) { return v; }
    __device__ __forceinline__ static T combine(T a, T b) { return a | b; }
    __device__ __forceinline__ static bool is_identity(T a) { return a == 0ull; }
    static const bool IDEMPOTENT = true;
    __device__ __forceinline__ static T seen(const StepParams &p, u64 at) { return LOAD_SEEN(&((const u64 *)p.y)[at]); }
    __device__ __forceinline__ static bool changes(T old, T v) { return (old | v) != old; }
    __device__ __forceinline__ static void update(const StepParams &p, u64 at, T v) { atomicOr(&((u64 *)p.y)[at], v); }
    __device__ __forceinline__ static void local(T *w, T v) {
        if (changes(*(volatile T *)w, v)) atomicOr(w, v);
    }
    static const bool QUAD_UPDATE = false;  // no vector atomic for this element
};

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

// The first row and column of cells of the 4x4 block of the last-internal-level node with
// Morton code `code`.
__device__ __forceinline__ u64 code_row0(u64 code) { return (u64)compact_bits(code >> 1) << 2; }
__device__ __forceinline__ u64 code_col0(u64 code) { return (u64)compact_bits(code) << 2; }

// A block entry of the cached frontier: `row << 40 | col << 16 | bitmap`
// (src/engine/gpu/frontier.rs): its first row and column of cells, and its bitmap.
__device__ __forceinline__ u64 entry_row0(u64 e) { return (e >> 40) << 2; }
__device__ __forceinline__ u64 entry_col0(u64 e) { return ((e >> 16) & 0xFFFFFFull) << 2; }
__device__ __forceinline__ u32 entry_bitmap(u64 e) { return (u32)(e & 0xFFFFull); }

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

// What an item (node or block entry, vector) of a leaf step reads from the resident tree:
// with an overlapped launch the first item's is fetched before the previous step ends.
struct TreeItem {
    u64 t, b;      // node (or entry) of the step, vector
    bool valid;    // the warp's lane has an item (lanes past the end mirror the last one)
    u32 s;         // codes: the node's signature
    u64 leaf;      // codes: global index of its first leaf
    u64 entry;     // block entries: the entry
    u32 raw;       // codes: the node's block, when fetched early (the step's first item)
};

// The tree data of item base + lane. Over codes the leaves (the block) are fetched too
// when `fetch`: the first item fetches them before knowing whether its node is pruned;
// later items only for live nodes.
template <bool WRANK, bool BLOCKS>
__device__ __forceinline__ TreeItem tree_item(const StepParams &p, u64 base, u64 total, u32 lane,
                                              bool fetch) {
    TreeItem it;
    u64 g = base + lane;
    it.valid = g < total;
    it.t = (it.valid ? g : total - 1) / p.width;
    it.b = it.valid ? g - it.t * p.width : 0;
    if (BLOCKS) {
        it.entry = p.codes_in[p.src_off + it.t];
    } else {
        if (WRANK && !p.offsets) {
            warp_children(p, base, total, it.t, lane, it.s, it.leaf);
        } else {
            it.s = signature(p.nib, p.node0 + it.t);
            it.leaf = first_child(p, it.t);
        }
        if (fetch) it.raw = block_bitmap(p.nib, it.s, it.leaf);
    }
    return it;
}

// BLOCKS: the step's nodes are block entries of the cached frontier (`row << 40 | col
// << 16 | bitmap`, src/engine/gpu/frontier.rs): the block comes with the entry, so
// nothing of the tree is read (no signature, rank or leaves) and no Morton code is
// decoded. Entries are never PRUNED (only descents write that) and may come in any order.
// ROW_SORTED: the entries come sorted by block row (`RowBlocks`), so in a right product
// the lanes of one block row are adjacent and AGG combines runs of adjacent lanes
// (`reduce_runs`) instead of matching keys across the warp.
template <typename Op, bool WRANK, bool AGG, bool BLOCKS, bool ROW_SORTED = false>
__device__ __forceinline__ void leaves_rows(const StepParams &p) {
    typedef typename Op::T T;
    start_dependents();
    const u32 lane = threadIdx.x & 31;
    const u64 total = p.count * p.width;
    // Warp-uniform base: blockDim and the grid stride are multiples of 32.
    u64 base = global_thread() - lane;
    // Scanned offsets are written by the scan: those wait.
    bool early = base < total && (BLOCKS || !p.offsets);
    TreeItem it;
    if (early) it = tree_item<WRANK, BLOCKS>(p, base, total, lane, true);
    wait_prerequisites();
    for (; base < total; base += thread_stride(), early = false) {
        if (!early) it = tree_item<WRANK, BLOCKS>(p, base, total, lane, false);
        u64 r0, c0;
        u32 bm;
        if (BLOCKS) {
            r0 = entry_row0(it.entry);
            c0 = entry_col0(it.entry);
            bm = it.valid ? entry_active_bitmap(p, it.entry) : 0u;
        } else {
            u64 code = p.codes_in[p.src_off + it.t];
            bool active = live(p, it.valid && code != PRUNED, code, p.level);
            // Only the early (first) item's block was fetched with it.
            bm = !active ? 0u : early ? it.raw : block_bitmap(p.nib, it.s, it.leaf);
            r0 = code_row0(code);
            c0 = code_col0(code);
        }
        u64 b = it.b;
        u64 o0 = p.dir == 0 ? r0 : c0;
        T acc[4];
        if (bm) {
            block_sums<Op>(p, bm, r0, c0, b, acc);
        } else {
#pragma unroll
            for (u32 i = 0; i < 4; ++i) acc[i] = Op::identity();
        }
        bool leader = bm != 0u;
        // After aggregation a right product over block entries updates an output entry
        // about once per warp, so reading y first would rarely save an atomic; a left
        // product's column updates still collide across warps, and the read pays there
        // (docs/BENCHMARKS.md, session 13).
        const bool read = !(AGG && BLOCKS && p.dir == 0);
        if (AGG) {
            // Nodes with the same output block and vector have the same key; o0 is a
            // multiple of 4 and b < width, so distinct (o0, b) give distinct keys.
            const u64 none = ~0ull;
            u64 key = bm ? o0 * p.width + b : none;
            if (ROW_SORTED && p.dir == 0) {
                leader = join_runs<Op>(key, false, lane, acc);
            } else {
                u32 peers = __match_any_sync(FULL_MASK, key);
                reduce_peers<Op>(peers, lane, acc);
                leader = key != none && (__ffs(peers) - 1) == (int)lane;
            }
        }
        if (leader) flush_block<Op>(p, o0, b, acc, read);
    }
}

// The leaf step of a descent that stops one level above the last internal one
// (`GpuOptions::octets`, `tile_plan::Bottom::Octets`): a thread owns a node of level h − 3
// (and vector b) and visits its children's leaves in place, the node's 8x8 block of cells
// as up to four 4x4 blocks (child q at block row q >> 1, block column q & 1). The level
// of the leaves' parents then needs neither a launch nor scratch: the node's children are
// contiguous, so are their leaves, and a rank per level (the node's first child, that
// child's first leaf) finds them all, the leaves' signatures in one or two words (≤ 16
// nibbles). A right product loads the block's x as two quads (columns 0-3 and 4-7), sums each of
// its 8 rows over both halves and updates each non-empty row once, so children side by
// side share their rows' updates (a left product the same over columns).
struct Octet {
    u32 s;     // the node's signature (its children)
    u64 kids;  // its children's signatures, the first child's in the low nibble
    u64 run;   // their leaves' signatures, in order (empty when no child has leaves)
};

// What node t of a leaf step of two levels reads from the resident tree, for all 32 lanes
// of a warp whose items g = base + lane (g < total) map to nodes t = g / width: lane i
// reads node base / width + i, scans of the lanes' children and leaves give each its
// first child and first leaf, and each lane takes its own node's (by a shuffle when
// width > 1). `next` holds the warp's first child and first leaf: ranked from the
// directory (`ranked` false: one rank per level for the warp), or carried from the
// warp's previous chunk, which a single vector's chunks allow (`warp_chunks`; batched
// chunks may share a node). Per-lane ranks made the octet step issue-bound on the web
// graph (`ncu`: 74 % of the SMs' issue slots; docs/BENCHMARKS.md, session 23). Octet
// steps have no scanned offsets.
__device__ __forceinline__ Octet warp_octet(const StepParams &p, bool single, u64 base, u64 total, u64 t,
                                            u32 lane, u64 next[2], bool ranked) {
    const u64 end = min(base + 31, total - 1);
    const u64 tf = single ? base : base / p.width;
    const u64 last = single ? end : end / p.width;
    const u64 tj = tf + lane;
    Octet o;
    o.s = tj <= last ? signature(p.nib, p.node0 + tj) : 0u;
    if (!ranked) {
        next[0] = 1 + warp_dir_rank(p, p.node0 + tf, lane);
        next[1] = 1 + warp_dir_rank(p, next[0], lane);
    }
    u32 n = __popc(o.s);
    const u64 child = warp_level(next[0], n);
    o.kids = n ? signature_run(p.nib, child, n) : 0ull;
    u32 leaves = __popcll(o.kids & ((1ull << (4 * n)) - 1));  // n ≤ 4
    const u64 leaf = warp_level(next[1], leaves);
    o.run = leaves ? signature_run(p.nib, leaf, leaves) : 0ull;
    if (!single) {
        const u32 src = (u32)(min(t, last) - tf);
        o.s = __shfl_sync(FULL_MASK, o.s, src);
        o.kids = __shfl_sync(FULL_MASK, o.kids, src);
        o.run = __shfl_sync(FULL_MASK, o.run, src);
    }
    return o;
}

// Item g's node t and vector b for a step of p.width vectors per node (g < total; lanes
// past the end take the last item). A single vector (`single`: p.width is 1) needs no
// 64-bit division.
__device__ __forceinline__ void item_node(const StepParams &p, bool single, u64 g, u64 total, u64 &t, u64 &b) {
    const bool valid = g < total;
    if (single) {
        t = valid ? g : total - 1;
        b = 0;
    } else {
        t = (valid ? g : total - 1) / p.width;
        b = valid ? g - t * p.width : 0;
    }
}

// Sends an octet item's sums of one output half (acc: output indices o0 .. o0 + 3, o0 a
// multiple of 4, vector b; `any`: the lane has sums there) to y. AGG: the lanes with sums
// for the same 4 entries and vector combine them first (`reduce_peers`) and the lowest of
// them updates y; all 32 lanes must then call it, as the shuffles need them.
template <typename Op, bool AGG, typename S = AnyStep>
__device__ __forceinline__ void flush_half(const StepParams &p, bool any, u64 o0, u64 b, u32 lane,
                                           typename Op::T acc[4]) {
    bool leader = any;
    if (AGG) {
        // b < width: distinct outputs, distinct keys.
        const u64 key = any ? o0 * S::width(p) + b : ~0ull;
        u32 peers = __match_any_sync(FULL_MASK, key);
        reduce_peers<Op>(peers, lane, acc);
        leader = any && (__ffs(peers) - 1) == (int)lane;
    }
    if (leader) flush_block<Op, S>(p, o0, b, acc);
}

// Octet item (node of Morton code `code`, vector b) of this lane, read as `o`: its
// block's cells times x, one update per non-empty output entry; the path of batched and
// masked steps (`octet_slots` takes unmasked single vectors).
// AGG: lanes whose blocks share an output half (the same 4 output entries and vector)
// combine their sums first (`reduce_peers`), and one of them updates y: the tuned choice
// for left products over codes, whose column updates collide within a warp (without it
// cnr-2000's tree-only left product measured 1.7x slower; docs/BENCHMARKS.md, session 22).
// All 32 lanes must then call it, as the shuffles need them.
template <typename Op, bool AGG>
__device__ __forceinline__ void octet_item(const StepParams &p, const Octet &o, u64 code, u64 b, bool valid,
                                           u32 lane) {
    typedef typename Op::T T;
    if (!AGG && !valid) return;
    const bool active = live(p, valid && code != PRUNED, code, p.level);
    if (!AGG && !active) return;
    // The children's 4x4 blocks (0: absent, or pruned by a masked product).
    u32 bm[4];
    u64 kids = o.kids, run = o.run;
#pragma unroll
    for (u32 q = 0; q < 4; ++q) {
        bm[q] = 0u;
        if (!active || !(o.s & (1u << q))) continue;
        u32 ks = (u32)(kids & 15);
        kids >>= 4;
        if (live(p, true, (code << 2) | q, p.level + 1)) bm[q] = block_of_run(ks, run);
        run >>= 4 * __popc(ks);
    }
    const u32 dir = p.dir;
    const u64 r0 = (u64)compact_bits(code >> 1) << 3, c0 = (u64)compact_bits(code) << 3;
    // Child q's input half (right: its block column) and output half (right: its
    // block row); a left product swaps them.
    auto in_half = [dir](u32 q) { return dir == 0 ? q & 1u : q >> 1; };
    auto out_half = [dir](u32 q) { return dir == 0 ? q >> 1 : q & 1u; };
    T xv[2][4];
#pragma unroll
    for (u32 h = 0; h < 2; ++h) {
        u32 used = 0;
#pragma unroll
        for (u32 q = 0; q < 4; ++q)
            if (in_half(q) == h) used |= bm[q];
        if (used) block_inputs<Op>(p, used, r0 + 4 * h, c0 + 4 * h, b, xv[h]);
    }
    const u64 o0 = dir == 0 ? r0 : c0;
#pragma unroll
    for (u32 h = 0; h < 2; ++h) {
        T acc[4];
#pragma unroll
        for (u32 i = 0; i < 4; ++i) acc[i] = Op::identity();
        bool any = false;
#pragma unroll
        for (u32 q = 0; q < 4; ++q) {
            if (out_half(q) != h || !bm[q]) continue;
            any = true;
            T part[4];
            block_combine<Op>(dir, bm[q], xv[in_half(q)], part);
#pragma unroll
            for (u32 i = 0; i < 4; ++i) acc[i] = Op::combine(acc[i], part[i]);
        }
        flush_half<Op, AGG>(p, any, o0 + 4 * h, b, lane, acc);
    }
}

// Byte permute (PTX `prmt`, default mode): byte i of the result is byte (nibble i of
// `sel`) & 7 of {lo, hi}, or that byte's sign replicated where the nibble's bit 3 is set
// (CUDA's __byte_perm documents only the low 3 bits).
__device__ __forceinline__ u32 prmt(u32 lo, u32 hi, u32 sel) {
    u32 r;
    asm("prmt.b32 %0, %1, %2, %3;" : "=r"(r) : "r"(lo), "r"(hi), "r"(sel));
    return r;
}

// Nibbles 0-3 of v, one per byte (in each byte's low nibble).
__device__ __forceinline__ u32 nibble_bytes(u32 v) {
    v = __byte_perm(v, 0u, 0x4140);  // bytes 0 and 1 of v in bytes 0 and 2
    return (v | (v << 4)) & 0x0F0F0F0Fu;
}

// The `prmt` selectors that place the leaves of two sibling nodes of leaf signatures a
// and b (`pair` = a | b << 4) in their leaf slots, from the pair's leaf signatures spread
// one per byte (a's first): nibble l of the low half (a's slots) and of the high half
// (b's) is the leaf's rank among the pair's leaves, or 8 where it is absent (the sign of
// byte 0, a nibble, replicated: 0). The octet step reads them from a table in shared
// memory (`pair_table`).
__device__ __forceinline__ u32 pair_selectors(u32 pair) {
    u32 sel = 0, rank = 0;
#pragma unroll
    for (u32 slot = 0; slot < 8; ++slot) {
        const u32 leaf = (pair >> slot) & 1u;
        sel |= (leaf ? rank : 8u) << (4 * slot);
        rank += leaf;
    }
    return sel;
}
// The block's table of `pair_selectors`, filled by all its threads (one per kernel,
// whichever direction's path calls it; all threads of the block must).
__device__ __forceinline__ const u32 *pair_table() {
    const u32 PAIRS = 256;
    __shared__ u32 pairs[PAIRS];
    for (u32 i = threadIdx.x; i < PAIRS; i += blockDim.x) pairs[i] = pair_selectors(i);
    __syncthreads();
    return pairs;
}

// Octet item (node of Morton code `code`) of this lane for an unmasked product of one
// vector in direction DIR (`Single<DIR>`): the node's 16 leaf slots (child q, leaf l) are
// visited in a fixed order without branches (`pairs`, the `pair_selectors` table, places
// the leaves of two children at a time), each present leaf's cells added into the sums of
// the 8x8 block's 8 output entries (right: rows, left: columns) in registers, at
// compile-time positions. Since the vector atomics the octet step was issue-bound
// (`ncu`, cnr-2000 x 64: 73 % of the issue slots, 23 of 32 lanes active): the general
// item spends its instructions on the runtime direction (a variable shift per cell), 4x4
// blocks built child by child and a branch per child, which a warp takes for every child
// some lane has. This path executes 24 % fewer instructions there and takes 15 % off that
// graph's tree-only right product, 9.5 % off the web graph's (docs/BENCHMARKS.md,
// session 29). (Session 24's 8x8 block, built in a loop over the leaves, issued 40 %
// fewer instructions too but gained nothing while the step waited on its scalar
// atomics.) AGG as in `octet_item`.
template <typename Op, bool AGG, u32 DIR>
__device__ __forceinline__ void octet_slots(const StepParams &p, const Octet &o, u64 code, bool valid,
                                            const u32 *pairs, u32 lane) {
    typedef typename Op::T T;
    typedef Single<DIR> S;
    if (!AGG && !valid) return;
    const bool active = valid && code != PRUNED;
    if (!AGG && !active) return;
    const u32 s = active ? o.s : 0u;
    u32 row, col;
    morton_row_col(code, row, col);
    const u64 r0 = (u64)row << 3, c0 = (u64)col << 3;
    // Child q's input half is its block column q & 1 (right) or row q >> 1 (left), its
    // output half the other one.
    const u32 cols = (s | (s >> 2)) & 3u, rows = ((s & 3u) ? 1u : 0u) | ((s & 12u) ? 2u : 0u);
    const u32 in_used = DIR == 0 ? cols : rows, out_used = DIR == 0 ? rows : cols;
    const u64 i0 = DIR == 0 ? c0 : r0, o0 = DIR == 0 ? r0 : c0;
    T xv[8];
#pragma unroll
    for (u32 h = 0; h < 2; ++h) {
#pragma unroll
        for (u32 i = 0; i < 4; ++i) xv[4 * h + i] = Op::identity();
        // Only the halves with cells are read (lanes of one warp differ in them). Input
        // indices past the end of x have no cells: the rare block that hangs over it
        // takes `load_inputs`' masked branch (CLIP).
        if ((in_used >> h) & 1u) load_inputs<Op, S, true>(p, i0 + 4 * h, 0, 0u, xv + 4 * h);
    }
    T acc[8];
#pragma unroll
    for (u32 i = 0; i < 8; ++i) acc[i] = Op::identity();
    // Each child's leaf slots as bytes (byte l: leaf l's signature, 0 where absent), two
    // siblings at a time: their leaves (at most 8) are the run's next nibbles, spread one
    // per byte over two words, and one table entry places both children's by two byte
    // permutes: 61 fewer instructions per chunk than a selector computed child by child
    // (23 each), −2 % on cnr-2000 x 64's right product, −3 % left (docs/BENCHMARKS.md,
    // session 30). The children's signatures are placed the same way first, by s (entry
    // s: a = s, b = 0).
    u32 kids = prmt(nibble_bytes((u32)o.kids), 0u, pairs[s]);  // byte q: child q's
    kids |= kids >> 4;  // bits 0-7: the pair of children 0 and 1, bits 16-23: 2 and 3
    u64 run = o.run;
#pragma unroll
    for (u32 pr = 0; pr < 2; ++pr) {  // children 2 pr and 2 pr + 1
        const u32 pair = (kids >> (16 * pr)) & 0xFFu;
        const u32 sel = pairs[pair];
        const u32 lo = nibble_bytes((u32)run), hi = nibble_bytes((u32)run >> 16);
        run >>= 4 * __popc(pair);
#pragma unroll
        for (u32 k = 0; k < 2; ++k) {
            const u32 q = 2 * pr + k;
            const u32 cells = prmt(lo, hi, sel >> (16 * k));  // byte l: leaf l of child q
#pragma unroll
            for (u32 l = 0; l < 4; ++l) {
                const u32 lam = (cells >> (8 * l)) & 15u;
                // Leaf l of child q covers cells (row0 .. row0 + 1, col0 .. col0 + 1) of the
                // 8x8 block; its cell e is (row0 + e / 2, col0 + e % 2).
                const u32 row0 = 4 * (q >> 1) + 2 * (l >> 1), col0 = 4 * (q & 1) + 2 * (l & 1);
#pragma unroll
                for (u32 e = 0; e < 4; ++e) {
                    if ((lam >> e) & 1u) {
                        const u32 r = row0 + (e >> 1), c = col0 + (e & 1);
                        if (DIR == 0) acc[r] = Op::combine(acc[r], xv[c]);
                        else acc[c] = Op::combine(acc[c], xv[r]);
                    }
                }
            }
        }
    }
#pragma unroll
    for (u32 h = 0; h < 2; ++h) {
        flush_half<Op, AGG, S>(p, (out_used >> h) & 1u, o0 + 4 * h, 0, lane, acc + 4 * h);
    }
}

// The octet step's loop over the warp's chunks, for an unmasked product of one vector in
// direction DIR (0, 1: `octet_slots`) or any step (ANY_DIR: `octet_item`).
const u32 ANY_DIR = 2;
template <typename Op, bool AGG, u32 DIR>
__device__ __forceinline__ void leaves_octets_as(const StepParams &p) {
    const u32 lane = threadIdx.x & 31;
    const bool single = DIR != ANY_DIR || p.width == 1;
    const u64 total = p.count * (DIR != ANY_DIR ? 1 : p.width);
    // The block's `pair_selectors` table (`octet_slots`), before any warp leaves.
    const u32 *pairs = nullptr;
    if constexpr (DIR != ANY_DIR) pairs = pair_table();
    // The warp's chunks of 32 items, in order (warp-uniform).
    u64 c, cend;
    warp_chunks(total, c, cend);
    if (c >= cend) return;
    // The whole warp reads its octets (warp_octet) from the resident tree alone, so the
    // first ones are read before the wait. Each next chunk's are read after the item's
    // update, so that they are not live across it (48 registers: the single-vector loops
    // do not spill; the general path keeps some of its chunk bounds in local memory, at
    // most 24 bytes; read ahead, they needed 64). The items' codes may come from the
    // previous step (scratch): the first chunk's are read after the wait, each next one's
    // just before its octets, so that the loads wait together.
    u64 next[2], t, b;
    item_node(p, single, (c << 5) + lane, total, t, b);
    Octet o = warp_octet(p, single, c << 5, total, t, lane, next, false);
    wait_prerequisites();
    u64 code = code_at(p, p.src_off + t);
    while (true) {
        const bool valid = (c << 5) + lane < total;
        if constexpr (DIR == ANY_DIR) octet_item<Op, AGG>(p, o, code, b, valid, lane);
        else octet_slots<Op, AGG, DIR>(p, o, code, valid, pairs, lane);
        if (++c == cend) break;
        item_node(p, single, (c << 5) + lane, total, t, b);
        code = code_at(p, p.src_off + t);
        o = warp_octet(p, single, c << 5, total, t, lane, next, single);
    }
}

template <typename Op, bool AGG>
__device__ __forceinline__ void leaves_octets(const StepParams &p) {
    start_dependents();
    if (Single<0>::fits(p)) leaves_octets_as<Op, AGG, 0>(p);
    else if (Single<1>::fits(p)) leaves_octets_as<Op, AGG, 1>(p);
    else leaves_octets_as<Op, AGG, ANY_DIR>(p);
}

// Blocks of 256 threads per SM the octet kernels are bounded to: 5 (48 registers, as
// before their warp ranks, which took 56 unbounded) for 4-byte elements; bit-packed
// words need 64 registers without spilling, so 4.
#define OCTET_BLOCKS(OP) (sizeof(OP::T) == 8 ? 4 : 5)

// The `runs` kernel, over block entries only: a thread takes N consecutive entries (for
// one vector) and sums the blocks of a run of entries with the same output block in
// registers, with one update per non-empty output entry when the run ends. Over
// `RowBlocks` a right product's runs are the blocks of one block row (11 on average on the
// 200M web graph), with no cross-lane traffic (`wagg` shuffles). Two phases: every
// entry's inputs are loaded before any update is issued, so a thread's N input loads are
// in flight together (loads placed after an update could not be hoisted above it: x and y
// might alias for all the compiler knows). The inputs in flight cost 4N registers per
// 4-byte element: N = 8 for the semirings, N = 4 for bit-packed words, which at N = 8
// fall to a third of the occupancy (docs/BENCHMARKS.md, session 8).
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

template <typename Op, u32 N>
__device__ __forceinline__ void blocks_runs(const StepParams &p) {
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
// `leaves_rows`). A product in the other direction (no adjacency) takes the per-lane
// flush of `blocks_runs`.
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

// The `window` kernel: a CTA takes a chunk of WINDOW_ITEMS x blockDim consecutive items
// (nodes x vectors) of the step. In Morton order such a chunk covers a few aligned squares
// of the matrix, so its output entries (right: rows, left: columns) mostly fall in a short
// range: the CTA accumulates them in a shared-memory window that starts at the chunk's
// lowest output index (semiring add, min or OR), sends an output beyond the window to y
// directly, and at the end flushes the window with one global update per touched entry.
// Where `rows` issues one global atomic per non-empty block row, this issues one per
// distinct output entry per chunk: 2.8-3x fewer on cnr-2000 and the 200M web graph
// (docs/BENCHMARKS.md, "Tiles per plan and the window kernel"), yet measured slower than
// `rows` there: the global atomics were not what bounds `rows`.
// Blocks are 1-D with a multiple of 32 threads; the host launches at most one block per
// chunk, and the block loops over chunks with the grid stride.
#define WINDOW_ITEMS 2
#define WINDOW_BYTES 16384

__device__ __forceinline__ u64 output_block(const StepParams &p, u64 code) {
    return p.dir == 0 ? code_row0(code) : code_col0(code);
}

template <typename Op>
__device__ __forceinline__ void leaves_window(const StepParams &p) {
    typedef typename Op::T T;
    __shared__ u64 raw[WINDOW_BYTES / 8];
    __shared__ u32 red[2][32];
    T *win = (T *)raw;
    const u32 entries = WINDOW_BYTES / sizeof(T);
    // Output indices the window holds (each `width` entries); 0 when one output index
    // needs more entries than the window has: every update then goes to y.
    const u32 width = p.width < entries ? (u32)p.width : entries + 1;
    const u32 span_max = entries / width;
    const u64 total = p.count * p.width;
    const u64 chunk = (u64)WINDOW_ITEMS * blockDim.x;
    const u32 lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = blockDim.x >> 5;
    start_dependents();
    wait_prerequisites();
    // The window is the identity at the start of every chunk: cleared once here, and the
    // flush puts back the identity in each entry it reads.
    for (u32 e = threadIdx.x; e < entries; e += blockDim.x) win[e] = Op::identity();
    for (u64 c0 = (u64)blockIdx.x * chunk; c0 < total; c0 += (u64)gridDim.x * chunk) {
        // The chunk's lowest and highest output blocks (output indices fit u32: the
        // matrix side does; 0xFFFFFFFF, not a multiple of 4, marks "none").
        u64 code[WINDOW_ITEMS];
        u32 lo = 0xFFFFFFFFu, hi = 0;
#pragma unroll
        for (u32 j = 0; j < WINDOW_ITEMS; ++j) {
            u64 g = c0 + (u64)j * blockDim.x + threadIdx.x;
            code[j] = g < total ? p.codes_in[p.src_off + g / p.width] : PRUNED;
            if (code[j] != PRUNED) {
                u32 o0 = (u32)output_block(p, code[j]);
                lo = min(lo, o0);
                hi = max(hi, o0);
            }
        }
        lo = __reduce_min_sync(FULL_MASK, lo);
        hi = __reduce_max_sync(FULL_MASK, hi);
        if (lane == 0) {
            red[0][warp] = lo;
            red[1][warp] = hi;
        }
        // Also orders the previous chunk's flush before this chunk's updates.
        __syncthreads();
        for (u32 w = 0; w < warps; ++w) {
            lo = min(lo, red[0][w]);
            hi = max(hi, red[1][w]);
        }
        // Window: output indices base .. base + span (all of the chunk's when they fit).
        const u64 base = lo;
        const u32 span = lo == 0xFFFFFFFFu ? 0u : (u32)min((u64)hi + 4 - lo, (u64)span_max);
#pragma unroll
        for (u32 j = 0; j < WINDOW_ITEMS; ++j) {
            u64 g = c0 + (u64)j * blockDim.x + threadIdx.x;
            u64 cd = code[j];
            if (!live(p, cd != PRUNED, cd, p.level)) continue;
            u64 t = g / p.width;
            u64 b = g - t * p.width;
            u32 s = signature(p.nib, p.node0 + t);
            u32 bm = block_bitmap(p.nib, s, first_child(p, t));
            if (!bm) continue;
            u64 r0 = code_row0(cd);
            u64 c0b = code_col0(cd);
            u64 o0 = p.dir == 0 ? r0 : c0b;
            T acc[4];
            block_sums<Op>(p, bm, r0, c0b, b, acc);
#pragma unroll
            for (u32 i = 0; i < 4; ++i) {
                if (Op::is_identity(acc[i])) continue;
                u64 rel = o0 + i - base;
                if (rel < span) Op::local(&win[(u32)rel * width + (u32)b], acc[i]);
                else send_update<Op>(p, (o0 + i) * p.width + b, acc[i]);
            }
        }
        __syncthreads();
        const u32 used = span * width;
        for (u32 e = threadIdx.x; e < used; e += blockDim.x) {
            T v = win[e];
            if (!Op::is_identity(v)) {
                win[e] = Op::identity();
                u32 r = width == 1 ? e : e / width;
                send_update<Op>(p, (base + r) * p.width + e - r * width, v);
            }
        }
    }
}

// The subtree descent of a tree-only product: a block takes SUBTREE_ROOTS consecutive
// nodes of the step's level and descends their subtrees to the leaves by itself, one
// level's buffer of at most SUBTREE_THREADS nodes in shared memory per level below, so the
// levels in between need neither global scratch nor launches of their own. In level
// order the descendants of consecutive nodes are consecutive on every level, so a buffer
// is a range of a level's nodes: an exclusive scan of their fan-outs gives each node's
// first child from the buffer's first one, and a level needs one directory rank per
// block (its first buffer), after which the next buffer's first child is the previous
// one's plus its fan-out. Buffers are filled depth first: the parents whose children fit
// the buffer below are expanded, that buffer is descended, then the next parents. The
// last internal level's buffer visits its leaves as `leaves_rows` does (a thread per
// node and vector, read before update). The level-by-level descent writes and reads every
// level's codes in global memory (8 bytes per node each way) and launches a kernel per
// tile and level; this keeps them on chip, for the smallest tree-only working set. It is
// slower, though (cnr-2000 1.7-1.9x, the 200M-edge web graph 1.5-1.9x): a block's steps
// are a chain of loads and barriers, and its subtrees' sizes vary (docs/BENCHMARKS.md,
// session 15).
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
__device__ __forceinline__ void subtree_product(const StepParams &p) {
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

// The lone cells of a tree-only matrix (src/engine/gpu/lone_cells.rs): cells a descent
// would reach alone through a unary path, applied after the descent. p.codes_in holds
// p.count (output, input) index pairs sorted by output (the direction's own copy): a
// single vector's lanes combine the runs of equal outputs by `join_runs` and send one
// update per run, to outputs that rise along the warp; a batch's item g = cell g / width,
// vector g % width, one update each (consecutive lanes, consecutive entries of y). In
// Morton order, one random update per cell, this launch took 37 (right) and 76 (left,
// the popular pages' columns) ns per cell on the web graph (docs/BENCHMARKS.md, session
// 32). A masked product needs no mask here: an inactive input's word is zero and skipped.
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

// `sorted_runs` is bounded to 80 registers (3 blocks of the host's 256 threads per SM):
// its general path would take 84, which allocate only 2 blocks per SM, and its
// specialised product then ran 14 % slower (docs/BENCHMARKS.md, session 14).
#define LEAF_KERNELS(NAME, OP)                                                                   \
    extern "C" __global__ void leaves_rows_##NAME(StepParams p) { leaves_rows<OP, false, false, false>(p); } \
    extern "C" __global__ void leaves_wrank_##NAME(StepParams p) { leaves_rows<OP, true, false, false>(p); } \
    extern "C" __global__ void leaves_agg_##NAME(StepParams p) { leaves_rows<OP, true, true, false>(p); } \
    extern "C" __global__ void leaves_window_##NAME(StepParams p) { leaves_window<OP>(p); } \
    extern "C" __global__ void __launch_bounds__(256, OCTET_BLOCKS(OP)) leaves_octets_##NAME(StepParams p) { \
        leaves_octets<OP, false>(p);                                                             \
    }                                                                                            \
    extern "C" __global__ void __launch_bounds__(256, OCTET_BLOCKS(OP)) leaves_octets_agg_##NAME(StepParams p) { \
        leaves_octets<OP, true>(p);                                                              \
    }                                                                                            \
    extern "C" __global__ void blocks_rows_##NAME(StepParams p) { leaves_rows<OP, false, false, true>(p); } \
    extern "C" __global__ void blocks_agg_##NAME(StepParams p) { leaves_rows<OP, false, true, true>(p); } \
    extern "C" __global__ void rowblocks_agg_##NAME(StepParams p) { leaves_rows<OP, false, true, true, true>(p); } \
    extern "C" __global__ void blocks_runs_##NAME(StepParams p) {                                  \
        blocks_runs<OP, sizeof(OP::T) == 8 ? RUN_ENTRIES_WIDE : RUN_ENTRIES>(p);                    \
    } \
    extern "C" __global__ void __launch_bounds__(256, 3) rowblocks_runs_##NAME(StepParams p) {     \
        sorted_runs<OP, sizeof(OP::T) == 8 ? RUN_ENTRIES_WIDE : RUN_ENTRIES, 0>(p);                 \
    } \
    extern "C" __global__ void __launch_bounds__(256, 3) colblocks_runs_##NAME(StepParams p) {     \
        sorted_runs<OP, sizeof(OP::T) == 8 ? RUN_ENTRIES_WIDE : RUN_ENTRIES, 1>(p);                 \
    } \
    extern "C" __global__ void __launch_bounds__(SUBTREE_THREADS) subtrees_##NAME(StepParams p) {  \
        subtree_product<OP>(p);                                                                  \
    }                                                                                            \
    extern "C" __global__ void lone_cells_##NAME(StepParams p) { lone_cells<OP>(p); }

LEAF_KERNELS(plus_times, PlusTimesAcc)
LEAF_KERNELS(counting, CountingAcc)
LEAF_KERNELS(boolean, BooleanAcc)
LEAF_KERNELS(tropical, TropicalAcc)
LEAF_KERNELS(bits, BitsAcc)

// `expand` of traverse.cu with the child offsets of `warp_children` (no per-thread
// directory rank): used by the wrank and agg variants on tree-only descents.
extern "C" __global__ void expand_wrank(StepParams p) {
    start_dependents();
    wait_prerequisites();
    const u32 lane = threadIdx.x & 31;
    for (u64 base = global_thread() - lane; base < p.count; base += thread_stride()) {
        u64 t = base + lane;
        bool valid = t < p.count;
        u64 tc = valid ? t : p.count - 1;
        u32 s;
        u64 first;
        if (!p.offsets) {
            warp_children(p, base, p.count, tc, lane, s, first);
        } else {
            s = signature(p.nib, p.node0 + tc);
            first = first_child(p, tc);
        }
        if (!valid) continue;
        u64 code = code_at(p, p.src_off + t);
        u64 out = first - p.child0;
        bool alive = live(p, code != PRUNED, code, p.level);
#pragma unroll
        for (u32 b = 0; b < 4; ++b) {
            if (s & (1u << b)) {
                u64 child = (code << 2) | b;
                if (!live(p, alive, child, p.level + 1)) child = PRUNED;
                p.codes_out[out++] = child;
            }
        }
    }
}
