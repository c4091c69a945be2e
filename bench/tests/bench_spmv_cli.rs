//! `k2rpq-bench spmv` end to end on a tiny edge list, CPU only: the table on stdout, the
//! JSON and SVG files, and a clear error for bad input.

use std::process::Command;

fn k2rpq_bench() -> Command {
    Command::new(env!("CARGO_BIN_EXE_k2rpq-bench"))
}

#[test]
fn writes_table_json_and_svg() {
    let dir = tempfile::tempdir().unwrap();
    let tsv = dir.path().join("g.tsv");
    let edges: String = (0..300u32)
        .map(|i| format!("{}\t{}\n", i % 97, (i * 7 + 3) % 89))
        .collect();
    std::fs::write(&tsv, edges).unwrap();
    let (json, svg) = (dir.path().join("r.json"), dir.path().join("r.svg"));
    let out = k2rpq_bench()
        .args(["spmv", "--cpu", "--repeats", "2", "--warmup", "0"])
        .args(["--batches", "1,4", "--bit-batches", "64"])
        .arg("--tsv")
        .arg(&tsv)
        .arg("--json")
        .arg(&json)
        .arg("--svg")
        .arg(&svg)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(stdout.contains("cpu k2+F"), "{stdout}");
    assert!(stdout.contains("skipped cusparse: --cpu"), "{stdout}");
    // The note on how GPU times were taken is for tables with GPU rows only.
    assert!(!stdout.contains("GPU timing"), "{stdout}");
    let v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    // k2 and k2+F × right/left × B = 1, 4, plus bit-packed k2+F right/left.
    assert_eq!(v["measurements"].as_array().unwrap().len(), 10);
    assert_eq!(v["graph"]["rows"], 97);
    let svg = std::fs::read_to_string(&svg).unwrap();
    assert!(svg.starts_with("<svg") && svg.contains("median time (ms)"));
}

#[test]
fn bad_input_is_a_clear_error() {
    let dir = tempfile::tempdir().unwrap();
    let tsv = dir.path().join("bad.tsv");
    std::fs::write(&tsv, "0\t1\nnot an edge\n").unwrap();
    let out = k2rpq_bench()
        .args(["spmv", "--cpu", "--tsv"])
        .arg(&tsv)
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("bad.tsv:2"), "{err}");
}

/// `spmv` on a three-edge cycle, CPU only, with `option value`: whether it ran, and
/// its stderr.
fn tiny_run(option: &str, value: &str) -> (bool, String) {
    let dir = tempfile::tempdir().unwrap();
    let tsv = dir.path().join("g.tsv");
    std::fs::write(&tsv, "0\t1\n1\t2\n2\t0\n").unwrap();
    let out = k2rpq_bench()
        .args(["spmv", "--cpu", "--repeats", "1", "--warmup", "0"])
        .args([
            "--batches",
            "1",
            "--bit-batches",
            "64",
            option,
            value,
            "--tsv",
        ])
        .arg(&tsv)
        .output()
        .unwrap();
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn hold_us_takes_microseconds_and_rejects_the_rest() {
    for ok in ["0", "200"] {
        let (ran, err) = tiny_run("--hold-us", ok);
        assert!(ran, "--hold-us {ok}: {err}");
    }
    let (ran, err) = tiny_run("--hold-us", "soon");
    assert!(!ran);
    assert!(err.contains("--hold-us"), "{err}");
}

#[test]
fn row_group_iterations_take_caps_from_1_to_64() {
    let (ran, err) = tiny_run("--row-group-iterations", "1,8,64");
    assert!(ran, "{err}");
    for bad in ["0", "65", "8,x"] {
        let (ran, err) = tiny_run("--row-group-iterations", bad);
        assert!(!ran, "--row-group-iterations {bad}");
        assert!(err.contains("--row-group-iterations"), "{bad}: {err}");
    }
}

#[test]
fn a_missing_file_is_reported_once() {
    let dir = tempfile::tempdir().unwrap();
    for args in [
        &["build-tree", "nothere.tsv", "--out", "x.k2"][..],
        &["spmv", "--tsv", "nothere.tsv"],
    ] {
        let out = k2rpq_bench()
            .args(args)
            .current_dir(dir.path())
            .output()
            .unwrap();
        assert!(!out.status.success());
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!stderr.contains("panicked"), "{stderr}");
        // The OS's reason once: an error that shows its cause is not also its source.
        assert_eq!(stderr.matches("nothere").count(), 1, "{args:?}: {stderr}");
        assert_eq!(
            stderr.matches("No such file").count(),
            1,
            "{args:?}: {stderr}"
        );
    }
}
