//! `load`, `info` and `lines` end to end through the binary, and the device flags that
//! every store command takes.

use std::ffi::OsStr;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};

use k2rpq::store::Store;

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn k2rpq<I: AsRef<OsStr>>(args: impl IntoIterator<Item = I>) -> Output {
    Command::new(env!("CARGO_BIN_EXE_k2rpq"))
        .args(args)
        .env("RUST_BACKTRACE", "0")
        .output()
        .unwrap()
}

/// Starts `k2rpq load - --format FORMAT --quiet --store STORE`, its stdin piped and its
/// stderr going to `stderr`.
fn load_from_stdin(format: &str, store: &Path, stderr: Stdio) -> Child {
    Command::new(env!("CARGO_BIN_EXE_k2rpq"))
        .args(["load", "-", "--format", format, "--quiet", "--store"])
        .arg(store)
        .stdin(Stdio::piped())
        .stderr(stderr)
        .spawn()
        .unwrap()
}

/// The stdout and stderr of a run that must have succeeded.
fn ok(out: Output) -> (String, String) {
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "{stderr}");
    (String::from_utf8(out.stdout).unwrap(), stderr)
}

/// The stderr of a run that must have failed.
fn failed(out: Output) -> String {
    assert!(!out.status.success(), "succeeded: {out:?}");
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// The bundled CoDEx-M loaded into `dir/store`.
fn codex_store(dir: &Path) -> PathBuf {
    let store = dir.join("store");
    load_into(&store, &root().join("fixtures/codex/codex-m.nt.gz"));
    store
}

/// Loads the RDF file `input` into a new store at `store`.
fn load_into(store: &Path, input: &Path) {
    ok(k2rpq([
        OsStr::new("load"),
        OsStr::new("--quiet"),
        OsStr::new("--store"),
        store.as_os_str(),
        input.as_os_str(),
    ]));
}

const NQ: &str = r#"<http://ex.org/a> <http://ex.org/p> <http://ex.org/b> .
<http://ex.org/a> <http://ex.org/p> <http://ex.org/c> <http://ex.org/g1> .
_:x <http://ex.org/q> "lit"@en <http://ex.org/g1> .
"#;

#[test]
fn loads_stdin_and_info_prints_the_table() {
    let dir = tempfile::tempdir().unwrap();
    let s = dir.path().join("s");
    let mut child = load_from_stdin("nq", &s, Stdio::inherit());
    child
        .stdin
        .take()
        .unwrap()
        .write_all(NQ.as_bytes())
        .unwrap();
    assert!(child.wait().unwrap().success());
    assert_eq!(Store::open(&s).unwrap().manifest().graphs.len(), 2);
    let (text, _) = ok(k2rpq([OsStr::new("info"), s.as_os_str()]));
    assert!(
        text.contains("http://ex.org/p") && text.contains("bits/edge"),
        "{text}"
    );
    assert!(text.contains("<http://ex.org/g1>"), "{text}");
    let (json, _) = ok(k2rpq([
        OsStr::new("info"),
        OsStr::new("--json"),
        s.as_os_str(),
    ]));
    let json: serde_json::Value = serde_json::from_str(&json).unwrap();
    assert_eq!(json["format"], "k2rpq-store");
    // stdin without a format is refused with a clear message.
    let out = Command::new(env!("CARGO_BIN_EXE_k2rpq"))
        .args(["load", "-", "--quiet", "--store"])
        .arg(dir.path().join("t"))
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert!(failed(out).contains("unknown RDF format"));
}

#[test]
fn keeps_lists_and_info_shows_them() {
    let dir = tempfile::tempdir().unwrap();
    let store = codex_store(dir.path());
    let (_, stderr) = ok(k2rpq([
        OsStr::new("lines"),
        OsStr::new("--quiet"),
        OsStr::new("--store"),
        store.as_os_str(),
    ]));
    assert!(stderr.contains("files written"), "{stderr}");
    let (text, _) = ok(k2rpq([
        OsStr::new("info"),
        OsStr::new("--verify"),
        store.as_os_str(),
    ]));
    assert!(text.contains("lists bytes"), "{text}");
    // `load` writes those of the large relations by default, `--line-lists` those of
    // every relation, and `--no-line-lists` none.
    let nt = root().join("fixtures/codex/codex-m.nt.gz");
    for (name, flag, min_edges) in [
        ("default", None, Some(k2rpq::store::LOAD_LINES_MIN_EDGES)),
        ("asked", Some("--line-lists"), Some(0)),
        ("without", Some("--no-line-lists"), None),
    ] {
        let fresh = dir.path().join(name);
        let mut args = vec![OsStr::new("load"), OsStr::new("--quiet")];
        args.extend(flag.map(OsStr::new));
        args.extend([OsStr::new("--store"), fresh.as_os_str(), nt.as_os_str()]);
        let (_, stderr) = ok(k2rpq(args));
        assert_eq!(
            stderr.contains("line lists:"),
            min_edges.is_some(),
            "{name}: {stderr}"
        );
        let m = Store::open(&fresh).unwrap().manifest().clone();
        for p in &m.graphs[0].predicates {
            let lists = match min_edges {
                Some(min) if p.edges >= min => 2,
                _ => 0,
            };
            assert_eq!(
                p.lines.len(),
                lists,
                "{name}: {} ({} edges)",
                p.iri,
                p.edges
            );
        }
    }
    // Not a store: a clear error, no panic.
    let bad = k2rpq([
        OsStr::new("lines"),
        OsStr::new("--store"),
        dir.path().join("nowhere").as_os_str(),
    ]);
    assert!(failed(bad).contains("not a k2rpq store"));
}

/// `--frontier-layout` takes every layout's name and `--no-row-windows` is accepted (the
/// CPU engine ignores both); an unknown layout is refused with the list of names.
#[test]
fn frontier_layout_flag() {
    let dir = tempfile::tempdir().unwrap();
    let store = codex_store(dir.path());
    let rpq = root().join("sparql/codex-m.rpq");
    let base = [
        OsStr::new("rpq"),
        OsStr::new("--store"),
        store.as_os_str(),
        OsStr::new("--engine"),
        OsStr::new("cpu"),
        OsStr::new("--count"),
        OsStr::new("--file"),
        rpq.as_os_str(),
    ];
    let layouts = ["codes", "blocks", "rowblocks", "colblocks", "both"]
        .map(|layout| vec!["--frontier-layout", layout]);
    for flags in layouts.iter().chain([&vec!["--no-row-windows"]]) {
        let args = base.iter().copied().chain(flags.iter().map(OsStr::new));
        let (text, _) = ok(k2rpq(args));
        assert!(!text.trim().is_empty(), "{flags:?}: no count printed");
    }
    let args = base
        .iter()
        .copied()
        .chain(["--frontier-layout", "rows"].map(OsStr::new));
    let stderr = failed(k2rpq(args));
    assert!(
        stderr.contains("unknown frontier layout") && stderr.contains("both"),
        "{stderr}"
    );
}

/// SIGINT stops a load cleanly: a clear message, a non-zero exit, no store and no
/// temporary folder left behind.
#[cfg(unix)]
#[test]
fn an_interrupted_load_leaves_nothing_behind() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("s");
    let mut child = load_from_stdin("nt", &store, Stdio::piped());
    let mut stdin = child.stdin.take().unwrap();
    for i in 0..1000 {
        writeln!(
            stdin,
            "<http://e/n{i}> <http://e/p> <http://e/n{}> .",
            i + 1
        )
        .unwrap();
    }
    stdin.flush().unwrap();
    // The load is waiting for more input when the signal comes; end of input then hands
    // the parsed statements on, and the load stops there.
    std::thread::sleep(std::time::Duration::from_millis(500));
    // SAFETY: sends a signal to the child this test started.
    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    std::thread::sleep(std::time::Duration::from_millis(200));
    drop(stdin);
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{stderr}");
    assert!(stderr.contains("interrupted"), "{stderr}");
    let left: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .flatten()
        .map(|e| e.file_name())
        .collect();
    assert!(left.is_empty(), "left behind: {left:?}");
}

/// A temporary folder that a killed load left is removed by the next load into any
/// store of the same folder; a live one is kept.
#[test]
fn a_killed_loads_temporary_folder_is_removed_by_the_next_load() {
    let dir = tempfile::tempdir().unwrap();
    // A process id that does not exist (above the kernel's maximum).
    let dead = dir.path().join(".other.k2rpq-tmp-4194305-17");
    std::fs::create_dir_all(dead.join("runs")).unwrap();
    let live = dir
        .path()
        .join(format!(".other.k2rpq-tmp-{}-18", std::process::id()));
    std::fs::create_dir_all(&live).unwrap();
    let nt = dir.path().join("g.nt");
    std::fs::write(&nt, "<http://e/a> <http://e/p> <http://e/b> .\n").unwrap();
    ok(k2rpq([
        OsStr::new("load"),
        OsStr::new("--quiet"),
        OsStr::new("--store"),
        dir.path().join("s").as_os_str(),
        nt.as_os_str(),
    ]));
    assert!(!dead.exists());
    assert!(live.exists());
}

/// Targets a store cannot be renamed onto, and folders without RDF files given as
/// inputs, are refused before anything is read.
#[test]
fn bad_targets_and_folder_inputs_are_refused_up_front() {
    let dir = tempfile::tempdir().unwrap();
    let nt = dir.path().join("g.nt");
    std::fs::write(&nt, "<http://e/a> <http://e/p> <http://e/b> .\n").unwrap();
    for target in [".", ".."] {
        let out = Command::new(env!("CARGO_BIN_EXE_k2rpq"))
            .args(["load", "--quiet", "--store", target])
            .arg(&nt)
            .current_dir(dir.path())
            .output()
            .unwrap();
        let stderr = failed(out);
        assert!(stderr.contains("name a new folder"), "{target}: {stderr}");
    }
    // A folder is read as its RDF files; one without any is refused.
    let empty = dir.path().join("empty");
    std::fs::create_dir(&empty).unwrap();
    std::fs::write(empty.join("notes.txt"), "not RDF").unwrap();
    let out = k2rpq([
        OsStr::new("load"),
        OsStr::new("--store"),
        dir.path().join("s").as_os_str(),
        empty.as_os_str(),
    ]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("is a folder with no RDF files in it"),
        "{stderr}"
    );
    assert!(!dir.path().join("s").exists());
    // A file given as a store.
    let out = k2rpq([OsStr::new("info"), nt.as_os_str()]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("a file, not a store folder"), "{stderr}");
}

/// `--lenient` names the first skipped statements with their position and counts the
/// rest; without it, the first one stops the load with its line and column. An
/// unterminated literal is called that, and a byte-order mark is no error.
#[test]
fn lenient_loads_name_what_they_skip() {
    let dir = tempfile::tempdir().unwrap();
    let nt = dir.path().join("bad.nt");
    let mut text = String::from("\u{feff}<http://e/a> <http://e/p> <http://e/b> .\n");
    text.push_str("<http://e/b> <http://e/p> \"open .\n");
    text.push_str("<http://e/c> <http://e/p> <http://e/d> .\n");
    for i in 0..12 {
        text.push_str(&format!("bad {i}\n"));
    }
    std::fs::write(&nt, text).unwrap();
    let load = |lenient: bool| {
        let mut args = vec![
            OsStr::new("load"),
            OsStr::new("--quiet"),
            OsStr::new("--store"),
        ];
        let store = dir.path().join(if lenient { "l" } else { "s" });
        args.push(store.as_os_str());
        args.push(nt.as_os_str());
        if lenient {
            args.push(OsStr::new("--lenient"));
        }
        k2rpq(args)
    };
    let stderr = failed(load(false));
    assert!(
        stderr.contains("bad.nt:2:27: unterminated string literal"),
        "{stderr}"
    );
    let (_, stderr) = ok(load(true));
    assert!(
        stderr.contains("loaded 2 statements (13 skipped)"),
        "{stderr}"
    );
    assert!(
        stderr.contains("skipped ") && stderr.contains("bad.nt:2:27: unterminated string literal"),
        "{stderr}"
    );
    assert!(stderr.contains("bad.nt:4:1: "), "{stderr}");
    assert_eq!(stderr.matches("  skipped ").count(), 10, "{stderr}");
    assert!(
        stderr.contains("... and 3 more skipped statements"),
        "{stderr}"
    );
}

/// Without a GPU, `--engine gpu` names the flag, not the store.
#[test]
fn engine_gpu_without_a_gpu_names_the_flag() {
    let dir = tempfile::tempdir().unwrap();
    let store = codex_store(dir.path());
    let out = k2rpq([
        OsStr::new("rpq"),
        OsStr::new("--engine"),
        OsStr::new("gpu"),
        OsStr::new("--store"),
        store.as_os_str(),
        OsStr::new(
            "<http://www.wikidata.org/entity/Q183> <http://www.wikidata.org/prop/direct/P530>+ ?y",
        ),
    ]);
    if out.status.success() {
        eprintln!("skipped: a GPU is usable here");
        return;
    }
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("error: --engine gpu"), "{stderr}");
    assert!(!stderr.contains("opening store"), "{stderr}");
}

/// `dump` writes back exactly the statements loaded: CoDEx-M's triples as a set, and a
/// store loaded from the dump dumps the same again.
#[test]
fn dump_round_trips_a_store() {
    use std::collections::HashSet;
    let dir = tempfile::tempdir().unwrap();
    let store = codex_store(dir.path());
    let triples = |bytes: &[u8]| -> HashSet<String> {
        oxttl::NTriplesParser::new()
            .for_slice(bytes)
            .map(|t| t.unwrap().to_string())
            .collect()
    };
    let gz = std::fs::read(root().join("fixtures/codex/codex-m.nt.gz")).unwrap();
    let mut text = Vec::new();
    std::io::Read::read_to_end(&mut flate2::read::MultiGzDecoder::new(&gz[..]), &mut text).unwrap();
    let loaded = triples(&text);
    let dump = dir.path().join("dump.nt");
    let (_, stderr) = ok(k2rpq([
        OsStr::new("dump"),
        OsStr::new("--quiet"),
        OsStr::new("--store"),
        store.as_os_str(),
        OsStr::new("-o"),
        dump.as_os_str(),
    ]));
    assert!(
        stderr.contains(&format!("wrote {} statements", loaded.len())),
        "{stderr}"
    );
    let dumped = std::fs::read(&dump).unwrap();
    assert_eq!(triples(&dumped), loaded);
    let again = dir.path().join("again");
    load_into(&again, &dump);
    let (text, _) = ok(k2rpq([
        OsStr::new("dump"),
        OsStr::new("--store"),
        again.as_os_str(),
        OsStr::new("--format"),
        OsStr::new("nt"),
    ]));
    assert_eq!(triples(text.as_bytes()), loaded);
}
