//! Answers of the SPARQL layer and of Oxigraph as multisets of rows, for comparisons that
//! ignore order.
#![allow(dead_code)]

use std::collections::BTreeMap;

use k2rpq::sparql::QueryAnswer;

/// Rows (terms joined by tabs, unbound as empty) with their multiplicities.
pub type Multiset = BTreeMap<String, usize>;

/// The multiset of an answer's rows (an ASK answer is one row, `true` or `false`).
pub fn multiset(answer: QueryAnswer) -> Multiset {
    let mut m = Multiset::new();
    match answer {
        QueryAnswer::Solutions { rows, .. } => {
            for r in rows {
                let key: Vec<String> = r
                    .iter()
                    .map(|t| t.as_ref().map(|t| t.to_string()).unwrap_or_default())
                    .collect();
                *m.entry(key.join("\t")).or_default() += 1;
            }
        }
        QueryAnswer::Boolean(b) => {
            m.insert(b.to_string(), 1);
        }
    }
    m
}

/// The rows of Oxigraph results as a multiset (a graph result: its triples, as
/// N-Triples lines); panics on an error while reading them.
pub fn oxigraph_multiset(results: oxigraph::sparql::QueryResults<'_>) -> Multiset {
    try_oxigraph_multiset(results).unwrap()
}

/// [`oxigraph_multiset`], with an error while reading the rows returned (read in full,
/// as a user waits for every row).
pub fn try_oxigraph_multiset(
    results: oxigraph::sparql::QueryResults<'_>,
) -> Result<Multiset, String> {
    use oxigraph::sparql::QueryResults;
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
