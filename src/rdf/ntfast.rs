//! A borrowed scanner for the plain shape of N-Triples and N-Quads lines, in front of oxttl.
//!
//! oxttl stays the parser of record: this scanner only recognises lines made of
//! escape-free IRIs, ASCII blank-node labels and escape-free double-quoted literals
//! (optionally `@lang` or `^^<datatype>`), separated by spaces or tabs and ended by `.`.
//! Anything else — an escape, a comment, a `.` next to a blank-node label, RDF 1.2 syntax,
//! a stray byte — makes [`scan_line`] return `None` and the caller hands that line to
//! oxttl. The scanner does not validate IRIs, UTF-8 or language tags either: like oxttl's
//! lenient mode, it leaves that to the distinct-term check of the chunk
//! ([`super::terms::is_strict_key`]), after which a failing chunk is re-parsed by oxttl's
//! strict parser for the error report. So an IRI is whatever lies between `<` and the next
//! `>`: a space or a stray `<` inside it makes a key that fails that check. A line that
//! `scan_line` accepts holds no `\\`, so escapes (surrogate pairs included) always go to
//! oxttl.
//!
//! Why: with oxttl, every term of every statement becomes an owned `String` (allocation,
//! copy, free) on its way through the lexer and the `Quad`; at ~100 bytes a line that was
//! most of the ~0.5 µs a statement spent in parsing. Here a line is one pass over its bytes
//! and the terms are slices of the input, copied once into the batch's key arena.
//!
//! Contract, checked by the differential tests below against oxttl's strict parser: when
//! `scan_line` returns a statement whose keys all pass `is_strict_key`, oxttl parses the
//! line to a statement with exactly those keys; when it returns [`Line::Empty`], oxttl
//! reads no statement and no error from the line.

use super::terms;

/// One term of a line, borrowed from the input.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RawTerm<'a> {
    /// `<iri>`: the bytes between the angle brackets.
    Iri(&'a [u8]),
    /// `_:label`: the label.
    Blank(&'a [u8]),
    /// `"value"` (or `"value"^^xsd:string`): the value.
    Simple(&'a [u8]),
    /// `"value"@tag`: the tag as written (the key lower-cases it, as oxttl does) and the value.
    Lang(&'a [u8], &'a [u8]),
    /// `"value"^^<datatype>`: the datatype IRI and the value.
    Typed(&'a [u8], &'a [u8]),
}

impl RawTerm<'_> {
    /// Appends the key ([`terms`]) of the term oxttl would build from this text.
    pub fn encode_into(&self, out: &mut Vec<u8>) {
        match *self {
            RawTerm::Iri(iri) => {
                out.push(terms::IRI);
                out.extend_from_slice(iri);
            }
            RawTerm::Blank(label) => {
                out.push(terms::BLANK);
                out.extend_from_slice(label);
            }
            RawTerm::Simple(value) => {
                out.push(terms::SIMPLE);
                out.extend_from_slice(value);
            }
            RawTerm::Lang(tag, value) => {
                out.push(terms::LANG);
                out.extend(tag.iter().map(u8::to_ascii_lowercase));
                out.push(0);
                out.extend_from_slice(value);
            }
            RawTerm::Typed(datatype, value) => {
                if datatype == terms::XSD_STRING.as_bytes() {
                    out.push(terms::SIMPLE);
                } else {
                    out.push(terms::TYPED);
                    out.extend_from_slice(datatype);
                    out.push(0);
                }
                out.extend_from_slice(value);
            }
        }
    }
}

/// What [`scan_line`] recognised.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Line<'a> {
    /// Only spaces and tabs (no statement).
    Empty,
    /// One statement; `graph` is `None` for the default graph.
    Statement {
        /// Subject (IRI or blank node).
        subject: RawTerm<'a>,
        /// Predicate (IRI).
        predicate: RawTerm<'a>,
        /// Object (IRI, blank node or literal).
        object: RawTerm<'a>,
        /// Graph name (IRI or blank node), N-Quads only.
        graph: Option<RawTerm<'a>>,
    },
}

/// Scans one line (without its `\n`; a final `\r` is allowed). `quads`: accept a graph
/// term (N-Quads). `None`: not the plain shape, let oxttl read the line.
pub fn scan_line(line: &[u8], quads: bool) -> Option<Line<'_>> {
    let line = line.strip_suffix(b"\r").unwrap_or(line);
    let mut s = Scanner { b: line, i: 0 };
    s.skip_ws();
    if s.i == line.len() {
        return Some(Line::Empty);
    }
    let subject = match s.peek()? {
        b'<' => s.iri()?,
        b'_' => s.blank()?,
        _ => return None,
    };
    s.skip_ws();
    if s.peek()? != b'<' {
        return None;
    }
    let predicate = s.iri()?;
    s.skip_ws();
    let object = match s.peek()? {
        b'<' => s.iri()?,
        b'_' => s.blank()?,
        b'"' => s.literal()?,
        _ => return None,
    };
    s.skip_ws();
    let graph = match s.peek()? {
        b'<' if quads => Some(s.iri()?),
        b'_' if quads => Some(s.blank()?),
        _ => None,
    };
    if graph.is_some() {
        s.skip_ws();
    }
    if s.peek()? != b'.' {
        return None;
    }
    s.i += 1;
    s.skip_ws();
    (s.i == line.len()).then_some(Line::Statement {
        subject,
        predicate,
        object,
        graph,
    })
}

/// The index of the first `>` or `\\` in `b`.
///
/// Eight bytes a step, in a `u64` (SWAR): `memchr2` does the same with SIMD, but an IRI is
/// only ~40 bytes away and its per-call cost (dispatch, alignment, short-haystack paths)
/// was most of its time here. A byte equal to `c` is a zero byte of `x ^ c…c`, and the
/// lowest byte flagged by the zero-byte test `(v - 0x01…01) & !v & 0x80…80` is always a
/// true zero (a false flag needs a borrow from a zero byte below it).
fn find_iri_end(b: &[u8]) -> Option<usize> {
    const LO: u64 = 0x0101_0101_0101_0101;
    const HI: u64 = 0x8080_8080_8080_8080;
    const GT: u64 = LO * b'>' as u64;
    const BACKSLASH: u64 = LO * b'\\' as u64;
    let zero = |v: u64| v.wrapping_sub(LO) & !v & HI;
    let mut words = b.chunks_exact(8);
    for (k, word) in words.by_ref().enumerate() {
        let x = u64::from_le_bytes(word.try_into().expect("eight bytes"));
        let m = zero(x ^ GT) | zero(x ^ BACKSLASH);
        if m != 0 {
            return Some(8 * k + (m.trailing_zeros() / 8) as usize);
        }
    }
    let tail = words.remainder();
    let at = b.len() - tail.len();
    tail.iter()
        .position(|&c| c == b'>' || c == b'\\')
        .map(|p| at + p)
}

struct Scanner<'a> {
    b: &'a [u8],
    i: usize,
}

impl<'a> Scanner<'a> {
    fn peek(&self) -> Option<u8> {
        self.b.get(self.i).copied()
    }

    fn skip_ws(&mut self) {
        while matches!(self.b.get(self.i), Some(b' ' | b'\t')) {
            self.i += 1;
        }
    }

    /// `<...>` at `i`: everything up to the next `>`, unless a `\\` (an escape, for
    /// oxttl) comes first. The bytes between are not checked here (a search eight bytes
    /// a step instead of a table lookup per byte): an IRI key holding a byte that
    /// `IRIREF` forbids, such as a space or a `<`, fails [`super::terms::is_strict_key`],
    /// which runs once per distinct term, and its chunk goes to the strict parser.
    fn iri_text(&mut self) -> Option<&'a [u8]> {
        let start = self.i + 1;
        let end = start + find_iri_end(&self.b[start..])?;
        if self.b[end] != b'>' {
            return None;
        }
        self.i = end + 1;
        Some(&self.b[start..end])
    }

    fn iri(&mut self) -> Option<RawTerm<'a>> {
        self.iri_text().map(RawTerm::Iri)
    }

    /// `_:label` at `i`, ASCII labels only; a `.` or a non-ASCII byte right after the
    /// label is left to oxttl (labels may hold dots and Unicode, but not end with a dot).
    fn blank(&mut self) -> Option<RawTerm<'a>> {
        let rest = &self.b[self.i..];
        if rest.get(1) != Some(&b':') {
            return None;
        }
        let first = *rest.get(2)?;
        if !(first.is_ascii_alphanumeric() || first == b'_') {
            return None;
        }
        let len = 1 + rest[3..]
            .iter()
            .position(|&c| !(c.is_ascii_alphanumeric() || c == b'_' || c == b'-'))
            .unwrap_or(rest.len() - 3);
        if matches!(rest.get(2 + len), Some(&c) if c == b'.' || c >= 0x80) {
            return None;
        }
        self.i += 2 + len;
        Some(RawTerm::Blank(&rest[2..2 + len]))
    }

    /// `"value"` with an optional `@tag` or `^^<datatype>` at `i`; no escapes.
    fn literal(&mut self) -> Option<RawTerm<'a>> {
        let start = self.i + 1;
        let len = memchr::memchr2(b'"', b'\\', &self.b[start..])?;
        let end = start + len;
        if self.b[end] != b'"' {
            return None;
        }
        let value = &self.b[start..end];
        self.i = end + 1;
        match self.peek() {
            Some(b'@') => {
                // LANGTAG: [a-zA-Z]+ ('-' [a-zA-Z0-9]+)*; `--` (RDF 1.2 direction) or a
                // trailing `-` go to oxttl.
                let tag_start = self.i + 1;
                let rest = &self.b[tag_start..];
                let len = rest
                    .iter()
                    .position(|&c| !(c.is_ascii_alphanumeric() || c == b'-'))
                    .unwrap_or(rest.len());
                let tag = &rest[..len];
                let first_block = tag.split(|&c| c == b'-').next().unwrap_or(b"");
                if first_block.is_empty()
                    || !first_block.iter().all(u8::is_ascii_alphabetic)
                    || tag.split(|&c| c == b'-').any(<[u8]>::is_empty)
                {
                    return None;
                }
                self.i = tag_start + len;
                Some(RawTerm::Lang(tag, value))
            }
            Some(b'^') => {
                if self.b.get(self.i + 1) != Some(&b'^') || self.b.get(self.i + 2) != Some(&b'<') {
                    return None;
                }
                self.i += 2;
                let datatype = self.iri_text()?;
                Some(RawTerm::Typed(datatype, value))
            }
            _ => Some(RawTerm::Simple(value)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use oxttl::{NQuadsParser, NTriplesParser};

    fn key(t: RawTerm<'_>) -> Vec<u8> {
        let mut k = Vec::new();
        t.encode_into(&mut k);
        k
    }

    /// The keys oxttl's strict parser gives a line (`[s, p, o, g?]`), or `Err` on an error.
    fn oxttl_keys(line: &str, quads: bool) -> Result<Vec<Vec<Vec<u8>>>, String> {
        let mut out = Vec::new();
        if quads {
            for q in NQuadsParser::new().for_slice(line.as_bytes()) {
                let q = q.map_err(|e| e.to_string())?;
                let mut k = vec![
                    terms::encode(q.subject.as_ref().into()),
                    terms::encode(q.predicate.as_ref().into()),
                    terms::encode(q.object.as_ref()),
                ];
                match q.graph_name.as_ref() {
                    oxrdf::GraphNameRef::DefaultGraph => {}
                    oxrdf::GraphNameRef::NamedNode(n) => k.push(terms::encode(n.into())),
                    oxrdf::GraphNameRef::BlankNode(b) => k.push(terms::encode(b.into())),
                }
                out.push(k);
            }
        } else {
            for t in NTriplesParser::new().for_slice(line.as_bytes()) {
                let t = t.map_err(|e| e.to_string())?;
                out.push(vec![
                    terms::encode(t.subject.as_ref().into()),
                    terms::encode(t.predicate.as_ref().into()),
                    terms::encode(t.object.as_ref()),
                ]);
            }
        }
        Ok(out)
    }

    /// Checks the contract of the module on one line, in both formats.
    fn check(line: &str) {
        for quads in [false, true] {
            let scanned = scan_line(line.as_bytes(), quads);
            let expected = oxttl_keys(line, quads);
            match scanned {
                None => {}
                Some(Line::Empty) => {
                    assert_eq!(expected, Ok(vec![]), "{line:?} (quads {quads})")
                }
                Some(Line::Statement {
                    subject,
                    predicate,
                    object,
                    graph,
                }) => {
                    let mut keys = vec![key(subject), key(predicate), key(object)];
                    keys.extend(graph.map(key));
                    if keys.iter().all(|k| terms::is_strict_key(k)) {
                        assert_eq!(expected, Ok(vec![keys]), "{line:?} (quads {quads})");
                    }
                }
            }
        }
    }

    #[test]
    fn plain_lines_take_the_fast_path() {
        for (line, quads) in [
            ("<http://e/s> <http://e/p> <http://e/o> .", false),
            ("<http://e/s> <http://e/p> <http://e/o> .\r", false),
            ("_:b0 <http://e/p> _:b-1 .", false),
            ("<http://e/s>\t<http://e/p>\t\"v\"@en-GB\t.", false),
            ("<http://e/s> <http://e/p> \"1\"^^<http://www.w3.org/2001/XMLSchema#integer> .", false),
            ("<http://e/s> <http://e/p> \"é \\u00e9\"^^<http://www.w3.org/2001/XMLSchema#string>.", false),
            ("<http://e/s> <http://e/p> <http://e/o> <http://e/g> .", true),
            ("<http://e/s> <http://e/p> \"x\" _:g .", true),
            ("   ", false),
            ("", true),
        ] {
            let scanned = scan_line(line.as_bytes(), quads);
            if line.contains('\\') {
                assert_eq!(scanned, None, "{line:?}: escapes go to oxttl");
            } else {
                assert!(scanned.is_some(), "{line:?}");
            }
            check(line);
        }
        assert_eq!(
            scan_line(b"_:a <http://p> \"v\"@EN .", false),
            Some(Line::Statement {
                subject: RawTerm::Blank(b"a"),
                predicate: RawTerm::Iri(b"http://p"),
                object: RawTerm::Lang(b"EN", b"v"),
                graph: None,
            })
        );
        assert_eq!(key(RawTerm::Lang(b"EN", b"v")), b"@en\0v");
    }

    #[test]
    fn odd_lines_agree_with_oxttl_or_go_to_it() {
        for line in [
            "<http://e/s> <http://e/p> <http://e/o>",
            "<http://e/s> <http://e/p> <http://e/o> . # comment",
            "# comment",
            "<http://e/s> <http://e/p> <http://e/o> . <http://e/s> <http://e/p> <http://e/o> .",
            "<http://e/s><http://e/p><http://e/o>.",
            "<http://e/s> <http://e/p> _:o.",
            "<http://e/s> <http://e/p> _:o.x .",
            "_:s. <http://e/p> <http://e/o> .",
            "_:-s <http://e/p> <http://e/o> .",
            "_: <http://e/p> <http://e/o> .",
            "_:sé <http://e/p> <http://e/o> .",
            "<http://e/s> _:p <http://e/o> .",
            "\"s\" <http://e/p> <http://e/o> .",
            "<http://e/s> <http://e/p> \"v\"@ .",
            "<http://e/s> <http://e/p> \"v\"@en- .",
            "<http://e/s> <http://e/p> \"v\"@en--ltr .",
            "<http://e/s> <http://e/p> \"v\"@1en .",
            "<http://e/s> <http://e/p> \"v\"@en-1 .",
            "<http://e/s> <http://e/p> \"v\"^<http://e/d> .",
            "<http://e/s> <http://e/p> \"v\"^^<http://e/d .",
            "<http://e/s> <http://e/p> \"v\"^^_:d .",
            "<http://e/s> <http://e/p> \"v\"^^<http://www.w3.org/1999/02/22-rdf-syntax-ns#langString> .",
            "<http://e/s> <http://e/p> \"v .",
            "<http://e/s> <http://e/p> \"a\rb\" .",
            "<http://e/s> <http://e/p> \"a\tb\0c\" .",
            "<http://e/s> <http://e/p> 'v' .",
            "<http://e/s> <http://e/p> 12 .",
            "<http://e/s> <http://e/p> <http://e/o> <http://e/g> .",
            "<http://e/s> <http://e/p> <http://e/o> \"g\" .",
            "<http://e/s> <http://e/p> <<( <http://e/a> <http://e/b> <http://e/c> )>> .",
            "<http://e/s p> <http://e/p> <http://e/o> .",
            "<http://e/s\\u0041> <http://e/p> <http://e/o> .",
            "<relative> <http://e/p> <http://e/o> .",
            "<http://e/s> <http://e/p> <http://e/o> .\r\r",
            "<http://e/s> <http://e/p> <http://e/o> .\r<http://e/s> <http://e/p> <http://e/o> .",
            "<http://e/{s}> <http://e/p> <http://e/o> .",
            "<http://e/s>\u{b}<http://e/p> <http://e/o> .",
            ". ",
        ] {
            check(line);
        }
    }

    #[test]
    fn iri_ends_are_found_in_every_position() {
        let naive = |b: &[u8]| b.iter().position(|&c| c == b'>' || c == b'\\');
        for len in 0..40 {
            for at in 0..=len {
                for stop in [b'>', b'\\'] {
                    // Bytes around the stop that the zero-byte test could confuse.
                    let mut b: Vec<u8> = (0..len)
                        .map(|i| [b'?', b'=', b']', 0x3f, 0xbe][i % 5])
                        .collect();
                    if at < len {
                        b[at] = stop;
                    }
                    assert_eq!(find_iri_end(&b), naive(&b), "{b:?}");
                }
            }
        }
        assert_eq!(find_iri_end(b"http://e/s> <http://e/p>"), Some(10));
        assert_eq!(find_iri_end(b"http://e/s\\u0041>"), Some(10));
        assert_eq!(find_iri_end(b"http://e/s"), None);
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(2000))]
        /// The word-at-a-time search agrees with a byte loop.
        #[test]
        fn iri_end_search_agrees_with_a_byte_loop(b in proptest::collection::vec(proptest::sample::select(vec![b'>', b'\\', b'<', b'?', b'=', b']', 0u8, 1, 0x7f, 0x80, 0xbe, 0xff]), 0..48)) {
            proptest::prop_assert_eq!(
                find_iri_end(&b),
                b.iter().position(|&c| c == b'>' || c == b'\\')
            );
        }

        /// Lines glued from plausible and implausible pieces: the scanner never disagrees
        /// with oxttl's strict parser about a line it accepts.
        #[test]
        fn scanner_never_disagrees_with_oxttl(
            pieces in proptest::collection::vec(proptest::sample::select(vec![
                "<http://e/s>", "<http://e/p>", "<urn:x:y>", "<http://é/ü>", "<a b>", "<>",
                "<http://e/s\\u0041>", "_:b", "_:b.c", "_:b-", "_:1", "_:", "\"v\"", "\"\"",
                "\"a\\\"b\"", "\"é\"", "@en", "@EN-us", "@en--ltr", "@", "^^", "^^<http://d/t>",
                "^^<http://www.w3.org/2001/XMLSchema#string>", " ", "  ", "\t", ".", ". ",
                "#c", "\r", "<", ">", "\"", "'x'", "1", "<<(", ")>>", "a", ":", "\u{0}",
            ]), 0..9)
        ) {
            check(&pieces.concat());
        }
    }
}
