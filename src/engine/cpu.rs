//! The CPU engine: the paper's level-synchronous traversal on host threads (rayon).
//!
//! It is the reference for the GPU engine and the fallback when no GPU is usable. A
//! dense product walks the last internal level (the cached frontier: Morton codes of the
//! nodes at level `h − 2`) in parallel chunks and visits each node's leaves in place; a
//! masked product descends from the root into the subtrees whose input range meets an
//! active input entry. Output entries collide across threads, so updates use the
//! semiring's atomic, as on the GPU.

use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::Arc;

use rayon::prelude::*;

use super::{
    check_bits_shape, check_product_shape, BitMatrix, Direction, Engine, EngineError, MatrixConfig,
    Result, Semiring, SemiringKind, Traversal,
};
use crate::k2tree::{morton, K2Tree};

/// Leaves of this many last-internal-level nodes form one parallel task.
const CHUNK: usize = 4096;

/// The multi-threaded CPU engine.
#[derive(Clone, Debug, Default)]
pub struct CpuEngine;

/// A tree loaded into the CPU engine (shared, with its directory and frontier computed).
#[derive(Clone, Debug)]
pub struct CpuMatrix {
    tree: Arc<K2Tree>,
    config: MatrixConfig,
}

impl CpuMatrix {
    /// The tree.
    pub fn tree(&self) -> &Arc<K2Tree> {
        &self.tree
    }
}

impl CpuEngine {
    /// A CPU engine on rayon's global pool (all cores unless `RAYON_NUM_THREADS` says).
    pub fn new() -> Self {
        CpuEngine
    }
}

/// Calls `f(row, col)` for every cell below last-internal-level nodes `t0..t1`.
#[inline]
fn for_cells_of(tree: &K2Tree, codes: &[u64], t0: usize, t1: usize, mut f: impl FnMut(u32, u32)) {
    let h = tree.height();
    let internal = tree.level_start(h - 2);
    let mut leaf = tree.first_child(internal + t0 as u64);
    for (t, &code) in codes.iter().enumerate().take(t1).skip(t0) {
        let s = tree.signature(internal + t as u64);
        for b in 0..4u64 {
            if s & (1 << b) != 0 {
                let lam = tree.signature(leaf);
                leaf += 1;
                let base = ((code << 2) | b) << 2;
                for q in 0..4u64 {
                    if lam & (1 << q) != 0 {
                        let (r, c) = morton::decode(base | q);
                        f(r, c);
                    }
                }
            }
        }
    }
}

/// Atomically applies `y ⊕= v` for a 32-bit element, with the semiring's atomic.
#[inline]
fn atomic_add<S: Semiring>(slot: &AtomicU32, v: S::Elem) {
    // SAFETY of the transmutes: Element is only implemented for f32 and u32, both 32-bit.
    let bits: u32 = unsafe { std::mem::transmute_copy(&v) };
    match S::KIND {
        SemiringKind::Counting => {
            slot.fetch_add(bits, Ordering::Relaxed);
        }
        SemiringKind::Boolean => {
            slot.fetch_max(bits, Ordering::Relaxed);
        }
        SemiringKind::Tropical => {
            // Non-negative floats order like their bit patterns.
            slot.fetch_min(bits, Ordering::Relaxed);
        }
        SemiringKind::PlusTimes => {
            let mut cur = slot.load(Ordering::Relaxed);
            loop {
                let old: S::Elem = unsafe { std::mem::transmute_copy(&cur) };
                let new = S::add(old, v);
                let nb: u32 = unsafe { std::mem::transmute_copy(&new) };
                match slot.compare_exchange_weak(cur, nb, Ordering::Relaxed, Ordering::Relaxed) {
                    Ok(_) => break,
                    Err(c) => cur = c,
                }
            }
        }
    }
}

fn as_atomic_u32<T>(y: &mut [T]) -> &[AtomicU32] {
    assert_eq!(std::mem::size_of::<T>(), 4);
    // SAFETY: T is a 32-bit Element (f32/u32) with the alignment of AtomicU32, and the
    // exclusive borrow guarantees no other access while the atomics are in use.
    unsafe { std::slice::from_raw_parts(y.as_mut_ptr() as *const AtomicU32, y.len()) }
}

fn as_atomic_u64(y: &mut [u64]) -> &[AtomicU64] {
    // SAFETY: same layout as u64; exclusive borrow.
    unsafe { std::slice::from_raw_parts(y.as_mut_ptr() as *const AtomicU64, y.len()) }
}

/// Calls `f(row, col)` for every cell of the tree, in parallel: over chunks of the
/// cached frontier (`CachedFrontier`: one pass over the leaves), or by a top-down descent
/// that needs only the signatures and the directory (`TreeOnly`).
fn par_cells(tree: &K2Tree, config: MatrixConfig, f: impl Fn(u32, u32) + Sync) {
    if tree.nodes() == 0 {
        return;
    }
    match config {
        MatrixConfig::CachedFrontier => {
            let codes: &[u64] = tree.frontier();
            let n = codes.len();
            (0..n.div_ceil(CHUNK)).into_par_iter().for_each(|k| {
                for_cells_of(tree, codes, k * CHUNK, ((k + 1) * CHUNK).min(n), &f);
            });
        }
        MatrixConfig::TreeOnly => descend_cells(tree, Direction::Right, &|_, _| true, f),
    }
}

/// Calls `f(row, col)` for every cell whose input coordinate (right: column, left: row)
/// is in `active` (sorted), descending only into subtrees that can hold one.
fn masked_cells(tree: &K2Tree, dir: Direction, active: &[u32], f: impl Fn(u32, u32) + Sync) {
    if active.is_empty() {
        return;
    }
    let meets = |lo: u64, len: u64| {
        let i = active.partition_point(|&a| (a as u64) < lo);
        i < active.len() && (active[i] as u64) < lo + len
    };
    descend_cells(tree, dir, &meets, f)
}

/// Calls `f(row, col)` for every cell whose input coordinate (right: column, left: row)
/// passes `meets(coordinate, 1)`, descending only into blocks whose input range
/// `lo .. lo + len` passes `meets(lo, len)`.
fn descend_cells(
    tree: &K2Tree,
    dir: Direction,
    meets: &(impl Fn(u64, u64) -> bool + Sync),
    f: impl Fn(u32, u32) + Sync,
) {
    if tree.nodes() == 0 {
        return;
    }
    let h = tree.height();
    // Expand breadth-first to a level with enough nodes for parallelism, then descend
    // depth-first in parallel from there.
    let mut level: Vec<(u64, u64)> = vec![(0, 0)]; // (node, code)
    let mut d = 0;
    while d + 1 < h && level.len() < 256 {
        let mut next = Vec::new();
        for &(j, code) in &level {
            push_children(tree, dir, (j, code, d), meets, &mut next);
        }
        level = next;
        d += 1;
    }
    level.par_iter().for_each(|&(j, code)| {
        let mut stack = vec![(j, code, d)];
        let mut kids = Vec::with_capacity(4);
        while let Some((j, code, d)) = stack.pop() {
            if d + 1 == h {
                let s = tree.signature(j);
                for q in 0..4u64 {
                    if s & (1 << q) != 0 {
                        let (r, c) = morton::decode((code << 2) | q);
                        let input = if dir == Direction::Right { c } else { r };
                        if meets(input as u64, 1) {
                            f(r, c);
                        }
                    }
                }
            } else {
                kids.clear();
                push_children(tree, dir, (j, code, d), meets, &mut kids);
                stack.extend(kids.iter().map(|&(j, c)| (j, c, d + 1)));
            }
        }
    });
}

/// Appends the children of node `j` (level `d`, Morton code `code`) whose input range
/// meets an active entry.
fn push_children(
    tree: &K2Tree,
    dir: Direction,
    (j, code, d): (u64, u64, u32),
    meets: &impl Fn(u64, u64) -> bool,
    out: &mut Vec<(u64, u64)>,
) {
    let s = tree.signature(j);
    let first = tree.first_child(j);
    let span = 1u64 << (tree.height() - 1 - d); // side of a child block
    let mut k = 0;
    for b in 0..4u64 {
        if s & (1 << b) != 0 {
            let child = (code << 2) | b;
            let (r, c) = morton::decode(child);
            let lo = match dir {
                Direction::Right => c as u64,
                Direction::Left => r as u64,
            } * span;
            if meets(lo, span) {
                out.push((first + k, child));
            }
            k += 1;
        }
    }
}

impl Engine for CpuEngine {
    type Matrix = CpuMatrix;
    type Bits = BitMatrix;

    fn name(&self) -> &'static str {
        "cpu"
    }

    fn host_resident(&self) -> bool {
        true
    }

    fn load(&self, tree: &Arc<K2Tree>, config: MatrixConfig) -> Result<CpuMatrix> {
        // The directory is needed by every traversal; the frontier by dense products.
        tree.directory();
        if config == MatrixConfig::CachedFrontier {
            tree.frontier();
        }
        Ok(CpuMatrix {
            tree: tree.clone(),
            config,
        })
    }

    fn matrix_tree<'m>(&self, m: &'m CpuMatrix) -> &'m Arc<K2Tree> {
        &m.tree
    }

    fn matrix_bytes(&self, m: &CpuMatrix) -> u64 {
        self.load_bytes(&m.tree, m.config)
    }

    fn load_bytes(&self, tree: &K2Tree, config: MatrixConfig) -> u64 {
        // From the sizes alone: nothing is built to answer.
        let s = tree.stats();
        s.tree_bytes
            + s.directory_bytes
            + if config == MatrixConfig::CachedFrontier {
                s.frontier_bytes
            } else {
                0
            }
    }

    fn product<S: Semiring>(
        &self,
        m: &CpuMatrix,
        dir: Direction,
        x: &[S::Elem],
        batch: usize,
        y: &mut [S::Elem],
    ) -> Result<()> {
        let t = &m.tree;
        check_product_shape(t, dir, x.len(), batch, y.len())?;
        y.iter_mut().for_each(|v| *v = S::zero());
        let ya = as_atomic_u32(y);
        let zero = S::zero();
        par_cells(t, m.config, |r, c| {
            let (i, o) = match dir {
                Direction::Right => (c as usize, r as usize),
                Direction::Left => (r as usize, c as usize),
            };
            for b in 0..batch {
                let xv = x[i * batch + b];
                // The semiring zero contributes nothing (min(y, 1 + ∞) = y for tropical).
                if xv != zero {
                    atomic_add::<S>(&ya[o * batch + b], S::contribution(xv));
                }
            }
        });
        Ok(())
    }

    fn bits_zeroed(&self, rows: usize, words: usize) -> Result<BitMatrix> {
        Ok(BitMatrix::zeroed(rows, words))
    }

    fn bits_upload(&self, host: &BitMatrix) -> Result<BitMatrix> {
        Ok(host.clone())
    }

    fn bits_download(&self, bits: &BitMatrix) -> Result<BitMatrix> {
        Ok(bits.clone())
    }

    fn bits_clear(&self, bits: &mut BitMatrix) -> Result<()> {
        bits.as_words_mut().par_iter_mut().for_each(|w| *w = 0);
        Ok(())
    }

    fn bits_or(&self, dst: &mut BitMatrix, src: &BitMatrix) -> Result<()> {
        if dst.shape() != src.shape() {
            return Err(EngineError::Shape(format!(
                "bits_or of {:?} and {:?}",
                dst.shape(),
                src.shape()
            )));
        }
        dst.as_words_mut()
            .par_iter_mut()
            .zip(src.as_words().par_iter())
            .for_each(|(d, s)| *d |= s);
        Ok(())
    }

    fn bits_advance(&self, next: &mut BitMatrix, visited: &mut BitMatrix) -> Result<u64> {
        if next.shape() != visited.shape() {
            return Err(EngineError::Shape(format!(
                "bits_advance of {:?} and {:?}",
                next.shape(),
                visited.shape()
            )));
        }
        Ok(next
            .as_words_mut()
            .par_iter_mut()
            .zip(visited.as_words_mut().par_iter_mut())
            .map(|(n, v)| {
                *n &= !*v;
                *v |= *n;
                n.count_ones() as u64
            })
            .sum())
    }

    fn bits_word(&self, bits: &BitMatrix, index: usize) -> Result<u64> {
        bits.as_words().get(index).copied().ok_or_else(|| {
            EngineError::Shape(format!("word {index} of a {:?} batch", bits.shape()))
        })
    }

    fn bits_or_word(&self, bits: &mut BitMatrix, index: usize, mask: u64) -> Result<()> {
        let shape = bits.shape();
        let w = bits
            .as_words_mut()
            .get_mut(index)
            .ok_or_else(|| EngineError::Shape(format!("word {index} of a {shape:?} batch")))?;
        *w |= mask;
        Ok(())
    }

    fn bool_product(
        &self,
        m: &CpuMatrix,
        dir: Direction,
        x: &BitMatrix,
        y: &mut BitMatrix,
        traversal: Traversal,
    ) -> Result<()> {
        let t = &m.tree;
        check_bits_shape(t, dir, x.shape(), y.shape())?;
        let w = x.words();
        let xs = x.as_words();
        let ya = as_atomic_u64(y.as_words_mut());
        let update = |r: u32, c: u32| {
            let (i, o) = match dir {
                Direction::Right => (c as usize, r as usize),
                Direction::Left => (r as usize, c as usize),
            };
            for k in 0..w {
                let v = xs[i * w + k];
                if v != 0 {
                    ya[o * w + k].fetch_or(v, Ordering::Relaxed);
                }
            }
        };
        match traversal {
            Traversal::Dense => par_cells(t, m.config, update),
            Traversal::Masked => {
                let active: Vec<u32> = (0..x.rows())
                    .into_par_iter()
                    .filter(|&i| x.row(i).iter().any(|&v| v != 0))
                    .map(|i| i as u32)
                    .collect();
                masked_cells(t, dir, &active, update)
            }
        }
        Ok(())
    }
}
