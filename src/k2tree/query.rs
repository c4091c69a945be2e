//! Top-down queries: rows, columns, single cells, and host-side level expansion.

use rayon::prelude::*;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::OnceLock;

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

    fn line(&self, axis: Axis, fixed: u32) -> Vec<u32> {
        let limit = match axis {
            Axis::Row => self.rows,
            Axis::Col => self.cols,
        };
        let mut out = Vec::new();
        if self.nodes() == 0 || fixed as u64 >= limit {
            return out;
        }
        let h = self.height;
        // Depth-first with the lower free coordinate first, so the output is ascending.
        let mut stack = vec![(0u64, 0u32, 0u64)]; // (node, level, free-coordinate base)
        while let Some((j, d, base)) = stack.pop() {
            let shift = h - 1 - d;
            let fbit = ((fixed >> shift) & 1) as u8;
            let s = self.signature(j);
            let quads = match axis {
                Axis::Row => [fbit << 1, (fbit << 1) | 1],
                Axis::Col => [fbit, 2 | fbit],
            };
            if d + 1 == h {
                for b in quads {
                    if s & (1 << b) != 0 {
                        let free = match axis {
                            Axis::Row => b & 1,
                            Axis::Col => b >> 1,
                        };
                        out.push((base + free as u64) as u32);
                    }
                }
                continue;
            }
            let first = self.first_child(j);
            for b in quads.into_iter().rev() {
                if s & (1 << b) != 0 {
                    let free = match axis {
                        Axis::Row => b & 1,
                        Axis::Col => b >> 1,
                    } as u64;
                    let child = first + (s & ((1 << b) - 1)).count_ones() as u64;
                    stack.push((child, d + 1, base + (free << shift)));
                }
            }
        }
        out
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
    let write = |first: u64, codes: &[u64], out: &mut [u64]| {
        let mut o = 0;
        for (i, &f) in codes.iter().enumerate() {
            let s = t.signature(first + i as u64);
            for b in 0..4 {
                if s & (1 << b) != 0 {
                    out[o] = (f << 2) | b as u64;
                    o += 1;
                }
            }
        }
    };
    let mut next = vec![0u64; children];
    if codes.len() <= CHUNK {
        write(start, codes, &mut next);
        return next;
    }
    let nib = t.nibbles();
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
    let start = t.level_start(h - 1);
    let mut out = Vec::with_capacity(t.nnz() as usize);
    for (i, &f) in leaves.iter().enumerate() {
        let s = t.signature(start + i as u64);
        for b in 0..4 {
            if s & (1 << b) != 0 {
                out.push(morton::decode((f << 2) | b as u64));
            }
        }
    }
    out
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

/// Trees with more cells than this never get [`Lines`]: the lists take 4 bytes per cell
/// (plus 8 per non-empty line), which for large relations would undo the compression.
pub const MAX_LINE_CELLS: u64 = 1 << 22;

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
}

impl Lines {
    fn build(tree: &K2Tree, by_column: bool) -> Lines {
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
        };
        for (k, v) in cells {
            if lines.keys.last() != Some(&k) {
                lines.keys.push(k);
                lines.offsets.push(lines.values.len() as u32);
            }
            lines.values.push(v);
        }
        lines.offsets.push(lines.values.len() as u32);
        // A frontier node's line found by one array read instead of a binary search over
        // all keys (~20 dependent cache misses on a graph of 10^5-10^6 lines, more than
        // reading the line itself): worth 4 bytes per line up to the last key while at
        // least a quarter of those lines are non-empty.
        let span = lines.keys.last().map_or(0, |&k| k as usize + 1);
        if span <= 4 * lines.keys.len() {
            lines.by_line = vec![0; span + 1];
            let mut next = 0;
            for (k, slot) in lines.by_line.iter_mut().enumerate() {
                while next < lines.keys.len() && (lines.keys[next] as usize) < k {
                    next += 1;
                }
                *slot = lines.offsets[next];
            }
        }
        lines
    }

    /// Calls `f(key, value)` for every cell on the lines `active` (ascending, distinct);
    /// returns the work done (lines looked up plus cells), in the units of a descent's
    /// node visits: [`LINE_READS_PER_VISIT`] line or cell reads count as one.
    pub fn for_each(&self, active: &[u32], f: impl FnMut(u32, u32)) -> u64 {
        self.read(active, f).div_ceil(LINE_READS_PER_VISIT)
    }

    /// [`Lines::for_each`], returning the lines looked up plus the cells read.
    fn read(&self, active: &[u32], mut f: impl FnMut(u32, u32)) -> u64 {
        if !self.by_line.is_empty() {
            let mut cells = 0u64;
            let last = self.by_line.len() - 1;
            for &a in active {
                let a_ = a as usize;
                if a_ >= last {
                    break;
                }
                let (lo, hi) = (self.by_line[a_] as usize, self.by_line[a_ + 1] as usize);
                for &v in &self.values[lo..hi] {
                    f(a, v);
                }
                cells += (hi - lo) as u64;
            }
            return active.len() as u64 + cells;
        }
        let mut from = 0;
        let mut cells = 0u64;
        for &a in active {
            // The keys are ascending like `active`: search only past the last hit.
            from += self.keys[from..].partition_point(|&k| k < a);
            if from == self.keys.len() {
                break;
            }
            if self.keys[from] == a {
                let (lo, hi) = (self.offsets[from] as usize, self.offsets[from + 1] as usize);
                for &v in &self.values[lo..hi] {
                    f(a, v);
                }
                cells += (hi - lo) as u64;
            }
        }
        active.len() as u64 + cells
    }

    /// The non-empty lines (rows, or columns), ascending.
    pub fn keys(&self) -> &[u32] {
        &self.keys
    }

    /// Heap bytes held.
    pub fn bytes(&self) -> u64 {
        4 * (self.keys.len() + self.offsets.len() + self.values.len() + self.by_line.len()) as u64
    }
}

/// The lazily built [`Lines`] of one orientation of a tree, with the descent work spent
/// on that orientation so far.
#[derive(Debug, Default)]
pub(crate) struct LineCache {
    work: AtomicU64,
    lines: OnceLock<Lines>,
}

impl Clone for LineCache {
    fn clone(&self) -> Self {
        LineCache {
            work: AtomicU64::new(self.work.load(Ordering::Relaxed)),
            lines: self.lines.clone(),
        }
    }
}

impl K2Tree {
    /// The rows' (`by_column == false`: successor) or columns' (predecessor) lists if
    /// built; built now when `work` more node visits of descents in that orientation
    /// bring the total past the tree's node count — by then the descents have cost about
    /// one full decode, so building costs at most as much as what was already spent
    /// (the ski-rental rule) — and the tree has at most [`MAX_LINE_CELLS`] cells.
    pub fn lines_after(&self, by_column: bool, work: u64) -> Option<&Lines> {
        let cache = &self.lines[by_column as usize];
        if let Some(l) = cache.lines.get() {
            return Some(l);
        }
        if self.nnz() > MAX_LINE_CELLS {
            return None;
        }
        let spent = cache.work.fetch_add(work, Ordering::Relaxed) + work;
        if spent < self.nodes() {
            return None;
        }
        Some(cache.lines.get_or_init(|| Lines::build(self, by_column)))
    }

    /// The lists of [`K2Tree::lines_after`] if already built (builds nothing).
    pub fn lines_if_built(&self, by_column: bool) -> Option<&Lines> {
        self.lines[by_column as usize].lines.get()
    }
}
