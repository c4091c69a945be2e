//! Measures what the line-list trigger (`k2rpq::k2tree::BUILD_NODES_PER_VISIT`) is
//! derived from, on every relation of a store: the time of one node visit of random
//! row/column descents, and the time per tree node of building the lists sequentially
//! (`Lines::build`), in parallel on one thread, and on all of rayon's threads.
//!
//! `cargo run --release --example lines_build -- STORE [ROWS]`

use std::time::Instant;

use k2rpq::k2tree::{K2Tree, LineBudget, Lines};
use k2rpq::store::Store;

/// Tree nodes a descent of row `r` (or column) visits, like `K2Tree::row` does.
fn visits(t: &K2Tree, fixed: u32, by_column: bool) -> u64 {
    let h = t.height();
    let mut n = 0;
    let mut stack = vec![(0u64, 0u32)];
    while let Some((j, d)) = stack.pop() {
        n += 1;
        if d + 1 == h {
            continue;
        }
        let s = t.signature(j);
        let bit = ((fixed >> (h - 1 - d)) & 1) as u8;
        let quads = if by_column {
            [bit, 2 | bit]
        } else {
            [bit << 1, (bit << 1) | 1]
        };
        let first = t.first_child(j);
        for b in quads {
            if s & (1 << b) != 0 {
                stack.push((first + (s & ((1 << b) - 1)).count_ones() as u64, d + 1));
            }
        }
    }
    n
}

fn main() -> anyhow::Result<()> {
    let mut args = std::env::args().skip(1);
    let dir = args.next().expect("usage: lines_build STORE [ROWS]");
    let probes: usize = args.next().map_or(Ok(20_000), |s| s.parse())?;
    let store = Store::open(dir.as_ref())?;
    let n = store.node_count();
    let one = rayon::ThreadPoolBuilder::new().num_threads(1).build()?;
    let budget = LineBudget::new(u64::MAX);
    println!(
        "relation cells nodes | descent ns/visit visits/line | seq ns/node | par1 ns/node | par{} ns/node ms | MiB",
        rayon::current_num_threads()
    );
    let mut x = 0x9e37_79b9_7f4a_7c15u64;
    for info in store.predicates(0).to_vec() {
        let t = store.relation(0, info.id)?.expect("listed");
        t.directory();
        // Random lines: no locality, like a walk's frontier on this data.
        let lines: Vec<u32> = (0..probes)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                (x % n as u64) as u32
            })
            .collect();
        let v: u64 = lines.iter().map(|&r| visits(&t, r, false)).sum();
        let t0 = Instant::now();
        let cells: usize = lines.iter().map(|&r| t.row(r).len()).sum();
        let descent = t0.elapsed().as_secs_f64();
        let t0 = Instant::now();
        let seq = Lines::build(&t, false);
        let s = t0.elapsed().as_secs_f64();
        let t0 = Instant::now();
        let p1 = one.install(|| Lines::build_parallel(&t, false, &budget))?;
        let s1 = t0.elapsed().as_secs_f64();
        budget.release(p1.bytes());
        let t0 = Instant::now();
        let pn = Lines::build_parallel(&t, false, &budget)?;
        let sn = t0.elapsed().as_secs_f64();
        budget.release(pn.bytes());
        assert!(seq == p1 && seq == pn, "parallel lists differ");
        let nodes = t.nodes() as f64;
        println!(
            "{} {} {} | {:.1} {:.1} ({} cells) | {:.1} | {:.1} | {:.1} {:.0} | {:.1}",
            info.iri.rsplit('/').next().unwrap_or(""),
            t.nnz(),
            t.nodes(),
            descent * 1e9 / v as f64,
            v as f64 / probes as f64,
            cells,
            s * 1e9 / nodes,
            s1 * 1e9 / nodes,
            sn * 1e9 / nodes,
            sn * 1e3,
            pn.bytes() as f64 / (1 << 20) as f64
        );
    }
    Ok(())
}
