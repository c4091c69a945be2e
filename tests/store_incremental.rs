//! Incremental loads and interrupted-load safety.

use std::path::{Path, PathBuf};

use k2rpq::store::{load, Input, LoadError, LoadOptions, LoadReport, Store};
use oxrdf::NamedNode;

fn write(dir: &Path, name: &str, text: &str) -> Input {
    let p = dir.join(name);
    std::fs::write(&p, text).unwrap();
    Input::Path(p)
}

/// Writes `text` to `dir/name` and loads it into the store `store` with the default options.
fn load_text(dir: &Path, name: &str, text: &str, store: &Path) -> LoadReport {
    load(&[write(dir, name, text)], store, &LoadOptions::default()).unwrap()
}

/// The names of the entries of `dir`, sorted.
fn sorted_names(dir: &Path) -> Vec<std::ffi::OsString> {
    let mut names: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    names.sort();
    names
}

fn line(s: &str, p: &str, o: &str) -> String {
    format!("<http://ex.org/{s}> <http://ex.org/{p}> <http://ex.org/{o}> .\n")
}

fn id(store: &Store, name: &str) -> Option<u32> {
    let n = NamedNode::new_unchecked(format!("http://ex.org/{name}"));
    store.dictionary().id(n.as_ref().into())
}

fn has(store: &Store, s: &str, p: &str, o: &str) -> bool {
    let (Some(s), Some(p), Some(o)) = (id(store, s), id(store, p), id(store, o)) else {
        return false;
    };
    store
        .relation(0, p)
        .unwrap()
        .is_some_and(|t| t.contains(s, o))
}

/// Everything in the folder except the inputs written by the test.
fn leftovers(dir: &Path) -> Vec<PathBuf> {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_none_or(|e| e != "nt"))
        .collect()
}

#[test]
fn incremental_load_keeps_ids_and_rebuilds_only_touched_predicates() {
    let dir = tempfile::tempdir().unwrap();
    let s = dir.path().join("s");
    // 6 terms: padded side 8; the second load adds 2, staying within 8.
    let a = [
        line("a", "p", "b"),
        line("b", "p", "c"),
        line("a", "q", "c"),
        line("c", "r", "a"),
    ]
    .concat();
    load_text(dir.path(), "a.nt", &a, &s);
    let before = Store::open(&s).unwrap();
    let names = ["a", "b", "c", "p", "q", "r"];
    let ids: Vec<Option<u32>> = names.iter().map(|n| id(&before, n)).collect();
    let r_file = before
        .predicates(0)
        .iter()
        .find(|p| Some(p.id) == id(&before, "r"))
        .unwrap()
        .clone();
    drop(before);

    let b = [
        line("c", "p", "e"),
        line("a", "p", "b"),
        line("e", "t", "a"),
    ]
    .concat();
    let report = load_text(dir.path(), "b.nt", &b, &s);
    assert_eq!(report.new_terms, 2, "e and t");
    assert_eq!(report.relations_built, 2, "p and t");
    assert_eq!(report.relations_kept, 2, "q and r untouched");
    let after = Store::open(&s).unwrap();
    assert_eq!(after.node_count(), 8);
    assert_eq!(
        names.iter().map(|n| id(&after, n)).collect::<Vec<_>>(),
        ids,
        "ids stable"
    );
    assert_eq!(after.manifest().dictionary.len(), 2, "one segment per load");
    for (s_, p, o) in [
        ("a", "p", "b"),
        ("b", "p", "c"),
        ("a", "q", "c"),
        ("c", "r", "a"),
        ("c", "p", "e"),
        ("e", "t", "a"),
    ] {
        assert!(has(&after, s_, p, o), "{s_} {p} {o}");
    }
    assert!(!has(&after, "a", "p", "c"));
    assert_eq!(after.graphs()[0].edges, 6);
    let r = after.relation(0, r_file.id).unwrap().unwrap();
    assert_eq!(
        r.rows(),
        8,
        "an untouched tree is re-labelled to the new node count"
    );
    let kept = after
        .predicates(0)
        .iter()
        .find(|p| p.id == r_file.id)
        .unwrap();
    assert_eq!(
        kept.crc32, r_file.crc32,
        "untouched tree file carried over as is"
    );
    let nodes: Vec<u32> = after.graph_nodes(0).unwrap().iter().collect();
    assert_eq!(nodes.len(), 4, "a b c e");
    assert_eq!(after.manifest().loads.len(), 2);
    after.verify().unwrap();
    assert_eq!(leftovers(dir.path()), vec![s.clone()]);
}

#[test]
fn incremental_load_that_grows_the_padded_side_rebuilds_everything() {
    let dir = tempfile::tempdir().unwrap();
    let s = dir.path().join("s");
    load_text(dir.path(), "a.nt", &line("a", "p", "b"), &s);
    let more: String = (0..40).map(|i| line(&format!("x{i}"), "q", "a")).collect();
    let report = load_text(dir.path(), "b.nt", &more, &s);
    assert_eq!((report.relations_built, report.relations_kept), (2, 0));
    let store = Store::open(&s).unwrap();
    assert!(has(&store, "a", "p", "b") && has(&store, "x39", "q", "a"));
    let p = store
        .relation(0, id(&store, "p").unwrap())
        .unwrap()
        .unwrap();
    assert_eq!(p.rows(), store.node_count() as u64);
    store.verify().unwrap();
}

#[test]
fn interrupted_load_leaves_the_old_store_intact() {
    let dir = tempfile::tempdir().unwrap();
    let s = dir.path().join("s");
    let a: String = (0..20)
        .map(|i| line(&format!("n{i}"), &format!("p{}", i % 4), "z"))
        .collect();
    load_text(dir.path(), "a.nt", &a, &s);
    let manifest = std::fs::read(s.join("manifest.json")).unwrap();
    let files = sorted_names(&s);

    let b: String = (0..20)
        .map(|i| line("z", &format!("p{}", i % 4), &format!("m{i}")))
        .collect();
    let options = LoadOptions {
        fail_after_trees: Some(2),
        ..LoadOptions::default()
    };
    let err = load(&[write(dir.path(), "b.nt", &b)], &s, &options).unwrap_err();
    assert!(matches!(err, LoadError::Injected), "{err:?}");
    assert_eq!(std::fs::read(s.join("manifest.json")).unwrap(), manifest);
    assert_eq!(sorted_names(&s), files);
    let store = Store::open(&s).unwrap();
    store.verify().unwrap();
    assert!(has(&store, "n3", "p3", "z"));
    assert_eq!(id(&store, "m0"), None);
    assert_eq!(
        leftovers(dir.path()),
        vec![s.clone()],
        "no temporary folder remains"
    );

    // A first load that fails creates nothing.
    let t = dir.path().join("t");
    let err = load(&[write(dir.path(), "c.nt", &a)], &t, &options).unwrap_err();
    assert!(matches!(err, LoadError::Injected));
    assert_eq!(leftovers(dir.path()), vec![s.clone()]);
}

#[test]
fn temporaries_of_killed_loads_are_cleaned_up() {
    let dir = tempfile::tempdir().unwrap();
    // No process has this id (above the kernel's pid_max).
    let stale = dir.path().join(".s.k2rpq-tmp-4294967294-1");
    std::fs::create_dir(&stale).unwrap();
    std::fs::write(stale.join("junk"), "x").unwrap();
    let s = dir.path().join("s");
    load_text(dir.path(), "a.nt", &line("a", "p", "b"), &s);
    assert!(!stale.exists());
    assert_eq!(leftovers(dir.path()), vec![s]);
}
