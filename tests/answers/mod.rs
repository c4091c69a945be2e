//! Answers of the SPARQL layer as multisets of rows, for comparisons that ignore order.

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
