//! `load`, `info` and `lines` end to end through the binary, and the device flags that
//! every store command takes.

use std::ffi::OsStr;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

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

/// The stdout and stderr of a run that must have succeeded.
fn ok(out: Output) -> (String, String) {
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "{stderr}");
    (String::from_utf8(out.stdout).unwrap(), stderr)
}

/// The bundled CoDEx-M loaded into `dir/store`.
fn codex_store(dir: &Path) -> PathBuf {
    let store = dir.join("store");
    let nt = root().join("fixtures/codex/codex-m.nt.gz");
    ok(k2rpq([
        OsStr::new("load"),
        OsStr::new("--quiet"),
        OsStr::new("--store"),
        store.as_os_str(),
        nt.as_os_str(),
    ]));
    store
}

const NQ: &str = r#"<http://ex.org/a> <http://ex.org/p> <http://ex.org/b> .
<http://ex.org/a> <http://ex.org/p> <http://ex.org/c> <http://ex.org/g1> .
_:x <http://ex.org/q> "lit"@en <http://ex.org/g1> .
"#;

#[test]
fn loads_stdin_and_info_prints_the_table() {
    let dir = tempfile::tempdir().unwrap();
    let s = dir.path().join("s");
    let mut child = Command::new(env!("CARGO_BIN_EXE_k2rpq"))
        .args(["load", "-", "--format", "nq", "--quiet", "--store"])
        .arg(&s)
        .stdin(Stdio::piped())
        .spawn()
        .unwrap();
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
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("unknown RDF format"));
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
    // `load --line-lists` writes them with the load.
    let fresh = dir.path().join("fresh");
    let nt = root().join("fixtures/codex/codex-m.nt.gz");
    ok(k2rpq([
        OsStr::new("load"),
        OsStr::new("--quiet"),
        OsStr::new("--line-lists"),
        OsStr::new("--store"),
        fresh.as_os_str(),
        nt.as_os_str(),
    ]));
    let m = Store::open(&fresh).unwrap().manifest().clone();
    assert!(m.graphs[0].predicates.iter().all(|p| p.lines.len() == 2));
    // Not a store: a clear error, no panic.
    let bad = k2rpq([
        OsStr::new("lines"),
        OsStr::new("--store"),
        dir.path().join("nowhere").as_os_str(),
    ]);
    assert!(!bad.status.success());
    assert!(String::from_utf8_lossy(&bad.stderr).contains("not a k2rpq store"));
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
    let bad = k2rpq(args);
    assert!(!bad.status.success());
    let stderr = String::from_utf8_lossy(&bad.stderr);
    assert!(
        stderr.contains("unknown frontier layout") && stderr.contains("both"),
        "{stderr}"
    );
}
