//! Differential tests: our RPQ evaluation against Oxigraph's on the same triples, as
//! distinct pairs, on random graphs with random paths and on CoDEx-S and WN18RR.
//! The one documented difference (Oxigraph drops constants absent from the graph from
//! zero-length matches; SPARQL 1.1 keeps them) is allowed for in `Fixture::check`.

mod rpq_support;

#[path = "data/mod.rs"]
mod data;

use data::data_file;
use k2rpq::rpq::{EvalOptions, TraversalPolicy};
use oxigraph::model::NamedNode;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use rpq_support::Fixture;
use spargebra::algebra::PropertyPathExpression as Expr;

fn pred(i: usize) -> String {
    format!("http://ex/p{i}")
}
fn node(i: usize) -> String {
    format!("http://ex/n{i}")
}
/// Known to the dictionary, absent from the graph.
const ABSENT_NODE: &str = "http://ex/absent-node";
/// Unknown to the dictionary altogether (an IRI the store has never seen).
const UNKNOWN_PRED: &str = "http://ex/unknown-pred";

fn random_pred(rng: &mut StdRng, preds: usize) -> NamedNode {
    if rng.random_ratio(1, 12) {
        NamedNode::new(UNKNOWN_PRED).unwrap()
    } else {
        NamedNode::new(pred(rng.random_range(0..preds))).unwrap()
    }
}

fn random_path(rng: &mut StdRng, preds: usize, depth: u32) -> Expr {
    let leaf = depth == 0 || rng.random_ratio(1, 3);
    if leaf {
        return match rng.random_range(0..6) {
            0 => {
                // Negated set: forward items, inverse items or both.
                let k = rng.random_range(1..=3);
                let items: Vec<(NamedNode, bool)> = (0..k)
                    .map(|_| (random_pred(rng, preds), rng.random_bool(0.4)))
                    .collect();
                let f: Vec<NamedNode> =
                    items.iter().filter(|i| !i.1).map(|i| i.0.clone()).collect();
                let i: Vec<NamedNode> = items.iter().filter(|i| i.1).map(|i| i.0.clone()).collect();
                let fe = Expr::NegatedPropertySet(f.clone());
                let ie = Expr::Reverse(Box::new(Expr::NegatedPropertySet(i.clone())));
                match (f.is_empty(), i.is_empty()) {
                    (false, true) => fe,
                    (true, false) => ie,
                    _ => Expr::Alternative(Box::new(fe), Box::new(ie)),
                }
            }
            _ => Expr::NamedNode(random_pred(rng, preds)),
        };
    }
    let op = rng.random_range(0..7);
    let mut sub = || Box::new(random_path(rng, preds, depth - 1));
    match op {
        0 => Expr::Reverse(sub()),
        1 => Expr::Sequence(sub(), sub()),
        2 => Expr::Alternative(sub(), sub()),
        3 => Expr::ZeroOrMore(sub()),
        4 => Expr::OneOrMore(sub()),
        5 => Expr::ZeroOrOne(sub()),
        _ => Expr::Sequence(sub(), Box::new(Expr::OneOrMore(sub()))),
    }
}

fn random_fixture(rng: &mut StdRng) -> (Fixture, usize, usize) {
    let nodes = rng.random_range(1..14);
    let preds = rng.random_range(1..4);
    let edges = rng.random_range(0..nodes * 3);
    let triples: Vec<(String, String, String)> = (0..edges)
        .map(|_| {
            (
                node(rng.random_range(0..nodes)),
                pred(rng.random_range(0..preds)),
                node(rng.random_range(0..nodes)),
            )
        })
        .collect();
    let mut extra: Vec<String> = (0..nodes).map(node).collect();
    extra.extend((0..preds).map(pred));
    extra.push(ABSENT_NODE.to_string());
    (Fixture::from_iris(&triples, &extra), nodes, preds)
}

fn random_options(rng: &mut StdRng) -> EvalOptions {
    EvalOptions {
        batch_words: rng.random_range(1..3),
        traversal: match rng.random_range(0..3) {
            0 => TraversalPolicy::Auto,
            1 => TraversalPolicy::Dense,
            _ => TraversalPolicy::Masked,
        },
        ..EvalOptions::default()
    }
}

#[test]
fn random_graphs_and_paths_match_oxigraph() {
    let mut rng = StdRng::seed_from_u64(0x6b32_7270);
    for _ in 0..250 {
        let (fx, nodes, preds) = random_fixture(&mut rng);
        let path = random_path(&mut rng, preds, 3);
        let opts = random_options(&mut rng);
        let constant = |rng: &mut StdRng| {
            if rng.random_ratio(1, 6) {
                ABSENT_NODE.to_string()
            } else {
                node(rng.random_range(0..nodes))
            }
        };
        let (a, b) = (constant(&mut rng), constant(&mut rng));
        fx.check(&path, None, None, &opts);
        fx.check(&path, Some(&a), None, &opts);
        fx.check(&path, None, Some(&b), &opts);
        fx.check(&path, Some(&a), Some(&b), &opts);
        fx.check(&path, Some(&a), Some(&a), &opts);
    }
}

/// A path in SPARQL syntax, through the log-line parser (spargebra's SPARQL parser splits
/// sequences and inverses into triple patterns).
fn parse(text: &str) -> Expr {
    k2rpq::rpq::parse_log_line(&format!("?s {text} ?o"))
        .unwrap()
        .path
}

/// Checks each path from each constant, between the two constants and, where marked
/// cheap, between two variables (`.1`: a dense closure such as `P530+` takes Oxigraph
/// minutes over all pairs, and a debug build of ours is slow on large ones) and to each
/// constant (`.2`: Oxigraph evaluates `?x P27/P530* <c>` from the variable end, ~12 s).
fn check_dataset(fx: &Fixture, paths: &[(&str, bool, bool)], constants: &[&str]) {
    let opts = EvalOptions::default();
    for &(text, var_var, to_const) in paths {
        let path = parse(text);
        if var_var {
            fx.check(&path, None, None, &opts);
        }
        for c in constants {
            fx.check(&path, Some(c), None, &opts);
            if to_const {
                fx.check(&path, None, Some(c), &opts);
            }
        }
        fx.check(&path, Some(constants[0]), Some(constants[1]), &opts);
    }
}

#[test]
fn codex_s_realistic_paths_match_oxigraph() {
    let Some(file) = data_file("codex/codex-s.nt.gz") else {
        return;
    };
    let fx = Fixture::from_file(&file);
    let paths = [
        ("(<http://www.wikidata.org/prop/direct/P361>)+", true, true),
        ("^<http://www.wikidata.org/prop/direct/P361>", true, true),
        ("(<http://www.wikidata.org/prop/direct/P530>|<http://www.wikidata.org/prop/direct/P47>)+", false, true),
        ("<http://www.wikidata.org/prop/direct/P27>/(<http://www.wikidata.org/prop/direct/P530>)*", false, false),
        ("(<http://www.wikidata.org/prop/direct/P737>)+/<http://www.wikidata.org/prop/direct/P106>", true, true),
        ("<http://www.wikidata.org/prop/direct/P463>/(<http://www.wikidata.org/prop/direct/P361>)*", true, true),
        ("!(<http://www.wikidata.org/prop/direct/P106>|^<http://www.wikidata.org/prop/direct/P530>)", false, true),
        ("(<http://www.wikidata.org/prop/direct/P19>/<http://www.wikidata.org/prop/direct/P17>)?", false, true),
    ];
    // Q142 France, Q38 Italy (both occur in the graph: P530 neighbours, P27 targets).
    let constants = [
        "http://www.wikidata.org/entity/Q142",
        "http://www.wikidata.org/entity/Q38",
    ];
    check_dataset(&fx, &paths, &constants);
}

#[test]
fn wn18rr_realistic_paths_match_oxigraph() {
    let Some(file) = data_file("wn18rr/wn18rr.nt.gz") else {
        return;
    };
    let fx = Fixture::from_file(&file);
    let paths = [
        ("(<http://example.org/wn18rr/rel/hypernym>)*", false, true),
        ("<http://example.org/wn18rr/rel/instance_hypernym>/(<http://example.org/wn18rr/rel/hypernym>)+", true, true),
        ("(<http://example.org/wn18rr/rel/member_meronym>|<http://example.org/wn18rr/rel/has_part>)+", false, true),
        ("^<http://example.org/wn18rr/rel/hypernym>/<http://example.org/wn18rr/rel/also_see>", true, true),
    ];
    // 00001740 "entity" (the hypernym root) and a synset below it.
    let constants = [
        "http://example.org/wn18rr/synset/00001740",
        "http://example.org/wn18rr/synset/00260622",
    ];
    check_dataset(&fx, &paths, &constants);
}

#[test]
fn codex_m_fixture_paths_match_oxigraph() {
    let file = std::path::Path::new(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/fixtures/codex/codex-m.nt.gz"
    ));
    let fx = Fixture::from_file(file);
    let paths = [
        ("(<http://www.wikidata.org/prop/direct/P530>)+", false, true),
        ("^<http://www.wikidata.org/prop/direct/P361>", true, true),
        ("(<http://www.wikidata.org/prop/direct/P131>)+", true, true),
        ("(<http://www.wikidata.org/prop/direct/P737>)+/<http://www.wikidata.org/prop/direct/P106>", false, true),
        ("!(<http://www.wikidata.org/prop/direct/P27>|^<http://www.wikidata.org/prop/direct/P530>)", false, true),
    ];
    let constants = [
        "http://www.wikidata.org/entity/Q142",
        "http://www.wikidata.org/entity/Q183",
    ];
    check_dataset(&fx, &paths, &constants);
}
