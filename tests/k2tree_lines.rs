//! Line lists of k²-trees: the parallel build against the sequential reference, the
//! memory budget (refusals, release on drop), and the build trigger.

mod common;

use std::sync::Arc;

use common::{arb_matrix, big_matrix};
use k2rpq::k2tree::{line_build_threshold, K2Tree, LineBudget, LineBuildError, Lines};
use proptest::prelude::*;

/// A rayon pool of `threads` threads.
fn pool(threads: usize) -> rayon::ThreadPool {
    rayon::ThreadPoolBuilder::new()
        .num_threads(threads)
        .build()
        .unwrap()
}

/// Both orientations of `t` built in parallel (on `threads` threads) equal the
/// sequential build, and every line reads back as the tree's row or column.
fn check_parallel(t: &K2Tree, threads: usize) -> Result<(), TestCaseError> {
    let pool = pool(threads);
    for by_column in [false, true] {
        let budget = LineBudget::new(u64::MAX);
        let par = pool
            .install(|| Lines::build_parallel(t, by_column, &budget))
            .map_err(|e| TestCaseError::fail(e.to_string()))?;
        let seq = Lines::build(t, by_column);
        prop_assert!(par == seq, "parallel and sequential lists differ");
        prop_assert_eq!(budget.used(), par.bytes());
        let side = if by_column { t.cols() } else { t.rows() };
        for k in 0..side as u32 + 1 {
            let want = if by_column { t.column(k) } else { t.row(k) };
            prop_assert_eq!(par.line(k), &want[..], "line {}", k);
            for cap in [0, 1, 3, u64::MAX] {
                prop_assert_eq!(
                    t.line_len_upto(by_column, k, cap),
                    (want.len() as u64).min(cap)
                );
            }
        }
    }
    Ok(())
}

proptest! {
    #[test]
    fn parallel_lists_equal_sequential((rows, cols, edges) in arb_matrix(), threads in 1usize..5) {
        let t = K2Tree::from_edges(rows, cols, edges);
        check_parallel(&t, threads)?;
    }
}

#[test]
fn parallel_lists_equal_sequential_on_large_trees() {
    // Large enough that the decode splits a level of hundreds of nodes into chunks.
    for (n, e, seed) in [
        (5_000u64, 40_000usize, 1u64),
        (70_000, 200_000, 2),
        (300, 90_000, 3),
    ] {
        let t = K2Tree::from_edges(n, n, big_matrix(n, n, e, seed));
        for threads in [1, 3, 8] {
            let pool = pool(threads);
            for by_column in [false, true] {
                let budget = LineBudget::new(u64::MAX);
                let par = pool
                    .install(|| Lines::build_parallel(&t, by_column, &budget))
                    .unwrap();
                assert!(
                    par == Lines::build(&t, by_column),
                    "n {n}, {threads} threads"
                );
            }
        }
    }
}

#[test]
fn budget_refuses_builds_that_do_not_fit() {
    let n = 2_000u64;
    let t = K2Tree::from_edges(n, n, big_matrix(n, n, 10_000, 7));
    let peak = Lines::peak_bytes(&t, false);
    // One byte short of the peak: refused, nothing held.
    let budget = LineBudget::new(peak - 1);
    match Lines::build_parallel(&t, false, &budget) {
        Err(LineBuildError::OverBudget { needed, free }) => {
            assert_eq!((needed, free), (peak, peak - 1));
        }
        other => panic!("expected a refusal, got {other:?}"),
    }
    assert_eq!(budget.used(), 0);
    // Exactly the peak: built; the budget then holds only what the lists keep.
    let budget = LineBudget::new(peak);
    let lines = Lines::build_parallel(&t, false, &budget).unwrap();
    assert!(lines.has_index(), "a dense graph keeps its index by line");
    assert_eq!(budget.used(), lines.bytes());
    assert!(lines.bytes() < peak);
    for r in 0..n as u32 {
        assert_eq!(lines.line(r), &t.row(r)[..]);
    }
    // A second build in the same budget no longer fits.
    assert!(Lines::build_parallel(&t, true, &budget).is_err());
    assert_eq!(budget.used(), lines.bytes());
    budget.release(lines.bytes());
    assert_eq!(budget.used(), 0);
}

#[test]
fn trigger_builds_after_the_threshold_within_the_budget() {
    let n = 20_000u64;
    let edges = big_matrix(n, n, 60_000, 11);
    let threshold = line_build_threshold(
        K2Tree::from_edges(n, n, edges.clone()).nodes(),
        rayon::current_num_threads(),
    );
    assert!(threshold > 1);

    // Below the threshold nothing is built; reaching it builds the sequential lists.
    let t = K2Tree::from_edges(n, n, edges.clone());
    let budget = Arc::new(LineBudget::new(u64::MAX));
    t.set_line_budget(budget.clone());
    assert!(t.lines_after(true, threshold - 1).is_none());
    assert!(t.lines_if_built(true).is_none());
    let built = t.lines_after(true, 1).expect("threshold reached");
    assert!(*built == Lines::build(&t, true));
    assert!(
        t.lines_if_built(false).is_none(),
        "the other orientation is separate"
    );
    let [rows, cols] = t.line_info();
    assert_eq!((rows.bytes, cols.bytes), (None, Some(built.bytes())));
    assert_eq!(budget.used(), built.bytes());
    assert_eq!(budget.stats().built, 1);
    // Dropping the tree gives the bytes back.
    drop(t);
    assert_eq!(budget.used(), 0);

    // A budget of nothing: refused, counted, and the count of visits starts over.
    let t = K2Tree::from_edges(n, n, edges);
    let none = Arc::new(LineBudget::new(0));
    t.set_line_budget(none.clone());
    assert!(t.lines_after(false, u64::MAX / 2).is_none());
    assert_eq!(none.stats().refused, 1);
    assert_eq!(t.line_info()[0].spent_visits, 0);
    assert_eq!(none.used(), 0);
    // Raising the limit lets a later walk build them.
    none.set_limit(u64::MAX);
    assert!(t.lines_after(false, threshold).is_some());
    assert_eq!(none.stats().built, 1);
}

#[test]
fn empty_tree_lists() {
    let t = K2Tree::from_edges(10, 10, Vec::new());
    let budget = LineBudget::new(u64::MAX);
    let l = Lines::build_parallel(&t, false, &budget).unwrap();
    assert!(l == Lines::build(&t, false));
    assert!(l.keys().is_empty() && l.line(3).is_empty());
}

#[test]
fn line_memory_option_parses() {
    use k2rpq::database::line_memory_bytes;
    let bytes = |text: &str| line_memory_bytes(text.parse().unwrap()).unwrap();
    assert_eq!(bytes("0"), 0);
    assert_eq!(bytes("2GiB"), 2 << 30);
    assert!(bytes("10%") > 0);
    assert!("lots".parse::<k2rpq::cache::MemoryBudget>().is_err());
}

#[test]
fn small_trees_get_their_lists_on_the_first_descent() {
    let n = 1_000u64;
    let t = K2Tree::from_edges(n, n, big_matrix(n, n, 2_000, 5));
    assert!(t.nodes() <= k2rpq::k2tree::EAGER_LINE_NODES);
    assert_eq!(line_build_threshold(t.nodes(), 16), 0);
    t.set_line_budget(Arc::new(LineBudget::new(u64::MAX)));
    let built = t.lines_after(false, 1).expect("built on the first descent");
    assert!(*built == Lines::build(&t, false));
}

#[test]
fn background_builds_land_in_every_clone_and_wait_for_nothing() {
    let n = 20_000u64;
    let t = K2Tree::from_edges(n, n, big_matrix(n, n, 60_000, 13));
    let threshold = line_build_threshold(t.nodes(), rayon::current_num_threads());
    assert!(threshold > 0, "a tree above the eager size");
    let budget = Arc::new(LineBudget::new(u64::MAX));
    budget.set_background_builds(true);
    t.set_line_budget(budget.clone());
    let clone = t.clone();
    // Crossing the threshold starts the build and returns at once, without lists.
    assert!(t.lines_after(false, threshold).is_none());
    t.wait_for_lines();
    assert_eq!(budget.stats().building, 0);
    assert_eq!(budget.stats().built, 1);
    let built = t.lines_if_built(false).expect("built in the background");
    assert!(*built == Lines::build(&t, false));
    // The clone made before the build shares the lists; the bytes go back with the last.
    assert!(clone.lines_if_built(false).is_some());
    assert!(t.lines_after(false, 0).is_some());
    let bytes = built.bytes();
    assert_eq!(budget.used(), bytes);
    drop(t);
    assert_eq!(budget.used(), bytes, "the clone still holds them");
    drop(clone);
    assert_eq!(budget.used(), 0);
}

#[test]
fn sparse_lines_read_back_through_the_rank_index() {
    // 1000 non-empty rows spread over 100k: too sparse for the direct index by line,
    // dense enough for the rank bitmap; `for_each` must read every line as the tree does.
    let n = 100_000u64;
    let mut edges = Vec::new();
    for i in 0..1000u32 {
        let r = i * 97 + (i % 7);
        for j in 0..(1 + i % 5) {
            edges.push((r, (i * 31 + j * 1013) % n as u32));
        }
    }
    let t = K2Tree::from_edges(n, n, edges);
    let budget = LineBudget::new(u64::MAX);
    let lines = Lines::build_parallel(&t, false, &budget).unwrap();
    assert!(lines == Lines::build(&t, false));
    assert!(!lines.has_index(), "too sparse for the direct index");
    assert_eq!(budget.used(), lines.bytes());
    // Active lines: every key, its neighbours (mostly empty), and lines past the last key.
    let mut active: Vec<u32> = lines
        .keys()
        .iter()
        .flat_map(|&k| [k.saturating_sub(1), k, k + 1])
        .chain([n as u32 - 2, n as u32 - 1])
        .collect();
    active.sort_unstable();
    active.dedup();
    let mut got: Vec<(u32, u32)> = Vec::new();
    lines.for_each(&active, |k, v| got.push((k, v)));
    let want: Vec<(u32, u32)> = active
        .iter()
        .flat_map(|&k| t.row(k).into_iter().map(move |v| (k, v)))
        .collect();
    assert_eq!(got, want);
    // A line at a time: the same cells, the same work.
    let mut by_line: Vec<(u32, u32)> = Vec::new();
    let work = lines.for_each_line(&active, |k, line| {
        assert!(!line.is_empty(), "only non-empty lines");
        by_line.extend(line.iter().map(|&v| (k, v)));
    });
    assert_eq!(by_line, want);
    assert_eq!(work, lines.for_each(&active, |_, _| {}));
}

/// A copy of `t` that shares none of its lists (a clone shares them).
fn without_lines(t: &K2Tree) -> K2Tree {
    K2Tree::from_edges(t.rows(), t.cols(), t.cells())
}

/// Lists written to a lines file read back equal (both orientations, every index kind),
/// and the tree's line walks then use them without a build.
fn check_file_round_trip(t: &K2Tree, dir: &std::path::Path) -> Result<(), TestCaseError> {
    use k2rpq::k2tree::{lines_file, LineFileState};
    let crc = 0x5eed_u32;
    for by_column in [false, true] {
        let built = Lines::build(t, by_column);
        let path = dir.join(if by_column { "t.cols" } else { "t.rows" });
        let bytes = lines_file::write(&built, by_column, crc, &path)
            .map_err(|e| TestCaseError::fail(e.to_string()))?;
        prop_assert_eq!(std::fs::metadata(&path).unwrap().len(), bytes);
        let budget = LineBudget::new(u64::MAX);
        let read = lines_file::read(&path, by_column, t, crc, &budget)
            .map_err(|e| TestCaseError::fail(e.to_string()))?;
        prop_assert!(read == built, "lists read back differ");
        prop_assert_eq!(budget.used(), read.bytes());
        // Attached to a fresh copy of the tree: the first walk reads the file.
        let fresh = without_lines(t);
        fresh.set_line_budget(Arc::new(LineBudget::new(u64::MAX)));
        fresh.set_line_file(by_column, path.clone(), crc);
        prop_assert!(fresh.lines_after(by_column, 0).is_some_and(|l| *l == built));
        prop_assert_eq!(
            fresh.line_info()[by_column as usize].file.clone(),
            Some(LineFileState::Read)
        );
        prop_assert_eq!(fresh.line_budget().stats().read, 1);
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]
    #[test]
    fn lines_files_round_trip((rows, cols, edges) in arb_matrix()) {
        let side = rows.max(cols);
        let t = K2Tree::from_edges(side, side, edges);
        let dir = tempfile::tempdir().unwrap();
        check_file_round_trip(&t, dir.path())?;
    }
}

#[test]
fn lines_files_round_trip_with_every_index_kind() {
    let dir = tempfile::tempdir().unwrap();
    // Dense lines (direct index), sparse ones (rank bitmap), very sparse (binary search).
    for (n, e, seed) in [
        (2_000u64, 20_000usize, 3u64),
        (100_000, 3_000, 4),
        (1 << 24, 40, 5),
    ] {
        let t = K2Tree::from_edges(n, n, big_matrix(n, n, e, seed));
        check_file_round_trip(&t, dir.path()).unwrap();
    }
}

#[test]
fn damaged_stale_or_foreign_lines_files_are_errors_and_walks_build_instead() {
    use k2rpq::k2tree::{lines_file, LineFileState};
    let dir = tempfile::tempdir().unwrap();
    let n = 5_000u64;
    let t = K2Tree::from_edges(n, n, big_matrix(n, n, 30_000, 9));
    let other = K2Tree::from_edges(n, n, big_matrix(n, n, 30_000, 10));
    let good = dir.path().join("good.rows");
    lines_file::write(&Lines::build(&t, false), false, 7, &good).unwrap();
    let bytes = std::fs::read(&good).unwrap();
    let variant = |name: &str, f: &dyn Fn(&mut Vec<u8>)| {
        let mut b = bytes.clone();
        f(&mut b);
        let p = dir.path().join(name);
        std::fs::write(&p, b).unwrap();
        p
    };
    let cases: Vec<(std::path::PathBuf, bool, u32, &K2Tree, &str)> = vec![
        (
            variant("body", &|b| *b.last_mut().unwrap() ^= 1),
            false,
            7,
            &t,
            "body",
        ),
        (variant("head", &|b| b[20] ^= 1), false, 7, &t, "header"),
        (
            variant("short", &|b| b.truncate(b.len() - 4)),
            false,
            7,
            &t,
            "length",
        ),
        (
            variant("long", &|b| b.extend_from_slice(&[0; 4])),
            false,
            7,
            &t,
            "length",
        ),
        (variant("magic", &|b| b[0] = b'X'), false, 7, &t, "magic"),
        (variant("empty", &|b| b.clear()), false, 7, &t, "magic"),
        (good.clone(), true, 7, &t, "orientation"),
        (good.clone(), false, 8, &t, "another tree"),
        (good.clone(), false, 7, &other, "another tree"),
        (dir.path().join("missing"), false, 7, &t, "No such file"),
    ];
    for (path, by_column, crc, tree, why) in cases {
        let budget = LineBudget::new(u64::MAX);
        let err = lines_file::read(&path, by_column, tree, crc, &budget)
            .err()
            .unwrap_or_else(|| panic!("{} ({why}) was accepted", path.display()))
            .to_string();
        assert!(err.contains(why), "{}: {err}", path.display());
        assert_eq!(budget.used(), 0, "nothing held after a refusal");
        // A walk over a tree with that file attached falls back to descents and builds.
        let fresh = without_lines(tree);
        fresh.set_line_budget(Arc::new(LineBudget::new(u64::MAX)));
        fresh.set_line_file(by_column, path.clone(), crc);
        let threshold = line_build_threshold(fresh.nodes(), rayon::current_num_threads());
        let lines = fresh
            .lines_after(by_column, threshold.max(1))
            .expect("built instead");
        assert!(*lines == Lines::build(tree, by_column));
        assert!(matches!(
            fresh.line_info()[by_column as usize].file,
            Some(LineFileState::Failed(ref e)) if e.contains(why)
        ));
    }
    // Over the budget: refused, nothing held, and the walk goes on without lists.
    let tiny = LineBudget::new(100);
    let err = lines_file::read(&good, false, &t, 7, &tiny).unwrap_err();
    assert!(err.to_string().contains("budget"), "{err}");
    assert_eq!(tiny.used(), 0);
}
