//! Shared helpers of the RPQ tests: the same triples in a `MemoryGraph` and in an
//! Oxigraph store, and both evaluations of one path as sets of N-Triples term pairs.
#![allow(dead_code)]

use std::collections::BTreeSet;

use k2rpq::engine::cpu::CpuEngine;
use k2rpq::engine::Engine;
use k2rpq::rpq::terms::TermDict;
use k2rpq::rpq::Path;
use k2rpq::rpq::{
    evaluate, evaluate_split, parse_path_expr, Endpoint, EvalOptions, MemoryGraph, PathGraph,
    PathResult, PerQueryRelations, Plan, RpqError, Share,
};
use oxigraph::model::{GraphNameRef, NamedNodeRef, QuadRef};
use oxigraph::sparql::{QueryResults, SparqlEvaluator};
use oxigraph::store::Store;
use rand::Rng;
use spargebra::algebra::PropertyPathExpression as Expr;

/// Pairs of terms in N-Triples form.
pub type Pairs = BTreeSet<(String, String)>;

/// One dataset in both engines.
pub struct Fixture {
    pub graph: MemoryGraph,
    pub dict: TermDict,
    pub store: Store,
}

impl Fixture {
    /// From IRI triples (without `<>`); `extra` IRIs are interned too (terms known to
    /// the dictionary but absent from the graph).
    pub fn from_iris(triples: &[(String, String, String)], extra: &[String]) -> Fixture {
        let mut dict = TermDict::new();
        let store = Store::new().unwrap();
        let mut ids = Vec::new();
        for (s, p, o) in triples {
            let i = (
                dict.intern(format!("<{s}>")),
                dict.intern(format!("<{p}>")),
                dict.intern(format!("<{o}>")),
            );
            ids.push(i);
            store
                .insert(QuadRef::new(
                    NamedNodeRef::new(s).unwrap(),
                    NamedNodeRef::new(p).unwrap(),
                    NamedNodeRef::new(o).unwrap(),
                    GraphNameRef::DefaultGraph,
                ))
                .unwrap();
        }
        for e in extra {
            dict.intern(format!("<{e}>"));
        }
        let graph = MemoryGraph::with_node_count(dict.len() as u32, ids);
        Fixture { graph, dict, store }
    }

    /// From an N-Triples file (optionally gzipped).
    pub fn from_file(path: &std::path::Path) -> Fixture {
        let (graph, dict) = k2rpq::rpq::terms::load_rdf(path).unwrap();
        let store = Store::new().unwrap();
        let f = std::fs::File::open(path).unwrap();
        let reader: Box<dyn std::io::Read> = if path.extension().is_some_and(|e| e == "gz") {
            Box::new(flate2::read::MultiGzDecoder::new(f))
        } else {
            Box::new(f)
        };
        store
            .load_from_reader(oxigraph::io::RdfFormat::NTriples, reader)
            .unwrap();
        Fixture { graph, dict, store }
    }

    /// Our answer for `s path o` (`None` = variable, `Some(iri)` = constant).
    pub fn ours(&self, path: &Expr, s: Option<&str>, o: Option<&str>, opts: &EvalOptions) -> Pairs {
        let p = parse_path_expr(path, |iri| self.dict.iri_id(iri));
        let end = |e: Option<&str>| match e {
            None => Endpoint::Var,
            Some(iri) => Endpoint::Const(self.dict.iri_id(iri).expect("constant interned")),
        };
        let r = evaluate(&CpuEngine::new(), &self.graph, &p, end(s), end(o), opts).unwrap();
        assert!(!r.truncated && !r.timed_out);
        assert_eq!(r.count, r.pairs.len() as u64);
        // Counting only (unions counted in the engine) gives the same number.
        let counting = EvalOptions {
            count_only: true,
            ..opts.clone()
        };
        let c = evaluate(
            &CpuEngine::new(),
            &self.graph,
            &p,
            end(s),
            end(o),
            &counting,
        )
        .unwrap();
        assert_eq!(c.count, r.count, "count-only");
        r.pairs
            .iter()
            .map(|&(a, b)| {
                (
                    self.dict.term(a).unwrap().to_string(),
                    self.dict.term(b).unwrap().to_string(),
                )
            })
            .collect()
    }

    /// Oxigraph's answer for the same pattern, as distinct pairs.
    pub fn oxigraph(&self, path: &Expr, s: Option<&str>, o: Option<&str>) -> Pairs {
        let text = sparql_path(path);
        let term = |e: Option<&str>, v: &str| match e {
            None => format!("?{v}"),
            Some(iri) => format!("<{iri}>"),
        };
        let q = format!(
            "SELECT DISTINCT * WHERE {{ {} {text} {} }}",
            term(s, "s"),
            term(o, "o")
        );
        let res = SparqlEvaluator::new()
            .parse_query(&q)
            .unwrap_or_else(|e| panic!("{q}: {e}"))
            .on_store(&self.store)
            .execute()
            .unwrap();
        let QueryResults::Solutions(sols) = res else {
            panic!("not solutions")
        };
        let mut out = Pairs::new();
        for sol in sols {
            let sol = sol.unwrap();
            let get = |e: Option<&str>, v: &str| match e {
                Some(iri) => format!("<{iri}>"),
                None => sol.get(v).unwrap().to_string(),
            };
            out.insert((get(s, "s"), get(o, "o")));
        }
        out
    }

    /// Whether `iri` occurs as subject or object in the graph.
    pub fn is_node(&self, iri: &str) -> bool {
        self.dict
            .iri_id(iri)
            .is_some_and(|id| self.graph.nodes().contains(id))
    }

    /// Compares both answers; the one documented difference: Oxigraph 0.5.13 drops a
    /// constant absent from the graph from a zero-length match, the spec keeps it.
    pub fn check(&self, path: &Expr, s: Option<&str>, o: Option<&str>, opts: &EvalOptions) {
        let t0 = std::time::Instant::now();
        let ours = self.ours(path, s, o, opts);
        let t1 = std::time::Instant::now();
        let mut expected = self.oxigraph(path, s, o);
        let t2 = std::time::Instant::now();
        let nullable = parse_path_expr(path, |iri| self.dict.iri_id(iri)).accepts_empty();
        if nullable {
            match (s, o) {
                (Some(c), None) | (None, Some(c)) if !self.is_node(c) => {
                    expected.insert((format!("<{c}>"), format!("<{c}>")));
                }
                (Some(a), Some(b)) if a == b && !self.is_node(a) => {
                    expected.insert((format!("<{a}>"), format!("<{a}>")));
                }
                _ => {}
            }
        }
        if std::env::var_os("RPQ_TEST_VERBOSE").is_some() {
            eprintln!(
                "{} pairs: {} {s:?} {o:?} (ours {:?}, oxigraph {:?})",
                ours.len(),
                sparql_path(path),
                t1 - t0,
                t2 - t1
            );
        }
        assert_eq!(
            ours,
            expected,
            "path {} from {s:?} to {o:?}",
            sparql_path(path)
        );
    }
}

/// SPARQL text of a path, fully parenthesized (negated sets in their `!(a|^b)` form).
pub fn sparql_path(e: &Expr) -> String {
    let nps = |v: &[oxigraph::model::NamedNode], inv: bool| {
        v.iter()
            .map(|n| format!("{}<{}>", if inv { "^" } else { "" }, n.as_str()))
            .collect::<Vec<_>>()
    };
    match e {
        Expr::NamedNode(n) => format!("<{}>", n.as_str()),
        Expr::Reverse(a) => match a.as_ref() {
            Expr::NegatedPropertySet(v) => format!("!({})", nps(v, true).join("|")),
            _ => format!("^({})", sparql_path(a)),
        },
        Expr::Sequence(a, b) => format!("(({})/({}))", sparql_path(a), sparql_path(b)),
        Expr::Alternative(a, b) => match (a.as_ref(), b.as_ref()) {
            (Expr::NegatedPropertySet(f), Expr::Reverse(r))
                if matches!(r.as_ref(), Expr::NegatedPropertySet(_)) =>
            {
                let Expr::NegatedPropertySet(i) = r.as_ref() else {
                    unreachable!()
                };
                let mut items = nps(f, false);
                items.extend(nps(i, true));
                format!("!({})", items.join("|"))
            }
            _ => format!("(({})|({}))", sparql_path(a), sparql_path(b)),
        },
        Expr::ZeroOrMore(a) => format!("({})*", sparql_path(a)),
        Expr::OneOrMore(a) => format!("({})+", sparql_path(a)),
        Expr::ZeroOrOne(a) => format!("({})?", sparql_path(a)),
        Expr::NegatedPropertySet(v) => format!("!({})", nps(v, false).join("|")),
    }
}

/// A random path over predicates 0..3 of nesting depth at most `depth`, negated sets of
/// 0-2 members (direct or inverse) included.
pub fn random_path(rng: &mut rand::rngs::StdRng, depth: u32) -> Path {
    if depth == 0 || rng.random_ratio(1, 3) {
        return if rng.random_ratio(1, 5) {
            let k = rng.random_range(0..3);
            Path::NegatedSet(
                (0..k)
                    .map(|_| (rng.random_range(0..3), rng.random_bool(0.5)))
                    .collect(),
            )
        } else {
            Path::Link(rng.random_range(0..3))
        };
    }
    let op = rng.random_range(0..6);
    let mut sub = || Box::new(random_path(rng, depth - 1));
    match op {
        0 => Path::Inverse(sub()),
        1 => Path::Sequence(sub(), sub()),
        2 => Path::Alternative(sub(), sub()),
        3 => Path::ZeroOrMore(sub()),
        4 => Path::OneOrMore(sub()),
        _ => Path::ZeroOrOne(sub()),
    }
}

/// `plan` split over `engines`, each with its own per-query relations.
pub fn split<E: Engine>(
    engines: &[E],
    g: &dyn PathGraph,
    p: &Plan,
    o: &EvalOptions,
) -> Result<PathResult, RpqError> {
    let mut rels: Vec<PerQueryRelations<'_, E>> = engines
        .iter()
        .map(|e| PerQueryRelations::new(e, g, o.config))
        .collect();
    let mut shares: Vec<Share<'_, E>> = engines
        .iter()
        .zip(rels.iter_mut())
        .map(|(engine, r)| Share {
            engine,
            relations: r,
        })
        .collect();
    evaluate_split(g, p, o, &mut shares)
}
