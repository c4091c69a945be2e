//! Counts the global updates of `y` that each leaf kernel issues for a single-vector
//! product (issue 10), from a graph's cells alone: no GPU. The last internal level of the
//! k²-tree is the list of non-empty 4x4 blocks in Morton order; a leaf kernel visits them
//! in that order, so the counts are exact for the kernels' logic (every input entry taken
//! non-zero, as in `bench-spmv`).
//!
//! ```text
//! cargo run --release --example leaf_atomics -- --tsv ../shared/data/cnr-2000/cnr-2000.arcs.tsv.gz
//! cargo run --release --example leaf_atomics -- --web 200000000
//! ```
//!
//! Rows: `rows` (one update per non-empty block row), `wagg` (one per distinct output
//! entry per warp of 32 blocks), `window C/E` (the `window` kernel: a CTA takes C
//! consecutive blocks, accumulates outputs in a shared window of E entries starting at the
//! chunk's lowest output, one global update per touched window entry plus one per output
//! outside the window), `chunk C` (distinct outputs per chunk, an unbounded window) and
//! `row-sorted C` (blocks sorted by output block instead of Morton order, C per chunk:
//! the bound of a CSR-like segmented reduction).

use std::path::Path;

use k2rpq::bench::gen::Web;
use k2rpq::bench::input::{read_edges, InputFormat};
use k2rpq::engine::gpu::tile_plan::{Bottom, TilePlan, MAX_FUSED_LEVELS};
use k2rpq::k2tree::{morton, K2Tree};

/// One non-empty 4x4 block: its block row and column and its 16-cell bitmap
/// (bit 4r + c = cell (r, c)).
#[derive(Clone, Copy)]
struct Block {
    row: u32,
    col: u32,
    bits: u16,
}

impl Block {
    /// `(output block, mask of output entries)` of a right (`left == false`) or left product.
    fn out(&self, left: bool) -> (u64, u32) {
        let b = self.bits as u32;
        if left {
            let cols = (b | (b >> 4) | (b >> 8) | (b >> 12)) & 15;
            (self.col as u64, cols)
        } else {
            let rows = (0..4)
                .filter(|r| (b >> (4 * r)) & 15 != 0)
                .fold(0, |m, r| m | 1 << r);
            (self.row as u64, rows)
        }
    }
}

fn blocks(mut codes: Vec<u64>) -> Vec<Block> {
    codes.sort_unstable();
    codes.dedup();
    let mut out: Vec<Block> = Vec::new();
    for c in codes {
        let (r, col) = morton::decode(c);
        let bit = 1u16 << (4 * (r & 3) + (col & 3));
        match out.last_mut() {
            Some(b) if b.row == r >> 2 && b.col == col >> 2 => b.bits |= bit,
            _ => out.push(Block {
                row: r >> 2,
                col: col >> 2,
                bits: bit,
            }),
        }
    }
    out
}

/// The tree's levels and, per tile size, the tree-only (descend) plan's launches and
/// scratch codes, from the top level the engine expands on the host (deepest with at most
/// 2^16 nodes).
fn plans(codes: &[u64], side: u64) {
    let mut c = codes.to_vec();
    let tree = K2Tree::from_codes(side, side, &mut c).expect("tree");
    let h = tree.height();
    let levels: Vec<u64> = (0..h).map(|d| tree.level_nodes(d)).collect();
    println!("height {h}, nodes per level {levels:?}");
    let s = tree.stats();
    println!("tree {} B, directory {} B", s.tree_bytes, s.directory_bytes);
    let top = (0..=h - 2)
        .rev()
        .find(|&d| tree.level_nodes(d) <= 1 << 16)
        .unwrap_or(0);
    for m in [
        1u64 << 12,
        1 << 14,
        1 << 15,
        1 << 16,
        1 << 17,
        1 << 18,
        1 << 20,
        1 << 22,
        1 << 24,
    ] {
        let p = TilePlan::descend(&tree, top, m, (MAX_FUSED_LEVELS, Bottom::Blocks));
        let single = TilePlan::descend(&tree, top, m, (1, Bottom::Blocks)).launches();
        let f = TilePlan::frontier(&tree, m);
        println!(
            "M = 2^{:2}: descend {:6} launches ({single} with a launch per level), scratch codes {:>10} B (most scanned in a step {}); frontier {} launches",
            m.trailing_zeros(),
            p.launches(),
            8 * p.scratch_codes.iter().sum::<u64>(),
            p.max_scanned_nodes(),
            f.launches()
        );
    }
}

fn rows_kernel(b: &[Block], left: bool) -> u64 {
    b.iter().map(|x| x.out(left).1.count_ones() as u64).sum()
}

/// Distinct output entries per chunk of `c` blocks; with a window of `e` entries from the
/// chunk's lowest output, outputs beyond it count one each. Also the mean window span.
fn chunked(b: &[Block], left: bool, c: usize, e: Option<u64>) -> (u64, f64) {
    let mut total = 0;
    let mut span = 0u64;
    let mut outs: Vec<u64> = Vec::new();
    for chunk in b.chunks(c) {
        outs.clear();
        let base = chunk.iter().map(|x| 4 * x.out(left).0).min().unwrap_or(0);
        let hi = chunk
            .iter()
            .map(|x| 4 * x.out(left).0 + 3)
            .max()
            .unwrap_or(0);
        span += hi - base + 1;
        for x in chunk {
            let (ob, m) = x.out(left);
            for i in 0..4 {
                if m >> i & 1 == 1 {
                    let o = 4 * ob + i;
                    match e {
                        Some(e) if o - base >= e => total += 1,
                        _ => outs.push(o),
                    }
                }
            }
        }
        outs.sort_unstable();
        outs.dedup();
        total += outs.len() as u64;
    }
    (total, span as f64 / b.len().div_ceil(c) as f64)
}

/// `wagg`: per warp of 32 blocks, lanes with the same output block combine.
fn wagg(b: &[Block], left: bool) -> u64 {
    chunked_by_key(b, left, 32)
}

fn chunked_by_key(b: &[Block], left: bool, c: usize) -> u64 {
    let mut total = 0;
    let mut keys: Vec<(u64, u32)> = Vec::new();
    for chunk in b.chunks(c) {
        keys.clear();
        keys.extend(chunk.iter().map(|x| x.out(left)));
        keys.sort_unstable_by_key(|k| k.0);
        let mut i = 0;
        while i < keys.len() {
            let mut m = 0;
            let k = keys[i].0;
            while i < keys.len() && keys[i].0 == k {
                m |= keys[i].1;
                i += 1;
            }
            total += m.count_ones() as u64;
        }
    }
    total
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let (codes, side) = match args.get(1).map(String::as_str) {
        Some("--tsv") => {
            let p = Path::new(&args[2]);
            let e = read_edges(p, InputFormat::Tsv, None).expect("read the edge list");
            (e.codes, e.rows.max(e.cols))
        }
        Some("--web") => {
            let g = Web::like_cnr(args[2].parse().expect("edge count"), 1).generate();
            (g.codes, g.nodes)
        }
        _ => {
            eprintln!("usage: leaf_atomics --tsv FILE | --web EDGES");
            std::process::exit(2);
        }
    };
    plans(&codes, side);
    let b = blocks(codes);
    let cells: u64 = b.iter().map(|x| x.bits.count_ones() as u64).sum();
    println!(
        "{} cells in {} blocks ({:.2} per block)",
        cells,
        b.len(),
        cells as f64 / b.len() as f64
    );
    for left in [false, true] {
        let dir = if left { "left" } else { "right" };
        let rows = rows_kernel(&b, left);
        let line = |name: String, n: u64, extra: String| {
            println!(
                "{dir:5} {name:22} {n:>12} ({:.2}x fewer than rows){extra}",
                rows as f64 / n as f64
            )
        };
        line("cells".into(), cells, String::new());
        line("rows".into(), rows, String::new());
        line("wagg".into(), wagg(&b, left), String::new());
        for c in [256usize, 1024, 2048, 4096, 8192] {
            let (n, span) = chunked(&b, left, c, None);
            line(format!("chunk {c}"), n, format!(", mean span {span:.0}"));
            for e in [2048u64, 4096, 8192, 12288] {
                let (n, _) = chunked(&b, left, c, Some(e));
                line(format!("window {c}/{e}"), n, String::new());
            }
        }
        let mut sorted = b.clone();
        sorted.sort_unstable_by_key(|x| {
            let (o, _) = x.out(left);
            (o, if left { x.row } else { x.col })
        });
        for c in [256usize, 2048] {
            let (n, _) = chunked(&sorted, left, c, None);
            line(format!("row-sorted {c}"), n, String::new());
        }
    }
}
