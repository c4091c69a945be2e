//! SPARQL front end: spargebra algebra, exact SPARQL 1.1 property-path semantics, a
//! standalone evaluator for a query subset, result formats, and the algebra rewrites the
//! Oxigraph embedding ([`crate::oxigraph`]) uses.
//!
//! Terms become ids at the edges ([`TermDictionary`]); everything below (the RPQ engine)
//! sees only ids. See `docs/SEMANTICS.md` for the semantics and Oxigraph's deviations.

pub mod dataset;
pub mod query;
pub mod results;
pub mod rewrite;
pub mod semantics;

pub use dataset::{read_quads, MemoryDataset, MemoryDictionary, PathDataset, TermDictionary};
pub use query::{
    evaluate_pattern, evaluate_pattern_with, evaluate_query, evaluate_query_with, query,
    PerQueryProvider, QueryAnswer, RelationProvider,
};
pub use results::{write_answer, write_triples, ResultFormat};

/// Errors of the SPARQL layer.
#[derive(Debug, thiserror::Error)]
pub enum SparqlError {
    /// The query does not parse (the message gives the line and column;
    /// [`SparqlError::excerpt`] shows where). The parser's message is this error's own,
    /// not a source, so that an error chain prints it once.
    #[error("invalid SPARQL: {}", tidy_syntax_message(&.0.to_string()))]
    Syntax(spargebra::SparqlSyntaxError),
    /// The query uses a construct outside the supported subset, named here.
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
