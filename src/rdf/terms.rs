//! Terms as byte keys: the form the dictionary sorts, front-codes and stores.
//!
//! A key is one tag byte and the term's text. The tag groups terms of one kind together,
//! and typed literals begin with their datatype, so that sorted keys share long prefixes
//! (IRIs of one namespace, literals of one datatype) and front coding compresses them well.
//!
//! | term | key |
//! |---|---|
//! | IRI `<i>` | `<` i |
//! | blank node `_:b` | `_` b |
//! | simple literal `"v"` | `"` v |
//! | language-tagged `"v"@l` | `@` l `\0` v |
//! | typed `"v"^^<d>` | `^` d `\0` v |
//!
//! Neither IRIs nor language tags may contain NUL, so the first NUL always ends the prefix
//! even when a literal's value holds NUL characters.

use oxrdf::{BlankNode, Literal, NamedNode, Term, TermRef};

/// Tag byte of an IRI key.
pub(crate) const IRI: u8 = b'<';
/// Tag byte of a blank-node key.
pub(crate) const BLANK: u8 = b'_';
/// Tag byte of a simple-literal key.
pub(crate) const SIMPLE: u8 = b'"';
/// Tag byte of a language-tagged literal key.
pub(crate) const LANG: u8 = b'@';
/// Tag byte of a typed literal key.
pub(crate) const TYPED: u8 = b'^';
/// Literals of this datatype are simple literals (key tag [`SIMPLE`]).
pub(crate) const XSD_STRING: &str = "http://www.w3.org/2001/XMLSchema#string";
const RDF_LANG_STRING: &str = "http://www.w3.org/1999/02/22-rdf-syntax-ns#langString";
const RDF_DIR_LANG_STRING: &str = "http://www.w3.org/1999/02/22-rdf-syntax-ns#dirLangString";

/// Appends the key of `term` to `out`.
pub fn encode_into(term: TermRef<'_>, out: &mut Vec<u8>) {
    match term {
        TermRef::NamedNode(n) => {
            out.push(IRI);
            out.extend_from_slice(n.as_str().as_bytes());
        }
        TermRef::BlankNode(b) => {
            out.push(BLANK);
            out.extend_from_slice(b.as_str().as_bytes());
        }
        TermRef::Literal(l) => {
            if let Some(lang) = l.language() {
                out.push(LANG);
                out.extend_from_slice(lang.as_bytes());
                out.push(0);
            } else if l.datatype().as_str() == XSD_STRING {
                out.push(SIMPLE);
            } else {
                out.push(TYPED);
                out.extend_from_slice(l.datatype().as_str().as_bytes());
                out.push(0);
            }
            out.extend_from_slice(l.value().as_bytes());
        }
    }
}

/// The hash of a key used by every term table of the loader, computed once per key
/// (per chunk) and carried along so that no later stage hashes the bytes again.
///
/// It is [`hash_parts`] of the tag byte and the rest, so that a key whose text lies in
/// the input can be hashed (and looked up) before it is copied anywhere.
#[cfg(test)]
pub fn hash_key(key: &[u8]) -> u64 {
    match key.split_first() {
        Some((&tag, rest)) => hash_parts(tag, rest),
        None => hash_parts(0, b""),
    }
}

/// [`hash_key`] of the key made of `tag` followed by `rest`.
#[inline]
pub fn hash_parts(tag: u8, rest: &[u8]) -> u64 {
    use std::hash::Hasher;
    let mut h = rustc_hash::FxHasher::default();
    h.write_u8(tag);
    h.write(rest);
    h.finish()
}

/// Whether `key`, made by oxttl's lenient parser or by the scanner of [`super::ntfast`]
/// (which checks neither UTF-8 nor IRIs), is exactly what the strict parser would have
/// produced: its text is UTF-8, its IRIs (and datatype IRIs) are valid absolute IRIs,
/// its language tag is well formed, and no literal value holds a line break (the lenient
/// lexer lets a raw line break through a string, which cannot be told from an escaped
/// `\n` afterwards, so any line break sends the chunk to the strict parser). `false` means
/// "re-parse strictly", not necessarily "invalid".
#[cfg(test)]
pub fn is_strict_key(key: &[u8]) -> bool {
    key.split_first()
        .is_some_and(|(&tag, rest)| is_strict_parts(tag, rest))
}

/// [`is_strict_key`] of the key made of `tag` followed by `rest`.
pub fn is_strict_parts(tag: u8, rest: &[u8]) -> bool {
    let text_ok =
        |v: &[u8]| memchr::memchr2(b'\n', b'\r', v).is_none() && std::str::from_utf8(v).is_ok();
    match tag {
        IRI => is_valid_iri(rest),
        BLANK => std::str::from_utf8(rest).is_ok(),
        SIMPLE => text_ok(rest),
        LANG => memchr::memchr(0, rest).is_some_and(|nul| {
            let (lang, value) = (&rest[..nul], &rest[nul + 1..]);
            std::str::from_utf8(lang).is_ok_and(|l| oxilangtag::LanguageTag::parse(l).is_ok())
                && text_ok(value)
        }),
        TYPED => memchr::memchr(0, rest).is_some_and(|nul| {
            let (datatype, value) = (&rest[..nul], &rest[nul + 1..]);
            datatype != RDF_LANG_STRING.as_bytes()
                && datatype != RDF_DIR_LANG_STRING.as_bytes()
                && is_valid_iri(datatype)
                && text_ok(value)
        }),
        _ => false,
    }
}

/// Byte classes of the quick IRI check ([`quick_iri`]), one bit each.
mod class {
    /// May follow a scheme's first letter: `ALPHA / DIGIT / "+" / "-" / "."`.
    pub const SCHEME: u8 = 1;
    /// RFC 3986 `unreserved`: `ALPHA / DIGIT / "-" / "." / "_" / "~"` (a host here).
    pub const HOST: u8 = 2;
    /// A path byte: `unreserved`, `sub-delims`, `:`, `@` and `/`.
    pub const PATH: u8 = 4;
    /// A query or fragment byte: a path byte or `?`.
    pub const QUERY: u8 = 8;

    /// The classes of every byte (0 for `%`, non-ASCII and all else: oxiri decides).
    pub const OF: [u8; 256] = {
        let mut t = [0u8; 256];
        let mut b = 0;
        while b < 256 {
            let c = b as u8;
            let alnum = c.is_ascii_alphanumeric();
            let unreserved = alnum || matches!(c, b'-' | b'.' | b'_' | b'~');
            let path = unreserved
                || matches!(
                    c,
                    b'!' | b'$' | b'&' | b'\'' | b'(' | b')' | b'*' | b'+' | b',' | b';' | b'='
                )
                || matches!(c, b':' | b'@' | b'/');
            let mut k = 0;
            if alnum || matches!(c, b'+' | b'-' | b'.') {
                k |= SCHEME;
            }
            if unreserved {
                k |= HOST;
            }
            if path {
                k |= PATH | QUERY;
            }
            if c == b'?' {
                k |= QUERY;
            }
            t[b] = k;
            b += 1;
        }
        t
    };
}

/// Bytes that N-Triples' `IRIREF` never allows unescaped (`[#x00-#x20<>"{}|^`\]`): an IRI
/// key holding one did not come from a valid line, whatever oxiri would say of the text.
fn forbidden_in_iriref(b: u8) -> bool {
    b <= 0x20
        || matches!(
            b,
            b'<' | b'>' | b'"' | b'{' | b'}' | b'|' | b'^' | b'`' | b'\\'
        )
}

/// Whether `iri` is a valid absolute IRI, as `oxiri::Iri::parse` decides (and holds no
/// byte `IRIREF` forbids), with a quick accept ([`quick_iri`]) for the common shapes.
/// The quick accept only ever says yes to IRIs oxiri accepts; it exists because oxiri
/// was ~8 % of load time even on distinct terms.
fn is_valid_iri(iri: &[u8]) -> bool {
    quick_iri(iri).is_some() || slow_iri(iri)
}

/// [`is_valid_iri`] without the quick accept: oxiri decides, on text without bytes that
/// `IRIREF` forbids.
fn slow_iri(iri: &[u8]) -> bool {
    !iri.iter().any(|&b| forbidden_in_iriref(b))
        && std::str::from_utf8(iri).is_ok_and(|s| oxiri::Iri::parse(s).is_ok())
}

/// The index just past the run of `class` bytes of `b` from `i`.
#[inline]
fn run(b: &[u8], mut i: usize, class: u8) -> usize {
    while i < b.len() && class::OF[b[i] as usize] & class != 0 {
        i += 1;
    }
    i
}

/// The quick accept of [`is_valid_iri`]: `scheme://host[/path][?query][#fragment]` whose
/// host is `unreserved` only (no port, user info or IP literal) and whose path, query and
/// fragment use only the characters RFC 3986 allows anywhere there (no `%`). ASCII only,
/// so the text is UTF-8 too. One pass over the bytes, each tested against a table: this
/// runs on every distinct term of every chunk.
///
/// `Some(mark)` when accepted: `mark` is the length of the IRI's longest prefix that
/// ends with a `/` of its path (0 when the path has none); whatever that prefix, the rest
/// of an IRI that begins with it is checked by [`quick_iri_path_rest`] ([`KeyCheck`]
/// resumes there).
fn quick_iri(b: &[u8]) -> Option<usize> {
    use class::{HOST, PATH, SCHEME};
    let n = b.len();
    if n == 0 || !b[0].is_ascii_alphabetic() {
        return None;
    }
    let mut i = run(b, 1, SCHEME);
    if b.get(i..i + 3) != Some(b"://") {
        return None;
    }
    i = run(b, i + 3, HOST);
    let mut mark = 0;
    if i < n && b[i] == b'/' {
        let path = i + 1;
        i = run(b, path, PATH);
        mark = path + memchr::memrchr(b'/', &b[path..i]).map_or(0, |k| k + 1);
    }
    quick_iri_query(b, i).then_some(mark)
}

/// The quick check of the rest of an IRI whose text so far was accepted up to and
/// including a `/` of its path: more path bytes, then an optional query and fragment.
fn quick_iri_path_rest(rest: &[u8]) -> bool {
    quick_iri_query(rest, run(rest, 0, class::PATH))
}

/// The quick check of `b` from `i`, just past the path: `[?query][#fragment]`, then the end.
fn quick_iri_query(b: &[u8], mut i: usize) -> bool {
    let n = b.len();
    if i < n && b[i] == b'?' {
        i = run(b, i + 1, class::QUERY);
    }
    if i < n && b[i] == b'#' {
        i = run(b, i + 1, class::QUERY);
    }
    i == n
}

/// [`is_strict_key`] for a stream of keys (one chunk's, as they are first seen) that
/// remembers the path prefix, through its last `/`, of the last IRI it accepted quickly:
/// the next IRI of that namespace (`http://www.wikidata.org/entity/...`) costs one compare
/// of the prefix and a check of the few bytes after it, not a pass from its scheme on.
/// The answers are exactly [`is_strict_key`]'s.
#[derive(Default)]
pub struct KeyCheck {
    prefix: Vec<u8>,
}

impl KeyCheck {
    /// [`is_strict_parts`] of `tag` and `rest`.
    ///
    /// A caller that has just copied the key should pass the source: reading a copy
    /// right after writing it stalls on store forwarding (measured: the prefix compare
    /// on the batch's fresh copy cost more than the whole check on the input).
    pub fn is_strict_parts(&mut self, tag: u8, rest: &[u8]) -> bool {
        if tag != IRI {
            return is_strict_parts(tag, rest);
        }
        let iri = rest;
        if !self.prefix.is_empty()
            && iri.starts_with(&self.prefix)
            && quick_iri_path_rest(&iri[self.prefix.len()..])
        {
            return true;
        }
        match quick_iri(iri) {
            Some(mark) => {
                if mark > 0 && self.prefix[..] != iri[..mark] {
                    self.prefix.clear();
                    self.prefix.extend_from_slice(&iri[..mark]);
                }
                true
            }
            None => slow_iri(iri),
        }
    }
}

/// The key of `term`.
pub fn encode(term: TermRef<'_>) -> Vec<u8> {
    let mut out = Vec::new();
    encode_into(term, &mut out);
    out
}

/// The term of a key, or `None` when the bytes are not a key (a corrupt dictionary).
pub fn decode(key: &[u8]) -> Option<Term> {
    let (&tag, rest) = key.split_first()?;
    let text = std::str::from_utf8(rest).ok()?;
    let split = || text.split_once('\0');
    Some(match tag {
        IRI => NamedNode::new_unchecked(text).into(),
        BLANK => BlankNode::new_unchecked(text).into(),
        SIMPLE => Literal::new_simple_literal(text).into(),
        LANG => {
            let (lang, value) = split()?;
            Literal::new_language_tagged_literal_unchecked(value, lang).into()
        }
        TYPED => {
            let (datatype, value) = split()?;
            Literal::new_typed_literal(value, NamedNode::new_unchecked(datatype)).into()
        }
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_every_kind() {
        let terms: Vec<Term> = vec![
            NamedNode::new_unchecked("http://example.org/a").into(),
            BlankNode::new_unchecked("b0").into(),
            Literal::new_simple_literal("plain \0 with nul").into(),
            Literal::new_language_tagged_literal_unchecked("chat", "fr").into(),
            Literal::new_typed_literal(
                "42",
                NamedNode::new_unchecked("http://www.w3.org/2001/XMLSchema#integer"),
            )
            .into(),
        ];
        for t in terms {
            assert_eq!(decode(&encode(t.as_ref())), Some(t.clone()), "{t}");
        }
        assert_eq!(decode(b""), None);
        assert_eq!(decode(b"x"), None);
        assert_eq!(decode(b"@en"), None, "a language key needs its NUL");
    }

    #[test]
    fn quick_iri_check_agrees_with_oxiri() {
        for iri in [
            "http://www.wikidata.org/entity/Q42",
            "https://ex.org",
            "https://ex.org/a/b;c=d,e!$&'()*+:@x/",
            "http://ex.org:8080/p",
            "http://ex.org/a?q=1#f",
            "http://ex.org/%41",
            "http://ex.org/é",
            "http://[::1]/x",
            "http://u@ex.org/",
            "http://ex.org/a b",
            "http://ex.org/a{b}",
            "http://ex.org:port/",
            "http://ex.org/%zz",
            "1http://ex.org/",
            "://ex.org/",
            "http://ex.org/a|b",
            "http://ex.org/a\\b",
            "relative/path",
            "",
            "http://ex.org?q=1",
            "http://ex.org#f",
            "http://ex.org/a?b?c/#d/e?",
            "http://ex.org/a#b#c",
            "http://www.w3.org/2001/XMLSchema#dateTime",
            "http://ex.org/a?%41",
            "http://ex.org:/",
            "h://",
            "h:/",
        ] {
            assert_eq!(
                is_valid_iri(iri.as_bytes()),
                oxiri::Iri::parse(iri).is_ok(),
                "{iri}"
            );
        }
    }

    #[test]
    fn iris_with_bytes_iriref_forbids_are_rejected() {
        for b in [
            b' ', b'\t', 0, b'<', b'>', b'"', b'{', b'}', b'|', b'^', b'`', b'\\',
        ] {
            let iri = [b"http://ex.org/a".as_slice(), &[b], b"b"].concat();
            assert!(!is_valid_iri(&iri), "{iri:?}");
        }
        assert!(!is_valid_iri(b"http://ex.org/\xff"), "not UTF-8");
        assert!(is_valid_iri("http://ex.org/é".as_bytes()));
    }

    #[test]
    fn key_check_resumes_after_a_known_prefix() {
        let mut check = KeyCheck::default();
        for (key, ok) in [
            ("<http://ex.org/a/b", true),
            ("<http://ex.org/a/c?q#f", true),
            ("<http://ex.org/a/c d", false),
            ("<http://ex.org/a/%zz", false),
            ("<http://ex.org/a/%41", true),
            ("<http://ex.org/a/", true),
            ("<http://ex.org/a/é", true),
            ("<http://ex.org/a/\u{7f}", false),
            ("<http://ex.org/a", true),
            ("<http://ex.org/a/b#c#d", false),
            ("<http://ex.org", true),
            ("<http://ex.org/a/b", true),
            ("\"v", true),
            ("<http://ex.org/a/b", true),
        ] {
            let (&tag, rest) = key.as_bytes().split_first().unwrap();
            assert_eq!(check.is_strict_parts(tag, rest), ok, "{key}");
            assert_eq!(is_strict_key(key.as_bytes()), ok, "{key}");
        }
    }

    proptest::proptest! {
        /// Keys of few namespaces, in any order: the resuming check answers as the plain one.
        #[test]
        fn key_check_agrees_with_is_strict_key(
            keys in proptest::collection::vec(
                "<(http|urn|h1)://(ex\\.org|a)?(/[a-z%?#/é ]{0,3}){0,3}", 0..24)
        ) {
            let mut check = KeyCheck::default();
            for k in &keys {
                let (&tag, rest) = k.as_bytes().split_first().unwrap();
                proptest::prop_assert_eq!(
                    check.is_strict_parts(tag, rest),
                    is_strict_key(k.as_bytes()),
                    "{}",
                    k
                );
            }
        }

        #[test]
        fn quick_iri_check_never_disagrees_with_oxiri(
            iri in "[a-z][a-z0-9+.-]{0,3}://[a-zA-Z0-9._~:/@!$&'()*+,;=%?# {}|\\[\\]-]{0,24}"
        ) {
            proptest::prop_assert_eq!(
                is_valid_iri(iri.as_bytes()),
                oxiri::Iri::parse(iri.as_str()).is_ok()
            );
        }
    }

    #[test]
    fn strict_keys_reject_what_the_strict_parser_rejects() {
        assert!(is_strict_key(b"<http://example.org/a"));
        assert!(!is_strict_key(b"<relative"), "no scheme");
        assert!(!is_strict_key(b"<http://ex ample/"), "space in an IRI");
        assert!(is_strict_key(b"@en-GB\0chat"));
        assert!(!is_strict_key(b"@toolonglangtag\0chat"));
        assert!(
            !is_strict_key(b"\"two\nlines"),
            "line breaks go to the strict parser"
        );
        assert!(is_strict_key(
            b"^http://www.w3.org/2001/XMLSchema#integer\x0042"
        ));
        assert!(!is_strict_key(b"^not an iri\x0042"));
        assert!(!is_strict_key(
            b"^http://www.w3.org/1999/02/22-rdf-syntax-ns#langString\0x"
        ));
        assert!(is_strict_key(b"_b0"));
        assert!(
            is_strict_key(b"<urn:isbn:123"),
            "no authority: oxiri decides"
        );
        assert!(!is_strict_key(b""));
    }
}
