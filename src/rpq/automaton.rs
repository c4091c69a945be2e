//! Glushkov automata (no ε-transitions) of path expressions over
//! (predicate class, direction) symbols.
//!
//! Inverses are pushed down to the leaves first (`^(a/b)` = `^b/^a`, `^(a|b)` = `^a|^b`,
//! `^(a*)` = `(^a)*`), so every leaf is one [`Symbol`]: a predicate or a negated class,
//! followed forward or backward. State 0 is the initial state, state `i ≥ 1` is the
//! `i`-th leaf (position); every transition into state `i` reads the symbol of leaf `i`.

use std::collections::BTreeSet;
use std::fmt;

use super::{Path, PredId};

/// Which way an edge is followed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Dir {
    /// Subject to object: a left product.
    Forward,
    /// Object to subject: a right product.
    Inverse,
}

impl Dir {
    /// The other way.
    pub fn flipped(self) -> Dir {
        match self {
            Dir::Forward => Dir::Inverse,
            Dir::Inverse => Dir::Forward,
        }
    }
}

/// The predicates one transition reads.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum PredClass {
    /// One predicate.
    One(PredId),
    /// Every predicate of the graph except these (sorted): a negated property set.
    AllExcept(Vec<PredId>),
}

impl PredClass {
    /// Whether predicate `p` is in the class.
    pub fn contains(&self, p: PredId) -> bool {
        match self {
            PredClass::One(q) => *q == p,
            PredClass::AllExcept(ex) => ex.binary_search(&p).is_err(),
        }
    }
}

/// A transition label: a class of predicates and a direction.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Symbol {
    /// The predicates.
    pub class: PredClass,
    /// The direction.
    pub dir: Dir,
}

impl Symbol {
    /// Whether this symbol reads the edge label `(p, dir)`.
    pub fn matches(&self, p: PredId, dir: Dir) -> bool {
        self.dir == dir && self.class.contains(p)
    }

    /// Writes the symbol with predicate names from `name`.
    pub fn fmt_with(
        &self,
        f: &mut dyn fmt::Write,
        name: &dyn Fn(PredId) -> Option<String>,
    ) -> fmt::Result {
        let pred = |p: PredId| name(p).unwrap_or_else(|| format!("p{p}"));
        let inv = if self.dir == Dir::Inverse { "^" } else { "" };
        match &self.class {
            PredClass::One(p) => write!(f, "{inv}{}", pred(*p)),
            PredClass::AllExcept(ex) => {
                write!(f, "{inv}!(")?;
                for (i, p) in ex.iter().enumerate() {
                    write!(f, "{}{}", if i > 0 { "|" } else { "" }, pred(*p))?;
                }
                f.write_str(")")
            }
        }
    }
}

/// A regular expression over symbols, inverses already pushed to the leaves.
enum Re {
    Leaf(usize),
    Seq(Box<Re>, Box<Re>),
    Alt(Box<Re>, Box<Re>),
    Star(Box<Re>),
    Plus(Box<Re>),
    Opt(Box<Re>),
}

/// A Glushkov automaton: `states` = 1 + leaves; `targets[i]` are the states reachable
/// from state `i` in one transition (each reads `symbols[target]`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Automaton {
    /// `symbols[i]` labels every transition into state `i`; `symbols[0]` is `None`.
    pub symbols: Vec<Option<Symbol>>,
    /// `targets[i]`: the states that follow state `i`, ascending.
    pub targets: Vec<Vec<usize>>,
    /// Whether each state is accepting.
    pub accepting: Vec<bool>,
}

impl Automaton {
    /// The automaton of `path`; of its inverse when `reversed` (used to evaluate a path
    /// from its object end: it accepts the reversed words with flipped directions).
    pub fn new(path: &Path, reversed: bool) -> Automaton {
        let mut symbols = vec![None];
        let re = linearize(path, reversed, &mut symbols);
        let n = symbols.len();
        let mut follow = vec![BTreeSet::new(); n];
        let (nullable, first, last) = glushkov(&re, &mut follow);
        let mut targets: Vec<Vec<usize>> = follow
            .into_iter()
            .map(|s| s.into_iter().collect())
            .collect();
        targets[0] = first.into_iter().collect();
        let mut accepting = vec![false; n];
        accepting[0] = nullable;
        for l in last {
            accepting[l] = true;
        }
        Automaton {
            symbols,
            targets,
            accepting,
        }
    }

    /// Number of states.
    pub fn states(&self) -> usize {
        self.symbols.len()
    }

    /// Whether the empty word is accepted.
    pub fn accepts_empty(&self) -> bool {
        self.accepting[0]
    }

    /// For every state, the states with a transition into it.
    pub fn sources(&self) -> Vec<Vec<usize>> {
        let mut src = vec![Vec::new(); self.states()];
        for (i, ts) in self.targets.iter().enumerate() {
            for &t in ts {
                src[t].push(i);
            }
        }
        src
    }

    /// Whether the automaton accepts the word of edge labels `(predicate, direction)`.
    pub fn accepts(&self, word: &[(PredId, Dir)]) -> bool {
        let mut cur = vec![0usize];
        for &(p, d) in word {
            let mut next: Vec<usize> = cur
                .iter()
                .flat_map(|&i| self.targets[i].iter().copied())
                .filter(|&t| self.symbols[t].as_ref().is_some_and(|s| s.matches(p, d)))
                .collect();
            next.sort_unstable();
            next.dedup();
            cur = next;
        }
        cur.iter().any(|&i| self.accepting[i])
    }

    /// Writes the states and transitions, with predicate names from `name`.
    pub fn fmt_with(
        &self,
        f: &mut dyn fmt::Write,
        name: &dyn Fn(PredId) -> Option<String>,
    ) -> fmt::Result {
        for (i, ts) in self.targets.iter().enumerate() {
            write!(
                f,
                "  q{i}{}{}:",
                if i == 0 { " (start)" } else { "" },
                if self.accepting[i] { " (accept)" } else { "" }
            )?;
            if ts.is_empty() {
                f.write_str(" no transitions")?;
            }
            for (k, &t) in ts.iter().enumerate() {
                f.write_str(if k == 0 { " " } else { ", " })?;
                if let Some(s) = &self.symbols[t] {
                    s.fmt_with(f, name)?;
                    f.write_str(if s.dir == Dir::Forward {
                        " [fwd→q"
                    } else {
                        " [inv→q"
                    })?;
                }
                write!(f, "{t}]")?;
            }
            writeln!(f)?;
        }
        Ok(())
    }
}

impl fmt::Display for Automaton {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.fmt_with(f, &|_| None)
    }
}

/// Pushes inverses to the leaves (`inv` = under an odd number of inverses) and numbers
/// the leaves from 1, recording their symbols.
fn linearize(p: &Path, inv: bool, symbols: &mut Vec<Option<Symbol>>) -> Re {
    let mut leaf = |class: PredClass, dir: Dir| {
        let d = if inv { dir.flipped() } else { dir };
        symbols.push(Some(Symbol { class, dir: d }));
        Re::Leaf(symbols.len() - 1)
    };
    match p {
        Path::Link(x) => leaf(PredClass::One(*x), Dir::Forward),
        Path::NegatedSet(items) => {
            let set = |want_inv: bool| {
                let mut v: Vec<PredId> = items
                    .iter()
                    .filter(|i| i.1 == want_inv)
                    .map(|i| i.0)
                    .collect();
                v.sort_unstable();
                v.dedup();
                v
            };
            let has_fwd = items.is_empty() || items.iter().any(|i| !i.1);
            let has_inv = items.iter().any(|i| i.1);
            match (has_fwd, has_inv) {
                (true, false) => leaf(PredClass::AllExcept(set(false)), Dir::Forward),
                (false, true) => leaf(PredClass::AllExcept(set(true)), Dir::Inverse),
                _ => {
                    let a = leaf(PredClass::AllExcept(set(false)), Dir::Forward);
                    let b = leaf(PredClass::AllExcept(set(true)), Dir::Inverse);
                    Re::Alt(Box::new(a), Box::new(b))
                }
            }
        }
        Path::Inverse(a) => linearize(a, !inv, symbols),
        Path::Sequence(a, b) => {
            if inv {
                let rb = linearize(b, inv, symbols);
                let ra = linearize(a, inv, symbols);
                Re::Seq(Box::new(rb), Box::new(ra))
            } else {
                let ra = linearize(a, inv, symbols);
                let rb = linearize(b, inv, symbols);
                Re::Seq(Box::new(ra), Box::new(rb))
            }
        }
        Path::Alternative(a, b) => {
            let ra = linearize(a, inv, symbols);
            let rb = linearize(b, inv, symbols);
            Re::Alt(Box::new(ra), Box::new(rb))
        }
        Path::ZeroOrMore(a) => Re::Star(Box::new(linearize(a, inv, symbols))),
        Path::OneOrMore(a) => Re::Plus(Box::new(linearize(a, inv, symbols))),
        Path::ZeroOrOne(a) => Re::Opt(Box::new(linearize(a, inv, symbols))),
    }
}

type Positions = BTreeSet<usize>;

/// Returns `(nullable, first, last)` of `re` and adds its follow pairs to `follow`.
fn glushkov(re: &Re, follow: &mut [Positions]) -> (bool, Positions, Positions) {
    match re {
        Re::Leaf(i) => (false, [*i].into(), [*i].into()),
        Re::Seq(a, b) => {
            let (na, fa, la) = glushkov(a, follow);
            let (nb, fb, lb) = glushkov(b, follow);
            for &l in &la {
                follow[l].extend(fb.iter().copied());
            }
            let first = if na { &fa | &fb } else { fa };
            let last = if nb { &la | &lb } else { lb };
            (na && nb, first, last)
        }
        Re::Alt(a, b) => {
            let (na, fa, la) = glushkov(a, follow);
            let (nb, fb, lb) = glushkov(b, follow);
            (na || nb, &fa | &fb, &la | &lb)
        }
        Re::Star(a) | Re::Plus(a) | Re::Opt(a) => {
            let (na, fa, la) = glushkov(a, follow);
            if !matches!(re, Re::Opt(_)) {
                for &l in &la {
                    follow[l].extend(fa.iter().copied());
                }
            }
            (na || !matches!(re, Re::Plus(_)), fa, la)
        }
    }
}
