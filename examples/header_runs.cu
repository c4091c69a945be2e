// The right product of a bit-packed batch of 64 (one u64 word per node) over windows
// that no block row's run crosses (examples/header_runs.rs): an experiment of issue 10,
// not an engine kernel.
//
// A warp owns a window of WINDOW slots, lane i its slots 4i .. 4i + 3. Every block row
// starts a run in exactly one window (an empty row's run has no cells and writes zeros),
// so each y word is written once, with plain stores, and y needs no clear. A run longer
// than a window is cut into parts marked shared: their rows were cleared first and take
// atomics. Two slot formats:
//  - headers (HeaderSlots<R>, blocks of R = 4 or 8 rows): a header `row` (SHARED_ROW set:
//    a shared part; NONE_ROW: padding) starts each run; an entry is `bitmap << 32 |
//    block column`, bit 4r + c = cell (R row + r, 4 col + c).
//  - row entries (RowEntries, 4x4 blocks): the engine's block entries, `row << 40 |
//    col << 16 | bitmap`; a run starts where the row changes. An entry with no cells is a
//    marker: padding (row NONE_ENTRY_ROW), an empty row (col 0) or a shared part's start
//    (col 1), which always starts a run.
// Variants (template flags): CS reads the slots and writes y with the streaming hints
// (evict first: they are touched once), so that L2 keeps more of x; EL also gives x's
// lines the evict-last priority. ABL ablates: 1 no x loads (x words from the index), 2 no
// stores of y (the sums stay live). Ablations only measure; their y is wrong.
// rowwin_lf ("last finisher", V & 16 of row_windows_v) needs no clear of the shared
// parts' rows, so it saves the clear launch: a shared part's marker holds its part id + 1
// in its column field; each part stores its sums to a scratch slot and counts itself done
// on its row's counter, and the last part of the row to finish ORs the others' sums into
// its own and stores the row's words (the threadFenceReduction pattern).
typedef unsigned long long u64;
typedef unsigned int u32;

#define WINDOW 128
#define NONE_ROW 0x7FFFFFFFu
#define SHARED_ROW 0x80000000u
#define NONE_ENTRY_ROW 0xFFFFFFu
#define FULL_MASK 0xFFFFFFFFu
#define WARPS_PER_BLOCK 8

template <int R>
struct HeaderSlots {
    static const int ROWS = R;
    __device__ __forceinline__ static u32 bitmap(u64 s) { return (u32)(s >> 32); }
    __device__ __forceinline__ static u64 col(u64 s) { return (u32)s; }
    // Whether slot s starts a run, given the slot before it.
    __device__ __forceinline__ static bool starts(u64 s, u64) { return (s >> 32) == 0; }
    __device__ __forceinline__ static u32 head(u64 s) { return (u32)s; }
};

struct RowEntries {
    static const int ROWS = 4;
    __device__ __forceinline__ static u32 bitmap(u64 e) { return (u32)(e & 0xFFFFull); }
    __device__ __forceinline__ static u64 col(u64 e) { return (e >> 16) & 0xFFFFFFull; }
    __device__ __forceinline__ static bool starts(u64 e, u64 prev) {
        return (e & 0xFFFFull) == 0 || (e >> 40) != (prev >> 40);
    }
    __device__ __forceinline__ static u32 head(u64 e) {
        u32 row = (u32)(e >> 40);
        if (row == NONE_ENTRY_ROW) return NONE_ROW;
        return (e & 0xFFFFull) == 0 && col(e) == 1 ? row | SHARED_ROW : row;
    }
};

template <bool CS>
__device__ __forceinline__ ulonglong2 load_slots(const u64 *p) {
    return CS ? __ldcs((const ulonglong2 *)p) : *(const ulonglong2 *)p;
}

template <bool EL>
__device__ __forceinline__ ulonglong2 load_x(const u64 *p, u64 policy) {
    if (!EL) return *(const ulonglong2 *)p;
    ulonglong2 v;
    asm volatile("ld.global.L2::cache_hint.v2.u64 {%0, %1}, [%2], %3;"
                 : "=l"(v.x), "=l"(v.y)
                 : "l"(p), "l"(policy));
    return v;
}

// Writes the R words of block row `head` from acc.
template <int R, bool CS>
__device__ __forceinline__ void store_rows(u64 *y, u64 n, u32 head, const u64 acc[R]) {
    u32 row = head & ~SHARED_ROW;
    if (row == NONE_ROW) return;
    u64 r0 = (u64)row * R;
    if (head & SHARED_ROW) {
#pragma unroll
        for (int i = 0; i < R; ++i)
            if (r0 + i < n && acc[i]) atomicOr(&y[r0 + i], acc[i]);
    } else if (r0 + R <= n) {
#pragma unroll
        for (int i = 0; i < R; i += 2) {
            ulonglong2 v = make_ulonglong2(acc[i], acc[i + 1]);
            if (CS) __stcs((ulonglong2 *)(y + r0 + i), v);
            else *(ulonglong2 *)(y + r0 + i) = v;
        }
    } else {
#pragma unroll
        for (int i = 0; i < R; ++i)
            if (r0 + i < n) y[r0 + i] = acc[i];
    }
}

template <int R>
__device__ __forceinline__ u64 fold(const u64 acc[R]) {
    u64 t = 0;
#pragma unroll
    for (int i = 0; i < R; ++i) t ^= acc[i] * (2 * i + 1);
    return t;
}

// Starts the copy of a lane's four slots (32 bytes) into shared memory.
__device__ __forceinline__ void copy_slots(u64 *dst, const u64 *src) {
    u32 d = (u32)__cvta_generic_to_shared(dst);
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(d), "l"(src) : "memory");
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(d + 16), "l"(src + 2) : "memory");
}

template <int R>
__device__ __forceinline__ void give_leading(u64 *dst, const u64 acc[R]) {
#pragma unroll
    for (int r = 0; r < R; r += 2) *(ulonglong2 *)&dst[r] = make_ulonglong2(acc[r], acc[r + 1]);
}

template <typename P, bool CS, bool EL, int ABL, int PF = 0>
__device__ __forceinline__ void window_product(const u64 *slots, u64 windows, const u64 *x, u64 inputs,
                                               u64 *y, u64 n) {
    const int R = P::ROWS;
    // The words a lane gathered before its first run start, for the lane that owns that run.
    __shared__ u64 pre_s[WARPS_PER_BLOCK][32][R];
    const u32 lane = threadIdx.x & 31, wib = threadIdx.x >> 5;
    const u64 stride = ((u64)gridDim.x * blockDim.x) >> 5;
    u64 policy = 0;
    if (EL) asm volatile("createpolicy.fractional.L2::evict_last.b64 %0, 1.0;" : "=l"(policy));
    u64 w = ((u64)blockIdx.x * blockDim.x + threadIdx.x) >> 5;
    // PF = 1: the next window's slots are loaded into registers before this window's
    // gathers, so the slot → x chain of loads is one load long in the loop. PF = 2: the
    // same through cp.async into a double buffer in shared memory (no registers held);
    // each lane copies and reads only its own four slots.
    __shared__ __align__(16) u64 next_s[PF == 2 ? WARPS_PER_BLOCK : 1][2][WINDOW];
    ulonglong2 na, nb;
    u32 cur = 0;
    if ((PF == 1 || PF == 4) && w < windows) {
        const u64 *src = slots + w * WINDOW + lane * 4;
        na = load_slots<CS>(src), nb = load_slots<CS>(src + 2);
    }
    if (PF == 2) {
        if (w < windows) copy_slots(&next_s[wib][0][lane * 4], slots + w * WINDOW + lane * 4);
        asm volatile("cp.async.commit_group;");
    }
    for (; w < windows; w += stride) {
        ulonglong2 a, b;
        if (PF == 1 || PF == 4) {
            a = na, b = nb;
            if (w + stride < windows) {
                const u64 *src = slots + (w + stride) * WINDOW + lane * 4;
                na = load_slots<CS>(src), nb = load_slots<CS>(src + 2);
            }
        } else if (PF == 2) {
            if (w + stride < windows)
                copy_slots(&next_s[wib][cur ^ 1][lane * 4], slots + (w + stride) * WINDOW + lane * 4);
            // A group per iteration (maybe empty): waiting for all but the newest is
            // waiting for this window's.
            asm volatile("cp.async.commit_group;");
            asm volatile("cp.async.wait_group 1;" ::: "memory");
            const u64 *mine = &next_s[wib][cur][lane * 4];
            a = *(const ulonglong2 *)mine, b = *(const ulonglong2 *)(mine + 2);
            cur ^= 1;
        } else {
            const u64 *src = slots + w * WINDOW + lane * 4;
            a = load_slots<CS>(src), b = load_slots<CS>(src + 2);
            // PF = 3: the next window's slots into L2 (no registers held).
            if (PF == 3 && w + stride < windows)
                asm volatile("prefetch.global.L2 [%0];" ::"l"(src + stride * WINDOW));
        }
        u64 s[4] = {a.x, a.y, b.x, b.y};
        // The slot before this lane's first (lane 0: none, its first slot starts a run).
        u64 before = __shfl_up_sync(FULL_MASK, s[3], 1);
        // Every entry's inputs before any sum: the four gathers in flight together.
        u64 xv[4][4];
#pragma unroll
        for (int j = 0; j < 4; ++j) {
            u64 c0 = P::col(s[j]) * 4;
            bool cells = P::bitmap(s[j]) != 0;
            if (ABL == 1) {
#pragma unroll
                for (int c = 0; c < 4; ++c) xv[j][c] = c0 + c;
            } else if (cells && c0 + 4 <= inputs) {
                ulonglong2 p = load_x<EL>(x + c0, policy), q = load_x<EL>(x + c0 + 2, policy);
                xv[j][0] = p.x, xv[j][1] = p.y, xv[j][2] = q.x, xv[j][3] = q.y;
            } else {
#pragma unroll
                for (int c = 0; c < 4; ++c) xv[j][c] = cells && c0 + c < inputs ? x[c0 + c] : 0ull;
            }
        }
        // A lane's leading part (the words before its first run start, all of them if
        // none starts) goes to shared memory for the owner of that run: written once
        // per window, at the first start or at the end.
        u64 acc[R], sink = 0;
#pragma unroll
        for (int r = 0; r < R; ++r) acc[r] = 0ull;
        bool open = false;
        u32 head = NONE_ROW;
#pragma unroll
        for (int j = 0; j < 4; ++j) {
            bool start = (lane == 0 && j == 0) || P::starts(s[j], j == 0 ? before : s[j - 1]);
            if (start) {
                // A start ends the lane's previous run (stored: it is whole) or its
                // leading part.
                if (open) {
                    if (ABL != 2) store_rows<R, CS>(y, n, head, acc);
                    else sink ^= fold<R>(acc);
                } else {
                    give_leading<R>(pre_s[wib][lane], acc);
                }
#pragma unroll
                for (int r = 0; r < R; ++r) acc[r] = 0ull;
                open = true;
                head = P::head(s[j]);
            }
            u32 bm = P::bitmap(s[j]);
#pragma unroll
            for (int r = 0; r < R; ++r)
#pragma unroll
                for (int c = 0; c < 4; ++c)
                    if ((bm >> (4 * r + c)) & 1) acc[r] |= xv[j][c];
        }
        if (!open) give_leading<R>(pre_s[wib][lane], acc);
        // An owner's run goes on through the lanes after it up to the next lane with a
        // start, whose leading part ends the run.
        u32 heads = __ballot_sync(FULL_MASK, open);
        u32 next = heads & ~((2u << lane) - 1u);
        u32 last = next ? __ffs(next) - 1 : 31;
        __syncwarp();
        if (open) {
            for (u32 k = lane + 1; k <= last; ++k) {
#pragma unroll
                for (int r = 0; r < R; r += 2) {
                    ulonglong2 v = *(const ulonglong2 *)&pre_s[wib][k][r];
                    acc[r] |= v.x, acc[r + 1] |= v.y;
                }
            }
            if (ABL != 2) store_rows<R, CS>(y, n, head, acc);
            else sink ^= fold<R>(acc);
        }
        // PF = 4: the next window's x quads into L2, from its slots (arrived by now), so
        // its gathers wait for L2 rather than DRAM.
        if (PF == 4 && w + stride < windows) {
            u64 t[4] = {na.x, na.y, nb.x, nb.y};
#pragma unroll
            for (int j = 0; j < 4; ++j)
                if (P::bitmap(t[j]) && P::col(t[j]) * 4 < inputs)
                    asm volatile("prefetch.global.L2 [%0];" ::"l"(x + P::col(t[j]) * 4));
        }
        // Keeps an ablation's sums live without storing them.
        if (ABL == 2 && sink == 0x123456789ull) y[0] = sink;
        __syncwarp();
    }
}

// Session 19: variants of the engine's `rowwindows_bits` (cuda/windows.cu, the same code
// as rows4_pf_b4 over the same entries), flags V: 1 loads only the halves of an entry's
// four x words that its cells read (bm & 0x3333: columns 0-1, bm & 0xCCCC: 2-3), 2 reads
// x through the read-only path (__ldg), 4 keeps window indices in 32 bits, 8 (an
// ablation, not checked) ORs every x word of an entry into its row without the bitmap,
// 16 finishes shared parts' rows with the last finisher (rowwin_lf) instead of atomics.
template <bool B, typename T, typename F> struct pick { typedef T type; };
template <typename T, typename F> struct pick<false, T, F> { typedef F type; };

template <int V>
__device__ __forceinline__ ulonglong2 load_x_v(const u64 *p) {
    if (V & 2) return __ldg((const ulonglong2 *)p);
    return *(const ulonglong2 *)p;
}

// rowwin_lf's scratch: per part id, its four words (partials) and the ids of its row's
// first part and its number of parts; per first part, the count of its row's parts done
// (zero before a product, and left zero after it).
struct LastFinisher {
    u64 *partials;
    u32 *counters;
    const u32 *part_first;
    const u32 *part_count;
};

// rowwin_lf's head of a run that starts at entry e: as RowEntries::head, but a shared
// part's marker holds its part id + 1 in its column field (never 0, an empty row's).
__device__ __forceinline__ u32 head_lf(u64 e, u32 &part) {
    u32 row = (u32)(e >> 40);
    if (row == NONE_ENTRY_ROW) return NONE_ROW;
    u32 col = (u32)RowEntries::col(e);
    if (RowEntries::bitmap(e) == 0 && col != 0) {
        part = col - 1;
        return row | SHARED_ROW;
    }
    return row;
}

// rowwin_lf's store of a run: a whole row's as store_rows; a shared part's words go to
// its scratch slot, and the last part of its row to finish writes the row (the OR of all
// its parts' words) and resets the row's counter.
__device__ __forceinline__ void store_lf(u64 *y, u64 n, u32 head, u32 part, const u64 acc[4],
                                         const LastFinisher &lf) {
    if (!(head & SHARED_ROW)) {
        store_rows<4, false>(y, n, head, acc);
        return;
    }
    u64 *mine = lf.partials + 4 * (u64)part;
    __stcg((ulonglong2 *)mine, make_ulonglong2(acc[0], acc[1]));
    __stcg((ulonglong2 *)(mine + 2), make_ulonglong2(acc[2], acc[3]));
    const u32 first = __ldg(lf.part_first + part), count = __ldg(lf.part_count + part);
    // The words reach L2 (device scope) before the count says they are there.
    __threadfence();
    if (atomicAdd(&lf.counters[first], 1u) != count - 1) return;
    // The last to finish: every other part's words are in L2; read them there.
    __threadfence();
    u64 w[4] = {acc[0], acc[1], acc[2], acc[3]};
    // Rare (once per shared row): kept rolled, the code is inlined at every store.
#pragma unroll 1
    for (u32 q = first; q < first + count; ++q) {
        if (q == part) continue;
        const u64 *other = lf.partials + 4 * (u64)q;
        ulonglong2 lo = __ldcg((const ulonglong2 *)other), hi = __ldcg((const ulonglong2 *)(other + 2));
        w[0] |= lo.x, w[1] |= lo.y, w[2] |= hi.x, w[3] |= hi.y;
    }
    store_rows<4, false>(y, n, head & ~SHARED_ROW, w);
    // Every part of the row has counted: none reads the counter again in this product.
    lf.counters[first] = 0;
}

// V & 32: the leading parts reach their run's owner by a segmented OR-scan over the lanes
// (five shuffle steps, every lane active) instead of the owner reading them one lane at a
// time from shared memory. In: `lead`, the lane's leading part (all of its sums when it
// has no start), `open`, whether it has a start. Out: for an owner, the OR of the leading
// parts of the lanes after it up to and including the next owner (zero without one).
__device__ __forceinline__ void scan_leading(u32 lane, bool open, u64 lead[4]) {
    // Backwards: lane k gathers lanes k .. k + 2^s - 1, stopping after the first owner.
    bool stop = open;
#pragma unroll
    for (u32 d = 1; d < 32; d <<= 1) {
        u64 o[4];
#pragma unroll
        for (int r = 0; r < 4; ++r) o[r] = __shfl_down_sync(FULL_MASK, lead[r], d);
        bool other_stop = __shfl_down_sync(FULL_MASK, stop, d);
        if (!stop && lane + d < 32) {
#pragma unroll
            for (int r = 0; r < 4; ++r) lead[r] |= o[r];
            stop = other_stop;
        }
    }
    // The owner's share starts at the lane after it.
#pragma unroll
    for (int r = 0; r < 4; ++r) {
        u64 next = __shfl_down_sync(FULL_MASK, lead[r], 1);
        lead[r] = lane < 31 ? next : 0ull;
    }
}

template <int V>
__device__ __forceinline__ void row_windows_v(const u64 *slots, u64 windows, const u64 *x, u64 inputs, u64 *y,
                                              u64 n, LastFinisher lf = LastFinisher()) {
    typedef typename pick<(V & 4) != 0, u32, u64>::type index;
    __shared__ u64 pre_s[WARPS_PER_BLOCK][32][4];
    const u32 lane = threadIdx.x & 31, wib = threadIdx.x >> 5;
    const index stride = (index)(((u64)gridDim.x * blockDim.x) >> 5);
    index w = (index)(((u64)blockIdx.x * blockDim.x + threadIdx.x) >> 5);
    const index nw = (index)windows;
    ulonglong2 na, nb;
    if (w < nw) {
        const u64 *src = slots + (u64)w * WINDOW + lane * 4;
        na = *(const ulonglong2 *)src, nb = *(const ulonglong2 *)(src + 2);
    }
    for (; w < nw; w += stride) {
        ulonglong2 a = na, b = nb;
        if (w + stride < nw) {
            const u64 *src = slots + (u64)(w + stride) * WINDOW + lane * 4;
            na = *(const ulonglong2 *)src, nb = *(const ulonglong2 *)(src + 2);
        }
        u64 s[4] = {a.x, a.y, b.x, b.y};
        u64 before = __shfl_up_sync(FULL_MASK, s[3], 1);
        u64 xv[4][4];
#pragma unroll
        for (int j = 0; j < 4; ++j) {
            u64 c0 = RowEntries::col(s[j]) * 4;
            u32 bm = RowEntries::bitmap(s[j]);
            if (bm != 0 && c0 + 4 <= inputs) {
                ulonglong2 p = make_ulonglong2(0, 0), q = make_ulonglong2(0, 0);
                if (!(V & 1) || (bm & 0x3333)) p = load_x_v<V>(x + c0);
                if (!(V & 1) || (bm & 0xCCCC)) q = load_x_v<V>(x + c0 + 2);
                xv[j][0] = p.x, xv[j][1] = p.y, xv[j][2] = q.x, xv[j][3] = q.y;
            } else {
#pragma unroll
                for (int c = 0; c < 4; ++c) xv[j][c] = bm != 0 && c0 + c < inputs ? x[c0 + c] : 0ull;
            }
        }
        u64 acc[4] = {0ull, 0ull, 0ull, 0ull};
        u64 lead[4] = {0ull, 0ull, 0ull, 0ull};
        bool open = false;
        u32 head = NONE_ROW, part = 0;
#pragma unroll
        for (int j = 0; j < 4; ++j) {
            bool start = (lane == 0 && j == 0) || RowEntries::starts(s[j], j == 0 ? before : s[j - 1]);
            if (start) {
                if (open) {
                    if (V & 16) store_lf(y, n, head, part, acc, lf);
                    else store_rows<4, false>(y, n, head, acc);
                } else if (V & 32) {
#pragma unroll
                    for (int r = 0; r < 4; ++r) lead[r] = acc[r];
                } else {
                    give_leading<4>(pre_s[wib][lane], acc);
                }
#pragma unroll
                for (int r = 0; r < 4; ++r) acc[r] = 0ull;
                open = true;
                head = (V & 16) ? head_lf(s[j], part) : RowEntries::head(s[j]);
            }
            u32 bm = RowEntries::bitmap(s[j]);
            if (V & 8) {
#pragma unroll
                for (int r = 0; r < 4; ++r) acc[r] |= xv[j][r];
            } else {
#pragma unroll
                for (int r = 0; r < 4; ++r)
#pragma unroll
                    for (int c = 0; c < 4; ++c)
                        if ((bm >> (4 * r + c)) & 1) acc[r] |= xv[j][c];
            }
        }
        if (V & 32) {
            if (!open) {
#pragma unroll
                for (int r = 0; r < 4; ++r) lead[r] = acc[r];
            }
            scan_leading(lane, open, lead);
            if (open) {
#pragma unroll
                for (int r = 0; r < 4; ++r) acc[r] |= lead[r];
                store_rows<4, false>(y, n, head, acc);
            }
            continue;
        }
        if (!open) give_leading<4>(pre_s[wib][lane], acc);
        u32 heads = __ballot_sync(FULL_MASK, open);
        u32 next = heads & ~((2u << lane) - 1u);
        u32 last = next ? __ffs(next) - 1 : 31;
        __syncwarp();
        if (open) {
            for (u32 k = lane + 1; k <= last; ++k) {
                ulonglong2 lo = *(const ulonglong2 *)&pre_s[wib][k][0];
                ulonglong2 hi = *(const ulonglong2 *)&pre_s[wib][k][2];
                acc[0] |= lo.x, acc[1] |= lo.y, acc[2] |= hi.x, acc[3] |= hi.y;
            }
            if (V & 16) store_lf(y, n, head, part, acc, lf);
            else store_rows<4, false>(y, n, head, acc);
        }
        __syncwarp();
    }
}

#define ROW_WINDOWS_V(NAME, V)                                                                          \
    extern "C" __global__ void __launch_bounds__(32 * WARPS_PER_BLOCK, 4)                              \
        NAME(const u64 *slots, u64 windows, const u64 *x, u64 inputs, u64 *y, u64 n) {                 \
        row_windows_v<V>(slots, windows, x, inputs, y, n);                                             \
    }
ROW_WINDOWS_V(rowwin_v0, 0)
ROW_WINDOWS_V(rowwin_half, 1)
ROW_WINDOWS_V(rowwin_ldg, 2)
ROW_WINDOWS_V(rowwin_u32, 4)
ROW_WINDOWS_V(rowwin_half_ldg, 3)
ROW_WINDOWS_V(rowwin_u32_half, 5)
ROW_WINDOWS_V(rowwin_u32_ldg, 6)
ROW_WINDOWS_V(rowwin_all, 7)
ROW_WINDOWS_V(rowwin_nobits, 8)
ROW_WINDOWS_V(rowwin_scan, 5 | 32)

// rowwin_u32_half with registers bounded for 5 blocks per SM (48 registers, ptxas: ~100 B
// spilled) instead of 4: 40 warps per SM, cnr-2000's 5519 windows in about one wave.
extern "C" __global__ void __launch_bounds__(32 * WARPS_PER_BLOCK, 5)
    rowwin_u32_half_b5(const u64 *slots, u64 windows, const u64 *x, u64 inputs, u64 *y, u64 n) {
    row_windows_v<5>(slots, windows, x, inputs, y, n);
}

// rowwin_u32_half with the last finisher (no clear launch): over slots whose shared
// markers hold their part ids + 1 (examples/header_runs.rs, `last_finisher`).
extern "C" __global__ void __launch_bounds__(32 * WARPS_PER_BLOCK, 4)
    rowwin_lf(const u64 *slots, u64 windows, const u64 *x, u64 inputs, u64 *y, u64 n, u64 *partials,
              u32 *counters, const u32 *part_first, const u32 *part_count) {
    LastFinisher lf = {partials, counters, part_first, part_count};
    row_windows_v<5 | 16>(slots, windows, x, inputs, y, n, lf);
}

// Session 21's `rowwin_tile` (measured as the engine's kernel, then kept here as the
// record; docs/BENCHMARKS.md, session 21): the window's rows [first, last] get four words
// each in a per-warp tile in shared memory (zero at every window's start). A lane ORs its
// entries into segments (consecutive entries of one row); a segment whose row goes on in
// the lane before or after ORs into the tile with 32-bit shared atomics, any other stores
// its words there; then the lanes copy the tile's rows to y two words a store, zeroing
// what they read. No owner loop over the lanes of a long run. PF loads the next window's
// entries ahead (registers: 64 of them spill 40 B with the tile's live values).
template <bool PF>
__device__ __forceinline__ void rowwin_tile_v(const u64 *slots, u64 windows, const u64 *x, u64 inputs, u64 *y,
                                              u64 n) {
    __shared__ __align__(16) u64 tiles[WARPS_PER_BLOCK][4 * WINDOW];
    const u32 NO_PLACE = 0xFFFFu;
    const u32 lane = threadIdx.x & 31;
    u64 *tile = tiles[threadIdx.x >> 5];
    const u32 stride = (gridDim.x * blockDim.x) >> 5, count = (u32)windows;
    const u32 in = (u32)min(inputs, (u64)1 << 30);
    for (u32 k = 2 * lane; k < 4 * WINDOW; k += 64) *(ulonglong2 *)(tile + k) = make_ulonglong2(0ull, 0ull);
    __syncwarp();
    u32 w = (blockIdx.x * blockDim.x + threadIdx.x) >> 5;
    ulonglong2 na, nb;
    if (PF && w < count) {
        const u64 *src = slots + (u64)w * WINDOW + lane * 4;
        na = *(const ulonglong2 *)src, nb = *(const ulonglong2 *)(src + 2);
    }
    for (; w < count; w += stride) {
        ulonglong2 a, b;
        if (PF) {
            a = na, b = nb;
            if (w + stride < count) {
                const u64 *src = slots + (u64)(w + stride) * WINDOW + lane * 4;
                na = *(const ulonglong2 *)src, nb = *(const ulonglong2 *)(src + 2);
            }
        } else {
            const u64 *src = slots + (u64)w * WINDOW + lane * 4;
            a = *(const ulonglong2 *)src, b = *(const ulonglong2 *)(src + 2);
        }
        const u64 e[4] = {a.x, a.y, b.x, b.y};
        const u32 first = __shfl_sync(FULL_MASK, (u32)(e[0] >> 40), 0);
        // A shared part's marker (no cells, column 1) can only start a window.
        const bool shared_first = __shfl_sync(FULL_MASK, (u32)e[0], 0) == (1u << 16);
        u64 xv[4][4];
#pragma unroll
        for (int j = 0; j < 4; ++j) {
            const u32 c0 = (u32)RowEntries::col(e[j]) * 4, bm = RowEntries::bitmap(e[j]);
            if (bm != 0 && c0 + 4 <= in) {
                ulonglong2 p = make_ulonglong2(0ull, 0ull), q = p;
                if (bm & 0x3333u) p = *(const ulonglong2 *)(x + c0);
                if (bm & 0xCCCCu) q = *(const ulonglong2 *)(x + c0 + 2);
                xv[j][0] = p.x, xv[j][1] = p.y, xv[j][2] = q.x, xv[j][3] = q.y;
            } else {
#pragma unroll
                for (int c = 0; c < 4; ++c) xv[j][c] = bm != 0 && c0 + c < in ? x[c0 + c] : 0ull;
            }
        }
        u32 cell[4], place[4], mine = 0;
#pragma unroll
        for (int j = 0; j < 4; ++j) {
            const u32 row = (u32)(e[j] >> 40);
            cell[j] = RowEntries::bitmap(e[j]);
            place[j] = row == NONE_ENTRY_ROW ? NO_PLACE : row - first;
            mine = place[j] != NO_PLACE ? place[j] : mine;
        }
        const u32 places = __reduce_max_sync(FULL_MASK, mine) + 1;
        const u32 before = __shfl_up_sync(FULL_MASK, place[3], 1);
        const u32 after = __shfl_down_sync(FULL_MASK, place[0], 1);
        bool shared_seg = lane > 0 && place[0] == before;
        u64 acc[4] = {0ull, 0ull, 0ull, 0ull};
#pragma unroll
        for (int j = 0; j < 4; ++j) {
#pragma unroll
            for (int r = 0; r < 4; ++r)
#pragma unroll
                for (int c = 0; c < 4; ++c)
                    if ((cell[j] >> (4 * r + c)) & 1) acc[r] |= xv[j][c];
            if (j == 3 || place[j + 1] != place[j]) {
                if (j == 3) shared_seg = shared_seg || (lane < 31 && place[3] == after);
                if (place[j] != NO_PLACE) {
                    u64 *t = tile + place[j] * 4;
                    if (shared_seg) {
                        u32 *h = (u32 *)t;
#pragma unroll
                        for (int r = 0; r < 4; ++r) {
                            atomicOr(h + 2 * r, (u32)acc[r]);
                            atomicOr(h + 2 * r + 1, (u32)(acc[r] >> 32));
                        }
                    } else {
                        *(ulonglong2 *)t = make_ulonglong2(acc[0], acc[1]);
                        *(ulonglong2 *)(t + 2) = make_ulonglong2(acc[2], acc[3]);
                    }
                }
#pragma unroll
                for (int r = 0; r < 4; ++r) acc[r] = 0ull;
                shared_seg = false;
            }
        }
        __syncwarp();
        const u32 words = places * 4;
        const u64 base = (u64)first * 4;
        for (u32 k = 2 * lane; k < words; k += 64) {
            const ulonglong2 v = *(const ulonglong2 *)(tile + k);
            *(ulonglong2 *)(tile + k) = make_ulonglong2(0ull, 0ull);
            const u64 g = base + k;
            if (shared_first && k < 4) {
                if (g < n && v.x) atomicOr(&y[g], v.x);
                if (g + 1 < n && v.y) atomicOr(&y[g + 1], v.y);
            } else if (g + 2 <= n) {
                *(ulonglong2 *)(y + g) = v;
            } else if (g < n) {
                y[g] = v.x;
            }
        }
        __syncwarp();
    }
}

extern "C" __global__ void __launch_bounds__(32 * WARPS_PER_BLOCK, 4)
    rowwin_tile(const u64 *slots, u64 windows, const u64 *x, u64 inputs, u64 *y, u64 n) {
    rowwin_tile_v<false>(slots, windows, x, inputs, y, n);
}
extern "C" __global__ void __launch_bounds__(32 * WARPS_PER_BLOCK, 4)
    rowwin_tile_pf(const u64 *slots, u64 windows, const u64 *x, u64 inputs, u64 *y, u64 n) {
    rowwin_tile_v<true>(slots, windows, x, inputs, y, n);
}

// Session 20's floors of a window kernel (ablations, not checked; the engine kernel's grid,
// block and register bound): `floor_empty` returns at once (the launch alone),
// `floor_entries` streams each warp's window of entries and stores one word per lane (the
// entry stream and as many stores as a product's runs make), `floor_gathers` also loads
// the x words of every entry with cells and ORs them into its word (the gathers, without
// the bitmap and the run logic).
extern "C" __global__ void __launch_bounds__(32 * WARPS_PER_BLOCK, 4)
    floor_empty(const u64 *slots, u64 windows, const u64 *x, u64 inputs, u64 *y, u64 n) {
    if (windows == 0 && threadIdx.x == 0) y[0] = slots[0] ^ x[0] ^ inputs ^ n;
}

template <bool GATHER>
__device__ __forceinline__ void window_floor(const u64 *slots, u64 windows, const u64 *x, u64 inputs, u64 *y,
                                             u64 n) {
    const u32 lane = threadIdx.x & 31;
    const u32 stride = (gridDim.x * blockDim.x) >> 5, count = (u32)windows;
    for (u32 w = (blockIdx.x * blockDim.x + threadIdx.x) >> 5; w < count; w += stride) {
        const u64 *src = slots + (u64)w * WINDOW + lane * 4;
        ulonglong2 a = *(const ulonglong2 *)src, b = *(const ulonglong2 *)(src + 2);
        u64 e[4] = {a.x, a.y, b.x, b.y};
        u64 v = 0;
#pragma unroll
        for (int j = 0; j < 4; ++j) {
            u64 c0 = RowEntries::col(e[j]) * 4;
            if (!GATHER) {
                v ^= e[j];
            } else if (RowEntries::bitmap(e[j]) && c0 + 4 <= inputs) {
                ulonglong2 p = *(const ulonglong2 *)(x + c0), q = *(const ulonglong2 *)(x + c0 + 2);
                v |= p.x | p.y | q.x | q.y;
            }
        }
        y[((u64)w * 32 + lane) % n] = v;
    }
}

extern "C" __global__ void __launch_bounds__(32 * WARPS_PER_BLOCK, 4)
    floor_entries(const u64 *slots, u64 windows, const u64 *x, u64 inputs, u64 *y, u64 n) {
    window_floor<false>(slots, windows, x, inputs, y, n);
}
extern "C" __global__ void __launch_bounds__(32 * WARPS_PER_BLOCK, 4)
    floor_gathers(const u64 *slots, u64 windows, const u64 *x, u64 inputs, u64 *y, u64 n) {
    window_floor<true>(slots, windows, x, inputs, y, n);
}

// Clears the words of the block rows whose runs cross windows (the shared parts' rows).
template <int R>
__device__ __forceinline__ void clear_rows(const u32 *rows, u64 count, u64 *y, u64 n) {
    for (u64 i = (u64)blockIdx.x * blockDim.x + threadIdx.x; i < count * R; i += (u64)gridDim.x * blockDim.x) {
        u64 at = (u64)rows[i / R] * R + i % R;
        if (at < n) y[at] = 0ull;
    }
}

#define WINDOW_KERNEL_MIN(NAME, P, CS, EL, ABL, PF, MIN_BLOCKS)                                         \
    extern "C" __global__ void __launch_bounds__(32 * WARPS_PER_BLOCK, MIN_BLOCKS)                     \
        NAME(const u64 *slots, u64 windows, const u64 *x, u64 inputs, u64 *y, u64 n) {                 \
        window_product<P, CS, EL, ABL, PF>(slots, windows, x, inputs, y, n);                           \
    }
#define WINDOW_KERNEL(NAME, P, CS, EL, ABL) WINDOW_KERNEL_MIN(NAME, P, CS, EL, ABL, 0, 1)

WINDOW_KERNEL(headers4, HeaderSlots<4>, false, false, 0)
WINDOW_KERNEL(headers8, HeaderSlots<8>, false, false, 0)
WINDOW_KERNEL(rows4, RowEntries, false, false, 0)
WINDOW_KERNEL_MIN(headers4_b4, HeaderSlots<4>, false, false, 0, 0, 4)
WINDOW_KERNEL_MIN(rows4_b4, RowEntries, false, false, 0, 0, 4)
WINDOW_KERNEL_MIN(rows4_b5, RowEntries, false, false, 0, 0, 5)
WINDOW_KERNEL_MIN(rows4_pf_b3, RowEntries, false, false, 0, 1, 3)
WINDOW_KERNEL_MIN(rows4_pf_b4, RowEntries, false, false, 0, 1, 4)
WINDOW_KERNEL_MIN(rows4_async_b4, RowEntries, false, false, 0, 2, 4)
WINDOW_KERNEL_MIN(rows4_l2_b4, RowEntries, false, false, 0, 3, 4)
WINDOW_KERNEL_MIN(rows4_pfx_b3, RowEntries, false, false, 0, 4, 3)
WINDOW_KERNEL_MIN(rows4_pfx_b4, RowEntries, false, false, 0, 4, 4)
WINDOW_KERNEL_MIN(headers4_pfx_b4, HeaderSlots<4>, false, false, 0, 4, 4)
WINDOW_KERNEL(headers4_cs, HeaderSlots<4>, true, false, 0)
WINDOW_KERNEL(headers4_el, HeaderSlots<4>, true, true, 0)
WINDOW_KERNEL_MIN(rows4_async_b4_nox, RowEntries, false, false, 1, 2, 4)
// Session 20's ablations of rows4_pf_b4 (the engine kernel's ancestor), for where cnr-2000's
// time goes: no x loads, and no stores of y.
WINDOW_KERNEL_MIN(rows4_pf_b4_nox, RowEntries, false, false, 1, 1, 4)
WINDOW_KERNEL_MIN(rows4_pf_b4_nostore, RowEntries, false, false, 2, 1, 4)

extern "C" __global__ void clear_rows4(const u32 *rows, u64 count, u64 *y, u64 n) { clear_rows<4>(rows, count, y, n); }
extern "C" __global__ void clear_rows8(const u32 *rows, u64 count, u64 *y, u64 n) { clear_rows<8>(rows, count, y, n); }
