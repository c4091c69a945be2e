//! Every CPU engine product variant against the CSR reference.

mod common;

use std::sync::Arc;

use common::{arb_matrix, big_matrix, Csr};
use k2rpq::engine::cpu::{CpuEngine, CpuMatrix};
use k2rpq::engine::{
    BitMatrix, Boolean, Counting, Direction, Engine, MatrixConfig, PlusTimes, Semiring, Traversal,
    Tropical,
};
use k2rpq::k2tree::K2Tree;
use proptest::prelude::*;

const DIRS: [Direction; 2] = [Direction::Right, Direction::Left];
const CONFIGS: [MatrixConfig; 2] = [MatrixConfig::TreeOnly, MatrixConfig::CachedFrontier];
const BATCHES: [usize; 3] = [1, 3, 64];

/// A small deterministic generator for input vectors.
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
}

/// Runs `check` on every configuration's matrix of `tree` in every direction, with the
/// product's input and output lengths.
fn for_each_matrix(
    tree: &Arc<K2Tree>,
    mut check: impl FnMut(
        &CpuEngine,
        &CpuMatrix,
        MatrixConfig,
        Direction,
        usize,
        usize,
    ) -> Result<(), TestCaseError>,
) -> Result<(), TestCaseError> {
    let engine = CpuEngine::new();
    for config in CONFIGS {
        let m = engine.load(tree, config).unwrap();
        for dir in DIRS {
            let (n_in, n_out) = dir.lengths(tree.rows(), tree.cols());
            check(&engine, &m, config, dir, n_in as usize, n_out as usize)?;
        }
    }
    Ok(())
}

/// Runs `S` for every direction, configuration and batch width; `gen` makes input entries
/// and `same` compares outputs.
fn check_semiring<S: Semiring>(
    tree: &Arc<K2Tree>,
    csr: &Csr,
    seed: u64,
    gen: impl Fn(&mut Rng) -> S::Elem,
    same: impl Fn(S::Elem, S::Elem) -> bool,
) -> Result<(), TestCaseError> {
    let mut rng = Rng(seed | 1);
    for_each_matrix(tree, |engine, m, config, dir, n_in, n_out| {
        for batch in BATCHES {
            let x: Vec<S::Elem> = (0..n_in * batch).map(|_| gen(&mut rng)).collect();
            // y starts as garbage: the product must overwrite it.
            let mut y = vec![gen(&mut rng); n_out * batch];
            engine.product::<S>(m, dir, &x, batch, &mut y).unwrap();
            let want = csr.product::<S>(dir, &x, batch);
            for (k, (&a, &b)) in y.iter().zip(&want).enumerate() {
                prop_assert!(
                    same(a, b),
                    "{:?} {:?} {:?} batch {} entry {}: got {:?}, want {:?}",
                    S::KIND,
                    config,
                    dir,
                    batch,
                    k,
                    a,
                    b
                );
            }
            // Wrong shapes are errors, not panics.
            let mut short = vec![S::zero(); (n_out * batch).saturating_sub(1)];
            if n_out > 0 {
                prop_assert!(engine.product::<S>(m, dir, &x, batch, &mut short).is_err());
            }
            prop_assert!(engine.product::<S>(m, dir, &x, 0, &mut y).is_err());
        }
        Ok(())
    })
}

fn check_all_semirings(tree: &Arc<K2Tree>, csr: &Csr, seed: u64) -> Result<(), TestCaseError> {
    check_semiring::<PlusTimes>(
        tree,
        csr,
        seed,
        |r| {
            if r.next() % 4 == 0 {
                0.0
            } else {
                (r.next() % 1_000_000) as f32 / 1000.0 - 100.0
            }
        },
        // Entries reach ±100, so partial sums reach hundreds: summed in another order a
        // result differs by a few ulps of those (~1e-5), however small it ends up.
        |a, b| (a - b).abs() <= 1e-6 * a.abs().max(b.abs()).max(1000.0),
    )?;
    check_semiring::<Counting>(
        tree,
        csr,
        seed,
        |r| (r.next() % 4) as u32 * 1_000_000_007,
        |a, b| a == b,
    )?;
    check_semiring::<Boolean>(tree, csr, seed, |r| (r.next() % 3) as u32, |a, b| a == b)?;
    check_semiring::<Tropical>(
        tree,
        csr,
        seed,
        |r| match r.next() % 3 {
            0 => f32::INFINITY,
            _ => (r.next() % 100) as f32 * 0.5,
        },
        |a, b| a.to_bits() == b.to_bits(),
    )?;
    Ok(())
}

fn random_bits(rng: &mut Rng, rows: usize, words: usize, density: u64) -> BitMatrix {
    let mut m = BitMatrix::zeroed(rows, words);
    for r in 0..rows {
        if rng.next() % 100 < density {
            for w in m.as_words_mut()[r * words..(r + 1) * words].iter_mut() {
                *w = rng.next() & rng.next();
            }
        }
    }
    m
}

fn check_bool(tree: &Arc<K2Tree>, csr: &Csr, seed: u64) -> Result<(), TestCaseError> {
    let mut rng = Rng(seed | 1);
    for_each_matrix(tree, |engine, m, config, dir, n_in, n_out| {
        for words in [1, 2, 3] {
            // Dense inputs, sparse inputs (a few active rows), and an empty one.
            for density in [100, 50, 5, 0] {
                let x = random_bits(&mut rng, n_in, words, density);
                let y0 = random_bits(&mut rng, n_out, words, 20);
                let want = csr.bool_product(dir, &x, &y0);
                for traversal in [Traversal::Dense, Traversal::Masked] {
                    let xd = engine.bits_upload(&x).unwrap();
                    let mut yd = engine.bits_upload(&y0).unwrap();
                    engine
                        .bool_product(m, dir, &xd, &mut yd, traversal)
                        .unwrap();
                    let got = engine.bits_download(&yd).unwrap();
                    prop_assert_eq!(
                        &got,
                        &want,
                        "{:?} {:?} {:?} W = {} density {}",
                        config,
                        dir,
                        traversal,
                        words,
                        density
                    );
                }
            }
            // Mismatched shapes are errors.
            let x = engine.bits_zeroed(n_in, words).unwrap();
            let mut y = engine.bits_zeroed(n_out + 1, words).unwrap();
            prop_assert!(engine
                .bool_product(m, dir, &x, &mut y, Traversal::Dense)
                .is_err());
            let mut y = engine.bits_zeroed(n_out, words + 1).unwrap();
            prop_assert!(engine
                .bool_product(m, dir, &x, &mut y, Traversal::Masked)
                .is_err());
        }
        Ok(())
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    #[test]
    fn semiring_products_match_csr((rows, cols, edges) in arb_matrix(), seed in any::<u64>()) {
        let tree = Arc::new(K2Tree::from_edges(rows, cols, edges.clone()));
        check_all_semirings(&tree, &Csr::from_edges(rows, cols, &edges), seed)?;
    }

    #[test]
    fn bool_products_match_csr((rows, cols, edges) in arb_matrix(), seed in any::<u64>()) {
        let tree = Arc::new(K2Tree::from_edges(rows, cols, edges.clone()));
        check_bool(&tree, &Csr::from_edges(rows, cols, &edges), seed)?;
    }

    #[test]
    fn bits_or_and_advance(rows in 0usize..40, words in 1usize..4, seed in any::<u64>()) {
        let engine = CpuEngine::new();
        let mut rng = Rng(seed | 1);
        let a = random_bits(&mut rng, rows, words, 60);
        let b = random_bits(&mut rng, rows, words, 60);
        let mut d = engine.bits_upload(&a).unwrap();
        engine.bits_or(&mut d, &engine.bits_upload(&b).unwrap()).unwrap();
        let got = engine.bits_download(&d).unwrap();
        for k in 0..rows * words {
            prop_assert_eq!(got.as_words()[k], a.as_words()[k] | b.as_words()[k]);
        }
        // advance: next &= !visited; visited |= next; returns popcount(next).
        let mut next = engine.bits_upload(&a).unwrap();
        let mut visited = engine.bits_upload(&b).unwrap();
        let left = engine.bits_advance(&mut next, &mut visited).unwrap();
        let (n, v) = (engine.bits_download(&next).unwrap(), engine.bits_download(&visited).unwrap());
        let mut count = 0;
        for k in 0..rows * words {
            let (x, y) = (a.as_words()[k], b.as_words()[k]);
            prop_assert_eq!(n.as_words()[k], x & !y);
            prop_assert_eq!(v.as_words()[k], x | y);
            count += (x & !y).count_ones() as u64;
        }
        prop_assert_eq!(left, count);
        // Advancing again finds nothing new.
        prop_assert_eq!(engine.bits_advance(&mut next, &mut visited).unwrap(), 0);
        engine.bits_clear(&mut visited).unwrap();
        prop_assert!(engine.bits_download(&visited).unwrap().is_empty());
        // Shape mismatches are errors.
        let mut other = engine.bits_zeroed(rows + 1, words).unwrap();
        prop_assert!(engine.bits_or(&mut other, &next).is_err());
        prop_assert!(engine.bits_advance(&mut other, &mut visited).is_err());
    }
}

/// A graph with many frontier chunks and parallel tasks.
#[test]
fn big_matrix_products_match_csr() {
    let (rows, cols) = (60_000u64, 90_001u64);
    let edges = big_matrix(rows, cols, 150_000, 11);
    let tree = Arc::new(K2Tree::from_edges(rows, cols, edges.clone()));
    let csr = Csr::from_edges(rows, cols, &edges);
    let mut rng = Rng(5);
    for_each_matrix(&tree, |engine, m, config, dir, n_in, n_out| {
        let x: Vec<u32> = (0..n_in).map(|_| (rng.next() % 3) as u32).collect();
        let mut y = vec![0u32; n_out];
        engine.product::<Counting>(m, dir, &x, 1, &mut y).unwrap();
        assert_eq!(y, csr.product::<Counting>(dir, &x, 1), "{config:?} {dir:?}");
        for density in [100, 1] {
            let x = random_bits(&mut rng, n_in, 2, density);
            let y0 = BitMatrix::zeroed(n_out, 2);
            let want = csr.bool_product(dir, &x, &y0);
            for traversal in [Traversal::Dense, Traversal::Masked] {
                let mut y = y0.clone();
                engine.bool_product(m, dir, &x, &mut y, traversal).unwrap();
                assert_eq!(
                    y, want,
                    "{config:?} {dir:?} {traversal:?} density {density}"
                );
            }
        }
        Ok(())
    })
    .unwrap();
}
