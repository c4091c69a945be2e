//! Counts of a path pattern's solutions without listing them: what `COUNT(*)` over a
//! group of one path pattern (and VALUES on its ends) asks for.
//!
//! A closure whose start nodes each count once is counted by the RPQ engine from the
//! popcounts of its bit-packed frontiers ([`EvalOptions::count_only`]), batch by batch:
//! its memory is that of the batches, not of the answer. Any other path keeps SPARQL's
//! multiplicities (a sequence counts paths), so it is counted in the multiplicity
//! semiring: a weight per node (how many solutions end there so far) pushed through each
//! link of the path, `w' = w·A`, sequences one side after the other; a closure inside a
//! path is a set per start node and pushes each start's weight to every node it reaches.
//!
//! [`EvalOptions::count_only`]: crate::rpq::EvalOptions::count_only

use rustc_hash::FxHashMap as HashMap;

use super::semantics::{is_closure, Evaluator, Nodes};
use super::store::for_each_in_line;
use super::SparqlError;
use crate::engine::Engine;
use crate::rpq::{self, Path};

/// A weight per node: the solutions so far that end at it.
pub(super) type Weights = HashMap<u32, u64>;

/// The nodes a count starts from, with their weights.
#[derive(Clone, Debug)]
pub(super) enum Start {
    /// Every node, each once (a free variable).
    Any,
    /// These nodes, each with its multiplicity (a constant, or VALUES).
    Weighted(Weights),
}

fn overflow() -> SparqlError {
    SparqlError::Unsupported("a count beyond 2^64 solutions".into())
}

fn add(w: &mut Weights, k: u32, v: u64) -> Result<(), SparqlError> {
    let e = w.entry(k).or_insert(0);
    *e = e.checked_add(v).ok_or_else(overflow)?;
    Ok(())
}

/// The path under any number of inverses, and whether their number is odd.
pub(super) fn strip_inverses(path: &Path) -> (&Path, bool) {
    match path {
        Path::Inverse(a) => {
            let (p, odd) = strip_inverses(a);
            (p, !odd)
        }
        other => (other, false),
    }
}

impl<E: Engine> Evaluator<'_, '_, E> {
    /// The number of solutions of `start path end`, multiplicities kept: each solution
    /// `(x, y)` counts the weight of `x` in `start` times that of `y` in `end` (`None`:
    /// any `y`, once).
    pub(super) fn count(
        &mut self,
        path: &Path,
        start: &Start,
        end: Option<&Weights>,
    ) -> Result<u64, SparqlError> {
        let unit = match start {
            Start::Any => true,
            Start::Weighted(w) => w.values().all(|&m| m == 1),
        };
        if end.is_none() && unit && is_closure(strip_inverses(path).0) {
            let nodes = match start {
                Start::Any => Nodes::Any,
                Start::Weighted(w) => Nodes::of(w.keys().copied().collect()),
            };
            return self.count_closure(path, &nodes);
        }
        let out = self.propagate(path, start, false)?;
        let mut total = 0u64;
        for (y, m) in out {
            let f = match end {
                None => 1,
                Some(e) => e.get(&y).copied().unwrap_or(0),
            };
            total = m
                .checked_mul(f)
                .and_then(|x| total.checked_add(x))
                .ok_or_else(overflow)?;
        }
        Ok(total)
    }

    /// The distinct pairs of a closure (under inverses) from `starts` to any node: the
    /// RPQ engine's count, plus the zero-length pair of each start outside the graph's id
    /// space.
    fn count_closure(&mut self, path: &Path, starts: &Nodes) -> Result<u64, SparqlError> {
        let (inside, outside) = match starts {
            Nodes::Any => (Nodes::Any, 0u64),
            Nodes::Set(ids) => {
                let inside: Vec<u32> = ids.iter().copied().filter(|&c| self.in_space(c)).collect();
                let outside = (ids.len() - inside.len()) as u64;
                (Nodes::Set(inside), outside)
            }
        };
        let zero_length = if path.accepts_empty() { outside } else { 0 };
        if inside.is_empty() {
            return Ok(zero_length);
        }
        let mut options = self.deadline.options()?;
        options.count_only = true;
        let (plan, filter) = self.closure_plan(path, &inside, &Nodes::Any, &options);
        debug_assert!(filter.is_none(), "a free end filters nothing");
        let r = rpq::evaluate_with(self.engine, self.graph, &plan, &options, self.relations)?;
        if r.timed_out {
            return Err(SparqlError::Timeout);
        }
        r.count.checked_add(zero_length).ok_or_else(overflow)
    }

    /// The weights at the other end of `path` (of its inverse when `inverse`) from
    /// `start`.
    fn propagate(
        &mut self,
        path: &Path,
        start: &Start,
        inverse: bool,
    ) -> Result<Weights, SparqlError> {
        self.deadline.check()?;
        match path {
            Path::Link(p) => self.propagate_link(*p, start, inverse),
            Path::Inverse(a) => self.propagate(a, start, !inverse),
            Path::Sequence(a, b) => {
                let (first, second) = if inverse { (b, a) } else { (a, b) };
                let mid = Start::Weighted(self.propagate(first, start, inverse)?);
                self.propagate(second, &mid, inverse)
            }
            Path::Alternative(a, b) => {
                let mut x = self.propagate(a, start, inverse)?;
                for (k, m) in self.propagate(b, start, inverse)? {
                    add(&mut x, k, m)?;
                }
                Ok(x)
            }
            Path::NegatedSet(items) => {
                let forward_part = items.is_empty() || items.iter().any(|i| !i.1);
                let inverse_part = items.iter().any(|i| i.1);
                let mut out = Weights::default();
                for p in self.graph.predicates() {
                    let mut parts = Vec::new();
                    if forward_part && !items.contains(&(p, false)) {
                        parts.push(inverse);
                    }
                    if inverse_part && !items.contains(&(p, true)) {
                        parts.push(!inverse);
                    }
                    for dir in parts {
                        for (k, m) in self.propagate_link(p, start, dir)? {
                            add(&mut out, k, m)?;
                        }
                    }
                }
                Ok(out)
            }
            Path::ZeroOrMore(_) | Path::OneOrMore(_) | Path::ZeroOrOne(_) => {
                // A set per start node: each start's weight reaches every node once.
                let nodes = match start {
                    Start::Any => Nodes::Any,
                    Start::Weighted(w) => Nodes::of(w.keys().copied().collect()),
                };
                let bag = if inverse {
                    self.eval(path, &Nodes::Any, &nodes)?
                } else {
                    self.eval(path, &nodes, &Nodes::Any)?
                };
                let mut out = Weights::default();
                for ((x, y), _) in bag {
                    let (from, to) = if inverse { (y, x) } else { (x, y) };
                    let w = match start {
                        Start::Any => 1,
                        Start::Weighted(w) => w.get(&from).copied().unwrap_or(0),
                    };
                    add(&mut out, to, w)?;
                }
                Ok(out)
            }
        }
    }

    /// The weights one link of `p` carries from `start` (from object to subject when
    /// `inverse`): `w·A` (or `w·Aᵀ`).
    fn propagate_link(&self, p: u32, start: &Start, inverse: bool) -> Result<Weights, SparqlError> {
        let mut out = Weights::default();
        let Some(t) = self.graph.relation(p) else {
            return Ok(out);
        };
        match start {
            Start::Any => {
                for (r, c) in t.cells() {
                    add(&mut out, if inverse { r } else { c }, 1)?;
                }
            }
            // Many weighted nodes against the relation: one pass over its cells costs
            // less than a descent per node.
            Start::Weighted(w) if (w.len() as u64).saturating_mul(16) > t.nnz() => {
                for (r, c) in t.cells() {
                    let (from, to) = if inverse { (c, r) } else { (r, c) };
                    if let Some(&m) = w.get(&from) {
                        add(&mut out, to, m)?;
                    }
                }
            }
            Start::Weighted(w) => {
                for (&from, &m) in w {
                    if !self.in_space(from) {
                        continue;
                    }
                    let mut line = Vec::new();
                    for_each_in_line(&t, inverse, from, |to| line.push(to));
                    for to in line {
                        add(&mut out, to, m)?;
                    }
                }
            }
        }
        Ok(out)
    }
}
