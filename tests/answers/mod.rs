//! Answers as multisets of rows, for comparisons that ignore order (k2rpq's and
//! Oxigraph's results are the same type: both come out of Oxigraph's evaluator), and k2rpq
//! stores made from the same quads as an Oxigraph store.
#![allow(dead_code)]

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use k2rpq::database::{Database, DatabaseOptions, EngineChoice};
use k2rpq::sparql::QueryResults;

/// Rows (terms joined by tabs, unbound as empty; a graph result's triples as N-Triples
/// lines; an ASK answer `true` or `false`) with their multiplicities.
pub type Multiset = BTreeMap<String, usize>;

/// The rows of results as a multiset; panics on an error while reading them.
pub fn multiset(results: QueryResults<'_>) -> Multiset {
    try_multiset(results).unwrap()
}

/// [`multiset`], with an error while reading the rows returned (read in full).
pub fn try_multiset(results: QueryResults<'_>) -> Result<Multiset, String> {
    let mut m = Multiset::new();
    let mut add = |key: String| *m.entry(key).or_default() += 1;
    match results {
        QueryResults::Boolean(b) => add(b.to_string()),
        QueryResults::Solutions(rows) => {
            for row in rows {
                let row = row.map_err(|e| e.to_string())?;
                let key: Vec<String> = row
                    .values()
                    .iter()
                    .map(|t| t.as_ref().map(|t| t.to_string()).unwrap_or_default())
                    .collect();
                add(key.join("\t"));
            }
        }
        QueryResults::Graph(triples) => {
            for t in triples {
                add(t.map_err(|e| e.to_string())?.to_string());
            }
        }
    }
    Ok(m)
}

/// [`multiset`] with each row's values keyed by their variables' names, sorted: the same
/// for any order of the columns (`SELECT *` lists variables in order of appearance,
/// Oxigraph by name).
pub fn named_multiset(results: QueryResults<'_>) -> Multiset {
    let (vars, rows) = rows(results);
    let mut order: Vec<usize> = (0..vars.len()).collect();
    order.sort_by_key(|&i| &vars[i]);
    let mut m = Multiset::new();
    for r in rows {
        let key: Vec<String> = if r.len() == vars.len() {
            order
                .iter()
                .map(|&i| format!("{}={}", vars[i], r[i]))
                .collect()
        } else {
            r
        };
        *m.entry(key.join("\t")).or_default() += 1;
    }
    m
}

/// The variables and rows of results, in order (an ASK answer: no variable, one row
/// holding `true` or `false`; a graph result: its triples as N-Triples lines, one column).
pub fn rows(results: QueryResults<'_>) -> (Vec<String>, Vec<Vec<String>>) {
    match results {
        QueryResults::Boolean(b) => (Vec::new(), vec![vec![b.to_string()]]),
        QueryResults::Solutions(s) => {
            let vars = s
                .variables()
                .iter()
                .map(|v| v.as_str().to_owned())
                .collect();
            let rows = s
                .map(|r| {
                    r.unwrap()
                        .values()
                        .iter()
                        .map(|t| t.as_ref().map(|t| t.to_string()).unwrap_or_default())
                        .collect()
                })
                .collect();
            (vars, rows)
        }
        QueryResults::Graph(t) => (
            Vec::new(),
            t.map(|t| vec![t.unwrap().to_string()]).collect(),
        ),
    }
}

/// A k2rpq store in `folder` loaded from `store`'s quads (written as N-Quads), opened on
/// the CPU engine.
pub fn database_of(store: &oxigraph::store::Store, folder: &Path) -> Database {
    let nq = folder.join("data.nq");
    let text: String = store
        .iter()
        .map(|q| format!("{} .\n", q.unwrap()))
        .collect();
    std::fs::write(&nq, text).unwrap();
    cpu_database(nq, folder)
}

/// A k2rpq store in `folder` loaded from the RDF file `input`, opened on the CPU engine.
pub fn cpu_database(input: PathBuf, folder: &Path) -> Database {
    let dir = folder.join("store");
    k2rpq::store::load(
        &[k2rpq::store::Input::Path(input)],
        &dir,
        &k2rpq::store::LoadOptions::default(),
    )
    .unwrap();
    Database::open(
        &dir,
        &DatabaseOptions {
            engine: EngineChoice::Cpu,
            ..Default::default()
        },
    )
    .unwrap()
}

/// Oxigraph's own answer to `query` over `store` ([`named_multiset`]).
pub fn oxigraph_answer(store: &oxigraph::store::Store, query: &str) -> Multiset {
    named_multiset(
        oxigraph::sparql::SparqlEvaluator::new()
            .parse_query(query)
            .unwrap_or_else(|e| panic!("{query}: {e}"))
            .on_store(store)
            .execute()
            .unwrap_or_else(|e| panic!("{query}: {e}")),
    )
}
