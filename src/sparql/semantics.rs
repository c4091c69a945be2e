//! Exact SPARQL 1.1 (§18.4) evaluation of one path pattern `S path O` over one graph.
//!
//! Closures (`*`, `+`, `?`) are sets per start node and go to the RPQ engine
//! ([`rpq::evaluate`]) whole. Links, inverses, sequences, alternatives and negated property
//! sets keep multiplicities: a sequence is the bag join of its two sides over a fresh
//! middle node, an alternative the bag union, a negated set one solution per matching
//! triple. So `(p|q)*` is a set, while `p/q*` is the bag join of a link (a bag) and a
//! closure (a set).
//!
//! Ids at or above the graph's `node_count` stand for terms the graph does not hold (a
//! query constant the dictionary does not know): they only take part in zero-length paths.

use rustc_hash::FxHashMap as HashMap;
use std::time::Instant;

use super::SparqlError;
use crate::engine::Engine;
use crate::rpq::{
    self, Endpoint, EvalOptions, Path, PathGraph, PerQueryRelations, RelationSource, StartNodes,
};

/// When an evaluation must stop (`None`: never), with [`SparqlError::Timeout`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Deadline(pub Option<Instant>);

impl Deadline {
    /// [`SparqlError::Timeout`] once the deadline has passed.
    pub fn check(self) -> Result<(), SparqlError> {
        match self.0 {
            Some(d) if Instant::now() >= d => Err(SparqlError::Timeout),
            _ => Ok(()),
        }
    }

    /// Options of one run of the RPQ engine: stopped at the deadline.
    fn options(self) -> Result<EvalOptions, SparqlError> {
        self.check()?;
        Ok(EvalOptions {
            timeout: self.0.map(|d| d.saturating_duration_since(Instant::now())),
            ..EvalOptions::default()
        })
    }
}

/// Distinct `(subject, object)` pairs with their multiplicities (a bag of solutions).
pub type Bag = HashMap<(u32, u32), u64>;

/// Above this many distinct middle nodes a sequence joins whole sides instead of
/// evaluating its second side once per middle node (a closure second side always runs
/// from the middle nodes, batched).
const PER_NODE_LIMIT: usize = 1024;

/// Evaluates `subject path object` over `graph` with SPARQL 1.1 multiplicities.
///
/// ```
/// use k2rpq::engine::cpu::CpuEngine;
/// use k2rpq::rpq::{Endpoint, MemoryGraph, Path};
/// use k2rpq::sparql::semantics::evaluate_path;
/// // a -p-> b, a -q-> b: `p|q` gives (a, b) twice, `(p|q)*` once.
/// let g = MemoryGraph::from_triples(vec![(0, 5, 1), (0, 6, 1)]);
/// let alt = Path::Alternative(Path::link(5), Path::link(6));
/// let bag = evaluate_path(&CpuEngine::new(), &g, &alt, Endpoint::Const(0), Endpoint::Var).unwrap();
/// assert_eq!(bag[&(0, 1)], 2);
/// let star = Path::ZeroOrMore(Box::new(alt));
/// let bag = evaluate_path(&CpuEngine::new(), &g, &star, Endpoint::Const(0), Endpoint::Var).unwrap();
/// assert_eq!(bag[&(0, 1)], 1);
/// assert_eq!(bag[&(0, 0)], 1);
/// ```
pub fn evaluate_path<E: Engine>(
    engine: &E,
    graph: &dyn PathGraph,
    path: &Path,
    subject: Endpoint,
    object: Endpoint,
) -> Result<Bag, SparqlError> {
    let options = EvalOptions::default();
    let mut relations = PerQueryRelations::new(engine, graph, options.config);
    evaluate_path_with(
        engine,
        graph,
        path,
        subject,
        object,
        &mut relations,
        Deadline::default(),
    )
}

/// [`evaluate_path`] with relations loaded by `relations` (keep one per graph across the
/// patterns of a query so that each relation is loaded once), stopped at `deadline`.
pub fn evaluate_path_with<E: Engine>(
    engine: &E,
    graph: &dyn PathGraph,
    path: &Path,
    subject: Endpoint,
    object: Endpoint,
    relations: &mut dyn RelationSource<E>,
    deadline: Deadline,
) -> Result<Bag, SparqlError> {
    Evaluator {
        engine,
        graph,
        relations,
        deadline,
    }
    .eval(path, subject, object)
}

/// `s path ?o` for every `s` of `starts` (nodes of the graph's id space): closures run
/// from all starts in one batched plan, other paths once per start.
pub fn evaluate_path_from<E: Engine>(
    engine: &E,
    graph: &dyn PathGraph,
    path: &Path,
    starts: &[u32],
    relations: &mut dyn RelationSource<E>,
    deadline: Deadline,
) -> Result<Bag, SparqlError> {
    let mut ev = Evaluator {
        engine,
        graph,
        relations,
        deadline,
    };
    let starts: Vec<u32> = starts.iter().copied().filter(|&s| ev.in_space(s)).collect();
    let is_closure = matches!(
        path,
        Path::ZeroOrMore(_) | Path::OneOrMore(_) | Path::ZeroOrOne(_)
    );
    if is_closure && starts.len() > 1 {
        return ev.closure_from(path, &starts);
    }
    let mut out = Bag::default();
    for s in starts {
        ev.deadline.check()?;
        for (k, m) in ev.eval(path, Endpoint::Const(s), Endpoint::Var)? {
            *out.entry(k).or_insert(0) += m;
        }
    }
    Ok(out)
}

struct Evaluator<'a, 'r, E: Engine> {
    engine: &'a E,
    graph: &'a dyn PathGraph,
    relations: &'r mut dyn RelationSource<E>,
    deadline: Deadline,
}

impl<E: Engine> Evaluator<'_, '_, E> {
    /// Whether `id` can occur in a relation of the graph.
    fn in_space(&self, id: u32) -> bool {
        id < self.graph.node_count()
    }

    fn eval(&mut self, path: &Path, s: Endpoint, o: Endpoint) -> Result<Bag, SparqlError> {
        match path {
            Path::Link(p) => Ok(self.link(*p, s, o, false)),
            Path::Inverse(a) => Ok(swap(self.eval(a, o, s)?)),
            Path::Alternative(a, b) => {
                let mut x = self.eval(a, s, o)?;
                for (k, m) in self.eval(b, s, o)? {
                    *x.entry(k).or_insert(0) += m;
                }
                Ok(x)
            }
            Path::Sequence(a, b) => self.sequence(a, b, s, o),
            Path::NegatedSet(items) => Ok(self.negated(items, s, o)),
            Path::ZeroOrMore(_) | Path::OneOrMore(_) | Path::ZeroOrOne(_) => {
                self.closure(path, s, o)
            }
        }
    }

    /// One solution per edge of `p` between the endpoints (`inverse`: object to subject).
    fn link(&self, p: u32, s: Endpoint, o: Endpoint, inverse: bool) -> Bag {
        let mut out = Bag::default();
        let Some(t) = self.graph.relation(p) else {
            return out;
        };
        // In tree coordinates (row = triple subject): `inverse` swaps the ends.
        let (rs, ro) = if inverse { (o, s) } else { (s, o) };
        let mut push = |r: u32, c: u32| {
            let k = if inverse { (c, r) } else { (r, c) };
            *out.entry(k).or_insert(0) += 1;
        };
        match (rs, ro) {
            (Endpoint::Const(r), Endpoint::Const(c)) => {
                if self.in_space(r) && self.in_space(c) && t.contains(r, c) {
                    push(r, c)
                }
            }
            (Endpoint::Const(r), Endpoint::Var) => {
                if self.in_space(r) {
                    for c in t.row(r) {
                        push(r, c)
                    }
                }
            }
            (Endpoint::Var, Endpoint::Const(c)) => {
                if self.in_space(c) {
                    for r in t.column(c) {
                        push(r, c)
                    }
                }
            }
            (Endpoint::Var, Endpoint::Var) => {
                for (r, c) in t.cells() {
                    push(r, c)
                }
            }
        }
        out
    }

    /// `!(…)`: a forward part over every predicate not listed forward (present when a
    /// forward item is listed or the list is empty) and an inverse part over every
    /// predicate not listed inverse (present when an inverse item is listed); one
    /// solution per matching triple.
    fn negated(&self, items: &[(u32, bool)], s: Endpoint, o: Endpoint) -> Bag {
        let forward_part = items.is_empty() || items.iter().any(|i| !i.1);
        let inverse_part = items.iter().any(|i| i.1);
        let mut out = Bag::default();
        for p in self.graph.predicates() {
            if forward_part && !items.contains(&(p, false)) {
                for (k, m) in self.link(p, s, o, false) {
                    *out.entry(k).or_insert(0) += m;
                }
            }
            if inverse_part && !items.contains(&(p, true)) {
                for (k, m) in self.link(p, s, o, true) {
                    *out.entry(k).or_insert(0) += m;
                }
            }
        }
        out
    }

    /// A closure: a set, from the RPQ engine; ends outside the graph's id space only
    /// meet themselves, by a zero-length path.
    fn closure(&mut self, path: &Path, s: Endpoint, o: Endpoint) -> Result<Bag, SparqlError> {
        let outside = |e: Endpoint| matches!(e, Endpoint::Const(c) if !self.in_space(c));
        if outside(s) || outside(o) {
            let mut out = Bag::default();
            if path.accepts_empty() {
                match (s, o) {
                    (Endpoint::Const(a), Endpoint::Const(b)) if a == b => {
                        out.insert((a, a), 1);
                    }
                    (Endpoint::Const(a), Endpoint::Var) | (Endpoint::Var, Endpoint::Const(a)) => {
                        out.insert((a, a), 1);
                    }
                    _ => {}
                }
            }
            return Ok(out);
        }
        let options = self.deadline.options()?;
        let plan = rpq::plan(self.graph, path, s, o, &options);
        let r = rpq::evaluate_with(self.engine, self.graph, &plan, &options, self.relations)?;
        if r.timed_out {
            return Err(SparqlError::Timeout);
        }
        Ok(r.pairs.into_iter().map(|k| (k, 1)).collect())
    }

    /// A closure from each of `starts` (nodes of the graph) to any node, as one batched
    /// plan: the pairs `(start, end)`.
    fn closure_from(&mut self, path: &Path, starts: &[u32]) -> Result<Bag, SparqlError> {
        let options = self.deadline.options()?;
        let mut plan = rpq::plan(
            self.graph,
            path,
            Endpoint::Const(starts[0]),
            Endpoint::Var,
            &options,
        );
        plan.start = StartNodes::Candidates(starts.iter().copied().collect());
        plan.batch_words = options.batch_words;
        let r = rpq::evaluate_with(self.engine, self.graph, &plan, &options, self.relations)?;
        if r.timed_out {
            return Err(SparqlError::Timeout);
        }
        Ok(r.pairs.into_iter().map(|k| (k, 1)).collect())
    }

    /// `a/b`: the bag join of both sides over the middle node. The side with a constant
    /// end goes first; the other side then runs once per middle node when there are few.
    fn sequence(
        &mut self,
        a: &Path,
        b: &Path,
        s: Endpoint,
        o: Endpoint,
    ) -> Result<Bag, SparqlError> {
        let backwards = matches!((s, o), (Endpoint::Var, Endpoint::Const(_)));
        if backwards {
            // Mirror: s a/b o == o ^b/^a s.
            let (ia, ib) = (
                Path::Inverse(Box::new(b.clone())),
                Path::Inverse(Box::new(a.clone())),
            );
            return Ok(swap(self.sequence(&ia, &ib, o, s)?));
        }
        let first = self.eval(a, s, Endpoint::Var)?;
        let mut by_middle: HashMap<u32, Vec<(u32, u64)>> = HashMap::default();
        for ((x, m), c) in first {
            by_middle.entry(m).or_default().push((x, c));
        }
        let mut out = Bag::default();
        let join = |second: Bag, out: &mut Bag| {
            for ((m, y), c2) in second {
                if let Some(starts) = by_middle.get(&m) {
                    for &(x, c1) in starts {
                        *out.entry((x, y)).or_insert(0) += c1 * c2;
                    }
                }
            }
        };
        if by_middle.is_empty() {
            return Ok(out);
        }
        let is_closure = matches!(
            b,
            Path::ZeroOrMore(_) | Path::OneOrMore(_) | Path::ZeroOrOne(_)
        );
        if is_closure && o == Endpoint::Var {
            // One batched run of the engine from every middle node (64·W per batch).
            let middles: Vec<u32> = by_middle.keys().copied().collect();
            let second = self.closure_from(b, &middles)?;
            join(second, &mut out);
        } else if by_middle.len() <= PER_NODE_LIMIT {
            let middles: Vec<u32> = by_middle.keys().copied().collect();
            for m in middles {
                self.deadline.check()?;
                let second = self.eval(b, Endpoint::Const(m), o)?;
                join(second, &mut out);
            }
        } else {
            let second = self.eval(b, Endpoint::Var, o)?;
            join(second, &mut out);
        }
        Ok(out)
    }
}

fn swap(bag: Bag) -> Bag {
    bag.into_iter().map(|((a, b), m)| ((b, a), m)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::cpu::CpuEngine;
    use crate::rpq::MemoryGraph;

    const P: u32 = 10;
    const Q: u32 = 11;

    fn eval(g: &MemoryGraph, path: &Path, s: Endpoint, o: Endpoint) -> Bag {
        evaluate_path(&CpuEngine::new(), g, path, s, o).unwrap()
    }

    /// 0 -p-> 1, 0 -p-> 2, 1 -q-> 3, 2 -q-> 3, 3 -q-> 3
    fn diamond() -> MemoryGraph {
        MemoryGraph::from_triples(vec![(0, P, 1), (0, P, 2), (1, Q, 3), (2, Q, 3), (3, Q, 3)])
    }

    #[test]
    fn sequence_is_a_bag_join_and_a_closure_inside_is_a_set() {
        let g = diamond();
        let seq = Path::Sequence(Path::link(P), Path::link(Q));
        assert_eq!(
            eval(&g, &seq, Endpoint::Const(0), Endpoint::Var)[&(0, 3)],
            2
        );
        // p/q*: two p edges, each joined with the set {self, 3} of q*.
        let star = Path::Sequence(Path::link(P), Box::new(Path::ZeroOrMore(Path::link(Q))));
        let b = eval(&g, &star, Endpoint::Var, Endpoint::Var);
        assert_eq!(b[&(0, 3)], 2);
        assert_eq!(b[&(0, 1)], 1);
        // (p/q)+ is a set.
        let plus = Path::OneOrMore(Box::new(seq));
        assert_eq!(
            eval(&g, &plus, Endpoint::Const(0), Endpoint::Var)[&(0, 3)],
            1
        );
    }

    #[test]
    fn backwards_sequences_match_forward_ones() {
        let g = diamond();
        let seq = Path::Sequence(Path::link(P), Path::link(Q));
        let fwd = eval(&g, &seq, Endpoint::Var, Endpoint::Var);
        let bwd = eval(&g, &seq, Endpoint::Var, Endpoint::Const(3));
        assert_eq!(fwd, bwd);
    }

    #[test]
    fn constants_outside_the_graph_meet_only_themselves() {
        let g = diamond();
        let outside = 1_000;
        let star = Path::ZeroOrMore(Path::link(P));
        let b = eval(&g, &star, Endpoint::Const(outside), Endpoint::Var);
        assert_eq!(
            b.into_iter().collect::<Vec<_>>(),
            vec![((outside, outside), 1)]
        );
        assert!(eval(&g, &Path::Link(P), Endpoint::Const(outside), Endpoint::Var).is_empty());
        // An alternative of two zero-length paths keeps both solutions.
        let alt = Path::Alternative(
            Box::new(star.clone()),
            Box::new(Path::ZeroOrOne(Path::link(Q))),
        );
        assert_eq!(
            eval(&g, &alt, Endpoint::Var, Endpoint::Const(outside))[&(outside, outside)],
            2
        );
    }

    #[test]
    fn negated_sets_have_direct_and_inverse_parts() {
        let g = diamond();
        // !(p): the q edges.
        let b = eval(
            &g,
            &Path::NegatedSet(vec![(P, false)]),
            Endpoint::Var,
            Endpoint::Var,
        );
        assert_eq!(b.len(), 3);
        // !(^q): the p edges, backwards.
        let b = eval(
            &g,
            &Path::NegatedSet(vec![(Q, true)]),
            Endpoint::Const(1),
            Endpoint::Var,
        );
        assert_eq!(b.into_iter().collect::<Vec<_>>(), vec![((1, 0), 1)]);
        // !(p|^p): q forward plus q backwards; the loop 3-q->3 counts once per part.
        let b = eval(
            &g,
            &Path::NegatedSet(vec![(P, false), (P, true)]),
            Endpoint::Const(3),
            Endpoint::Var,
        );
        assert_eq!(b[&(3, 3)], 2);
    }
}
