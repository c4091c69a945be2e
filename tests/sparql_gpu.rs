//! The SPARQL layer on the GPU engine: both ways in (standalone and the Oxigraph
//! embedding) give the same multisets of solutions as on the CPU engine, on CoDEx-M.
//! Reported as ignored where no GPU is usable.

use k2rpq::database::{Database, DatabaseOptions, EngineChoice};
use k2rpq::engine::cpu::CpuEngine;
use k2rpq::engine::gpu::{FrontierLayout, GpuEngine, GpuOptions};
use k2rpq::oxigraph::K2Paths;
use k2rpq::sparql::{query, MemoryDataset};
use k2rpq::store::{load, Input, LoadOptions};
use oxigraph::io::RdfFormat;

#[path = "answers/mod.rs"]
mod answers;
use answers::{multiset, oxigraph_multiset};

const CODEX_M: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/fixtures/codex/codex-m.nt.gz");

const QUERIES: &[&str] = &[
    "SELECT ?y WHERE { <http://www.wikidata.org/entity/Q183> <http://www.wikidata.org/prop/direct/P530>+ ?y }",
    "SELECT ?y WHERE { <http://www.wikidata.org/entity/Q183> <http://www.wikidata.org/prop/direct/P530>/<http://www.wikidata.org/prop/direct/P530>* ?y }",
    "SELECT ?x ?y WHERE { ?x <http://www.wikidata.org/prop/direct/P737>+ ?y }",
    "SELECT ?x ?y WHERE { ?x (<http://www.wikidata.org/prop/direct/P40>|<http://www.wikidata.org/prop/direct/P26>)* ?y }",
    "SELECT ?x WHERE { ?x ^<http://www.wikidata.org/prop/direct/P17>/<http://www.wikidata.org/prop/direct/P17> <http://www.wikidata.org/entity/Q183> }",
    "SELECT ?y WHERE { <http://www.wikidata.org/entity/Q183> !(<http://www.wikidata.org/prop/direct/P530>|^<http://www.wikidata.org/prop/direct/P463>) ?y }",
    "SELECT (COUNT(*) AS ?n) WHERE { ?x <http://www.wikidata.org/prop/direct/P131>*/<http://www.wikidata.org/prop/direct/P17> ?c }",
];

fn standalone_gpu_matches_cpu() {
    let gpu = GpuEngine::new(0).expect("GPU");
    let data = MemoryDataset::load_file(CODEX_M.as_ref()).expect("CoDEx-M");
    for q in QUERIES {
        let on_cpu = multiset(query(&CpuEngine::new(), &data, q).expect("cpu"));
        let on_gpu = multiset(query(&gpu, &data, q).expect("gpu"));
        assert!(!on_cpu.is_empty(), "{q}: empty answer tests nothing");
        assert_eq!(on_cpu, on_gpu, "{q}");
    }
}

fn embedded_gpu_matches_cpu() {
    let store = oxigraph::store::Store::new().expect("store");
    let bytes = std::fs::read(CODEX_M).expect("CoDEx-M");
    store
        .load_from_reader(
            RdfFormat::NTriples,
            flate2::read::GzDecoder::new(bytes.as_slice()),
        )
        .expect("load");
    let gpu = K2Paths::new(GpuEngine::new(0).expect("GPU"));
    let cpu = K2Paths::cpu();
    for q in QUERIES {
        let a = oxigraph_multiset(cpu.evaluate(&store, q).expect("cpu"));
        let b = oxigraph_multiset(gpu.evaluate(&store, q).expect("gpu"));
        assert_eq!(a, b, "{q}");
    }
}

/// CoDEx-M loaded into a store in `dir`; returns its folder.
fn codex_store(dir: &std::path::Path) -> std::path::PathBuf {
    let store = dir.join("store");
    load(
        &[Input::Path(CODEX_M.into())],
        &store,
        &LoadOptions::default(),
    )
    .expect("load");
    store
}

/// A store opened as a [`Database`] on the GPU (paths served from the device cache, under
/// a budget small enough to evict) against the same store on the CPU engine; the cache's
/// statistics show the relations were uploaded and then reused.
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
    // The default layout, and both sorted copies (forward and backward paths each over
    // the copy sorted for them).
    for frontier in [FrontierLayout::default(), FrontierLayout::Both] {
        let gpu = open(EngineChoice::Gpu, Some("64MiB"), frontier);
        for round in 0..2 {
            for q in QUERIES {
                let (a, on_a) = cpu.query(q).expect("cpu");
                let (b, on_b) = gpu.query(q).expect("gpu");
                assert_eq!((on_a, on_b), ("cpu", "gpu"));
                let a = multiset(a);
                assert!(!a.is_empty(), "{q}: empty answer tests nothing");
                assert_eq!(a, multiset(b), "{frontier:?} round {round}: {q}");
            }
        }
        let stats = gpu.gpu_stats().expect("GPU stats");
        assert!(stats.misses > 0 && stats.hits > 0, "{stats}");
        assert!(stats.peak_bytes <= 64 << 20, "{stats}");
    }
}

/// `query --oxigraph --store`: Oxigraph over a copy of the store, the paths from a GPU
/// [`Database`] (its device cache) against the same from the CPU engine, for queries
/// outside the standalone subset too.
fn store_paths_gpu_match_cpu() {
    use k2rpq::oxigraph::{copy_store, StorePaths};
    use std::sync::Arc;
    let dir = tempfile::tempdir().expect("tempdir");
    let store = codex_store(dir.path());
    let open = |engine| {
        let options = DatabaseOptions {
            engine,
            ..DatabaseOptions::default()
        };
        Arc::new(Database::open(&store, &options).expect("open"))
    };
    let (cpu, gpu) = (open(EngineChoice::Cpu), open(EngineChoice::Gpu));
    let copy = copy_store(cpu.store(), None).expect("copy");
    let optional = "SELECT ?y ?z WHERE { <http://www.wikidata.org/entity/Q183> <http://www.wikidata.org/prop/direct/P530>+ ?y OPTIONAL { ?y <http://www.wikidata.org/prop/direct/P463> ?z } }";
    for q in QUERIES.iter().copied().chain([optional]) {
        let a = oxigraph_multiset(
            StorePaths::new(Arc::clone(&cpu))
                .evaluate(&copy.store, q)
                .expect("cpu"),
        );
        let b = oxigraph_multiset(
            StorePaths::new(Arc::clone(&gpu))
                .evaluate(&copy.store, q)
                .expect("gpu"),
        );
        assert!(!a.is_empty(), "{q}: empty answer tests nothing");
        assert_eq!(a, b, "{q}");
    }
    let stats = gpu.gpu_stats().expect("GPU stats");
    assert!(stats.misses > 0, "the GPU served the paths: {stats}");
}

#[path = "harness/mod.rs"]
mod harness;

fn main() {
    harness::run(&[
        harness::GpuTest {
            name: "standalone_gpu_matches_cpu",
            needs: harness::Needs::Gpu,
            run: standalone_gpu_matches_cpu,
        },
        harness::GpuTest {
            name: "embedded_gpu_matches_cpu",
            needs: harness::Needs::Gpu,
            run: embedded_gpu_matches_cpu,
        },
        harness::GpuTest {
            name: "database_gpu_matches_cpu",
            needs: harness::Needs::Gpu,
            run: database_gpu_matches_cpu,
        },
        harness::GpuTest {
            name: "store_paths_gpu_match_cpu",
            needs: harness::Needs::Gpu,
            run: store_paths_gpu_match_cpu,
        },
    ])
}
