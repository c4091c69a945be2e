//! Lone cells of a matrix, for choosing `GpuOptions::lone_paths` without a GPU: how many
//! cells hang alone below a unary path of the tree (one node per level holding only
//! them), per level where they start, and what taking those below paths of at least `n`
//! nodes out of the tree would remove (nodes, octet-level nodes: the paths' own, a lower
//! bound, since a node all of whose cells are listed goes too) and cost (16 bytes per
//! listed cell, one copy sorted per direction, against ~0.52 bytes per node removed: a
//! signature and its share of the directory).
//!
//! ```text
//! cargo run --release --example lone_cells -- [EDGES=200000000 | EDGE-LIST-FILE] [COPIES]
//! ```
//! A number of edges generates the synthetic web graph of `bench-spmv --synthetic web`;
//! `COPIES` places that many copies of the graph along the diagonal (`bench-spmv --copies`).

use k2rpq::bench::input::web_or_edge_list;
use k2rpq::engine::gpu::path_lengths;
use k2rpq::k2tree::height_for;
use rayon::prelude::*;

/// Bytes of a node of the tree on the device: a 4-bit signature and its directory share.
const NODE_BYTES: f64 = 0.52;
/// Bytes of a lone cell on the device: a `(row, col)` pair per direction.
const CELL_BYTES: f64 = 16.0;

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let source = args.get(1).map_or("200000000", String::as_str);
    let (name, mut g) = web_or_edge_list(source).expect("a number of edges or an edge list");
    if let Some(c) = args.get(2) {
        g = g
            .diagonal_copies(c.parse().expect("COPIES: a count"))
            .expect("copies that fit in 32-bit indices");
    }
    let h = height_for(g.rows, g.cols);
    let mut codes = g.codes;
    codes.par_sort_unstable();
    codes.dedup();
    let n = codes.len();
    let paths = path_lengths(&codes, h);
    // Nodes per level (the root is level 0; level d has a node per distinct d-digit prefix).
    let nodes: Vec<u64> = (0..h)
        .map(|d| {
            let shift = 2 * (h - d);
            1 + codes
                .par_windows(2)
                .filter(|w| w[0].checked_shr(shift) != w[1].checked_shr(shift))
                .count() as u64
        })
        .collect();
    let total: u64 = nodes.iter().sum();
    // Cells by their path's length: a path of p nodes starts at level h - p.
    let mut by_path = vec![0u64; h as usize + 1];
    for &p in &paths {
        by_path[p as usize] += 1;
    }
    println!("{name}: {n} cells, {h} levels, {total} nodes");
    println!("| level | nodes | cells alone from this level down |");
    println!("|---|---|---|");
    for d in 1..h {
        println!(
            "| {d} | {} | {} |",
            nodes[d as usize],
            by_path[(h - d) as usize]
        );
    }
    // The octet step's nodes: level h - 3, whose grandchildren are the leaves.
    let octet_level = h.saturating_sub(3) as usize;
    println!(
        "| paths of at least | cells listed | nodes removed | octet-level nodes removed | bytes |"
    );
    println!("|---|---|---|---|---|");
    for min in [4u32, 6, 8, 10, 12, 16] {
        let (mut moved, mut removed) = (0u64, 0u64);
        for p in min..=h {
            moved += by_path[p as usize];
            removed += by_path[p as usize] * p as u64;
        }
        let delta = CELL_BYTES * moved as f64 - NODE_BYTES * removed as f64;
        println!(
            "| {min} | {moved} ({:.1} %) | {removed} ({:.1} %) | {:.1} % of {} | {:+.1} MB ({:+.1} %) |",
            100.0 * moved as f64 / n.max(1) as f64,
            100.0 * removed as f64 / total as f64,
            // Every listed cell takes one octet-level node with it (paths of >= 3 nodes).
            100.0 * moved as f64 / nodes[octet_level].max(1) as f64,
            nodes[octet_level],
            delta / 1e6,
            100.0 * delta / (NODE_BYTES * total as f64),
        );
    }
}
