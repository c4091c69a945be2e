//! Standalone evaluation of a SPARQL subset over a [`PathDataset`]: basic graph patterns,
//! property paths (exact multiplicities, see [`semantics`](super::semantics)), joins,
//! UNION, GRAPH, VALUES, FILTER over bound terms, BIND of a variable or a constant,
//! DISTINCT, LIMIT/OFFSET, ORDER BY variables, GROUP BY with COUNT; SELECT and ASK.
//! Anything else is [`SparqlError::Unsupported`], naming the construct.
//!
//! Solutions are rows of term ids; terms the dictionary does not know (constants of the
//! query) get ids of their own above [`QUERY_TERM_BASE`], which no graph relation holds.

use std::cell::RefCell;
use std::cmp::Ordering;
use std::collections::{HashMap, HashSet};

use oxrdf::{Term, TermRef, Variable};
use spargebra::algebra::{
    AggregateExpression, AggregateFunction, Expression, Function, GraphPattern, OrderExpression,
};
use spargebra::term::{GroundTerm, NamedNodePattern, TermPattern, TriplePattern};
use spargebra::Query;

use super::dataset::PathDataset;
use super::semantics::{evaluate_path_from, evaluate_path_with, Bag};
use super::{rewrite, SparqlError};
use crate::engine::Engine;
use crate::engine::MatrixConfig;
use crate::rpq::{
    parse_path_expr, Endpoint, Path, PathGraph, PerQueryRelations, RelationSource,
    UNKNOWN_PREDICATE,
};

/// First id given to a query term the dictionary does not know.
pub const QUERY_TERM_BASE: u32 = 0x8000_0000;

/// Where the path evaluations of one query get their loaded relations: one
/// [`RelationSource`] per graph of the dataset, asked for the first time a path is matched
/// in that graph and kept for the rest of the query.
///
/// [`PerQueryProvider`] (what [`query`] uses) loads each relation into the engine once per
/// query; `crate::database::Database` hands out sources backed by its device cache, so
/// that relations stay resident across queries under the GPU budget.
pub trait RelationProvider<'a, E: Engine> {
    /// The source for graph `name` (`None`: the default graph), which is `graph`.
    fn source(
        &self,
        name: Option<u32>,
        graph: &'a dyn PathGraph,
    ) -> Box<dyn RelationSource<E> + 'a>;
}

/// Loads each relation once per query ([`PerQueryRelations`], the cached-frontier
/// configuration).
pub struct PerQueryProvider<'a, E: Engine>(pub &'a E);

impl<'a, E: Engine> RelationProvider<'a, E> for PerQueryProvider<'a, E> {
    fn source(
        &self,
        _name: Option<u32>,
        graph: &'a dyn PathGraph,
    ) -> Box<dyn RelationSource<E> + 'a> {
        Box::new(PerQueryRelations::new(
            self.0,
            graph,
            MatrixConfig::default(),
        ))
    }
}

/// Above this many distinct bound values, a path endpoint is evaluated as a free variable
/// and joined, instead of once per value.
const BOUND_VALUES_LIMIT: usize = 256;

/// The answer to a query.
#[derive(Clone, Debug, PartialEq)]
pub enum QueryAnswer {
    /// SELECT: the projected variables and one row per solution (duplicates kept).
    Solutions {
        /// Column names.
        variables: Vec<Variable>,
        /// Rows, one value per variable (`None`: unbound).
        rows: Vec<Vec<Option<Term>>>,
    },
    /// ASK.
    Boolean(bool),
}

/// Parses and evaluates `query` over `dataset` with `engine`.
///
/// ```
/// use k2rpq::engine::cpu::CpuEngine;
/// use k2rpq::sparql::{query, MemoryDataset, QueryAnswer};
/// use oxrdf::{GraphName, NamedNode, Quad};
/// let n = |s: &str| NamedNode::new(format!("http://e/{s}")).unwrap();
/// let quads = vec![
///     Quad::new(n("a"), n("p"), n("b"), GraphName::DefaultGraph),
///     Quad::new(n("b"), n("p"), n("c"), GraphName::DefaultGraph),
/// ];
/// let d = MemoryDataset::from_quads(quads.iter().map(|q| q.as_ref()));
/// let a = query(&CpuEngine::new(), &d, "SELECT ?x WHERE { <http://e/a> <http://e/p>+ ?x }").unwrap();
/// let QueryAnswer::Solutions { rows, .. } = a else { panic!() };
/// assert_eq!(rows.len(), 2);
/// ```
pub fn query<E: Engine>(
    engine: &E,
    dataset: &dyn PathDataset,
    query: &str,
) -> Result<QueryAnswer, SparqlError> {
    let q = spargebra::SparqlParser::new().parse_query(query)?;
    evaluate_query(engine, dataset, &q)
}

/// Evaluates a parsed query (see [`query`]).
pub fn evaluate_query<E: Engine>(
    engine: &E,
    dataset: &dyn PathDataset,
    query: &Query,
) -> Result<QueryAnswer, SparqlError> {
    evaluate_query_with(engine, dataset, query, &PerQueryProvider(engine))
}

/// [`evaluate_query`] with relations from `relations` (a device cache, say).
pub fn evaluate_query_with<'a, E: Engine>(
    engine: &'a E,
    dataset: &'a dyn PathDataset,
    query: &Query,
    relations: &'a dyn RelationProvider<'a, E>,
) -> Result<QueryAnswer, SparqlError> {
    let (pattern, ds, ask) = match query {
        Query::Select {
            dataset, pattern, ..
        } => (pattern, dataset, false),
        Query::Ask {
            dataset, pattern, ..
        } => (pattern, dataset, true),
        Query::Construct { .. } => return Err(SparqlError::Unsupported("CONSTRUCT".into())),
        Query::Describe { .. } => return Err(SparqlError::Unsupported("DESCRIBE".into())),
    };
    if ds.is_some() {
        return Err(SparqlError::Unsupported("FROM / FROM NAMED".into()));
    }
    let pattern = rewrite::reassemble_paths(pattern);
    let ctx = Context::new(engine, dataset, relations);
    let table = ctx.eval(&pattern, Active::Default, None)?;
    if ask {
        return Ok(QueryAnswer::Boolean(!table.rows.is_empty()));
    }
    let variables: Vec<Variable> = table
        .vars
        .iter()
        .filter(|v| !rewrite::is_hidden_variable(v))
        .map(|v| Variable::new_unchecked(v.clone()))
        .collect();
    Ok(ctx.answer(&table, variables))
}

/// Evaluates a graph pattern (the body of a `SERVICE` call, say) and returns every
/// visible variable it binds.
pub fn evaluate_pattern<E: Engine>(
    engine: &E,
    dataset: &dyn PathDataset,
    pattern: &GraphPattern,
) -> Result<QueryAnswer, SparqlError> {
    evaluate_pattern_with(engine, dataset, pattern, &PerQueryProvider(engine))
}

/// [`evaluate_pattern`] with relations from `relations` (a device cache, say).
pub fn evaluate_pattern_with<'a, E: Engine>(
    engine: &'a E,
    dataset: &'a dyn PathDataset,
    pattern: &GraphPattern,
    relations: &'a dyn RelationProvider<'a, E>,
) -> Result<QueryAnswer, SparqlError> {
    let ctx = Context::new(engine, dataset, relations);
    let table = ctx.eval(pattern, Active::Default, None)?;
    let variables = table
        .vars
        .iter()
        .map(|v| Variable::new_unchecked(v.clone()))
        .collect();
    Ok(ctx.answer(&table, variables))
}

/// The most distinct terms an answer keeps decoded (about 100 bytes each): beyond them a
/// term is decoded for each cell it fills.
const DECODED_TERMS: usize = 1 << 20;

/// One solution: a term id (or unbound) per variable of its table.
type IdRow = Vec<Option<u32>>;

/// Solutions as id rows.
#[derive(Clone, Debug, Default)]
struct Table {
    vars: Vec<String>,
    rows: Vec<Vec<Option<u32>>>,
}

impl Table {
    /// The table with no variables and one empty solution (the join identity).
    fn unit() -> Table {
        Table {
            vars: Vec::new(),
            rows: vec![Vec::new()],
        }
    }

    fn col(&self, v: &str) -> Option<usize> {
        self.vars.iter().position(|x| x == v)
    }

    /// The distinct values of `v` when every row binds it.
    fn bound_values(&self, v: &str) -> Option<HashSet<u32>> {
        let c = self.col(v)?;
        self.rows.iter().map(|r| r[c]).collect()
    }
}

/// The graph patterns are matched against.
#[derive(Clone, Copy, Debug)]
enum Active {
    Default,
    Named(u32),
}

/// A variable or a fixed id at one end of a pattern.
#[derive(Clone, Debug)]
enum End {
    Var(String),
    Id(u32),
}

struct Context<'a, E: Engine> {
    engine: &'a E,
    dataset: &'a dyn PathDataset,
    /// Terms of the query that the dictionary does not know.
    extra: RefCell<(Vec<Term>, HashMap<Term, u32>)>,
    provider: &'a dyn RelationProvider<'a, E>,
    /// Relation sources, per graph (`None`: the default graph), kept for the whole query.
    relations: RefCell<HashMap<Option<u32>, Box<dyn RelationSource<E> + 'a>>>,
}

impl<'a, E: Engine> Context<'a, E> {
    fn new(
        engine: &'a E,
        dataset: &'a dyn PathDataset,
        provider: &'a dyn RelationProvider<'a, E>,
    ) -> Self {
        Context {
            engine,
            dataset,
            extra: RefCell::new((Vec::new(), HashMap::new())),
            provider,
            relations: RefCell::new(HashMap::new()),
        }
    }

    fn id(&self, term: TermRef<'_>) -> u32 {
        if let Some(id) = self.dataset.dictionary().id(term) {
            return id;
        }
        let mut extra = self.extra.borrow_mut();
        let owned = term.into_owned();
        if let Some(&id) = extra.1.get(&owned) {
            return id;
        }
        let id = QUERY_TERM_BASE + extra.0.len() as u32;
        extra.0.push(owned.clone());
        extra.1.insert(owned, id);
        id
    }

    fn term(&self, id: u32) -> Option<Term> {
        if id >= QUERY_TERM_BASE {
            return self
                .extra
                .borrow()
                .0
                .get((id - QUERY_TERM_BASE) as usize)
                .cloned();
        }
        self.dataset.dictionary().term(id)
    }

    fn graph(&self, active: Active) -> Option<&'a dyn PathGraph> {
        match active {
            Active::Default => Some(self.dataset.default_graph()),
            Active::Named(g) => self.dataset.named_graph(g),
        }
    }

    /// The rows of `table` as terms. A term is decoded once per answer (up to
    /// [`DECODED_TERMS`] distinct ones): answers repeat their terms (CoDEx-M's 18,638
    /// birth-place countries are 132), and a dictionary decode (a front-coded block scan)
    /// costs a few times a clone.
    fn answer(&self, table: &Table, variables: Vec<Variable>) -> QueryAnswer {
        let cols: Vec<Option<usize>> = variables.iter().map(|v| table.col(v.as_str())).collect();
        let mut decoded: HashMap<u32, Option<Term>> = HashMap::new();
        let mut term = |id: u32| match decoded.get(&id) {
            Some(t) => t.clone(),
            None => {
                let t = self.term(id);
                if decoded.len() < DECODED_TERMS {
                    decoded.insert(id, t.clone());
                }
                t
            }
        };
        let rows = table
            .rows
            .iter()
            .map(|r| {
                cols.iter()
                    .map(|c| c.and_then(|c| r[c]).and_then(&mut term))
                    .collect()
            })
            .collect();
        QueryAnswer::Solutions { variables, rows }
    }

    fn end(&self, t: &TermPattern) -> Result<End, SparqlError> {
        Ok(match t {
            TermPattern::Variable(v) => End::Var(v.as_str().to_owned()),
            TermPattern::BlankNode(b) => End::Var(rewrite::blank_variable_name(b.as_str())),
            TermPattern::NamedNode(n) => End::Id(self.id(n.as_ref().into())),
            TermPattern::Literal(l) => End::Id(self.id(l.as_ref().into())),
            #[allow(unreachable_patterns)]
            _ => return Err(SparqlError::Unsupported("triple terms".into())),
        })
    }

    fn eval(
        &self,
        p: &GraphPattern,
        active: Active,
        bound: Option<&Table>,
    ) -> Result<Table, SparqlError> {
        match p {
            GraphPattern::Bgp { patterns } => {
                let mut t = Table::unit();
                for tp in patterns {
                    let ctx = if t.vars.is_empty() { bound } else { Some(&t) };
                    let r = self.triple(tp, active, ctx)?;
                    t = join(&t, &r);
                }
                Ok(t)
            }
            GraphPattern::Path {
                subject,
                path,
                object,
            } => {
                let d = self.dataset.dictionary();
                let resolve = |iri: &str| d.id(oxrdf::NamedNodeRef::new_unchecked(iri).into());
                let path = parse_path_expr(path, resolve);
                self.path(
                    &self.end(subject)?,
                    &path,
                    &self.end(object)?,
                    active,
                    bound,
                )
            }
            GraphPattern::Join { left, right } => {
                let l = self.eval(left, active, bound)?;
                let r = self.eval(right, active, Some(&l))?;
                Ok(join(&l, &r))
            }
            GraphPattern::Union { left, right } => {
                let l = self.eval(left, active, bound)?;
                let r = self.eval(right, active, bound)?;
                Ok(union(l, r))
            }
            GraphPattern::Filter { expr, inner } => {
                check_filter(expr)?;
                let mut t = self.eval(inner, active, bound)?;
                let mut kept = Vec::with_capacity(t.rows.len());
                for row in std::mem::take(&mut t.rows) {
                    if self.ebv(expr, &t, &row)? == Some(true) {
                        kept.push(row);
                    }
                }
                t.rows = kept;
                Ok(t)
            }
            GraphPattern::Graph { name, inner } => self.graph_pattern(name, inner, bound),
            GraphPattern::Extend {
                inner,
                variable,
                expression,
            } => {
                let mut t = self.eval(inner, active, bound)?;
                if t.col(variable.as_str()).is_some() {
                    return Err(SparqlError::Unsupported("BIND to a bound variable".into()));
                }
                // The value of each row: a column, a constant, or unbound.
                let (column, constant) = match expression {
                    Expression::Variable(v) => (t.col(v.as_str()), None),
                    Expression::NamedNode(n) => (None, Some(self.id(n.as_ref().into()))),
                    Expression::Literal(l) => (None, Some(self.id(l.as_ref().into()))),
                    _ => {
                        return Err(SparqlError::Unsupported(
                            "BIND / SELECT expressions other than a variable or a constant".into(),
                        ))
                    }
                };
                for r in &mut t.rows {
                    let v = column.and_then(|c| r[c]).or(constant);
                    r.push(v);
                }
                t.vars.push(variable.as_str().to_owned());
                Ok(t)
            }
            GraphPattern::Values {
                variables,
                bindings,
            } => {
                let vars = variables.iter().map(|v| v.as_str().to_owned()).collect();
                let mut rows = Vec::with_capacity(bindings.len());
                for b in bindings {
                    let mut row = Vec::with_capacity(b.len());
                    for v in b {
                        row.push(match v {
                            None => None,
                            Some(GroundTerm::NamedNode(n)) => Some(self.id(n.as_ref().into())),
                            Some(GroundTerm::Literal(l)) => Some(self.id(l.as_ref().into())),
                            #[allow(unreachable_patterns)]
                            Some(_) => return Err(SparqlError::Unsupported("triple terms".into())),
                        });
                    }
                    rows.push(row);
                }
                Ok(Table { vars, rows })
            }
            GraphPattern::OrderBy { inner, expression } => {
                let mut t = self.eval(inner, active, bound)?;
                let mut keys = Vec::new();
                for e in expression {
                    let (ex, desc) = match e {
                        OrderExpression::Asc(x) => (x, false),
                        OrderExpression::Desc(x) => (x, true),
                    };
                    let Expression::Variable(v) = ex else {
                        return Err(SparqlError::Unsupported(
                            "ORDER BY an expression other than a variable".into(),
                        ));
                    };
                    keys.push((t.col(v.as_str()), desc));
                }
                let terms: HashMap<u32, Term> = t
                    .rows
                    .iter()
                    .flat_map(|r| keys.iter().filter_map(|(c, _)| c.and_then(|c| r[c])))
                    .collect::<HashSet<u32>>()
                    .into_iter()
                    .filter_map(|id| self.term(id).map(|t| (id, t)))
                    .collect();
                t.rows.sort_by(|a, b| {
                    for (c, desc) in &keys {
                        let get = |r: &Vec<Option<u32>>| {
                            c.and_then(|c| r[c]).and_then(|id| terms.get(&id))
                        };
                        let o = compare_terms(get(a), get(b));
                        let o = if *desc { o.reverse() } else { o };
                        if o != Ordering::Equal {
                            return o;
                        }
                    }
                    Ordering::Equal
                });
                Ok(t)
            }
            GraphPattern::Project { inner, variables } => {
                let t = self.eval(inner, active, bound)?;
                let cols: Vec<Option<usize>> =
                    variables.iter().map(|v| t.col(v.as_str())).collect();
                Ok(Table {
                    vars: variables.iter().map(|v| v.as_str().to_owned()).collect(),
                    rows: t
                        .rows
                        .iter()
                        .map(|r| cols.iter().map(|c| c.and_then(|c| r[c])).collect())
                        .collect(),
                })
            }
            GraphPattern::Distinct { inner } | GraphPattern::Reduced { inner } => {
                let mut t = self.eval(inner, active, bound)?;
                let mut seen = HashSet::new();
                t.rows.retain(|r| seen.insert(r.clone()));
                Ok(t)
            }
            GraphPattern::Slice {
                inner,
                start,
                length,
            } => {
                let mut t = self.eval(inner, active, bound)?;
                let rows = std::mem::take(&mut t.rows);
                t.rows = rows
                    .into_iter()
                    .skip(*start)
                    .take(length.unwrap_or(usize::MAX))
                    .collect();
                Ok(t)
            }
            GraphPattern::Group {
                inner,
                variables,
                aggregates,
            } => self.group(inner, variables, aggregates, active, bound),
            GraphPattern::LeftJoin { .. } => Err(SparqlError::Unsupported("OPTIONAL".into())),
            GraphPattern::Minus { .. } => Err(SparqlError::Unsupported("MINUS".into())),
            GraphPattern::Lateral { .. } => Err(SparqlError::Unsupported("LATERAL".into())),
            GraphPattern::Service { .. } => Err(SparqlError::Unsupported("SERVICE".into())),
        }
    }

    /// `GRAPH name { inner }`: the inner pattern inside one named graph, or inside each
    /// named graph separately with `?g` bound to its name.
    fn graph_pattern(
        &self,
        name: &NamedNodePattern,
        inner: &GraphPattern,
        bound: Option<&Table>,
    ) -> Result<Table, SparqlError> {
        match name {
            NamedNodePattern::NamedNode(n) => {
                let id = self.id(n.as_ref().into());
                if self.dataset.named_graph(id).is_none() {
                    return Ok(Table::default());
                }
                self.eval(inner, Active::Named(id), bound)
            }
            NamedNodePattern::Variable(v) => {
                let mut out = Table::default();
                let wanted = bound.and_then(|b| b.bound_values(v.as_str()));
                for g in self.dataset.named_graphs() {
                    if wanted.as_ref().is_some_and(|w| !w.contains(&g)) {
                        continue;
                    }
                    let graph_row = Table {
                        vars: vec![v.as_str().to_owned()],
                        rows: vec![vec![Some(g)]],
                    };
                    let t = self.eval(inner, Active::Named(g), bound)?;
                    out = union(out, join(&graph_row, &t));
                }
                Ok(out)
            }
        }
    }

    fn group(
        &self,
        inner: &GraphPattern,
        variables: &[Variable],
        aggregates: &[(Variable, AggregateExpression)],
        active: Active,
        bound: Option<&Table>,
    ) -> Result<Table, SparqlError> {
        let t = self.eval(inner, active, bound)?;
        let key_cols: Vec<Option<usize>> = variables.iter().map(|v| t.col(v.as_str())).collect();
        let mut groups: Vec<(IdRow, Vec<&IdRow>)> = Vec::new();
        let mut index: HashMap<Vec<Option<u32>>, usize> = HashMap::new();
        for r in &t.rows {
            let k: Vec<Option<u32>> = key_cols.iter().map(|c| c.and_then(|c| r[c])).collect();
            let i = *index.entry(k.clone()).or_insert_with(|| {
                groups.push((k, Vec::new()));
                groups.len() - 1
            });
            groups[i].1.push(r);
        }
        if groups.is_empty() && variables.is_empty() {
            // An aggregate over no solution still gives one group (COUNT = 0).
            groups.push((Vec::new(), Vec::new()));
        }
        let mut vars: Vec<String> = variables.iter().map(|v| v.as_str().to_owned()).collect();
        vars.extend(aggregates.iter().map(|(v, _)| v.as_str().to_owned()));
        let mut rows = Vec::with_capacity(groups.len());
        for (k, members) in groups {
            let mut row = k;
            for (_, agg) in aggregates {
                let count = match agg {
                    AggregateExpression::CountSolutions { distinct } => {
                        if *distinct {
                            members.iter().collect::<HashSet<_>>().len()
                        } else {
                            members.len()
                        }
                    }
                    AggregateExpression::FunctionCall {
                        name: AggregateFunction::Count,
                        expr,
                        distinct,
                    } => {
                        let Expression::Variable(v) = expr else {
                            return Err(SparqlError::Unsupported(
                                "COUNT of an expression other than a variable".into(),
                            ));
                        };
                        let c = t.col(v.as_str());
                        let values = members.iter().filter_map(|r| c.and_then(|c| r[c]));
                        if *distinct {
                            values.collect::<HashSet<_>>().len()
                        } else {
                            values.count()
                        }
                    }
                    AggregateExpression::FunctionCall { name, .. } => {
                        return Err(SparqlError::Unsupported(format!(
                            "aggregate {name} (only COUNT)"
                        )))
                    }
                };
                let lit = oxrdf::Literal::from(count as i64);
                row.push(Some(self.id(lit.as_ref().into())));
            }
            rows.push(row);
        }
        Ok(Table { vars, rows })
    }

    fn triple(
        &self,
        tp: &TriplePattern,
        active: Active,
        bound: Option<&Table>,
    ) -> Result<Table, SparqlError> {
        let s = self.end(&tp.subject)?;
        let o = self.end(&tp.object)?;
        match &tp.predicate {
            NamedNodePattern::NamedNode(p) => {
                let id = self
                    .dataset
                    .dictionary()
                    .id(p.as_ref().into())
                    .unwrap_or(UNKNOWN_PREDICATE);
                self.path(&s, &Path::Link(id), &o, active, bound)
            }
            NamedNodePattern::Variable(pv) => {
                let Some(graph) = self.graph(active) else {
                    return Ok(Table::default());
                };
                let name = pv.as_str();
                let mut out: Option<Table> = None;
                for p in graph.predicates() {
                    let t = self.path(&s, &Path::Link(p), &o, active, bound)?;
                    // The predicate variable may also be an end (`?x ?x ?y`).
                    let shared = t.col(name);
                    let out = out.get_or_insert_with(|| {
                        let mut vars = t.vars.clone();
                        if shared.is_none() {
                            vars.push(name.to_owned());
                        }
                        Table {
                            vars,
                            rows: Vec::new(),
                        }
                    });
                    for mut row in t.rows {
                        match shared {
                            Some(c) if row[c] != Some(p) => continue,
                            Some(_) => {}
                            None => row.push(Some(p)),
                        }
                        out.rows.push(row);
                    }
                }
                Ok(out.unwrap_or_default())
            }
        }
    }

    /// `s path o` in the active graph: per bound value of a variable end when the
    /// surrounding solutions bind it to few values, else with the end free.
    fn path(
        &self,
        s: &End,
        path: &Path,
        o: &End,
        active: Active,
        bound: Option<&Table>,
    ) -> Result<Table, SparqlError> {
        let mut vars = Vec::new();
        for e in [s, o] {
            if let End::Var(v) = e {
                if !vars.contains(v) {
                    vars.push(v.clone());
                }
            }
        }
        let mut out = Table {
            vars,
            rows: Vec::new(),
        };
        let Some(graph) = self.graph(active) else {
            return Ok(out);
        };
        // Candidate values of each end: a constant, the few values the surrounding
        // solutions give a variable, or free.
        let candidates = |e: &End| -> Option<Vec<u32>> {
            match e {
                End::Id(id) => Some(vec![*id]),
                End::Var(v) => {
                    let vals = bound?.bound_values(v)?;
                    (vals.len() <= BOUND_VALUES_LIMIT).then(|| {
                        // A variable only takes terms of the active graph (even through a
                        // zero-length path); a constant end is returned even when absent.
                        let mut v: Vec<u32> = vals
                            .into_iter()
                            .filter(|&x| x < graph.node_count() && graph.nodes().contains(x))
                            .collect();
                        v.sort_unstable();
                        v
                    })
                }
            }
        };
        let same_var = matches!((s, o), (End::Var(a), End::Var(b)) if a == b);
        let (cs, co) = (candidates(s), candidates(o));
        // Evaluate from the side with fewer candidates; the other end stays free.
        let calls: Vec<(Endpoint, Endpoint)> = match (&cs, &co) {
            (Some(a), Some(b)) if a.len() * b.len() <= BOUND_VALUES_LIMIT => a
                .iter()
                .flat_map(|&x| {
                    b.iter()
                        .map(move |&y| (Endpoint::Const(x), Endpoint::Const(y)))
                })
                .collect(),
            (Some(a), Some(b)) if b.len() < a.len() => b
                .iter()
                .map(|&y| (Endpoint::Var, Endpoint::Const(y)))
                .collect(),
            (Some(a), _) => a
                .iter()
                .map(|&x| (Endpoint::Const(x), Endpoint::Var))
                .collect(),
            (None, Some(b)) => b
                .iter()
                .map(|&y| (Endpoint::Var, Endpoint::Const(y)))
                .collect(),
            (None, None) => vec![(Endpoint::Var, Endpoint::Var)],
        };
        let calls: Vec<(Endpoint, Endpoint)> = if same_var {
            // `?x path ?x`: bind both ends to the same candidates.
            match (&cs, &co) {
                (Some(a), _) | (_, Some(a)) => a
                    .iter()
                    .map(|&x| (Endpoint::Const(x), Endpoint::Const(x)))
                    .collect(),
                _ => calls,
            }
        } else {
            calls
        };
        let key = match active {
            Active::Default => None,
            Active::Named(g) => Some(g),
        };
        // Many constant subjects and a free object: one batched run (closures).
        let batched = calls.len() > 1
            && !same_var
            && calls
                .iter()
                .all(|c| matches!(c, (Endpoint::Const(_), Endpoint::Var)));
        let bags: Vec<Bag> = {
            let mut relations = self.relations.borrow_mut();
            let rels = relations
                .entry(key)
                .or_insert_with(|| self.provider.source(key, graph))
                .as_mut();
            if batched {
                let mut starts: Vec<u32> = calls
                    .iter()
                    .filter_map(|c| match c.0 {
                        Endpoint::Const(x) => Some(x),
                        Endpoint::Var => None,
                    })
                    .collect();
                starts.sort_unstable();
                starts.dedup();
                vec![evaluate_path_from(self.engine, graph, path, &starts, rels)?]
            } else {
                let mut seen_calls = HashSet::new();
                let mut bags = Vec::new();
                for (es, eo) in calls {
                    if seen_calls.insert((es, eo)) {
                        bags.push(evaluate_path_with(self.engine, graph, path, es, eo, rels)?);
                    }
                }
                bags
            }
        };
        for bag in bags {
            let mut pairs: Vec<((u32, u32), u64)> = bag.into_iter().collect();
            pairs.sort_unstable();
            for ((x, y), m) in pairs {
                if same_var && x != y {
                    continue;
                }
                let mut row = Vec::with_capacity(2);
                if let End::Var(_) = s {
                    row.push(Some(x));
                }
                if let End::Var(_) = o {
                    if !same_var {
                        row.push(Some(y));
                    }
                }
                for _ in 0..m {
                    out.rows.push(row.clone());
                }
            }
        }
        Ok(out)
    }

    /// The effective boolean value of `e` on a row (`None`: an evaluation error).
    fn ebv(
        &self,
        e: &Expression,
        t: &Table,
        row: &[Option<u32>],
    ) -> Result<Option<bool>, SparqlError> {
        Ok(match e {
            Expression::And(a, b) => match (self.ebv(a, t, row)?, self.ebv(b, t, row)?) {
                (Some(false), _) | (_, Some(false)) => Some(false),
                (Some(true), Some(true)) => Some(true),
                _ => None,
            },
            Expression::Or(a, b) => match (self.ebv(a, t, row)?, self.ebv(b, t, row)?) {
                (Some(true), _) | (_, Some(true)) => Some(true),
                (Some(false), Some(false)) => Some(false),
                _ => None,
            },
            Expression::Not(a) => self.ebv(a, t, row)?.map(|b| !b),
            Expression::Bound(v) => Some(t.col(v.as_str()).and_then(|c| row[c]).is_some()),
            Expression::Equal(a, b) => {
                let (x, y) = (self.value(a, t, row)?, self.value(b, t, row)?);
                match (x, y) {
                    (Some(x), Some(y)) => equal_terms(&x, &y),
                    _ => None,
                }
            }
            Expression::SameTerm(a, b) => match (self.value(a, t, row)?, self.value(b, t, row)?) {
                (Some(x), Some(y)) => Some(x == y),
                _ => None,
            },
            Expression::Greater(a, b)
            | Expression::GreaterOrEqual(a, b)
            | Expression::Less(a, b)
            | Expression::LessOrEqual(a, b) => {
                let (x, y) = (self.value(a, t, row)?, self.value(b, t, row)?);
                let ord = match (x, y) {
                    (Some(x), Some(y)) => order_literals(&x, &y),
                    _ => None,
                };
                ord.map(|o| match e {
                    Expression::Greater(..) => o == Ordering::Greater,
                    Expression::GreaterOrEqual(..) => o != Ordering::Less,
                    Expression::Less(..) => o == Ordering::Less,
                    _ => o != Ordering::Greater,
                })
            }
            Expression::In(a, list) => {
                let Some(x) = self.value(a, t, row)? else {
                    return Ok(None);
                };
                let mut error = false;
                for item in list {
                    match self.value(item, t, row)?.and_then(|y| equal_terms(&x, &y)) {
                        Some(true) => return Ok(Some(true)),
                        Some(false) => {}
                        None => error = true,
                    }
                }
                if error {
                    None
                } else {
                    Some(false)
                }
            }
            Expression::FunctionCall(
                f @ (Function::IsIri | Function::IsBlank | Function::IsLiteral),
                args,
            ) if args.len() == 1 => self.value(&args[0], t, row)?.map(|x| match f {
                Function::IsIri => matches!(x, Term::NamedNode(_)),
                Function::IsBlank => matches!(x, Term::BlankNode(_)),
                _ => matches!(x, Term::Literal(_)),
            }),
            Expression::Variable(_) | Expression::Literal(_) => match self.value(e, t, row)? {
                Some(Term::Literal(l)) => literal_ebv(&l),
                _ => None,
            },
            other => {
                return Err(SparqlError::Unsupported(format!(
                    "FILTER expression `{other}`"
                )))
            }
        })
    }

    /// The term an expression denotes on a row (`None`: unbound).
    fn value(
        &self,
        e: &Expression,
        t: &Table,
        row: &[Option<u32>],
    ) -> Result<Option<Term>, SparqlError> {
        Ok(match e {
            Expression::Variable(v) => t
                .col(v.as_str())
                .and_then(|c| row[c])
                .and_then(|id| self.term(id)),
            Expression::NamedNode(n) => Some(n.clone().into()),
            Expression::Literal(l) => Some(l.clone().into()),
            other => {
                return Err(SparqlError::Unsupported(format!(
                    "FILTER over `{other}` (only variables and constants are compared)"
                )))
            }
        })
    }
}

/// Rejects, before any row is seen, a FILTER expression outside the supported subset:
/// logical connectives, `bound`, `isIRI`/`isBlank`/`isLiteral`, `IN`, and comparisons
/// of variables and constants.
fn check_filter(e: &Expression) -> Result<(), SparqlError> {
    let operand = |x: &Expression| match x {
        Expression::Variable(_) | Expression::NamedNode(_) | Expression::Literal(_) => Ok(()),
        other => Err(SparqlError::Unsupported(format!(
            "FILTER over `{other}` (only variables and constants are compared)"
        ))),
    };
    match e {
        Expression::And(a, b) | Expression::Or(a, b) => {
            check_filter(a)?;
            check_filter(b)
        }
        Expression::Not(a) => check_filter(a),
        Expression::Bound(_) | Expression::Variable(_) | Expression::Literal(_) => Ok(()),
        Expression::Equal(a, b)
        | Expression::SameTerm(a, b)
        | Expression::Greater(a, b)
        | Expression::GreaterOrEqual(a, b)
        | Expression::Less(a, b)
        | Expression::LessOrEqual(a, b) => {
            operand(a)?;
            operand(b)
        }
        Expression::In(a, list) => {
            operand(a)?;
            list.iter().try_for_each(operand)
        }
        Expression::FunctionCall(
            Function::IsIri | Function::IsBlank | Function::IsLiteral,
            args,
        ) if args.len() == 1 => operand(&args[0]),
        other => Err(SparqlError::Unsupported(format!(
            "FILTER expression `{other}`"
        ))),
    }
}

/// Hash join of two bags of solutions (compatible rows merge; unbound values match
/// anything).
fn join(l: &Table, r: &Table) -> Table {
    if l.vars.is_empty() && l.rows.len() == 1 {
        return r.clone();
    }
    if r.vars.is_empty() && r.rows.len() == 1 {
        return l.clone();
    }
    let mut vars = l.vars.clone();
    let mut r_only = Vec::new();
    for (i, v) in r.vars.iter().enumerate() {
        if !vars.contains(v) {
            vars.push(v.clone());
            r_only.push(i);
        }
    }
    let shared: Vec<(usize, usize)> = r
        .vars
        .iter()
        .enumerate()
        .filter_map(|(ri, v)| l.col(v).map(|li| (li, ri)))
        .collect();
    let mut index: HashMap<Vec<u32>, Vec<usize>> = HashMap::new();
    let mut loose = Vec::new(); // right rows with an unbound shared variable
    for (i, row) in r.rows.iter().enumerate() {
        let key: Option<Vec<u32>> = shared.iter().map(|&(_, ri)| row[ri]).collect();
        match key {
            Some(k) => index.entry(k).or_default().push(i),
            None => loose.push(i),
        }
    }
    let mut rows = Vec::new();
    let mut emit = |lrow: &Vec<Option<u32>>, rrow: &Vec<Option<u32>>| {
        let mut out = lrow.clone();
        for &(li, ri) in &shared {
            match (out[li], rrow[ri]) {
                (Some(a), Some(b)) if a != b => return,
                (None, b) => out[li] = b,
                _ => {}
            }
        }
        out.extend(r_only.iter().map(|&i| rrow[i]));
        rows.push(out);
    };
    for lrow in &l.rows {
        let key: Option<Vec<u32>> = shared.iter().map(|&(li, _)| lrow[li]).collect();
        match key {
            Some(k) => {
                for &i in index.get(&k).map(|v| v.as_slice()).unwrap_or(&[]) {
                    emit(lrow, &r.rows[i]);
                }
            }
            None => {
                for rrow in &r.rows {
                    emit(lrow, rrow);
                }
                continue;
            }
        }
        for &i in &loose {
            emit(lrow, &r.rows[i]);
        }
    }
    Table { vars, rows }
}

/// Bag union over the union of the variables.
fn union(l: Table, r: Table) -> Table {
    if l.vars.is_empty() && l.rows.is_empty() {
        return r;
    }
    let mut vars = l.vars.clone();
    for v in &r.vars {
        if !vars.contains(v) {
            vars.push(v.clone());
        }
    }
    let mut rows = Vec::with_capacity(l.rows.len() + r.rows.len());
    for (t, src) in [(&l, &l.rows), (&r, &r.rows)] {
        let cols: Vec<Option<usize>> = vars.iter().map(|v| t.col(v)).collect();
        for row in src {
            rows.push(cols.iter().map(|c| c.and_then(|c| row[c])).collect());
        }
    }
    Table { vars, rows }
}

fn numeric(l: &oxrdf::Literal) -> Option<f64> {
    let dt = l.datatype().as_str();
    let xsd = "http://www.w3.org/2001/XMLSchema#";
    let name = dt.strip_prefix(xsd)?;
    matches!(
        name,
        "integer"
            | "decimal"
            | "float"
            | "double"
            | "int"
            | "long"
            | "short"
            | "byte"
            | "nonNegativeInteger"
            | "positiveInteger"
            | "negativeInteger"
            | "nonPositiveInteger"
            | "unsignedInt"
            | "unsignedLong"
            | "unsignedShort"
            | "unsignedByte"
    )
    .then(|| l.value().trim().parse().ok())
    .flatten()
}

/// `=` between two terms: numbers by value, other terms by identity (an error when two
/// literals of unknown, different types differ).
fn equal_terms(a: &Term, b: &Term) -> Option<bool> {
    if let (Term::Literal(x), Term::Literal(y)) = (a, b) {
        if let (Some(p), Some(q)) = (numeric(x), numeric(y)) {
            return Some(p == q);
        }
        if x != y && x.datatype() != y.datatype() && numeric(x).is_none() != numeric(y).is_none() {
            return Some(false);
        }
    }
    Some(a == b)
}

/// `<` between literals: numbers by value, plain strings lexically; otherwise an error.
fn order_literals(a: &Term, b: &Term) -> Option<Ordering> {
    let (Term::Literal(x), Term::Literal(y)) = (a, b) else {
        return None;
    };
    if let (Some(p), Some(q)) = (numeric(x), numeric(y)) {
        return p.partial_cmp(&q);
    }
    (x.datatype() == y.datatype() && x.language() == y.language()).then(|| x.value().cmp(y.value()))
}

fn literal_ebv(l: &oxrdf::Literal) -> Option<bool> {
    if let Some(n) = numeric(l) {
        return Some(n != 0.0 && !n.is_nan());
    }
    match l.datatype().as_str() {
        "http://www.w3.org/2001/XMLSchema#boolean" => Some(l.value() == "true" || l.value() == "1"),
        "http://www.w3.org/2001/XMLSchema#string" => Some(!l.value().is_empty()),
        _ => None,
    }
}

/// SPARQL ORDER BY: unbound < blank nodes < IRIs < literals; numbers by value.
fn compare_terms(a: Option<&Term>, b: Option<&Term>) -> Ordering {
    fn rank(t: Option<&Term>) -> u8 {
        match t {
            None => 0,
            Some(Term::BlankNode(_)) => 1,
            Some(Term::NamedNode(_)) => 2,
            _ => 3,
        }
    }
    match (a, b) {
        (Some(Term::BlankNode(x)), Some(Term::BlankNode(y))) => x.as_str().cmp(y.as_str()),
        (Some(Term::NamedNode(x)), Some(Term::NamedNode(y))) => x.as_str().cmp(y.as_str()),
        (Some(Term::Literal(x)), Some(Term::Literal(y))) => match (numeric(x), numeric(y)) {
            (Some(p), Some(q)) => p.partial_cmp(&q).unwrap_or(Ordering::Equal),
            _ => (x.value(), x.datatype().as_str(), x.language()).cmp(&(
                y.value(),
                y.datatype().as_str(),
                y.language(),
            )),
        },
        _ => rank(a).cmp(&rank(b)),
    }
}
