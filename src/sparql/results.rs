//! Writing answers: SPARQL JSON, XML, CSV and TSV through sparesults, or an aligned table.

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
            other => {
                return Err(format!(
                    "unknown format `{other}` (table, json, xml, csv, tsv)"
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
