//! A plain CSR reference and the random matrices the property tests share.
#![allow(dead_code)]

use k2rpq::engine::{BitMatrix, Direction, Semiring};
use proptest::prelude::*;

/// A Boolean matrix in compressed sparse rows, duplicates removed: the oracle.
#[derive(Clone, Debug)]
pub struct Csr {
    pub rows: u64,
    pub cols: u64,
    ptr: Vec<usize>,
    idx: Vec<u32>,
}

impl Csr {
    /// From cells (duplicates allowed).
    pub fn from_edges(rows: u64, cols: u64, edges: &[(u32, u32)]) -> Self {
        let mut e = edges.to_vec();
        e.sort_unstable();
        e.dedup();
        let mut ptr = vec![0usize; rows as usize + 1];
        for &(r, _) in &e {
            ptr[r as usize + 1] += 1;
        }
        for i in 0..rows as usize {
            ptr[i + 1] += ptr[i];
        }
        Csr {
            rows,
            cols,
            ptr,
            idx: e.iter().map(|&(_, c)| c).collect(),
        }
    }

    /// Distinct cells.
    pub fn nnz(&self) -> u64 {
        self.idx.len() as u64
    }

    /// Columns of row `r`, ascending.
    pub fn row(&self, r: u32) -> Vec<u32> {
        if r as u64 >= self.rows {
            return Vec::new();
        }
        self.idx[self.ptr[r as usize]..self.ptr[r as usize + 1]].to_vec()
    }

    /// Rows of column `c`, ascending.
    pub fn column(&self, c: u32) -> Vec<u32> {
        self.cells()
            .into_iter()
            .filter(|&(_, cc)| cc == c)
            .map(|(r, _)| r)
            .collect()
    }

    /// Whether `(r, c)` is set.
    pub fn contains(&self, r: u32, c: u32) -> bool {
        self.row(r).binary_search(&c).is_ok()
    }

    /// All cells, row-major order.
    pub fn cells(&self) -> Vec<(u32, u32)> {
        (0..self.rows as usize)
            .flat_map(|r| {
                self.idx[self.ptr[r]..self.ptr[r + 1]]
                    .iter()
                    .map(move |&c| (r as u32, c))
            })
            .collect()
    }

    /// The semiring product as the definition says, serially, in row-major cell order.
    pub fn product<S: Semiring>(
        &self,
        dir: Direction,
        x: &[S::Elem],
        batch: usize,
    ) -> Vec<S::Elem> {
        let (_, n_out) = dir.lengths(self.rows, self.cols);
        let mut y = vec![S::zero(); n_out as usize * batch];
        for (r, c) in self.cells() {
            let (i, o) = match dir {
                Direction::Right => (c as usize, r as usize),
                Direction::Left => (r as usize, c as usize),
            };
            for b in 0..batch {
                y[o * batch + b] = S::add(y[o * batch + b], S::contribution(x[i * batch + b]));
            }
        }
        y
    }

    /// `y | A x` (right) or `y | xᵀ A` (left) on bit batches.
    pub fn bool_product(&self, dir: Direction, x: &BitMatrix, y: &BitMatrix) -> BitMatrix {
        let mut out = y.clone();
        let w = x.words();
        for (r, c) in self.cells() {
            let (i, o) = match dir {
                Direction::Right => (c as usize, r as usize),
                Direction::Left => (r as usize, c as usize),
            };
            for k in 0..w {
                out.as_words_mut()[o * w + k] |= x.as_words()[i * w + k];
            }
        }
        out
    }
}

/// A random matrix: `(rows, cols, cells)`, cells possibly repeated. Covers the empty
/// matrix (also 0×n), a single cell, full dense blocks (up to the whole matrix), random
/// scatter with duplicates, sides that are not powers of two, rectangular shapes.
pub fn arb_matrix() -> impl Strategy<Value = (u64, u64, Vec<(u32, u32)>)> {
    let shape = (0u64..=70, 0u64..=70);
    let nonempty = (1u64..=70, 1u64..=70);
    prop_oneof![
        1 => shape.prop_map(|(r, c)| (r, c, Vec::new())),
        1 => nonempty.clone().prop_flat_map(|(r, c)| {
            (0..r as u32, 0..c as u32).prop_map(move |cell| (r, c, vec![cell]))
        }),
        2 => nonempty.clone().prop_flat_map(|(r, c)| {
            (0..r as u32, 0..r as u32, 0..c as u32, 0..c as u32).prop_map(move |(a, b, x, y)| {
                let mut e = Vec::new();
                for i in a.min(b)..=a.max(b) {
                    for j in x.min(y)..=x.max(y) {
                        e.push((i, j));
                    }
                }
                (r, c, e)
            })
        }),
        1 => nonempty.clone().prop_map(|(r, c)| {
            let e = (0..r as u32).flat_map(|i| (0..c as u32).map(move |j| (i, j))).collect();
            (r, c, e)
        }),
        4 => nonempty.prop_flat_map(|(r, c)| {
            proptest::collection::vec((0..r as u32, 0..c as u32), 0..300).prop_map(move |mut e| {
                // Duplicates: repeat a prefix.
                let k = e.len() / 3;
                let dup: Vec<_> = e[..k].to_vec();
                e.extend(dup);
                (r, c, e)
            })
        }),
    ]
}

/// A deterministic pseudo-random graph large enough to exercise the parallel paths
/// (several build chunks, parallel level expansion, several frontier chunks).
pub fn big_matrix(rows: u64, cols: u64, edges: usize, seed: u64) -> Vec<(u32, u32)> {
    let mut s = seed | 1;
    let mut next = move || {
        // xorshift64*
        s ^= s >> 12;
        s ^= s << 25;
        s ^= s >> 27;
        s.wrapping_mul(0x2545_F491_4F6C_DD1D)
    };
    (0..edges)
        .map(|_| {
            let r = (next() % rows) as u32;
            // Half the cells near the diagonal, as in real graphs.
            let c = if next() % 2 == 0 {
                ((r as u64 + next() % 64) % cols) as u32
            } else {
                (next() % cols) as u32
            };
            (r, c)
        })
        .collect()
}
