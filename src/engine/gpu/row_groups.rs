//! Row groups: a second arrangement of a `RowBlocks` frontier's entries for bit-packed
//! right products of one word per row (`Tuning::row_groups`; `rowgroups_bits` in
//! `cuda/row_stores.cu`).
//!
//! Block rows are binned by length. A row of `len` entries gets a group of `g` lanes, the
//! smallest power of two with `⌈len / g⌉ ≤` the iteration cap (`Tuning::
//! row_group_iterations`, default [`GROUP_ITERATIONS`]); a warp takes `32 / g`
//! rows of one bin, sorted by length, so that its lanes run the same number of
//! iterations. Lane `k` of a group reads entries `k, k + g, …` of its row, stored so that
//! each iteration of the warp loads 32 slots coalesced (an ELL layout per warp, with
//! empty slots where a row is shorter than the warp's longest; a slot is a block column
//! and a bitmap, in two arrays). The group combines its lanes' words by shuffles and
//! stores its row once: no run logic, no clear, no atomics. A row too long for one warp
//! but not for [`GROUP_WARPS`] takes a block of its own, whose warps combine in shared
//! memory; a longer one is cut into pieces of a warp each, its words cleared first and
//! ORed into. On cnr-2000 the product takes 0.63x the time of the one over row windows,
//! but on graphs whose `x` does not stay in L2
//! it is 1.07-1.2x slower: the bins scatter neighbouring rows, whose gathers share lines,
//! and row windows keep them together.

use std::ops::Range;

use super::frontier::{block_entry_parts, block_row_lengths};
use crate::k2tree::K2Tree;

/// The default iteration cap: a warp runs at most this many iterations, each lane
/// reading at most this many entries (the best of 4, 8 and 16 on cnr-2000: 9.7 µs per
/// product against 10.4 and 10.6).
pub(crate) const GROUP_ITERATIONS: u32 = 8;
/// The largest iteration cap a layout takes (larger ones are clamped to it).
pub(crate) const MAX_GROUP_ITERATIONS: u32 = 64;
/// Warps per block of `rowgroups_bits` (`GROUP_WARPS` there).
pub(crate) const GROUP_WARPS: u32 = 8;
/// A group without a row (`NO_ROW` in `cuda/row_stores.cu`).
pub(crate) const NO_ROW: u32 = 0x7FFF_FFFF;
/// A row piece's flag: its row was cleared first and takes atomic ORs (`SHARED_PART`).
pub(crate) const SHARED_PART: u32 = 0x8000_0000;
/// Descriptor flag of a warp whose block's warps all hold pieces of one row (`BLOCK_ROW`).
pub(crate) const BLOCK_ROW: u32 = 0x100;

/// A `RowBlocks` frontier laid out in row groups.
///
/// A slot keeps an entry's block column and bitmap in two arrays, 6 bytes instead of the
/// entry's 8: the group's row is implied by the lane, and on cnr-2000 the slots are about
/// a third of the product's L2 reads.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct RowGroups {
    /// Per slot, warp by warp and iteration-major (`slot j · 32 + lane`): the entry's
    /// block column (0 in an empty slot).
    pub(crate) cols: Vec<u32>,
    /// Per slot: the entry's 4x4 bitmap; 0 is an empty slot (no cells).
    pub(crate) cells: Vec<u16>,
    /// Per warp: its first slot, its iterations, `log2 g` (with `BLOCK_ROW`) and its
    /// first entry of `rows`.
    pub(crate) desc: Vec<[u32; 4]>,
    /// Per group: its block row (`SHARED_PART` set for a piece), or `NO_ROW`.
    pub(crate) rows: Vec<u32>,
    /// The block rows cut into pieces, cleared before each product.
    pub(crate) shared_rows: Vec<u32>,
}

impl RowGroups {
    /// Device bytes of the layout.
    pub(crate) fn bytes(&self) -> u64 {
        layout_bytes(
            self.cols.len(),
            self.desc.len(),
            self.rows.len() + self.shared_rows.len(),
        )
    }

    /// The entry in slot `slot` of warp `w` (`slot j · 32 + lane` from the warp's first),
    /// as a block entry of its row, or `None` for an empty slot.
    #[cfg(test)]
    fn entry(&self, w: usize, slot: usize) -> Option<u64> {
        let [first, _, flags, base] = self.desc[w];
        let at = first as usize + slot;
        let lane = slot % 32;
        let row = self.rows[base as usize + (lane >> (flags & 0xFF))] & !SHARED_PART;
        (self.cells[at] != 0)
            .then(|| super::frontier::block_entry(row, self.cols[at], self.cells[at]))
    }
}

/// Device bytes of a layout of `slots` slots, `warps` warps and `rows` rows (those of the
/// groups and the cut ones): what [`RowGroups::bytes`] and [`row_groups_bytes`] count.
fn layout_bytes(slots: usize, warps: usize, rows: usize) -> u64 {
    6 * slots as u64 + 16 * warps as u64 + 4 * rows as u64
}

/// One warp before layout: `log2 g`, its groups (a row, or [`NO_ROW`], and the range of
/// its entries), and whether it is one of a block's warps that share a row.
struct Warp {
    lg: u32,
    groups: Vec<(u32, Range<usize>)>,
    block: bool,
}

impl Warp {
    fn iterations(&self) -> u32 {
        let longest = self.groups.iter().map(|g| g.1.len()).max().unwrap_or(0);
        longest.div_ceil(1 << self.lg) as u32
    }

    /// Entries of `rows` the warp takes: one per group, pads included.
    fn row_slots(&self) -> usize {
        32 >> self.lg
    }
}

/// Where every row goes (its warps, in launch order) before any slot is filled: what both
/// the layout and its size are made from.
struct Plan {
    warps: Vec<Warp>,
    shared_rows: Vec<u32>,
    /// Slots of all warps; `None` when they would not fit the kernel's 32-bit indices.
    slots: Option<usize>,
}

/// Lays out `entries` (sorted by block row, as [`super::block_entries`] gives a
/// `RowBlocks` frontier) for block rows `0 .. block_rows`, a warp running at most
/// `iterations` iterations (clamped to `1 ..=` [`MAX_GROUP_ITERATIONS`]). `None` when the
/// slots would not fit the kernel's 32-bit indices.
pub(crate) fn row_groups(entries: &[u64], block_rows: u32, iterations: u32) -> Option<RowGroups> {
    debug_assert!(entries.is_sorted_by_key(|&e| block_entry_parts(e).0));
    let mut lens = vec![0u32; block_rows as usize];
    for &e in entries {
        match lens.get_mut(block_entry_parts(e).0 as usize) {
            Some(len) => *len += 1,
            None => debug_assert!(false, "an entry past the last block row"),
        }
    }
    let plan = Plan::new(&lens, iterations);
    let slots = plan.slots?;
    let mut out = RowGroups {
        cols: vec![0; slots],
        cells: vec![0; slots],
        desc: Vec::with_capacity(plan.warps.len()),
        rows: Vec::with_capacity(plan.warps.iter().map(Warp::row_slots).sum()),
        shared_rows: plan.shared_rows,
    };
    let mut first = 0usize;
    for w in &plan.warps {
        let (g, it) = (1usize << w.lg, w.iterations());
        let flags = w.lg | if w.block { BLOCK_ROW } else { 0 };
        out.desc
            .push([first as u32, it, flags, out.rows.len() as u32]);
        for (gi, (row, run)) in w.groups.iter().enumerate() {
            for (e, &entry) in entries[run.clone()].iter().enumerate() {
                let (_, col, cells) = block_entry_parts(entry);
                let at = first + (e / g) * 32 + gi * g + e % g;
                out.cols[at] = col;
                out.cells[at] = cells;
            }
            out.rows.push(*row);
        }
        out.rows
            .resize(out.rows.len() + w.row_slots() - w.groups.len(), NO_ROW);
        first += 32 * it as usize;
    }
    Some(out)
}

/// Device bytes of [`row_groups`] of `tree`'s `RowBlocks` entries with the same
/// `iterations` ([`RowGroups::bytes`]), counted from the lengths of its block rows without
/// building the entries or laying them out: what the row groups take on the device, for
/// its memory budget. `None` as `row_groups` gives `None`.
pub(crate) fn row_groups_bytes(tree: &K2Tree, iterations: u32) -> Option<u64> {
    let plan = Plan::new(&block_row_lengths(tree), iterations);
    let rows: usize = plan.warps.iter().map(Warp::row_slots).sum();
    Some(layout_bytes(
        plan.slots?,
        plan.warps.len(),
        rows + plan.shared_rows.len(),
    ))
}

impl Plan {
    /// The plan for block rows of `lens[row]` entries each, stored row after row, a warp
    /// running at most `iterations` iterations (clamped as [`row_groups`] says).
    fn new(lens: &[u32], iterations: u32) -> Plan {
        let iterations = iterations.clamp(1, MAX_GROUP_ITERATIONS) as usize;
        let cap = 32 * iterations;
        let block_cap = GROUP_WARPS as usize * cap;
        let mut bins: Vec<Vec<(u32, Range<usize>)>> = vec![Vec::new(); 6];
        let (mut block_warps, mut shared_rows) = (Vec::new(), Vec::new());
        let mut start = 0usize;
        for (row, &len) in (0u32..).zip(lens) {
            let len = len as usize;
            let run = start..start + len;
            start += len;
            if len <= cap {
                let lg = (0..=5u32)
                    .find(|&lg| len.div_ceil(1 << lg) <= iterations)
                    .expect("32 lanes take `cap` entries");
                bins[lg as usize].push((row, run));
            } else if len <= block_cap {
                let piece = len.div_ceil(GROUP_WARPS as usize);
                for k in 0..GROUP_WARPS as usize {
                    let from = (run.start + k * piece).min(run.end);
                    block_warps.push(Warp {
                        lg: 5,
                        groups: vec![(row, from..(from + piece).min(run.end))],
                        block: true,
                    });
                }
            } else {
                shared_rows.push(row);
                let end = run.end;
                let pieces = run
                    .step_by(cap)
                    .map(|from| (row | SHARED_PART, from..(from + cap).min(end)));
                bins[5].extend(pieces);
            }
        }
        let mut warps = Vec::new();
        for (lg, mut bin) in bins.into_iter().enumerate() {
            bin.sort_by_key(|(_, run)| std::cmp::Reverse(run.len()));
            for groups in bin.chunks(32 >> lg) {
                warps.push(Warp {
                    lg: lg as u32,
                    groups: groups.to_vec(),
                    block: false,
                });
            }
        }
        // The longest chains start first; the blocks' warps before them, aligned to blocks.
        warps.sort_by_key(|w| std::cmp::Reverse(w.iterations()));
        block_warps.append(&mut warps);
        let slots: usize = block_warps
            .iter()
            .map(|w| 32 * w.iterations() as usize)
            .sum();
        Plan {
            slots: u32::try_from(slots).is_ok().then_some(slots),
            warps: block_warps,
            shared_rows,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::gpu::frontier::{block_entries, FrontierLayout};
    use rand::{rngs::StdRng, Rng, SeedableRng};

    /// Every row is some group's, every entry is in a slot, and the size is known from the
    /// tree.
    #[test]
    fn every_row_is_a_groups() {
        // Block row 0: cells in block columns 0 and 3; block row 1: none; block row 2: one.
        let tree = K2Tree::from_edges(12, 16, vec![(0, 0), (1, 13), (2, 12), (9, 5)]);
        let entries = block_entries(&tree, FrontierLayout::RowBlocks);
        let g = row_groups(&entries, 3, GROUP_ITERATIONS).unwrap();
        // Every row is some group's, and every entry is in a slot.
        assert_eq!(g.rows.iter().filter(|&&r| r < 3).count(), 3);
        assert_eq!(g.cells.iter().filter(|&&c| c != 0).count(), 3);
        assert!(g.shared_rows.is_empty());
        // Its size is known from the tree without laying it out.
        assert_eq!(row_groups_bytes(&tree, GROUP_ITERATIONS), Some(g.bytes()));
    }

    /// `y = A x` from the layout, lane by lane as `rowgroups_bits` computes it.
    fn product(g: &RowGroups, x: &[u64], n: usize) -> Vec<u64> {
        let mut y = vec![0xA5A5u64; n];
        for &r in &g.shared_rows {
            for i in 0..4 {
                if let Some(w) = y.get_mut(r as usize * 4 + i) {
                    *w = 0;
                }
            }
        }
        let mut block_words: Option<(u32, [u64; 4], u32)> = None;
        for &[first, it, flags, base] in &g.desc {
            let lg = flags & 0xFF;
            let mut acc = [[0u64; 4]; 32];
            for (lane, a) in acc.iter_mut().enumerate() {
                for j in 0..it as usize {
                    let at = first as usize + j * 32 + lane;
                    let (col, bm) = (g.cols[at], g.cells[at]);
                    for b in 0..16 {
                        if bm >> b & 1 != 0 {
                            a[b / 4] |= x.get(col as usize * 4 + b % 4).copied().unwrap_or(0);
                        }
                    }
                }
            }
            let size = 1usize << lg;
            for gi in 0..32 / size {
                let words: [u64; 4] = std::array::from_fn(|i| {
                    acc[gi * size..(gi + 1) * size]
                        .iter()
                        .fold(0, |s, a| s | a[i])
                });
                let head = g.rows[base as usize + gi];
                if flags & BLOCK_ROW != 0 {
                    // A block's 8 warps, in a row: ORed, stored by the last.
                    let (row, sum, seen) = block_words.get_or_insert((head, [0; 4], 0));
                    assert_eq!(*row, head, "a block's warps share a row");
                    sum.iter_mut().zip(words).for_each(|(s, w)| *s |= w);
                    *seen += 1;
                    if *seen == GROUP_WARPS {
                        for (i, &w) in sum.iter().enumerate() {
                            if let Some(yw) = y.get_mut(*row as usize * 4 + i) {
                                *yw = w;
                            }
                        }
                        block_words = None;
                    }
                    continue;
                }
                if head == NO_ROW {
                    continue;
                }
                let r0 = (head & !SHARED_PART) as usize * 4;
                for (i, w) in words.into_iter().enumerate() {
                    if let Some(yw) = y.get_mut(r0 + i) {
                        *yw = if head & SHARED_PART != 0 { *yw | w } else { w };
                    }
                }
            }
        }
        assert!(block_words.is_none(), "a block's warps cut short");
        y
    }

    #[test]
    fn groups_hold_every_cell_once_in_blocks_and_pieces() {
        let mut rng = StdRng::seed_from_u64(31);
        let block_rows = 40u32;
        // Rows of every size class: empty, short, one warp's worth, a block's, more.
        let lens = [
            0usize, 1, 3, 9, 17, 70, 255, 256, 257, 900, 2048, 2049, 5000,
        ];
        // The matrix's cells, block row by block row, then its tree's `RowBlocks` entries.
        let mut cells = Vec::new();
        for row in 0..block_rows {
            let len = lens[row as usize % lens.len()];
            let mut cols: Vec<u32> = (0..len as u32 * 3).collect();
            cols.retain(|_| rng.random_bool(0.34));
            cols.truncate(len);
            for c in cols {
                let bm: u16 = rng.random_range(1..=u16::MAX);
                cells.extend(
                    (0..16u32)
                        .filter(|b| bm >> b & 1 != 0)
                        .map(|b| (4 * row + b / 4, 4 * c + b % 4)),
                );
            }
        }
        let n = (4 * block_rows) as usize;
        let cols = 4 * 3 * lens.iter().max().unwrap();
        let tree = K2Tree::from_edges(n as u64, cols as u64, cells);
        let entries = block_entries(&tree, FrontierLayout::RowBlocks);
        let x: Vec<u64> = (0..cols).map(|_| rng.random()).collect();
        let mut want = vec![0u64; n];
        for &e in &entries {
            let (r, c, bm) = block_entry_parts(e);
            for b in 0..16 {
                if bm >> b & 1 != 0 {
                    want[r as usize * 4 + b / 4] |= x[c as usize * 4 + b % 4];
                }
            }
        }
        let mut all = entries.clone();
        all.sort_unstable();
        let mut row_lens = vec![0usize; block_rows as usize];
        for &e in &entries {
            row_lens[block_entry_parts(e).0 as usize] += 1;
        }
        // The default cap, those around it, the smallest, and one past the largest.
        for iterations in [GROUP_ITERATIONS, 1, 10, 12, MAX_GROUP_ITERATIONS + 1] {
            let at = format!("{iterations} iterations");
            let g = row_groups(&entries, block_rows, iterations).unwrap();
            assert_eq!(row_groups_bytes(&tree, iterations), Some(g.bytes()), "{at}");
            assert_eq!(product(&g, &x, n), want, "{at}");
            let gr = &g;
            let mut seen: Vec<u64> = (0..g.desc.len())
                .flat_map(|w| (0..32 * gr.desc[w][1] as usize).filter_map(move |s| gr.entry(w, s)))
                .collect();
            assert_eq!(seen.len(), g.cells.iter().filter(|&&c| c != 0).count());
            seen.sort_unstable();
            assert_eq!(seen, all, "{at}: every entry in exactly one slot");
            // A row longer than a warp takes (32 lanes x the cap) gets a block of 8 warps,
            // one longer than a block takes is cut into pieces.
            let cap = 32 * iterations.clamp(1, MAX_GROUP_ITERATIONS) as usize;
            let block_cap = GROUP_WARPS as usize * cap;
            let row_len = |r: u32| row_lens[r as usize];
            let mut cut = g.shared_rows.clone();
            cut.sort_unstable();
            let want_cut: Vec<u32> = (0..block_rows)
                .filter(|&r| row_len(r) > block_cap)
                .collect();
            assert_eq!(cut, want_cut, "{at}: the rows cut into pieces");
            let blocked = g.desc.iter().take_while(|d| d[2] & BLOCK_ROW != 0).count();
            let block_rows_held = (0..block_rows)
                .filter(|&r| (cap + 1..=block_cap).contains(&row_len(r)))
                .count();
            assert_eq!(blocked, GROUP_WARPS as usize * block_rows_held, "{at}");
            // The blocks' warps come first, in whole blocks.
            assert!(g.desc[blocked..].iter().all(|d| d[2] & BLOCK_ROW == 0));
            assert!(g.desc.iter().all(|d| d[1] as usize <= cap / 32), "{at}");
        }
        // The default cap (8: a warp's 256 entries, a block's 2,048) both cuts and blocks.
        let g = row_groups(&entries, block_rows, GROUP_ITERATIONS).unwrap();
        assert!(!g.shared_rows.is_empty());
        assert!(g.desc.iter().any(|d| d[2] & BLOCK_ROW != 0));
    }

    #[test]
    fn no_entries_give_groups_of_empty_rows() {
        let g = row_groups(&[], 5, GROUP_ITERATIONS).unwrap();
        assert!(g.cols.is_empty() && g.cells.is_empty());
        let tree = K2Tree::from_edges(20, 20, Vec::new());
        assert_eq!(row_groups_bytes(&tree, GROUP_ITERATIONS), Some(g.bytes()));
        assert_eq!(g.rows.iter().filter(|&&r| r != NO_ROW).count(), 5);
        assert_eq!(product(&g, &[], 20), vec![0; 20]);
    }
}
