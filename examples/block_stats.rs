//! Block statistics of a matrix, for planning leaf formats without a GPU: how many
//! entries a cached frontier of `R x C` cell blocks would hold (4x4 is today's), how long
//! a block row's run is, and what the `x` gathers of a bit-packed right product over
//! row-sorted entries would cost: the 32-byte sectors requested, the distinct sectors per
//! warp window (an L1 proxy), and the misses of an LRU cache of L2's size over 32-byte
//! sectors (a DRAM proxy; L2 fills sectors, not whole lines), split by whether the entry
//! lies near the diagonal (within `NEAR` cells) or far from it.
//!
//! ```text
//! cargo run --release --example block_stats -- [EDGES=200000000 | EDGE-LIST-FILE] [SHAPES=4x4,8x8,4x8,8x4]
//! ```
//! A number of edges generates the synthetic web graph of `bench-spmv --synthetic web`.

use std::num::NonZeroUsize;

use k2rpq::bench::input::web_or_edge_list;
use k2rpq::k2tree::morton;
use lru::LruCache;
use rayon::prelude::*;

/// L2 of the H200 (50 MB) in 32-byte sectors.
const L2_SECTORS: usize = 50 * (1 << 20) / 32;
/// Entries at most this many cells off the diagonal count as near.
const NEAR: u64 = 4096;
/// Entries a warp takes in `sorted_runs` (32 lanes x 4).
const WARP_ENTRIES: usize = 128;
/// Bytes of one node's word in a bit-packed batch of 64.
const WORD: u64 = 8;

/// Slots of a stream where each run of one block row (keys sorted by block row) is a
/// header followed by its entries, laid into windows of [`WARP_ENTRIES`] so that a run
/// never crosses a window: a run that does not fit the rest of a window starts the next
/// (the rest is padding), and a run longer than a window is cut with a header at the
/// start of each window it continues into.
fn window_slots(keys: &[u64]) -> u64 {
    let w = WARP_ENTRIES as u64;
    let (mut slots, mut i) = (0u64, 0usize);
    while i < keys.len() {
        let row = keys[i] >> 32;
        let len = keys[i..].iter().take_while(|&&k| k >> 32 == row).count() as u64;
        i += len as usize;
        let used = slots % w;
        if used + 1 + len > w && used > 0 {
            slots += w - used;
        }
        // Full windows of a long run each start with a header.
        slots += len + len.div_ceil(w - 1);
    }
    slots
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let source = args.get(1).map_or("200000000", String::as_str);
    let shapes: Vec<(u32, u32)> = args
        .get(2)
        .map_or("4x4,8x8,4x8,8x4", String::as_str)
        .split(',')
        .map(|s| {
            let (r, c) = s.split_once('x').expect("a shape RxC");
            (r.parse().expect("rows"), c.parse().expect("cols"))
        })
        .collect();
    let (name, g) = web_or_edge_list(source).expect("a number of edges or an edge list");
    let mut codes = g.codes;
    codes.par_sort_unstable();
    codes.dedup();
    let cells = codes.len() as u64;
    println!("{name}: {cells} distinct cells");
    println!(
        "| block | entries | cells/entry | bytes/entry | entry MB | block rows | entries/run | x sectors (M) | sectors/warp | far entries | x sector misses (M), LRU 50 MB | of which far | x DRAM MB | slots with run headers in whole windows |"
    );
    println!("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|");
    for &(br, bc) in &shapes {
        // Block keys sorted by (block row, block column): the row-sorted layout.
        let mut keys: Vec<u64> = codes
            .par_iter()
            .map(|&c| {
                let (r, k) = morton::decode(c);
                ((r / br) as u64) << 32 | (k / bc) as u64
            })
            .collect();
        keys.par_sort_unstable();
        keys.dedup();
        let entries = keys.len() as u64;
        let block_rows = 1 + keys.windows(2).filter(|w| w[0] >> 32 != w[1] >> 32).count() as u64;
        // A block's inputs: bc words from column (k / bc) * bc, in 32-byte sectors.
        let bytes_in = bc as u64 * WORD;
        let sectors_per_entry = bytes_in.div_ceil(32);
        let sector_of = |key: u64| (key & 0xffff_ffff) * bytes_in / 32;
        let mut warp_sectors = 0u64;
        for w in keys.chunks(WARP_ENTRIES) {
            let mut s: Vec<u64> = w.iter().map(|&k| sector_of(k)).collect();
            s.sort_unstable();
            s.dedup();
            warp_sectors += s.len() as u64 * sectors_per_entry;
        }
        let mut l2: LruCache<u64, ()> = LruCache::new(NonZeroUsize::new(L2_SECTORS).unwrap());
        let (mut misses, mut far_misses, mut far) = (0u64, 0u64, 0u64);
        for &k in &keys {
            let (r0, c0) = ((k >> 32) * br as u64, (k & 0xffff_ffff) * bc as u64);
            let is_far = r0.abs_diff(c0) > NEAR;
            far += is_far as u64;
            let s0 = sector_of(k);
            for s in s0..s0 + sectors_per_entry {
                let missed = l2.put(s, ()).is_none() as u64;
                misses += missed;
                far_misses += missed * is_far as u64;
            }
        }
        let entry_bytes = if br * bc <= 16 {
            8
        } else {
            8 + (br * bc) as u64 / 8
        };
        let slots = window_slots(&keys);
        println!(
            "| {br}x{bc} | {entries} | {:.2} | {entry_bytes} | {:.0} | {block_rows} | {:.2} | {:.1} | {:.1} | {:.1} % | {:.2} | {:.2} | {:.0} | {slots} ({:+.1} %) |",
            cells as f64 / entries as f64,
            (entries * entry_bytes) as f64 / 1e6,
            entries as f64 / block_rows as f64,
            (entries * sectors_per_entry) as f64 / 1e6,
            warp_sectors as f64 / entries.div_ceil(WARP_ENTRIES as u64) as f64,
            100.0 * far as f64 / entries as f64,
            misses as f64 / 1e6,
            far_misses as f64 / 1e6,
            (misses * 32) as f64 / 1e6,
            100.0 * (slots as f64 / entries as f64 - 1.0),
        );
    }
}
