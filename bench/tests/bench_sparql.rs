//! `k2rpq-bench workload` on the SPARQL workload `sparql/codex-m-mixed.rq` over a CoDEx-M
//! store: every query completes on k2rpq's CPU engine, and where Oxigraph completes too
//! both return the same multisets of rows (or differ only where Oxigraph departs from the
//! spec).

use k2rpq_bench::rpq::{run_bench, BenchEngine, BenchOptions, RunStatus};
use k2rpq_bench::workload::{read_workload, QueryKind};

#[path = "../../tests/answers/mod.rs"]
mod answers;
use answers::cpu_database;

const CODEX_M: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../fixtures/codex/codex-m.nt.gz"
);
const WORKLOAD: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../sparql/codex-m-mixed.rq");

#[test]
fn codex_m_mixed_workload_agrees_with_oxigraph() {
    let workload = read_workload(WORKLOAD.as_ref()).unwrap();
    assert!(workload.len() >= 40, "{} queries", workload.len());
    assert!(workload
        .iter()
        .all(|q| matches!(q.kind, QueryKind::Sparql(_)) && q.id.starts_with('m')));
    let dir = tempfile::tempdir().unwrap();
    let db = cpu_database(CODEX_M.into(), dir.path());
    let options = BenchOptions {
        engines: vec![BenchEngine::Cpu, BenchEngine::Oxigraph],
        repeats: 1,
        warmup: 0,
        progress: false,
        // Oxigraph's evaluation of m18 (a closure joined on both ends) takes minutes.
        timeout: std::time::Duration::from_secs(10),
        ..BenchOptions::default()
    };
    let report = run_bench(&db, None, &workload, &options).unwrap();
    assert!(report.disagreements.is_empty(), "{}", report.table());
    let mut compared = 0;
    for q in &report.queries {
        let (ours, oxigraph) = (&q.runs[0], &q.runs[1]);
        assert_eq!(ours.status, RunStatus::Ok, "{}: {:?}", q.id, ours.error);
        assert_ne!(
            oxigraph.status,
            RunStatus::Error,
            "{}: {:?}",
            q.id,
            oxigraph.error
        );
        if oxigraph.status != RunStatus::Ok {
            continue;
        }
        compared += 1;
        assert!(
            q.agree == Some(true) || q.deviation.is_some(),
            "{}: {:?}",
            q.id,
            q.agree
        );
        // Only the query written to meet a deviation may differ.
        if q.deviation.is_some() {
            assert_eq!(q.id, "m44", "{}", report.table());
        }
    }
    assert!(compared >= 40, "only {compared} queries compared");
    // The paths of the workload ran on k2rpq's engine.
    let (on_cpu, _) = db.path_service_runs();
    assert!(on_cpu >= 30, "{on_cpu} path groups");
}
