//! SPARQL over a store: Oxigraph's evaluator (`spareval`) over the store's trees
//! ([`StoreQuads`]), with every group of patterns that holds a property path answered by
//! k2rpq's engines ([`group::evaluate_group`]) through a `SERVICE` the rewrite
//! ([`rewrite::wrap_paths_in_service`]) puts around it; exact SPARQL 1.1 property-path
//! semantics ([`semantics`]); result writers ([`results`], [`json`]).
//!
//! Terms become ids at the edges ([`TermDictionary`]); everything below (the RPQ engine)
//! sees only ids. See `docs/SEMANTICS.md` for the semantics and Oxigraph's deviations.

mod count;
pub mod dataset;
pub mod group;
pub mod json;
pub mod results;
pub mod rewrite;
pub mod semantics;
pub mod store;
pub mod watchdog;

pub use dataset::{read_quads, MemoryDataset, MemoryDictionary, PathDataset, TermDictionary};
pub use group::{IdRow, IdRows, PerQueryProvider, RelationProvider, RowBatch};
pub use results::{write_results, ResultFormat, UnknownFormat, WrittenResults};
pub use spareval::{
    CancellationToken, QueryEvaluationError, QueryResults, QuerySolution, QuerySolutionIter,
    QueryTripleIter,
};
pub use store::{StoreQuads, StoreTerm};

/// Errors of the SPARQL layer.
#[derive(Debug, thiserror::Error)]
pub enum SparqlError {
    /// The query does not parse (the message gives the line and column;
    /// [`SparqlError::excerpt`] shows where). The parser's message is this error's own,
    /// not a source, so that an error chain prints it once.
    #[error("invalid SPARQL: {}", tidy_syntax_message(&.0.to_string()))]
    Syntax(spargebra::SparqlSyntaxError),
    /// An update (`INSERT DATA`, `DELETE WHERE`, ...): stores are read-only.
    #[error("updates are not supported: the store is read-only")]
    Update,
    /// A base IRI that is not an absolute IRI.
    #[error("invalid base IRI <{iri}>: {reason}")]
    BaseIri {
        /// The IRI given.
        iri: String,
        /// Why it is not one.
        reason: String,
    },
    /// A construct the path service cannot evaluate, named here.
    #[error("unsupported: {0}")]
    Unsupported(String),
    /// Path evaluation failed.
    #[error(transparent)]
    Rpq(#[from] crate::rpq::RpqError),
    /// A data file that cannot be read or parsed.
    #[error("{file}{}: {reason}", line.map(|l| format!(" line {l}")).unwrap_or_default())]
    Load {
        /// The file.
        file: String,
        /// The line, when known (1-based).
        line: Option<u64>,
        /// What is wrong.
        reason: String,
    },
    /// Writing results failed.
    #[error("cannot write results: {0}")]
    Results(String),
    /// The store could not be read (a corrupt relation file).
    #[error(transparent)]
    Store(#[from] crate::store::StoreError),
    /// A term id the store's dictionary does not hold (a corrupt store).
    #[error("the store's dictionary holds no term of id {0}")]
    MissingTerm(u32),
    /// The query ran past its time limit.
    #[error("the query ran past its time limit")]
    Timeout,
    /// An evaluation that sent its rows in batches stopped without saying it had ended:
    /// the rows read are not the whole answer.
    #[error("the path evaluation stopped before its answer was complete")]
    Interrupted,
    /// Oxigraph's evaluator failed (a path service error arrives wrapped in it).
    #[error(transparent)]
    Evaluation(#[from] spareval::QueryEvaluationError),
}

/// `query` with at most `rows` solutions, as a `LIMIT` around the whole SELECT would
/// give: the path service then stops a lone path pattern's fixed point once it has found
/// them instead of computing the whole answer. Other query forms are returned unchanged.
///
/// ```
/// use k2rpq::sparql::{parse_query, with_row_limit};
/// let q = parse_query("SELECT * WHERE { ?x <http://e/p>+ ?y }", None).unwrap();
/// assert!(with_row_limit(&q, 10).to_string().ends_with("LIMIT 10"));
/// ```
pub fn with_row_limit(query: &spargebra::Query, rows: u64) -> spargebra::Query {
    let mut query = query.clone();
    if let spargebra::Query::Select { pattern, .. } = &mut query {
        let inner = std::mem::take(pattern);
        *pattern = spargebra::algebra::GraphPattern::Slice {
            inner: Box::new(inner),
            start: 0,
            // More rows than memory holds are no limit.
            length: Some(usize::try_from(rows).unwrap_or(usize::MAX)),
        };
    }
    query
}

/// Parses a SPARQL query, resolving relative IRIs against `base_iri` (if given). An
/// update is [`SparqlError::Update`]: stores are read-only.
///
/// ```
/// use k2rpq::sparql::{parse_query, SparqlError};
/// let q = parse_query("SELECT * WHERE { GRAPH <people.ttl> { ?s ?p ?o } }", Some("file:///data/q.rq")).unwrap();
/// assert!(q.to_string().contains("<file:///data/people.ttl>"));
/// assert!(matches!(parse_query("INSERT DATA { <a:s> <a:p> <a:o> }", None), Err(SparqlError::Update)));
/// ```
pub fn parse_query(text: &str, base_iri: Option<&str>) -> Result<spargebra::Query, SparqlError> {
    let parser = || -> Result<spargebra::SparqlParser, SparqlError> {
        let parser = spargebra::SparqlParser::new();
        match base_iri {
            None => Ok(parser),
            Some(iri) => parser.with_base_iri(iri).map_err(|e| SparqlError::BaseIri {
                iri: iri.to_owned(),
                reason: e.to_string(),
            }),
        }
    };
    match parse_in_order(parser()?, text) {
        Ok(q) => Ok(q),
        Err(_) if parser()?.parse_update(text).is_ok() => Err(SparqlError::Update),
        Err(e) => Err(SparqlError::Syntax(e)),
    }
}

/// `parser`'s query of `text`, where `SELECT *` lists its variables in order of
/// appearance (the parser's own order is by name).
pub(crate) fn parse_in_order(
    parser: spargebra::SparqlParser,
    text: &str,
) -> Result<spargebra::Query, spargebra::SparqlSyntaxError> {
    let mut q = parser.parse_query(text)?;
    if select_star(text) {
        columns_in_order_of_appearance(&mut q, text);
    }
    Ok(q)
}

/// The tokens of a query text that matter to [`select_star`] and
/// [`columns_in_order_of_appearance`]: words, variables and single characters, with
/// comments, IRIs and strings skipped.
fn tokens(text: &str) -> impl Iterator<Item = &str> {
    let mut rest = text;
    std::iter::from_fn(move || loop {
        let t = rest.trim_start();
        let c = t.chars().next()?;
        let skip_to = |t: &str, end: &str, from: usize| -> usize {
            t[from..]
                .find(end)
                .map_or(t.len(), |i| from + i + end.len())
        };
        let len = match c {
            '#' => {
                rest = &t[skip_to(t, "\n", 1)..];
                continue;
            }
            '<' if t[1..].starts_with(|c: char| !c.is_whitespace() && c != '=') => {
                rest = &t[skip_to(t, ">", 1)..];
                continue;
            }
            '"' | '\'' => {
                let quote = if t.starts_with("\"\"\"") || t.starts_with("'''") {
                    &t[..3]
                } else {
                    &t[..1]
                };
                // Escaped quotes do not end a string.
                let mut i = quote.len();
                while i < t.len() && !t[i..].starts_with(quote) {
                    i += if t[i..].starts_with('\\') { 2 } else { 1 };
                    while !t.is_char_boundary(i.min(t.len())) {
                        i += 1;
                    }
                }
                rest = &t[(i + quote.len()).min(t.len())..];
                continue;
            }
            '?' | '$' => {
                1 + t[1..]
                    .find(|c: char| !(c.is_alphanumeric() || c == '_'))
                    .unwrap_or(t.len() - 1)
            }
            c if c.is_alphanumeric() || c == '_' => t
                .find(|c: char| !(c.is_alphanumeric() || c == '_' || c == ':' || c == '-'))
                .unwrap_or(t.len()),
            c => c.len_utf8(),
        };
        let (token, after) = t.split_at(len);
        rest = after;
        return Some(token);
    })
}

/// Whether the query's own (outermost) SELECT is `SELECT *` (with DISTINCT or REDUCED).
fn select_star(text: &str) -> bool {
    let mut t = tokens(text).skip_while(|t| !t.eq_ignore_ascii_case("select"));
    t.next();
    let next = t.next();
    let next = match next {
        Some(w) if w.eq_ignore_ascii_case("distinct") || w.eq_ignore_ascii_case("reduced") => {
            t.next()
        }
        other => other,
    };
    next == Some("*")
}

/// Orders the columns of a `SELECT *` query as its variables first appear in the text
/// (the parser sorts them by name).
fn columns_in_order_of_appearance(query: &mut spargebra::Query, text: &str) {
    use spargebra::algebra::GraphPattern;
    let spargebra::Query::Select { pattern, .. } = query else {
        return;
    };
    let mut p = pattern;
    let variables = loop {
        match p {
            GraphPattern::Slice { inner, .. }
            | GraphPattern::Distinct { inner }
            | GraphPattern::Reduced { inner } => p = inner,
            GraphPattern::Project { variables, .. } => break variables,
            _ => return,
        }
    };
    let mut order: Vec<&str> = Vec::new();
    for t in tokens(text) {
        if let Some(name) = t.strip_prefix(['?', '$']) {
            if !order.contains(&name) {
                order.push(name);
            }
        }
    }
    let rank = |v: &oxrdf::Variable| {
        order
            .iter()
            .position(|n| *n == v.as_str())
            .unwrap_or(usize::MAX)
    };
    variables.sort_by_key(|v| rank(v));
}

impl From<spargebra::SparqlSyntaxError> for SparqlError {
    fn from(e: spargebra::SparqlSyntaxError) -> Self {
        SparqlError::Syntax(e)
    }
}

/// The parser's message without the character classes of its expected set (`['0'..='9']`,
/// a page of Unicode ranges for a name), which bury the tokens it names; where the set
/// holds a reason (`Prefix not found`), the reason alone. "Any character" (`[_]`: the
/// query ended early) reads "more input".
pub(crate) fn tidy_syntax_message(message: &str) -> String {
    let Some((head, list)) = message
        .split_once("expected one of ")
        .or_else(|| message.split_once("expected "))
    else {
        return message.to_owned();
    };
    // Items are separated by ", " outside brackets and quotes: tokens are "double-quoted",
    // the characters of a class 'single-quoted', both with backslash escapes.
    let (mut items, mut item) = (Vec::new(), String::new());
    let (mut depth, mut quote, mut escaped) = (0i32, None, false);
    for c in list.chars() {
        match (quote, c) {
            _ if escaped => escaped = false,
            (Some(_), '\\') => escaped = true,
            (Some(q), _) if c == q => quote = None,
            (Some(_), _) => {}
            (None, '"') => quote = Some('"'),
            (None, '\'') if depth > 0 => quote = Some('\''),
            (None, '[') => depth += 1,
            (None, ']') => depth -= 1,
            (None, ',') if depth == 0 => {
                items.push(std::mem::take(&mut item).trim().to_owned());
                continue;
            }
            _ => {}
        }
        item.push(c);
    }
    items.push(item.trim().to_owned());
    let kept: Vec<&str> = items
        .iter()
        .map(|i| if i == "[_]" { "more input" } else { i.as_str() })
        .filter(|i| !i.starts_with('['))
        .collect();
    // The grammar's own checks (`Prefix not found`) arrive as expected items: a reason,
    // where there is one, says more than the tokens beside it.
    let reasons: Vec<&str> = kept
        .iter()
        .copied()
        .filter(|i| i.contains(' ') && !i.starts_with('"') && *i != "more input")
        .collect();
    if !reasons.is_empty() {
        return format!("{head}{}", reasons.join("; "));
    }
    match kept.as_slice() {
        [] => message.to_owned(),
        [one] => format!("{head}expected {one}"),
        many => format!("{head}expected one of {}", many.join(", ")),
    }
}

impl SparqlError {
    /// For a syntax error in `query`, the line the parser stopped on with a caret under
    /// its column; `None` for other errors, or when the message names no position.
    ///
    /// ```
    /// use k2rpq::sparql::SparqlError;
    /// let text = "SELECT ?x\nWHERE { ?x <http://p>+ }";
    /// let e: SparqlError = spargebra::SparqlParser::new().parse_query(text).unwrap_err().into();
    /// assert_eq!(
    ///     e.excerpt(text).unwrap(),
    ///     "line 2: WHERE { ?x <http://p>+ }\n                               ^"
    /// );
    /// ```
    pub fn excerpt(&self, query: &str) -> Option<String> {
        let SparqlError::Syntax(e) = self else {
            return None;
        };
        // The parser's message starts `error at LINE:COLUMN:` (1-based, columns in chars).
        let message = e.to_string();
        let (line, column) = message
            .strip_prefix("error at ")?
            .split_once(':')
            .and_then(|(l, rest)| Some((l, rest.split_once(':')?.0)))?;
        let (line, column): (usize, usize) = (line.parse().ok()?, column.parse().ok()?);
        let text = query.lines().nth(line.checked_sub(1)?)?;
        let label = format!("line {line}: ");
        let pad = label.chars().count() + column.checked_sub(1)?;
        Some(format!("{label}{text}\n{:pad$}^", ""))
    }
}

#[cfg(test)]
mod tests {
    use super::tidy_syntax_message;

    #[test]
    fn syntax_messages_keep_tokens_and_reasons() {
        assert_eq!(
            tidy_syntax_message(
                "error at 1:28: expected one of Prefix not found, ['%'], ['A' ..= 'Z' | 'a'\n| 'b'], \"\\\",[\", \"(\""
            ),
            "error at 1:28: Prefix not found"
        );
        assert_eq!(
            tidy_syntax_message("error at 1:2: expected one of \"\\\",[\", ['%'], \"(\""),
            "error at 1:2: expected one of \"\\\",[\", \"(\""
        );
        assert_eq!(
            tidy_syntax_message("error at 1:1: expected [_]"),
            "error at 1:1: expected more input"
        );
        // Brackets and commas quoted inside a class do not end it.
        assert_eq!(
            tidy_syntax_message("error at 2:3: expected one of [']' | ',' | '\\''], \"}\""),
            "error at 2:3: expected \"}\""
        );
        assert_eq!(
            tidy_syntax_message("error at 1:1: expected ['x']"),
            "error at 1:1: expected ['x']"
        );
        assert_eq!(tidy_syntax_message("no position"), "no position");
    }
}
