//! A regular path query over a graph built in memory, on the GPU when one is usable and on
//! the CPU otherwise: the same plan runs on either engine through the `Engine` trait.
//!
//! Run: `cargo run --example memory_rpq`

use k2rpq::engine::cpu::CpuEngine;
use k2rpq::engine::gpu::GpuEngine;
use k2rpq::engine::Engine;
use k2rpq::rpq::{evaluate, Endpoint, EvalOptions, MemoryGraph, Path, RpqError};

/// Predicate ids: any `u32` that is not a node id of the graph.
const KNOWS: u32 = 100;
const WORKS_WITH: u32 = 101;

fn main() -> Result<(), RpqError> {
    // Six people, ids 0..6; `(subject, predicate, object)` triples of ids.
    let graph = MemoryGraph::from_triples(vec![
        (0, KNOWS, 1),
        (1, KNOWS, 2),
        (2, KNOWS, 0),
        (2, WORKS_WITH, 3),
        (3, KNOWS, 4),
        (5, WORKS_WITH, 4),
    ]);
    match GpuEngine::new(0) {
        Ok(gpu) => run(&gpu, &graph),
        Err(why) => {
            println!("({why}; on the CPU)");
            run(&CpuEngine::new(), &graph)
        }
    }
}

fn run<E: Engine>(engine: &E, graph: &MemoryGraph) -> Result<(), RpqError> {
    let options = EvalOptions::default();
    // Whom does 0 reach through one or more `knows`?  (0 knows+ ?y)
    let knows_plus = Path::OneOrMore(Path::link(KNOWS));
    let r = evaluate(
        engine,
        graph,
        &knows_plus,
        Endpoint::Const(0),
        Endpoint::Var,
        &options,
    )?;
    println!("0 knows+ ?y on the {} engine: {:?}", engine.name(), r.pairs);
    // Every pair linked by `knows*` then `works_with` (a var→var query, batched 64·W
    // start nodes at a time): ?x knows*/works_with ?y.
    let path = Path::Sequence(
        Box::new(Path::ZeroOrMore(Path::link(KNOWS))),
        Path::link(WORKS_WITH),
    );
    let r = evaluate(engine, graph, &path, Endpoint::Var, Endpoint::Var, &options)?;
    println!("?x knows*/works_with ?y: {} pairs {:?}", r.count, r.pairs);
    // Towards a constant: 4 works with ?x, or ?x knows 4 (?x (^works_with|knows) 4).
    let path = Path::Alternative(
        Box::new(Path::Inverse(Path::link(WORKS_WITH))),
        Path::link(KNOWS),
    );
    let r = evaluate(
        engine,
        graph,
        &path,
        Endpoint::Var,
        Endpoint::Const(4),
        &options,
    )?;
    println!("?x (^works_with|knows) 4: {:?}", r.pairs);
    Ok(())
}
