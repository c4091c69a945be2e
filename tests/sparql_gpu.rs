//! SPARQL with the paths on the GPU engine: both ways in (a store's `Database::query`,
//! with relations from the device cache, and the Oxigraph embedding) give the same
//! multisets of solutions as on the CPU engine, on CoDEx-M. Reported as ignored where no
//! GPU is usable.

use k2rpq::database::{Database, DatabaseOptions, EngineChoice};
use k2rpq::engine::gpu::{FrontierLayout, GpuEngine, GpuOptions};
use k2rpq::oxigraph::K2Paths;
use k2rpq::store::{load, Input, LoadOptions};
use oxigraph::io::RdfFormat;

#[path = "answers/mod.rs"]
mod answers;
use answers::multiset;

#[path = "data/mod.rs"]
mod data;

/// CoDEx-M, found where the test binary runs too (a GPU machine's copy of the repository).
fn codex_m() -> std::path::PathBuf {
    data::repo_file("fixtures/codex/codex-m.nt.gz")
}

const QUERIES: &[&str] = &[
    "SELECT ?y WHERE { <http://www.wikidata.org/entity/Q183> <http://www.wikidata.org/prop/direct/P530>+ ?y }",
    "SELECT ?y WHERE { <http://www.wikidata.org/entity/Q183> <http://www.wikidata.org/prop/direct/P530>/<http://www.wikidata.org/prop/direct/P530>* ?y }",
    "SELECT ?x ?y WHERE { ?x <http://www.wikidata.org/prop/direct/P737>+ ?y }",
    "SELECT ?x ?y WHERE { ?x (<http://www.wikidata.org/prop/direct/P40>|<http://www.wikidata.org/prop/direct/P26>)* ?y }",
    "SELECT ?x WHERE { ?x ^<http://www.wikidata.org/prop/direct/P17>/<http://www.wikidata.org/prop/direct/P17> <http://www.wikidata.org/entity/Q183> }",
    "SELECT ?y WHERE { <http://www.wikidata.org/entity/Q183> !(<http://www.wikidata.org/prop/direct/P530>|^<http://www.wikidata.org/prop/direct/P463>) ?y }",
    "SELECT (COUNT(*) AS ?n) WHERE { ?x <http://www.wikidata.org/prop/direct/P131>*/<http://www.wikidata.org/prop/direct/P17> ?c }",
    // Counted from the frontiers' popcounts: all start nodes, and a few constant ones.
    "SELECT (COUNT(*) AS ?n) WHERE { ?x <http://www.wikidata.org/prop/direct/P737>+ ?y }",
    "SELECT (COUNT(*) AS ?n) (COUNT(DISTINCT *) AS ?d) WHERE { VALUES ?x { <http://www.wikidata.org/entity/Q183> <http://www.wikidata.org/entity/Q142> <http://www.wikidata.org/entity/Q30> } ?x <http://www.wikidata.org/prop/direct/P530>+ ?y }",
    // A closure from every binding of a triple at once (one batched run).
    "SELECT ?x ?y WHERE { ?x <http://www.wikidata.org/prop/direct/P27> <http://www.wikidata.org/entity/Q183> . ?x <http://www.wikidata.org/prop/direct/P19>/<http://www.wikidata.org/prop/direct/P131>* ?y }",
];

/// Queries over 300 VALUES sources (more than one 256-source batch): rows and counts of
/// a closure from all of them in one batched run.
fn many_sources_queries(cpu: &Database) -> Vec<String> {
    let q = "SELECT DISTINCT ?x WHERE { ?x <http://www.wikidata.org/prop/direct/P27> ?c } ORDER BY ?x LIMIT 300";
    let rows = answers::rows(cpu.query(q).expect("cpu")).1;
    let values: Vec<String> = rows.iter().map(|r| r[0].clone()).collect();
    assert_eq!(values.len(), 300, "CoDEx-M has 300 citizens");
    let values = values.join(" ");
    let p = "<http://www.wikidata.org/prop/direct/P27>/<http://www.wikidata.org/prop/direct/P530>*";
    vec![
        format!("SELECT ?x ?y WHERE {{ VALUES ?x {{ {values} }} ?x {p} ?y }}"),
        format!("SELECT (COUNT(*) AS ?n) WHERE {{ VALUES ?x {{ {values} }} ?x <http://www.wikidata.org/prop/direct/P27>/<http://www.wikidata.org/prop/direct/P530>+ ?y }}"),
        format!("SELECT (COUNT(*) AS ?n) WHERE {{ VALUES ?y {{ {values} }} ?x <http://www.wikidata.org/prop/direct/P40>* ?y }}"),
    ]
}

fn embedded_gpu_matches_cpu() {
    let store = oxigraph::store::Store::new().expect("store");
    let bytes = std::fs::read(codex_m()).expect("CoDEx-M");
    store
        .load_from_reader(
            RdfFormat::NTriples,
            flate2::read::GzDecoder::new(bytes.as_slice()),
        )
        .expect("load");
    let gpu = K2Paths::new(GpuEngine::new(0).expect("GPU"));
    let cpu = K2Paths::cpu();
    for q in QUERIES {
        let a = multiset(cpu.evaluate(&store, q).expect("cpu"));
        let b = multiset(gpu.evaluate(&store, q).expect("gpu"));
        assert_eq!(a, b, "{q}");
    }
}

/// CoDEx-M loaded into a store in `dir`; returns its folder.
fn codex_store(dir: &std::path::Path) -> std::path::PathBuf {
    let store = dir.join("store");
    load(&[Input::Path(codex_m())], &store, &LoadOptions::default()).expect("load");
    store
}

/// A store opened as a [`Database`] on the GPU (paths served from the device cache, under
/// a budget small enough to evict) against the same store on the CPU engine, for queries
/// around the paths too (OPTIONAL); the cache's statistics show the relations were
/// uploaded and then reused.
fn database_gpu_matches_cpu() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = codex_store(dir.path());
    let open = |engine, budget: Option<&str>, frontier| {
        Database::open(
            &store,
            &DatabaseOptions {
                engine,
                gpu_budget: budget.map(|b| b.parse().unwrap()),
                gpus: None,
                line_memory: None,
                gpu_options: GpuOptions {
                    frontier,
                    ..GpuOptions::default()
                },
            },
        )
        .expect("open")
    };
    let cpu = open(EngineChoice::Cpu, None, FrontierLayout::default());
    let optional = "SELECT ?y ?z WHERE { <http://www.wikidata.org/entity/Q183> <http://www.wikidata.org/prop/direct/P530>+ ?y OPTIONAL { ?y <http://www.wikidata.org/prop/direct/P463> ?z } }";
    // The default layout, and both sorted copies (forward and backward paths each over
    // the copy sorted for them).
    for frontier in [FrontierLayout::default(), FrontierLayout::Both] {
        let gpu = open(EngineChoice::Gpu, Some("64MiB"), frontier);
        let many = many_sources_queries(&cpu);
        for round in 0..2 {
            let queries = QUERIES.iter().copied().chain([optional]);
            for q in queries.chain(many.iter().map(|q| q.as_str())) {
                let a = multiset(cpu.query(q).expect("cpu"));
                let b = multiset(gpu.query(q).expect("gpu"));
                assert!(!a.is_empty(), "{q}: empty answer tests nothing");
                assert_eq!(a, b, "{frontier:?} round {round}: {q}");
            }
        }
        let (on_cpu, on_gpu) = gpu.path_service_runs();
        assert!(
            on_gpu > 0 && on_cpu == 0,
            "{on_cpu} groups on the CPU, {on_gpu} on the GPU"
        );
        let stats = gpu.gpu_stats().expect("GPU stats");
        assert!(stats.misses > 0 && stats.hits > 0, "{stats}");
        assert!(stats.peak_bytes <= 64 << 20, "{stats}");
    }
    assert_eq!(cpu.path_service_runs().1, 0);
}

/// The device is set up only once a query needs it: a constant start whose walk reaches a
/// few nodes is answered (through SPARQL and as a path query) without it, and a var→var
/// closure sets it up; every answer is the CPU engine's.
fn device_set_up_on_first_need() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = codex_store(dir.path());
    let open = |engine| {
        Database::open(
            &store,
            &DatabaseOptions {
                engine,
                ..DatabaseOptions::default()
            },
        )
        .expect("open")
    };
    let (cpu, gpu) = (open(EngineChoice::Cpu), open(EngineChoice::Gpu));
    // Constant starts and ends the host walks answer (a sequence such as `p/p*` is
    // evaluated link by link, its later links from bound candidates: on the device).
    let walked = [
        QUERIES[0],
        "SELECT ?x WHERE { ?x <http://www.wikidata.org/prop/direct/P530>+ <http://www.wikidata.org/entity/Q183> }",
        "SELECT (COUNT(*) AS ?n) WHERE { <http://www.wikidata.org/entity/Q183> <http://www.wikidata.org/prop/direct/P530>+ ?y }",
        "SELECT ?y ?z WHERE { <http://www.wikidata.org/entity/Q183> <http://www.wikidata.org/prop/direct/P530>+ ?y OPTIONAL { ?y <http://www.wikidata.org/prop/direct/P463> ?z } }",
    ];
    for q in walked {
        let a = multiset(cpu.query(q).expect("cpu"));
        assert!(!a.is_empty(), "{q}: empty answer tests nothing");
        assert_eq!(a, multiset(gpu.query(q).expect("gpu")), "{q}");
    }
    let path = k2rpq::rpq::parse_log_line(
        "<http://www.wikidata.org/entity/Q183> <http://www.wikidata.org/prop/direct/P530>+ ?y",
    )
    .expect("path");
    let options = k2rpq::rpq::EvalOptions::default();
    let a = cpu.run_log_query(&path, &options).expect("cpu");
    let b = gpu.run_log_query(&path, &options).expect("gpu");
    assert!(a.result.count > 0);
    assert_eq!(a.result.pairs, b.result.pairs);
    assert!(
        gpu.gpu_stats().is_none(),
        "walked queries set the device up"
    );
    let closure = QUERIES[2];
    assert_eq!(
        multiset(cpu.query(closure).expect("cpu")),
        multiset(gpu.query(closure).expect("gpu")),
        "{closure}"
    );
    assert!(
        gpu.gpu_stats().is_some(),
        "a closure ran without the device"
    );
    assert_eq!(gpu.path_service_runs().0, 0);
}

#[path = "harness/mod.rs"]
mod harness;

fn main() {
    harness::run(&[
        harness::GpuTest {
            name: "embedded_gpu_matches_cpu",
            needs: harness::Needs::Gpu,
            run: embedded_gpu_matches_cpu,
        },
        harness::GpuTest {
            name: "device_set_up_on_first_need",
            needs: harness::Needs::Gpu,
            run: device_set_up_on_first_need,
        },
        harness::GpuTest {
            name: "database_gpu_matches_cpu",
            needs: harness::Needs::Gpu,
            run: database_gpu_matches_cpu,
        },
    ])
}
