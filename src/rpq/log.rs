//! The text form of RPQ query logs: one query per line, `S REGEX O`.
//!
//! `S` and `O` are `?var`, `<IRI>` or a prefixed name (`wd:Q5`); `REGEX` uses IRIs,
//! prefixed names, `a` for `rdf:type`, `^`, `/`, `|`, `*`, `+`, `?`, `!(..)` and
//! parentheses with SPARQL 1.1 precedence (`|` < `/` < `^` < postfix). A line may start
//! with an `id,` prefix, and with `PREFIX p: <IRI>` declarations as in SPARQL.

use std::collections::HashMap;

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

/// Prefix declarations for the prefixed names (`wdt:P31`) of log lines.
///
/// ```
/// use k2rpq::rpq::{parse_log_line_with, LogEndpoint, Prefixes};
/// let mut prefixes = Prefixes::default();
/// prefixes.insert("wd", "http://www.wikidata.org/entity/").unwrap();
/// assert!(prefixes.declare("PREFIX wdt: <http://www.wikidata.org/prop/direct/>").unwrap());
/// let q = parse_log_line_with("wd:Q183 wdt:P530+ ?y", &prefixes).unwrap();
/// assert_eq!(q.subject, LogEndpoint::Iri("http://www.wikidata.org/entity/Q183".into()));
/// assert_eq!(q.path.to_string(), "(<http://www.wikidata.org/prop/direct/P530>)+");
/// ```
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Prefixes(HashMap<String, String>);

impl Prefixes {
    /// Declares `prefix:` (letters, digits, `_`, `-`, `.`; may be empty) for `iri`.
    pub fn insert(&mut self, prefix: &str, iri: &str) -> Result<(), RpqError> {
        let err = |reason: String| RpqError::Parse {
            input: format!("{prefix}: <{iri}>"),
            position: 0,
            reason,
        };
        if !prefix
            .chars()
            .all(|c| c.is_alphanumeric() || "_-.".contains(c))
            || prefix.starts_with(|c: char| !c.is_alphabetic())
        {
            return Err(err(format!("bad prefix name `{prefix}`")));
        }
        NamedNode::new(iri).map_err(|e| err(format!("bad IRI <{iri}>: {e}")))?;
        self.0.insert(prefix.to_owned(), iri.to_owned());
        Ok(())
    }

    /// Reads a `PREFIX p: <IRI>` declaration (SPARQL's; Turtle's `@prefix p: <IRI> .`
    /// too) into these prefixes: `Ok(false)` when `line` is not one.
    pub fn declare(&mut self, line: &str) -> Result<bool, RpqError> {
        match split_declaration(line)? {
            Some((prefix, iri, _)) => self.insert(prefix, iri).map(|()| true),
            None => Ok(false),
        }
    }

    /// The IRI of `prefix:local`.
    fn expand(&self, prefix: &str, local: &str) -> Option<String> {
        self.0.get(prefix).map(|iri| format!("{iri}{local}"))
    }
}

/// A leading `PREFIX p: <IRI>` (or `@prefix p: <IRI> .`) declaration of `text`: the
/// prefix, the IRI and the rest of the text; `None` when `text` does not start with one.
fn split_declaration(text: &str) -> Result<Option<(&str, &str, &str)>, RpqError> {
    let t = text.trim_start();
    let keyword = ["PREFIX", "@prefix"].into_iter().find(|k| {
        t.len() > k.len()
            && t[..k.len()].eq_ignore_ascii_case(k)
            && t[k.len()..].starts_with(char::is_whitespace)
    });
    let Some(keyword) = keyword else {
        return Ok(None);
    };
    let at = text.len() - t.len();
    let err = |reason: &str| RpqError::Parse {
        input: text.to_owned(),
        position: at,
        reason: reason.to_owned(),
    };
    let rest = t[keyword.len()..].trim_start();
    let (prefix, rest) = rest
        .split_once(':')
        .ok_or_else(|| err("expected `PREFIX p: <IRI>`"))?;
    let rest = rest.trim_start();
    let iri_end = rest
        .strip_prefix('<')
        .and_then(|r| r.find('>'))
        .ok_or_else(|| err("expected `PREFIX p: <IRI>`"))?;
    let iri = &rest[1..=iri_end];
    let mut rest = &rest[iri_end + 2..];
    if keyword == "@prefix" {
        rest = rest.trim_start().strip_prefix('.').unwrap_or(rest);
    }
    Ok(Some((prefix.trim(), iri, rest)))
}

/// Parses one `S REGEX O` line: `S` and `O` are `?var` or `<IRI>`; `REGEX` uses `<IRI>`
/// (or `a`), `^`, `/`, `|`, `*`, `+`, `?`, `!(..)` and parentheses with SPARQL 1.1
/// precedence; an optional `id,` prefix names the query. Prefixed names need the
/// prefixes of [`parse_log_line_with`] or `PREFIX` declarations at the line's start.
///
/// ```
/// use k2rpq::rpq::{parse_log_line, LogEndpoint};
/// let q = parse_log_line("7,?x <http://e/p>/(<http://e/q>)* <http://e/c>").unwrap();
/// assert_eq!(q.id.as_deref(), Some("7"));
/// assert_eq!(q.subject, LogEndpoint::Var("x".into()));
/// assert_eq!(q.object, LogEndpoint::Iri("http://e/c".into()));
/// assert_eq!(q.path.to_string(), "(<http://e/p> / (<http://e/q>)*)");
/// let q = parse_log_line("PREFIX e: <http://e/> ?x e:p+ e:c").unwrap();
/// assert_eq!(q.path.to_string(), "(<http://e/p>)+");
/// ```
pub fn parse_log_line(line: &str) -> Result<LogQuery, RpqError> {
    parse_log_line_with(line, &Prefixes::default())
}

/// [`parse_log_line`] with `prefixes` declared (the line's own `PREFIX` declarations are
/// added to them for this line).
pub fn parse_log_line_with(line: &str, prefixes: &Prefixes) -> Result<LogQuery, RpqError> {
    let err = |position: usize, reason: String| RpqError::Parse {
        input: line.to_string(),
        position,
        reason,
    };
    let trimmed = line.trim_end();
    let mut own = None;
    let mut body = trimmed;
    while let Some((prefix, iri, rest)) = split_declaration(body)? {
        own.get_or_insert_with(|| prefixes.clone())
            .insert(prefix, iri)
            .map_err(|e| err(trimmed.len() - body.len(), e.to_string()))?;
        body = rest;
    }
    let prefixes = own.as_ref().unwrap_or(prefixes);
    let endpoint = |tok: &str| endpoint(tok, prefixes);
    let mut start = trimmed.len() - body.trim_start().len();
    let mut id = None;
    // An id prefix ends at the first comma, before the subject (which starts with ? or <).
    let first = &trimmed[start..];
    let first_token = first.split(char::is_whitespace).next().unwrap_or("");
    if !first.starts_with(['?', '<']) && !is_prefixed_name(first_token) {
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
        prefixes,
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

fn endpoint(tok: &str, prefixes: &Prefixes) -> Result<LogEndpoint, String> {
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
    if is_prefixed_name(tok) {
        return Ok(LogEndpoint::Iri(expand(tok, prefixes)?.into_string()));
    }
    Err(format!(
        "expected ?var, <IRI> or a prefixed name, found `{tok}`"
    ))
}

/// Whether `tok` has the shape of a prefixed name: `prefix:local`, the prefix letters,
/// digits, `_`, `-` or `.` starting with a letter (or empty), the local part letters,
/// digits, `_`, `-`, `.` or `:` not ending in `.`.
fn is_prefixed_name(tok: &str) -> bool {
    let Some((prefix, local)) = tok.split_once(':') else {
        return false;
    };
    let word = |c: char| c.is_alphanumeric() || "_-.".contains(c);
    (prefix.is_empty() || prefix.starts_with(char::is_alphabetic) && prefix.chars().all(word))
        && local.chars().all(|c| word(c) || c == ':')
        && !local.ends_with('.')
}

/// The IRI of the prefixed name `tok`.
fn expand(tok: &str, prefixes: &Prefixes) -> Result<NamedNode, String> {
    let (prefix, local) = tok.split_once(':').expect("a prefixed name");
    let iri = prefixes.expand(prefix, local).ok_or_else(|| {
        format!("undeclared prefix `{prefix}:` (declare it with PREFIX {prefix}: <IRI>)")
    })?;
    NamedNode::new(&iri).map_err(|e| format!("bad IRI <{iri}> from `{tok}`: {e}"))
}

/// Recursive descent over the regex text; errors are (byte position, reason).
struct Parser<'a> {
    s: &'a str,
    pos: usize,
    prefixes: &'a Prefixes,
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
            // A prefixed name runs to the next character that is no part of one.
            let len = rest
                .find(|c: char| !(c.is_alphanumeric() || "_-.:".contains(c)))
                .unwrap_or(rest.len());
            let tok = rest[..len].trim_end_matches('.');
            if !is_prefixed_name(tok) {
                return Err((self.pos, "expected <IRI> or a prefixed name".into()));
            }
            let n = expand(tok, self.prefixes).map_err(|e| (self.pos, e))?;
            self.pos += tok.len();
            return Ok(n);
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
