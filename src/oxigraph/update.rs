//! SPARQL UPDATE with exact changes: each operation of a request is evaluated against the
//! open transaction (INSERT DATA and DELETE DATA directly; DELETE/INSERT by evaluating
//! its WHERE through Oxigraph and instantiating the templates per solution; CLEAR, DROP
//! and CREATE on the graphs they name; ADD, MOVE and COPY arrive from the parser as
//! these), so that every quad inserted or deleted goes through [`K2Transaction`] and is
//! known to the relations.

use std::collections::HashMap;

use oxigraph::model::{BlankNode, GraphName, NamedOrBlankNode, Quad, Term};
use oxigraph::sparql::{QueryResults, QuerySolution, SparqlEvaluator};
use spargebra::term::{
    GraphNamePattern, GroundQuad, GroundQuadPattern, GroundTerm, GroundTermPattern,
    NamedNodePattern, QuadPattern, TermPattern,
};
use spargebra::{GraphUpdateOperation, Update};

use super::store::K2Transaction;
use super::OxigraphError;
use spargebra::algebra::GraphTarget;

/// Applies every operation of `update`, in order, inside `t`.
pub(crate) fn apply(t: &mut K2Transaction<'_>, update: &Update) -> Result<(), OxigraphError> {
    for op in &update.operations {
        match op {
            GraphUpdateOperation::InsertData { data } => {
                let mut bnodes = HashMap::new();
                for q in data {
                    t.insert(&data_quad(q, &mut bnodes))?;
                }
            }
            GraphUpdateOperation::DeleteData { data } => {
                for q in data {
                    t.remove(&ground_quad(q))?;
                }
            }
            GraphUpdateOperation::DeleteInsert {
                delete,
                insert,
                using,
                pattern,
            } => {
                let query = spargebra::Query::Select {
                    dataset: using.clone(),
                    pattern: (**pattern).clone(),
                    base_iri: update.base_iri.clone(),
                };
                let QueryResults::Solutions(solutions) = SparqlEvaluator::new()
                    .for_query(query)
                    .on_transaction(t.oxigraph())
                    .execute()?
                else {
                    unreachable!("a SELECT query gives solutions")
                };
                let solutions: Vec<QuerySolution> = solutions.collect::<Result<_, _>>()?;
                let mut deletions = Vec::new();
                let mut insertions = Vec::new();
                for s in &solutions {
                    deletions.extend(delete.iter().filter_map(|p| delete_quad(p, s)));
                    let mut bnodes = HashMap::new();
                    insertions.extend(insert.iter().filter_map(|p| insert_quad(p, s, &mut bnodes)));
                }
                for q in &deletions {
                    t.remove(q)?;
                }
                for q in &insertions {
                    t.insert(q)?;
                }
            }
            GraphUpdateOperation::Load { silent, source, .. } => {
                if !silent {
                    return Err(OxigraphError::Unsupported(format!(
                        "LOAD <{}>: no HTTP client (load the document with K2Store::load_from_reader)",
                        source.as_str()
                    )));
                }
            }
            GraphUpdateOperation::Clear { silent, graph } => clear(t, graph, *silent, false)?,
            GraphUpdateOperation::Create { silent, graph } => {
                if t.contains_named_graph(graph)? {
                    if !silent {
                        return Err(OxigraphError::GraphAlreadyExists(graph.as_str().to_owned()));
                    }
                } else {
                    t.oxigraph_mut().insert_named_graph(graph);
                }
            }
            GraphUpdateOperation::Drop { silent, graph } => clear(t, graph, *silent, true)?,
        }
    }
    Ok(())
}

/// CLEAR (`drop` false) or DROP (`drop` true) of `graph`: its quads are deleted, and
/// DROP also removes the named graphs it names. A named graph that does not exist is an
/// error unless `silent`.
fn clear(
    t: &mut K2Transaction<'_>,
    graph: &GraphTarget,
    silent: bool,
    drop: bool,
) -> Result<(), OxigraphError> {
    match graph {
        GraphTarget::NamedNode(g) => {
            if t.contains_named_graph(g)? {
                t.clear_graph(&GraphName::NamedNode(g.clone()))?;
                if drop {
                    t.oxigraph_mut().remove_named_graph(g)?;
                }
            } else if !silent {
                return Err(OxigraphError::GraphDoesNotExist(g.as_str().to_owned()));
            }
        }
        GraphTarget::DefaultGraph => t.clear_graph(&GraphName::DefaultGraph)?,
        GraphTarget::NamedGraphs => t.clear_named_graphs(drop)?,
        GraphTarget::AllGraphs => {
            t.clear_graph(&GraphName::DefaultGraph)?;
            t.clear_named_graphs(drop)?;
        }
    }
    Ok(())
}

/// A quad of INSERT DATA: its blank nodes are fresh, one per label in the operation.
fn data_quad(q: &spargebra::term::Quad, bnodes: &mut HashMap<BlankNode, BlankNode>) -> Quad {
    let mut fresh = |b: &BlankNode| bnodes.entry(b.clone()).or_default().clone();
    Quad {
        subject: match &q.subject {
            NamedOrBlankNode::NamedNode(n) => n.clone().into(),
            NamedOrBlankNode::BlankNode(b) => fresh(b).into(),
        },
        predicate: q.predicate.clone(),
        object: match &q.object {
            Term::BlankNode(b) => fresh(b).into(),
            other => other.clone(),
        },
        graph_name: graph_name(&q.graph_name),
    }
}

fn ground_term(t: &GroundTerm) -> Term {
    match t {
        GroundTerm::NamedNode(n) => n.clone().into(),
        GroundTerm::Literal(l) => l.clone().into(),
    }
}

fn ground_quad(q: &GroundQuad) -> Quad {
    Quad {
        subject: q.subject.clone().into(),
        predicate: q.predicate.clone(),
        object: ground_term(&q.object),
        graph_name: graph_name(&q.graph_name),
    }
}

/// A template instantiated with `s`'s bindings; `None` when a variable is unbound or a
/// term does not fit its position (the triple is skipped, as the spec says).
fn instantiate(
    subject: Option<Term>,
    predicate: &NamedNodePattern,
    object: Option<Term>,
    graph: &GraphNamePattern,
    s: &QuerySolution,
) -> Option<Quad> {
    let subject: NamedOrBlankNode = match subject? {
        Term::NamedNode(n) => n.into(),
        Term::BlankNode(b) => b.into(),
        Term::Literal(_) => return None,
    };
    let predicate = match predicate {
        NamedNodePattern::NamedNode(n) => n.clone(),
        NamedNodePattern::Variable(v) => match s.get(v)? {
            Term::NamedNode(n) => n.clone(),
            _ => return None,
        },
    };
    let graph_name = match graph {
        GraphNamePattern::NamedNode(n) => GraphName::NamedNode(n.clone()),
        GraphNamePattern::DefaultGraph => GraphName::DefaultGraph,
        GraphNamePattern::Variable(v) => match s.get(v)? {
            Term::NamedNode(n) => GraphName::NamedNode(n.clone()),
            _ => return None,
        },
    };
    Some(Quad {
        subject,
        predicate,
        object: object?,
        graph_name,
    })
}

fn delete_quad(p: &GroundQuadPattern, s: &QuerySolution) -> Option<Quad> {
    let term = |t: &GroundTermPattern| match t {
        GroundTermPattern::NamedNode(n) => Some(n.clone().into()),
        GroundTermPattern::Literal(l) => Some(l.clone().into()),
        GroundTermPattern::Variable(v) => s.get(v).cloned(),
    };
    instantiate(
        term(&p.subject),
        &p.predicate,
        term(&p.object),
        &p.graph_name,
        s,
    )
}

fn insert_quad(
    p: &QuadPattern,
    s: &QuerySolution,
    bnodes: &mut HashMap<BlankNode, BlankNode>,
) -> Option<Quad> {
    let mut term = |t: &TermPattern| match t {
        TermPattern::NamedNode(n) => Some(n.clone().into()),
        TermPattern::Literal(l) => Some(l.clone().into()),
        TermPattern::BlankNode(b) => Some(bnodes.entry(b.clone()).or_default().clone().into()),
        TermPattern::Variable(v) => s.get(v).cloned(),
    };
    let subject = term(&p.subject);
    let object = term(&p.object);
    instantiate(subject, &p.predicate, object, &p.graph_name, s)
}

fn graph_name(g: &spargebra::term::GraphName) -> GraphName {
    match g {
        spargebra::term::GraphName::NamedNode(n) => GraphName::NamedNode(n.clone()),
        spargebra::term::GraphName::DefaultGraph => GraphName::DefaultGraph,
    }
}
