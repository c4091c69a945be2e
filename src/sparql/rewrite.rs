//! Algebra rewrites: re-assembling the sequences the parser split, and wrapping each
//! property-path pattern in `SERVICE <urn:k2rpq:paths>` for the Oxigraph embedding.
//!
//! spargebra turns `?s p/q ?o` into `?s p _:b . _:b q ?o` with a fresh blank node
//! `_:b`. A blank node that occurs exactly twice in the query, as the object of one
//! pattern and the subject of another of the same group, is such a middle node (or one a
//! user wrote with the same meaning: the join over it is exactly the sequence's bag join),
//! so the two patterns become one path pattern `?s p/q ?o`.

use std::collections::HashMap;

use spargebra::algebra::{GraphPattern, PropertyPathExpression};
use spargebra::term::{NamedNode, NamedNodePattern, TermPattern, TriplePattern, Variable};
use spargebra::Query;

/// The service IRI the rewritten queries call.
pub const SERVICE_IRI: &str = "urn:k2rpq:paths";

/// Prefix of the variables that stand for the query's blank nodes after the rewrite.
const BLANK_VARIABLE_PREFIX: &str = "k2rpq_b";

/// Whether a variable name stands for one of the query's blank nodes after the rewrite.
pub fn is_hidden_variable(name: &str) -> bool {
    name.starts_with(BLANK_VARIABLE_PREFIX)
}

/// One member of a group of joined triple and path patterns.
#[derive(Clone, Debug)]
enum Item {
    Path(TermPattern, PropertyPathExpression, TermPattern),
    /// A triple with a variable predicate: never part of a path.
    Triple(TriplePattern),
}

/// Re-assembles split sequences everywhere in `pattern` (see the module docs).
pub fn reassemble_paths(pattern: &GraphPattern) -> GraphPattern {
    let mut counts = HashMap::new();
    count_blank_nodes(pattern, &mut counts);
    Rewriter {
        counts,
        wrap: false,
        subqueries: false,
        renames: HashMap::new(),
    }
    .pattern(pattern, None, &[])
}

/// Rewrites a query for the Oxigraph embedding: re-assembles split sequences, turns the
/// pattern blank nodes into (never projected) variables, and wraps every group of joined
/// triple and path patterns that holds a path (not a single predicate) in
/// `SERVICE <urn:k2rpq:paths> { … }`, with its GRAPH context and the VALUES of its group
/// and of enclosing groups pushed inside (the service sees no outer bindings).
pub fn wrap_paths_in_service(query: &Query) -> Query {
    rewrite_query(query, false)
}

/// [`wrap_paths_in_service`], where the service can also evaluate subqueries
/// ([`crate::database::Database::query`]'s can, through Oxigraph's evaluator over the
/// store): a subquery with a LIMIT of at most [`SMALL_SUBQUERY_ROWS`] rows that shares a
/// variable with a service's paths goes inside that service, whose paths then start from
/// the subquery's few values instead of every node.
pub fn wrap_paths_and_small_subqueries_in_service(query: &Query) -> Query {
    rewrite_query(query, true)
}

/// The most rows (its LIMIT) of a subquery that goes into a path service.
pub const SMALL_SUBQUERY_ROWS: usize = 1000;

fn rewrite_query(query: &Query, subqueries: bool) -> Query {
    let rewrite = |pattern: &GraphPattern| {
        let mut counts = HashMap::new();
        count_blank_nodes(pattern, &mut counts);
        if counts_distinct_solutions(pattern) {
            // `COUNT(DISTINCT *)` tells solutions apart by the blank nodes of split
            // sequences too: each path is a solution of its own, so they stay split.
            counts.clear();
        }
        Rewriter {
            counts,
            wrap: true,
            subqueries,
            renames: HashMap::new(),
        }
        .pattern(pattern, None, &[])
    };
    match query {
        Query::Select {
            dataset,
            pattern,
            base_iri,
        } => Query::Select {
            dataset: dataset.clone(),
            pattern: rewrite(pattern),
            base_iri: base_iri.clone(),
        },
        Query::Ask {
            dataset,
            pattern,
            base_iri,
        } => Query::Ask {
            dataset: dataset.clone(),
            pattern: rewrite(&first_row(pattern)),
            base_iri: base_iri.clone(),
        },
        Query::Construct {
            template,
            dataset,
            pattern,
            base_iri,
        } => Query::Construct {
            template: template.clone(),
            dataset: dataset.clone(),
            pattern: rewrite(pattern),
            base_iri: base_iri.clone(),
        },
        Query::Describe {
            dataset,
            pattern,
            base_iri,
        } => Query::Describe {
            dataset: dataset.clone(),
            pattern: rewrite(pattern),
            base_iri: base_iri.clone(),
        },
    }
}

/// An ASK's pattern as the SELECT of its first row, which has a row exactly when the
/// pattern has a solution: the row limit then reaches the path services, whose fixed
/// points stop at their first pair.
fn first_row(pattern: &GraphPattern) -> GraphPattern {
    let mut variables = Vec::new();
    pattern.on_in_scope_variable(|v| {
        if !variables.contains(v) {
            variables.push(v.clone());
        }
    });
    GraphPattern::Slice {
        inner: Box::new(GraphPattern::Project {
            inner: Box::new(pattern.clone()),
            variables,
        }),
        start: 0,
        length: Some(1),
    }
}

fn count_term(t: &TermPattern, counts: &mut HashMap<String, usize>) {
    if let TermPattern::BlankNode(b) = t {
        *counts.entry(b.as_str().to_owned()).or_insert(0) += 1;
    }
}

fn count_blank_nodes(p: &GraphPattern, counts: &mut HashMap<String, usize>) {
    match p {
        GraphPattern::Bgp { patterns } => {
            for t in patterns {
                count_term(&t.subject, counts);
                count_term(&t.object, counts);
            }
        }
        GraphPattern::Path {
            subject, object, ..
        } => {
            count_term(subject, counts);
            count_term(object, counts);
        }
        p => {
            for inner in sub_patterns(p) {
                count_blank_nodes(inner, counts);
            }
        }
    }
}

/// The patterns of the `SERVICE <urn:k2rpq:paths>` calls in `p` (as the rewrite made
/// them), outermost first.
pub fn path_services(p: &GraphPattern) -> Vec<&GraphPattern> {
    let mut out = Vec::new();
    let mut stack = vec![p];
    while let Some(p) = stack.pop() {
        match p {
            GraphPattern::Service {
                name: NamedNodePattern::NamedNode(n),
                inner,
                ..
            } if n.as_str() == SERVICE_IRI => out.push(&**inner),
            p => stack.extend(sub_patterns(p).into_iter().rev()),
        }
    }
    out
}

/// Whether `p` holds a `COUNT(DISTINCT *)`.
fn counts_distinct_solutions(p: &GraphPattern) -> bool {
    use spargebra::algebra::AggregateExpression;
    if let GraphPattern::Group { aggregates, .. } = p {
        if aggregates
            .iter()
            .any(|(_, a)| matches!(a, AggregateExpression::CountSolutions { distinct: true }))
        {
            return true;
        }
    }
    sub_patterns(p).into_iter().any(counts_distinct_solutions)
}

/// The graph patterns directly inside `p` (none for BGPs, paths and VALUES).
pub fn sub_patterns(p: &GraphPattern) -> Vec<&GraphPattern> {
    match p {
        GraphPattern::Join { left, right }
        | GraphPattern::LeftJoin { left, right, .. }
        | GraphPattern::Lateral { left, right }
        | GraphPattern::Union { left, right }
        | GraphPattern::Minus { left, right } => vec![left, right],
        GraphPattern::Filter { inner, .. }
        | GraphPattern::Graph { inner, .. }
        | GraphPattern::Extend { inner, .. }
        | GraphPattern::OrderBy { inner, .. }
        | GraphPattern::Project { inner, .. }
        | GraphPattern::Distinct { inner }
        | GraphPattern::Reduced { inner }
        | GraphPattern::Slice { inner, .. }
        | GraphPattern::Group { inner, .. }
        | GraphPattern::Service { inner, .. } => vec![inner],
        GraphPattern::Bgp { .. } | GraphPattern::Path { .. } | GraphPattern::Values { .. } => {
            Vec::new()
        }
    }
}

struct Rewriter {
    counts: HashMap<String, usize>,
    /// Oxigraph mode: rename blank nodes, wrap paths in SERVICE.
    wrap: bool,
    /// Move small subqueries joined to paths into their services.
    subqueries: bool,
    renames: HashMap<String, Variable>,
}

impl Rewriter {
    fn term(&mut self, t: &TermPattern) -> TermPattern {
        match t {
            TermPattern::BlankNode(b) if self.wrap => {
                let n = self.renames.len();
                self.renames
                    .entry(b.as_str().to_owned())
                    .or_insert_with(|| {
                        Variable::new_unchecked(format!("{BLANK_VARIABLE_PREFIX}{n}"))
                    })
                    .clone()
                    .into()
            }
            t => t.clone(),
        }
    }

    /// Rewrites `p` inside GRAPH `graph` (if any); `values` are VALUES patterns joined
    /// with it from outside, which may be pushed into SERVICE calls.
    fn pattern(
        &mut self,
        p: &GraphPattern,
        graph: Option<&NamedNodePattern>,
        values: &[GraphPattern],
    ) -> GraphPattern {
        let b = |x: GraphPattern| Box::new(x);
        match p {
            GraphPattern::Bgp { .. } | GraphPattern::Path { .. } | GraphPattern::Join { .. } => {
                self.group(p, graph, values)
            }
            GraphPattern::LeftJoin {
                left,
                right,
                expression,
            } => GraphPattern::LeftJoin {
                left: b(self.pattern(left, graph, &[])),
                right: b(self.pattern(right, graph, &[])),
                expression: expression.clone(),
            },
            GraphPattern::Lateral { left, right } => GraphPattern::Lateral {
                left: b(self.pattern(left, graph, &[])),
                right: b(self.pattern(right, graph, &[])),
            },
            GraphPattern::Union { left, right } => GraphPattern::Union {
                left: b(self.pattern(left, graph, values)),
                right: b(self.pattern(right, graph, values)),
            },
            GraphPattern::Minus { left, right } => GraphPattern::Minus {
                left: b(self.pattern(left, graph, values)),
                // MINUS asks only whether some solution of its right side is compatible:
                // the service returns each distinct one once (a sequence's paths to the
                // same nodes are one row, not one per path).
                right: b(distinct_in_service(self.pattern(right, graph, &[]))),
            },
            GraphPattern::Filter { expr, inner } => GraphPattern::Filter {
                expr: expr.clone(),
                inner: b(self.pattern(inner, graph, values)),
            },
            GraphPattern::Graph { name, inner } => GraphPattern::Graph {
                name: name.clone(),
                inner: b(self.pattern(inner, Some(name), values)),
            },
            GraphPattern::Extend {
                inner,
                variable,
                expression,
            } => GraphPattern::Extend {
                inner: b(self.pattern(inner, graph, &[])),
                variable: variable.clone(),
                expression: expression.clone(),
            },
            GraphPattern::OrderBy { inner, expression } => GraphPattern::OrderBy {
                inner: b(self.pattern(inner, graph, &[])),
                expression: expression.clone(),
            },
            GraphPattern::Project { inner, variables } => {
                into_service(self.pattern(inner, graph, &[]), true, |inner| {
                    GraphPattern::Project {
                        inner: b(inner),
                        variables: variables.clone(),
                    }
                })
            }
            GraphPattern::Distinct { inner } => {
                into_service(self.pattern(inner, graph, &[]), true, |inner| {
                    GraphPattern::Distinct { inner: b(inner) }
                })
            }
            GraphPattern::Reduced { inner } => {
                into_service(self.pattern(inner, graph, &[]), true, |inner| {
                    GraphPattern::Reduced { inner: b(inner) }
                })
            }
            GraphPattern::Slice {
                inner,
                start,
                length,
            } => {
                // The service returns only the rows the slice can keep (any rows will do:
                // no ORDER BY sits between them), so its engines stop their fixed points
                // there; the slice itself stays outside for the offset.
                let inner = match (length, self.pattern(inner, graph, &[])) {
                    (
                        Some(n),
                        GraphPattern::Service {
                            name: NamedNodePattern::NamedNode(name),
                            inner,
                            silent,
                        },
                    ) if name.as_str() == SERVICE_IRI => GraphPattern::Service {
                        name: NamedNodePattern::NamedNode(name),
                        inner: b(GraphPattern::Slice {
                            inner,
                            start: 0,
                            length: Some(start.saturating_add(*n)),
                        }),
                        silent,
                    },
                    (_, inner) => inner,
                };
                GraphPattern::Slice {
                    inner: b(inner),
                    start: *start,
                    length: *length,
                }
            }
            GraphPattern::Group {
                inner,
                variables,
                aggregates,
            } => {
                let counts = aggregates.iter().all(|(_, a)| is_count(a));
                into_service(self.pattern(inner, graph, &[]), counts, |inner| {
                    GraphPattern::Group {
                        inner: b(inner),
                        variables: variables.clone(),
                        aggregates: aggregates.clone(),
                    }
                })
            }
            GraphPattern::Service {
                name,
                inner,
                silent,
            } => GraphPattern::Service {
                name: name.clone(),
                inner: inner.clone(),
                silent: *silent,
            },
            GraphPattern::Values { .. } => p.clone(),
        }
    }

    /// A group of joined triple/path patterns (and other joined patterns).
    fn group(
        &mut self,
        p: &GraphPattern,
        graph: Option<&NamedNodePattern>,
        outer_values: &[GraphPattern],
    ) -> GraphPattern {
        let mut items = Vec::new();
        let mut others = Vec::new();
        flatten(p, &mut items, &mut others);
        if self.wrap {
            distribute_over_union(&mut items, &mut others);
        }
        let mut values: Vec<GraphPattern> = outer_values.to_vec();
        values.extend(
            others
                .iter()
                .filter(|o| matches!(o, GraphPattern::Values { .. }))
                .cloned(),
        );
        let mut others: Vec<GraphPattern> = others
            .iter()
            .map(|o| self.pattern(o, graph, &values))
            .collect();
        merge_chains(&mut items, &self.counts);

        let mut triples = Vec::new();
        let mut paths = Vec::new();
        for item in items {
            match item {
                Item::Triple(t) => triples.push(TriplePattern {
                    subject: self.term(&t.subject),
                    predicate: t.predicate.clone(),
                    object: self.term(&t.object),
                }),
                Item::Path(s, PropertyPathExpression::NamedNode(n), o) => {
                    triples.push(TriplePattern {
                        subject: self.term(&s),
                        predicate: n.into(),
                        object: self.term(&o),
                    })
                }
                Item::Path(s, path, o) => paths.push(GraphPattern::Path {
                    subject: self.term(&s),
                    path,
                    object: self.term(&o),
                }),
            }
        }
        let mut parts = Vec::new();
        // VALUES first: joined first, they restrict the patterns after them.
        let (mut vals, mut rest): (Vec<_>, Vec<_>) = others
            .drain(..)
            .partition(|o| matches!(o, GraphPattern::Values { .. }));
        if self.wrap && !paths.is_empty() {
            // Each set of paths joined by shared variables goes to k2rpq with the triples
            // joined to it, so that constants and the triples' bindings restrict the paths
            // there (the service sees no outer bindings). Moved, not copied: a BGP's
            // solutions are a set, so the multiplicities are those of the group. Triples
            // joined to no path stay with Oxigraph, and so do cross products between
            // the sets, which its evaluator streams.
            let mut members: Vec<GraphPattern> = paths;
            let mut loose = Vec::new();
            let path_count = members.len();
            members.extend(
                triples
                    .into_iter()
                    .map(|t| GraphPattern::Bgp { patterns: vec![t] }),
            );
            let vars: Vec<Vec<Variable>> = members.iter().map(member_variables).collect();
            let component = components(&vars);
            let mut groups: Vec<(usize, Vec<GraphPattern>, Vec<Variable>)> = Vec::new();
            for (i, member) in members.into_iter().enumerate() {
                let c = component[i];
                match groups.iter_mut().find(|g| g.0 == c) {
                    Some(g) => {
                        g.1.push(member);
                        for v in &vars[i] {
                            if !g.2.contains(v) {
                                g.2.push(v.clone());
                            }
                        }
                    }
                    None if i < path_count => groups.push((c, vec![member], vars[i].clone())),
                    None => loose.push(member),
                }
            }
            let mut rest_kept = Vec::new();
            for o in rest {
                let target = small_subquery_variables(&o)
                    .filter(|_| self.subqueries)
                    .and_then(|sub| {
                        groups
                            .iter()
                            .position(|g| g.2.iter().any(|v| sub.contains(v)))
                            .map(|i| (i, sub))
                    });
                match target {
                    Some((i, sub)) => {
                        groups[i].1.insert(0, o);
                        for v in sub {
                            if !groups[i].2.contains(&v) {
                                groups[i].2.push(v);
                            }
                        }
                    }
                    None => rest_kept.push(o),
                }
            }
            rest = rest_kept;
            // A VALUES whose variables all belong to one group, and to no other, moves
            // into that group's service whole: joined there, its rows keep their
            // multiplicities, and a count over the group comes from the service
            // (batched frontiers from all its values) instead of from rows.
            let mut moved: Vec<Vec<GraphPattern>> = vec![Vec::new(); groups.len()];
            vals.retain(|v| {
                let GraphPattern::Values { variables, .. } = v else {
                    return true;
                };
                let readers: Vec<usize> = (0..groups.len())
                    .filter(|&i| variables.iter().any(|x| groups[i].2.contains(x)))
                    .collect();
                match readers[..] {
                    [i] if variables.iter().all(|x| groups[i].2.contains(x)) => {
                        moved[i].push(v.clone());
                        false
                    }
                    _ => true,
                }
            });
            for ((_, mut members, vars), moved) in groups.into_iter().zip(moved) {
                let copied: Vec<GraphPattern> = values
                    .iter()
                    .filter(|v| !moved.contains(v))
                    .cloned()
                    .collect();
                members.splice(0..0, moved);
                let inner = join_all(merge_triples(members));
                parts.push(service(inner, vars, graph, &copied));
            }
            let loose = merge_triples(loose);
            parts.extend(loose);
        } else {
            if !triples.is_empty() {
                parts.push(GraphPattern::Bgp { patterns: triples });
            }
            parts.extend(paths);
        }
        parts.extend(rest);
        parts.splice(0..0, vals);
        join_all(parts)
    }
}

/// The variables of a path pattern or a BGP (its graph's aside), in order.
fn member_variables(p: &GraphPattern) -> Vec<Variable> {
    let mut vars = Vec::new();
    match p {
        GraphPattern::Path {
            subject, object, ..
        } => {
            add_variables(subject, &mut vars);
            add_variables(object, &mut vars);
        }
        GraphPattern::Bgp { patterns } => {
            for t in patterns {
                add_variables(&t.subject, &mut vars);
                if let NamedNodePattern::Variable(v) = &t.predicate {
                    if !vars.contains(v) {
                        vars.push(v.clone());
                    }
                }
                add_variables(&t.object, &mut vars);
            }
        }
        _ => {}
    }
    vars
}

/// For each member (by its variables), the smallest index of the members it is joined
/// to through shared variables, directly or not.
fn components(vars: &[Vec<Variable>]) -> Vec<usize> {
    let mut component: Vec<usize> = (0..vars.len()).collect();
    loop {
        let mut changed = false;
        for i in 0..vars.len() {
            for j in i + 1..vars.len() {
                if component[i] != component[j] && vars[i].iter().any(|v| vars[j].contains(v)) {
                    let (a, b) = (
                        component[i].min(component[j]),
                        component[i].max(component[j]),
                    );
                    for c in component.iter_mut() {
                        if *c == b {
                            *c = a;
                        }
                    }
                    changed = true;
                }
            }
        }
        if !changed {
            return component;
        }
    }
}

/// The members with every single-triple BGP merged into one BGP, first.
fn merge_triples(members: Vec<GraphPattern>) -> Vec<GraphPattern> {
    let mut triples = Vec::new();
    let mut others = Vec::new();
    for m in members {
        match m {
            GraphPattern::Bgp { patterns } => triples.extend(patterns),
            other => others.push(other),
        }
    }
    let mut out = Vec::new();
    if !triples.is_empty() {
        out.push(GraphPattern::Bgp { patterns: triples });
    }
    out.extend(others);
    out
}

/// The join of `members` (the empty BGP for none).
fn join_all(members: Vec<GraphPattern>) -> GraphPattern {
    let mut it = members.into_iter();
    let first = it.next().unwrap_or(GraphPattern::Bgp {
        patterns: Vec::new(),
    });
    it.fold(first, |l, r| GraphPattern::Join {
        left: Box::new(l),
        right: Box::new(r),
    })
}

fn add_variables(t: &TermPattern, vars: &mut Vec<Variable>) {
    if let TermPattern::Variable(v) = t {
        if !vars.contains(v) {
            vars.push(v.clone());
        }
    }
}

/// `SERVICE <urn:k2rpq:paths> { [VALUES …] [GRAPH g] { pattern } }`, where `vars` are
/// the variables `pattern` binds.
fn service(
    pattern: GraphPattern,
    mut vars: Vec<Variable>,
    graph: Option<&NamedNodePattern>,
    values: &[GraphPattern],
) -> GraphPattern {
    let mut inner = match graph {
        Some(name) => GraphPattern::Graph {
            name: name.clone(),
            inner: Box::new(pattern),
        },
        None => pattern,
    };
    if let Some(NamedNodePattern::Variable(g)) = graph {
        vars.push(g.clone());
    }
    for v in values {
        if let GraphPattern::Values { variables, .. } = v {
            let shared: Vec<Variable> = variables
                .iter()
                .filter(|x| vars.contains(x))
                .cloned()
                .collect();
            if shared.is_empty() {
                continue;
            }
            // Distinct: the outer join applies the VALUES' multiplicities once more.
            let pushed = GraphPattern::Distinct {
                inner: Box::new(GraphPattern::Project {
                    inner: Box::new(v.clone()),
                    variables: shared,
                }),
            };
            inner = GraphPattern::Join {
                left: Box::new(pushed),
                right: Box::new(inner),
            };
        }
    }
    GraphPattern::Service {
        name: NamedNodePattern::NamedNode(NamedNode::new_unchecked(SERVICE_IRI)),
        inner: Box::new(inner),
        silent: false,
    }
}

/// Where a group joins plain triples (no path, no blank node) with one UNION whose
/// branches hold paths, and the triples share a variable with it, joins the triples into
/// every branch instead (`T ⋈ (A ∪ B) = (T ⋈ A) ∪ (T ⋈ B)`, for bags too): each branch's
/// path service then receives the triples' constants and bindings, which it would
/// otherwise never see.
fn distribute_over_union(items: &mut Vec<Item>, others: &mut [GraphPattern]) {
    let plain = |i: &Item| match i {
        Item::Path(s, PropertyPathExpression::NamedNode(_), o) => {
            !matches!(s, TermPattern::BlankNode(_)) && !matches!(o, TermPattern::BlankNode(_))
        }
        _ => false,
    };
    if items.is_empty() || !items.iter().all(plain) {
        return;
    }
    let mut unions = others
        .iter_mut()
        .filter(|o| matches!(o, GraphPattern::Union { .. }));
    let (Some(union), None) = (unions.next(), unions.next()) else {
        return;
    };
    let mut union_vars = Vec::new();
    if !holds_path(union, &mut union_vars) {
        return;
    }
    let shares = items.iter().any(|i| match i {
        Item::Path(s, _, o) => [s, o]
            .into_iter()
            .any(|t| matches!(t, TermPattern::Variable(v) if union_vars.contains(v))),
        Item::Triple(_) => false,
    });
    if !shares {
        return;
    }
    let triples: Vec<TriplePattern> = std::mem::take(items)
        .into_iter()
        .filter_map(|i| match i {
            Item::Path(subject, PropertyPathExpression::NamedNode(n), object) => {
                Some(TriplePattern {
                    subject,
                    predicate: n.into(),
                    object,
                })
            }
            _ => None,
        })
        .collect();
    fn into_branches(p: &GraphPattern, triples: &[TriplePattern]) -> GraphPattern {
        match p {
            GraphPattern::Union { left, right } => GraphPattern::Union {
                left: Box::new(into_branches(left, triples)),
                right: Box::new(into_branches(right, triples)),
            },
            branch => GraphPattern::Join {
                left: Box::new(GraphPattern::Bgp {
                    patterns: triples.to_vec(),
                }),
                right: Box::new(branch.clone()),
            },
        }
    }
    *union = into_branches(union, &triples);
}

/// Whether a UNION's branches hold a property path (or a blank node, which may be the
/// middle of a split sequence) in their own groups; collects the variables they use.
fn holds_path(p: &GraphPattern, vars: &mut Vec<Variable>) -> bool {
    let mut found = false;
    let mut term = |t: &TermPattern, vars: &mut Vec<Variable>| match t {
        TermPattern::Variable(v) if !vars.contains(v) => vars.push(v.clone()),
        TermPattern::BlankNode(_) => found = true,
        _ => {}
    };
    match p {
        GraphPattern::Bgp { patterns } => {
            for t in patterns {
                term(&t.subject, vars);
                term(&t.object, vars);
            }
            found
        }
        GraphPattern::Path {
            subject, object, ..
        } => {
            term(subject, vars);
            term(object, vars);
            true
        }
        GraphPattern::Union { left, right } | GraphPattern::Join { left, right } => {
            let l = holds_path(left, vars);
            holds_path(right, vars) || l
        }
        GraphPattern::Filter { inner, .. } | GraphPattern::Graph { inner, .. } => {
            holds_path(inner, vars)
        }
        _ => false,
    }
}

fn flatten(p: &GraphPattern, items: &mut Vec<Item>, others: &mut Vec<GraphPattern>) {
    match p {
        GraphPattern::Join { left, right } => {
            flatten(left, items, others);
            flatten(right, items, others);
        }
        GraphPattern::Bgp { patterns } => {
            for t in patterns {
                items.push(match &t.predicate {
                    NamedNodePattern::NamedNode(n) => Item::Path(
                        t.subject.clone(),
                        PropertyPathExpression::NamedNode(n.clone()),
                        t.object.clone(),
                    ),
                    NamedNodePattern::Variable(_) => Item::Triple(t.clone()),
                })
            }
        }
        GraphPattern::Path {
            subject,
            path,
            object,
        } => items.push(Item::Path(subject.clone(), path.clone(), object.clone())),
        other => others.push(other.clone()),
    }
}

/// Merges two patterns joined by a blank node `_:b` that occurs exactly twice in the
/// query, once in each: `s a _:b . _:b b o` becomes `s a/b o`; a pattern that has `_:b`
/// at the other end is turned around first (`_:b a s` is `s ^a _:b`).
fn merge_chains(items: &mut Vec<Item>, counts: &HashMap<String, usize>) {
    fn ends(item: &Item) -> Option<(&TermPattern, &TermPattern)> {
        match item {
            Item::Path(s, _, o) => Some((s, o)),
            Item::Triple(_) => None,
        }
    }
    fn is_blank(t: &TermPattern, counts: &HashMap<String, usize>) -> Option<String> {
        match t {
            TermPattern::BlankNode(b) if counts.get(b.as_str()) == Some(&2) => {
                Some(b.as_str().to_owned())
            }
            _ => None,
        }
    }
    fn reversed(item: Item) -> Item {
        match item {
            Item::Path(s, p, o) => Item::Path(o, PropertyPathExpression::Reverse(Box::new(p)), s),
            t => t,
        }
    }
    loop {
        let mut found = None;
        'outer: for (i, a) in items.iter().enumerate() {
            let Some((sa, oa)) = ends(a) else { continue };
            for (a_end, other) in [(oa, sa), (sa, oa)] {
                let Some(b) = is_blank(a_end, counts) else {
                    continue;
                };
                if is_blank(other, counts).as_deref() == Some(b.as_str()) {
                    continue; // `_:b p _:b`: a loop, not a chain
                }
                for (j, c) in items.iter().enumerate() {
                    let Some((sc, oc)) = ends(c) else { continue };
                    if i == j || sc == oc {
                        continue;
                    }
                    let hit = |t: &TermPattern| is_blank(t, counts).as_deref() == Some(b.as_str());
                    if hit(sc) || hit(oc) {
                        // Turn A so that `_:b` is its object, C so that it is its subject.
                        found = Some((i, std::ptr::eq(a_end, sa), j, hit(oc)));
                        break 'outer;
                    }
                }
            }
        }
        let Some((i, reverse_a, j, reverse_c)) = found else {
            return;
        };
        let (mut a, mut c) = (items[i].clone(), items[j].clone());
        if reverse_a {
            a = reversed(a);
        }
        if reverse_c {
            c = reversed(c);
        }
        let (Item::Path(s, pa, _), Item::Path(_, pc, o)) = (a, c) else {
            return;
        };
        let merged = Item::Path(
            s,
            PropertyPathExpression::Sequence(Box::new(pa), Box::new(pc)),
            o,
        );
        let (hi, lo) = (i.max(j), i.min(j));
        items.remove(hi);
        items.remove(lo);
        items.insert(lo, merged);
    }
}

/// The predicate IRIs whose relations matching `pattern` reads, or `None` when it may read
/// any relation (a variable predicate or a negated property set). Engines use it to
/// estimate the work of a query before choosing where to run it.
pub fn predicates_read(pattern: &GraphPattern) -> Option<Vec<String>> {
    fn walk(p: &GraphPattern, out: &mut Vec<String>) -> bool {
        match p {
            GraphPattern::Bgp { patterns } => patterns.iter().all(|t| match &t.predicate {
                NamedNodePattern::NamedNode(n) => {
                    out.push(n.as_str().to_owned());
                    true
                }
                NamedNodePattern::Variable(_) => false,
            }),
            GraphPattern::Path { path: e, .. } => path_predicates(e, out),
            p => sub_patterns(p).into_iter().all(|inner| walk(inner, out)),
        }
    }
    let mut out = Vec::new();
    if !walk(pattern, &mut out) {
        return None;
    }
    out.sort_unstable();
    out.dedup();
    Some(out)
}

/// The variables a subquery returns, when it returns at most [`SMALL_SUBQUERY_ROWS`]
/// rows (a LIMIT says so); `None` for any other pattern.
fn small_subquery_variables(p: &GraphPattern) -> Option<Vec<Variable>> {
    let GraphPattern::Slice {
        inner,
        length: Some(length),
        ..
    } = p
    else {
        return None;
    };
    if *length > SMALL_SUBQUERY_ROWS {
        return None;
    }
    let mut q = &**inner;
    loop {
        match q {
            GraphPattern::Distinct { inner } | GraphPattern::Reduced { inner } => q = inner,
            GraphPattern::Project { variables, .. } => return Some(variables.clone()),
            _ => return None,
        }
    }
}

/// `modify(inner)`, where `inner` is a rewritten pattern; when it is one path service call
/// and `pushable`, with the modifier inside the call: the service then returns projected,
/// deduplicated or counted rows of ids instead of every row of the group.
fn into_service(
    inner: GraphPattern,
    pushable: bool,
    modify: impl FnOnce(GraphPattern) -> GraphPattern,
) -> GraphPattern {
    match inner {
        GraphPattern::Service {
            name: NamedNodePattern::NamedNode(name),
            inner,
            silent,
        } if pushable && name.as_str() == SERVICE_IRI => GraphPattern::Service {
            name: NamedNodePattern::NamedNode(name),
            inner: Box::new(modify(*inner)),
            silent,
        },
        other => modify(other),
    }
}

/// `p` with its rows made distinct inside the path service ([`into_service`]), where `p`
/// is a call of it; else `p` as it is.
fn distinct_in_service(p: GraphPattern) -> GraphPattern {
    let call = matches!(&p, GraphPattern::Service {
        name: NamedNodePattern::NamedNode(n),
        ..
    } if n.as_str() == SERVICE_IRI);
    if !call {
        return p;
    }
    into_service(p, true, |inner| match inner {
        GraphPattern::Distinct { .. } => inner,
        inner => GraphPattern::Distinct {
            inner: Box::new(inner),
        },
    })
}

/// Whether an aggregate is a count the path service computes: `COUNT(*)` or `COUNT(?v)`,
/// with or without DISTINCT.
pub(crate) fn is_count(a: &spargebra::algebra::AggregateExpression) -> bool {
    use spargebra::algebra::{AggregateExpression, AggregateFunction, Expression};
    match a {
        AggregateExpression::CountSolutions { .. } => true,
        AggregateExpression::FunctionCall {
            name: AggregateFunction::Count,
            expr: Expression::Variable(_),
            ..
        } => true,
        AggregateExpression::FunctionCall { .. } => false,
    }
}

/// Adds the predicate IRIs `path` reads to `out`; false when it may read any relation (a
/// negated property set).
pub(crate) fn path_predicates(path: &PropertyPathExpression, out: &mut Vec<String>) -> bool {
    match path {
        PropertyPathExpression::NamedNode(n) => {
            out.push(n.as_str().to_owned());
            true
        }
        PropertyPathExpression::Reverse(a)
        | PropertyPathExpression::ZeroOrMore(a)
        | PropertyPathExpression::OneOrMore(a)
        | PropertyPathExpression::ZeroOrOne(a) => path_predicates(a, out),
        PropertyPathExpression::Sequence(a, b) | PropertyPathExpression::Alternative(a, b) => {
            path_predicates(a, out) && path_predicates(b, out)
        }
        PropertyPathExpression::NegatedPropertySet(_) => false,
    }
}

/// A query that [`wrap_paths_and_small_subqueries_in_service`] makes one path service
/// call with nothing around it but its projection and slice: a lone property path (or a
/// group of paths and triples) in a SELECT, with DISTINCT, LIMIT and OFFSET as the query
/// has them, or in an ASK. Oxigraph's evaluator would only pass the service's rows
/// through, so the path engines' rows are the answer.
#[derive(Clone, Debug)]
pub struct LoneService {
    /// The service's pattern, as [`crate::database::Database::evaluate_path_service`]
    /// takes it.
    pub pattern: GraphPattern,
    /// The query's columns (an ASK's: the variables of its pattern).
    pub variables: Vec<Variable>,
    /// Rows skipped first (`OFFSET`).
    pub offset: usize,
    /// The most rows returned (`LIMIT`; an ASK's: 1).
    pub length: Option<usize>,
}

/// The path service call that `rewritten`, a query as
/// [`wrap_paths_and_small_subqueries_in_service`] returns it, is, when it is one with
/// nothing around it but its slice (a query with `FROM` never is).
///
/// ```
/// use k2rpq::sparql::rewrite::{lone_service, wrap_paths_and_small_subqueries_in_service};
/// let q = |s: &str| {
///     let query = spargebra::SparqlParser::new().parse_query(s).unwrap();
///     wrap_paths_and_small_subqueries_in_service(&query)
/// };
/// let lone = lone_service(&q("SELECT ?y WHERE { <http://e/a> <http://e/p>+ ?y } LIMIT 5")).unwrap();
/// assert_eq!((lone.variables.len(), lone.length), (1, Some(5)));
/// assert!(lone_service(&q("ASK { <http://e/a> <http://e/p>+ <http://e/b> }")).is_some());
/// // A FILTER around the path is evaluated by Oxigraph's evaluator.
/// assert!(lone_service(&q("SELECT ?y WHERE { <http://e/a> <http://e/p>+ ?y FILTER(?y != <http://e/a>) }")).is_none());
/// ```
pub fn lone_service(rewritten: &Query) -> Option<LoneService> {
    let pattern = match rewritten {
        Query::Select {
            dataset: None,
            pattern,
            ..
        }
        | Query::Ask {
            dataset: None,
            pattern,
            ..
        } => pattern,
        _ => return None,
    };
    let (inner, offset, length) = match pattern {
        GraphPattern::Slice {
            inner,
            start,
            length,
        } => (&**inner, *start, *length),
        p => (p, 0, None),
    };
    let GraphPattern::Service {
        name: NamedNodePattern::NamedNode(name),
        inner,
        silent: false,
    } = inner
    else {
        return None;
    };
    if name.as_str() != SERVICE_IRI {
        return None;
    }
    // The columns are those of the projection that went into the call, under the
    // slice and DISTINCT that went with it.
    let mut p = &**inner;
    let variables = loop {
        match p {
            GraphPattern::Slice { inner, .. }
            | GraphPattern::Distinct { inner }
            | GraphPattern::Reduced { inner } => p = inner,
            GraphPattern::Project { variables, .. } => break variables.clone(),
            _ => return None,
        }
    };
    Some(LoneService {
        pattern: (**inner).clone(),
        variables,
        offset,
        length,
    })
}

#[cfg(test)]
mod tests {
    #[test]
    fn predicates_read_lists_path_and_triple_predicates() {
        let q = spargebra::SparqlParser::new()
            .parse_query("SELECT * WHERE { ?x <http://e/p>/<http://e/q>* ?y . ?y <http://e/r> ?z OPTIONAL { ?z ^<http://e/p> ?w } }")
            .unwrap();
        let spargebra::Query::Select { pattern, .. } = q else {
            unreachable!()
        };
        assert_eq!(
            predicates_read(&pattern).unwrap(),
            vec!["http://e/p", "http://e/q", "http://e/r"]
        );
        for any in [
            "SELECT * WHERE { ?x ?p ?y }",
            "SELECT * WHERE { ?x !(<http://e/p>) ?y }",
        ] {
            let q = spargebra::SparqlParser::new().parse_query(any).unwrap();
            let spargebra::Query::Select { pattern, .. } = q else {
                unreachable!()
            };
            assert_eq!(predicates_read(&pattern), None, "{any}");
        }
    }

    use super::*;

    fn rewritten(q: &str) -> String {
        let q = spargebra::SparqlParser::new().parse_query(q).unwrap();
        wrap_paths_in_service(&q).to_string()
    }

    #[test]
    fn a_limit_goes_into_the_service_unless_an_order_comes_first() {
        let s = rewritten("SELECT ?y WHERE { ?x <http://p>+ ?y } LIMIT 5 OFFSET 2");
        // Inside: the rows the slice can keep; outside: the slice itself.
        assert!(s.contains("LIMIT 7 } } }"), "{s}");
        assert!(s.ends_with("OFFSET 2 LIMIT 5"), "{s}");
        let s = rewritten("SELECT ?y WHERE { ?x <http://p>+ ?y } ORDER BY ?y LIMIT 5");
        assert_eq!(s.matches("LIMIT").count(), 1, "{s}");
        let group = |q: &str| {
            let q = spargebra::SparqlParser::new().parse_query(q).unwrap();
            let Query::Select { pattern, .. } = wrap_paths_in_service(&q) else {
                unreachable!()
            };
            let service = path_services(&pattern)[0].clone();
            crate::sparql::group::PathGroup::from_pattern(&service).unwrap()
        };
        let lone = group("SELECT ?y WHERE { ?x <http://p>+ ?y } LIMIT 5 OFFSET 2");
        assert_eq!(lone.rows_needed(), Some(7));
        // A join or DISTINCT needs every row of the pattern.
        let joined = group("SELECT * WHERE { ?x <http://p>+ ?y . ?y <http://q> ?z } LIMIT 5");
        assert_eq!(joined.rows_needed(), None);
        let distinct = group("SELECT DISTINCT ?y WHERE { ?x <http://p>+ ?y } LIMIT 5");
        assert_eq!(distinct.rows_needed(), None);
    }

    #[test]
    fn the_right_of_minus_is_made_distinct_in_its_service() {
        let s = rewritten("SELECT ?c WHERE { <http://g> <http://p> ?c MINUS { <http://g> <http://q>/^<http://q> ?c } }");
        assert!(
            s.contains("MINUS { SERVICE <urn:k2rpq:paths> { { SELECT DISTINCT *"),
            "{s}"
        );
        // Its left side keeps its multiplicities.
        assert_eq!(s.matches("DISTINCT").count(), 1, "{s}");
    }

    #[test]
    fn values_read_by_one_group_move_into_its_service() {
        let s = rewritten(
            "SELECT (COUNT(*) AS ?n) WHERE { VALUES ?x { <http://a> <http://b> } ?x <http://p>+ ?y }",
        );
        // Whole and once: no outer copy, so the count goes into the service too.
        assert_eq!(s.matches("VALUES").count(), 1, "{s}");
        assert!(
            s.contains("SERVICE <urn:k2rpq:paths> { {SELECT (COUNT(*)"),
            "{s}"
        );
        // A VALUES two groups read stays outside, with a copy in each.
        let s = rewritten(
            "SELECT * WHERE { VALUES (?x ?z) { (<http://a> <http://b>) } \
             ?x <http://p>+ ?y . ?z <http://q>+ ?w }",
        );
        assert_eq!(s.matches("SERVICE").count(), 2, "{s}");
        assert_eq!(s.matches("VALUES").count(), 3, "{s}");
        assert!(s.contains("WHERE { VALUES"), "{s}");
    }

    #[test]
    fn split_sequence_reaches_the_service_as_one_path() {
        let s = rewritten("PREFIX wdt: <http://w/> SELECT ?s ?o WHERE { ?s wdt:P31/wdt:P279* ?o }");
        assert_eq!(s.matches("SERVICE <urn:k2rpq:paths>").count(), 1, "{s}");
        assert!(s.contains("<http://w/P31> / (<http://w/P279>)*"), "{s}");
        // No blank node is left to join on.
        assert!(!s.contains("_:"), "{s}");
    }

    #[test]
    fn groups_without_paths_stay_with_oxigraph_and_long_chains_merge() {
        let s = rewritten(
            "SELECT * WHERE { ?s <http://p>/<http://q>/<http://r> ?o . ?o <http://t> ?z }",
        );
        assert_eq!(s.matches("SERVICE").count(), 1, "{s}");
        assert!(s.contains("<http://t>"), "{s}");
        let s = rewritten("SELECT * WHERE { ?s <http://p> ?o }");
        assert!(!s.contains("SERVICE"), "{s}");
    }

    #[test]
    fn a_blank_node_used_elsewhere_is_not_merged_away() {
        let s = rewritten(
            "SELECT * WHERE { ?s <http://p> _:m . _:m <http://q>+ ?o . _:m <http://r> ?z }",
        );
        // `_:m` joins three patterns: it becomes a hidden variable shared by all three.
        assert!(s.contains("?k2rpq_b0"), "{s}");
        assert_eq!(s.matches("k2rpq_b0").count(), 3, "{s}");
    }

    #[test]
    fn chains_through_a_reversed_first_step_merge() {
        // `^p/q*` splits into `_:b p <a> . _:b q* ?x`: both patterns start at `_:b`.
        let s = rewritten("SELECT ?x WHERE { <http://a> ^<http://p>/<http://q>* ?x }");
        assert_eq!(s.matches("SERVICE").count(), 1, "{s}");
        assert!(s.contains("^(<http://p>) / (<http://q>)*"), "{s}");
        assert!(!s.contains("k2rpq_b"), "{s}");
    }

    /// The text of the first SERVICE call, up to its closing brace.
    fn service_body(s: &str) -> &str {
        let start = s.find("SERVICE").unwrap();
        let mut depth = 0;
        for (i, c) in s[start..].char_indices() {
            match c {
                '{' => depth += 1,
                '}' if depth == 1 => return &s[start..start + i],
                '}' => depth -= 1,
                _ => {}
            }
        }
        &s[start..]
    }

    #[test]
    fn only_patterns_joined_to_a_path_go_to_its_service() {
        // A triple joined to the path goes with it; one joined to nothing stays outside.
        let s =
            rewritten("SELECT * WHERE { ?x <http://p> ?y . ?y <http://q>+ ?z . ?a <http://r> ?b }");
        assert_eq!(s.matches("SERVICE").count(), 1, "{s}");
        let service = service_body(&s);
        assert!(service.contains("<http://p>"), "{s}");
        assert!(!service.contains("<http://r>"), "{s}");
        // Two paths that share no variable: two services, no cross product inside one.
        let s = rewritten("SELECT * WHERE { ?x <http://p>+ ?y . ?a <http://q>* ?b }");
        assert_eq!(s.matches("SERVICE").count(), 2, "{s}");
        // Joined through a triple: one service.
        let s = rewritten(
            "SELECT * WHERE { ?x <http://p>+ ?y . ?y <http://r> ?a . ?a <http://q>* ?b }",
        );
        assert_eq!(s.matches("SERVICE").count(), 1, "{s}");
    }

    #[test]
    fn triples_joined_to_a_union_of_paths_go_into_each_branch() {
        let s = rewritten(
            "SELECT * WHERE { ?x <http://i> <http://n> { ?x <http://b> ?p } UNION { ?x <http://d>/<http://l>* ?p } }",
        );
        assert_eq!(s.matches("<http://i>").count(), 2, "{s}");
        let service = service_body(&s);
        assert!(service.contains("<http://i>"), "{s}");
        // Not where the union holds no path, nor where a triple has a blank node.
        let s = rewritten(
            "SELECT * WHERE { ?x <http://i> <http://n> { ?x <http://b> ?p } UNION { ?x <http://d> ?p } }",
        );
        assert_eq!(s.matches("<http://i>").count(), 1, "{s}");
        let s = rewritten(
            "SELECT * WHERE { ?x <http://i> [] { ?x <http://b> ?p } UNION { ?x <http://d>+ ?p } }",
        );
        assert_eq!(s.matches("<http://i>").count(), 1, "{s}");
    }

    #[test]
    fn counts_projections_and_distinct_go_into_a_lone_service() {
        for q in [
            "SELECT (COUNT(*) AS ?n) WHERE { ?x <http://p>+ ?y }",
            "SELECT ?x (COUNT(DISTINCT ?y) AS ?n) WHERE { ?x <http://p>+ ?y } GROUP BY ?x",
            "SELECT DISTINCT ?y WHERE { ?x <http://p>+ ?y }",
        ] {
            let s = rewritten(q);
            assert!(s.starts_with("SELECT") && s.contains("SERVICE"), "{s}");
            let service = service_body(&s);
            let modifier = if q.contains("COUNT") {
                "GROUP BY"
            } else {
                "DISTINCT"
            };
            assert!(
                service.contains(modifier) || service.contains("COUNT"),
                "{q}: {s}"
            );
        }
        // Other aggregates, and groups over more than the service, stay outside.
        for q in [
            "SELECT (SUM(?y) AS ?n) WHERE { ?x <http://p>+ ?y }",
            "SELECT (COUNT(*) AS ?n) WHERE { ?x <http://p>+ ?y OPTIONAL { ?y <http://q> ?z } }",
        ] {
            let s = rewritten(q);
            let service = service_body(&s);
            assert!(
                !service.contains("SUM") && !service.contains("COUNT"),
                "{q}: {s}"
            );
        }
    }

    #[test]
    fn small_subqueries_joined_to_paths_go_into_the_service_where_asked() {
        let q = "SELECT * WHERE { { SELECT ?c WHERE { ?x <http://c> ?c } ORDER BY ?c LIMIT 5 } ?c <http://p>/<http://q> ?o }";
        let q = spargebra::SparqlParser::new().parse_query(q).unwrap();
        let with = wrap_paths_and_small_subqueries_in_service(&q).to_string();
        assert!(service_body(&with).contains("LIMIT 5"), "{with}");
        let without = wrap_paths_in_service(&q).to_string();
        assert!(!service_body(&without).contains("LIMIT"), "{without}");
        // A large LIMIT, or none, keeps the subquery outside.
        let big = format!(
            "SELECT * WHERE {{ {{ SELECT ?c WHERE {{ ?x <http://c> ?c }} LIMIT {} }} ?c <http://p>+ ?o }}",
            SMALL_SUBQUERY_ROWS + 1
        );
        let big = spargebra::SparqlParser::new().parse_query(&big).unwrap();
        let s = wrap_paths_and_small_subqueries_in_service(&big).to_string();
        assert!(!service_body(&s).contains("LIMIT"), "{s}");
    }

    #[test]
    fn values_and_graph_context_are_pushed_inside() {
        let s =
            rewritten("SELECT * WHERE { VALUES ?s { <http://a> } GRAPH ?g { ?s <http://p>* ?o } }");
        let service = &s[s.find("SERVICE").unwrap()..];
        assert!(service.contains("VALUES ( ?s )"), "{s}");
        assert!(service.contains("GRAPH ?g"), "{s}");
    }
}
