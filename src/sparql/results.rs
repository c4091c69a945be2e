//! Writing results as they come: SPARQL JSON solutions through [`super::json`], XML, CSV,
//! TSV and booleans through sparesults, or an aligned table; the triples of a CONSTRUCT
//! or DESCRIBE as N-Triples or Turtle through oxttl. At most a given number of rows (triples) is written, and the caller learns
//! whether more were left, so that a cut answer never passes for a whole one.

use std::io::Write;
use std::str::FromStr;

use oxrdf::{Term, Variable};
use sparesults::{QueryResultsFormat, QueryResultsSerializer};
use spareval::{QueryResults, QuerySolutionIter};

use super::json::JsonSolutionsWriter;
use super::SparqlError;

/// An output format of `k2rpq query`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum ResultFormat {
    /// A readable table with aligned columns (N-Triples lines for CONSTRUCT and DESCRIBE).
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
    /// N-Triples: for the triples of a CONSTRUCT or DESCRIBE.
    NTriples,
    /// Turtle: for the triples of a CONSTRUCT or DESCRIBE.
    Turtle,
}

/// A format name that is none of [`ResultFormat`]'s.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("unknown format `{0}` (table, json, xml, csv, tsv; nt, ttl for CONSTRUCT and DESCRIBE; or their media types)")]
pub struct UnknownFormat(pub String);

impl FromStr for ResultFormat {
    type Err = UnknownFormat;

    /// A name (`json`), a usual alias or file extension (`srj`, `srx`, `ntriples`,
    /// `turtle`), or a media type (`application/sparql-results+json`, `text/turtle`),
    /// case-insensitive.
    ///
    /// ```
    /// use k2rpq::sparql::ResultFormat;
    /// assert_eq!("srj".parse(), Ok(ResultFormat::Json));
    /// assert_eq!("application/sparql-results+xml".parse(), Ok(ResultFormat::Xml));
    /// assert_eq!("text/turtle".parse(), Ok(ResultFormat::Turtle));
    /// assert!("yaml".parse::<ResultFormat>().is_err());
    /// ```
    fn from_str(s: &str) -> Result<Self, UnknownFormat> {
        let name = s.trim().to_ascii_lowercase();
        Ok(match name.as_str() {
            "table" | "text" => ResultFormat::Table,
            "json" => ResultFormat::Json,
            "xml" => ResultFormat::Xml,
            "csv" => ResultFormat::Csv,
            "tsv" => ResultFormat::Tsv,
            "ntriples" | "n-triples" => ResultFormat::NTriples,
            "turtle" => ResultFormat::Turtle,
            _ => {
                // The extensions and media types sparesults and oxrdfio know (`srj`,
                // `application/sparql-results+json`, `nt`, `text/turtle`, ...).
                let results = QueryResultsFormat::from_extension(&name)
                    .or_else(|| QueryResultsFormat::from_media_type(&name));
                let rdf = oxrdfio::RdfFormat::from_extension(&name)
                    .or_else(|| oxrdfio::RdfFormat::from_media_type(&name));
                match (results, rdf) {
                    (Some(QueryResultsFormat::Json), _) => ResultFormat::Json,
                    (Some(QueryResultsFormat::Xml), _) => ResultFormat::Xml,
                    (Some(QueryResultsFormat::Csv), _) => ResultFormat::Csv,
                    (Some(QueryResultsFormat::Tsv), _) => ResultFormat::Tsv,
                    (_, Some(oxrdfio::RdfFormat::NTriples)) => ResultFormat::NTriples,
                    (_, Some(oxrdfio::RdfFormat::Turtle)) => ResultFormat::Turtle,
                    _ => return Err(UnknownFormat(s.to_owned())),
                }
            }
        })
    }
}

impl ResultFormat {
    /// Its name on the command line.
    pub fn name(self) -> &'static str {
        match self {
            ResultFormat::Table => "table",
            ResultFormat::Json => "json",
            ResultFormat::Xml => "xml",
            ResultFormat::Csv => "csv",
            ResultFormat::Tsv => "tsv",
            ResultFormat::NTriples => "nt",
            ResultFormat::Turtle => "ttl",
        }
    }

    /// Whether this format can write the results of `query`: RDF formats for CONSTRUCT
    /// and DESCRIBE, results formats for SELECT and ASK, the table for all.
    ///
    /// ```
    /// use k2rpq::sparql::ResultFormat;
    /// let ask = spargebra::SparqlParser::new().parse_query("ASK {}").unwrap();
    /// assert!(ResultFormat::Json.check(&ask).is_ok());
    /// assert!(ResultFormat::Turtle.check(&ask).is_err());
    /// ```
    pub fn check(self, query: &spargebra::Query) -> Result<(), SparqlError> {
        let rdf = matches!(self, ResultFormat::NTriples | ResultFormat::Turtle);
        match query {
            spargebra::Query::Construct { .. } | spargebra::Query::Describe { .. }
                if !rdf && self != ResultFormat::Table =>
            {
                Err(SparqlError::Results(format!(
                    "a CONSTRUCT or DESCRIBE result is RDF: write it as nt, ttl or table, not {}",
                    self.name()
                )))
            }
            spargebra::Query::Select { .. } | spargebra::Query::Ask { .. } if rdf => {
                Err(SparqlError::Results(format!(
                    "{} is a format of CONSTRUCT and DESCRIBE results; a SELECT or ASK answer \
                     is written as table, json, xml, csv or tsv",
                    self.name()
                )))
            }
            _ => Ok(()),
        }
    }
}

/// What [`write_results`] wrote.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct WrittenResults {
    /// Rows (triples for CONSTRUCT and DESCRIBE; 1 for ASK) written.
    pub rows: u64,
    /// The limit stopped the writing with rows (triples) left.
    pub truncated: bool,
}

/// Rows the table reads before it writes anything, to size its columns; a later wider cell
/// widens its own line only.
const TABLE_SAMPLE: usize = 1000;

/// Writes `results` to `out` in `format` as they come, at most `limit` rows (triples),
/// and says whether rows were left. An error of the evaluation stops the writing and is
/// returned (what was written stays written: a caller must not take it for a whole
/// answer).
///
/// ```
/// use k2rpq::sparql::results::write_results;
/// use k2rpq::sparql::{QueryResults, ResultFormat};
/// let mut out = Vec::new();
/// write_results(QueryResults::Boolean(true), ResultFormat::Json, None, &mut out).unwrap();
/// assert_eq!(String::from_utf8(out).unwrap(), r#"{"head":{},"boolean":true}"#);
/// let mut out = Vec::new();
/// write_results(QueryResults::Boolean(false), ResultFormat::Tsv, None, &mut out).unwrap();
/// assert_eq!(String::from_utf8(out).unwrap(), "false\n");
/// ```
pub fn write_results(
    results: QueryResults<'_>,
    format: ResultFormat,
    limit: Option<u64>,
    out: &mut dyn Write,
) -> Result<WrittenResults, SparqlError> {
    let io = |e: std::io::Error| SparqlError::Results(e.to_string());
    let limit = limit.unwrap_or(u64::MAX);
    match results {
        QueryResults::Boolean(b) => {
            match format {
                ResultFormat::Table => writeln!(out, "{b}").map_err(io)?,
                ResultFormat::NTriples | ResultFormat::Turtle => {
                    return Err(SparqlError::Results(
                        "an ASK answer is written as table, json, xml, csv or tsv".into(),
                    ))
                }
                f => {
                    QueryResultsSerializer::from_format(results_format(f))
                        .serialize_boolean_to_writer(&mut *out, b)
                        .map_err(io)?;
                    // CSV and TSV lines end with a newline, the boolean's too (sparesults
                    // writes the word alone); JSON and XML documents end without one.
                    match f {
                        ResultFormat::Csv => out.write_all(b"\r\n").map_err(io)?,
                        ResultFormat::Tsv => out.write_all(b"\n").map_err(io)?,
                        _ => {}
                    }
                }
            }
            Ok(WrittenResults {
                rows: 1,
                truncated: false,
            })
        }
        QueryResults::Solutions(solutions) => match format {
            ResultFormat::Table => write_table(solutions, limit, out),
            ResultFormat::NTriples | ResultFormat::Turtle => Err(SparqlError::Results(
                "a SELECT answer is written as table, json, xml, csv or tsv".into(),
            )),
            ResultFormat::Json => {
                let variables = solutions.variables().to_vec();
                let mut w = JsonSolutionsWriter::start(&mut *out, &variables).map_err(io)?;
                let written = write_rows(solutions, limit, |s| {
                    w.serialize(s.iter().map(|(v, t)| (v.as_ref(), t.as_ref())))
                        .map_err(io)
                })?;
                w.finish().map_err(io)?;
                Ok(written)
            }
            f => {
                let variables = solutions.variables().to_vec();
                let mut w = QueryResultsSerializer::from_format(results_format(f))
                    .serialize_solutions_to_writer(&mut *out, variables)
                    .map_err(io)?;
                let written = write_rows(solutions, limit, |s| w.serialize(s).map_err(io))?;
                w.finish().map_err(io)?;
                Ok(written)
            }
        },
        QueryResults::Graph(triples) => match format {
            ResultFormat::NTriples | ResultFormat::Table => {
                let mut w = oxttl::NTriplesSerializer::new().for_writer(&mut *out);
                let written = write_rows(triples, limit, |t| w.serialize_triple(t).map_err(io))?;
                w.finish();
                Ok(written)
            }
            ResultFormat::Turtle => {
                let mut w = oxttl::TurtleSerializer::new().for_writer(&mut *out);
                let written = write_rows(triples, limit, |t| w.serialize_triple(t).map_err(io))?;
                w.finish().map_err(io)?;
                Ok(written)
            }
            other => Err(SparqlError::Results(format!(
                "a CONSTRUCT or DESCRIBE result is RDF: write it as nt, ttl or table, not {}",
                other.name()
            ))),
        },
    }
}

/// Writes `rows` with `write` until the end or `limit` rows (then `truncated` if rows were
/// left); the first error of the evaluation stops the writing and is returned.
fn write_rows<T, E>(
    rows: impl Iterator<Item = Result<T, E>>,
    limit: u64,
    mut write: impl FnMut(&T) -> Result<(), SparqlError>,
) -> Result<WrittenResults, SparqlError>
where
    SparqlError: From<E>,
{
    let mut written = WrittenResults::default();
    for row in rows {
        let row = row?;
        if written.rows == limit {
            written.truncated = true;
            break;
        }
        write(&row)?;
        written.rows += 1;
    }
    Ok(written)
}

fn results_format(f: ResultFormat) -> QueryResultsFormat {
    match f {
        ResultFormat::Json => QueryResultsFormat::Json,
        ResultFormat::Xml => QueryResultsFormat::Xml,
        ResultFormat::Csv => QueryResultsFormat::Csv,
        _ => QueryResultsFormat::Tsv,
    }
}

/// The table: a header, a rule, one line per row with cells in N-Triples form, and the
/// row count. Columns are as wide as their widest cell among the first [`TABLE_SAMPLE`]
/// rows.
fn write_table(
    solutions: QuerySolutionIter<'_>,
    limit: u64,
    out: &mut dyn Write,
) -> Result<WrittenResults, SparqlError> {
    let io = |e: std::io::Error| SparqlError::Results(e.to_string());
    let variables: Vec<Variable> = solutions.variables().to_vec();
    let cells = |values: &[Option<Term>]| -> Vec<String> {
        values
            .iter()
            .map(|t| t.as_ref().map(|t| t.to_string()).unwrap_or_default())
            .collect()
    };
    let mut written = WrittenResults::default();
    let mut solutions = solutions;
    let mut sample: Vec<Vec<String>> = Vec::new();
    while sample.len() < TABLE_SAMPLE && (sample.len() as u64) < limit {
        match solutions.next() {
            Some(s) => sample.push(cells(s?.values())),
            None => break,
        }
    }
    let header: Vec<String> = variables.iter().map(|v| v.to_string()).collect();
    let mut widths: Vec<usize> = header.iter().map(|h| h.chars().count()).collect();
    for r in &sample {
        for (w, c) in widths.iter_mut().zip(r) {
            *w = (*w).max(c.chars().count());
        }
    }
    let line = |out: &mut dyn Write, r: &[String]| -> std::io::Result<()> {
        let mut text = String::new();
        for (i, (c, w)) in r.iter().zip(&widths).enumerate() {
            if i > 0 {
                text.push_str(" | ");
            }
            text.push_str(c);
            text.extend(std::iter::repeat_n(
                ' ',
                w.saturating_sub(c.chars().count()),
            ));
        }
        writeln!(out, "{}", text.trim_end())
    };
    line(out, &header).map_err(io)?;
    let rule: Vec<String> = widths.iter().map(|w| "-".repeat(*w)).collect();
    writeln!(out, "{}", rule.join("-+-")).map_err(io)?;
    for r in &sample {
        line(out, r).map_err(io)?;
        written.rows += 1;
    }
    for s in solutions {
        let s = s?;
        if written.rows == limit {
            written.truncated = true;
            break;
        }
        line(out, &cells(s.values())).map_err(io)?;
        written.rows += 1;
    }
    writeln!(
        out,
        "({} row{}{})",
        written.rows,
        if written.rows == 1 { "" } else { "s" },
        if written.truncated { ", more left" } else { "" }
    )
    .map_err(io)?;
    Ok(written)
}
