//! The GPU engine against the CPU engine on whole path queries: identical pairs on the
//! CoDEx-M fixture for every endpoint case, traversal and batch width. Skipped (with a
//! notice) where no GPU is usable.

use k2rpq::engine::cpu::CpuEngine;
use k2rpq::engine::gpu::GpuEngine;
use k2rpq::rpq::terms::{load_rdf, resolve_log_query};
use k2rpq::rpq::{evaluate, parse_log_line, EvalOptions, TraversalPolicy};

const WDT: &str = "http://www.wikidata.org/prop/direct/";

fn gpu_and_cpu_give_identical_pairs() {
    let Some(gpu) = GpuEngine::new_or_notice(0) else {
        eprintln!("skipped: no usable GPU");
        return;
    };
    let file = concat!(env!("CARGO_MANIFEST_DIR"), "/fixtures/codex/codex-m.nt.gz");
    let (graph, dict) = load_rdf(std::path::Path::new(file)).unwrap();
    let q142 = "<http://www.wikidata.org/entity/Q142>";
    let queries = [
        format!("{q142} (<{WDT}P530>)+ ?y"),
        format!("?x (<{WDT}P530>|<{WDT}P47>)+ {q142}"),
        format!("?x <{WDT}P27>/(<{WDT}P530>)* {q142}"),
        format!("?x (<{WDT}P361>)+ ?y"),
        format!("?x (<{WDT}P737>)+/<{WDT}P106> ?y"),
        format!("?x ^<{WDT}P131>/<{WDT}P131>? ?y"),
        format!("{q142} !(<{WDT}P530>|^<{WDT}P27>) ?y"),
        format!("{q142} (<{WDT}P530>)* <http://www.wikidata.org/entity/Q183>"),
    ];
    let cpu = CpuEngine::new();
    let mut checked = 0;
    for text in &queries {
        let q = parse_log_line(text).unwrap();
        let rq = resolve_log_query(&q, &dict);
        for traversal in [
            TraversalPolicy::Auto,
            TraversalPolicy::Dense,
            TraversalPolicy::Masked,
        ] {
            for batch_words in [1, 8] {
                let opts = EvalOptions {
                    traversal,
                    batch_words,
                    ..EvalOptions::default()
                };
                let a = evaluate(&cpu, &graph, &rq.path, rq.subject, rq.object, &opts).unwrap();
                let b = evaluate(&gpu, &graph, &rq.path, rq.subject, rq.object, &opts).unwrap();
                assert_eq!(a.pairs, b.pairs, "{text} {traversal:?} W={batch_words}");
                eprintln!(
                    "{text} {traversal:?} W={batch_words}: {} pairs, cpu {:.2} ms, gpu {:.2} ms",
                    a.pairs.len(),
                    a.trace.elapsed.as_secs_f64() * 1e3,
                    b.trace.elapsed.as_secs_f64() * 1e3
                );
                checked += 1;
            }
        }
    }
    assert_eq!(checked, queries.len() * 6);
}

#[path = "harness/mod.rs"]
mod harness;

fn main() {
    harness::run(&[harness::GpuTest {
        name: "gpu_and_cpu_give_identical_pairs",
        needs: harness::Needs::Gpu,
        run: gpu_and_cpu_give_identical_pairs,
    }])
}
