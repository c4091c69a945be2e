//! The decoded line lists of a k²-tree (`K2Tree::lines_after`) against row and column
//! queries, and the rule that builds them only after enough descent work.

use k2rpq::k2tree::{K2Tree, LINE_READS_PER_VISIT};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

fn random_tree(n: u32, cells: usize, seed: u64) -> K2Tree {
    let mut rng = StdRng::seed_from_u64(seed);
    let edges = (0..cells)
        .map(|_| (rng.random_range(0..n), rng.random_range(0..n)))
        .collect();
    K2Tree::from_edges(n as u64, n as u64, edges)
}

#[test]
fn lines_match_row_and_column_queries() {
    // Dense lines (indexed by line) and, in the last case, lines far apart (searched).
    for (n, cells, seed) in [
        (1, 1, 1),
        (5, 0, 2),
        (37, 200, 3),
        (1000, 5000, 4),
        (100_000, 60, 6),
    ] {
        let t = random_tree(n, cells, seed);
        for by_column in [false, true] {
            let lines = t
                .lines_after(by_column, u64::MAX)
                .expect("small trees get lines once enough work is spent");
            // Every node, and a subset with gaps, as the active list.
            let all: Vec<u32> = (0..n).collect();
            let some: Vec<u32> = (0..n).filter(|v| v % 3 == 1).collect();
            for active in [&all, &some] {
                let mut got = Vec::new();
                let work = lines.for_each(active, |a, v| got.push((a, v)));
                let mut want = Vec::new();
                for &a in active.iter() {
                    let line = if by_column { t.column(a) } else { t.row(a) };
                    want.extend(line.into_iter().map(|v| (a, v)));
                }
                assert_eq!(got, want, "n {n} by_column {by_column}");
                let reads = active.len() as u64 + want.len() as u64;
                assert_eq!(work, reads.div_ceil(LINE_READS_PER_VISIT));
            }
        }
    }
}

#[test]
fn lines_wait_for_a_trees_worth_of_work() {
    let t = random_tree(1000, 5000, 9);
    assert!(t.lines_if_built(false).is_none());
    assert!(
        t.lines_after(false, 1).is_none(),
        "one node visit builds nothing"
    );
    assert!(t.lines_if_built(false).is_none());
    assert!(t.lines_after(false, t.nodes()).is_some());
    assert!(t.lines_if_built(false).is_some());
    // The other orientation keeps its own count.
    assert!(t.lines_if_built(true).is_none());
    assert!(t.lines_after(true, t.nodes() - 2).is_none());
}

#[test]
fn line_keys_are_the_non_empty_lines() {
    let t = random_tree(500, 300, 5);
    let cells = t.cells();
    for by_column in [false, true] {
        let mut want: Vec<u32> = cells
            .iter()
            .map(|&(r, c)| if by_column { c } else { r })
            .collect();
        want.sort_unstable();
        want.dedup();
        let lines = t.lines_after(by_column, t.nodes()).unwrap();
        assert_eq!(lines.keys(), &want[..]);
    }
}
