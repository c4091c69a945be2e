//! SPARQL 1.1 Query Results JSON for SELECT answers, written straight into the output
//! buffer.
//!
//! sparesults writes the same document through an event writer that escapes strings one
//! character per `write_all` call: 46k rows of a CoDEx-M closure took about 200 ms as
//! JSON against 2 ms as TSV, the largest cost of a served path query. This writer copies
//! the runs of characters that need no escape in one call, and writes exactly what
//! sparesults writes (same keys, order and escapes), which the tests check.

use std::io::{self, Write};

use oxrdf::vocab::xsd;
use oxrdf::{TermRef, Variable, VariableRef};

/// Writes one JSON solutions document: the head on creation, a row per
/// [`JsonSolutionsWriter::serialize`], the closing brackets on [`JsonSolutionsWriter::finish`].
///
/// ```
/// use k2rpq::sparql::json::JsonSolutionsWriter;
/// use oxrdf::{NamedNodeRef, Variable};
/// let x = Variable::new_unchecked("x");
/// let mut w = JsonSolutionsWriter::start(Vec::new(), std::slice::from_ref(&x))?;
/// w.serialize([(x.as_ref(), NamedNodeRef::new_unchecked("http://e/a").into())])?;
/// let json = String::from_utf8(w.finish()?).unwrap();
/// assert_eq!(
///     json,
///     r#"{"head":{"vars":["x"]},"results":{"bindings":[{"x":{"type":"uri","value":"http://e/a"}}]}}"#
/// );
/// # Ok::<_, std::io::Error>(())
/// ```
pub struct JsonSolutionsWriter<W: Write> {
    out: W,
    first: bool,
}

impl<W: Write> JsonSolutionsWriter<W> {
    /// Starts the document with the head naming `variables`.
    pub fn start(mut out: W, variables: &[Variable]) -> io::Result<Self> {
        out.write_all(b"{\"head\":{\"vars\":[")?;
        for (i, v) in variables.iter().enumerate() {
            if i > 0 {
                out.write_all(b",")?;
            }
            write_string(&mut out, v.as_str())?;
        }
        out.write_all(b"]},\"results\":{\"bindings\":[")?;
        Ok(JsonSolutionsWriter { out, first: true })
    }

    /// Writes one solution: its bound variables and their terms.
    pub fn serialize<'a>(
        &mut self,
        solution: impl IntoIterator<Item = (VariableRef<'a>, TermRef<'a>)>,
    ) -> io::Result<()> {
        let out = &mut self.out;
        out.write_all(if self.first { b"{" } else { b",{" })?;
        self.first = false;
        for (i, (variable, term)) in solution.into_iter().enumerate() {
            if i > 0 {
                out.write_all(b",")?;
            }
            write_string(out, variable.as_str())?;
            out.write_all(b":")?;
            write_term(out, term)?;
        }
        out.write_all(b"}")
    }

    /// Writes one solution already encoded: for each bound variable, its key (from
    /// [`encoded_key`]) and its term's value (from [`write_term`]). The same bytes as
    /// [`JsonSolutionsWriter::serialize`], for a writer that encodes each distinct term
    /// of an answer once.
    pub fn serialize_encoded<'a>(
        &mut self,
        solution: impl IntoIterator<Item = (&'a [u8], &'a [u8])>,
    ) -> io::Result<()> {
        let out = &mut self.out;
        out.write_all(if self.first { b"{" } else { b",{" })?;
        self.first = false;
        for (i, (key, value)) in solution.into_iter().enumerate() {
            if i > 0 {
                out.write_all(b",")?;
            }
            out.write_all(key)?;
            out.write_all(value)?;
        }
        out.write_all(b"}")
    }

    /// Closes the document.
    pub fn finish(mut self) -> io::Result<W> {
        self.out.write_all(b"]}}")?;
        Ok(self.out)
    }
}

/// A variable's key in a solution, `"name":`, for [`JsonSolutionsWriter::serialize_encoded`].
pub fn encoded_key(variable: &Variable) -> Vec<u8> {
    let mut key = Vec::with_capacity(variable.as_str().len() + 3);
    write_string(&mut key, variable.as_str()).expect("writing to memory");
    key.push(b':');
    key
}

/// A term's value in a solution (`{"type":...}`), as [`JsonSolutionsWriter::serialize`]
/// writes it.
pub fn write_term(out: &mut impl Write, term: TermRef<'_>) -> io::Result<()> {
    match term {
        TermRef::NamedNode(n) => {
            out.write_all(b"{\"type\":\"uri\",\"value\":")?;
            write_string(out, n.as_str())?;
        }
        TermRef::BlankNode(b) => {
            out.write_all(b"{\"type\":\"bnode\",\"value\":")?;
            write_string(out, b.as_str())?;
        }
        TermRef::Literal(l) => {
            out.write_all(b"{\"type\":\"literal\",\"value\":")?;
            write_string(out, l.value())?;
            if let Some(language) = l.language() {
                out.write_all(b",\"xml:lang\":")?;
                write_string(out, language)?;
            } else if l.datatype() != xsd::STRING {
                out.write_all(b",\"datatype\":")?;
                write_string(out, l.datatype().as_str())?;
            }
        }
    }
    out.write_all(b"}")
}

/// `s` as a JSON string, escaped as sparesults escapes it: `\\`, `\"`, the short forms of
/// backspace, form feed, newline, return and tab, `\u00XX` for other control characters.
fn write_string(out: &mut impl Write, s: &str) -> io::Result<()> {
    out.write_all(b"\"")?;
    let bytes = s.as_bytes();
    let mut start = 0;
    for (i, &b) in bytes.iter().enumerate() {
        let escape: &[u8] = match b {
            b'\\' => b"\\\\",
            b'"' => b"\\\"",
            0x08 => b"\\b",
            0x0C => b"\\f",
            b'\n' => b"\\n",
            b'\r' => b"\\r",
            b'\t' => b"\\t",
            0..=0x1F => b"",
            _ => continue,
        };
        out.write_all(&bytes[start..i])?;
        if escape.is_empty() {
            write!(out, "\\u{b:04x}")?;
        } else {
            out.write_all(escape)?;
        }
        start = i + 1;
    }
    out.write_all(&bytes[start..])?;
    out.write_all(b"\"")
}

#[cfg(test)]
mod tests {
    use super::*;
    use oxrdf::{BlankNode, Literal, NamedNode, Term};
    use sparesults::{QueryResultsFormat, QueryResultsSerializer};

    /// Terms of every kind, with every character JSON escapes.
    fn terms() -> Vec<Term> {
        let awkward = "a\"b\\c\n\r\t\u{8}\u{c}\u{1}\u{1f} é 日本 \u{7f} end";
        vec![
            NamedNode::new_unchecked("http://example.org/a").into(),
            NamedNode::new_unchecked("http://example.org/é\"q").into(),
            BlankNode::new_unchecked("b0").into(),
            Literal::new_simple_literal("").into(),
            Literal::new_simple_literal(awkward).into(),
            Literal::new_language_tagged_literal_unchecked(awkward, "en-gb").into(),
            Literal::new_typed_literal("42", xsd::INTEGER).into(),
            Literal::new_typed_literal("x\"y", NamedNode::new_unchecked("http://e/\"t")).into(),
        ]
    }

    /// Every term in every position, with unbound cells, gives sparesults' bytes.
    #[test]
    fn the_document_is_sparesults_own() {
        let variables = vec![Variable::new_unchecked("x"), Variable::new_unchecked("y\"")];
        let terms = terms();
        let mut rows: Vec<Vec<Option<Term>>> = vec![vec![None, None]];
        for a in &terms {
            for b in &terms {
                rows.push(vec![Some(a.clone()), Some(b.clone())]);
            }
            rows.push(vec![None, Some(a.clone())]);
        }
        for rows in [&rows[..0], &rows[..1], &rows[..]] {
            let cells = |row: &[Option<Term>]| {
                variables
                    .iter()
                    .zip(row.to_vec())
                    .filter_map(|(v, t)| Some((v.clone(), t?)))
                    .collect::<Vec<_>>()
            };
            let mut theirs = QueryResultsSerializer::from_format(QueryResultsFormat::Json)
                .serialize_solutions_to_writer(Vec::new(), variables.clone())
                .unwrap();
            let mut ours = JsonSolutionsWriter::start(Vec::new(), &variables).unwrap();
            for row in rows {
                let cells = cells(row);
                theirs
                    .serialize(cells.iter().map(|(v, t)| (v.as_ref(), t.as_ref())))
                    .unwrap();
                ours.serialize(cells.iter().map(|(v, t)| (v.as_ref(), t.as_ref())))
                    .unwrap();
            }
            let (theirs, ours) = (theirs.finish().unwrap(), ours.finish().unwrap());
            assert_eq!(
                String::from_utf8(ours).unwrap(),
                String::from_utf8(theirs).unwrap()
            );
        }
    }
}
