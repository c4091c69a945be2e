//! Bad input and damaged stores give clear errors; lenient mode skips and counts.

use std::path::Path;

use k2rpq::store::ParseError;
use k2rpq::store::{load, Input, LoadError, LoadOptions, Store, StoreError};

fn nt_lines(n: usize) -> String {
    (0..n)
        .map(|i| {
            format!(
                "<http://ex.org/s{i}> <http://ex.org/p{}> <http://ex.org/o{}> .\n",
                i % 3,
                i % 7
            )
        })
        .collect()
}

/// `before` good lines of [`nt_lines`], the line `bad`, then `after` good lines.
fn around(before: usize, bad: &str, after: usize) -> String {
    [nt_lines(before), bad.to_owned(), nt_lines(after)].concat()
}

fn small_chunks() -> LoadOptions {
    LoadOptions {
        chunk_bytes: 4096,
        ..LoadOptions::default()
    }
}

fn write(dir: &Path, name: &str, text: &str) -> Input {
    let p = dir.join(name);
    std::fs::write(&p, text).unwrap();
    Input::Path(p)
}

#[test]
fn malformed_line_reports_file_line_and_reason() {
    let dir = tempfile::tempdir().unwrap();
    // The bad line sits far into the file, in a later parallel chunk.
    let text = around(400, "<http://ex.org/a> <http://ex.org/p> .\n", 10);
    let input = write(dir.path(), "bad.nt", &text);
    let err = load(&[input], &dir.path().join("s"), &small_chunks()).unwrap_err();
    match &err {
        LoadError::Parse(ParseError::Syntax(bad)) => {
            assert!(bad.file.ends_with("bad.nt"), "{}", bad.file);
            assert_eq!(bad.line, 401);
            assert!(bad.column > 1 && !bad.reason.is_empty());
        }
        e => panic!("unexpected {e:?}"),
    }
    let msg = err.to_string();
    assert!(msg.contains("bad.nt:401:"), "{msg}");
    assert!(
        !dir.path().join("s").exists(),
        "no store from a failed load"
    );
    assert_eq!(
        std::fs::read_dir(dir.path()).unwrap().count(),
        1,
        "no temporary left"
    );
}

#[test]
fn turtle_syntax_error_has_its_line() {
    let dir = tempfile::tempdir().unwrap();
    let input = write(
        dir.path(),
        "bad.ttl",
        "@prefix : <http://ex.org/> .\n:a :p :b .\n\n:a :p \"unterminated .\n",
    );
    let err = load(&[input], &dir.path().join("s"), &LoadOptions::default()).unwrap_err();
    assert!(err.to_string().contains("bad.ttl:4:"), "{err}");
}

#[test]
fn lenient_skips_and_counts_bad_lines() {
    let dir = tempfile::tempdir().unwrap();
    let mut text = around(300, "this is not a triple\n", 5);
    text.push_str("<http://ex.org/a> \"literal predicate\" <http://ex.org/b> .\n");
    let input = write(dir.path(), "bad.nt", &text);
    let options = LoadOptions {
        lenient: true,
        ..small_chunks()
    };
    let report = load(&[input], &dir.path().join("s"), &options).unwrap();
    assert_eq!(report.skipped, 2);
    assert_eq!(report.statements, 305);
    let store = Store::open(&dir.path().join("s")).unwrap();
    assert_eq!(store.graphs()[0].edges, 300, "distinct good triples");
}

#[test]
fn missing_file_and_unknown_extension() {
    let dir = tempfile::tempdir().unwrap();
    let missing = Input::Path(dir.path().join("nope.nt"));
    let err = load(&[missing], &dir.path().join("s"), &LoadOptions::default()).unwrap_err();
    assert!(
        matches!(err, LoadError::Parse(ParseError::Open { .. })),
        "{err:?}"
    );
    assert!(err.to_string().contains("nope.nt"), "{err}");

    let odd = write(dir.path(), "data.csv", "a,b\n");
    let err = load(&[odd], &dir.path().join("s"), &LoadOptions::default()).unwrap_err();
    assert!(
        matches!(err, LoadError::Parse(ParseError::UnknownFormat { .. })),
        "{err:?}"
    );
    assert!(err.to_string().contains("data.csv"), "{err}");

    let err = load(
        &[Input::Stdin],
        &dir.path().join("s"),
        &LoadOptions::default(),
    )
    .unwrap_err();
    assert!(err.to_string().contains("<stdin>"), "{err}");
}

#[test]
fn refuses_to_replace_a_folder_that_is_not_a_store() {
    let dir = tempfile::tempdir().unwrap();
    let target = dir.path().join("s");
    std::fs::create_dir(&target).unwrap();
    std::fs::write(target.join("precious.txt"), "keep me").unwrap();
    let input = write(dir.path(), "d.nt", &nt_lines(3));
    let err = load(&[input], &target, &LoadOptions::default()).unwrap_err();
    assert!(matches!(err, LoadError::NotAStore(_)), "{err:?}");
    assert!(target.join("precious.txt").exists());
}

/// A fresh store in `dir/s` and the paths of its files.
fn fresh_store(dir: &Path) -> (std::path::PathBuf, Store) {
    let input = write(dir, "d.nt", &nt_lines(50));
    let s = dir.join("s");
    load(&[input], &s, &LoadOptions::default()).unwrap();
    let store = Store::open(&s).unwrap();
    (s, store)
}

fn flip_byte(path: &Path, at: usize) {
    let mut b = std::fs::read(path).unwrap();
    let i = at.min(b.len() - 1);
    b[i] ^= 0x20;
    std::fs::write(path, b).unwrap();
}

/// A fresh store in `dir/s` with one byte flipped in the file `file_of` names (relative
/// to the store); the store's folder and that file.
fn corrupt_store(
    dir: &Path,
    file_of: impl FnOnce(&Store) -> String,
    at: usize,
) -> (std::path::PathBuf, std::path::PathBuf) {
    let (s, store) = fresh_store(dir);
    let file = s.join(file_of(&store));
    drop(store);
    flip_byte(&file, at);
    (s, file)
}

/// Opens the store at `s`, which must fail with an error that mentions `words`; the error.
fn open_fails(s: &Path, words: &str) -> StoreError {
    let err = Store::open(s).unwrap_err();
    assert!(err.to_string().contains(words), "{err}");
    err
}

#[test]
fn corrupt_or_foreign_manifest() {
    let dir = tempfile::tempdir().unwrap();
    let (s, _) = fresh_store(dir.path());
    let m = s.join("manifest.json");
    let good = std::fs::read_to_string(&m).unwrap();

    std::fs::write(&m, &good[..good.len() / 2]).unwrap();
    let err = open_fails(&s, "manifest");
    assert!(matches!(err, StoreError::Manifest { .. }), "{err:?}");

    std::fs::write(&m, good.replacen("\"version\": 1", "\"version\": 99", 1)).unwrap();
    let err = Store::open(&s).unwrap_err();
    assert!(
        matches!(err, StoreError::Version { version: 99, .. }),
        "{err:?}"
    );

    std::fs::write(
        &m,
        good.replacen("\"node_count\": ", "\"node_count\": 1", 1),
    )
    .unwrap();
    assert!(
        Store::open(&s).is_err(),
        "node count disagreeing with the dictionary"
    );

    std::fs::remove_file(&m).unwrap();
    let err = Store::open(&s).unwrap_err();
    assert!(matches!(err, StoreError::NotAStore { .. }), "{err:?}");
    assert!(matches!(
        Store::open(&dir.path().join("none")),
        Err(StoreError::NotAStore { .. })
    ));
}

#[test]
fn corrupt_dictionary() {
    let dir = tempfile::tempdir().unwrap();
    let dictionary = |store: &Store| store.manifest().dictionary[0].file.clone();
    let (s, file) = corrupt_store(dir.path(), dictionary, 40);
    let err = open_fails(&s, "checksum");
    assert!(matches!(err, StoreError::Dictionary(_)), "{err:?}");
    std::fs::remove_file(&file).unwrap();
    open_fails(&s, "cannot open");
}

#[test]
fn corrupt_truncated_or_missing_tree() {
    let dir = tempfile::tempdir().unwrap();
    let tree = |store: &Store| store.predicates(0)[0].file.clone();
    let (s, file) = corrupt_store(dir.path(), tree, 60);
    let store = Store::open(&s).expect("open checks sizes only");
    let p = store.predicates(0)[0].clone();
    let err = store.relation(0, p.id).unwrap_err();
    assert!(matches!(err, StoreError::Tree(_)), "{err:?}");
    // The file is named once, not once per layer of the error.
    assert_eq!(err.to_string().matches(&p.file).count(), 1, "{err}");
    assert!(store.verify().is_err());

    let len = std::fs::metadata(&file).unwrap().len();
    std::fs::OpenOptions::new()
        .write(true)
        .open(&file)
        .unwrap()
        .set_len(len - 8)
        .unwrap();
    open_fails(&s, "truncated");

    std::fs::remove_file(&file).unwrap();
    open_fails(&s, "missing");
}

#[test]
fn corrupt_node_bitmap() {
    let dir = tempfile::tempdir().unwrap();
    let nodes = |store: &Store| store.manifest().graphs[0].nodes_file.clone();
    let (s, _) = corrupt_store(dir.path(), nodes, 10);
    let store = Store::open(&s).unwrap();
    let err = store.graph_nodes(0).unwrap_err();
    assert!(err.to_string().contains("checksum"), "{err}");
}
