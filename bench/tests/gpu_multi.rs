//! Several GPUs: `rpq::evaluate_split` over 1 and all GPUs against the CPU engine; a
//! `Database` on `--gpus 0` and `--gpus all` against the CPU database on the CoDEx-M
//! workload (sequentially and from concurrent threads, so placement spreads queries);
//! `bench --scaling`'s driver. GPU tests are skipped (reported ignored) without a GPU; the
//! `--gpus` error cases and the scaling driver on the CPU run everywhere.

use std::path::PathBuf;

use k2rpq::database::{Database, DatabaseError, DatabaseOptions, EngineChoice};
use k2rpq::engine::cpu::CpuEngine;
use k2rpq::engine::gpu::{device_count, GpuEngine, GpuOptions, GpuSelection};
use k2rpq::rpq::terms::{load_rdf, resolve_log_query};
use k2rpq::rpq::{execute, parse_log_line, plan, EvalOptions, TraversalPolicy};
use k2rpq::store::{load, Input, LoadOptions};
use k2rpq_bench::scaling::{run_scaling, ScalingOptions};
use k2rpq_bench::spmv::stripes::{run_stripes, StripeOptions};
use k2rpq_bench::workload::{read_workload, QueryKind};

#[path = "../../tests/data/mod.rs"]
mod data;
#[path = "../../tests/rpq_support/mod.rs"]
mod rpq_support;
use rpq_support::split;

const WDT: &str = "http://www.wikidata.org/prop/direct/";

fn codex() -> PathBuf {
    data::repo_file("fixtures/codex/codex-m.nt.gz")
}

fn workload() -> Vec<k2rpq_bench::workload::WorkloadQuery> {
    read_workload(&data::repo_file("sparql/codex-m.rpq")).unwrap()
}

/// CoDEx-M loaded into a store in a temporary folder.
fn codex_store() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    load(
        &[Input::Path(codex())],
        &dir.path().join("store"),
        &LoadOptions::default(),
    )
    .unwrap();
    dir
}

fn open(dir: &tempfile::TempDir, engine: EngineChoice, gpus: Option<GpuSelection>) -> Database {
    Database::open(
        &dir.path().join("store"),
        &DatabaseOptions {
            engine,
            gpu_budget: None,
            gpus,
            line_memory: None,
            ..DatabaseOptions::default()
        },
    )
    .unwrap()
}

fn split_on_gpus_equals_cpu() {
    let n = device_count().unwrap();
    let (graph, dict) = load_rdf(&codex()).unwrap();
    let gpus: Vec<GpuEngine> = (0..n).map(|k| GpuEngine::new(k).unwrap()).collect();
    let cpu = CpuEngine::new();
    let queries = [
        format!("?x (<{WDT}P361>)+ ?y"),
        format!("?x (<{WDT}P737>)+/<{WDT}P106> ?y"),
        format!("?x ^<{WDT}P131>/<{WDT}P131>? ?y"),
        format!("?x (<{WDT}P530>|<{WDT}P47>)* ?y"),
    ];
    let mut split_runs = 0;
    for text in &queries {
        let rq = resolve_log_query(&parse_log_line(text).unwrap(), &dict);
        for traversal in [TraversalPolicy::Auto, TraversalPolicy::Dense] {
            // No host walk in front of the GPUs: they run the plan's batches.
            let o = EvalOptions {
                traversal,
                batch_words: 1,
                host_walk: false,
                ..EvalOptions::default()
            };
            let p = plan(&graph, &rq.path, rq.subject, rq.object, &o);
            let want = execute(&cpu, &graph, &p, &o).unwrap();
            for k in [1, n] {
                let got = split(&gpus[..k], &graph, &p, &o).unwrap();
                assert_eq!(got.pairs, want.pairs, "{text} {traversal:?} on {k} GPUs");
                // The CPU reference may answer by a sparse walk (one "batch" per start
                // set); the GPUs run the plan's batches.
                assert_eq!(got.trace.batches, p.batches(), "{text}");
                eprintln!(
                    "{text} {traversal:?}: {} pairs, {} batches; cpu {:.1} ms, {} {:.1} ms",
                    want.count,
                    p.batches(),
                    want.trace.elapsed.as_secs_f64() * 1e3,
                    got.trace.engine,
                    got.trace.elapsed.as_secs_f64() * 1e3
                );
                split_runs += (p.batches() > 1) as u32;
            }
        }
    }
    assert!(split_runs >= 8, "only {split_runs} multi-batch runs");
}

fn database_on_gpus_equals_cpu() {
    let dir = codex_store();
    let cpu = open(&dir, EngineChoice::Cpu, None);
    let wl = workload();
    // Every query on the GPUs (none left to host walks), which the engine names check.
    let o = EvalOptions {
        batch_words: 1,
        host_walk: false,
        ..EvalOptions::default()
    };
    let want: Vec<_> = wl
        .iter()
        .filter_map(|w| match &w.kind {
            QueryKind::Path(q) => Some((w.id.clone(), q.clone())),
            QueryKind::Sparql(_) => None,
        })
        .map(|(id, q)| {
            let r = cpu.run_log_query(&q, &o).unwrap().result;
            (id, q, r.pairs)
        })
        .collect();
    assert!(want.len() >= 40);
    for gpus in [GpuSelection::List(vec![0]), GpuSelection::All] {
        let db = open(&dir, EngineChoice::Gpu, Some(gpus.clone()));
        assert_eq!(db.gpu_ordinals().len(), gpus.ordinals().unwrap().len());
        for (id, q, pairs) in &want {
            let a = db.run_log_query(q, &o).unwrap();
            assert_eq!(a.engine, "gpu");
            assert_eq!(&a.result.pairs, pairs, "{id} on --gpus {gpus}");
        }
        // Concurrent callers: placement spreads one-batch queries over the GPUs.
        std::thread::scope(|s| {
            for t in 0..4 {
                let (db, want, o, gpus) = (&db, &want, &o, &gpus);
                s.spawn(move || {
                    for (id, q, pairs) in want.iter().skip(t).step_by(4) {
                        let a = db.run_log_query(q, o).unwrap();
                        assert_eq!(&a.result.pairs, pairs, "{id} on --gpus {gpus} (thread {t})");
                    }
                });
            }
        });
        for (k, s) in db.gpu_device_stats() {
            eprintln!(
                "--gpus {gpus}: GPU {k}: {} loads, {} hits",
                s.misses, s.hits
            );
        }
    }
}

fn scaling_driver_on_gpus() {
    let dir = codex_store();
    let ordinals = GpuSelection::All.ordinals().unwrap();
    let options = ScalingOptions {
        warmup: 1,
        repeats: 1,
        eval: EvalOptions {
            batch_words: 2,
            count_only: true,
            host_walk: false,
            ..EvalOptions::default()
        },
    };
    let open = |ords: &[usize]| {
        Database::open(
            &dir.path().join("store"),
            &DatabaseOptions {
                engine: EngineChoice::Gpu,
                gpu_budget: None,
                gpus: Some(GpuSelection::List(ords.to_vec())),
                line_memory: None,
                ..DatabaseOptions::default()
            },
        )
    };
    let r = run_scaling(&open, &ordinals, &workload(), &options, true).unwrap();
    print!("{}", r.table());
    assert_eq!(r.rows.len(), ordinals.len());
    assert!(r.disagreements.is_empty(), "{:?}", r.disagreements);
    assert!(!r.var_var.is_empty());
}

fn row_stripes_on_gpus() {
    // A web-like matrix of 2M cells: stripes on 1..N GPUs, each merged product checked
    // against the CPU engine inside `run_stripes` (an error there fails the test).
    let edges: Vec<(u32, u32)> = (0..2_000_000u64)
        .map(|i| {
            let s = (i.wrapping_mul(0x9E37_79B9) % (1 << 18)) as u32;
            let o = if i % 3 == 0 {
                (i.wrapping_mul(0x85EB_CA6B) % (1 << 18)) as u32
            } else {
                (s + (i % 17) as u32) % (1 << 18)
            };
            (s, o)
        })
        .collect();
    let tree = std::sync::Arc::new(k2rpq::k2tree::K2Tree::from_edges(1 << 18, 1 << 18, edges));
    let ordinals = GpuSelection::All.ordinals().unwrap();
    let opts = StripeOptions {
        sources: 128,
        repeats: 3,
        warmup: 1,
        gpu_budget: None,
    };
    let r = run_stripes(&tree, &ordinals, &opts).unwrap();
    print!("{}", r.table());
    assert_eq!(r.rows.len(), ordinals.len());
    assert!(r
        .rows
        .iter()
        .all(|row| row.fits && row.right_ms.is_some() && row.left_ms.is_some()));
    // A budget below the whole tree: one GPU does not fit (and is not timed).
    let small = StripeOptions {
        gpu_budget: Some(r.rows[0].max_device_bytes - 1),
        ..opts
    };
    let r = run_stripes(&tree, &ordinals[..1], &small).unwrap();
    assert!(!r.rows[0].fits && r.rows[0].right_ms.is_none());
}

/// Runs everywhere: `bench --scaling`'s driver with CPU databases standing in for the
/// GPU counts (workers, queue, cross-check and table).
fn scaling_driver_on_cpu() {
    let dir = codex_store();
    let options = ScalingOptions {
        warmup: 0,
        repeats: 2,
        eval: EvalOptions::default(),
    };
    let open = |_: &[usize]| {
        Database::open(
            &dir.path().join("store"),
            &DatabaseOptions {
                engine: EngineChoice::Cpu,
                ..DatabaseOptions::default()
            },
        )
    };
    let r = run_scaling(&open, &[0, 1, 2], &workload(), &options, false).unwrap();
    assert_eq!(r.rows.len(), 3);
    assert_eq!(r.rows[0].speedup, 1.0);
    assert!(r.rows.iter().all(|row| row.queries_per_s > 0.0));
    assert!(r.disagreements.is_empty(), "{:?}", r.disagreements);
    assert_eq!(r.queries, 42);
    assert!(r.var_var.contains(&"q34".to_string()), "{:?}", r.var_var);
    let table = r.table();
    assert_eq!(table.lines().count(), 4, "{table}");
    assert!(run_scaling(&open, &[], &workload(), &options, false).is_err());
}

/// Runs everywhere: a `--gpus` list naming an absent device is an error (with `auto`
/// too); `all` with `auto` falls back to the CPU when there is no GPU; `--engine gpu`
/// without a GPU is an error.
fn gpus_errors_and_fallback() {
    let dir = codex_store();
    let found = device_count().unwrap_or(0);
    let store = dir.path().join("store");
    let opts = |engine, gpus| DatabaseOptions {
        engine,
        gpu_budget: None,
        gpus,
        line_memory: None,
        ..DatabaseOptions::default()
    };
    let absent = GpuSelection::List(vec![found]);
    for engine in [EngineChoice::Auto, EngineChoice::Gpu] {
        let e = match Database::open(&store, &opts(engine, Some(absent.clone()))) {
            Err(e) => e.to_string(),
            Ok(_) => panic!("--gpus {absent} opened with {found} devices"),
        };
        if found > 0 {
            assert!(e.contains(&format!("no CUDA device {found}")), "{e}");
        }
        eprintln!("--gpus {absent} with {engine:?}: {e}");
    }
    let all = Database::open(&store, &opts(EngineChoice::Auto, Some(GpuSelection::All))).unwrap();
    assert_eq!(all.has_gpu(), found > 0);
    assert_eq!(all.gpu_ordinals().len(), found);
    if found == 0 {
        // Without the driver's library `--engine gpu` fails at open; with it but no device,
        // at the first query that needs one.
        match Database::open(&store, &opts(EngineChoice::Gpu, None)) {
            Err(e) => assert!(matches!(e, DatabaseError::NoGpu(_)), "{e}"),
            Ok(db) => {
                let closure =
                    k2rpq::rpq::parse_log_line("?x <http://www.wikidata.org/prop/direct/P530>+ ?y")
                        .expect("path");
                let run = db.run_log_query(&closure, &Default::default());
                assert!(matches!(run, Err(DatabaseError::NoGpu(_))), "{run:?}");
            }
        }
        assert!(Database::open(&store, &opts(EngineChoice::Auto, None))
            .unwrap()
            .gpu_stats()
            .is_none());
    }
    let cpu = Database::open(&store, &opts(EngineChoice::Cpu, Some(absent.clone()))).unwrap();
    assert!(!cpu.has_gpu());
    // The same rules without a store, as `k2rpq rpq` and `k2rpq query --nt` take them.
    let engines = |engine: EngineChoice, gpus: Option<&GpuSelection>| {
        engine.gpu_engines(gpus, GpuOptions::default())
    };
    assert!(engines(EngineChoice::Cpu, Some(&absent))
        .unwrap()
        .is_empty());
    assert!(engines(EngineChoice::Auto, Some(&absent)).is_err());
    assert!(engines(EngineChoice::Gpu, Some(&absent)).is_err());
    assert_eq!(
        engines(EngineChoice::Auto, Some(&GpuSelection::All))
            .unwrap()
            .len(),
        found
    );
    if found == 0 {
        assert!(matches!(
            engines(EngineChoice::Gpu, None),
            Err(DatabaseError::NoGpu(_))
        ));
        assert!(engines(EngineChoice::Auto, None).unwrap().is_empty());
    }
}

#[path = "../../tests/harness/mod.rs"]
mod harness;

fn main() {
    use harness::{GpuTest, Needs};
    harness::run(&[
        GpuTest {
            name: "split_on_gpus_equals_cpu",
            needs: Needs::Gpu,
            run: split_on_gpus_equals_cpu,
        },
        GpuTest {
            name: "database_on_gpus_equals_cpu",
            needs: Needs::Gpu,
            run: database_on_gpus_equals_cpu,
        },
        GpuTest {
            name: "scaling_driver_on_gpus",
            needs: Needs::Gpu,
            run: scaling_driver_on_gpus,
        },
        GpuTest {
            name: "row_stripes_on_gpus",
            needs: Needs::Gpu,
            run: row_stripes_on_gpus,
        },
        GpuTest {
            name: "scaling_driver_on_cpu",
            needs: Needs::Nothing,
            run: scaling_driver_on_cpu,
        },
        GpuTest {
            name: "gpus_errors_and_fallback",
            needs: Needs::Nothing,
            run: gpus_errors_and_fallback,
        },
    ])
}
