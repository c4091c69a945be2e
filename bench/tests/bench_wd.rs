//! `k2rpq bench` on a small generated wikidata-like store with the workload derived from
//! the generator's layout: the Oxigraph copy holds exactly the store's triples, every
//! query returns the same rows on k2rpq and Oxigraph, and overlapping the copy with the
//! k2rpq runs changes no answer.

use k2rpq_bench::rpq::{run_bench, BenchEngine, BenchOptions, RunStatus};
use k2rpq_bench::wikidata::{wikidata_like_workload, write_wikidata_like, GenOptions};
use k2rpq_bench::workload::read_workload;

#[path = "../../tests/answers/mod.rs"]
mod answers;
use answers::cpu_database;

#[test]
fn wikidata_like_workload_agrees_with_oxigraph_with_and_without_overlap() {
    let dir = tempfile::tempdir().unwrap();
    let (nt, rpq) = (dir.path().join("w.nt"), dir.path().join("w.rpq"));
    let triples = 60_000;
    let mut f = std::fs::File::create(&nt).unwrap();
    let opts = GenOptions::new(triples);
    write_wikidata_like(&mut f, &opts).unwrap();
    drop(f);
    std::fs::write(&rpq, wikidata_like_workload(triples, opts.predicates)).unwrap();
    let db = cpu_database(nt, dir.path());

    let edges: u64 = db.store().graphs().iter().map(|g| g.edges).sum();
    let copy = k2rpq_bench::oxigraph_runner::copy_store(db.store(), None).unwrap();
    assert_eq!(copy.triples, edges);
    assert_eq!(copy.store.len().unwrap() as u64, edges);
    assert_eq!(copy.terms, db.store().node_count() as u64);

    let workload = read_workload(&rpq).unwrap();
    assert_eq!(workload.len(), 52);
    for overlap_load in [false, true] {
        let options = BenchOptions {
            engines: vec![BenchEngine::Cpu, BenchEngine::Oxigraph],
            repeats: 1,
            warmup: 0,
            progress: false,
            overlap_load,
            ..BenchOptions::default()
        };
        let report = run_bench(&db, None, &workload, &options).unwrap();
        assert_eq!(report.triples, edges);
        assert!(report.oxigraph_load_s.is_some() && report.oxigraph_decode_s.is_some());
        assert!(
            report.disagreements.is_empty(),
            "{:?}",
            report.disagreements
        );
        // Every query completes on k2rpq at this size; where Oxigraph completes too, the
        // engines were compared (w28's bag of P530/P530 rows may pass Oxigraph's limit).
        let mut compared = 0;
        for q in &report.queries {
            assert_eq!(q.runs[0].status, RunStatus::Ok, "{}", q.id);
            if q.runs[1].status == RunStatus::Ok {
                assert_eq!(q.agree, Some(true), "{}", q.id);
                compared += 1;
            }
        }
        assert!(compared >= 30, "only {compared} queries compared");
        let non_empty = report
            .queries
            .iter()
            .filter(|q| q.runs[0].distinct > 0)
            .count();
        assert!(non_empty >= 28, "only {non_empty} queries with rows");
        // Every query class of the workload is summarised per engine.
        assert_eq!(report.classes.len(), 5);
        for class in k2rpq_bench::wikidata::WORKLOAD_CLASSES {
            let c = &report.classes[class]["k2rpq-cpu"];
            assert_eq!(c.completed, c.queries, "{class}");
            assert!(c.time_ms.p95 >= c.time_ms.median, "{class}");
        }
        let table = report.table();
        assert!(table.contains("Per class"), "{table}");
        assert!(table.contains("Per query class") && table.contains("Oxigraph in-memory load"));
    }
}
