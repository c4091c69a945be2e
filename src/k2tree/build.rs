//! Parallel construction from Morton-sorted codes.
//!
//! After sorting, consecutive distinct codes `m[i-1] < m[i]` first differ at some level
//! `D[i]` (their highest differing bit pair). Code `i` then sets one bit in the node it
//! shares at level `D[i]` and opens a new node at every deeper level. So the size of level
//! `d` is one plus the number of codes with `D[i] < d`, and each code's writes are known
//! from a prefix count: chunks of codes are written independently, in two passes
//! (count, then write), with no per-node allocation. Work is O(nodes + nnz); memory is the
//! codes (8 bytes per edge, sorted in place) plus the tree.

use std::sync::atomic::{AtomicU64, Ordering};

use rayon::prelude::*;

use super::{height_for, morton, InvalidTree, K2Tree, Words};

pub(super) fn from_edges(
    rows: u64,
    cols: u64,
    edges: Vec<(u32, u32)>,
) -> Result<K2Tree, InvalidTree> {
    check_shape(rows, cols)?;
    if let Some(&(r, c)) = edges
        .par_iter()
        .find_any(|&&(r, c)| r as u64 >= rows || c as u64 >= cols)
    {
        return Err(InvalidTree(format!(
            "cell ({r}, {c}) outside the {rows}×{cols} matrix"
        )));
    }
    let mut edges = edges;
    if let Some(codes) = encode_in_place(&mut edges) {
        return build_sorted(rows, cols, sort(codes));
    }
    // Misaligned buffer (not seen with the system allocator): a second edge-sized buffer.
    let mut codes: Vec<u64> = edges
        .into_par_iter()
        .map(|(r, c)| morton::encode(r, c))
        .collect();
    build_sorted(rows, cols, sort(&mut codes))
}

/// Overwrites each `(row, col)` pair with its Morton code in the same 8 bytes, so building
/// from edges needs no second edge-sized buffer; returns the codes, or `None` when the
/// buffer is not 8-byte aligned (then nothing was changed).
fn encode_in_place(edges: &mut [(u32, u32)]) -> Option<&mut [u64]> {
    const _: () = assert!(std::mem::size_of::<(u32, u32)>() == std::mem::size_of::<u64>());
    let base = edges.as_mut_ptr();
    if !(base as usize).is_multiple_of(std::mem::align_of::<u64>()) {
        return None;
    }
    let n = edges.len();
    let addr = base as usize;
    (0..n).into_par_iter().with_min_len(1 << 14).for_each(|i| {
        // SAFETY: `i < n` is inside the exclusively borrowed buffer; each element is read
        // as a pair and then overwritten as a u64 through raw pointers (no references to
        // it are alive), the address is 8-byte aligned (checked above), and both types are
        // 8 bytes of plain data with no invalid bit patterns.
        unsafe {
            let p = (addr as *mut (u32, u32)).add(i);
            let (r, c) = p.read();
            (p as *mut u64).write(morton::encode(r, c));
        }
    });
    // SAFETY: the same buffer, now holding n initialised u64 values; the returned slice
    // borrows `edges` exclusively, so the pairs are not observed while it lives.
    Some(unsafe { std::slice::from_raw_parts_mut(base as *mut u64, n) })
}

/// Coordinates are u32, so a side of at most 2^32 (32 levels, 64-bit codes).
fn check_shape(rows: u64, cols: u64) -> Result<(), InvalidTree> {
    if rows > 1 << 32 || cols > 1 << 32 {
        return Err(InvalidTree(format!(
            "{rows}×{cols} matrix: at most 2^32 rows and columns"
        )));
    }
    Ok(())
}

pub(super) fn from_codes(rows: u64, cols: u64, codes: &mut [u64]) -> Result<K2Tree, InvalidTree> {
    check_shape(rows, cols)?;
    let height = height_for(rows, cols);
    if let Some(&m) = codes.par_iter().find_any(|&&m| {
        let (r, c) = morton::decode(m);
        r as u64 >= rows || c as u64 >= cols || (height < 32 && m >> (2 * height) != 0)
    }) {
        let (r, c) = morton::decode(m);
        return Err(InvalidTree(format!(
            "cell ({r}, {c}) outside the {rows}×{cols} matrix"
        )));
    }
    build_sorted(rows, cols, sort(codes))
}

/// Radix sort (rdst, parallel on the rayon pool): Morton codes are plain integers whose
/// high bytes are mostly zero below 2^32 nodes, where a comparison sort did
/// `n log n` branchy comparisons.
fn sort(codes: &mut [u64]) -> &[u64] {
    use rdst::RadixSort;
    codes.radix_sort_unstable();
    codes
}

/// Ranges of sorted codes the builder's passes take in parallel.
fn chunks(len: usize) -> Vec<(usize, usize)> {
    let threads = rayon::current_num_threads().max(1);
    let chunk = len.div_ceil(threads * 4).max(1 << 14);
    (0..len)
        .step_by(chunk)
        .map(|a| (a, (a + chunk).min(len)))
        .collect()
}

/// Pass 1: per chunk of sorted `codes`, the new nodes opened at each level (`opened[d]`
/// counts codes with D < d; code 0 opens one node at every level) and the distinct codes.
fn opened(height: u32, codes: &[u64], chunks: &[(usize, usize)]) -> Vec<(Vec<u64>, u64)> {
    let h = height as usize;
    chunks
        .par_iter()
        .map(|&(a, b)| {
            let mut hist = vec![0u64; h + 1];
            let mut distinct = 0u64;
            for i in a..b {
                if i == 0 {
                    hist[0] += 1;
                    distinct += 1;
                } else if codes[i] != codes[i - 1] {
                    hist[morton::divergence(height, codes[i - 1], codes[i]) as usize + 1] += 1;
                    distinct += 1;
                }
            }
            // opened[d] = sum over levels D < d, i.e. a prefix sum of hist shifted by one.
            let mut opened = vec![0u64; h];
            let mut acc = 0;
            for d in 0..h {
                acc += hist[d];
                opened[d] = acc;
            }
            (opened, distinct)
        })
        .collect()
}

/// Nodes per level and distinct codes of the whole tree, from the chunks' pass 1.
fn totals(height: u32, counts: &[(Vec<u64>, u64)]) -> (Vec<u64>, u64) {
    let h = height as usize;
    let mut level_nodes = vec![0u64; h];
    let mut nnz = 0;
    for (opened, distinct) in counts {
        for d in 0..h {
            level_nodes[d] += opened[d];
        }
        nnz += distinct;
    }
    if nnz > 0 {
        level_nodes[0] = 1;
    }
    (level_nodes, nnz)
}

/// Nodes per level and non-zero cells of the tree of `height` levels that
/// [`build_sorted`] builds from sorted `codes` (duplicates allowed), counted by its first
/// pass alone.
pub(super) fn level_nodes(height: u32, codes: &[u64]) -> (Vec<u64>, u64) {
    totals(height, &opened(height, codes, &chunks(codes.len())))
}

/// Builds the tree from sorted codes (duplicates allowed).
pub(super) fn build_sorted(rows: u64, cols: u64, codes: &[u64]) -> Result<K2Tree, InvalidTree> {
    let height = height_for(rows, cols);
    let h = height as usize;
    if codes.is_empty() {
        return K2Tree::from_parts(rows, cols, 0, &vec![0; h], Words::owned(Vec::new()));
    }
    let chunks = chunks(codes.len());
    let counts = opened(height, codes, &chunks);
    let (level_nodes, nnz) = totals(height, &counts);
    let mut level_start = vec![0u64; h + 1];
    for d in 0..h {
        level_start[d + 1] = level_start[d] + level_nodes[d];
    }
    let total = level_start[h];
    let words: Vec<AtomicU64> = (0..total.div_ceil(16)).map(|_| AtomicU64::new(0)).collect();

    // Pass 2: each chunk starts with the cursor (index of the open node) at every level.
    let mut cursor0 = vec![vec![0u64; h]; chunks.len()];
    let mut before = vec![0u64; h];
    for (c, (opened, _)) in counts.iter().enumerate() {
        cursor0[c].copy_from_slice(&before);
        for (b, o) in before.iter_mut().zip(opened) {
            *b += o;
        }
    }
    chunks
        .par_iter()
        .zip(cursor0.into_par_iter())
        .for_each(|(&(a, b), mut cur)| {
            // cur[d] = nodes opened at level d before this chunk; the open node is cur[d] - 1.
            // Bits are gathered per level in a pending word and OR-ed into the shared array
            // once per word: nodes of a level are written in order, so only the words at
            // chunk boundaries are shared with another task.
            let mut pending = vec![(u64::MAX, 0u64); h]; // (word index, bits) per level
            let flush = |(w, bits): (u64, u64)| {
                if bits != 0 {
                    words[w as usize].fetch_or(bits, Ordering::Relaxed);
                }
            };
            for i in a..b {
                let m = codes[i];
                let from = if i == 0 {
                    for c in cur.iter_mut().skip(1) {
                        *c += 1;
                    }
                    0
                } else if m == codes[i - 1] {
                    continue;
                } else {
                    let dv = morton::divergence(height, codes[i - 1], m) as usize;
                    for c in cur.iter_mut().skip(dv + 1) {
                        *c += 1;
                    }
                    dv
                };
                for d in from..h {
                    let node = level_start[d] + cur[d].max(1) - 1;
                    let quad = (m >> (2 * (h - 1 - d))) & 3;
                    let w = node / 16;
                    if pending[d].0 != w {
                        flush(pending[d]);
                        pending[d] = (w, 0);
                    }
                    pending[d].1 |= 1u64 << (4 * (node % 16) + quad);
                }
            }
            pending.into_iter().for_each(flush);
        });
    let words: Vec<u64> = words.into_iter().map(AtomicU64::into_inner).collect();
    K2Tree::from_parts(rows, cols, nnz, &level_nodes, Words::owned(words))
}
