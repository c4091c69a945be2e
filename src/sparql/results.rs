//! Writing answers: SPARQL JSON, XML, CSV and TSV through sparesults, or an aligned table;
//! the triples of a CONSTRUCT or DESCRIBE (through the Oxigraph embedding) as N-Triples or
//! Turtle through oxttl.

use std::io::Write;
use std::str::FromStr;

use sparesults::{QueryResultsFormat, QueryResultsSerializer};

use super::{QueryAnswer, SparqlError};

/// An output format of `k2rpq query`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum ResultFormat {
    /// A readable table with aligned columns.
    #[default]
    Table,
    /// SPARQL 1.1 Query Results JSON.
    Json,
    /// SPARQL Query Results XML.
    Xml,
    /// SPARQL 1.1 Query Results CSV.
    Csv,
    /// SPARQL 1.1 Query Results TSV.
    Tsv,
    /// N-Triples: for the triples of a CONSTRUCT or DESCRIBE ([`write_triples`]).
    NTriples,
    /// Turtle: for the triples of a CONSTRUCT or DESCRIBE ([`write_triples`]).
    Turtle,
}

impl FromStr for ResultFormat {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        Ok(match s {
            "table" => ResultFormat::Table,
            "json" => ResultFormat::Json,
            "xml" => ResultFormat::Xml,
            "csv" => ResultFormat::Csv,
            "tsv" => ResultFormat::Tsv,
            "nt" | "ntriples" => ResultFormat::NTriples,
            "ttl" | "turtle" => ResultFormat::Turtle,
            other => {
                return Err(format!(
                    "unknown format `{other}` (table, json, xml, csv, tsv; nt, ttl for CONSTRUCT and DESCRIBE)"
                ))
            }
        })
    }
}

/// Writes `answer` to `out` in `format`.
///
/// ```
/// use k2rpq::sparql::{write_answer, QueryAnswer, ResultFormat};
/// let mut out = Vec::new();
/// write_answer(&QueryAnswer::Boolean(true), ResultFormat::Json, &mut out).unwrap();
/// assert_eq!(String::from_utf8(out).unwrap(), r#"{"head":{},"boolean":true}"#);
/// ```
pub fn write_answer(
    answer: &QueryAnswer,
    format: ResultFormat,
    out: &mut dyn Write,
) -> Result<(), SparqlError> {
    let err = |e: std::io::Error| SparqlError::Results(e.to_string());
    let sparesults_format = match format {
        ResultFormat::Table => return write_table(answer, out).map_err(err),
        ResultFormat::Json => QueryResultsFormat::Json,
        ResultFormat::Xml => QueryResultsFormat::Xml,
        ResultFormat::Csv => QueryResultsFormat::Csv,
        ResultFormat::Tsv => QueryResultsFormat::Tsv,
        ResultFormat::NTriples | ResultFormat::Turtle => {
            return Err(SparqlError::Results(
                "N-Triples and Turtle are formats of CONSTRUCT and DESCRIBE results; \
                 a SELECT or ASK answer is written as table, json, xml, csv or tsv"
                    .into(),
            ))
        }
    };
    let serializer = QueryResultsSerializer::from_format(sparesults_format);
    match answer {
        QueryAnswer::Boolean(b) => {
            serializer
                .serialize_boolean_to_writer(&mut *out, *b)
                .map_err(err)?;
        }
        QueryAnswer::Solutions { variables, rows } => {
            let mut w = serializer
                .serialize_solutions_to_writer(&mut *out, variables.clone())
                .map_err(err)?;
            for row in rows {
                w.serialize(
                    variables
                        .iter()
                        .zip(row)
                        .filter_map(|(v, t)| t.as_ref().map(|t| (v.as_ref(), t.as_ref()))),
                )
                .map_err(err)?;
            }
            w.finish().map_err(err)?;
        }
    }
    Ok(())
}

/// Writes the triples of a CONSTRUCT or DESCRIBE result to `out`: N-Triples for
/// [`ResultFormat::NTriples`] and [`ResultFormat::Table`] (one triple a line is the
/// readable form), Turtle for [`ResultFormat::Turtle`]. Returns the triples written; the
/// first error of `triples` stops the writing and is returned.
///
/// ```
/// use k2rpq::sparql::{write_triples, ResultFormat};
/// use oxrdf::{NamedNode, Triple};
/// let n = |s: &str| NamedNode::new(format!("http://e/{s}")).unwrap();
/// let t = Triple::new(n("a"), n("p"), n("b"));
/// let mut out = Vec::new();
/// let written = write_triples([Ok::<_, String>(t)], ResultFormat::NTriples, &mut out).unwrap();
/// assert_eq!(written, 1);
/// assert_eq!(String::from_utf8(out).unwrap(), "<http://e/a> <http://e/p> <http://e/b> .\n");
/// ```
pub fn write_triples<E: std::fmt::Display>(
    triples: impl IntoIterator<Item = Result<oxrdf::Triple, E>>,
    format: ResultFormat,
    out: &mut dyn Write,
) -> Result<u64, SparqlError> {
    let err = |e: std::io::Error| SparqlError::Results(e.to_string());
    let failed = |e: E| SparqlError::Results(e.to_string());
    let mut written = 0u64;
    match format {
        ResultFormat::NTriples | ResultFormat::Table => {
            let mut w = oxttl::NTriplesSerializer::new().for_writer(out);
            for t in triples {
                w.serialize_triple(&t.map_err(failed)?).map_err(err)?;
                written += 1;
            }
            w.finish();
        }
        ResultFormat::Turtle => {
            let mut w = oxttl::TurtleSerializer::new().for_writer(out);
            for t in triples {
                w.serialize_triple(&t.map_err(failed)?).map_err(err)?;
                written += 1;
            }
            w.finish().map_err(err)?;
        }
        other => {
            return Err(SparqlError::Results(format!(
                "a CONSTRUCT or DESCRIBE result is RDF: write it as nt or ttl (or table), not {}",
                format!("{other:?}").to_lowercase()
            )))
        }
    }
    Ok(written)
}

fn write_table(answer: &QueryAnswer, out: &mut dyn Write) -> std::io::Result<()> {
    let (variables, rows) = match answer {
        QueryAnswer::Boolean(b) => return writeln!(out, "{b}"),
        QueryAnswer::Solutions { variables, rows } => (variables, rows),
    };
    let cells: Vec<Vec<String>> = rows
        .iter()
        .map(|r| {
            r.iter()
                .map(|t| t.as_ref().map(|t| t.to_string()).unwrap_or_default())
                .collect()
        })
        .collect();
    let header: Vec<String> = variables.iter().map(|v| v.to_string()).collect();
    let mut widths: Vec<usize> = header.iter().map(|h| h.chars().count()).collect();
    for r in &cells {
        for (w, c) in widths.iter_mut().zip(r) {
            *w = (*w).max(c.chars().count());
        }
    }
    let line = |out: &mut dyn Write, r: &[String]| -> std::io::Result<()> {
        let parts: Vec<String> = r
            .iter()
            .zip(&widths)
            .map(|(c, w)| format!("{c}{}", " ".repeat(w - c.chars().count())))
            .collect();
        writeln!(out, "{}", parts.join(" | ").trim_end())
    };
    line(out, &header)?;
    let rule: Vec<String> = widths.iter().map(|w| "-".repeat(*w)).collect();
    writeln!(out, "{}", rule.join("-+-"))?;
    for r in &cells {
        line(out, r)?;
    }
    writeln!(
        out,
        "({} row{})",
        cells.len(),
        if cells.len() == 1 { "" } else { "s" }
    )
}
