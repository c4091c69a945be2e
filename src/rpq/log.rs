//! The text form of RPQ query logs: one query per line, `S REGEX O`.
//!
//! `S` and `O` are `?var` or `<IRI>`; `REGEX` uses `<IRI>` (or `a` for `rdf:type`), `^`,
//! `/`, `|`, `*`, `+`, `?`, `!(..)` and parentheses with SPARQL 1.1 precedence
//! (`|` < `/` < `^` < postfix). A line may start with an `id,` prefix.

use spargebra::algebra::PropertyPathExpression as Expr;
use spargebra::term::NamedNode;

use super::RpqError;

const RDF_TYPE: &str = "http://www.w3.org/1999/02/22-rdf-syntax-ns#type";

/// One end of a logged query.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum LogEndpoint {
    /// A variable, by name (without `?`).
    Var(String),
    /// An IRI (without `<>`).
    Iri(String),
}

/// One parsed log line. The path keeps its IRIs: resolve them against a store with
/// [`parse_path_expr`](super::parse_path_expr).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LogQuery {
    /// The `id,` prefix, if any.
    pub id: Option<String>,
    /// The start.
    pub subject: LogEndpoint,
    /// The path, as spargebra's algebra.
    pub path: Expr,
    /// The end.
    pub object: LogEndpoint,
}

/// Parses one `S REGEX O` line: `S` and `O` are `?var` or `<IRI>`; `REGEX` uses `<IRI>`
/// (or `a`), `^`, `/`, `|`, `*`, `+`, `?`, `!(..)` and parentheses with SPARQL 1.1
/// precedence; an optional `id,` prefix names the query.
///
/// ```
/// use k2rpq::rpq::{parse_log_line, LogEndpoint};
/// let q = parse_log_line("7,?x <http://e/p>/(<http://e/q>)* <http://e/c>").unwrap();
/// assert_eq!(q.id.as_deref(), Some("7"));
/// assert_eq!(q.subject, LogEndpoint::Var("x".into()));
/// assert_eq!(q.object, LogEndpoint::Iri("http://e/c".into()));
/// assert_eq!(q.path.to_string(), "(<http://e/p> / (<http://e/q>)*)");
/// ```
pub fn parse_log_line(line: &str) -> Result<LogQuery, RpqError> {
    let err = |position: usize, reason: String| RpqError::Parse {
        input: line.to_string(),
        position,
        reason,
    };
    let trimmed = line.trim_end();
    let mut start = trimmed.len() - trimmed.trim_start().len();
    let mut id = None;
    // An id prefix ends at the first comma, before the subject (which starts with ? or <).
    if !trimmed[start..].starts_with(['?', '<']) {
        match trimmed[start..].find(',') {
            Some(k) => {
                id = Some(trimmed[start..start + k].trim().to_string());
                start += k + 1;
                start += trimmed[start..].len() - trimmed[start..].trim_start().len();
            }
            None => return Err(err(start, "expected ?var or <IRI> as the subject".into())),
        }
    }
    let rest = &trimmed[start..];
    let subj_len = rest
        .find(char::is_whitespace)
        .ok_or_else(|| err(start, "expected `S REGEX O`".into()))?;
    let subject = endpoint(&rest[..subj_len]).map_err(|r| err(start, r))?;
    let obj_start = trimmed
        .rfind(char::is_whitespace)
        .map(|k| k + 1)
        .filter(|&k| k > start + subj_len)
        .ok_or_else(|| err(start + subj_len, "expected `S REGEX O`".into()))?;
    let object = endpoint(&trimmed[obj_start..]).map_err(|r| err(obj_start, r))?;
    let regex_start = start + subj_len;
    let mut p = Parser {
        s: &trimmed[..obj_start],
        pos: regex_start,
    };
    let path = p.alternative().map_err(|(k, r)| err(k, r))?;
    p.skip_ws();
    if p.pos < p.s.len() {
        return Err(err(p.pos, "unexpected text after the path".into()));
    }
    Ok(LogQuery {
        id,
        subject,
        path,
        object,
    })
}

fn endpoint(tok: &str) -> Result<LogEndpoint, String> {
    if let Some(v) = tok.strip_prefix('?').or_else(|| tok.strip_prefix('$')) {
        if !v.is_empty() && v.chars().all(|c| c.is_alphanumeric() || c == '_') {
            return Ok(LogEndpoint::Var(v.to_string()));
        }
        return Err(format!("bad variable name `{tok}`"));
    }
    if let Some(iri) = tok.strip_prefix('<').and_then(|t| t.strip_suffix('>')) {
        NamedNode::new(iri).map_err(|e| format!("bad IRI <{iri}>: {e}"))?;
        return Ok(LogEndpoint::Iri(iri.to_string()));
    }
    Err(format!("expected ?var or <IRI>, found `{tok}`"))
}

/// Recursive descent over the regex text; errors are (byte position, reason).
struct Parser<'a> {
    s: &'a str,
    pos: usize,
}

type PResult<T> = Result<T, (usize, String)>;

impl Parser<'_> {
    fn skip_ws(&mut self) {
        while self.s[self.pos..].starts_with(char::is_whitespace) {
            self.pos += self.s[self.pos..].chars().next().map_or(1, char::len_utf8);
        }
    }

    fn eat(&mut self, c: char) -> bool {
        self.skip_ws();
        if self.s[self.pos..].starts_with(c) {
            self.pos += c.len_utf8();
            true
        } else {
            false
        }
    }

    fn alternative(&mut self) -> PResult<Expr> {
        let mut e = self.sequence()?;
        while self.eat('|') {
            e = Expr::Alternative(Box::new(e), Box::new(self.sequence()?));
        }
        Ok(e)
    }

    fn sequence(&mut self) -> PResult<Expr> {
        let mut e = self.element()?;
        while self.eat('/') {
            e = Expr::Sequence(Box::new(e), Box::new(self.element()?));
        }
        Ok(e)
    }

    fn element(&mut self) -> PResult<Expr> {
        if self.eat('^') {
            return Ok(Expr::Reverse(Box::new(self.element()?)));
        }
        let mut e = self.primary()?;
        loop {
            e = if self.eat('*') {
                Expr::ZeroOrMore(Box::new(e))
            } else if self.eat('+') {
                Expr::OneOrMore(Box::new(e))
            } else if self.eat('?') {
                Expr::ZeroOrOne(Box::new(e))
            } else {
                return Ok(e);
            };
        }
    }

    fn primary(&mut self) -> PResult<Expr> {
        self.skip_ws();
        if self.eat('(') {
            let e = self.alternative()?;
            if !self.eat(')') {
                return Err((self.pos, "expected `)`".into()));
            }
            return Ok(e);
        }
        if self.eat('!') {
            let mut fwd = Vec::new();
            let mut inv = Vec::new();
            if self.eat('(') {
                loop {
                    let inverse = self.eat('^');
                    let n = self.iri()?;
                    if inverse { &mut inv } else { &mut fwd }.push(n);
                    if self.eat(')') {
                        break;
                    }
                    if !self.eat('|') {
                        return Err((self.pos, "expected `|` or `)` in a negated set".into()));
                    }
                }
            } else {
                let inverse = self.eat('^');
                let n = self.iri()?;
                if inverse { &mut inv } else { &mut fwd }.push(n);
            }
            // The same shape spargebra's SPARQL parser produces.
            let f = Expr::NegatedPropertySet(fwd.clone());
            let i = Expr::Reverse(Box::new(Expr::NegatedPropertySet(inv.clone())));
            return Ok(match (fwd.is_empty(), inv.is_empty()) {
                (false, true) => f,
                (true, false) => i,
                _ => Expr::Alternative(Box::new(f), Box::new(i)),
            });
        }
        Ok(Expr::NamedNode(self.iri()?))
    }

    fn iri(&mut self) -> PResult<NamedNode> {
        self.skip_ws();
        let rest = &self.s[self.pos..];
        if rest.starts_with('a') && !rest[1..].starts_with(|c: char| c.is_alphanumeric()) {
            self.pos += 1;
            return Ok(NamedNode::new_unchecked(RDF_TYPE));
        }
        if !rest.starts_with('<') {
            return Err((self.pos, "expected <IRI>".into()));
        }
        let end = rest
            .find('>')
            .ok_or_else(|| (self.pos, "unterminated <IRI>".to_string()))?;
        let n = NamedNode::new(&rest[1..end])
            .map_err(|e| (self.pos, format!("bad IRI {}: {e}", &rest[..=end])))?;
        self.pos += end + 1;
        Ok(n)
    }
}
