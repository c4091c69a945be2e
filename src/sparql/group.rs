//! The path service's work: a group of joined triple and path patterns, with the VALUES
//! pushed into it, evaluated on k2rpq's engines ([`evaluate_group`]).
//!
//! The rewrite ([`super::rewrite::wrap_paths_in_service`]) wraps each such group in
//! `SERVICE <urn:k2rpq:paths>`; Oxigraph's evaluator hands the service its pattern (after
//! its own algebra round trip, which puts each triple in a `GRAPH` of its own) and no
//! outer bindings. [`PathGroup::from_pattern`] reads that pattern back into a group;
//! anything but joins of triples, paths, `GRAPH` and pushed-in `VALUES` is an error.
//!
//! Solutions are rows of term ids; terms the dictionary does not know (constants of the
//! query) get ids of their own from [`QUERY_TERM_BASE`] up, which no relation holds. Paths
//! keep SPARQL 1.1's multiplicities ([`super::semantics`]); the triples of a group are
//! sets, joined as bags.

use rustc_hash::{FxHashMap as HashMap, FxHashSet as HashSet};
use std::cell::Cell;
use std::time::Instant;

use oxrdf::{Term, TermRef, Variable};
use spargebra::algebra::{GraphPattern, PropertyPathExpression};
use spargebra::term::{GroundTerm, NamedNodePattern, TermPattern};

use super::count::{strip_inverses, Start, Weights};
use super::dataset::PathDataset;
use super::semantics::{Bag, Deadline, Evaluator, Nodes};
use super::store::id_term;
use super::SparqlError;
use crate::engine::{Engine, MatrixConfig};
use crate::rpq::{parse_path_expr, Path, PathGraph, PerQueryRelations, RelationSource};

/// First id given to a query term the dictionary does not know.
pub const QUERY_TERM_BASE: u32 = 0x8000_0000;

/// The most distinct terms a solution stream keeps decoded (about 100 bytes each): beyond
/// them a term is decoded for each cell it fills.
const DECODED_TERMS: usize = 1 << 20;

/// Where the path evaluations of one group get their loaded relations: one
/// [`RelationSource`] per graph of the dataset, asked for the first time a path is matched
/// in that graph and kept for the rest of the group.
///
/// [`PerQueryProvider`] loads each relation into the engine once per group;
/// `crate::database::Database` hands out sources backed by its device cache, so that
/// relations stay resident across queries under the GPU budget.
pub trait RelationProvider<'a, E: Engine> {
    /// The source for graph `name` (`None`: the dataset's default graph), which is `graph`.
    fn source(
        &self,
        name: Option<u32>,
        graph: &'a dyn PathGraph,
    ) -> Box<dyn RelationSource<E> + 'a>;
}

/// Loads each relation once per group ([`PerQueryRelations`], the cached-frontier
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

/// A table of values joined with a group: pushed-in VALUES, or the rows of a subquery.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ValuesTable {
    /// Its variables.
    pub variables: Vec<Variable>,
    /// Its rows, one value (or none) per variable.
    pub rows: Vec<Vec<Option<Term>>>,
}

/// The predicate of a group member.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum GroupPredicate {
    /// A property path (a single IRI for a triple pattern).
    Path(PropertyPathExpression),
    /// A variable (a triple pattern).
    Variable(Variable),
}

/// A triple or path pattern of a group, with the graph it is matched in.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GroupPattern {
    /// `GRAPH` around it: `None` for the default graph.
    pub graph: Option<NamedNodePattern>,
    /// Subject.
    pub subject: TermPattern,
    /// Predicate or path.
    pub predicate: GroupPredicate,
    /// Object.
    pub object: TermPattern,
}

/// A count the path service computes over a group's rows.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Count {
    /// `COUNT(*)`, `COUNT(DISTINCT *)`: rows (distinct ones).
    Rows {
        /// Distinct rows only.
        distinct: bool,
    },
    /// `COUNT(?v)`, `COUNT(DISTINCT ?v)`: rows binding `?v` (distinct values).
    Bound {
        /// The variable.
        variable: Variable,
        /// Distinct values only.
        distinct: bool,
    },
}

/// What the service does to a group's rows before it returns them, as the query asks
/// around the group (pushed in by the rewrite).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Modifier {
    /// Keeps these columns (`SELECT ?a ?b`).
    Project(Vec<Variable>),
    /// Drops duplicate rows (`DISTINCT`, `REDUCED`).
    Distinct,
    /// Groups the rows by these variables and counts each group: `(variable, count)`.
    Group(Vec<Variable>, Vec<(Variable, Count)>),
    /// Keeps `length` rows (all: `None`) after the first `start` (`LIMIT`, `OFFSET`).
    Slice {
        /// Rows skipped.
        start: usize,
        /// Rows kept.
        length: Option<usize>,
    },
}

/// A group of joined triple and path patterns and the VALUES pushed into it: what the
/// path service evaluates.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PathGroup {
    /// VALUES tables joined with the group.
    pub values: Vec<ValuesTable>,
    /// The patterns, in the order the query gives them.
    pub patterns: Vec<GroupPattern>,
    /// `GRAPH g {}` members: one solution for each named graph `g` matches.
    pub graphs: Vec<NamedNodePattern>,
    /// Applied to the group's rows in order, the first innermost.
    pub modifiers: Vec<Modifier>,
    /// Subqueries joined with the group, which its caller evaluates into [`ValuesTable`]s
    /// before [`evaluate_group`] (the rewrite puts small ones here:
    /// [`super::rewrite::wrap_paths_and_small_subqueries_in_service`]).
    pub subqueries: Vec<GraphPattern>,
}

impl PathGroup {
    /// Reads the pattern of a `SERVICE <urn:k2rpq:paths>` call: joins of basic graph
    /// patterns, property paths, `GRAPH` and VALUES (possibly projected and
    /// deduplicated, as the rewrite pushes them in).
    ///
    /// ```
    /// use k2rpq::sparql::group::{GroupPredicate, PathGroup};
    /// let q = spargebra::SparqlParser::new()
    ///     .parse_query("SELECT * WHERE { VALUES ?s { <http://e/a> } ?s <http://e/p>+ ?o . ?o <http://e/q> ?z }")
    ///     .unwrap();
    /// let spargebra::Query::Select { pattern, .. } = q else { unreachable!() };
    /// let spargebra::algebra::GraphPattern::Project { inner, .. } = pattern else { unreachable!() };
    /// let group = PathGroup::from_pattern(&inner).unwrap();
    /// assert_eq!(group.values.len(), 1);
    /// assert_eq!(group.patterns.len(), 2);
    /// assert!(matches!(group.patterns[1].predicate, GroupPredicate::Path(_)));
    /// ```
    pub fn from_pattern(pattern: &GraphPattern) -> Result<PathGroup, SparqlError> {
        let mut group = PathGroup::default();
        // Projections, DISTINCT and counts around the group, outermost first.
        let mut p = pattern;
        loop {
            let (modifier, inner) = match p {
                GraphPattern::Project { inner, variables } if values_of(p).is_none() => {
                    (Modifier::Project(variables.clone()), inner)
                }
                GraphPattern::Distinct { inner } | GraphPattern::Reduced { inner }
                    if values_of(p).is_none() =>
                {
                    (Modifier::Distinct, inner)
                }
                GraphPattern::Group {
                    inner,
                    variables,
                    aggregates,
                } => {
                    let counts = aggregates
                        .iter()
                        .map(|(v, a)| Ok((v.clone(), count_of(a)?)))
                        .collect::<Result<_, SparqlError>>()?;
                    (Modifier::Group(variables.clone(), counts), inner)
                }
                GraphPattern::Slice {
                    inner,
                    start,
                    length,
                } => (
                    Modifier::Slice {
                        start: *start,
                        length: *length,
                    },
                    inner,
                ),
                _ => break,
            };
            group.modifiers.push(modifier);
            p = inner;
        }
        group.modifiers.reverse();
        group.read(p, None)?;
        Ok(group)
    }

    fn read(
        &mut self,
        p: &GraphPattern,
        graph: Option<&NamedNodePattern>,
    ) -> Result<(), SparqlError> {
        match p {
            GraphPattern::Join { left, right } => {
                self.read(left, graph)?;
                self.read(right, graph)
            }
            GraphPattern::Bgp { patterns } => {
                for t in patterns {
                    self.patterns.push(GroupPattern {
                        graph: graph.cloned(),
                        subject: t.subject.clone(),
                        predicate: match &t.predicate {
                            NamedNodePattern::NamedNode(n) => {
                                GroupPredicate::Path(PropertyPathExpression::NamedNode(n.clone()))
                            }
                            NamedNodePattern::Variable(v) => GroupPredicate::Variable(v.clone()),
                        },
                        object: t.object.clone(),
                    });
                }
                if let (true, Some(g)) = (patterns.is_empty(), graph) {
                    self.graphs.push(g.clone());
                }
                Ok(())
            }
            GraphPattern::Path {
                subject,
                path,
                object,
            } => {
                self.patterns.push(GroupPattern {
                    graph: graph.cloned(),
                    subject: subject.clone(),
                    predicate: GroupPredicate::Path(path.clone()),
                    object: object.clone(),
                });
                Ok(())
            }
            GraphPattern::Graph { name, inner } => self.read(inner, Some(name)),
            other => match values_of(other) {
                Some(v) => {
                    self.values.push(v);
                    Ok(())
                }
                None if graph.is_none()
                    && matches!(
                        other,
                        GraphPattern::Slice { .. }
                            | GraphPattern::Project { .. }
                            | GraphPattern::Distinct { .. }
                            | GraphPattern::Reduced { .. }
                    ) =>
                {
                    self.subqueries.push(other.clone());
                    Ok(())
                }
                None => Err(SparqlError::Unsupported(format!(
                    "`{other}` inside SERVICE <{}>",
                    super::rewrite::SERVICE_IRI
                ))),
            },
        }
    }

    /// The predicate IRIs whose relations the group reads, sorted, or `None` when it may
    /// read any (a variable predicate or a negated property set).
    pub fn predicates_read(&self) -> Option<Vec<String>> {
        let mut out = Vec::new();
        for p in &self.patterns {
            let GroupPredicate::Path(path) = &p.predicate else {
                return None;
            };
            if !super::rewrite::path_predicates(path, &mut out) {
                return None;
            }
        }
        out.sort_unstable();
        out.dedup();
        Some(out)
    }

    /// The columns of the service's rows: the group's variables, as the modifiers leave
    /// them.
    pub fn columns(&self) -> Vec<Variable> {
        let mut columns = self.variables();
        for m in &self.modifiers {
            match m {
                Modifier::Project(vars) => columns = vars.clone(),
                Modifier::Distinct | Modifier::Slice { .. } => {}
                Modifier::Group(by, counts) => {
                    columns = by.clone();
                    columns.extend(counts.iter().map(|(v, _)| v.clone()));
                }
            }
        }
        columns
    }

    /// How many rows of the group's lone path pattern are enough for its modifiers: a
    /// LIMIT (plus OFFSET) over it, with only projections in between (any rows of a bag
    /// will do). `None` where all are needed: several patterns, VALUES, subqueries,
    /// DISTINCT or counts before the slice, or no slice.
    pub fn rows_needed(&self) -> Option<u64> {
        let lone = self.patterns.len() == 1
            && self.values.is_empty()
            && self.graphs.is_empty()
            && self.subqueries.is_empty()
            && matches!(self.patterns[0].predicate, GroupPredicate::Path(_));
        if !lone {
            return None;
        }
        for m in &self.modifiers {
            match m {
                Modifier::Project(_) => {}
                Modifier::Slice {
                    start,
                    length: Some(n),
                } => return Some(start.saturating_add(*n) as u64),
                _ => return None,
            }
        }
        None
    }

    /// Whether [`evaluate_group_in_batches`] can evaluate the group a batch of subjects
    /// at a time: one path pattern between two distinct variables in the default graph,
    /// with only projections and slices around it (nothing that needs every row at once).
    pub fn streams(&self) -> bool {
        self.streamed_pattern().is_some()
    }

    /// The pattern of a group that [`PathGroup::streams`], and its subject variable.
    fn streamed_pattern(&self) -> Option<(&GroupPattern, String)> {
        let [p] = self.patterns.as_slice() else {
            return None;
        };
        let alone = self.values.is_empty() && self.graphs.is_empty() && self.subqueries.is_empty();
        let modifiers = self
            .modifiers
            .iter()
            .all(|m| matches!(m, Modifier::Project(_) | Modifier::Slice { .. }));
        match (&p.subject, &p.predicate, &p.object, &p.graph) {
            (TermPattern::Variable(s), GroupPredicate::Path(_), TermPattern::Variable(o), None)
                if s != o && alone && modifiers =>
            {
                Some((p, s.as_str().to_owned()))
            }
            _ => None,
        }
    }

    /// The variables the group binds, in order of appearance.
    pub fn variables(&self) -> Vec<Variable> {
        let mut out: Vec<Variable> = Vec::new();
        let mut add = |v: &Variable| {
            if !out.contains(v) {
                out.push(v.clone());
            }
        };
        for v in &self.values {
            v.variables.iter().for_each(&mut add);
        }
        for sub in &self.subqueries {
            sub.on_in_scope_variable(&mut add);
        }
        for g in &self.graphs {
            if let NamedNodePattern::Variable(v) = g {
                add(v);
            }
        }
        for p in &self.patterns {
            if let Some(NamedNodePattern::Variable(g)) = &p.graph {
                add(g);
            }
            if let TermPattern::Variable(v) = &p.subject {
                add(v);
            }
            if let GroupPredicate::Variable(v) = &p.predicate {
                add(v);
            }
            if let TermPattern::Variable(v) = &p.object {
                add(v);
            }
        }
        out
    }
}

/// The count an aggregate asks for (only counts are pushed into the service).
fn count_of(a: &spargebra::algebra::AggregateExpression) -> Result<Count, SparqlError> {
    use spargebra::algebra::{AggregateExpression, AggregateFunction, Expression};
    match a {
        AggregateExpression::CountSolutions { distinct } => Ok(Count::Rows {
            distinct: *distinct,
        }),
        AggregateExpression::FunctionCall {
            name: AggregateFunction::Count,
            expr: Expression::Variable(v),
            distinct,
        } => Ok(Count::Bound {
            variable: v.clone(),
            distinct: *distinct,
        }),
        other => Err(SparqlError::Unsupported(format!(
            "aggregate {other} inside SERVICE <{}>",
            super::rewrite::SERVICE_IRI
        ))),
    }
}

/// The table of a VALUES pattern, possibly projected (`Project`) and deduplicated
/// (`Distinct`, `Reduced`); `None` for any other pattern.
fn values_of(p: &GraphPattern) -> Option<ValuesTable> {
    match p {
        GraphPattern::Values {
            variables,
            bindings,
        } => Some(ValuesTable {
            variables: variables.clone(),
            rows: bindings
                .iter()
                .map(|r| {
                    r.iter()
                        .map(|t| {
                            t.as_ref().map(|t| match t {
                                GroundTerm::NamedNode(n) => Term::from(n.clone()),
                                GroundTerm::Literal(l) => Term::from(l.clone()),
                            })
                        })
                        .collect()
                })
                .collect(),
        }),
        GraphPattern::Project { inner, variables } => {
            let t = values_of(inner)?;
            let cols: Vec<Option<usize>> = variables
                .iter()
                .map(|v| t.variables.iter().position(|x| x == v))
                .collect();
            Some(ValuesTable {
                variables: variables.clone(),
                rows: t
                    .rows
                    .iter()
                    .map(|r| cols.iter().map(|c| c.and_then(|c| r[c].clone())).collect())
                    .collect(),
            })
        }
        GraphPattern::Distinct { inner } | GraphPattern::Reduced { inner } => {
            let mut t = values_of(inner)?;
            let mut seen = HashSet::default();
            t.rows.retain(|r| seen.insert(r.clone()));
            Some(t)
        }
        _ => None,
    }
}

/// The default graph of a query's dataset, as the path service sees it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum DefaultGraph {
    /// The dataset's own default graph.
    #[default]
    Dataset,
    /// The named graph whose name has this id (`FROM <g>`).
    Named(u32),
    /// No triples (`FROM` a graph the store does not hold, or only `FROM NAMED`).
    Empty,
}

/// The graphs a group is matched against: the query's dataset (`FROM`, `FROM NAMED`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct GraphScope {
    /// The default graph.
    pub default: DefaultGraph,
    /// The names (ids) of the named graphs `GRAPH` ranges over; `None`: all of the
    /// dataset's.
    pub named: Option<Vec<u32>>,
}

/// One solution of a group: a term id (or none: unbound) per column.
pub type IdRow = Vec<Option<u32>>;

/// A group's solutions as rows of term ids.
#[derive(Debug)]
pub struct GroupSolutions {
    /// Column names.
    pub variables: Vec<Variable>,
    /// One id (or none: unbound) per variable, duplicates kept.
    pub rows: IdRows,
    /// The terms of ids from [`QUERY_TERM_BASE`] up, in order.
    pub query_terms: Vec<Term>,
}

/// What an evaluation that runs apart from its reader sends it, in order: batches of
/// rows, then its end or its failure.
#[derive(Debug)]
pub enum RowBatch {
    /// More rows.
    Rows(Vec<IdRow>),
    /// The answer is complete.
    End,
    /// The evaluation failed: the rows sent are not the whole answer.
    Failed(SparqlError),
}

/// A group's rows as they come: all at hand, or batch by batch from an evaluation that
/// runs on while they are read ([`IdRows::batches`]), so that memory holds a few batches
/// rather than the answer. An evaluation that stops without saying it ended is an error,
/// never a complete-looking answer.
#[derive(Debug)]
pub struct IdRows {
    batch: std::vec::IntoIter<IdRow>,
    more: Option<std::sync::mpsc::Receiver<RowBatch>>,
}

impl IdRows {
    /// Rows all at hand.
    pub fn whole(rows: Vec<IdRow>) -> IdRows {
        IdRows {
            batch: rows.into_iter(),
            more: None,
        }
    }

    /// Rows that arrive in batches through `receiver`.
    pub fn batches(receiver: std::sync::mpsc::Receiver<RowBatch>) -> IdRows {
        IdRows {
            batch: Vec::new().into_iter(),
            more: Some(receiver),
        }
    }

    /// Every row, read to the end.
    pub fn collect_all(self) -> Result<Vec<IdRow>, SparqlError> {
        self.collect()
    }
}

impl From<Vec<IdRow>> for IdRows {
    fn from(rows: Vec<IdRow>) -> IdRows {
        IdRows::whole(rows)
    }
}

impl Iterator for IdRows {
    type Item = Result<IdRow, SparqlError>;

    fn next(&mut self) -> Option<Self::Item> {
        loop {
            if let Some(row) = self.batch.next() {
                return Some(Ok(row));
            }
            let received = self.more.as_ref()?.recv();
            match received {
                Ok(RowBatch::Rows(rows)) => self.batch = rows.into_iter(),
                Ok(RowBatch::End) => {
                    self.more = None;
                    return None;
                }
                Ok(RowBatch::Failed(e)) => {
                    self.more = None;
                    return Some(Err(e));
                }
                Err(_) => {
                    self.more = None;
                    return Some(Err(SparqlError::Interrupted));
                }
            }
        }
    }
}

impl GroupSolutions {
    /// The solutions as Oxigraph's, decoding each id as the stream reaches it (each
    /// distinct term once, up to 2^20 of them) with `decode`. Past `deadline` the stream
    /// ends in [`SparqlError::Timeout`]: the evaluator may combine these rows in memory,
    /// where it checks no cancellation.
    pub fn into_solutions(
        self,
        decode: impl Fn(u32) -> Option<Term> + 'static,
        deadline: Deadline,
    ) -> spareval::QuerySolutionIter<'static> {
        let GroupSolutions {
            variables,
            rows,
            query_terms,
        } = self;
        solutions_of(variables, rows, query_terms, kept(decode), deadline)
    }

    /// The solutions of `variables`, each the column of these rows of the same name
    /// (unbound where there is none), rows `offset` to `offset + length`: a query's
    /// answer when the rows are its one path service call's ([`super::rewrite::LoneService`]).
    /// Decoded and ended as [`GroupSolutions::into_solutions`]'s.
    pub fn into_projected_solutions(
        self,
        variables: Vec<Variable>,
        offset: usize,
        length: Option<usize>,
        decode: impl Fn(u32) -> Option<Term> + 'static,
        deadline: Deadline,
    ) -> spareval::QuerySolutionIter<'static> {
        let columns: Vec<Option<usize>> = variables
            .iter()
            .map(|v| self.variables.iter().position(|c| c == v))
            .collect();
        let (mut rows, mut skip, mut left) = (self.rows, offset, length.unwrap_or(usize::MAX));
        let projected = std::iter::from_fn(move || {
            if left == 0 {
                return None;
            }
            loop {
                match rows.next()? {
                    // Skipped rows still end the stream where they fail.
                    Ok(_) if skip > 0 => skip -= 1,
                    row => {
                        left -= 1;
                        return Some(
                            row.map(|row| columns.iter().map(|c| c.and_then(|c| row[c])).collect()),
                        );
                    }
                }
            }
        });
        solutions_of(
            variables,
            projected,
            self.query_terms,
            kept(decode),
            deadline,
        )
    }

    /// The solutions as Oxigraph's with each store id as its [`id_term`], for the
    /// evaluator over [`super::StoreQuads`], which reads the id back: no term is decoded.
    /// Past `deadline` the stream ends as [`GroupSolutions::into_solutions`]'s does.
    pub fn into_id_solutions(self, deadline: Deadline) -> spareval::QuerySolutionIter<'static> {
        solutions_of(
            self.variables,
            self.rows,
            self.query_terms,
            |id| Some(id_term(id)),
            deadline,
        )
    }
}

/// `decode` with each distinct term decoded once (up to [`DECODED_TERMS`] of them).
fn kept(decode: impl Fn(u32) -> Option<Term>) -> impl FnMut(u32) -> Option<Term> {
    let mut decoded: HashMap<u32, Term> = HashMap::default();
    move |id| {
        if let Some(t) = decoded.get(&id) {
            return Some(t.clone());
        }
        let t = decode(id)?;
        if decoded.len() < DECODED_TERMS {
            decoded.insert(id, t.clone());
        }
        Some(t)
    }
}

/// `rows` as Oxigraph's solutions of `variables`, with each store id as `term` gives it
/// and ids from [`QUERY_TERM_BASE`] up taken from `query_terms`.
fn solutions_of(
    variables: Vec<Variable>,
    rows: impl Iterator<Item = Result<IdRow, SparqlError>> + 'static,
    query_terms: Vec<Term>,
    mut term: impl FnMut(u32) -> Option<Term> + 'static,
    deadline: Deadline,
) -> spareval::QuerySolutionIter<'static> {
    let mut cell = move |id: u32| -> Result<Term, SparqlError> {
        if id >= QUERY_TERM_BASE {
            return query_terms
                .get((id - QUERY_TERM_BASE) as usize)
                .cloned()
                .ok_or(SparqlError::MissingTerm(id));
        }
        term(id).ok_or(SparqlError::MissingTerm(id))
    };
    let (mut failed, mut count) = (false, 0usize);
    let rows = rows.map_while(move |row| {
        if failed {
            return None;
        }
        count += 1;
        let on_time = if count % 64 == 1 {
            deadline.check()
        } else {
            Ok(())
        };
        let row = on_time.and(row).and_then(|row| {
            row.into_iter()
                .map(|id| id.map(&mut cell).transpose())
                .collect::<Result<Vec<_>, _>>()
        });
        failed = row.is_err();
        Some(row.map_err(|e| spareval::QueryEvaluationError::Service(Box::new(e))))
    });
    spareval::QuerySolutionIter::from_tuples(variables.into(), rows)
}

/// Evaluates `group` over `dataset` (restricted to `scope`) with `engine`, loading
/// relations through `relations`; stops with [`SparqlError::Timeout`] once `deadline`
/// passes. This is the path service's one entry point: the group arrives with the values
/// pushed into it, and every pattern of it is evaluated here.
///
/// ```
/// use k2rpq::engine::cpu::CpuEngine;
/// use k2rpq::sparql::group::{evaluate_group, GraphScope, PathGroup, PerQueryProvider};
/// use k2rpq::sparql::MemoryDataset;
/// use oxrdf::{GraphName, NamedNode, Quad};
/// let n = |s: &str| NamedNode::new(format!("http://e/{s}")).unwrap();
/// let quads = vec![
///     Quad::new(n("a"), n("p"), n("b"), GraphName::DefaultGraph),
///     Quad::new(n("b"), n("p"), n("c"), GraphName::DefaultGraph),
/// ];
/// let d = MemoryDataset::from_quads(quads.iter().map(|q| q.as_ref()));
/// let q = spargebra::SparqlParser::new().parse_query("SELECT * { <http://e/a> <http://e/p>+ ?x }").unwrap();
/// let spargebra::Query::Select { pattern, .. } = q else { unreachable!() };
/// let spargebra::algebra::GraphPattern::Project { inner, .. } = pattern else { unreachable!() };
/// let group = PathGroup::from_pattern(&inner).unwrap();
/// let engine = CpuEngine::new();
/// let rows = evaluate_group(&engine, &d, &GraphScope::default(), &group, &PerQueryProvider(&engine), None).unwrap();
/// assert_eq!(rows.rows.collect_all().unwrap().len(), 2);
/// ```
pub fn evaluate_group<'a, E: Engine>(
    engine: &'a E,
    dataset: &'a dyn PathDataset,
    scope: &GraphScope,
    group: &PathGroup,
    relations: &'a dyn RelationProvider<'a, E>,
    deadline: Option<Instant>,
) -> Result<GroupSolutions, SparqlError> {
    let ctx = Context::new(
        engine,
        dataset,
        scope,
        deadline,
        relations,
        group.rows_needed(),
    );
    if let Some(sub) = group.subqueries.first() {
        return Err(SparqlError::Unsupported(format!(
            "subquery `{sub}` in a path group: evaluate it into values first"
        )));
    }
    let (mut table, modifiers) = match ctx.counted(group)? {
        Some(counted) => (counted, &group.modifiers[1..]),
        None => (ctx.rows(group)?, &group.modifiers[..]),
    };
    for m in modifiers {
        ctx.deadline.check()?;
        table = match m {
            Modifier::Project(vars) => project(table, vars),
            Modifier::Distinct => {
                let mut seen = HashSet::default();
                table.rows.retain(|r| seen.insert(r.clone()));
                table
            }
            Modifier::Group(by, counts) => ctx.count(&table, by, counts),
            Modifier::Slice { start, length } => {
                let end = length.map_or(usize::MAX, |n| start.saturating_add(n));
                table.rows.truncate(end);
                table.rows.drain(..(*start).min(table.rows.len()));
                table
            }
        };
    }
    Ok(GroupSolutions {
        variables: group.columns(),
        rows: IdRows::whole(table.rows),
        query_terms: ctx.query_terms.into_inner().0,
    })
}

/// Rows the first, whole-answer attempt of [`evaluate_group_in_batches`] may find before
/// the answer counts as large and is computed a batch of subjects at a time instead.
const WHOLE_ANSWER_ROWS: u64 = 1 << 18;

/// Rows a batch of subjects aims at (about 130 bytes each while it is computed).
const BATCH_ROWS: u64 = 1 << 18;

/// Subjects of the first batch: one, as one subject may reach the whole graph.
const FIRST_BATCH_SUBJECTS: usize = 1;

/// How much larger one batch of subjects may be than the one before: the rows per
/// subject vary, and a batch sized from a sparse one may meet dense ones.
const BATCH_GROWTH: u64 = 4;

/// How much larger a batch of subjects may be than one that found no rows.
const EMPTY_BATCH_GROWTH: u64 = 64;

/// Evaluates a group that [`PathGroup::streams`] as [`evaluate_group`] does, handing its
/// rows (the group's [`PathGroup::columns`]) to `sink` a batch at a time; `sink` returns
/// `false` once it wants no more. With `whole_first`, the answer is first computed whole
/// when it is small ([`small_streamed_answer`]: a caller that tried that already passes
/// `false`); else a batch of subjects at a time, each batch sized from the rows per
/// subject found so far, so that memory holds one batch's rows. The subjects partition
/// the answer: every solution comes from exactly one batch.
#[allow(clippy::too_many_arguments)]
pub fn evaluate_group_in_batches<'a, E: Engine>(
    engine: &'a E,
    dataset: &'a dyn PathDataset,
    scope: &GraphScope,
    group: &PathGroup,
    relations: &'a dyn RelationProvider<'a, E>,
    deadline: Option<Instant>,
    whole_first: bool,
    sink: &mut dyn FnMut(Vec<IdRow>) -> bool,
) -> Result<(), SparqlError> {
    in_batches(
        engine,
        dataset,
        scope,
        group,
        relations,
        deadline,
        SIZES,
        whole_first,
        sink,
    )
}

/// The first, whole-answer attempt of [`evaluate_group_in_batches`] on its own: the rows
/// of a group that [`PathGroup::streams`] when its path stops at a row limit and its
/// answer is small, else `None`. A caller that streams batches from a thread of its own
/// can answer a small group here instead, without the thread and the hand-over of rows.
pub fn small_streamed_answer<'a, E: Engine>(
    engine: &'a E,
    dataset: &'a dyn PathDataset,
    scope: &GraphScope,
    group: &PathGroup,
    relations: &'a dyn RelationProvider<'a, E>,
    deadline: Option<Instant>,
) -> Result<Option<Vec<IdRow>>, SparqlError> {
    let Some((pattern, _)) = group.streamed_pattern() else {
        return Ok(None);
    };
    let ctx = Context::new(engine, dataset, scope, deadline, relations, None);
    if ctx.default_active().and_then(|a| ctx.graph(a)).is_none() {
        return Ok(Some(Vec::new()));
    }
    let columns = group.variables();
    let Some(whole) = whole_answer(&ctx, group, pattern, SIZES)? else {
        return Ok(None);
    };
    let mut around = Modifiers::new(columns.clone(), &group.modifiers);
    Ok(Some(around.apply(project(whole, &columns).rows)))
}

/// The whole answer of a streamed `pattern` of `group`, in one evaluation, when its
/// relations bound it under `sizes.whole_answer` rows, or when its path stops at a row
/// limit and it has at most that many rows (or the rows the group needs); else `None`.
fn whole_answer<E: Engine>(
    ctx: &Context<'_, '_, E>,
    group: &PathGroup,
    pattern: &GroupPattern,
    sizes: BatchSizes,
) -> Result<Option<Table>, SparqlError> {
    let GroupPredicate::Path(expr) = &pattern.predicate else {
        unreachable!("a streamed pattern has a path")
    };
    let d = ctx.dataset.dictionary();
    let resolve = |iri: &str| d.id(oxrdf::NamedNodeRef::new_unchecked(iri).into());
    let path = parse_path_expr(expr, resolve);
    let Some(graph) = ctx.default_active().and_then(|a| ctx.graph(a)) else {
        return Ok(Some(Table::empty(Vec::new())));
    };
    // An answer its relations bound as small comes whole: batches would scan every
    // subject, where a whole evaluation of an alternative of links reads only cells.
    if rows_at_most(&path, graph) <= sizes.whole_answer {
        return ctx
            .with_limit(group.rows_needed())
            .pattern(pattern, None)
            .map(Some);
    }
    if !stops_at_limit(&path) {
        return Ok(None);
    }
    let needed = group.rows_needed().unwrap_or(u64::MAX);
    let limit = needed.min(sizes.whole_answer + 1);
    let whole = ctx.with_limit(Some(limit)).pattern(pattern, None)?;
    Ok(((whole.rows.len() as u64) < limit || limit == needed).then_some(whole))
}

/// How [`in_batches`] cuts an answer: rows of a first whole-answer attempt, and rows a
/// batch of subjects aims at.
#[derive(Clone, Copy, Debug)]
struct BatchSizes {
    whole_answer: u64,
    batch: u64,
}

/// The sizes of every batched evaluation but the tests'.
const SIZES: BatchSizes = BatchSizes {
    whole_answer: WHOLE_ANSWER_ROWS,
    batch: BATCH_ROWS,
};

/// [`evaluate_group_in_batches`] with these `sizes`.
#[allow(clippy::too_many_arguments)]
fn in_batches<'a, E: Engine>(
    engine: &'a E,
    dataset: &'a dyn PathDataset,
    scope: &GraphScope,
    group: &PathGroup,
    relations: &'a dyn RelationProvider<'a, E>,
    deadline: Option<Instant>,
    sizes: BatchSizes,
    try_whole: bool,
    sink: &mut dyn FnMut(Vec<IdRow>) -> bool,
) -> Result<(), SparqlError> {
    let Some((pattern, subject)) = group.streamed_pattern() else {
        return Err(SparqlError::Unsupported(
            "a group that is not one path pattern between two variables".into(),
        ));
    };
    let ctx = Context::new(engine, dataset, scope, deadline, relations, None);
    let Some(graph) = ctx.default_active().and_then(|a| ctx.graph(a)) else {
        return Ok(());
    };
    let columns = group.variables();
    let needed = group.rows_needed().unwrap_or(u64::MAX);
    let mut around = Modifiers::new(columns.clone(), &group.modifiers);
    let mut emit = |table: Table| -> bool {
        let rows = around.apply(project(table, &columns).rows);
        (rows.is_empty() || sink(rows)) && !around.done()
    };

    let GroupPredicate::Path(expr) = &pattern.predicate else {
        unreachable!("a streamed pattern has a path")
    };
    let resolve = |iri: &str| {
        dataset
            .dictionary()
            .id(oxrdf::NamedNodeRef::new_unchecked(iri).into())
    };
    let path = parse_path_expr(expr, resolve);
    // A small answer comes in one evaluation, as it would without batches (unless the
    // caller tried that already).
    if try_whole {
        if let Some(whole) = whole_answer(&ctx, group, pattern, sizes)? {
            emit(whole);
            return Ok(());
        }
    }

    // Only nodes with an edge for a first step of the path can be subjects.
    let mut subjects = crate::rpq::subject_candidates(graph, &path).into_iter();
    let mut batch = FIRST_BATCH_SUBJECTS;
    let mut produced = 0u64;
    loop {
        ctx.deadline.check()?;
        let ids: Vec<IdRow> = subjects
            .by_ref()
            .take(batch)
            .map(|x| vec![Some(x)])
            .collect();
        if ids.is_empty() {
            return Ok(());
        }
        let taken = ids.len();
        let bound = Table {
            vars: vec![subject.clone()],
            rows: ids,
        };
        let rest = needed.saturating_sub(produced);
        let found = ctx
            .with_limit((rest != u64::MAX).then_some(rest))
            .pattern(pattern, Some(&bound))?;
        let rows = found.rows.len() as u64;
        produced = produced.saturating_add(rows);
        if !emit(found) || produced >= needed {
            return Ok(());
        }
        // The next batch: as many subjects as this one's rows per subject ask for, or
        // many more after a batch without rows.
        let wanted = match rows {
            0 => (taken as u64).saturating_mul(EMPTY_BATCH_GROWTH),
            _ => {
                ((taken as u64).saturating_mul(sizes.batch) / rows).min(taken as u64 * BATCH_GROWTH)
            }
        };
        batch = (wanted as usize).clamp(1, 1 << 20);
    }
}

/// An upper bound of a path's solutions in `graph` (duplicates counted) from its
/// relations' edges; `u64::MAX` for a closure, whose pairs the edges do not bound.
fn rows_at_most(path: &Path, graph: &dyn PathGraph) -> u64 {
    let edges = |p: u32| graph.relation(p).map_or(0, |t| t.nnz());
    match path {
        Path::Link(p) => edges(*p),
        Path::Inverse(a) => rows_at_most(a, graph),
        Path::Alternative(a, b) => rows_at_most(a, graph).saturating_add(rows_at_most(b, graph)),
        Path::Sequence(a, b) => rows_at_most(a, graph).saturating_mul(rows_at_most(b, graph)),
        // A triple counts at most once forward and once inverse.
        Path::NegatedSet(_) => graph
            .predicates()
            .into_iter()
            .map(edges)
            .fold(0u64, u64::saturating_add)
            .saturating_mul(2),
        Path::ZeroOrMore(_) | Path::OneOrMore(_) | Path::ZeroOrOne(_) => u64::MAX,
    }
}

/// Whether a path's evaluation stops once it has found a given number of pairs: a
/// closure or a link, under inverses (see [`super::semantics`]).
fn stops_at_limit(path: &Path) -> bool {
    match path {
        Path::Inverse(p) => stops_at_limit(p),
        Path::Link(_) => true,
        p => super::semantics::is_closure(p),
    }
}

/// The projections and slices around a streamed group, applied batch after batch.
struct Modifiers<'m> {
    /// The group's variables: the columns of the rows [`Modifiers::apply`] takes.
    variables: Vec<Variable>,
    steps: Vec<Step<'m>>,
}

/// One modifier, a slice with the rows it has still to skip and to keep.
enum Step<'m> {
    Project(&'m [Variable]),
    Slice { skip: usize, keep: Option<usize> },
}

impl<'m> Modifiers<'m> {
    fn new(variables: Vec<Variable>, modifiers: &'m [Modifier]) -> Self {
        let steps = modifiers
            .iter()
            .filter_map(|m| match m {
                Modifier::Project(vars) => Some(Step::Project(vars)),
                Modifier::Slice { start, length } => Some(Step::Slice {
                    skip: *start,
                    keep: *length,
                }),
                Modifier::Distinct | Modifier::Group(..) => None,
            })
            .collect();
        Modifiers { variables, steps }
    }

    /// One batch's rows (in the group's variables) through every modifier.
    fn apply(&mut self, mut rows: Vec<IdRow>) -> Vec<IdRow> {
        let mut current: &[Variable] = &self.variables;
        for step in &mut self.steps {
            match step {
                Step::Project(to) => {
                    let from: Vec<Option<usize>> = to
                        .iter()
                        .map(|v| current.iter().position(|c| c == v))
                        .collect();
                    for row in &mut rows {
                        *row = from.iter().map(|c| c.and_then(|c| row[c])).collect();
                    }
                    current = to;
                }
                Step::Slice { skip, keep } => {
                    let skipped = (*skip).min(rows.len());
                    rows.drain(..skipped);
                    *skip -= skipped;
                    if let Some(k) = keep {
                        rows.truncate(*k);
                        *k -= rows.len();
                    }
                }
            }
        }
        rows
    }

    /// Whether no more rows can pass.
    fn done(&self) -> bool {
        self.steps
            .iter()
            .any(|s| matches!(s, Step::Slice { keep: Some(0), .. }))
    }
}

impl<'a, E: Engine> Context<'a, '_, E> {
    /// The group's rows, joined pattern by pattern: each next pattern is the one with
    /// most ends fixed, evaluated with its variable ends restricted to the values the
    /// rows so far bind them to.
    fn rows(&self, group: &PathGroup) -> Result<Table, SparqlError> {
        let ctx = self;
        let mut table = Table::unit();
        for v in &group.values {
            let t = ctx.values(v);
            table = join(table, t, ctx.deadline)?;
        }
        for g in &group.graphs {
            let t = ctx.graph_names(g);
            table = join(table, t, ctx.deadline)?;
        }
        let mut left: Vec<&GroupPattern> = group.patterns.iter().collect();
        while !left.is_empty() {
            ctx.deadline.check()?;
            let next = ctx.pick(&left, &|v| table.col(v).is_some());
            let p = left.remove(next);
            let t = ctx.pattern(p, Some(&table))?;
            table = join(table, t, ctx.deadline)?;
        }
        let variables = group.variables();
        Ok(project(table, &variables))
    }

    /// The first modifier of a group that counts the solutions of one path pattern (with
    /// VALUES on its ends), computed without rows ([`super::count`]): the one row of
    /// counts, or `None` where the counts need the rows (grouping keys, DISTINCT over
    /// multiplicities, several patterns).
    fn count_request(&self, group: &PathGroup) -> Option<CountRequest<'a>> {
        let Some(Modifier::Group(by, counts)) = group.modifiers.first() else {
            return None;
        };
        let [p] = group.patterns.as_slice() else {
            return None;
        };
        if !by.is_empty() || !group.graphs.is_empty() || !group.subqueries.is_empty() {
            return None;
        }
        let (GroupPredicate::Path(path), None) = (&p.predicate, &p.graph) else {
            return None;
        };
        let active = self.default_active()?;
        let graph = self.graph(active)?;
        let (s, o) = (self.end(&p.subject), self.end(&p.object));
        if let (End::Var(a), End::Var(b)) = (&s, &o) {
            if a == b {
                return None;
            }
        }
        // Each VALUES table binds one end of the pattern, every row of it.
        let mut bound: HashMap<String, Weights> = HashMap::default();
        for v in &group.values {
            let [var] = v.variables.as_slice() else {
                return None;
            };
            let name = var.as_str();
            let is_end = |e: &End| matches!(e, End::Var(x) if x == name);
            if !(is_end(&s) || is_end(&o)) || bound.contains_key(name) {
                return None;
            }
            let mut w = Weights::default();
            for row in &v.rows {
                let Some(Some(t)) = row.first() else {
                    return None;
                };
                // A variable only takes terms of the graph.
                let id = self.id(t.as_ref());
                if id < graph.node_count() && graph.nodes().contains(id) {
                    *w.entry(id).or_insert(0) += 1;
                }
            }
            bound.insert(name.to_owned(), w);
        }
        let weights = |e: &End| -> Option<Weights> {
            match e {
                End::Id(id) => Some([(*id, 1)].into_iter().collect()),
                End::Var(v) => bound.get(v).cloned(),
            }
        };
        let (ws, wo) = (weights(&s), weights(&o));
        let d = self.dataset.dictionary();
        let resolve = |iri: &str| d.id(oxrdf::NamedNodeRef::new_unchecked(iri).into());
        let path = parse_path_expr(path, resolve);
        let closure = super::semantics::is_closure(strip_inverses(&path).0);
        let single = |w: &Option<Weights>| w.as_ref().is_some_and(|w| w.len() == 1);
        let unit = |w: &Option<Weights>| w.as_ref().is_none_or(|w| w.values().all(|&m| m == 1));
        for (_, c) in counts {
            // Distinct counts equal the plain one where every solution is distinct: a
            // closure from start nodes counted once (its pairs are a set per start).
            let plain = match c {
                Count::Rows { distinct } => !distinct || (closure && unit(&ws) && unit(&wo)),
                Count::Bound { variable, distinct } => {
                    let name = variable.as_str();
                    let is_end = |e: &End| matches!(e, End::Var(x) if x == name);
                    let other = if is_end(&s) { &wo } else { &ws };
                    (is_end(&s) || is_end(&o))
                        && (!distinct || (closure && single(other) && unit(&ws) && unit(&wo)))
                }
            };
            if !plain {
                return None;
            }
        }
        Some(CountRequest {
            active,
            graph,
            path,
            closure,
            subject: ws,
            object: wo,
            columns: counts.iter().map(|(v, _)| v.as_str().to_owned()).collect(),
        })
    }

    /// The first modifier's one row of counts where it can be computed without rows
    /// ([`Context::count_request`]).
    fn counted(&self, group: &PathGroup) -> Result<Option<Table>, SparqlError> {
        let Some(r) = self.count_request(group) else {
            return Ok(None);
        };
        let total = self.count_path(
            r.active,
            r.graph,
            &r.path,
            r.subject.as_ref(),
            r.object.as_ref(),
        )?;
        let lit = oxrdf::Literal::from(
            i64::try_from(total)
                .map_err(|_| SparqlError::Unsupported("a count beyond 2^63 solutions".into()))?,
        );
        let id = self.id(lit.as_ref().into());
        Ok(Some(Table {
            rows: vec![vec![Some(id); r.columns.len()]],
            vars: r.columns,
        }))
    }

    /// The solutions of `s path o` in `graph`, weighted by the multiplicities of the
    /// ends' values (`None`: a free end), counted from the end with fewer values.
    fn count_path(
        &self,
        active: Active,
        graph: &'a dyn PathGraph,
        path: &Path,
        ws: Option<&Weights>,
        wo: Option<&Weights>,
    ) -> Result<u64, SparqlError> {
        let key = match active {
            Active::Default => None,
            Active::Named(g) => Some(g),
        };
        let mut relations = self.relations.borrow_mut();
        let rels = relations
            .entry(key)
            .or_insert_with(|| self.provider.source(key, graph))
            .as_mut();
        let mut ev = super::semantics::Evaluator {
            engine: self.engine,
            graph,
            relations: rels,
            deadline: self.deadline,
            limit: None,
        };
        let backwards = match (ws, wo) {
            (None, Some(_)) => true,
            (Some(a), Some(b)) => b.len() < a.len(),
            _ => false,
        };
        if backwards {
            let inverse = Path::Inverse(Box::new(path.clone()));
            let start = Start::Weighted(wo.cloned().unwrap_or_default());
            ev.count(&inverse, &start, ws)
        } else {
            let start = ws.map_or(Start::Any, |w| Start::Weighted(w.clone()));
            ev.count(path, &start, wo)
        }
    }
}

/// How [`evaluate_group`] evaluates `group` over `dataset` (restricted to `scope`),
/// with the estimates it plans with: whether its counts come without rows, the order its
/// patterns are joined in, the edges each reads and what restricts each end.
///
/// ```
/// use k2rpq::sparql::group::{explain_group, GraphScope, PathGroup};
/// use k2rpq::sparql::MemoryDataset;
/// use oxrdf::{GraphName, NamedNode, Quad};
/// let n = |s: &str| NamedNode::new(format!("http://e/{s}")).unwrap();
/// let quads = vec![Quad::new(n("a"), n("p"), n("b"), GraphName::DefaultGraph)];
/// let d = MemoryDataset::from_quads(quads.iter().map(|q| q.as_ref()));
/// let q = spargebra::SparqlParser::new().parse_query("SELECT * { VALUES ?x { <http://e/a> } ?x <http://e/p>+ ?y }").unwrap();
/// let spargebra::Query::Select { pattern, .. } = q else { unreachable!() };
/// let spargebra::algebra::GraphPattern::Project { inner, .. } = pattern else { unreachable!() };
/// let text = explain_group(&d, &GraphScope::default(), &PathGroup::from_pattern(&inner).unwrap());
/// assert!(text.contains("1 edges"), "{text}");
/// assert!(text.contains("subject ?x: 1 value"), "{text}");
/// ```
pub fn explain_group(dataset: &dyn PathDataset, scope: &GraphScope, group: &PathGroup) -> String {
    use std::fmt::Write;
    let engine = crate::engine::cpu::CpuEngine::new();
    let provider = PerQueryProvider(&engine);
    let ctx = Context::new(
        &engine,
        dataset,
        scope,
        None,
        &provider,
        group.rows_needed(),
    );
    let mut out = String::new();
    if let Some(n) = ctx.limit.get() {
        let _ = writeln!(
            out,
            "stops at {n} rows: the lone path pattern's fixed point ends there"
        );
    }
    let mut bound: HashMap<String, String> = HashMap::default();
    for v in &group.values {
        let t = ctx.values(v);
        for (i, var) in t.vars.iter().enumerate() {
            let distinct: HashSet<Option<u32>> = t.rows.iter().map(|r| r[i]).collect();
            let _ = writeln!(
                out,
                "values: ?{var}, {} rows, {} distinct values",
                t.rows.len(),
                distinct.len()
            );
            let n = distinct.len();
            let plural = if n == 1 { "" } else { "s" };
            bound.insert(var.clone(), format!("{n} value{plural}"));
        }
    }
    for sub in &group.subqueries {
        let _ = writeln!(out, "subquery, evaluated first into values: {sub}");
        sub.on_in_scope_variable(|v| {
            bound.insert(v.as_str().to_owned(), "the subquery's values".into());
        });
    }
    if let Some(r) = ctx.count_request(group) {
        let how = if r.closure && r.subject.is_none_or(|w| w.values().all(|&m| m == 1)) {
            "the RPQ engine's count of the closure's frontiers (popcounts), batch by batch"
        } else {
            "weights pushed through the path's links (multiplicity semiring)"
        };
        let _ = writeln!(
            out,
            "counts {}: without rows, from {how}",
            r.columns.join(", ")
        );
    }
    let _ = writeln!(out, "join order:");
    let mut left: Vec<&GroupPattern> = group.patterns.iter().collect();
    let mut step = 0;
    while !left.is_empty() {
        let known: HashSet<String> = bound.keys().cloned().collect();
        let next = ctx.pick(&left, &|v| known.contains(v));
        let p = left.remove(next);
        step += 1;
        let predicate = match &p.predicate {
            GroupPredicate::Path(path) => path.to_string(),
            GroupPredicate::Variable(v) => v.to_string(),
        };
        let _ = writeln!(
            out,
            "  {step}. {} {predicate} {}{}: {} edges",
            p.subject,
            p.object,
            p.graph
                .as_ref()
                .map(|g| format!(" in GRAPH {g}"))
                .unwrap_or_default(),
            ctx.edges(p)
        );
        let mut ends = Vec::new();
        for (side, t) in [("subject", &p.subject), ("object", &p.object)] {
            let what = match t {
                TermPattern::Variable(v) => match bound.get(v.as_str()) {
                    Some(b) => format!("{side} {t}: {b}"),
                    None => format!("{side} {t}: free"),
                },
                TermPattern::BlankNode(_) => format!("{side} {t}: free"),
                _ => format!("{side}: constant"),
            };
            ends.push(what);
        }
        let _ = writeln!(out, "     {}", ends.join("; "));
        let mut newly = Vec::new();
        for t in [&p.subject, &p.object] {
            if let TermPattern::Variable(v) = t {
                if !bound.contains_key(v.as_str()) {
                    newly.push(v.as_str().to_owned());
                }
            }
        }
        if let GroupPredicate::Variable(v) = &p.predicate {
            newly.push(v.as_str().to_owned());
        }
        for v in newly {
            bound.insert(v, format!("the values of pattern {step}"));
        }
    }
    out
}

/// The columns `vars` of `table`, in that order (unbound where it has none).
fn project(table: Table, vars: &[Variable]) -> Table {
    let cols: Vec<Option<usize>> = vars.iter().map(|v| table.col(v.as_str())).collect();
    // Columns already in that order: the rows stay as they are, not copied.
    if cols.len() == table.vars.len() && cols.iter().enumerate().all(|(i, c)| *c == Some(i)) {
        return table;
    }
    Table {
        vars: vars.iter().map(|v| v.as_str().to_owned()).collect(),
        rows: table
            .rows
            .iter()
            .map(|r| cols.iter().map(|c| c.and_then(|c| r[c])).collect())
            .collect(),
    }
}

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

    /// The table of `vars` with no solution.
    fn empty(vars: Vec<String>) -> Table {
        Table {
            vars,
            rows: Vec::new(),
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

/// A count of a group's solutions computed without rows: one path pattern, with the
/// multiplicities of the values of its ends (`None`: a free end).
struct CountRequest<'a> {
    active: Active,
    graph: &'a dyn PathGraph,
    path: Path,
    /// Whether the path is a closure (under inverses): a set per start node.
    closure: bool,
    subject: Option<Weights>,
    object: Option<Weights>,
    /// The count columns, all of the same count.
    columns: Vec<String>,
}

/// The graph patterns are matched against.
#[derive(Clone, Copy, Debug)]
enum Active {
    /// The dataset's default graph.
    Default,
    /// The named graph of this name id.
    Named(u32),
}

/// A variable or a fixed id at one end of a pattern.
#[derive(Clone, Debug)]
enum End {
    Var(String),
    Id(u32),
}

struct Context<'a, 's, E: Engine> {
    engine: &'a E,
    dataset: &'a dyn PathDataset,
    scope: &'s GraphScope,
    deadline: Deadline,
    /// Terms of the query that the dictionary does not know, and their ids.
    query_terms: std::cell::RefCell<(Vec<Term>, HashMap<Term, u32>)>,
    provider: &'a dyn RelationProvider<'a, E>,
    /// Relation sources, per graph (`None`: the default graph), kept for the whole group.
    relations: std::cell::RefCell<HashMap<Option<u32>, Box<dyn RelationSource<E> + 'a>>>,
    /// Rows enough for the group ([`PathGroup::rows_needed`]): its lone path pattern may
    /// stop there.
    limit: Cell<Option<u64>>,
}

impl<'a, 's, E: Engine> Context<'a, 's, E> {
    /// A context for one group, its relations loaded through `provider` on first use,
    /// stopped at `deadline`, its lone path pattern at `limit` rows.
    fn new(
        engine: &'a E,
        dataset: &'a dyn PathDataset,
        scope: &'s GraphScope,
        deadline: Option<Instant>,
        provider: &'a dyn RelationProvider<'a, E>,
        limit: Option<u64>,
    ) -> Self {
        Context {
            engine,
            dataset,
            scope,
            deadline: Deadline(deadline),
            query_terms: Default::default(),
            provider,
            relations: Default::default(),
            limit: Cell::new(limit),
        }
    }

    /// The context with its lone path pattern stopping at `limit` rows from now on.
    fn with_limit(&self, limit: Option<u64>) -> &Self {
        self.limit.set(limit);
        self
    }

    fn id(&self, term: TermRef<'_>) -> u32 {
        match self.dataset.dictionary().id(term) {
            Some(id) => id,
            None => self.computed_id(term.into_owned()),
        }
    }

    /// The query-term id of `term`, a value the group computed (a count), without asking
    /// the dictionary: the group only compares it with its own values, and the evaluator
    /// maps it to the store's id when it takes the row.
    fn computed_id(&self, term: Term) -> u32 {
        let mut extra = self.query_terms.borrow_mut();
        if let Some(&id) = extra.1.get(&term) {
            return id;
        }
        let id = QUERY_TERM_BASE + extra.0.len() as u32;
        extra.0.push(term.clone());
        extra.1.insert(term, id);
        id
    }

    fn graph(&self, active: Active) -> Option<&'a dyn PathGraph> {
        match active {
            Active::Default => Some(self.dataset.default_graph()),
            Active::Named(g) => self.dataset.named_graph(g),
        }
    }

    /// The graph unnamed patterns are matched in, or `None` for an empty default graph.
    fn default_active(&self) -> Option<Active> {
        match self.scope.default {
            DefaultGraph::Dataset => Some(Active::Default),
            DefaultGraph::Named(g) => Some(Active::Named(g)),
            DefaultGraph::Empty => None,
        }
    }

    /// The named graphs `GRAPH` may range over, by name id.
    fn named_graphs(&self) -> Vec<u32> {
        let all = self.dataset.named_graphs();
        match &self.scope.named {
            None => all,
            Some(allowed) => all.into_iter().filter(|g| allowed.contains(g)).collect(),
        }
    }

    fn values(&self, v: &ValuesTable) -> Table {
        Table {
            vars: v.variables.iter().map(|x| x.as_str().to_owned()).collect(),
            rows: v
                .rows
                .iter()
                .map(|r| {
                    r.iter()
                        .map(|t| t.as_ref().map(|t| self.id(t.as_ref())))
                        .collect()
                })
                .collect(),
        }
    }

    /// The rows of `table` grouped by `by`, each group with its `counts` (as integer
    /// literals); with no `by`, one group even when there is no row (counts of 0).
    fn count(&self, table: &Table, by: &[Variable], counts: &[(Variable, Count)]) -> Table {
        let key_cols: Vec<Option<usize>> = by.iter().map(|v| table.col(v.as_str())).collect();
        let mut groups: Vec<(IdRow, Vec<&IdRow>)> = Vec::new();
        let mut index: HashMap<Vec<Option<u32>>, usize> = HashMap::default();
        for r in &table.rows {
            let k: Vec<Option<u32>> = key_cols.iter().map(|c| c.and_then(|c| r[c])).collect();
            let i = *index.entry(k.clone()).or_insert_with(|| {
                groups.push((k, Vec::new()));
                groups.len() - 1
            });
            groups[i].1.push(r);
        }
        if groups.is_empty() && by.is_empty() {
            groups.push((Vec::new(), Vec::new()));
        }
        let mut vars: Vec<String> = by.iter().map(|v| v.as_str().to_owned()).collect();
        vars.extend(counts.iter().map(|(v, _)| v.as_str().to_owned()));
        let rows = groups
            .into_iter()
            .map(|(mut row, members)| {
                for (_, c) in counts {
                    let n = match c {
                        Count::Rows { distinct: false } => members.len(),
                        Count::Rows { distinct: true } => {
                            members.iter().collect::<HashSet<_>>().len()
                        }
                        Count::Bound { variable, distinct } => {
                            let col = table.col(variable.as_str());
                            let values = members.iter().filter_map(|r| col.and_then(|c| r[c]));
                            if *distinct {
                                values.collect::<HashSet<_>>().len()
                            } else {
                                values.count()
                            }
                        }
                    };
                    row.push(Some(
                        self.computed_id(oxrdf::Literal::from(n as i64).into()),
                    ));
                }
                row
            })
            .collect();
        Table { vars, rows }
    }

    /// `GRAPH g {}`: one empty solution if `g` names a named graph of the scope; for a
    /// variable, one solution per named graph.
    fn graph_names(&self, g: &NamedNodePattern) -> Table {
        match g {
            NamedNodePattern::NamedNode(n) => {
                let id = self.id(n.as_ref().into());
                if self.named_graphs().binary_search(&id).is_ok() {
                    Table::unit()
                } else {
                    Table::empty(Vec::new())
                }
            }
            NamedNodePattern::Variable(v) => Table {
                vars: vec![v.as_str().to_owned()],
                rows: self
                    .named_graphs()
                    .into_iter()
                    .map(|g| vec![Some(g)])
                    .collect(),
            },
        }
    }

    /// The next pattern to evaluate: the one with the most ends fixed (a constant, or a
    /// variable `bound` by the solutions so far), single predicates before paths, then
    /// the one reading the fewest edges ([`Context::edges`]), then the first.
    fn pick(&self, left: &[&GroupPattern], bound: &dyn Fn(&str) -> bool) -> usize {
        // A lone pattern needs no score, whose edge count translates its path.
        if left.len() == 1 {
            return 0;
        }
        let fixed = |t: &TermPattern| match t {
            TermPattern::Variable(v) => bound(v.as_str()),
            _ => true,
        };
        let score = |p: &GroupPattern| {
            let ends = fixed(&p.subject) as u32 + fixed(&p.object) as u32;
            let link = matches!(
                p.predicate,
                GroupPredicate::Path(PropertyPathExpression::NamedNode(_))
            );
            (ends, link as u32, std::cmp::Reverse(self.edges(p)))
        };
        let mut best = 0;
        let mut best_score = score(left[0]);
        for (i, p) in left.iter().enumerate().skip(1) {
            let sc = score(p);
            if sc > best_score {
                best = i;
                best_score = sc;
            }
        }
        best
    }

    /// The edges a pattern may read in the graph unnamed patterns are matched in (every
    /// relation's for a variable predicate or a negated set): the size of its relations,
    /// an upper bound of a link's solutions.
    fn edges(&self, p: &GroupPattern) -> u64 {
        let Some(graph) = self.default_active().and_then(|a| self.graph(a)) else {
            return 0;
        };
        let nnz = |q: u32| graph.relation(q).map_or(0, |t| t.nnz());
        let all = || graph.predicates().into_iter().map(nnz).sum();
        match &p.predicate {
            GroupPredicate::Variable(_) => all(),
            GroupPredicate::Path(path) => {
                let d = self.dataset.dictionary();
                let resolve = |iri: &str| d.id(oxrdf::NamedNodeRef::new_unchecked(iri).into());
                let path = parse_path_expr(path, resolve);
                if path.has_negated_set() {
                    return all();
                }
                let mut preds = path.predicates();
                preds.sort_unstable();
                preds.dedup();
                preds.into_iter().map(nnz).sum()
            }
        }
    }

    fn end(&self, t: &TermPattern) -> End {
        match t {
            TermPattern::Variable(v) => End::Var(v.as_str().to_owned()),
            TermPattern::BlankNode(b) => End::Var(format!("_:{}", b.as_str())),
            TermPattern::NamedNode(n) => End::Id(self.id(n.as_ref().into())),
            TermPattern::Literal(l) => End::Id(self.id(l.as_ref().into())),
        }
    }

    /// One pattern, in its graph (each named graph in turn for `GRAPH ?g`).
    fn pattern(&self, p: &GroupPattern, bound: Option<&Table>) -> Result<Table, SparqlError> {
        match &p.graph {
            None => match self.default_active() {
                Some(active) => self.in_graph(p, active, bound),
                None => Ok(Table::empty(self.pattern_vars(p))),
            },
            Some(NamedNodePattern::NamedNode(n)) => {
                let id = self.id(n.as_ref().into());
                if self.named_graphs().binary_search(&id).is_err() {
                    return Ok(Table::empty(self.pattern_vars(p)));
                }
                self.in_graph(p, Active::Named(id), bound)
            }
            Some(NamedNodePattern::Variable(v)) => {
                let mut out = Table::empty(Vec::new());
                let wanted = bound.and_then(|b| b.bound_values(v.as_str()));
                for g in self.named_graphs() {
                    if wanted.as_ref().is_some_and(|w| !w.contains(&g)) {
                        continue;
                    }
                    self.deadline.check()?;
                    let graph_row = Table {
                        vars: vec![v.as_str().to_owned()],
                        rows: vec![vec![Some(g)]],
                    };
                    let t = self.in_graph(p, Active::Named(g), bound)?;
                    out = union(out, join(graph_row, t, self.deadline)?);
                }
                if out.vars.is_empty() {
                    let mut vars = vec![v.as_str().to_owned()];
                    vars.extend(self.pattern_vars(p));
                    out = Table::empty(vars);
                }
                Ok(out)
            }
        }
    }

    /// The variables a pattern binds (its graph's aside).
    fn pattern_vars(&self, p: &GroupPattern) -> Vec<String> {
        let mut vars: Vec<String> = Vec::new();
        let mut add = |v: &str| {
            if !vars.iter().any(|x| x == v) {
                vars.push(v.to_owned());
            }
        };
        if let End::Var(v) = self.end(&p.subject) {
            add(&v);
        }
        if let GroupPredicate::Variable(v) = &p.predicate {
            add(v.as_str());
        }
        if let End::Var(v) = self.end(&p.object) {
            add(&v);
        }
        vars
    }

    fn in_graph(
        &self,
        p: &GroupPattern,
        active: Active,
        bound: Option<&Table>,
    ) -> Result<Table, SparqlError> {
        let s = self.end(&p.subject);
        let o = self.end(&p.object);
        match &p.predicate {
            GroupPredicate::Path(path) => {
                let d = self.dataset.dictionary();
                let resolve = |iri: &str| d.id(oxrdf::NamedNodeRef::new_unchecked(iri).into());
                let path = parse_path_expr(path, resolve);
                self.path(&s, &path, &o, active, bound, self.limit.get())
            }
            GroupPredicate::Variable(pv) => self.any_predicate(&s, pv, &o, active, bound),
        }
    }

    /// `s ?p o`: the pattern over every predicate of the graph, with `?p` bound to it.
    fn any_predicate(
        &self,
        s: &End,
        pv: &Variable,
        o: &End,
        active: Active,
        bound: Option<&Table>,
    ) -> Result<Table, SparqlError> {
        let name = pv.as_str();
        let mut vars = Vec::new();
        for e in [s, o] {
            if let End::Var(v) = e {
                if !vars.contains(v) {
                    vars.push(v.clone());
                }
            }
        }
        // The predicate variable may also be an end (`?x ?x ?y`).
        let shared = vars.iter().position(|v| v == name);
        if shared.is_none() {
            vars.push(name.to_owned());
        }
        let mut out = Table::empty(vars);
        let Some(graph) = self.graph(active) else {
            return Ok(out);
        };
        let wanted = bound.and_then(|b| b.bound_values(name));
        for p in graph.predicates() {
            if wanted.as_ref().is_some_and(|w| !w.contains(&p)) {
                continue;
            }
            self.deadline.check()?;
            let t = self.path(s, &Path::Link(p), o, active, bound, None)?;
            for mut row in t.rows {
                match shared {
                    Some(c) if row[c] != Some(p) => continue,
                    Some(_) => {}
                    None => row.push(Some(p)),
                }
                out.rows.push(row);
            }
        }
        Ok(out)
    }

    /// `s path o` in the active graph, once, with each variable end restricted to the
    /// values the solutions so far bind it to; at least `limit` rows of it (or all).
    fn path(
        &self,
        s: &End,
        path: &Path,
        o: &End,
        active: Active,
        bound: Option<&Table>,
        limit: Option<u64>,
    ) -> Result<Table, SparqlError> {
        let mut vars = Vec::new();
        for e in [s, o] {
            if let End::Var(v) = e {
                if !vars.contains(v) {
                    vars.push(v.clone());
                }
            }
        }
        let mut out = Table::empty(vars);
        let Some(graph) = self.graph(active) else {
            return Ok(out);
        };
        // The nodes each end may take: a constant, the values the solutions so far bind
        // a variable to (however many: they start one batched evaluation), or any.
        let nodes = |e: &End| -> Nodes {
            match e {
                End::Id(id) => Nodes::Set(vec![*id]),
                End::Var(v) => match bound.and_then(|b| b.bound_values(v)) {
                    // A variable only takes terms of the active graph (even through a
                    // zero-length path); a constant end is returned even when absent.
                    Some(vals) => Nodes::of(
                        vals.into_iter()
                            .filter(|&x| x < graph.node_count() && graph.nodes().contains(x))
                            .collect(),
                    ),
                    None => Nodes::Any,
                },
            }
        };
        let same_var = matches!((s, o), (End::Var(a), End::Var(b)) if a == b);
        let (ns, no) = (nodes(s), nodes(o));
        // `?x path ?x`: both ends take the same nodes.
        let (ns, no) = match (same_var, &ns, &no) {
            (true, Nodes::Set(_), _) => (ns.clone(), ns),
            (true, _, Nodes::Set(_)) => (no.clone(), no),
            _ => (ns, no),
        };
        let key = match active {
            Active::Default => None,
            Active::Named(g) => Some(g),
        };
        let bags: Vec<Bag> = {
            let mut relations = self.relations.borrow_mut();
            let rels = relations
                .entry(key)
                .or_insert_with(|| self.provider.source(key, graph))
                .as_mut();
            // `?x path ?x` keeps only the pairs that meet, so it may not stop early.
            vec![Evaluator {
                engine: self.engine,
                graph,
                relations: rels,
                deadline: self.deadline,
                limit: limit.filter(|_| !same_var),
            }
            .eval(path, &ns, &no)?]
        };
        let mut next_check = ROWS_PER_CHECK;
        for bag in bags {
            for ((x, y), m) in bag {
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
                for _ in 1..m {
                    out.rows.push(row.clone());
                }
                if m > 0 {
                    out.rows.push(row);
                }
                if out.rows.len() >= next_check {
                    self.deadline.check()?;
                    next_check = out.rows.len() + ROWS_PER_CHECK;
                }
            }
        }
        Ok(out)
    }
}

/// Rows a join emits between two looks at the deadline.
const ROWS_PER_CHECK: usize = 1 << 16;

/// Hash join of two bags of solutions (compatible rows merge; unbound values match
/// anything), stopped at `deadline`.
fn join(l: Table, r: Table, deadline: Deadline) -> Result<Table, SparqlError> {
    // The unit table is the identity: the other side is the answer, moved, not copied.
    if l.vars.is_empty() && l.rows.len() == 1 {
        return Ok(r);
    }
    if r.vars.is_empty() && r.rows.len() == 1 {
        return Ok(l);
    }
    let (l, r) = (&l, &r);
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
    let mut index: HashMap<Vec<u32>, Vec<usize>> = HashMap::default();
    let mut loose = Vec::new(); // right rows with an unbound shared variable
    for (i, row) in r.rows.iter().enumerate() {
        let key: Option<Vec<u32>> = shared.iter().map(|&(_, ri)| row[ri]).collect();
        match key {
            Some(k) => index.entry(k).or_default().push(i),
            None => loose.push(i),
        }
    }
    let mut rows = Vec::new();
    let mut emit = |lrow: &Vec<Option<u32>>, rrow: &Vec<Option<u32>>| -> Result<(), SparqlError> {
        let mut out = lrow.clone();
        for &(li, ri) in &shared {
            match (out[li], rrow[ri]) {
                (Some(a), Some(b)) if a != b => return Ok(()),
                (None, b) => out[li] = b,
                _ => {}
            }
        }
        out.extend(r_only.iter().map(|&i| rrow[i]));
        rows.push(out);
        if rows.len() % ROWS_PER_CHECK == 0 {
            deadline.check()?;
        }
        Ok(())
    };
    for lrow in &l.rows {
        let key: Option<Vec<u32>> = shared.iter().map(|&(li, _)| lrow[li]).collect();
        match key {
            Some(k) => {
                for &i in index.get(&k).map(|v| v.as_slice()).unwrap_or(&[]) {
                    emit(lrow, &r.rows[i])?;
                }
            }
            None => {
                for rrow in &r.rows {
                    emit(lrow, rrow)?;
                }
                continue;
            }
        }
        for &i in &loose {
            emit(lrow, &r.rows[i])?;
        }
    }
    Ok(Table { vars, rows })
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::cpu::CpuEngine;
    use crate::sparql::MemoryDataset;
    use oxrdf::{GraphName, NamedNode, Quad};
    use proptest::prelude::*;

    fn iri(s: &str) -> NamedNode {
        NamedNode::new(format!("http://e/{s}")).unwrap()
    }

    fn dataset(edges: &[(u8, u8, u8)]) -> MemoryDataset {
        let quads: Vec<Quad> = edges
            .iter()
            .map(|&(s, p, o)| {
                let p = if p % 2 == 0 { "p" } else { "q" };
                Quad::new(
                    iri(&s.to_string()),
                    iri(p),
                    iri(&o.to_string()),
                    GraphName::DefaultGraph,
                )
            })
            .collect();
        MemoryDataset::from_quads(quads.iter().map(|q| q.as_ref()))
    }

    fn group(query: &str) -> PathGroup {
        let q = spargebra::SparqlParser::new().parse_query(query).unwrap();
        let spargebra::Query::Select { pattern, .. } = q else {
            unreachable!()
        };
        let mut modifiers = Vec::new();
        let mut pattern = pattern;
        // The rewrite pushes the query's projection and slice into the group.
        loop {
            match pattern {
                GraphPattern::Project { inner, variables } => {
                    modifiers.push(Modifier::Project(variables));
                    pattern = *inner;
                }
                GraphPattern::Slice {
                    inner,
                    start,
                    length,
                } => {
                    modifiers.push(Modifier::Slice { start, length });
                    pattern = *inner;
                }
                p => {
                    let mut g = PathGroup::from_pattern(&p).unwrap();
                    modifiers.reverse();
                    g.modifiers = modifiers;
                    return g;
                }
            }
        }
    }

    fn whole(d: &MemoryDataset, g: &PathGroup) -> Vec<IdRow> {
        let engine = CpuEngine::new();
        let provider = PerQueryProvider(&engine);
        let s = evaluate_group(&engine, d, &GraphScope::default(), g, &provider, None).unwrap();
        s.rows.collect_all().unwrap()
    }

    fn batched(d: &MemoryDataset, g: &PathGroup, sizes: BatchSizes) -> (Vec<IdRow>, usize) {
        let engine = CpuEngine::new();
        let provider = PerQueryProvider(&engine);
        let (mut rows, mut batches) = (Vec::new(), 0);
        in_batches(
            &engine,
            d,
            &GraphScope::default(),
            g,
            &provider,
            None,
            sizes,
            true,
            &mut |b| {
                batches += 1;
                rows.extend(b);
                true
            },
        )
        .unwrap();
        (rows, batches)
    }

    fn sorted(mut rows: Vec<IdRow>) -> Vec<IdRow> {
        rows.sort_unstable();
        rows
    }

    const PATHS: [&str; 8] = [
        "<http://e/p>+",
        "<http://e/p>*",
        "(<http://e/p>|^<http://e/q>)*",
        "(<http://e/p>/<http://e/q>)*",
        "<http://e/p>|^<http://e/q>",
        "^<http://e/p>",
        "!(<http://e/q>)",
        "<http://e/p>?",
    ];

    proptest! {
        #[test]
        fn batches_of_subjects_give_the_whole_answer(
            edges in proptest::collection::vec((0u8..24, 0u8..2, 0u8..24), 0..60),
            path in 0usize..PATHS.len(),
            whole_answer in 0u64..6,
            batch in 1u64..8,
        ) {
            let d = dataset(&edges);
            let g = group(&format!("SELECT * WHERE {{ ?x {} ?y }}", PATHS[path]));
            prop_assert!(g.streams());
            let (rows, _) = batched(&d, &g, BatchSizes { whole_answer, batch });
            prop_assert_eq!(sorted(rows), sorted(whole(&d, &g)));
        }

        #[test]
        fn slices_and_projections_cut_the_batches_as_the_whole(
            edges in proptest::collection::vec((0u8..16, 0u8..2, 0u8..16), 0..40),
            path in 0usize..PATHS.len(),
            offset in 0usize..5,
            limit in 0usize..30,
        ) {
            let d = dataset(&edges);
            let q = format!("SELECT ?y WHERE {{ ?x {} ?y }} OFFSET {offset} LIMIT {limit}", PATHS[path]);
            let g = group(&q);
            prop_assert!(g.streams());
            let full = whole(&d, &group(&format!("SELECT ?y WHERE {{ ?x {} ?y }}", PATHS[path])));
            let (rows, _) = batched(&d, &g, BatchSizes { whole_answer: 2, batch: 3 });
            // Any rows of the bag will do, as many as the slice leaves.
            prop_assert_eq!(rows.len(), full.len().saturating_sub(offset).min(limit));
            let mut left = sorted(full);
            for r in rows {
                let i = left.binary_search(&r);
                prop_assert!(i.is_ok(), "{:?} is not an answer", r);
                left.remove(i.unwrap());
            }
        }
    }

    #[test]
    fn a_large_answer_comes_in_several_batches() {
        // A chain of 40 nodes: p+ holds 780 pairs.
        let edges: Vec<(u8, u8, u8)> = (0..40).map(|i| (i, 0, i + 1)).collect();
        let d = dataset(&edges);
        let g = group("SELECT * WHERE { ?x <http://e/p>+ ?y }");
        let (rows, batches) = batched(
            &d,
            &g,
            BatchSizes {
                whole_answer: 100,
                batch: 50,
            },
        );
        assert!(batches > 3, "{batches} batches");
        assert_eq!(sorted(rows), sorted(whole(&d, &g)));
        // A small answer comes whole, in one evaluation.
        let (_, batches) = batched(
            &d,
            &g,
            BatchSizes {
                whole_answer: 10_000,
                batch: 50,
            },
        );
        assert_eq!(batches, 1);
    }

    #[test]
    fn only_lone_paths_between_two_variables_stream() {
        assert!(group("SELECT * WHERE { ?x <http://e/p>+ ?y }").streams());
        assert!(!group("SELECT * WHERE { ?x <http://e/p>+ ?x }").streams());
        assert!(!group("SELECT * WHERE { <http://e/a> <http://e/p>+ ?y }").streams());
        assert!(!group("SELECT * WHERE { ?x <http://e/p>+ ?y . ?y <http://e/q> ?z }").streams());
        // The parser makes a sequence a join through a fresh variable.
        assert!(!group("SELECT * WHERE { ?x <http://e/p>/<http://e/q> ?y }").streams());
        assert!(
            !group("SELECT * WHERE { VALUES ?x { <http://e/a> } ?x <http://e/p>+ ?y }").streams()
        );
    }

    #[test]
    fn rows_whose_sender_stops_early_are_an_error() {
        let (tx, rx) = std::sync::mpsc::sync_channel(2);
        tx.send(RowBatch::Rows(vec![vec![Some(1)]])).unwrap();
        drop(tx);
        let rows: Vec<_> = IdRows::batches(rx).collect();
        assert_eq!(rows.len(), 2);
        assert!(matches!(rows[1], Err(SparqlError::Interrupted)));
        let (tx, rx) = std::sync::mpsc::sync_channel(2);
        tx.send(RowBatch::Rows(vec![vec![Some(1)]])).unwrap();
        tx.send(RowBatch::End).unwrap();
        assert_eq!(
            IdRows::batches(rx).collect_all().unwrap(),
            vec![vec![Some(1)]]
        );
    }
}
