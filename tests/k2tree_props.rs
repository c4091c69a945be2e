//! Construction and queries of k²-trees against a CSR reference.

mod common;

use common::{arb_matrix, big_matrix, Csr};
use k2rpq::k2tree::{height_for, morton, Directory, K2Tree};
use proptest::prelude::*;

fn check_tree(rows: u64, cols: u64, edges: &[(u32, u32)]) -> Result<(), TestCaseError> {
    let t = K2Tree::from_edges(rows, cols, edges.to_vec());
    let csr = Csr::from_edges(rows, cols, edges);
    prop_assert_eq!(t.rows(), rows);
    prop_assert_eq!(t.cols(), cols);
    prop_assert_eq!(t.nnz(), csr.nnz());
    prop_assert_eq!(t.height(), height_for(rows, cols));
    t.validate()
        .map_err(|e| TestCaseError::fail(e.to_string()))?;

    let mut cells = t.cells();
    // Cells come out in Morton order.
    let codes: Vec<u64> = cells.iter().map(|&(r, c)| morton::encode(r, c)).collect();
    prop_assert!(codes.windows(2).all(|w| w[0] < w[1]));
    cells.sort_unstable();
    prop_assert_eq!(&cells, &csr.cells());

    for r in 0..rows as u32 + 2 {
        prop_assert_eq!(t.row(r), csr.row(r), "row {}", r);
    }
    for c in 0..cols as u32 + 2 {
        prop_assert_eq!(t.column(c), csr.column(c), "column {}", c);
    }
    for r in 0..rows as u32 + 1 {
        for c in 0..cols as u32 + 1 {
            prop_assert_eq!(t.contains(r, c), csr.contains(r, c), "cell ({}, {})", r, c);
        }
    }

    // Building from codes gives the same tree.
    let mut codes: Vec<u64> = edges.iter().map(|&(r, c)| morton::encode(r, c)).collect();
    let t2 = K2Tree::from_codes(rows, cols, &mut codes).unwrap();
    prop_assert_eq!(&t2, &t);

    let s = t.stats();
    prop_assert_eq!(s.nnz, csr.nnz());
    prop_assert_eq!(s.levels, t.height());
    prop_assert_eq!(s.level_nodes.iter().sum::<u64>(), s.nodes);
    prop_assert_eq!(s.tree_bytes, s.nodes.div_ceil(16) * 8);
    if t.nodes() > 0 {
        prop_assert_eq!(s.level_nodes[0], 1);
        prop_assert_eq!(s.frontier_bytes, t.frontier().len() as u64 * 8);
        prop_assert_eq!(s.bits_per_edge, s.nodes as f64 * 4.0 / s.nnz as f64);
        // Level expansion agrees with the frontier and with the level sizes.
        for d in 0..t.height() {
            prop_assert_eq!(t.level_codes(d).len() as u64, t.level_nodes(d));
        }
        prop_assert_eq!(&t.level_codes(t.height() - 2)[..], &t.frontier()[..]);
    } else {
        prop_assert_eq!(s.nodes, 0);
        prop_assert_eq!(s.bits_per_edge, 0.0);
    }
    Ok(())
}

/// Ranks by brute force against every directory period.
fn check_rank(t: &K2Tree) -> Result<(), TestCaseError> {
    let mut prefix = vec![0u64];
    for j in 0..t.nodes() {
        prefix.push(prefix[j as usize] + t.signature(j).count_ones() as u64);
    }
    for sample in [0, 1, 16, 17, 64, 256, 1000, u32::MAX] {
        let dir = Directory::build(t, sample);
        prop_assert!(dir.sample.is_power_of_two() && dir.sample >= 16);
        prop_assert!(dir.sample >= sample.min(1 << 31));
        prop_assert_eq!(dir.sample, Directory::period(sample));
        prop_assert_eq!(
            dir.ranks.len() as u64,
            t.internal_nodes() / dir.sample as u64 + 1
        );
        for (k, &r) in dir.ranks.iter().enumerate() {
            prop_assert_eq!(r, prefix[k * dir.sample as usize]);
        }
        let tt = t.clone().with_directory(dir.clone());
        prop_assert_eq!(tt.directory(), &dir);
        for j in 0..t.internal_nodes() {
            prop_assert_eq!(
                tt.rank(j),
                prefix[j as usize],
                "rank({}) at S = {}",
                j,
                sample
            );
        }
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(96))]

    #[test]
    fn construction_matches_csr((rows, cols, edges) in arb_matrix()) {
        check_tree(rows, cols, &edges)?;
    }

    #[test]
    fn rank_matches_prefix_popcounts((rows, cols, edges) in arb_matrix()) {
        check_rank(&K2Tree::from_edges(rows, cols, edges))?;
    }

    #[test]
    fn cells_outside_the_matrix_are_rejected(rows in 1u64..50, cols in 1u64..50, r in 0u32..100, c in 0u32..100) {
        let inside = (r as u64) < rows && (c as u64) < cols;
        prop_assert_eq!(K2Tree::try_from_edges(rows, cols, vec![(r, c)]).is_ok(), inside);
        let mut codes = vec![morton::encode(r, c)];
        prop_assert_eq!(K2Tree::from_codes(rows, cols, &mut codes).is_ok(), inside);
    }
}

#[test]
fn big_tree_exercises_parallel_paths() {
    let (rows, cols) = (100_000u64, 70_001u64);
    let edges = big_matrix(rows, cols, 200_000, 7);
    let t = K2Tree::from_edges(rows, cols, edges.clone());
    let csr = Csr::from_edges(rows, cols, &edges);
    assert_eq!(t.nnz(), csr.nnz());
    let mut cells = t.cells();
    cells.sort_unstable();
    assert_eq!(cells, csr.cells());
    assert!(
        t.level_nodes(t.height() - 2) > 1 << 15,
        "too small to split levels"
    );
    for r in (0..rows as u32).step_by(997) {
        assert_eq!(t.row(r), csr.row(r));
    }
    for c in (0..cols as u32).step_by(4999) {
        assert_eq!(t.column(c), csr.column(c));
    }
    // Same tree from a single-threaded pool (one build chunk per thread boundary moves).
    let one = rayon::ThreadPoolBuilder::new()
        .num_threads(1)
        .build()
        .unwrap();
    let t1 = one.install(|| K2Tree::from_edges(rows, cols, edges.clone()));
    assert_eq!(t1, t);
}

#[test]
fn shapes_beyond_32_bit_coordinates_are_errors() {
    assert!(K2Tree::try_from_edges(1 << 33, 4, vec![(0, 0)]).is_err());
    assert!(K2Tree::from_codes(4, (1 << 32) + 1, &mut [0]).is_err());
    let t = K2Tree::try_from_edges(1 << 32, 1 << 32, vec![(u32::MAX, 0), (3, u32::MAX)]).unwrap();
    assert_eq!(t.height(), 32);
    assert_eq!(t.row(u32::MAX), vec![0]);
    assert_eq!(t.column(u32::MAX), vec![3]);
    assert!(t.contains(3, u32::MAX) && !t.contains(u32::MAX, 3));
}

#[test]
fn from_parts_rejects_inconsistent_parts() {
    use k2rpq::k2tree::Words;
    let t = K2Tree::from_edges(6, 6, vec![(0, 1), (5, 5), (2, 3)]);
    let levels: Vec<u64> = (0..t.height()).map(|d| t.level_nodes(d)).collect();
    let words = t.nibbles().to_vec();
    assert!(K2Tree::from_parts(6, 6, 3, &levels, Words::owned(words.clone())).is_ok());
    // Wrong nnz, wrong level count, wrong level size, flipped bit, extra word, cell
    // outside the logical shape.
    assert!(K2Tree::from_parts(6, 6, 4, &levels, Words::owned(words.clone())).is_err());
    assert!(K2Tree::from_parts(6, 6, 3, &levels[1..], Words::owned(words.clone())).is_err());
    let mut l2 = levels.clone();
    l2[1] += 1;
    assert!(K2Tree::from_parts(6, 6, 3, &l2, Words::owned(words.clone())).is_err());
    for bit in 0..t.nodes() * 4 {
        let mut w = words.clone();
        w[(bit / 64) as usize] ^= 1 << (bit % 64);
        assert!(
            K2Tree::from_parts(6, 6, 3, &levels, Words::owned(w)).is_err(),
            "bit {bit}"
        );
    }
    let mut w = words.clone();
    w.push(1);
    assert!(K2Tree::from_parts(6, 6, 3, &levels, Words::owned(w)).is_err());
    assert!(K2Tree::from_parts(5, 6, 3, &levels, Words::owned(words.clone())).is_err());
    assert!(K2Tree::from_parts(6, 5, 3, &levels, Words::owned(words)).is_err());
}
