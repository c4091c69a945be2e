//! Path expressions over predicate ids, and their translation from spargebra.

use std::fmt;

use spargebra::algebra::PropertyPathExpression;

use super::PredId;

/// The predicate id that [`parse_path_expr`] gives an IRI the store does not know: no
/// graph has a relation for it, so a link over it matches nothing and a negated set that
/// lists it excludes nothing.
pub const UNKNOWN_PREDICATE: PredId = PredId::MAX;

/// A SPARQL 1.1 property path / regular path expression over predicate ids.
///
/// ```
/// use k2rpq::rpq::Path;
/// // p1 / p2*
/// let p = Path::Sequence(Box::new(Path::Link(1)), Box::new(Path::ZeroOrMore(Box::new(Path::Link(2)))));
/// assert_eq!(p.to_string(), "(p1/(p2)*)");
/// assert!(!p.accepts_empty());
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Path {
    /// One edge of the predicate, subject to object.
    Link(PredId),
    /// The path followed backwards (`^p`).
    Inverse(Box<Path>),
    /// One path, then the other (`a/b`).
    Sequence(Box<Path>, Box<Path>),
    /// Either path (`a|b`).
    Alternative(Box<Path>, Box<Path>),
    /// Zero or more repetitions (`a*`).
    ZeroOrMore(Box<Path>),
    /// One or more repetitions (`a+`).
    OneOrMore(Box<Path>),
    /// Zero or one (`a?`).
    ZeroOrOne(Box<Path>),
    /// `!(p|^q|…)`: one edge of any predicate of the graph not listed, per direction. A
    /// listed `(p, false)` excludes `p` from the forward part, `(q, true)` excludes `q`
    /// from the inverse part. The forward part exists when some item is forward (or the
    /// list is empty), the inverse part when some item is inverse (SPARQL 1.1 §18.4).
    NegatedSet(Vec<(PredId, bool)>),
}

impl Path {
    /// Whether a negated property set `!(...)` occurs anywhere in the path.
    pub fn has_negated_set(&self) -> bool {
        match self {
            Path::NegatedSet(_) => true,
            Path::Link(_) => false,
            Path::Inverse(a) | Path::ZeroOrMore(a) | Path::OneOrMore(a) | Path::ZeroOrOne(a) => {
                a.has_negated_set()
            }
            Path::Sequence(a, b) | Path::Alternative(a, b) => {
                a.has_negated_set() || b.has_negated_set()
            }
        }
    }

    /// A link, boxed: shorthand for building paths in code.
    pub fn link(p: PredId) -> Box<Path> {
        Box::new(Path::Link(p))
    }

    /// Whether the path matches the empty word (zero-length paths).
    pub fn accepts_empty(&self) -> bool {
        match self {
            Path::Link(_) | Path::NegatedSet(_) => false,
            Path::Inverse(a) | Path::OneOrMore(a) => a.accepts_empty(),
            Path::Sequence(a, b) => a.accepts_empty() && b.accepts_empty(),
            Path::Alternative(a, b) => a.accepts_empty() || b.accepts_empty(),
            Path::ZeroOrMore(_) | Path::ZeroOrOne(_) => true,
        }
    }

    /// Every predicate id the path names (links and negated-set items).
    pub fn predicates(&self) -> Vec<PredId> {
        fn walk(p: &Path, out: &mut Vec<PredId>) {
            match p {
                Path::Link(x) => out.push(*x),
                Path::NegatedSet(items) => out.extend(items.iter().map(|(x, _)| *x)),
                Path::Inverse(a)
                | Path::ZeroOrMore(a)
                | Path::OneOrMore(a)
                | Path::ZeroOrOne(a) => walk(a, out),
                Path::Sequence(a, b) | Path::Alternative(a, b) => {
                    walk(a, out);
                    walk(b, out)
                }
            }
        }
        let mut out = Vec::new();
        walk(self, &mut out);
        out.sort_unstable();
        out.dedup();
        out
    }

    /// Writes the path with predicate names from `name` (`p<id>` where it gives none).
    pub fn fmt_with(
        &self,
        f: &mut dyn fmt::Write,
        name: &dyn Fn(PredId) -> Option<String>,
    ) -> fmt::Result {
        let pred = |p: PredId| name(p).unwrap_or_else(|| format!("p{p}"));
        match self {
            Path::Link(p) => write!(f, "{}", pred(*p)),
            Path::Inverse(a) => {
                f.write_str("^")?;
                a.fmt_with(f, name)
            }
            Path::Sequence(a, b) | Path::Alternative(a, b) => {
                f.write_str("(")?;
                a.fmt_with(f, name)?;
                f.write_str(if matches!(self, Path::Sequence(..)) {
                    "/"
                } else {
                    "|"
                })?;
                b.fmt_with(f, name)?;
                f.write_str(")")
            }
            Path::ZeroOrMore(a) | Path::OneOrMore(a) | Path::ZeroOrOne(a) => {
                f.write_str("(")?;
                a.fmt_with(f, name)?;
                f.write_str(match self {
                    Path::ZeroOrMore(_) => ")*",
                    Path::OneOrMore(_) => ")+",
                    _ => ")?",
                })
            }
            Path::NegatedSet(items) => {
                f.write_str("!(")?;
                for (i, (p, inv)) in items.iter().enumerate() {
                    if i > 0 {
                        f.write_str("|")?;
                    }
                    write!(f, "{}{}", if *inv { "^" } else { "" }, pred(*p))?;
                }
                f.write_str(")")
            }
        }
    }
}

impl fmt::Display for Path {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.fmt_with(f, &|_| None)
    }
}

/// The predicate IRIs a path expression names, in order of appearance, each once.
///
/// ```
/// use k2rpq::rpq::path_iris;
/// use spargebra::algebra::PropertyPathExpression as P;
/// use spargebra::term::NamedNode;
/// let (p, q) = (NamedNode::new("http://e/p").unwrap(), NamedNode::new("http://e/q").unwrap());
/// let seq = P::Sequence(Box::new(P::NamedNode(p.clone())), Box::new(P::NegatedPropertySet(vec![q, p])));
/// assert_eq!(path_iris(&seq), ["http://e/p", "http://e/q"]);
/// ```
pub fn path_iris(expr: &PropertyPathExpression) -> Vec<&str> {
    fn go<'a>(e: &'a PropertyPathExpression, out: &mut Vec<&'a str>) {
        let mut add = |n: &'a spargebra::term::NamedNode| {
            if !out.contains(&n.as_str()) {
                out.push(n.as_str());
            }
        };
        match e {
            PropertyPathExpression::NamedNode(n) => add(n),
            PropertyPathExpression::NegatedPropertySet(ns) => ns.iter().for_each(add),
            PropertyPathExpression::Reverse(a)
            | PropertyPathExpression::ZeroOrMore(a)
            | PropertyPathExpression::OneOrMore(a)
            | PropertyPathExpression::ZeroOrOne(a) => go(a, out),
            PropertyPathExpression::Sequence(a, b) | PropertyPathExpression::Alternative(a, b) => {
                go(a, out);
                go(b, out);
            }
        }
    }
    let mut out = Vec::new();
    go(expr, &mut out);
    out
}

/// Translates a spargebra property path, resolving each IRI with `resolve`; IRIs it does
/// not know become [`UNKNOWN_PREDICATE`] (a link that matches nothing).
///
/// spargebra writes `!(p|^q)` as `!(p) | ^!(q)`; the inverse of a negated set is folded
/// back into one [`Path::NegatedSet`] with inverse items, so both spellings evaluate alike.
///
/// ```
/// use k2rpq::rpq::{parse_path_expr, Path};
/// use spargebra::algebra::PropertyPathExpression as P;
/// use spargebra::term::NamedNode;
/// let p = NamedNode::new("http://e/p").unwrap();
/// let expr = P::OneOrMore(Box::new(P::Reverse(Box::new(P::NamedNode(p)))));
/// let path = parse_path_expr(&expr, |iri| (iri == "http://e/p").then_some(7));
/// assert_eq!(path, Path::OneOrMore(Box::new(Path::Inverse(Path::link(7)))));
/// ```
pub fn parse_path_expr(
    expr: &PropertyPathExpression,
    resolve: impl Fn(&str) -> Option<PredId>,
) -> Path {
    fn go(e: &PropertyPathExpression, r: &dyn Fn(&str) -> Option<PredId>) -> Path {
        let id = |n: &spargebra::term::NamedNode| r(n.as_str()).unwrap_or(UNKNOWN_PREDICATE);
        match e {
            PropertyPathExpression::NamedNode(n) => Path::Link(id(n)),
            PropertyPathExpression::Reverse(a) => match a.as_ref() {
                PropertyPathExpression::NegatedPropertySet(items) => {
                    Path::NegatedSet(items.iter().map(|n| (id(n), true)).collect())
                }
                _ => Path::Inverse(Box::new(go(a, r))),
            },
            PropertyPathExpression::Sequence(a, b) => {
                Path::Sequence(Box::new(go(a, r)), Box::new(go(b, r)))
            }
            PropertyPathExpression::Alternative(a, b) => {
                let (pa, pb) = (go(a, r), go(b, r));
                // `!(p|^q)` arrives as `!(p) | ^!(q)`: merge it back into one set.
                match (pa, pb) {
                    (Path::NegatedSet(x), Path::NegatedSet(y))
                        if x.iter().all(|i| !i.1) && y.iter().all(|i| i.1) =>
                    {
                        Path::NegatedSet(x.into_iter().chain(y).collect())
                    }
                    (pa, pb) => Path::Alternative(Box::new(pa), Box::new(pb)),
                }
            }
            PropertyPathExpression::ZeroOrMore(a) => Path::ZeroOrMore(Box::new(go(a, r))),
            PropertyPathExpression::OneOrMore(a) => Path::OneOrMore(Box::new(go(a, r))),
            PropertyPathExpression::ZeroOrOne(a) => Path::ZeroOrOne(Box::new(go(a, r))),
            PropertyPathExpression::NegatedPropertySet(items) => {
                Path::NegatedSet(items.iter().map(|n| (id(n), false)).collect())
            }
        }
    }
    go(expr, &resolve)
}
