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

use super::store::for_each_in_line;
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
    pub(super) fn options(self) -> Result<EvalOptions, SparqlError> {
        self.check()?;
        Ok(EvalOptions {
            timeout: self.0.map(|d| d.saturating_duration_since(Instant::now())),
            ..EvalOptions::default()
        })
    }
}

/// Distinct `(subject, object)` pairs with their multiplicities (a bag of solutions).
pub type Bag = HashMap<(u32, u32), u64>;

/// One solution of a bag: a pair and its count.
type Solution = ((u32, u32), u64);

/// The nodes one end of a path pattern may take.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Nodes {
    /// Any node: a free variable.
    Any,
    /// These ids, ascending and distinct: a constant, or the values the rest of a group
    /// binds a variable to. Ids outside the graph's id space only take part in
    /// zero-length paths.
    Set(Vec<u32>),
}

impl Nodes {
    /// The set of `ids` (sorted and deduplicated here).
    pub fn of(mut ids: Vec<u32>) -> Nodes {
        ids.sort_unstable();
        ids.dedup();
        Nodes::Set(ids)
    }

    /// One end as an RPQ endpoint gives it.
    pub fn from_endpoint(e: Endpoint) -> Nodes {
        match e {
            Endpoint::Var => Nodes::Any,
            Endpoint::Const(c) => Nodes::Set(vec![c]),
        }
    }

    /// Whether `id` may be taken.
    pub fn allows(&self, id: u32) -> bool {
        match self {
            Nodes::Any => true,
            Nodes::Set(s) => s.binary_search(&id).is_ok(),
        }
    }

    /// The number of ids, `None` for [`Nodes::Any`].
    pub fn len(&self) -> Option<usize> {
        match self {
            Nodes::Any => None,
            Nodes::Set(s) => Some(s.len()),
        }
    }

    /// Whether this is an empty set (no solution can match).
    pub fn is_empty(&self) -> bool {
        matches!(self, Nodes::Set(s) if s.is_empty())
    }
}

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
    evaluate_path_between(
        engine,
        graph,
        path,
        &Nodes::from_endpoint(subject),
        &Nodes::from_endpoint(object),
        relations,
        deadline,
    )
}

/// `s path o` for every `s` of `starts` (nodes of the graph's id space) and any `o`.
pub fn evaluate_path_from<E: Engine>(
    engine: &E,
    graph: &dyn PathGraph,
    path: &Path,
    starts: &[u32],
    relations: &mut dyn RelationSource<E>,
    deadline: Deadline,
) -> Result<Bag, SparqlError> {
    let starts: Vec<u32> = starts
        .iter()
        .copied()
        .filter(|&s| s < graph.node_count())
        .collect();
    evaluate_path_between(
        engine,
        graph,
        path,
        &Nodes::of(starts),
        &Nodes::Any,
        relations,
        deadline,
    )
}

/// `subject path object` with each end restricted to `subject` and `object`: every
/// closure runs once, from all the nodes of one end together (batched plans of `64·W`
/// start nodes), from the end with fewer nodes, the other end filtering its answer; a
/// sequence carries the middle nodes of its first side into its second as a set.
pub fn evaluate_path_between<E: Engine>(
    engine: &E,
    graph: &dyn PathGraph,
    path: &Path,
    subject: &Nodes,
    object: &Nodes,
    relations: &mut dyn RelationSource<E>,
    deadline: Deadline,
) -> Result<Bag, SparqlError> {
    Evaluator {
        engine,
        graph,
        relations,
        deadline,
        limit: None,
    }
    .eval(path, subject, object)
}

pub(super) struct Evaluator<'a, 'r, E: Engine> {
    pub(super) engine: &'a E,
    pub(super) graph: &'a dyn PathGraph,
    pub(super) relations: &'r mut dyn RelationSource<E>,
    pub(super) deadline: Deadline,
    /// At least this many of the path's pairs will do (a LIMIT over a lone pattern):
    /// a closure or link of the whole path, whose pairs are a set, stops there. Taken by
    /// the first [`Evaluator::eval`]: the parts of a path are never cut.
    pub(super) limit: Option<u64>,
}

/// Whether `path` is a closure (`*`, `+`, `?`): a set per start node.
pub(super) fn is_closure(path: &Path) -> bool {
    matches!(
        path,
        Path::ZeroOrMore(_) | Path::OneOrMore(_) | Path::ZeroOrOne(_)
    )
}

impl<E: Engine> Evaluator<'_, '_, E> {
    /// Whether `id` can occur in a relation of the graph.
    pub(super) fn in_space(&self, id: u32) -> bool {
        id < self.graph.node_count()
    }

    pub(super) fn eval(&mut self, path: &Path, s: &Nodes, o: &Nodes) -> Result<Bag, SparqlError> {
        if s.is_empty() || o.is_empty() {
            return Ok(Bag::default());
        }
        let limit = self.limit.take();
        match path {
            Path::Link(p) => Ok(self.link(*p, s, o, false, limit)),
            Path::Inverse(a) => {
                self.limit = limit;
                Ok(swap(self.eval(a, o, s)?))
            }
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
                self.closure(path, s, o, limit)
            }
        }
    }

    /// One solution per edge of `p` between the endpoints (`inverse`: object to subject);
    /// with both ends free, the first `limit` edges only.
    fn link(&self, p: u32, s: &Nodes, o: &Nodes, inverse: bool, limit: Option<u64>) -> Bag {
        let pairs = self.link_pairs(p, s, o, inverse, limit);
        let mut out = Bag::with_capacity_and_hasher(pairs.len(), Default::default());
        for k in pairs {
            *out.entry(k).or_insert(0) += 1;
        }
        out
    }

    /// The edges of [`Evaluator::link`], as read: each cell is read once, so the pairs
    /// are distinct.
    fn link_pairs(
        &self,
        p: u32,
        s: &Nodes,
        o: &Nodes,
        inverse: bool,
        limit: Option<u64>,
    ) -> Vec<(u32, u32)> {
        let Some(t) = self.graph.relation(p) else {
            return Vec::new();
        };
        // In tree coordinates (row = triple subject): `inverse` swaps the ends.
        let (rs, ro) = if inverse { (o, s) } else { (s, o) };
        let mut pairs: Vec<(u32, u32)> = Vec::new();
        let mut push = |r: u32, c: u32| pairs.push(if inverse { (c, r) } else { (r, c) });
        let rows = |set: &[u32], other: &Nodes, push: &mut dyn FnMut(u32, u32)| {
            for &r in set.iter().filter(|&&r| self.in_space(r)) {
                for_each_in_line(&t, false, r, |c| {
                    if other.allows(c) {
                        push(r, c)
                    }
                });
            }
        };
        let columns = |set: &[u32], other: &Nodes, push: &mut dyn FnMut(u32, u32)| {
            for &c in set.iter().filter(|&&c| self.in_space(c)) {
                for_each_in_line(&t, true, c, |r| {
                    if other.allows(r) {
                        push(r, c)
                    }
                });
            }
        };
        match (rs, ro) {
            (Nodes::Set(r), Nodes::Set(c)) if r.len() <= c.len() => rows(r, ro, &mut push),
            (Nodes::Set(_), Nodes::Set(c)) => columns(c, rs, &mut push),
            (Nodes::Set(r), Nodes::Any) => rows(r, ro, &mut push),
            (Nodes::Any, Nodes::Set(c)) => columns(c, rs, &mut push),
            (Nodes::Any, Nodes::Any) => match limit {
                // Rows in order until enough cells: the relation is never decoded whole.
                Some(n) => {
                    let mut found = 0u64;
                    let rows = t.rows().min(u64::from(self.graph.node_count())) as u32;
                    for r in 0..rows {
                        if found >= n {
                            break;
                        }
                        for_each_in_line(&t, false, r, |c| {
                            push(r, c);
                            found += 1;
                        });
                    }
                }
                None => {
                    for (r, c) in t.cells() {
                        push(r, c)
                    }
                }
            },
        }
        pairs
    }

    /// [`Evaluator::eval`] as a list of distinct pairs with their counts. A link's (or an
    /// inverse link's) edges are listed as read, without the bag's hash map: building it
    /// was a third of a short sequence's time (`wd:Q183 wdt:P530/wdt:P530 wd:Q142`).
    fn solutions(
        &mut self,
        path: &Path,
        s: &Nodes,
        o: &Nodes,
    ) -> Result<Vec<Solution>, SparqlError> {
        let link = match path {
            Path::Link(p) => Some((*p, false)),
            Path::Inverse(a) => match **a {
                Path::Link(p) => Some((p, true)),
                _ => None,
            },
            _ => None,
        };
        match link {
            Some((p, inverse)) if !s.is_empty() && !o.is_empty() => {
                let limit = self.limit.take();
                let pairs = self.link_pairs(p, s, o, inverse, limit);
                Ok(pairs.into_iter().map(|k| (k, 1)).collect())
            }
            _ => Ok(self.eval(path, s, o)?.into_iter().collect()),
        }
    }

    /// `!(…)`: a forward part over every predicate not listed forward (present when a
    /// forward item is listed or the list is empty) and an inverse part over every
    /// predicate not listed inverse (present when an inverse item is listed); one
    /// solution per matching triple.
    fn negated(&self, items: &[(u32, bool)], s: &Nodes, o: &Nodes) -> Bag {
        let forward_part = items.is_empty() || items.iter().any(|i| !i.1);
        let inverse_part = items.iter().any(|i| i.1);
        let mut out = Bag::default();
        for p in self.graph.predicates() {
            if forward_part && !items.contains(&(p, false)) {
                for (k, m) in self.link(p, s, o, false, None) {
                    *out.entry(k).or_insert(0) += m;
                }
            }
            if inverse_part && !items.contains(&(p, true)) {
                for (k, m) in self.link(p, s, o, true, None) {
                    *out.entry(k).or_insert(0) += m;
                }
            }
        }
        out
    }

    /// A closure: a set, from the RPQ engine in one plan; ends outside the graph's id
    /// space only meet themselves, by a zero-length path.
    fn closure(
        &mut self,
        path: &Path,
        s: &Nodes,
        o: &Nodes,
        limit: Option<u64>,
    ) -> Result<Bag, SparqlError> {
        let mut out = Bag::default();
        let split = |n: &Nodes| -> (Nodes, Vec<u32>) {
            match n {
                Nodes::Any => (Nodes::Any, Vec::new()),
                Nodes::Set(ids) => {
                    let (inside, outside): (Vec<u32>, Vec<u32>) =
                        ids.iter().partition(|&&c| self.in_space(c));
                    (Nodes::Set(inside), outside)
                }
            }
        };
        let (s_in, s_out) = split(s);
        let (o_in, o_out) = split(o);
        if path.accepts_empty() {
            for &a in &s_out {
                if o.allows(a) {
                    out.insert((a, a), 1);
                }
            }
            if *s == Nodes::Any {
                for &a in &o_out {
                    out.insert((a, a), 1);
                }
            }
        }
        if s_in.is_empty() || o_in.is_empty() {
            return Ok(out);
        }
        let pairs = self.closure_pairs(path, &s_in, &o_in, limit)?;
        let mut bag: Bag = pairs.into_iter().map(|k| (k, 1)).collect();
        bag.extend(out);
        Ok(bag)
    }

    /// The RPQ plan of a closure between two ends of the graph's id space (no empty
    /// set): from a single constant end (with a target when both are), else from the set
    /// end with fewer nodes as batches of start candidates, else with both ends free;
    /// with the end the plan leaves free when it is a set: the answer's pairs must have
    /// their subject (`true`) or object (`false`) in it.
    pub(super) fn closure_plan(
        &self,
        path: &Path,
        s: &Nodes,
        o: &Nodes,
        options: &EvalOptions,
    ) -> (rpq::Plan, Option<(Nodes, bool)>) {
        let one = |n: &Nodes| match n {
            Nodes::Set(v) if v.len() == 1 => Some(v[0]),
            _ => None,
        };
        let set = |n: &Nodes| (*n != Nodes::Any).then(|| n.clone());
        match (one(s), one(o)) {
            (Some(x), Some(y)) => {
                let plan = rpq::plan(
                    self.graph,
                    path,
                    Endpoint::Const(x),
                    Endpoint::Const(y),
                    options,
                );
                return (plan, None);
            }
            (Some(x), None) => {
                let plan = rpq::plan(self.graph, path, Endpoint::Const(x), Endpoint::Var, options);
                return (plan, set(o).map(|f| (f, false)));
            }
            (None, Some(y)) => {
                let plan = rpq::plan(self.graph, path, Endpoint::Var, Endpoint::Const(y), options);
                return (plan, set(s).map(|f| (f, true)));
            }
            (None, None) => {}
        }
        let from_object = match (s.len(), o.len()) {
            (Some(a), Some(b)) => b < a,
            (None, Some(_)) => true,
            _ => false,
        };
        let (start, other) = if from_object { (o, s) } else { (s, o) };
        let Nodes::Set(ids) = start else {
            let plan = rpq::plan(self.graph, path, Endpoint::Var, Endpoint::Var, options);
            return (plan, None);
        };
        let mut plan = if from_object {
            rpq::plan(
                self.graph,
                path,
                Endpoint::Var,
                Endpoint::Const(ids[0]),
                options,
            )
        } else {
            rpq::plan(
                self.graph,
                path,
                Endpoint::Const(ids[0]),
                Endpoint::Var,
                options,
            )
        };
        let starts = rpq::starting_nodes(self.graph, &plan, ids.iter().copied().collect());
        plan.batch_words = options
            .batch_words
            .max(1)
            .min((starts.len().div_ceil(64) as usize).max(1));
        plan.start = StartNodes::Candidates(starts);
        (plan, set(other).map(|f| (f, from_object)))
    }

    /// The `(subject, object)` pairs of a closure between ends of the graph's id space;
    /// at least `limit` of them (or all) where no filter follows the engine's answer.
    fn closure_pairs(
        &mut self,
        path: &Path,
        s: &Nodes,
        o: &Nodes,
        limit: Option<u64>,
    ) -> Result<Vec<(u32, u32)>, SparqlError> {
        let mut options = self.deadline.options()?;
        let (plan, filter) = self.closure_plan(path, s, o, &options);
        if filter.is_none() {
            options.limit = limit;
        }
        let r = rpq::evaluate_with(self.engine, self.graph, &plan, &options, self.relations)?;
        if r.timed_out {
            return Err(SparqlError::Timeout);
        }
        let mut pairs = r.pairs;
        if let Some((f, subject)) = filter {
            pairs.retain(|&(x, y)| f.allows(if subject { x } else { y }));
        }
        Ok(pairs)
    }

    /// `a/b`: the bag join of both sides over the middle node. The side with a set end
    /// goes first (the object side through the mirrored path when only it is a set);
    /// the other side then runs from the middle nodes as a set.
    fn sequence(&mut self, a: &Path, b: &Path, s: &Nodes, o: &Nodes) -> Result<Bag, SparqlError> {
        if *s == Nodes::Any && *o != Nodes::Any {
            // Mirror: s a/b o == o ^b/^a s.
            let (ia, ib) = (
                Path::Inverse(Box::new(b.clone())),
                Path::Inverse(Box::new(a.clone())),
            );
            return Ok(swap(self.sequence(&ia, &ib, o, s)?));
        }
        let first = self.solutions(a, s, &Nodes::Any)?;
        if first.is_empty() {
            return Ok(Bag::default());
        }
        // The first side's solutions sorted by middle node, each middle's a run: one
        // allocation, where a map of lists paid one per middle node (most of a short
        // sequence's time).
        let mut by_middle: Vec<(u32, u32, u64)> =
            first.into_iter().map(|((x, m), c)| (m, x, c)).collect();
        by_middle.sort_unstable_by_key(|&(m, _, _)| m);
        let mut middles: Vec<u32> = by_middle.iter().map(|&(m, _, _)| m).collect();
        middles.dedup();
        self.deadline.check()?;
        let second = self.solutions(b, &Nodes::Set(middles), o)?;
        let mut out = Bag::with_capacity_and_hasher(second.len(), Default::default());
        for ((m, y), c2) in second {
            let from = by_middle.partition_point(|&(k, _, _)| k < m);
            for &(_, x, c1) in by_middle[from..].iter().take_while(|&&(k, _, _)| k == m) {
                *out.entry((x, y)).or_insert(0) += c1 * c2;
            }
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
