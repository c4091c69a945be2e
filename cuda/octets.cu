// The octet leaf step: the leaf step of a tree-only descent that stops one level above the
// last internal one (`Tuning::octets`, `Bottom::Octets` of the tile plans): a thread owns a
// node of level h − 3 (and vector b) and visits its children's leaves in place, the node's
// 8x8 block of cells as up to four 4x4 blocks (child q at block row q >> 1, block column q
// & 1). The level of the leaves' parents then needs neither a launch nor scratch: the
// node's children are contiguous, so are their leaves, and a rank per level (the node's
// first child, that child's first leaf) finds them all, the leaves' signatures in one or
// two words (≤ 16 nibbles). A right product loads the block's x as two quads (columns 0-3
// and 4-7), sums each of its 8 rows over both halves and updates each non-empty row once,
// so children side by side share their rows' updates (a left product the same over
// columns).

#include "leaf_blocks.cuh"

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
// graph (`ncu`: 74 % of the SMs' issue slots). Octet steps have no scanned offsets.
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
// cnr-2000's tree-only left product ran 1.7x slower).
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
// graph's tree-only right product, 9.5 % off the web graph's. (An 8x8 block built in a
// loop over the leaves issued 40 % fewer instructions too but gained nothing while the
// step waited on scalar atomics.) AGG as in `octet_item`.
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
    // (23 each): 2 % less time on cnr-2000 x 64's right product, 3 % on its left one. The
    // children's signatures are placed the same way first, by s (entry s: a = s, b = 0).
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
__device__ __forceinline__ void octet_loop(const StepParams &p) {
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

// The octet step: the specialised loop where the step has its shape, else the general one.
template <typename Op, bool AGG>
__device__ __forceinline__ void octet_step(const StepParams &p) {
    start_dependents();
    if (Single<0>::fits(p)) octet_loop<Op, AGG, 0>(p);
    else if (Single<1>::fits(p)) octet_loop<Op, AGG, 1>(p);
    else octet_loop<Op, AGG, ANY_DIR>(p);
}

// The two octet families: without and with warp aggregation.
template <typename Op>
__device__ __forceinline__ void leaves_octets(const StepParams &p) { octet_step<Op, false>(p); }
template <typename Op>
__device__ __forceinline__ void leaves_octets_agg(const StepParams &p) { octet_step<Op, true>(p); }

// The octet kernels are bounded to 5 blocks of 256 threads per SM (48 registers, as many
// as the step took before its warp ranks, 56 without the bound) for 4-byte elements;
// bit-packed words need 64 registers without spilling, so 4.
#define OCTET_BOUNDS(Op) __launch_bounds__(256, (sizeof(Op::T) == 8 ? 4 : 5))

#define K2RPQ_IN_octets K2RPQ_FAMILIES
#include "kernels.cuh"

