//! The planner: automaton, direction of evaluation, start nodes and batching.

use std::fmt;

use roaring::RoaringBitmap;

use super::automaton::{Automaton, Dir, PredClass};
use super::graph::{support, PathGraph};
use super::{Endpoint, EvalOptions, Path, PredId};

/// A relation the executor loads: one predicate, or the union of several (a negated
/// property set with more than one predicate left).
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum RelKey {
    /// The relation of one predicate.
    Pred(PredId),
    /// The union of these predicates' relations (sorted).
    Union(Vec<PredId>),
}

/// Which end the evaluation starts from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EvalDirection {
    /// From the subject, with the automaton of the path.
    Forward,
    /// From the object, with the automaton of the inverse path; pairs are swapped back.
    Backward,
}

/// The nodes the evaluation starts from.
#[derive(Clone, Debug, PartialEq)]
pub enum StartNodes {
    /// One constant.
    Const(u32),
    /// Every node that can start a match (both ends variables), run in batches.
    Candidates(RoaringBitmap),
}

/// A plan: what [`execute`](super::execute) runs. Its `Display` is `k2rpq explain`.
#[derive(Clone, Debug)]
pub struct Plan {
    /// The path as given.
    pub path: Path,
    /// The subject end.
    pub subject: Endpoint,
    /// The object end.
    pub object: Endpoint,
    /// Where the evaluation starts.
    pub direction: EvalDirection,
    /// Why that direction.
    pub reason: String,
    /// The automaton run: of the path (forward) or of its inverse (backward).
    pub automaton: Automaton,
    /// Per state, the relation read by transitions into it and the direction it is
    /// followed; `None` for state 0 and for symbols with no relation in the graph (the
    /// state is then unreachable).
    pub relations: Vec<Option<(RelKey, Dir)>>,
    /// Start nodes.
    pub start: StartNodes,
    /// The node to reach when both ends are constants (evaluation stops once reached).
    pub target: Option<u32>,
    /// Words per node of the frontier batches (64 start nodes each).
    pub batch_words: usize,
}

impl Plan {
    /// The fewest answers a run has found, from the nodes each automaton state has
    /// reached (`reached[j]` for state `j`): every node an accepting state reached is one,
    /// so the largest of those sets is a lower bound. With a target only the target is an
    /// answer (and reaching it ends the run), so the bound is 0.
    pub(crate) fn answers_at_least(&self, reached: impl Fn(usize) -> u64) -> u64 {
        if self.target.is_some() {
            return 0;
        }
        let a = &self.automaton;
        (0..a.accepting.len())
            .filter(|&j| a.accepting[j])
            .map(reached)
            .max()
            .unwrap_or(0)
    }

    /// Number of start-node batches.
    pub fn batches(&self) -> u64 {
        match &self.start {
            StartNodes::Const(_) => 1,
            StartNodes::Candidates(c) => c.len().div_ceil(64 * self.batch_words as u64),
        }
    }

    /// A `Display` of the plan naming predicates with `name` (IRIs, for `explain`).
    pub fn display_with<'a>(
        &'a self,
        name: &'a dyn Fn(PredId) -> Option<String>,
    ) -> impl fmt::Display + 'a {
        PlanDisplay { plan: self, name }
    }
}

struct PlanDisplay<'a> {
    plan: &'a Plan,
    name: &'a dyn Fn(PredId) -> Option<String>,
}

impl fmt::Display for PlanDisplay<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let p = self.plan;
        let name = self.name;
        let end = |e: Endpoint| match e {
            Endpoint::Var => "?var".to_string(),
            Endpoint::Const(c) => name(c).unwrap_or_else(|| format!("node {c}")),
        };
        f.write_str("path: ")?;
        p.path.fmt_with(f, name)?;
        writeln!(f)?;
        writeln!(f, "ends: {} -> {}", end(p.subject), end(p.object))?;
        writeln!(
            f,
            "direction: {} ({})",
            match p.direction {
                EvalDirection::Forward => "forward, from the subject",
                EvalDirection::Backward => "backward, from the object with the inverse path",
            },
            p.reason
        )?;
        writeln!(
            f,
            "automaton: {} states{}",
            p.automaton.states(),
            if p.automaton.accepts_empty() {
                ", accepts the empty path"
            } else {
                ""
            }
        )?;
        p.automaton.fmt_with(f, name)?;
        writeln!(f, "products per step (into each state):")?;
        for (j, r) in p.relations.iter().enumerate().skip(1) {
            match r {
                None => writeln!(f, "  q{j}: none (no relation in the graph: unreachable)")?,
                Some((key, dir)) => {
                    let prod = match dir {
                        Dir::Forward => "left product (forward)",
                        Dir::Inverse => "right product (inverse)",
                    };
                    match key {
                        RelKey::Pred(x) => writeln!(
                            f,
                            "  q{j}: {prod} with {}",
                            name(*x).unwrap_or_else(|| format!("p{x}"))
                        )?,
                        RelKey::Union(xs) => writeln!(
                            f,
                            "  q{j}: {prod} with the union of {} predicates",
                            xs.len()
                        )?,
                    }
                }
            }
        }
        match &p.start {
            StartNodes::Const(c) => writeln!(
                f,
                "start: {} (id {c}), one batch of 1 word",
                name(*c).unwrap_or_else(|| "a node".into())
            )?,
            StartNodes::Candidates(c) => writeln!(
                f,
                "start: {} candidate nodes in {} batches of {} ({} words per node)",
                c.len(),
                p.batches(),
                64 * p.batch_words,
                p.batch_words
            )?,
        }
        if let Some(t) = p.target {
            writeln!(
                f,
                "stop: as soon as node {t} is reached in an accepting state"
            )?;
        }
        Ok(())
    }
}

impl fmt::Display for Plan {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.display_with(&|_| None).fmt(f)
    }
}

/// Resolves each state's symbol to a relation of `graph`.
fn resolve(graph: &dyn PathGraph, a: &Automaton) -> Vec<Option<(RelKey, Dir)>> {
    let all = graph.predicates();
    a.symbols
        .iter()
        .map(|s| {
            let s = s.as_ref()?;
            let key = match &s.class {
                PredClass::One(p) => {
                    graph.relation(*p)?;
                    RelKey::Pred(*p)
                }
                PredClass::AllExcept(ex) => {
                    let left: Vec<PredId> = all
                        .iter()
                        .copied()
                        .filter(|p| ex.binary_search(p).is_err())
                        .collect();
                    match left.len() {
                        0 => return None,
                        1 => RelKey::Pred(left[0]),
                        _ => RelKey::Union(left),
                    }
                }
            };
            Some((key, s.dir))
        })
        .collect()
}

fn preds_of(key: &RelKey) -> Vec<PredId> {
    match key {
        RelKey::Pred(p) => vec![*p],
        RelKey::Union(ps) => ps.clone(),
    }
}

/// Edges leaving `node` through the first transitions (the work of a first step), counted
/// up to `cap`: comparing two ends needs only the smaller count exactly, and counting a
/// large line costs descents (line lists, once built, answer at once).
fn fan_out(
    graph: &dyn PathGraph,
    a: &Automaton,
    rel: &[Option<(RelKey, Dir)>],
    node: u32,
    cap: u64,
) -> u64 {
    if node >= graph.node_count() {
        return 0;
    }
    let mut total = 0u64;
    for &t in &a.targets[0] {
        if let Some((key, dir)) = &rel[t] {
            for p in preds_of(key) {
                if total >= cap {
                    return cap;
                }
                if let Some(tree) = graph.relation(p) {
                    total += tree.line_len_upto(*dir == Dir::Inverse, node, cap - total);
                }
            }
        }
    }
    total.min(cap)
}

/// The nodes a match of `path` can start from as its subject: every graph node when the
/// path accepts the empty word, else those with an edge for a first symbol.
pub fn subject_candidates(graph: &dyn PathGraph, path: &Path) -> RoaringBitmap {
    let forward = Automaton::new(path, false);
    if forward.accepts_empty() {
        return graph.nodes().clone();
    }
    let relations = resolve(graph, &forward);
    candidates(graph, &forward, &relations)
}

/// Nodes that have an edge for some first transition.
fn candidates(
    graph: &dyn PathGraph,
    a: &Automaton,
    rel: &[Option<(RelKey, Dir)>],
) -> RoaringBitmap {
    let mut out = RoaringBitmap::new();
    let mut seen = std::collections::BTreeSet::new();
    for &t in &a.targets[0] {
        if let Some((key, dir)) = &rel[t] {
            for p in preds_of(key) {
                if seen.insert((p, *dir)) {
                    if let Some(tree) = graph.relation(p) {
                        out |= support(&tree, *dir == Dir::Forward);
                    }
                }
            }
        }
    }
    out
}

/// Edges of a path's first relations per bound start node up to which
/// [`starting_nodes`] lists their nodes: listing costs a pass over those edges, and a
/// start with no first edge would otherwise still ride in a batch (on a device, 512
/// starts cost a fixed point of launches whatever they find).
const LISTED_EDGES_PER_START: u64 = 4;

/// `starts` without the nodes where no match of `plan`'s automaton can begin, those with
/// no edge for a first symbol, when the first relations hold at most
/// [`LISTED_EDGES_PER_START`] edges per start; `starts` unchanged otherwise, or when the
/// path accepts the empty word (every start then matches itself).
pub(crate) fn starting_nodes(
    graph: &dyn PathGraph,
    plan: &Plan,
    starts: RoaringBitmap,
) -> RoaringBitmap {
    let a = &plan.automaton;
    if a.accepts_empty() {
        return starts;
    }
    let first_edges: u64 = a.targets[0]
        .iter()
        .filter_map(|&t| plan.relations[t].as_ref())
        .flat_map(|(key, _)| preds_of(key))
        .filter_map(|p| graph.relation(p))
        .map(|tree| tree.nnz())
        .sum();
    if first_edges > starts.len().saturating_mul(LISTED_EDGES_PER_START) {
        return starts;
    }
    starts & candidates(graph, a, &plan.relations)
}

/// Plans `subject path object` on `graph`: builds the automaton, picks the direction of
/// evaluation and the start nodes.
///
/// - constant → variable: forward from the constant;
/// - variable → constant: backward from the constant (automaton of the inverse path);
/// - constant → constant: from the end with fewer first edges, stopping at the other;
/// - variable → variable: from the side with fewer candidate start nodes (nodes with an
///   edge for a first symbol; every graph node when the path accepts the empty word), in
///   batches of `64·W`.
pub fn plan(
    graph: &dyn PathGraph,
    path: &Path,
    subject: Endpoint,
    object: Endpoint,
    options: &EvalOptions,
) -> Plan {
    let fwd = Automaton::new(path, false);
    let fwd_rel = resolve(graph, &fwd);
    let backward = || {
        let a = Automaton::new(path, true);
        let r = resolve(graph, &a);
        (a, r)
    };
    let w = options.batch_words.max(1);
    let (direction, reason, (automaton, relations), start, target, words) = match (subject, object)
    {
        (Endpoint::Const(s), Endpoint::Var) => (
            EvalDirection::Forward,
            "the subject is constant".to_string(),
            (fwd, fwd_rel),
            StartNodes::Const(s),
            None,
            1,
        ),
        (Endpoint::Var, Endpoint::Const(o)) => (
            EvalDirection::Backward,
            "the object is constant".to_string(),
            backward(),
            StartNodes::Const(o),
            None,
            1,
        ),
        (Endpoint::Const(s), Endpoint::Const(o)) => {
            let (ba, br) = backward();
            let cf = fan_out(graph, &fwd, &fwd_rel, s, u64::MAX);
            // Counted up to `cf`: reaching it means the object side is no better.
            let cb = fan_out(graph, &ba, &br, o, cf);
            if cb < cf {
                (
                    EvalDirection::Backward,
                    format!(
                        "both constant: {cb} first edges from the object, {cf} from the subject"
                    ),
                    (ba, br),
                    StartNodes::Const(o),
                    Some(s),
                    1,
                )
            } else {
                (
                    EvalDirection::Forward,
                    format!(
                        "both constant: {cf} first edges from the subject, {}{cb} from the object",
                        if cb == cf && cf > 0 { "at least " } else { "" }
                    ),
                    (fwd, fwd_rel),
                    StartNodes::Const(s),
                    Some(o),
                    1,
                )
            }
        }
        (Endpoint::Var, Endpoint::Var) => {
            if fwd.accepts_empty() {
                let c = graph.nodes().clone();
                let words = w.min(c.len().div_ceil(64).max(1) as usize);
                (
                    EvalDirection::Forward,
                    "the path accepts the empty word: every graph node starts".to_string(),
                    (fwd, fwd_rel),
                    StartNodes::Candidates(c),
                    None,
                    words,
                )
            } else {
                let (ba, br) = backward();
                let cf = candidates(graph, &fwd, &fwd_rel);
                let cb = candidates(graph, &ba, &br);
                let pick_back = cb.len() < cf.len();
                let reason = format!(
                    "both variables: {} candidate start nodes forward, {} backward",
                    cf.len(),
                    cb.len()
                );
                let (dir, aut, c) = if pick_back {
                    (EvalDirection::Backward, (ba, br), cb)
                } else {
                    (EvalDirection::Forward, (fwd, fwd_rel), cf)
                };
                let words = w.min(c.len().div_ceil(64).max(1) as usize);
                (dir, reason, aut, StartNodes::Candidates(c), None, words)
            }
        }
    };
    Plan {
        path: path.clone(),
        subject,
        object,
        direction,
        reason,
        automaton,
        relations,
        start,
        target,
        batch_words: words,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rpq::graph::MemoryGraph;

    #[test]
    fn bound_starts_without_a_first_edge_are_dropped_where_listing_is_cheap() {
        // p: 1→2→3 and 5→6; q: a long chain over 100..200.
        let mut triples = vec![(1, 7, 2), (2, 7, 3), (5, 7, 6)];
        triples.extend((100..200).map(|i| (i, 8, i + 1)));
        let g = MemoryGraph::from_triples(triples);
        let starts: RoaringBitmap = (0..10).collect();
        let from = |path: Path| {
            plan(
                &g,
                &path,
                Endpoint::Const(1),
                Endpoint::Var,
                &EvalOptions::default(),
            )
        };
        let plus = Path::OneOrMore(Box::new(Path::Link(7)));
        let kept = starting_nodes(&g, &from(plus.clone()), starts.clone());
        assert_eq!(kept.iter().collect::<Vec<_>>(), vec![1, 2, 5]);
        // Backwards (the plan of an inverse path): the nodes with an incoming edge.
        let back = plan(
            &g,
            &plus,
            Endpoint::Var,
            Endpoint::Const(3),
            &EvalOptions::default(),
        );
        let kept = starting_nodes(&g, &back, starts.clone());
        assert_eq!(kept.iter().collect::<Vec<_>>(), vec![2, 3, 6]);
        // Every start matches itself through `*`.
        let star = Path::ZeroOrMore(Box::new(Path::Link(7)));
        assert_eq!(starting_nodes(&g, &from(star), starts.clone()), starts);
        // A first relation far larger than the starts is not listed.
        let long = Path::OneOrMore(Box::new(Path::Link(8)));
        let few: RoaringBitmap = [0, 150].into_iter().collect();
        assert_eq!(starting_nodes(&g, &from(long), few.clone()), few);
    }
}
