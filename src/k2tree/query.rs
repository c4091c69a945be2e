//! Top-down queries: rows, columns, single cells, and host-side level expansion.

use rayon::prelude::*;

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use super::{count_bits, morton, K2Tree};

/// Which coordinate of a cell a descent fixes.
#[derive(Clone, Copy)]
enum Axis {
    Row,
    Col,
}

impl K2Tree {
    /// Columns `c` with `A[r][c] = 1`, ascending (successors of `r`).
    pub fn row(&self, r: u32) -> Vec<u32> {
        self.line(Axis::Row, r)
    }

    /// Rows `r` with `A[r][c] = 1`, ascending (predecessors of `c`).
    pub fn column(&self, c: u32) -> Vec<u32> {
        self.line(Axis::Col, c)
    }

    /// Whether cell `(r, c)` is set.
    pub fn contains(&self, r: u32, c: u32) -> bool {
        if self.nodes() == 0 || r as u64 >= self.rows || c as u64 >= self.cols {
            return false;
        }
        let h = self.height;
        let mut j = 0u64;
        for d in 0..h {
            let shift = h - 1 - d;
            let b = ((((r >> shift) & 1) << 1) | ((c >> shift) & 1)) as u8;
            let s = self.signature(j);
            if s & (1 << b) == 0 {
                return false;
            }
            if d + 1 < h {
                j = self.first_child(j) + (s & ((1 << b) - 1)).count_ones() as u64;
            }
        }
        true
    }

    /// Cells on row `fixed` (`by_column == false`) or column `fixed`, counting at most to
    /// `cap`: read off the lists when built, else counted by a descent that stops at
    /// `cap` and whose visits count towards building the lists
    /// ([`K2Tree::lines_after`]), like a walk's. A planner comparing the fan-out of two
    /// ends needs only the smaller one exactly: a large column of a relation without
    /// locality costs ~`height` visits per cell (tens of ms for 10^5 cells).
    pub fn line_len_upto(&self, by_column: bool, fixed: u32, cap: u64) -> u64 {
        if let Some(l) = self.lines_if_built(by_column) {
            return (l.line(fixed).len() as u64).min(cap);
        }
        let axis = if by_column { Axis::Col } else { Axis::Row };
        let (count, visits) = self.line_count(axis, fixed, cap);
        self.lines_after(by_column, visits);
        count
    }

    /// Cells on a line, at most `cap`, and the nodes visited to count them.
    fn line_count(&self, axis: Axis, fixed: u32, cap: u64) -> (u64, u64) {
        if cap == 0 {
            return (0, 0);
        }
        let mut count = 0u64;
        let visits = self.walk_line(axis, fixed, |_| {
            count += 1;
            count < cap
        });
        (count, visits)
    }

    fn line(&self, axis: Axis, fixed: u32) -> Vec<u32> {
        let mut out = Vec::new();
        self.walk_line(axis, fixed, |free| {
            out.push(free);
            true
        });
        out
    }

    /// Descends to the cells of line `fixed`, depth-first with the lower free coordinate
    /// first (so in ascending order), calling `cell(free coordinate)` for each until it
    /// returns false; returns the tree nodes visited.
    fn walk_line(&self, axis: Axis, fixed: u32, mut cell: impl FnMut(u32) -> bool) -> u64 {
        let limit = match axis {
            Axis::Row => self.rows,
            Axis::Col => self.cols,
        };
        if self.nodes() == 0 || fixed as u64 >= limit {
            return 0;
        }
        let h = self.height;
        let free_of = |b: u8| match axis {
            Axis::Row => b & 1,
            Axis::Col => b >> 1,
        } as u64;
        let mut visits = 0u64;
        let mut stack = vec![(0u64, 0u32, 0u64)]; // (node, level, free-coordinate base)
        while let Some((j, d, base)) = stack.pop() {
            visits += 1;
            let shift = h - 1 - d;
            let fbit = ((fixed >> shift) & 1) as u8;
            let s = self.signature(j);
            let quads = match axis {
                Axis::Row => [fbit << 1, (fbit << 1) | 1],
                Axis::Col => [fbit, 2 | fbit],
            };
            if d + 1 == h {
                for b in quads {
                    if s & (1 << b) != 0 && !cell((base + free_of(b)) as u32) {
                        return visits;
                    }
                }
                continue;
            }
            let first = self.first_child(j);
            for b in quads.into_iter().rev() {
                if s & (1 << b) != 0 {
                    let child = first + (s & ((1 << b) - 1)).count_ones() as u64;
                    stack.push((child, d + 1, base + (free_of(b) << shift)));
                }
            }
        }
        visits
    }
}

/// Morton codes (prefixes of `2·d` bits) of the nodes of level `d`, in level order.
pub(super) fn expand_to(t: &K2Tree, d: u32) -> Vec<u64> {
    if t.nodes() == 0 {
        return Vec::new();
    }
    let mut codes = vec![0u64];
    for k in 0..d {
        codes = expand_level(t, t.level_start(k), &codes, t.level_nodes(k + 1) as usize);
    }
    codes
}

/// Codes of the children of the nodes `start..start + codes.len()` (whose codes are
/// `codes`), in level order. Large levels are split into chunks whose output offsets
/// come from a popcount prefix sum, then written in parallel.
fn expand_level(t: &K2Tree, start: u64, codes: &[u64], children: usize) -> Vec<u64> {
    const CHUNK: usize = 1 << 14;
    let nib = t.nibbles();
    let write = |first: u64, codes: &[u64], out: &mut [u64]| {
        write_children(nib, first, codes, out, |f| f << 2, |base, q| base | q)
    };
    let mut next = vec![0u64; children];
    if codes.len() <= CHUNK {
        write(start, codes, &mut next);
        return next;
    }
    let counts: Vec<usize> = codes
        .par_chunks(CHUNK)
        .enumerate()
        .map(|(k, c)| {
            let a = start + (k * CHUNK) as u64;
            count_bits(nib, a, a + c.len() as u64) as usize
        })
        .collect();
    let mut outs = Vec::with_capacity(counts.len());
    let mut rest = &mut next[..];
    for &n in &counts {
        let (head, tail) = rest.split_at_mut(n);
        outs.push(head);
        rest = tail;
    }
    codes
        .par_chunks(CHUNK)
        .zip(outs.into_par_iter())
        .enumerate()
        .for_each(|(k, (c, out))| write(start + (k * CHUNK) as u64, c, out));
    next
}

/// Every set cell, in Morton order.
pub(super) fn cells(t: &K2Tree) -> Vec<(u32, u32)> {
    if t.nodes() == 0 {
        return Vec::new();
    }
    let h = t.height();
    let leaves = expand_to(t, h - 1);
    let mut out = vec![(0, 0); t.nnz() as usize];
    write_children(
        t.nibbles(),
        t.level_start(h - 1),
        &leaves,
        &mut out,
        |f| {
            let (r, c) = morton::decode(f);
            (2 * r, 2 * c)
        },
        |(r, c), q| (r + (q >> 1) as u32, c + (q & 1) as u32),
    );
    out
}

/// The quadrants of the children of a node, by its signature: `QUADRANTS[s]` begins with
/// the set bits of `s` in ascending order (the rest is padding).
const QUADRANTS: [[u8; 4]; 16] = {
    let mut table = [[0u8; 4]; 16];
    let mut s = 0;
    while s < 16 {
        let (mut b, mut k) = (0, 0);
        while b < 4 {
            if s & (1 << b) != 0 {
                table[s][k] = b as u8;
                k += 1;
            }
            b += 1;
        }
        s += 1;
    }
    table
};

/// Writes into `out` one item per child of the nodes `first..first + parents.len()`, in
/// level order: `child(base(parent), quadrant)`, where `parent` is the node's entry of
/// `parents`; `out` holds exactly as many items as the nodes have children.
///
/// Each node writes four items and advances by its number of children, so that the loop
/// has no branch on the signature's bits, which a sparse tree's nodes make unpredictable
/// (decoding the 20M wikidata-like store's line lists took about a third of the time of
/// a loop over the set bits).
#[inline]
fn write_children<B: Copy, T: Copy>(
    nib: &[u64],
    first: u64,
    parents: &[u64],
    out: &mut [T],
    base: impl Fn(u64) -> B,
    child: impl Fn(B, u64) -> T,
) {
    let mut o = 0;
    for (i, &p) in parents.iter().enumerate() {
        let j = first + i as u64;
        let s = ((nib[(j / 16) as usize] >> (4 * (j % 16))) & 0xF) as usize;
        let b = base(p);
        let q = QUADRANTS[s];
        let n = s.count_ones() as usize;
        if let Some(dst) = out.get_mut(o..o + 4) {
            dst[0] = child(b, q[0] as u64);
            dst[1] = child(b, q[1] as u64);
            dst[2] = child(b, q[2] as u64);
            dst[3] = child(b, q[3] as u64);
        } else {
            for k in 0..n {
                out[o + k] = child(b, q[k] as u64);
            }
        }
        o += n;
    }
    debug_assert_eq!(o, out.len());
}

/// Largest row and largest column holding a cell, by descending only along the maximal
/// row (column) prefix at each level.
pub(super) fn max_cell(t: &K2Tree) -> (u64, u64) {
    (max_along(t, Axis::Row), max_along(t, Axis::Col))
}

fn max_along(t: &K2Tree, axis: Axis) -> u64 {
    let h = t.height();
    let bit = |b: u8| match axis {
        Axis::Row => b >> 1,
        Axis::Col => b & 1,
    };
    let mut nodes = vec![0u64];
    let mut value = 0u64;
    for d in 0..h {
        let mut best = 0u8;
        for &j in &nodes {
            let s = t.signature(j);
            for b in 0..4 {
                if s & (1 << b) != 0 {
                    best = best.max(bit(b));
                }
            }
        }
        value = (value << 1) | best as u64;
        if d + 1 == h {
            break;
        }
        let mut next = Vec::new();
        for &j in &nodes {
            let s = t.signature(j);
            let first = t.first_child(j);
            let mut k = 0;
            for b in 0..4u8 {
                if s & (1 << b) != 0 {
                    if bit(b) == best {
                        next.push(first + k);
                    }
                    k += 1;
                }
            }
        }
        nodes = next;
    }
    value
}

/// Line and cell reads of [`Lines`] that cost about one node visit of a row or column
/// descent: a visit ranks a signature in a tree far larger than the caches, a cell read
/// is the next `u32` of a list. On cnr-2000 (`k2rpq bench`, `<c> p+ ?y` answers of
/// 1.7k-3.7k nodes) a walk over the lists took a sixth to a tenth of the descents' time.
pub const LINE_READS_PER_VISIT: u64 = 8;

/// Tree nodes that one thread of [`Lines::build_parallel`] decodes and sorts in the time
/// of one node visit of a row or column descent, on a tree far larger than the caches.
///
/// A descent visit is a dependent random read: the signature, then a rank (a directory
/// sample plus up to 16 words of the signatures), a few cache misses each. The build
/// reads the signatures level by level in sequence (the leaves' Morton codes), then sorts
/// 8-byte packed cells. Measured on a 2-core machine over every relation of a 20M
/// wikidata-like store (0.27-42M tree nodes per relation): random single-line descents
/// cost 42-94 ns per visit (50-64 on the large trees), a one-thread build 20-23 ns per tree node
/// on the large trees (6-30 on the small ones): 2.2-3 build nodes per visit, rounded
/// down to 2 so the rule errs towards waiting.
pub const BUILD_NODES_PER_VISIT: u64 = 2;

/// The share of a build's expected wall time that descents of one orientation of a tree
/// must have cost before its lists are built: the build's cost is `nodes /
/// (BUILD_NODES_PER_VISIT · threads)` visits' worth, and the lists are built once the
/// descents have spent `1 / LINE_BUILD_SHARE` of that.
///
/// Plain ski rental (a share of 1) is 2-competitive but waits a whole build's worth of
/// slow descents: at 100M a relation of ~100M tree nodes needs ~3M visits (~0.2 s) on 16
/// cores, more than a benchmark's small queries ever spend on it (w06 `c P131+ v`, ~5
/// ms of descents per run). With 1/16 a few milliseconds of descents pay for the lists,
/// i.e. the first query or two that walk a relation; the worst case (a relation walked
/// once, then never) loses one build per orientation, 17x what the descents cost,
/// bounded by the store's line memory budget and by ~0.1-0.5 s of all cores per list
/// at 100M.
pub const LINE_BUILD_SHARE: u64 = 16;

/// Trees of at most this many nodes get the lists of an orientation on their first
/// descent: a build costs about a millisecond at most (20-30 ns per node, one thread) and
/// the lists a few hundred KiB. A threshold would instead spread many small builds over
/// many runs: a negated property set touches every relation of the store (CoDEx-M: 49),
/// and each crossed its own threshold in a different run, so run after run paid a few
/// builds (`c !(a|a) v` measured 1.57 ms in the main job's median against 0.008 ms once
/// every list was built).
pub const EAGER_LINE_NODES: u64 = 1 << 16;

/// Descent visits after which a tree of `nodes` nodes gets the lists of an orientation,
/// building them on `threads` threads (see [`LINE_BUILD_SHARE`]); 0 (the first descent)
/// for trees of at most [`EAGER_LINE_NODES`] nodes.
pub fn line_build_threshold(nodes: u64, threads: usize) -> u64 {
    if nodes <= EAGER_LINE_NODES {
        return 0;
    }
    nodes / (BUILD_NODES_PER_VISIT * LINE_BUILD_SHARE * threads.max(1) as u64)
}

/// The default host memory for the line lists of one store: a quarter of the machine's
/// physical memory ([`physical_memory`]).
///
/// The lists take ~4 bytes per cell and orientation plus 8 per non-empty line (12 during
/// a build, see [`Lines::build_parallel`]): the 100M wikidata-like store (89M cells,
/// 21.7M nodes) needs ~1-1.5 GB for both orientations of every relation, which a quarter
/// of any machine that can hold its other structures covers (Oxigraph's copy of the same
/// data took ~27 GB); on the 23 GiB dev machine the default is ~5.8 GiB, on the 128 GiB
/// H200 host 32 GiB. A quarter leaves the rest to query working sets (the batched
/// executor's `nodes`-word bit batches) and to the store's own mapped files.
pub const DEFAULT_LINE_MEMORY: &str = "25%";

/// Physical memory of the machine in bytes (`sysconf`), or 8 GiB where it cannot be read.
pub fn physical_memory() -> u64 {
    // SAFETY: sysconf only reads system configuration.
    let (pages, size) = unsafe {
        (
            libc::sysconf(libc::_SC_PHYS_PAGES),
            libc::sysconf(libc::_SC_PAGESIZE),
        )
    };
    if pages > 0 && size > 0 {
        pages as u64 * size as u64
    } else {
        8 << 30
    }
}

/// Why [`Lines::build_parallel`] built nothing.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum LineBuildError {
    /// The budget has no room for the build.
    #[error("line lists need {needed} bytes, {free} of the line memory budget are free")]
    OverBudget {
        /// Bytes the build would hold at its peak.
        needed: u64,
        /// Bytes free in the budget.
        free: u64,
    },
    /// The allocator refused a buffer.
    #[error("allocating {bytes} bytes for line lists failed")]
    Alloc {
        /// Size of the refused buffer.
        bytes: u64,
    },
}

/// Host memory for the [`Lines`] of a set of trees (one store's relations): builds
/// reserve their peak before allocating and keep what the lists hold; a build that does
/// not fit is refused (nothing is evicted: lists, once built, live as long as their tree).
#[derive(Debug)]
pub struct LineBudget {
    limit: AtomicU64,
    used: AtomicU64,
    built: AtomicU64,
    refused: AtomicU64,
    build_nanos: AtomicU64,
    read: AtomicU64,
    read_nanos: AtomicU64,
    /// Whether large trees' lists are built on a thread of their own.
    background: AtomicBool,
    /// Background builds under way.
    in_flight: AtomicU64,
}

/// What a [`LineBudget`] holds and has done.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct LineMemoryStats {
    /// The budget in bytes.
    pub limit: u64,
    /// Bytes held by built lists (and by builds in progress).
    pub used: u64,
    /// Lists built (one per tree and orientation).
    pub built: u64,
    /// Builds refused for lack of budget or memory.
    pub refused: u64,
    /// Wall time of all builds.
    pub build_time: Duration,
    /// Lists read from lines files instead of built.
    pub read: u64,
    /// Wall time of all reads.
    pub read_time: Duration,
    /// Background builds under way.
    pub building: u64,
}

impl std::fmt::Display for LineMemoryStats {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "line lists: {} built ({:.1} MiB of {:.1} MiB budget, {:.1} ms building), {} refused",
            self.built,
            self.used as f64 / (1 << 20) as f64,
            self.limit as f64 / (1 << 20) as f64,
            self.build_time.as_secs_f64() * 1e3,
            self.refused
        )?;
        if self.read > 0 {
            write!(
                f,
                ", {} read from files ({:.1} ms)",
                self.read,
                self.read_time.as_secs_f64() * 1e3
            )?;
        }
        if self.building > 0 {
            write!(f, ", {} building in the background", self.building)?;
        }
        Ok(())
    }
}

impl LineBudget {
    /// A budget of `limit` bytes.
    pub fn new(limit: u64) -> LineBudget {
        LineBudget {
            limit: AtomicU64::new(limit),
            used: AtomicU64::new(0),
            built: AtomicU64::new(0),
            refused: AtomicU64::new(0),
            build_nanos: AtomicU64::new(0),
            read: AtomicU64::new(0),
            read_nanos: AtomicU64::new(0),
            background: AtomicBool::new(false),
            in_flight: AtomicU64::new(0),
        }
    }

    /// A budget of [`DEFAULT_LINE_MEMORY`].
    pub fn with_default_limit() -> LineBudget {
        LineBudget::new(physical_memory() / 4)
    }

    /// Whether the lists of trees above [`EAGER_LINE_NODES`] nodes are built on a thread
    /// of their own when their threshold is crossed ([`K2Tree::lines_after`]) rather than
    /// by the walk that crossed it; off by default.
    ///
    /// A build of a large relation's lists takes 0.1-0.5 s of all cores at 100M
    /// triples, which the query that crossed the threshold waits for inline (a run of
    /// `c P131+ v` at ~0.2-0.9 s instead of 0.02-0.6 ms). In the background nobody waits,
    /// but the walks keep descending until the lists are in while the build takes the
    /// cores: on a 2-core machine the 100M workload's median rose from 1.45 to 4.79 ms,
    /// so it is for servers with cores to spare.
    pub fn set_background_builds(&self, on: bool) {
        self.background.store(on, Ordering::Relaxed);
    }

    /// See [`LineBudget::set_background_builds`].
    pub fn background_builds(&self) -> bool {
        self.background.load(Ordering::Relaxed)
    }

    /// The budget of trees that no store attached one to ([`K2Tree::set_line_budget`]):
    /// one per process, [`DEFAULT_LINE_MEMORY`].
    pub fn global() -> &'static Arc<LineBudget> {
        static GLOBAL: OnceLock<Arc<LineBudget>> = OnceLock::new();
        GLOBAL.get_or_init(|| Arc::new(LineBudget::with_default_limit()))
    }

    /// Changes the limit; lists already built stay (the budget may then be over).
    pub fn set_limit(&self, bytes: u64) {
        self.limit.store(bytes, Ordering::Relaxed);
    }

    /// The limit in bytes.
    pub fn limit(&self) -> u64 {
        self.limit.load(Ordering::Relaxed)
    }

    /// Bytes held now.
    pub fn used(&self) -> u64 {
        self.used.load(Ordering::Relaxed)
    }

    /// Counters and sizes.
    pub fn stats(&self) -> LineMemoryStats {
        LineMemoryStats {
            limit: self.limit(),
            used: self.used(),
            built: self.built.load(Ordering::Relaxed),
            refused: self.refused.load(Ordering::Relaxed),
            build_time: Duration::from_nanos(self.build_nanos.load(Ordering::Relaxed)),
            read: self.read.load(Ordering::Relaxed),
            read_time: Duration::from_nanos(self.read_nanos.load(Ordering::Relaxed)),
            building: self.in_flight.load(Ordering::Relaxed),
        }
    }

    /// Takes `bytes` from the budget if they fit.
    pub(crate) fn reserve(&self, bytes: u64) -> Result<(), LineBuildError> {
        let limit = self.limit();
        self.used
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |u| {
                u.checked_add(bytes).filter(|&t| t <= limit)
            })
            .map(|_| ())
            .map_err(|u| LineBuildError::OverBudget {
                needed: bytes,
                free: limit.saturating_sub(u),
            })
    }

    /// Gives back `bytes` taken by a build (lists dropped by their owner).
    pub fn release(&self, bytes: u64) {
        let _ = self
            .used
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |u| {
                Some(u.saturating_sub(bytes))
            });
    }
}

/// A zeroed vector of `len` elements, or [`LineBuildError::Alloc`] instead of an abort.
fn try_zeroed<T: Copy + Default>(len: usize) -> Result<Vec<T>, LineBuildError> {
    let mut v = Vec::new();
    v.try_reserve_exact(len)
        .map_err(|_| LineBuildError::Alloc {
            bytes: (len * std::mem::size_of::<T>()) as u64,
        })?;
    // Lists are read at random by walks: huge pages where enabled (before the writes).
    crate::huge_pages::advise_vec(&v);
    v.resize(len, T::default());
    Ok(v)
}

/// The cells of a tree grouped by row (successor lists) or by column (predecessor lists),
/// decoded once: a sparse walk that expands many frontier nodes of a small relation
/// reads each line in a binary search plus its length, where a row or column descent
/// visits every non-empty block on the line's way down, ~`height` tree nodes with a rank
/// each per cell.
#[derive(Clone, Debug, Default)]
pub struct Lines {
    /// Non-empty lines, ascending.
    keys: Vec<u32>,
    /// `values[offsets[i]..offsets[i + 1]]` is line `keys[i]`, ascending.
    offsets: Vec<u32>,
    values: Vec<u32>,
    /// `values[by_line[k]..by_line[k + 1]]` is line `k` (empty or not), for lines up to the
    /// last key; kept only where the lines are dense enough (see [`Lines::build`]).
    by_line: Vec<u32>,
    /// Where `by_line` is not kept: the keys' positions by line (see [`KeyRank`]).
    key_rank: KeyRank,
    /// Wall time of the build.
    build_time: Duration,
}

/// The non-empty lines as a bitmap with a rank sample every 512 lines: a line's index
/// among the keys in three reads (sample, up to 7 words, the line's word), where a
/// binary search over the keys is ~20 dependent cache misses on 10^5-10^7 keys (a
/// profile of the 100M store's `?x P131* c` on dev: that search was 29 % of the run).
/// About 1.1 bits per line up to the last key; kept where that is at most four times the
/// keys' own bytes or a quarter of the lists' ([`wants_key_rank`]) and the direct index
/// ([`Lines::has_index`]) is not.
#[derive(Clone, Debug, Default, PartialEq)]
struct KeyRank {
    words: Vec<u64>,
    /// Set bits in the words before each group of eight.
    samples: Vec<u32>,
}

impl KeyRank {
    fn new(keys: &[u32]) -> KeyRank {
        let len = line_span(keys).div_ceil(64);
        let mut words = Vec::with_capacity(len);
        crate::huge_pages::advise_vec(&words);
        words.resize(len, 0u64);
        for &k in keys {
            words[k as usize / 64] |= 1 << (k % 64);
        }
        let mut samples = Vec::with_capacity(words.len().div_ceil(8));
        let mut rank = 0u32;
        for (i, w) in words.iter().enumerate() {
            if i % 8 == 0 {
                samples.push(rank);
            }
            rank += w.count_ones();
        }
        KeyRank { words, samples }
    }

    /// The index of `line` among the keys, if it is one.
    #[inline]
    fn index(&self, line: u32) -> Option<usize> {
        let w = line as usize / 64;
        let word = *self.words.get(w)?;
        let bit = 1u64 << (line % 64);
        if word & bit == 0 {
            return None;
        }
        let group = w / 8;
        let before: u32 = self.words[group * 8..w]
            .iter()
            .map(|x| x.count_ones())
            .sum();
        Some((self.samples[group] + before + (word & (bit - 1)).count_ones()) as usize)
    }

    fn is_empty(&self) -> bool {
        self.words.is_empty()
    }

    fn bytes(&self) -> u64 {
        (8 * self.words.len() + 4 * self.samples.len()) as u64
    }
}

/// Whether a [`KeyRank`] (~span/8 bytes) is worth keeping for `keys` over `values` cells:
/// at most four times the keys' own 4 bytes each, or a quarter of the lists' bytes (keys,
/// offsets and values). The second bound keeps it where few keys hold long lines spread
/// over the id space: P279's rows at 100M (125k keys over 21M lines, 23 cells each), whose
/// binary search was ~15 % of `c P279+ v` (w04) for a rank of 2.7 MB beside 12 MB of lists.
fn wants_key_rank(keys: &[u32], values: usize) -> bool {
    let rank_bytes = line_span(keys) / 8;
    let list_bytes = 4 * (2 * keys.len() + values);
    keys.len() > 64 && (rank_bytes <= 16 * keys.len() || rank_bytes <= list_bytes / 4)
}

/// Lines up to the last key (the keys ascending): what an index by line covers.
fn line_span(keys: &[u32]) -> usize {
    keys.last().map_or(0, |&k| k as usize + 1)
}

/// Equal lists (the build time is not compared).
impl PartialEq for Lines {
    fn eq(&self, other: &Self) -> bool {
        self.keys == other.keys
            && self.offsets == other.offsets
            && self.values == other.values
            && self.by_line == other.by_line
            && self.key_rank == other.key_rank
    }
}

/// Whether the direct index by line is worth 4 bytes per line up to the last key: a
/// frontier node's line is then found by one array read instead of a binary search over
/// all keys (~20 dependent cache misses on a graph of 10^5-10^6 lines, more than reading
/// the line itself), kept while at least a quarter of those lines are non-empty.
fn wants_by_line(keys: &[u32]) -> bool {
    let span = line_span(keys);
    span > 0 && span <= 4 * keys.len()
}

impl Lines {
    /// The lists of `tree`'s rows (`by_column == false`) or columns, built on one thread
    /// from [`K2Tree::cells`] and one sort: the reference for [`Lines::build_parallel`].
    pub fn build(tree: &K2Tree, by_column: bool) -> Lines {
        let t0 = Instant::now();
        let mut cells = tree.cells();
        if by_column {
            cells.iter_mut().for_each(|(r, c)| std::mem::swap(r, c));
        }
        cells.sort_unstable();
        let mut lines = Lines {
            keys: Vec::new(),
            offsets: Vec::new(),
            values: Vec::with_capacity(cells.len()),
            by_line: Vec::new(),
            key_rank: KeyRank::default(),
            build_time: Duration::ZERO,
        };
        for (k, v) in cells {
            if lines.keys.last() != Some(&k) {
                lines.keys.push(k);
                lines.offsets.push(lines.values.len() as u32);
            }
            lines.values.push(v);
        }
        lines.offsets.push(lines.values.len() as u32);
        if wants_by_line(&lines.keys) {
            let span = line_span(&lines.keys);
            lines.by_line = vec![0; span + 1];
            let mut next = 0;
            for (k, slot) in lines.by_line.iter_mut().enumerate() {
                while next < lines.keys.len() && (lines.keys[next] as usize) < k {
                    next += 1;
                }
                *slot = lines.offsets[next];
            }
        } else if wants_key_rank(&lines.keys, lines.values.len()) {
            lines.key_rank = KeyRank::new(&lines.keys);
        }
        lines.build_time = t0.elapsed();
        lines
    }

    /// Bytes a parallel build of `tree`'s lists holds at its peak: 8 per cell for the
    /// packed cells being sorted, 4 per cell for the values, 8 per possible non-empty
    /// line (keys and offsets), 4 per line of the largest index by line that could be
    /// kept (see [`Lines::build`]: at most four lines per non-empty one), and a bit and
    /// change per line for a `KeyRank`.
    pub fn peak_bytes(tree: &K2Tree, by_column: bool) -> u64 {
        let n = tree.nnz();
        let dim = if by_column { tree.cols() } else { tree.rows() };
        let lines = n.min(dim);
        12 * n + 8 * (lines + 1) + 4 * (dim.min(4 * lines) + 1) + dim.div_ceil(64) * 9
    }

    /// [`Lines::build`] on all of rayon's threads, within `budget`: reserves
    /// [`Lines::peak_bytes`] first, then decodes the subtrees below a level of a few
    /// hundred nodes in parallel (each chunk of that level owns a contiguous range of
    /// every level below it, hence of the cells), sorts the packed `(line, value)` cells
    /// with a parallel sort, and cuts the lines in parallel. On success the budget holds
    /// [`Lines::bytes`] of the result (give them back with [`LineBudget::release`] when
    /// dropping the lists); on an error it holds nothing more than before. A refused
    /// allocation of one of the large buffers is an error, not an abort (the index by
    /// line is then left out).
    pub fn build_parallel(
        tree: &K2Tree,
        by_column: bool,
        budget: &LineBudget,
    ) -> Result<Lines, LineBuildError> {
        let t0 = Instant::now();
        let peak = Lines::peak_bytes(tree, by_column);
        budget.reserve(peak)?;
        let built = build_parts(tree, by_column).inspect_err(|_| budget.release(peak));
        let mut lines = built?;
        lines.add_index();
        budget.release(peak - lines.bytes());
        lines.build_time = t0.elapsed();
        budget.built.fetch_add(1, Ordering::Relaxed);
        budget
            .build_nanos
            .fetch_add(lines.build_time.as_nanos() as u64, Ordering::Relaxed);
        Ok(lines)
    }

    /// Adds the index that finds a line without a search: the direct index by line
    /// where the lines are dense enough, else a [`KeyRank`] where that pays; none when
    /// the allocator refuses the direct index (lines are then found by binary search).
    fn add_index(&mut self) {
        if wants_by_line(&self.keys) {
            if let Ok(mut by_line) = try_zeroed::<u32>(line_span(&self.keys) + 1) {
                fill_by_line(&self.keys, &self.offsets, &mut by_line);
                self.by_line = by_line;
            }
        } else if wants_key_rank(&self.keys, self.values.len()) {
            self.key_rank = KeyRank::new(&self.keys);
        }
    }

    /// Bytes that [`Lines::add_index`] adds for these keys.
    fn index_bytes(keys: &[u32], values: usize) -> u64 {
        let span = line_span(keys) as u64;
        if wants_by_line(keys) {
            4 * (span + 1)
        } else if wants_key_rank(keys, values) {
            8 * span.div_ceil(64) + 4 * span.div_ceil(512)
        } else {
            0
        }
    }

    /// Lists from their parts as [`Lines::parts`] gives them (read back from a file),
    /// checked so that no line lookup can index out of bounds: keys strictly ascending
    /// and below `side`, `offsets` one longer than `keys`, ascending from 0 to the
    /// number of values, every value below `side`. The index is added as a build adds
    /// it, its bytes taken from `budget` (left out when the budget refuses them); the
    /// parts' own bytes are the caller's to reserve.
    pub(crate) fn from_parts(
        keys: Vec<u32>,
        offsets: Vec<u32>,
        values: Vec<u32>,
        side: u64,
        budget: &LineBudget,
    ) -> Result<Lines, String> {
        if offsets.len() != keys.len() + 1 {
            return Err(format!("{} keys but {} offsets", keys.len(), offsets.len()));
        }
        if offsets[0] != 0 || *offsets.last().unwrap() as usize != values.len() {
            return Err("offsets do not span the values".into());
        }
        let ascending = |v: &[u32], strict: bool| {
            v.par_windows(2)
                .all(|w| w[0] < w[1] || (!strict && w[0] == w[1]))
        };
        if !ascending(&keys, true) || keys.last().is_some_and(|&k| k as u64 >= side) {
            return Err("keys are not ascending or exceed the side".into());
        }
        if !ascending(&offsets, false) {
            return Err("offsets are not ascending".into());
        }
        if values.par_iter().any(|&v| v as u64 >= side) {
            return Err("a value exceeds the side".into());
        }
        let mut lines = Lines {
            keys,
            offsets,
            values,
            ..Lines::default()
        };
        let index = Lines::index_bytes(&lines.keys, lines.values.len());
        if budget.reserve(index).is_ok() {
            let before = lines.bytes();
            lines.add_index();
            budget.release(index - (lines.bytes() - before));
        }
        Ok(lines)
    }

    /// Keys, offsets and values: what [`Lines::from_parts`] takes back (the index is
    /// derived from them).
    pub(crate) fn parts(&self) -> [&[u32]; 3] {
        [&self.keys, &self.offsets, &self.values]
    }

    /// Calls `f(key, value)` for every cell on the lines `active` (ascending, distinct);
    /// returns the work done (lines looked up plus cells), in the units of a descent's
    /// node visits: [`LINE_READS_PER_VISIT`] line or cell reads count as one.
    pub fn for_each(&self, active: &[u32], f: impl FnMut(u32, u32)) -> u64 {
        self.read(active, f).div_ceil(LINE_READS_PER_VISIT)
    }

    /// [`Lines::for_each`] a line at a time: `f(key, line)` for every non-empty line of
    /// `active` (ascending, distinct), the same work returned. A caller that tests every
    /// cell against a set keeps the set's state in registers over a whole line.
    pub fn for_each_line(&self, active: &[u32], f: impl FnMut(u32, &[u32])) -> u64 {
        self.read_lines(active, f).div_ceil(LINE_READS_PER_VISIT)
    }

    /// [`Lines::for_each`], returning the lines looked up plus the cells read.
    fn read(&self, active: &[u32], mut f: impl FnMut(u32, u32)) -> u64 {
        self.read_lines(active, |a, line| {
            for &v in line {
                f(a, v);
            }
        })
    }

    /// [`Lines::for_each_line`], returning the lines looked up plus the cells read.
    fn read_lines(&self, active: &[u32], mut f: impl FnMut(u32, &[u32])) -> u64 {
        if !self.by_line.is_empty() {
            let mut cells = 0u64;
            let last = self.by_line.len() - 1;
            for &a in active {
                let a_ = a as usize;
                if a_ >= last {
                    break;
                }
                let (lo, hi) = (self.by_line[a_] as usize, self.by_line[a_ + 1] as usize);
                if hi > lo {
                    f(a, &self.values[lo..hi]);
                }
                cells += (hi - lo) as u64;
            }
            return active.len() as u64 + cells;
        }
        let mut cells = 0u64;
        if !self.key_rank.is_empty() {
            for &a in active {
                if let Some(i) = self.key_rank.index(a) {
                    let (lo, hi) = (self.offsets[i] as usize, self.offsets[i + 1] as usize);
                    f(a, &self.values[lo..hi]);
                    cells += (hi - lo) as u64;
                }
            }
            return active.len() as u64 + cells;
        }
        let mut from = 0;
        for &a in active {
            // The keys are ascending like `active`: search only past the last hit.
            from += self.keys[from..].partition_point(|&k| k < a);
            if from == self.keys.len() {
                break;
            }
            if self.keys[from] == a {
                let (lo, hi) = (self.offsets[from] as usize, self.offsets[from + 1] as usize);
                f(a, &self.values[lo..hi]);
                cells += (hi - lo) as u64;
            }
        }
        active.len() as u64 + cells
    }

    /// The non-empty lines (rows, or columns), ascending.
    pub fn keys(&self) -> &[u32] {
        &self.keys
    }

    /// Line `k` (ascending; empty when absent).
    pub fn line(&self, k: u32) -> &[u32] {
        match self.keys.binary_search(&k) {
            Ok(i) => &self.values[self.offsets[i] as usize..self.offsets[i + 1] as usize],
            Err(_) => &[],
        }
    }

    /// Whether the direct index by line was built.
    pub fn has_index(&self) -> bool {
        !self.by_line.is_empty()
    }

    /// Heap bytes held.
    pub fn bytes(&self) -> u64 {
        4 * (self.keys.len() + self.offsets.len() + self.values.len() + self.by_line.len()) as u64
            + self.key_rank.bytes()
    }

    /// Wall time of the build.
    pub fn build_time(&self) -> Duration {
        self.build_time
    }
}

/// Keys, offsets and values of the lists (no index by line), built in parallel.
fn build_parts(t: &K2Tree, by_column: bool) -> Result<Lines, LineBuildError> {
    let n = t.nnz() as usize;
    if n == 0 {
        return Ok(Lines {
            offsets: vec![0],
            ..Lines::default()
        });
    }
    let mut packed = try_zeroed::<u64>(n)?;
    decode_packed(t, by_column, &mut packed);
    packed.par_sort_unstable();
    let mut values = try_zeroed::<u32>(n)?;
    values
        .par_chunks_mut(CUT_CHUNK)
        .zip(packed.par_chunks(CUT_CHUNK))
        .for_each(|(v, p)| v.iter_mut().zip(p).for_each(|(v, &p)| *v = p as u32));
    // A line starts where the key changes: count the starts per chunk, then write the
    // keys and offsets of each chunk at its prefix-sum position.
    let key = |i: usize| (packed[i] >> 32) as u32;
    let starts = |c: usize, len: usize| {
        let base = c * CUT_CHUNK;
        (base..base + len).filter(move |&i| i == 0 || key(i) != key(i - 1))
    };
    let counts: Vec<usize> = packed
        .par_chunks(CUT_CHUNK)
        .enumerate()
        .map(|(c, ch)| starts(c, ch.len()).count())
        .collect();
    let lines: usize = counts.iter().sum();
    let mut keys = try_zeroed::<u32>(lines)?;
    let mut offsets = try_zeroed::<u32>(lines + 1)?;
    let mut parts = Vec::with_capacity(counts.len());
    let (mut krest, mut orest) = (&mut keys[..], &mut offsets[..lines]);
    for &c in &counts {
        let (kh, kt) = krest.split_at_mut(c);
        let (oh, ot) = orest.split_at_mut(c);
        parts.push((kh, oh));
        (krest, orest) = (kt, ot);
    }
    parts
        .into_par_iter()
        .zip(packed.par_chunks(CUT_CHUNK))
        .enumerate()
        .for_each(|(c, ((ks, os), ch))| {
            for (o, i) in starts(c, ch.len()).enumerate() {
                ks[o] = key(i);
                os[o] = i as u32;
            }
        });
    offsets[lines] = n as u32;
    drop(packed);
    Ok(Lines {
        keys,
        offsets,
        values,
        by_line: Vec::new(),
        key_rank: KeyRank::default(),
        build_time: Duration::ZERO,
    })
}

/// Cells per chunk of the parallel passes over the sorted cells.
const CUT_CHUNK: usize = 1 << 16;

/// `by_line[k]` = the offset of the first line with key `>= k`, in parallel.
fn fill_by_line(keys: &[u32], offsets: &[u32], by_line: &mut [u32]) {
    by_line
        .par_chunks_mut(CUT_CHUNK)
        .enumerate()
        .for_each(|(c, out)| {
            let k0 = c * CUT_CHUNK;
            let mut next = keys.partition_point(|&k| (k as usize) < k0);
            for (i, slot) in out.iter_mut().enumerate() {
                while next < keys.len() && (keys[next] as usize) < k0 + i {
                    next += 1;
                }
                *slot = offsets[next];
            }
        });
}

/// Every cell of `t` as `line << 32 | value` (line = row, or column when `by_column`)
/// into `out` (`nnz` long), in Morton order, decoding subtrees in parallel: the nodes of
/// a level with a few chunks per thread are cut into chunks; a chunk's descendants form
/// one contiguous range on every level below (level order keeps the order of parents),
/// whose ends are two ranks per level, so each chunk expands its own range and writes
/// its cells at their rank.
fn decode_packed(t: &K2Tree, by_column: bool, out: &mut [u64]) {
    let h = t.height();
    let threads = rayon::current_num_threads() as u64;
    let mut d0 = 0;
    while d0 + 1 < h && t.level_nodes(d0) < 64 * threads {
        d0 += 1;
    }
    let top = expand_to(t, d0);
    let per = top.len().div_ceil(8 * threads as usize).max(1);
    // The first leaf below node `j` of level `d` (every node has a child; ranks are
    // only sampled for internal nodes).
    let descend = |mut j: u64, d: u32| -> u64 {
        for _ in d..h - 1 {
            j = t.first_child(j);
        }
        j
    };
    let chunks = top.len().div_ceil(per);
    let leaf_bounds: Vec<u64> = (0..chunks)
        .map(|c| descend(t.level_start(d0) + (c * per) as u64, d0))
        .chain(std::iter::once(t.nodes()))
        .collect();
    // A chunk's cells: the set bits of its leaves.
    let nib = t.nibbles();
    let counts: Vec<u64> = leaf_bounds
        .par_windows(2)
        .map(|w| count_bits(nib, w[0], w[1]))
        .collect();
    let mut bounds = Vec::with_capacity(chunks + 1);
    bounds.push(0u64);
    for c in &counts {
        bounds.push(bounds.last().unwrap() + c);
    }
    let mut parts = Vec::with_capacity(bounds.len() - 1);
    let mut rest = out;
    for w in bounds.windows(2) {
        let (head, tail) = rest.split_at_mut((w[1] - w[0]) as usize);
        parts.push(head);
        rest = tail;
    }
    parts
        .into_par_iter()
        .zip(top.par_chunks(per))
        .enumerate()
        .for_each(|(c, (out, codes))| {
            let mut codes = codes.to_vec();
            let mut next = Vec::new();
            let mut first = t.level_start(d0) + (c * per) as u64;
            for _ in d0..h - 1 {
                let end = first + codes.len() as u64;
                next.clear();
                next.resize(count_bits(nib, first, end) as usize, 0);
                write_children(nib, first, &codes, &mut next, |f| f << 2, |b, q| b | q);
                std::mem::swap(&mut codes, &mut next);
                first = t.first_child(first);
            }
            // A leaf's cells from its own row and column, doubled: the quadrant adds
            // its row bit and its column bit.
            let (key_bit, value_bit) = if by_column { (1, 2) } else { (2, 1) };
            write_children(
                nib,
                first,
                &codes,
                out,
                |f| {
                    let (r, c) = morton::decode(f);
                    let (k, v) = if by_column { (c, r) } else { (r, c) };
                    ((2 * k as u64) << 32) | (2 * v as u64)
                },
                |b, q| b + (((q & key_bit != 0) as u64) << 32) + (q & value_bit != 0) as u64,
            );
        });
}

/// The lazily built [`Lines`] of one orientation of a tree, with the descent work spent
/// on that orientation so far.
#[derive(Debug, Default)]
pub(crate) struct LineCache {
    work: AtomicU64,
    lines: OnceLock<Arc<Lines>>,
    /// Set while one build (on a query's thread or in the background), or the read of
    /// the lists' file, is under way; walks keep descending meanwhile.
    building: AtomicBool,
    /// The lists' file, when the store keeps one ([`K2Tree::set_line_file`]).
    file: OnceLock<LineFile>,
    /// How reading [`LineCache::file`] went, once tried.
    file_state: OnceLock<LineFileState>,
}

/// A lines file ([`super::lines_file`]) of one orientation of a tree.
#[derive(Debug)]
struct LineFile {
    path: std::path::PathBuf,
    /// CRC-32 of the tree's `.k2` file, which the lines file must name.
    tree_crc: u32,
}

/// What became of a tree's lines file ([`LineInfo::file`]).
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub enum LineFileState {
    /// Not needed yet: the lists are read on the orientation's first walk.
    Unread,
    /// Read; the lists in use came from the file.
    Read,
    /// Not usable (the reason); the lists are built as if there were no file.
    Failed(String),
}

/// Both orientations' [`LineCache`]s of a tree and the budget they count against.
///
/// Clones of a tree share the caches (they are the same matrix): a background build
/// works on a clone and its lists land where the original's walks find them.
#[derive(Clone, Debug, Default)]
pub(crate) struct TreeLines {
    caches: Arc<[LineCache; 2]>,
    budget: OnceLock<Arc<LineBudget>>,
}

impl Drop for TreeLines {
    fn drop(&mut self) {
        // The lists go, and their bytes go back, with the last clone of the tree.
        let budget = self.budget.get().unwrap_or(LineBudget::global());
        if let Some(caches) = Arc::get_mut(&mut self.caches) {
            for c in caches.iter_mut() {
                if let Some(l) = c.lines.take() {
                    if Arc::strong_count(&l) == 1 {
                        budget.release(l.bytes());
                    }
                }
            }
        }
    }
}

/// What [`K2Tree::line_info`] reports about one orientation's lists.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct LineInfo {
    /// Whether the lists are by column (predecessor lists).
    pub by_column: bool,
    /// Descent visits counted towards the build so far.
    pub spent_visits: u64,
    /// Visits at which the lists get built ([`line_build_threshold`]).
    pub threshold: u64,
    /// Bytes held, when built.
    pub bytes: Option<u64>,
    /// Build (or read) wall time, when built.
    pub build_time: Option<Duration>,
    /// The lines file, when the store keeps one.
    pub file: Option<LineFileState>,
}

impl K2Tree {
    /// Makes this tree's lists count against `budget` (a store's) instead of
    /// [`LineBudget::global`]; a no-op once a budget is attached or a list is built.
    pub fn set_line_budget(&self, budget: Arc<LineBudget>) {
        if self.lines.caches.iter().all(|c| c.lines.get().is_none()) {
            let _ = self.lines.budget.set(budget);
        }
    }

    /// The budget this tree's lists count against.
    pub fn line_budget(&self) -> &Arc<LineBudget> {
        self.lines.budget.get().unwrap_or(LineBudget::global())
    }

    /// The rows' (`by_column == false`: successor) or columns' (predecessor) lists if
    /// built; built (by [`Lines::build_parallel`], against [`K2Tree::line_budget`]) once
    /// `work` more node visits of descents in that orientation bring the total to
    /// [`line_build_threshold`] of the tree's node count on rayon's threads, i.e. once
    /// the descents have cost [`LINE_BUILD_SHARE`]`⁻¹` of the build's wall time.
    ///
    /// Where the budget asks for background builds ([`LineBudget::set_background_builds`])
    /// and the tree is above [`EAGER_LINE_NODES`], the build runs
    /// on a thread of its own and this call returns `None` at once: the query that
    /// crossed the threshold, and those after it until the lists are in, keep descending
    /// instead of waiting. Otherwise the calling thread builds them now. While another
    /// build is under way, and when the budget refuses (the count then starts over, so a
    /// refused tree retries only after as many visits again), `None`.
    pub fn lines_after(&self, by_column: bool, work: u64) -> Option<&Lines> {
        let cache = &self.lines.caches[by_column as usize];
        if let Some(l) = cache.lines.get() {
            return Some(l);
        }
        if cache.file.get().is_some() && cache.file_state.get().is_none() {
            if let Some(l) = self.read_line_file(by_column) {
                return Some(l);
            }
        }
        let threshold = line_build_threshold(self.nodes(), rayon::current_num_threads());
        let spent = cache.work.fetch_add(work, Ordering::Relaxed) + work;
        if spent < threshold || cache.building.swap(true, Ordering::AcqRel) {
            return None;
        }
        if let Some(l) = cache.lines.get() {
            // Another build ended between the two looks.
            cache.building.store(false, Ordering::Release);
            return Some(l);
        }
        let budget = self.line_budget().clone();
        if threshold > 0 && budget.background_builds() {
            budget.in_flight.fetch_add(1, Ordering::Relaxed);
            let (tree, theirs) = (self.clone(), budget.clone());
            let spawned = std::thread::Builder::new()
                .name("k2rpq-lines".into())
                .spawn(move || tree.build_lines(by_column, &theirs, true));
            if spawned.is_ok() {
                return None;
            }
            // No thread to be had: build here.
            budget.in_flight.fetch_sub(1, Ordering::Relaxed);
        }
        self.build_lines(by_column, &budget, false);
        cache.lines.get().map(|l| &**l)
    }

    /// Keeps the lists of one orientation in a lines file ([`super::lines_file`]) at
    /// `path`, written for the tree whose `.k2` file has CRC `tree_crc`: the first walk
    /// in that orientation reads them instead of counting descents towards a build. A
    /// file that cannot be read (missing, damaged, stale, over the budget) is reported
    /// by [`K2Tree::line_info`] and the lists are then built as without it. A no-op
    /// once a file is attached.
    pub fn set_line_file(&self, by_column: bool, path: std::path::PathBuf, tree_crc: u32) {
        let _ = self.lines.caches[by_column as usize]
            .file
            .set(LineFile { path, tree_crc });
    }

    /// Reads the lists of the attached file once (the first caller that finds no build
    /// under way; the others keep descending meanwhile).
    fn read_line_file(&self, by_column: bool) -> Option<&Lines> {
        let cache = &self.lines.caches[by_column as usize];
        let file = cache.file.get()?;
        if cache.building.swap(true, Ordering::AcqRel) {
            return None;
        }
        if cache.file_state.get().is_none() && cache.lines.get().is_none() {
            let budget = self.line_budget();
            let t0 = Instant::now();
            let state =
                match super::lines_file::read(&file.path, by_column, self, file.tree_crc, budget) {
                    Ok(mut l) => {
                        l.build_time = t0.elapsed();
                        budget.read.fetch_add(1, Ordering::Relaxed);
                        budget
                            .read_nanos
                            .fetch_add(l.build_time.as_nanos() as u64, Ordering::Relaxed);
                        let _ = cache.lines.set(Arc::new(l));
                        LineFileState::Read
                    }
                    Err(e) => LineFileState::Failed(e.to_string()),
                };
            let _ = cache.file_state.set(state);
        }
        cache.building.store(false, Ordering::Release);
        cache.lines.get().map(|l| &**l)
    }

    /// Builds one orientation's lists into the (shared) cache, counts a refusal, and
    /// ends the build that [`K2Tree::lines_after`] started (a `background` one leaves
    /// the budget's count of those under way first).
    fn build_lines(&self, by_column: bool, budget: &LineBudget, background: bool) {
        let cache = &self.lines.caches[by_column as usize];
        match Lines::build_parallel(self, by_column, budget) {
            Ok(l) => {
                let _ = cache.lines.set(Arc::new(l));
            }
            Err(_) => {
                budget.refused.fetch_add(1, Ordering::Relaxed);
                cache.work.store(0, Ordering::Relaxed);
            }
        }
        if background {
            budget.in_flight.fetch_sub(1, Ordering::Relaxed);
        }
        cache.building.store(false, Ordering::Release);
    }

    /// Blocks until no background build of this tree's lists is under way (tests and
    /// measurements that need the lists in place; walks never wait).
    pub fn wait_for_lines(&self) {
        while self
            .lines
            .caches
            .iter()
            .any(|c| c.building.load(Ordering::Acquire))
        {
            std::thread::sleep(Duration::from_millis(1));
        }
    }

    /// The lists of [`K2Tree::lines_after`] if already built (builds nothing).
    pub fn lines_if_built(&self, by_column: bool) -> Option<&Lines> {
        self.lines.caches[by_column as usize]
            .lines
            .get()
            .map(|l| &**l)
    }

    /// Both orientations' state: visits spent, threshold, bytes and build time if built.
    pub fn line_info(&self) -> [LineInfo; 2] {
        let threshold = line_build_threshold(self.nodes(), rayon::current_num_threads());
        [false, true].map(|by_column| {
            let c = &self.lines.caches[by_column as usize];
            let l = c.lines.get();
            LineInfo {
                by_column,
                spent_visits: c.work.load(Ordering::Relaxed),
                threshold,
                bytes: l.map(|l| l.bytes()),
                build_time: l.map(|l| l.build_time()),
                file: c
                    .file
                    .get()
                    .map(|_| c.file_state.get().cloned().unwrap_or(LineFileState::Unread)),
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The rank is kept for dense-enough keys (the old bound), for few keys with long
    /// lines spread over the id space (the lists' bytes bound), and not for a handful of
    /// keys or short lines spread thin.
    #[test]
    fn key_rank_bounds() {
        let spread = |count: u32, span: u32| -> Vec<u32> {
            (0..count)
                .map(|i| (i as u64 * span as u64 / count as u64) as u32)
                .collect()
        };
        // 128 lines per key: the keys' bound, whatever the values.
        assert!(wants_key_rank(&spread(1000, 128_000), 1000));
        assert!(!wants_key_rank(&spread(1000, 200_000), 1000));
        // P279's rows at 100M: 125k keys over 21M lines, 2.9M cells.
        assert!(wants_key_rank(&spread(125_000, 21_024_122), 2_935_664));
        // P530's: 200 keys over 2.5M lines, 40k cells (a search over 200 keys is cached).
        assert!(!wants_key_rank(&spread(200, 2_522_375), 40_000));
        // Too few keys for any index, even with long lines.
        assert!(!wants_key_rank(&spread(64, 1 << 20), 1 << 24));
        assert!(!wants_key_rank(&[], 0));
    }
}
