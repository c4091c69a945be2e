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
                assert_eq!(
                    gpu.kept_bytes(),
                    0,
                    "the evaluation's run freed what it kept"
                );
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

/// Products inside one run ([`Engine::begin_products`]) reuse the kept scratch across
/// relations of different sizes, traversals and directions: every product still equals
/// the CPU engine's, the kept bytes never exceed the largest single product's scratch
/// (plus the advance counters), and ending the run frees them.
fn kept_scratch_is_reused_and_bounded() {
    use k2rpq::engine::{BitMatrix, Direction, Engine, MatrixConfig, Traversal};
    use k2rpq::k2tree::K2Tree;
    use rand::rngs::StdRng;
    use rand::{Rng, SeedableRng};
    use std::sync::Arc;
    let Some(gpu) = GpuEngine::new_or_notice(0) else {
        eprintln!("skipped: no usable GPU");
        return;
    };
    let cpu = CpuEngine::new();
    let mut rng = StdRng::seed_from_u64(7);
    let n = 1u32 << 14;
    let trees: Vec<Arc<K2Tree>> = [200usize, 20_000, 3_000]
        .iter()
        .map(|&cells| {
            let edges = (0..cells)
                .map(|_| (rng.random_range(0..n), rng.random_range(0..n)))
                .collect();
            Arc::new(K2Tree::from_edges(n as u64, n as u64, edges))
        })
        .collect();
    gpu.begin_products();
    let mut largest = 0u64;
    for i in 0..24 {
        let t = &trees[i % trees.len()];
        let m = gpu.load(t, MatrixConfig::CachedFrontier).unwrap();
        let dir = if i % 2 == 0 {
            Direction::Left
        } else {
            Direction::Right
        };
        let traversal = if i % 3 == 0 {
            Traversal::Dense
        } else {
            Traversal::Masked
        };
        largest = largest.max(
            gpu.product_bytes(&m, dir, 1, 8, Some((1, traversal)))
                .scratch,
        );
        let mut x = BitMatrix::zeroed(n as usize, 1);
        for s in 0..64 {
            x.set(rng.random_range(0..n as usize), s);
        }
        let xd = gpu.bits_upload(&x).unwrap();
        let mut yd = gpu.bits_zeroed(n as usize, 1).unwrap();
        gpu.bool_product(&m, dir, &xd, &mut yd, traversal).unwrap();
        let mut visited = gpu.bits_zeroed(n as usize, 1).unwrap();
        let counted = gpu
            .bits_advance_all(&mut [(&mut yd, &mut visited)])
            .unwrap();
        let got = gpu.bits_download(&visited).unwrap();
        let host = cpu.load(t, MatrixConfig::TreeOnly).unwrap();
        let mut want = BitMatrix::zeroed(n as usize, 1);
        cpu.bool_product(&host, dir, &x, &mut want, traversal)
            .unwrap();
        assert_eq!(got, want, "product {i}");
        let ones: u64 = want.as_words().iter().map(|w| w.count_ones() as u64).sum();
        assert_eq!(counted, vec![ones], "product {i}");
        assert!(gpu.kept_bytes() > 0, "a run keeps the scratch");
        assert!(
            gpu.kept_bytes() <= largest + 8 * 8,
            "kept {} bytes, largest product scratch {largest}",
            gpu.kept_bytes()
        );
    }
    gpu.end_products();
    assert_eq!(gpu.kept_bytes(), 0);
}

#[path = "harness/mod.rs"]
mod harness;

fn main() {
    harness::run(&[
        harness::GpuTest {
            name: "gpu_and_cpu_give_identical_pairs",
            needs: harness::Needs::Gpu,
            run: gpu_and_cpu_give_identical_pairs,
        },
        harness::GpuTest {
            name: "kept_scratch_is_reused_and_bounded",
            needs: harness::Needs::Gpu,
            run: kept_scratch_is_reused_and_bounded,
        },
    ])
}
