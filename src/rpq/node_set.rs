//! Visited sets of the sparse walks ([`super::sparse`]): node ids with their members in
//! insertion order, a hash set while small, then a paged bitset; sets are reused across
//! walks on the same thread, pages included.
//!
//! Sparse walks insert ids at random. A bit test beats hashing, but a page costs 8 KiB
//! zeroed when first written, and a few thousand random members touch hundreds of pages
//! (w08 at 100M: 1429 members, ~2.4 MB of zeroing, 7 % of the run in `memset`), so a
//! set starts as an `FxHashSet` and moves to its pages once either
//! - its members would pay for their pages (8 per page of the id space), or
//! - the walk mostly revisits: more than [`TESTS_PER_MEMBER`] tests per member (w11/w12
//!   at 100M read 40,000 cells of a 200-node clique, 200 members: 60 % of the run was
//!   hash-set tests, ~6 ns each where a bit test on a cached page costs ~1 ns).
//!
//! The second move would pay a page's zeroing per query if the pages were freed with the
//! set; they are not: [`SetPool`] keeps the sets of finished walks on their thread, their
//! pages cleared member by member (a flat bitset of the id space cost one `memset` of
//! `nodes / 8` bytes per state and query: ~0.27 ms per small query on a 21.7M-node
//! store), up to [`POOL_BYTES`] of pages per thread.

use std::cell::RefCell;
use std::ops::{Deref, DerefMut};

use roaring::RoaringBitmap;
use rustc_hash::FxHashSet;

/// Ids per page of a [`NodeSet`] (2^16: 8 KiB of bits).
pub(super) const PAGE_IDS: u32 = 1 << 16;

/// Words per page.
const PAGE_WORDS: usize = (PAGE_IDS / 64) as usize;

/// Bytes of one page.
const PAGE_BYTES: usize = PAGE_WORDS * 8;

/// Tests (inserts, fresh or not) per member past which a hash-set phase moves to the
/// pages: the walk mostly revisits, and every further test is cheaper as a bit test.
/// Counted from [`MIN_TESTS`] on, so that a set of a few members never moves.
pub(super) const TESTS_PER_MEMBER: u64 = 8;

/// Tests before [`TESTS_PER_MEMBER`] applies.
const MIN_TESTS: u64 = 1024;

/// Page bytes a thread's [`SetPool`] keeps for later walks (beyond it, a returned set's
/// pages are freed): a full set of a 21.7M-node store is 2.7 MB, and a walk has a set per
/// automaton state.
pub(super) const POOL_BYTES: usize = 32 << 20;

/// Sets a thread's pool keeps.
const POOL_SETS: usize = 16;

type Page = [u64; PAGE_WORDS];

/// A set of node ids below a bound, with its members in insertion order.
#[derive(Default)]
pub(super) struct NodeSet {
    /// Members while the set is in its hash phase (`paged` false).
    small: FxHashSet<u32>,
    /// Whether the members are in `pages` (and not in `small`).
    paged: bool,
    /// Pages of bits by `id / PAGE_IDS`, allocated when first written; all zero but for
    /// the members' bits.
    pages: Vec<Option<Box<Page>>>,
    /// Pages allocated (`Some` in `pages`).
    allocated: usize,
    /// Pages the id space needs.
    page_count: usize,
    /// Inserts since the last clear.
    tests: u64,
    members: Vec<u32>,
}

impl NodeSet {
    /// An empty set of ids below `nodes`.
    pub(super) fn new(nodes: u32) -> Self {
        let mut set = NodeSet::default();
        set.resize(nodes);
        set
    }

    /// Empties the set and makes it a set of ids below `nodes`, keeping the pages that
    /// still lie in the id space.
    fn resize(&mut self, nodes: u32) {
        self.clear();
        self.page_count = nodes.div_ceil(PAGE_IDS) as usize;
        if self.pages.len() > self.page_count {
            self.allocated -= self.pages[self.page_count..]
                .iter()
                .filter(|p| p.is_some())
                .count();
            self.pages.truncate(self.page_count);
        }
    }

    /// Members up to which the hash set holds the set, whatever the tests: 8 per page
    /// pay for a page's zeroing (1 KiB each).
    fn small_limit(&self) -> usize {
        (8 * self.page_count).max(1024)
    }

    /// Inserts `v` (below the set's bound); whether it was absent.
    #[inline]
    pub(super) fn insert(&mut self, v: u32) -> bool {
        // The walks' hot path (a revisit on an allocated page): a few instructions inline,
        // no call. A test costs its instructions here, not its memory: a hash-set test
        // out of a function call measured no faster than hashing.
        if self.paged {
            if let Some(absent) = insert_on_page(&mut self.pages, &mut self.members, v) {
                return absent;
            }
        }
        self.insert_cold(v)
    }

    /// [`NodeSet::insert`] of each of `values` in order, pushing the fresh ones to
    /// `fresh`: the same members, in the same order, as one `insert` per value. Over a
    /// run of values on allocated pages the set's fields stay in registers (a revisit is
    /// a page lookup and a bit test; one `insert` per cell reloads them, as the pushes
    /// might alias them): the loop of a walk over a line of a relation.
    #[inline]
    pub(super) fn insert_each(&mut self, values: &[u32], fresh: &mut Vec<u32>) {
        let mut i = 0;
        while i < values.len() {
            if self.paged {
                let (pages, members) = (&mut self.pages, &mut self.members);
                while let Some(&v) = values.get(i) {
                    let Some(absent) = insert_on_page(pages, members, v) else {
                        break;
                    };
                    if absent {
                        fresh.push(v);
                    }
                    i += 1;
                }
                if i == values.len() {
                    break;
                }
            }
            let v = values[i];
            if self.insert_cold(v) {
                fresh.push(v);
            }
            i += 1;
        }
    }

    /// [`NodeSet::insert`] in the hash phase, or on a page not yet allocated.
    #[inline(never)]
    fn insert_cold(&mut self, v: u32) -> bool {
        if self.paged {
            let fresh = self.set_bit(v);
            if fresh {
                self.members.push(v);
            }
            return fresh;
        }
        self.tests += 1;
        let fresh = self.small.insert(v);
        if fresh {
            self.members.push(v);
        }
        if self.members.len() > self.small_limit()
            || (self.tests >= MIN_TESTS
                && self.tests > TESTS_PER_MEMBER * self.members.len() as u64)
        {
            self.move_to_pages();
        }
        fresh
    }

    /// Moves the members from the hash set to the pages.
    fn move_to_pages(&mut self) {
        if self.pages.len() < self.page_count {
            self.pages.resize_with(self.page_count, || None);
        }
        self.paged = true;
        for i in 0..self.members.len() {
            self.set_bit(self.members[i]);
        }
        // The hash set's memory stays for the next walk's hash phase.
        self.small.clear();
    }

    /// Sets `v`'s bit in the pages, allocating its page; whether it was clear.
    fn set_bit(&mut self, v: u32) -> bool {
        let allocated = &mut self.allocated;
        let page = self.pages[(v / PAGE_IDS) as usize].get_or_insert_with(|| {
            *allocated += 1;
            Box::new([0; PAGE_WORDS])
        });
        let (w, b) = (((v % PAGE_IDS) / 64) as usize, v % 64);
        let fresh = page[w] & (1 << b) == 0;
        page[w] |= 1 << b;
        fresh
    }

    /// Empties the set (its pages stay allocated, cleared, for the next walk).
    pub(super) fn clear(&mut self) {
        if self.paged {
            for &v in &self.members {
                if let Some(page) = &mut self.pages[(v / PAGE_IDS) as usize] {
                    page[((v % PAGE_IDS) / 64) as usize] = 0;
                }
            }
            self.paged = false;
        } else {
            self.small.clear();
        }
        self.members.clear();
        self.tests = 0;
    }

    /// The pages holding members, ascending.
    fn member_pages(&self) -> Vec<u32> {
        let mut seen = vec![0u64; self.page_count.div_ceil(64)];
        for &v in &self.members {
            let p = (v / PAGE_IDS) as usize;
            seen[p / 64] |= 1 << (p % 64);
        }
        (0..self.page_count as u32)
            .filter(|&p| seen[p as usize / 64] & (1 << (p % 64)) != 0)
            .collect()
    }

    /// Members.
    pub(super) fn len(&self) -> u64 {
        self.members.len() as u64
    }

    /// ORs the set into `out`.
    pub(super) fn add_to(&self, out: &mut RoaringBitmap) {
        // Sorting the members costs ~m·log m, reading a page its 1024 words: a set with
        // many members per page (a giant component's answer) is read off the pages.
        let pages = if self.paged && self.members.len() > 64 {
            self.member_pages()
        } else {
            Vec::new()
        };
        let set = if !pages.is_empty() && self.members.len() > 64 * pages.len() {
            let mut set = RoaringBitmap::new();
            for p in pages {
                if let Some(page) = &self.pages[p as usize] {
                    let bytes: Vec<u8> = page.iter().flat_map(|w| w.to_le_bytes()).collect();
                    set |= RoaringBitmap::from_lsb0_bytes(p * PAGE_IDS, &bytes);
                }
            }
            set
        } else {
            let mut sorted = self.members.clone();
            sorted.sort_unstable();
            RoaringBitmap::from_sorted_iter(sorted).expect("distinct ids, sorted")
        };
        *out |= set;
    }

    /// Bytes of pages allocated.
    fn page_bytes(&self) -> usize {
        self.allocated * PAGE_BYTES
    }

    /// Frees the pages.
    fn free_pages(&mut self) {
        self.clear();
        self.pages = Vec::new();
        self.allocated = 0;
    }
}

thread_local! {
    /// Sets of finished walks on this thread, cleared, with their pages.
    static POOL: RefCell<Vec<NodeSet>> = const { RefCell::new(Vec::new()) };
}

/// One walk's visited sets, taken from the thread's pool and given back (cleared) when
/// dropped, whichever way the walk ends.
pub(super) struct SetPool(Vec<NodeSet>);

impl SetPool {
    /// `count` empty sets of ids below `nodes`.
    pub(super) fn take(count: usize, nodes: u32) -> SetPool {
        let mut sets = POOL.with(|pool| {
            let mut pool = pool.borrow_mut();
            let keep = pool.len().saturating_sub(count);
            pool.split_off(keep)
        });
        sets.iter_mut().for_each(|s| s.resize(nodes));
        sets.resize_with(count, || NodeSet::new(nodes));
        SetPool(sets)
    }
}

impl Deref for SetPool {
    type Target = Vec<NodeSet>;
    fn deref(&self) -> &Vec<NodeSet> {
        &self.0
    }
}

impl DerefMut for SetPool {
    fn deref_mut(&mut self) -> &mut Vec<NodeSet> {
        &mut self.0
    }
}

impl Drop for SetPool {
    fn drop(&mut self) {
        let sets = std::mem::take(&mut self.0);
        // `try_with`: a walk may end while the thread's locals are being torn down.
        let _ = POOL.try_with(|pool| {
            let Ok(mut pool) = pool.try_borrow_mut() else {
                return;
            };
            let mut bytes: usize = pool.iter().map(NodeSet::page_bytes).sum();
            for mut set in sets {
                if pool.len() >= POOL_SETS {
                    break;
                }
                set.clear();
                if bytes + set.page_bytes() > POOL_BYTES {
                    set.free_pages();
                }
                bytes += set.page_bytes();
                pool.push(set);
            }
        });
    }
}

/// The revisit path of [`NodeSet::insert`] and [`NodeSet::insert_each`] on a set in its
/// page phase: `Some(whether v was absent)` when `v`'s page is allocated (its bit then
/// set and `v` pushed to `members`), `None` when it is not. A function of the fields, not
/// of the set, so a loop over a line keeps them in registers.
#[inline(always)]
fn insert_on_page(pages: &mut [Option<Box<Page>>], members: &mut Vec<u32>, v: u32) -> Option<bool> {
    let page = pages.get_mut((v / PAGE_IDS) as usize)?.as_mut()?;
    let word = &mut page[((v % PAGE_IDS) / 64) as usize];
    let bit = 1u64 << (v % 64);
    if *word & bit != 0 {
        return Some(false);
    }
    *word |= bit;
    members.push(v);
    Some(true)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::BTreeSet;

    fn read_back(set: &NodeSet) -> Vec<u32> {
        let mut out = RoaringBitmap::new();
        set.add_to(&mut out);
        out.iter().collect()
    }

    /// Both read-back paths (sorted members, pages) and `clear` agree with a plain set,
    /// across page boundaries and the last, partial page.
    #[test]
    fn node_set_matches_a_plain_set() {
        let nodes = 3 * PAGE_IDS + 17;
        let mut set = NodeSet::new(nodes);
        for round in 0..2 {
            set.clear();
            let mut want = BTreeSet::new();
            // Few members (hash set), then past the hash set's limit (pages).
            let ids: Vec<u32> = if round == 0 {
                vec![0, 63, 64, PAGE_IDS - 1, PAGE_IDS, 3 * PAGE_IDS + 16, 5]
            } else {
                (PAGE_IDS..2 * PAGE_IDS)
                    .step_by(3)
                    .chain([nodes - 1])
                    .collect()
            };
            for &v in &ids {
                assert_eq!(set.insert(v), want.insert(v));
                assert!(!set.insert(v));
            }
            assert_eq!(set.len(), want.len() as u64);
            assert_eq!(read_back(&set), want.iter().copied().collect::<Vec<_>>());
        }
        set.clear();
        assert!(read_back(&set).is_empty());
        assert!(set.insert(PAGE_IDS + 3), "cleared bits are free again");
    }

    proptest! {
        /// `insert_each` is `insert` per value: the same answers, members and order,
        /// through the hash phase, the move to the pages, and fresh pages.
        #[test]
        fn insert_each_matches_insert_per_value(
            lines in prop::collection::vec(
                prop::collection::vec(0..4 * PAGE_IDS, 0..300), 1..40),
        ) {
            let (mut a, mut b) = (NodeSet::new(4 * PAGE_IDS), NodeSet::new(4 * PAGE_IDS));
            let (mut fresh_a, mut fresh_b) = (Vec::new(), Vec::new());
            for line in &lines {
                // Revisits push a set to its pages: every line twice.
                for _ in 0..2 {
                    a.insert_each(line, &mut fresh_a);
                    for &v in line {
                        if b.insert(v) {
                            fresh_b.push(v);
                        }
                    }
                }
            }
            prop_assert_eq!(&fresh_a, &fresh_b);
            prop_assert_eq!(&a.members, &b.members);
            prop_assert_eq!(a.paged, b.paged);
            prop_assert_eq!(read_back(&a), read_back(&b));
        }
    }

    /// A walk that mostly revisits moves to the pages with few members, and the set
    /// still answers like a plain set; cleared, it starts in the hash phase again.
    #[test]
    fn revisits_move_a_small_set_to_its_pages() {
        let mut set = NodeSet::new(10 * PAGE_IDS);
        let clique: Vec<u32> = (5 * PAGE_IDS - 100..5 * PAGE_IDS + 100).collect();
        for &v in &clique {
            assert!(set.insert(v));
        }
        assert!(!set.paged);
        for _ in 0..TESTS_PER_MEMBER {
            for &v in &clique {
                assert!(!set.insert(v));
            }
        }
        assert!(set.paged, "{} tests of {} members", set.tests, set.len());
        assert_eq!(set.member_pages(), vec![4, 5]);
        assert!(set.insert(7));
        assert_eq!(set.len(), 201);
        let mut want = clique.clone();
        want.insert(0, 7);
        assert_eq!(read_back(&set), want);
        set.clear();
        assert!(!set.paged);
        assert!(set
            .pages
            .iter()
            .flatten()
            .all(|p| p.iter().all(|&w| w == 0)));
        assert!(set.insert(5 * PAGE_IDS));
    }

    /// Pooled sets come back empty, with pages that are all zero, for any id space.
    #[test]
    fn pooled_sets_come_back_empty() {
        {
            let mut sets = SetPool::take(2, 4 * PAGE_IDS);
            for v in (0..4 * PAGE_IDS).step_by(7) {
                sets[0].insert(v);
            }
            for _ in 0..10 {
                for v in 0..300 {
                    sets[1].insert(v);
                }
            }
            assert!(sets[0].paged && sets[1].paged);
        }
        // A smaller id space next: pages past it are dropped, the rest are clean.
        let mut sets = SetPool::take(3, PAGE_IDS + 1);
        for set in sets.iter_mut() {
            assert_eq!((set.len(), set.paged), (0, false));
            assert!(set.pages.len() <= 2);
            assert!(set
                .pages
                .iter()
                .flatten()
                .all(|p| p.iter().all(|&w| w == 0)));
            assert_eq!(set.allocated, set.pages.iter().flatten().count());
            assert!(set.insert(PAGE_IDS));
            assert!(!set.insert(PAGE_IDS));
        }
    }

    proptest! {
        /// Any sequence of inserts (with repeats, so both moves happen) over walks of a
        /// reused set agrees with a plain set.
        #[test]
        fn agrees_with_a_plain_set(
            walks in prop::collection::vec(
                prop::collection::vec((0u32..3 * PAGE_IDS + 5, 1usize..20), 0..200),
                1..4,
            ),
        ) {
            let mut set = NodeSet::new(3 * PAGE_IDS + 5);
            for walk in walks {
                set.clear();
                let mut want = BTreeSet::new();
                for (v, repeats) in walk {
                    for _ in 0..repeats {
                        prop_assert_eq!(set.insert(v), want.insert(v));
                    }
                }
                prop_assert_eq!(set.len(), want.len() as u64);
                prop_assert_eq!(read_back(&set), want.into_iter().collect::<Vec<_>>());
            }
        }
    }
}
