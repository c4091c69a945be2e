//! Unit tests of the RPQ layer: parsing (log lines, spargebra paths), the automaton
//! (accepts exactly the right words), every endpoint case, limits, the plan display and
//! the route between host walks and the device.

use std::time::Duration;

mod rpq_support;
use rpq_support::random_path;

#[path = "data/mod.rs"]
mod data;

use k2rpq::engine::cpu::CpuEngine;
use k2rpq::rpq::{
    evaluate, parse_log_line, parse_path_expr, plan, Automaton, Dir, Endpoint, EvalDirection,
    EvalOptions, LogEndpoint, MemoryGraph, Path, PredId, RpqError, UNKNOWN_PREDICATE,
};
use rand::rngs::StdRng;
use rand::SeedableRng;
use spargebra::algebra::PropertyPathExpression as Expr;
use spargebra::term::NamedNode;

fn nn(s: &str) -> NamedNode {
    NamedNode::new(format!("http://e/{s}")).unwrap()
}
fn link(s: &str) -> Box<Expr> {
    Box::new(Expr::NamedNode(nn(s)))
}
fn resolve(iri: &str) -> Option<PredId> {
    iri.strip_prefix("http://e/p").and_then(|d| d.parse().ok())
}

// ---------- parsing ----------

#[test]
fn log_line_with_id_vars_and_iris() {
    let q = parse_log_line("q17, ?x <http://e/p1>/(<http://e/p2>)* <http://e/c>").unwrap();
    assert_eq!(q.id.as_deref(), Some("q17"));
    assert_eq!(q.subject, LogEndpoint::Var("x".into()));
    assert_eq!(q.object, LogEndpoint::Iri("http://e/c".into()));
    assert_eq!(
        q.path,
        Expr::Sequence(link("p1"), Box::new(Expr::ZeroOrMore(link("p2"))))
    );
    let q = parse_log_line("<http://e/a> <http://e/p1>? ?y").unwrap();
    assert_eq!(q.id, None);
    assert_eq!(q.subject, LogEndpoint::Iri("http://e/a".into()));
    assert_eq!(q.path, Expr::ZeroOrOne(link("p1")));
}

#[test]
fn log_line_precedence_follows_sparql() {
    // `|` binds loosest, then `/`, then `^`, then postfix operators.
    let q = parse_log_line("?x <http://e/a>/<http://e/b>|^<http://e/c>+ ?y").unwrap();
    assert_eq!(
        q.path,
        Expr::Alternative(
            Box::new(Expr::Sequence(link("a"), link("b"))),
            Box::new(Expr::Reverse(Box::new(Expr::OneOrMore(link("c")))))
        )
    );
    let q = parse_log_line("?x (<http://e/a>|<http://e/b>)/<http://e/c> ?y").unwrap();
    assert_eq!(
        q.path,
        Expr::Sequence(Box::new(Expr::Alternative(link("a"), link("b"))), link("c"))
    );
}

#[test]
fn log_line_negated_sets_match_spargebra_shapes() {
    let q = parse_log_line("?x !(<http://e/a>|^<http://e/b>) ?y").unwrap();
    assert_eq!(
        q.path,
        Expr::Alternative(
            Box::new(Expr::NegatedPropertySet(vec![nn("a")])),
            Box::new(Expr::Reverse(Box::new(Expr::NegatedPropertySet(vec![nn(
                "b"
            )]))))
        )
    );
    let q = parse_log_line("?x !^<http://e/b> ?y").unwrap();
    assert_eq!(
        q.path,
        Expr::Reverse(Box::new(Expr::NegatedPropertySet(vec![nn("b")])))
    );
    let q = parse_log_line("?x a/!<http://e/a> ?y").unwrap();
    let Expr::Sequence(first, _) = q.path else {
        panic!()
    };
    assert_eq!(
        *first,
        Expr::NamedNode(NamedNode::new("http://www.w3.org/1999/02/22-rdf-syntax-ns#type").unwrap())
    );
}

#[test]
fn log_line_errors_name_the_position() {
    for (line, pos) in [
        ("?x <http://e/a>", None),
        ("?x (<http://e/a> ?y", Some(17)),
        ("?x <http://e/a>/ ?y", None),
        ("?x <http://e/a> <http://e/b> ?y", Some(16)),
        ("x <http://e/a> ?y", None),
        ("?x <not an iri ?y", None),
    ] {
        match parse_log_line(line) {
            Err(RpqError::Parse {
                input, position, ..
            }) => {
                assert_eq!(input, line);
                if let Some(p) = pos {
                    assert_eq!(position, p, "{line}");
                }
            }
            other => panic!("{line}: expected a parse error, got {other:?}"),
        }
    }
}

#[test]
fn log_lines_take_prefixed_names() {
    use k2rpq::rpq::{parse_log_line_with, LogEndpoint, Prefixes};
    let mut prefixes = Prefixes::default();
    prefixes.insert("e", "http://e/").unwrap();
    prefixes.insert("", "http://default/").unwrap();
    let q = parse_log_line_with("e:a (e:p|^:q)*/!(e:r|^e:s) :c", &prefixes).unwrap();
    assert_eq!(q.subject, LogEndpoint::Iri("http://e/a".into()));
    assert_eq!(q.object, LogEndpoint::Iri("http://default/c".into()));
    let full = parse_log_line(
        "<http://e/a> (<http://e/p>|^<http://default/q>)*/!(<http://e/r>|^<http://e/s>) <http://default/c>",
    )
    .unwrap();
    assert_eq!(q.path, full.path);
    // Turtle's form of a declaration, then an id prefix before a prefixed subject.
    assert!(prefixes
        .declare("@prefix wd: <http://www.wikidata.org/entity/> .")
        .unwrap());
    let q = parse_log_line_with("w1,wd:Q1 a ?c", &prefixes).unwrap();
    assert_eq!(q.id.as_deref(), Some("w1"));
    assert_eq!(
        q.subject,
        LogEndpoint::Iri("http://www.wikidata.org/entity/Q1".into())
    );
    // Declarations that are not: a query line, a malformed one.
    assert!(!prefixes.declare("?x e:p ?y").unwrap());
    assert!(prefixes.declare("PREFIX e <http://e/>").is_err());
    // An undeclared prefix is an error at its position.
    match parse_log_line_with("?x e:p/zz:q ?y", &prefixes) {
        Err(RpqError::Parse {
            position, reason, ..
        }) => {
            assert_eq!(position, 7);
            assert!(reason.contains("undeclared prefix `zz:`"), "{reason}");
        }
        other => panic!("expected an error, got {other:?}"),
    }
}

#[test]
fn spargebra_paths_translate_with_nesting_and_unknown_iris() {
    let e = Expr::ZeroOrMore(Box::new(Expr::Alternative(
        Box::new(Expr::Sequence(
            link("p1"),
            Box::new(Expr::Reverse(link("p2"))),
        )),
        Box::new(Expr::ZeroOrOne(link("zzz"))),
    )));
    let p = parse_path_expr(&e, resolve);
    assert_eq!(
        p,
        Path::ZeroOrMore(Box::new(Path::Alternative(
            Box::new(Path::Sequence(
                Path::link(1),
                Box::new(Path::Inverse(Path::link(2)))
            )),
            Box::new(Path::ZeroOrOne(Path::link(UNKNOWN_PREDICATE))),
        )))
    );
    // `!(p1|^p2)` arrives split; it is folded back into one set.
    let e = Expr::Alternative(
        Box::new(Expr::NegatedPropertySet(vec![nn("p1")])),
        Box::new(Expr::Reverse(Box::new(Expr::NegatedPropertySet(vec![
            nn("p2"),
            nn("q"),
        ])))),
    );
    assert_eq!(
        parse_path_expr(&e, resolve),
        Path::NegatedSet(vec![(1, false), (2, true), (UNKNOWN_PREDICATE, true)])
    );
}

// ---------- automaton ----------

/// Reference membership: does `path` match the word of edge labels? (dynamic programming
/// over splits; inverse reverses the word and flips directions).
fn matches(path: &Path, word: &[(PredId, Dir)], all_preds: &[PredId]) -> bool {
    match path {
        Path::Link(p) => word == [(*p, Dir::Forward)],
        Path::NegatedSet(items) => {
            if word.len() != 1 {
                return false;
            }
            let (p, d) = word[0];
            let fwd = items.is_empty() || items.iter().any(|i| !i.1);
            let inv = items.iter().any(|i| i.1);
            all_preds.contains(&p)
                && match d {
                    Dir::Forward => fwd && !items.contains(&(p, false)),
                    Dir::Inverse => inv && !items.contains(&(p, true)),
                }
        }
        Path::Inverse(a) => {
            let w: Vec<_> = word.iter().rev().map(|&(p, d)| (p, d.flipped())).collect();
            matches(a, &w, all_preds)
        }
        Path::Sequence(a, b) => (0..=word.len())
            .any(|k| matches(a, &word[..k], all_preds) && matches(b, &word[k..], all_preds)),
        Path::Alternative(a, b) => matches(a, word, all_preds) || matches(b, word, all_preds),
        Path::ZeroOrOne(a) => word.is_empty() || matches(a, word, all_preds),
        Path::ZeroOrMore(a) => {
            word.is_empty() || matches(&Path::OneOrMore(a.clone()), word, all_preds)
        }
        Path::OneOrMore(a) => {
            matches(a, word, all_preds)
                || (1..word.len()).any(|k| {
                    matches(a, &word[..k], all_preds) && matches(path, &word[k..], all_preds)
                })
        }
    }
}

fn all_words(max_len: usize) -> Vec<Vec<(PredId, Dir)>> {
    let letters: Vec<(PredId, Dir)> = (0..3)
        .flat_map(|p| [(p, Dir::Forward), (p, Dir::Inverse)])
        .collect();
    let mut words = vec![vec![]];
    let mut last = vec![vec![]];
    for _ in 0..max_len {
        last = last
            .iter()
            .flat_map(|w: &Vec<_>| {
                letters.iter().map(move |&l| {
                    let mut w = w.clone();
                    w.push(l);
                    w
                })
            })
            .collect();
        words.extend(last.iter().cloned());
    }
    words
}

#[test]
fn automaton_accepts_exactly_the_words_of_the_path() {
    let preds = [0, 1, 2];
    let words = all_words(3);
    let mut rng = StdRng::seed_from_u64(7);
    for _ in 0..200 {
        let path = random_path(&mut rng, 3);
        let fwd = Automaton::new(&path, false);
        let bwd = Automaton::new(&path, true);
        assert_eq!(fwd.accepts_empty(), path.accepts_empty());
        for w in &words {
            let expect = matches(&path, w, &preds);
            assert_eq!(fwd.accepts(w), expect, "{path} on {w:?}");
            let rev: Vec<_> = w.iter().rev().map(|&(p, d)| (p, d.flipped())).collect();
            assert_eq!(bwd.accepts(&rev), expect, "reversed {path} on {rev:?}");
        }
    }
}

#[test]
fn automaton_of_a_small_path() {
    // p0 / p1*: states q0, q1 (p0), q2 (p1).
    let path = Path::Sequence(Path::link(0), Box::new(Path::ZeroOrMore(Path::link(1))));
    let a = Automaton::new(&path, false);
    assert_eq!(a.states(), 3);
    assert_eq!(a.targets, vec![vec![1], vec![2], vec![2]]);
    assert_eq!(a.accepting, vec![false, true, true]);
    let f = (0, Dir::Forward);
    let g = (1, Dir::Forward);
    assert!(a.accepts(&[f]) && a.accepts(&[f, g, g]));
    assert!(!a.accepts(&[]) && !a.accepts(&[g]) && !a.accepts(&[f, f]));
    assert!(!a.accepts(&[(0, Dir::Inverse)]));
}

// ---------- endpoints ----------

/// 0 -a-> 1 -a-> 2 -a-> 0 (a cycle), 2 -b-> 3, 4 -b-> 4 (a loop); a = 10, b = 11.
/// Node ids 0..=4, 5 and 6 exist in the id space without edges.
fn small_graph() -> MemoryGraph {
    MemoryGraph::with_node_count(
        7,
        vec![(0, 10, 1), (1, 10, 2), (2, 10, 0), (2, 11, 3), (4, 11, 4)],
    )
}

/// `path` from `s` to `o` over `g` on the CPU engine.
fn cpu_eval(
    g: &MemoryGraph,
    path: &Path,
    s: Endpoint,
    o: Endpoint,
    options: &EvalOptions,
) -> k2rpq::rpq::PathResult {
    evaluate(&CpuEngine::new(), g, path, s, o, options).unwrap()
}

fn run(path: &Path, s: Endpoint, o: Endpoint) -> Vec<(u32, u32)> {
    let r = cpu_eval(&small_graph(), path, s, o, &EvalOptions::default());
    assert!(!r.truncated && !r.timed_out);
    r.pairs
}

#[test]
fn const_to_var_and_var_to_const() {
    let a_plus = Path::OneOrMore(Path::link(10));
    assert_eq!(
        run(&a_plus, Endpoint::Const(0), Endpoint::Var),
        vec![(0, 0), (0, 1), (0, 2)]
    );
    let a_b = Path::Sequence(Box::new(a_plus.clone()), Path::link(11));
    assert_eq!(
        run(&a_b, Endpoint::Var, Endpoint::Const(3)),
        vec![(0, 3), (1, 3), (2, 3)]
    );
    let inv = Path::Inverse(Path::link(11));
    assert_eq!(run(&inv, Endpoint::Const(3), Endpoint::Var), vec![(3, 2)]);
    assert_eq!(run(&inv, Endpoint::Var, Endpoint::Const(4)), vec![(4, 4)]);
}

#[test]
fn const_to_const_stops_at_the_target() {
    let a_plus = Path::OneOrMore(Path::link(10));
    assert_eq!(
        run(&a_plus, Endpoint::Const(0), Endpoint::Const(2)),
        vec![(0, 2)]
    );
    assert_eq!(run(&a_plus, Endpoint::Const(0), Endpoint::Const(3)), vec![]);
    let g = small_graph();
    let r = cpu_eval(
        &g,
        &a_plus,
        Endpoint::Const(0),
        Endpoint::Const(1),
        &EvalOptions::default(),
    );
    // 0 -> 1 is found in the first step; the cycle is not walked to its fixed point.
    assert_eq!(r.pairs, vec![(0, 1)]);
    assert_eq!(r.trace.total_steps, 1);
}

#[test]
fn var_to_var_batches_candidates() {
    let a_plus = Path::OneOrMore(Path::link(10));
    let all: Vec<(u32, u32)> = (0..3).flat_map(|s| (0..3).map(move |o| (s, o))).collect();
    assert_eq!(run(&a_plus, Endpoint::Var, Endpoint::Var), all);
    let b = Path::Link(11);
    assert_eq!(run(&b, Endpoint::Var, Endpoint::Var), vec![(2, 3), (4, 4)]);
    // Many batches of one word must give the same answer as one batch.
    let g = small_graph();
    let opts = EvalOptions {
        batch_words: 1,
        ..EvalOptions::default()
    };
    let r = cpu_eval(&g, &a_plus, Endpoint::Var, Endpoint::Var, &opts);
    assert_eq!(r.pairs, all);
}

#[test]
fn zero_length_paths() {
    let b_star = Path::ZeroOrMore(Path::link(11));
    // Every graph node (subjects and objects, not the edge-less ids 5, 6) to itself.
    let pairs = run(&b_star, Endpoint::Var, Endpoint::Var);
    assert_eq!(pairs, vec![(0, 0), (1, 1), (2, 2), (2, 3), (3, 3), (4, 4)]);
    // A constant to itself always: one without edges, and one outside the id space.
    assert_eq!(
        run(&b_star, Endpoint::Const(5), Endpoint::Var),
        vec![(5, 5)]
    );
    assert_eq!(
        run(&b_star, Endpoint::Var, Endpoint::Const(99)),
        vec![(99, 99)]
    );
    assert_eq!(
        run(&b_star, Endpoint::Const(99), Endpoint::Const(99)),
        vec![(99, 99)]
    );
    assert_eq!(
        run(&b_star, Endpoint::Const(99), Endpoint::Const(5)),
        vec![]
    );
    // An unknown predicate matches nothing, but `?` still matches the empty path.
    let unknown = Path::ZeroOrOne(Path::link(UNKNOWN_PREDICATE));
    assert_eq!(
        run(&unknown, Endpoint::Const(1), Endpoint::Var),
        vec![(1, 1)]
    );
    assert_eq!(
        run(&Path::Link(UNKNOWN_PREDICATE), Endpoint::Var, Endpoint::Var),
        vec![]
    );
}

#[test]
fn negated_sets_per_direction() {
    // !(a): forward b edges only; !(^a): inverse b edges; !(a|^b): forward b and inverse a.
    let neg = |items: Vec<(PredId, bool)>| Path::NegatedSet(items);
    assert_eq!(
        run(&neg(vec![(10, false)]), Endpoint::Var, Endpoint::Var),
        vec![(2, 3), (4, 4)]
    );
    assert_eq!(
        run(&neg(vec![(10, true)]), Endpoint::Var, Endpoint::Var),
        vec![(3, 2), (4, 4)]
    );
    assert_eq!(
        run(
            &neg(vec![(10, false), (11, true)]),
            Endpoint::Const(2),
            Endpoint::Var
        ),
        vec![(2, 1), (2, 3)]
    );
}

#[test]
fn limit_and_timeout_are_reported() {
    let g = small_graph();
    let a_plus = Path::OneOrMore(Path::link(10));
    let run = |opts: &EvalOptions| {
        evaluate(
            &CpuEngine::new(),
            &g,
            &a_plus,
            Endpoint::Var,
            Endpoint::Var,
            opts,
        )
    };
    let opts = EvalOptions {
        limit: Some(4),
        ..EvalOptions::default()
    };
    let r = run(&opts).unwrap();
    assert!(r.truncated);
    assert_eq!(r.pairs.len(), 4);
    let opts = EvalOptions {
        timeout: Some(Duration::ZERO),
        ..EvalOptions::default()
    };
    let r = run(&opts).unwrap();
    assert!(r.timed_out);
    let opts = EvalOptions {
        count_only: true,
        ..EvalOptions::default()
    };
    let r = run(&opts).unwrap();
    assert_eq!((r.count, r.pairs.len()), (9, 0));
    let opts = EvalOptions {
        count_only: true,
        limit: Some(4),
        ..EvalOptions::default()
    };
    let r = run(&opts).unwrap();
    assert_eq!((r.count, r.truncated), (4, true));
    let opts = EvalOptions {
        batch_words: 0,
        ..EvalOptions::default()
    };
    assert!(matches!(run(&opts), Err(RpqError::Options(_))));
}

#[test]
fn plan_picks_direction_and_displays() {
    let g = small_graph();
    let path = Path::Sequence(Box::new(Path::OneOrMore(Path::link(10))), Path::link(11));
    let opts = EvalOptions::default();
    let p = plan(&g, &path, Endpoint::Var, Endpoint::Const(3), &opts);
    assert_eq!(p.direction, EvalDirection::Backward);
    let p = plan(&g, &path, Endpoint::Const(0), Endpoint::Var, &opts);
    assert_eq!(p.direction, EvalDirection::Forward);
    // Var-var: 3 nodes have an `a` edge out, 1 node a `b` edge in: start from the object.
    let p = plan(&g, &path, Endpoint::Var, Endpoint::Var, &opts);
    assert_eq!(p.direction, EvalDirection::Backward);
    let names = |id: PredId| Some(format!("<http://e/{id}>"));
    let text = p.display_with(&names).to_string();
    assert!(text.contains("<http://e/11>"), "{text}");
    assert!(text.contains("right product"), "{text}");
    let r = cpu_eval(&g, &path, Endpoint::Var, Endpoint::Var, &opts);
    assert_eq!(r.pairs, vec![(0, 3), (1, 3), (2, 3)]);
    let trace = r.trace.to_string();
    assert!(trace.contains("engine cpu"), "{trace}");
}

// ---------- sparse walks ----------

/// Evaluates with one traversal policy.
fn eval_with(
    g: &MemoryGraph,
    path: &Path,
    s: Endpoint,
    o: Endpoint,
    traversal: k2rpq::rpq::TraversalPolicy,
) -> k2rpq::rpq::PathResult {
    let options = EvalOptions {
        traversal,
        ..EvalOptions::default()
    };
    cpu_eval(g, path, s, o, &options)
}

#[test]
fn small_walks_run_sparsely_and_agree_with_products() {
    use k2rpq::rpq::TraversalPolicy::{Auto, Dense};
    // Two predicates over 40 nodes: a ring of p10 and chords of p11.
    let mut triples: Vec<(u32, PredId, u32)> = (0..40).map(|i| (i, 10, (i + 1) % 40)).collect();
    triples.extend((0..40).step_by(3).map(|i| (i, 11, (i * 7) % 40)));
    let g = MemoryGraph::from_triples(triples);
    let paths = [
        Path::OneOrMore(Path::link(10)),
        Path::ZeroOrMore(Box::new(Path::Alternative(
            Path::link(11),
            Box::new(Path::Inverse(Path::link(10))),
        ))),
        Path::Sequence(
            Path::link(11),
            Box::new(Path::NegatedSet(vec![(10, false)])),
        ),
        Path::NegatedSet(vec![(12, false), (10, true)]),
    ];
    for path in &paths {
        for (s, o) in [
            (Endpoint::Const(3), Endpoint::Var),
            (Endpoint::Var, Endpoint::Const(5)),
            (Endpoint::Const(3), Endpoint::Const(21)),
            (Endpoint::Var, Endpoint::Var),
        ] {
            let sparse = eval_with(&g, path, s, o, Auto);
            let dense = eval_with(&g, path, s, o, Dense);
            assert_eq!(sparse.pairs, dense.pairs, "{path:?} {s:?} {o:?}");
            assert_eq!(sparse.trace.loads, 0, "{path:?}: no relation loaded");
            assert_eq!(sparse.trace.sparse, sparse.trace.products, "{path:?}");
        }
    }
}

#[test]
fn a_long_chain_is_walked_sparsely_once_its_lines_are_decoded() {
    // A chain of 10 000 nodes: `0 p+ ?y` reaches all of them one step at a time. Each
    // step's descent revisits the tree's upper levels until those visits add up to the
    // tree's size; then the successor lists are decoded and the rest of the walk costs a
    // lookup per step, so the walk stays within its budget.
    let n = 10_000u32;
    let g = MemoryGraph::from_triples((0..n - 1).map(|i| (i, 10, i + 1)).collect());
    let path = Path::OneOrMore(Path::link(10));
    let r = eval_with(
        &g,
        &path,
        Endpoint::Const(0),
        Endpoint::Var,
        k2rpq::rpq::TraversalPolicy::Auto,
    );
    assert_eq!(r.trace.loads, 0, "no relation loaded for products");
    assert_eq!(r.trace.sparse, r.trace.products);
    assert_eq!(r.trace.total_steps, n as u64);
    let expected: Vec<(u32, u32)> = (1..n).map(|e| (0, e)).collect();
    assert_eq!(r.pairs, expected);
}

#[test]
fn a_sparse_walk_past_its_budget_falls_back_to_products() {
    // A complete graph on 96 nodes, `?x p+ ?y`: the joint walk fans every one of the
    // 9 216 cells out to all 96 starts (~885 k pair insertions), far past its budget
    // (about two dense products), so the batched products answer.
    let m = 96u32;
    let triples = (0..m)
        .flat_map(|i| (0..m).map(move |j| (i, 10, j)))
        .collect();
    let g = MemoryGraph::from_triples(triples);
    let path = Path::OneOrMore(Path::link(10));
    let r = eval_with(
        &g,
        &path,
        Endpoint::Var,
        Endpoint::Var,
        k2rpq::rpq::TraversalPolicy::Auto,
    );
    assert_eq!(r.trace.loads, 1, "the relation is loaded for products");
    assert_eq!(r.trace.sparse, 0);
    let expected: Vec<(u32, u32)> = (0..m).flat_map(|i| (0..m).map(move |j| (i, j))).collect();
    assert_eq!(r.pairs, expected);
}

#[test]
fn many_candidates_walk_in_chunks_and_agree_with_products() {
    use k2rpq::rpq::TraversalPolicy::{Auto, Dense};
    // A binary in-tree over 12 000 nodes (i -> i/2: ~12 000 candidate starts, more than
    // one joint walk takes, so the host engine walks them in chunks) plus a complete graph
    // on 96 nodes (its chunk's walk passes the budget and that chunk alone runs the
    // batched products). Every answer, also cut at a limit, must be the batched one.
    let n = 12_000u32;
    let mut triples: Vec<(u32, PredId, u32)> = (1..n).map(|i| (i, 10, i / 2)).collect();
    triples.extend((n..n + 96).flat_map(|i| (n..n + 96).map(move |j| (i, 10, j))));
    let g = MemoryGraph::from_triples(triples);
    for path in [
        Path::OneOrMore(Path::link(10)),
        Path::Sequence(Path::link(10), Box::new(Path::ZeroOrMore(Path::link(10)))),
    ] {
        let chunked = eval_with(&g, &path, Endpoint::Var, Endpoint::Var, Auto);
        let dense = eval_with(&g, &path, Endpoint::Var, Endpoint::Var, Dense);
        assert!(!chunked.truncated && !chunked.timed_out);
        assert_eq!(chunked.pairs.len() as u64, chunked.count);
        assert_eq!(chunked.pairs, dense.pairs, "{path:?}");
        assert!(chunked.trace.sparse > 0, "some chunks were walked");
        assert_eq!(chunked.trace.loads, 1, "one chunk fell back to products");
        // Each walk and each fallen-back batch is a batch of the trace, numbered in order.
        let mut numbers: Vec<u64> = chunked.trace.steps.iter().map(|s| s.batch).collect();
        assert!(numbers.is_sorted(), "{numbers:?}");
        assert_eq!(
            chunked.trace.total_steps,
            numbers.len() as u64,
            "every step logged"
        );
        numbers.dedup();
        assert_eq!(numbers.len() as u64, chunked.trace.batches);
        assert!(chunked.trace.batches > 2, "several walks");
        for limit in [1u64, 5_000, 100_000] {
            let opts = |traversal| EvalOptions {
                traversal,
                limit: Some(limit),
                ..EvalOptions::default()
            };
            let cpu = CpuEngine::new();
            let a = evaluate(&cpu, &g, &path, Endpoint::Var, Endpoint::Var, &opts(Auto)).unwrap();
            let b = evaluate(&cpu, &g, &path, Endpoint::Var, Endpoint::Var, &opts(Dense)).unwrap();
            assert_eq!(
                (a.count, a.truncated),
                (b.count, b.truncated),
                "limit {limit}"
            );
            // A truncated answer is `limit` correct pairs; which ones may differ (the
            // batched executor stops a batch's fixed point early, walks finish starts).
            let full: std::collections::HashSet<_> = chunked.pairs.iter().collect();
            assert!(a.pairs.iter().all(|p| full.contains(p)), "limit {limit}");
            let distinct: std::collections::HashSet<_> = a.pairs.iter().collect();
            assert_eq!(distinct.len() as u64, a.count, "limit {limit}");
        }
    }
}

// ---------- limits within a batch and routes ----------

#[test]
fn a_limit_stops_the_batched_fixed_point_within_a_batch() {
    use k2rpq::rpq::TraversalPolicy::Dense;
    // A chain of 1 000 nodes: the first batch's 512 starts find 512 pairs on their first
    // step, and its fixed point is ~1 000 steps away.
    let g = MemoryGraph::from_triples((0..999u32).map(|i| (i, 10, i + 1)).collect());
    let path = Path::OneOrMore(Path::link(10));
    let opts = |limit| EvalOptions {
        traversal: Dense,
        limit,
        ..EvalOptions::default()
    };
    let cpu = CpuEngine::new();
    let full = evaluate(&cpu, &g, &path, Endpoint::Var, Endpoint::Var, &opts(None)).unwrap();
    assert_eq!(full.count, 999 * 1000 / 2);
    assert!(full.trace.total_steps > 500, "{}", full.trace.total_steps);
    let cut = evaluate(
        &cpu,
        &g,
        &path,
        Endpoint::Var,
        Endpoint::Var,
        &opts(Some(100)),
    )
    .unwrap();
    assert!(cut.truncated);
    assert_eq!((cut.count, cut.pairs.len()), (100, 100));
    assert_eq!(cut.trace.batches, 1);
    assert_eq!(
        cut.trace.total_steps, 1,
        "stopped after the step that passed the limit"
    );
    let full_pairs: std::collections::HashSet<_> = full.pairs.iter().collect();
    assert!(cut.pairs.iter().all(|p| full_pairs.contains(p)));
}

#[test]
fn a_limit_counts_only_the_target_between_two_constants() {
    use k2rpq::rpq::TraversalPolicy::{Auto, Dense};
    // 0 reaches 99, the target, three steps away, through a fan of 50 nodes on either
    // side (so from whichever end the plan starts): the nodes reached on the way are not
    // answers, so a limit of 1 must not end the walk or the batch there.
    let mut triples: Vec<(u32, u32, u32)> = (1..=50u32).map(|i| (0, 10, i)).collect();
    triples.extend((200..250u32).map(|j| (j, 10, 99)));
    triples.push((50, 10, 200));
    let g = MemoryGraph::from_triples(triples);
    let path = Path::OneOrMore(Path::link(10));
    let cpu = CpuEngine::new();
    for traversal in [Auto, Dense] {
        for (limit, target, expected) in [(1, 99, 1), (1, 25, 1), (0, 99, 0), (1, 98, 0)] {
            let opts = EvalOptions {
                traversal,
                limit: Some(limit),
                ..EvalOptions::default()
            };
            let r = evaluate(
                &cpu,
                &g,
                &path,
                Endpoint::Const(0),
                Endpoint::Const(target),
                &opts,
            )
            .unwrap();
            assert_eq!(r.count, expected, "{traversal:?} limit {limit} to {target}");
            assert_eq!(r.pairs.len() as u64, expected, "{traversal:?} to {target}");
        }
    }
}

#[test]
fn a_sparse_closure_over_many_node_ids_routes_to_host_walks() {
    use k2rpq::rpq::route::{route_candidates, DeviceModel, Route};
    // A binary in-tree on 12 000 of 200 M node ids: ~13 ancestors per start, while every
    // device batch covers all 200 M ids (over a second per batch in the model).
    let triples = (1..12_000u32).map(|i| (i, 10, i / 2)).collect();
    let g = MemoryGraph::with_node_count(200_000_000, triples);
    let path = Path::OneOrMore(Path::link(10));
    let opts = EvalOptions::default();
    let p = plan(&g, &path, Endpoint::Var, Endpoint::Var, &opts);
    let d = route_candidates(&g, &p, &opts, 8, 1, &DeviceModel::default()).unwrap();
    assert_eq!(d.route, Route::Host, "{d}");
    assert!(d.host.unwrap() < d.device, "{d}");
    assert!(d.device > std::time::Duration::from_secs(10), "{d}");
    assert!(d.to_string().starts_with("host: "), "{d}");
    // Under a limit the sample stops at it and scales its time per pair.
    let limited = EvalOptions {
        limit: Some(50),
        ..EvalOptions::default()
    };
    let d = route_candidates(&g, &p, &limited, 8, 1, &DeviceModel::default()).unwrap();
    assert_eq!(d.route, Route::Host, "{d}");
    assert!(d.reason.contains("for 50 rows"), "{d}");
    // A constant start is not routed here (it walks the host in front of the device).
    let p = plan(&g, &path, Endpoint::Const(5), Endpoint::Var, &opts);
    assert!(route_candidates(&g, &p, &opts, 8, 1, &DeviceModel::default()).is_none());
}

#[test]
fn a_dense_closure_routes_to_the_device() {
    use k2rpq::rpq::route::{route_candidates, DeviceModel, Route};
    // A complete graph on 128 of 20 000 node ids: the sampled walk passes its budget.
    let triples = (0..128u32)
        .flat_map(|i| (0..128).map(move |j| (i, 10, j)))
        .collect();
    let g = MemoryGraph::with_node_count(20_000, triples);
    let path = Path::OneOrMore(Path::link(10));
    let opts = EvalOptions::default();
    let p = plan(&g, &path, Endpoint::Var, Endpoint::Var, &opts);
    let d = route_candidates(&g, &p, &opts, 8, 4, &DeviceModel::default()).unwrap();
    assert_eq!(d.route, Route::Device, "{d}");
    assert_eq!(d.host, None);
    assert!(d.reason.contains("work budget"), "{d}");
}

#[test]
fn all_pairs_on_cnr_2000_route_to_the_device() {
    use k2rpq::rpq::route::{route_candidates, DeviceModel, Route};
    use std::io::BufRead;
    // The device's best case: ~10⁵ pairs per start over 325,557 nodes (all pairs of `p+`
    // take 5-6 s on one GPU and do not finish in 120 s on 16 cores).
    let Some(path) = data::data_file("cnr-2000/cnr-2000.arcs.tsv.gz") else {
        return;
    };
    let file = std::fs::File::open(&path).expect("open cnr-2000");
    let reader = std::io::BufReader::new(flate2::read::GzDecoder::new(file));
    let triples: Vec<(u32, PredId, u32)> = reader
        .lines()
        .map(|line| {
            let line = line.expect("read cnr-2000");
            let mut it = line
                .split('\t')
                .map(|s| s.trim().parse::<u32>().expect("id"));
            (it.next().expect("source"), 10, it.next().expect("target"))
        })
        .collect();
    let g = MemoryGraph::from_triples(triples);
    let p_plus = Path::OneOrMore(Path::link(10));
    let opts = EvalOptions {
        count_only: true,
        ..EvalOptions::default()
    };
    let p = plan(&g, &p_plus, Endpoint::Var, Endpoint::Var, &opts);
    let d = route_candidates(&g, &p, &opts, 8, 16, &DeviceModel::default()).unwrap();
    assert_eq!(d.route, Route::Device, "{d}");
}
