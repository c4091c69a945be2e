//! Line lists kept on disk (`k2rpq lines`, [`keep_lines`]): the same answers with and
//! without them, read instead of built, carried by incremental loads for the relations
//! they do not rebuild, and damaged files reported by `verify` but never fatal to a query.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use k2rpq::database::{Database, DatabaseOptions, EngineChoice};
use k2rpq::k2tree::LineFileState;
use k2rpq::rpq::EvalOptions;
use k2rpq::store::{keep_lines, load, Input, KeepLinesOptions, LoadOptions, Store};
use k2rpq_bench::wikidata::{wikidata_like_workload, write_wikidata_like, GenOptions};
use k2rpq_bench::workload::{read_workload, QueryKind};

const TRIPLES: u64 = 40_000;

/// A generated wikidata-like store and its workload file.
fn store(dir: &Path) -> (PathBuf, PathBuf) {
    let (nt, rpq, store) = (dir.join("w.nt"), dir.join("w.rpq"), dir.join("store"));
    // Few predicates: every kept file is a synchronised write.
    let opts = GenOptions {
        seed: 7,
        predicates: 60,
        ..GenOptions::new(TRIPLES)
    };
    write_wikidata_like(&mut std::fs::File::create(&nt).unwrap(), &opts).unwrap();
    std::fs::write(&rpq, wikidata_like_workload(TRIPLES, opts.predicates)).unwrap();
    load(&[Input::Path(nt)], &store, &LoadOptions::default()).unwrap();
    (store, rpq)
}

/// Every workload query's pairs on the CPU engine, with the store's line-list statistics.
fn answers(store: &Path, rpq: &Path) -> (Vec<Vec<(u32, u32)>>, Arc<Store>) {
    let db = Database::open(
        store,
        &DatabaseOptions {
            engine: EngineChoice::Cpu,
            ..Default::default()
        },
    )
    .unwrap();
    let mut out = Vec::new();
    // Twice, so that lists built (or read) during the first pass serve the second.
    for _ in 0..2 {
        out.clear();
        for q in read_workload(rpq).unwrap() {
            let QueryKind::Path(log) = &q.kind else {
                panic!("{}: a log-line workload", q.id)
            };
            let answer = db.run_log_query(log, &EvalOptions::default()).unwrap();
            out.push(answer.result.pairs);
        }
    }
    (out, db.store().clone())
}

fn opts() -> KeepLinesOptions {
    KeepLinesOptions::default()
}

#[test]
fn kept_lists_give_the_same_answers_and_are_read_not_built() {
    let dir = tempfile::tempdir().unwrap();
    let (dir_store, rpq) = store(dir.path());
    let (without, plain) = answers(&dir_store, &rpq);
    assert_eq!(plain.line_budget().stats().read, 0);

    let report = keep_lines(&dir_store, &opts()).unwrap();
    let relations: usize = plain
        .manifest()
        .graphs
        .iter()
        .map(|g| g.predicates.len())
        .sum();
    assert_eq!((report.written, report.kept), (2 * relations, 0));
    assert!(report.bytes > 0);
    let (with, kept) = answers(&dir_store, &rpq);
    assert_eq!(with, without, "answers differ with the kept lists");
    let stats = kept.line_budget().stats();
    assert!(stats.read > 0, "no list was read: {stats}");
    assert_eq!(stats.built, 0, "lists were built although kept: {stats}");
    for (_, _, tree) in kept.mapped_relations() {
        for info in tree.line_info() {
            assert!(matches!(
                info.file,
                Some(LineFileState::Read | LineFileState::Unread)
            ));
        }
    }
    kept.verify().unwrap();

    // A second run keeps every file; `force` writes them all again, byte for byte.
    let again = keep_lines(&dir_store, &opts()).unwrap();
    assert_eq!((again.written, again.kept), (0, 2 * relations));
    let name = &kept.manifest().graphs[0].predicates[0].lines[0].file;
    let before = std::fs::read(dir_store.join(name)).unwrap();
    let forced = keep_lines(
        &dir_store,
        &KeepLinesOptions {
            force: true,
            ..opts()
        },
    )
    .unwrap();
    assert_eq!(forced.written, 2 * relations);
    assert_eq!(std::fs::read(dir_store.join(name)).unwrap(), before);
}

#[test]
fn small_relations_are_left_to_first_use() {
    let dir = tempfile::tempdir().unwrap();
    let (dir_store, rpq) = store(dir.path());
    let (without, _) = answers(&dir_store, &rpq);
    let plain = Store::open(&dir_store).unwrap();
    let mut edges: Vec<u64> = plain.manifest().graphs[0]
        .predicates
        .iter()
        .map(|p| p.edges)
        .collect();
    edges.sort_unstable();
    let min_edges = edges[edges.len() / 2];
    let small = edges.iter().filter(|&&e| e < min_edges).count();
    assert!(small > 0);
    let report = keep_lines(
        &dir_store,
        &KeepLinesOptions {
            min_edges,
            ..opts()
        },
    )
    .unwrap();
    assert_eq!(report.small, small);
    assert_eq!(report.written, 2 * (edges.len() - small));
    let kept = Store::open(&dir_store).unwrap();
    for p in &kept.manifest().graphs[0].predicates {
        let lists = if p.edges >= min_edges { 2 } else { 0 };
        assert_eq!(p.lines.len(), lists, "{} ({} edges)", p.iri, p.edges);
    }
    kept.verify().unwrap();
    let (with, _) = answers(&dir_store, &rpq);
    assert_eq!(with, without, "answers differ with the kept lists");
}

#[test]
fn damaged_lists_are_reported_by_verify_and_rebuilt_for_queries() {
    let dir = tempfile::tempdir().unwrap();
    let (dir_store, rpq) = store(dir.path());
    let (without, _) = answers(&dir_store, &rpq);
    keep_lines(&dir_store, &opts()).unwrap();
    let manifest = Store::open(&dir_store).unwrap().manifest().clone();
    // Flip a byte in the middle of every lines file (same size: `open` cannot tell).
    for p in manifest.graphs.iter().flat_map(|g| &g.predicates) {
        for l in &p.lines {
            let path = dir_store.join(&l.file);
            let mut b = std::fs::read(&path).unwrap();
            let mid = b.len() / 2;
            b[mid] ^= 0x40;
            std::fs::write(&path, b).unwrap();
        }
    }
    let err = Store::open(&dir_store).unwrap().verify().unwrap_err();
    assert!(err.to_string().contains("line lists"), "{err}");
    let (with, store) = answers(&dir_store, &rpq);
    assert_eq!(with, without, "answers differ over damaged lists");
    assert_eq!(store.line_budget().stats().read, 0);
    let failed = store
        .mapped_relations()
        .iter()
        .flat_map(|(_, _, t)| t.line_info())
        .filter(|i| matches!(&i.file, Some(LineFileState::Failed(e)) if e.contains("checksum")))
        .count();
    assert!(failed > 0, "no failed read reported");
    // A missing file: the store still opens and answers.
    let gone = &manifest.graphs[0].predicates[0].lines[0].file;
    std::fs::remove_file(dir_store.join(gone)).unwrap();
    let (with, _) = answers(&dir_store, &rpq);
    assert_eq!(with, without);
}

#[test]
fn incremental_loads_keep_the_lists_of_untouched_relations_only() {
    let dir = tempfile::tempdir().unwrap();
    let (dir_store, _) = store(dir.path());
    keep_lines(&dir_store, &opts()).unwrap();
    let before = Store::open(&dir_store).unwrap().manifest().clone();
    // One new edge between known nodes of the first predicate (no new node, same side).
    let first = &before.graphs[0].predicates[0];
    let s = Store::open(&dir_store).unwrap();
    let tree = s.relation(0, first.id).unwrap().unwrap();
    // A subject and an object of the relation that it does not link yet.
    let cells = tree.cells();
    let (r, c) = cells
        .iter()
        .flat_map(|&(r, _)| cells.iter().map(move |&(_, c)| (r, c)))
        .find(|&(r, c)| !tree.contains(r, c))
        .expect("a missing edge");
    let term = |id: u32| s.dictionary().term(id).unwrap().to_string();
    let extra = dir.path().join("more.nt");
    std::fs::write(
        &extra,
        format!("{} <{}> {} .\n", term(r), first.iri, term(c)),
    )
    .unwrap();
    drop(tree);
    drop(s);
    load(&[Input::Path(extra)], &dir_store, &LoadOptions::default()).unwrap();
    let after = Store::open(&dir_store).unwrap();
    after.verify().unwrap();
    for (p, old) in after.manifest().graphs[0]
        .predicates
        .iter()
        .zip(&before.graphs[0].predicates)
    {
        assert_eq!(p.iri, old.iri);
        if p.iri == first.iri {
            assert!(p.lines.is_empty(), "the rebuilt relation kept stale lists");
        } else {
            assert_eq!(
                p.lines, old.lines,
                "{}: lists of an untouched relation lost",
                p.iri
            );
            for l in &p.lines {
                assert!(dir_store.join(&l.file).exists());
            }
        }
    }
}
