//! Top-down queries: rows, columns, single cells, and host-side level expansion.

use rayon::prelude::*;

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
