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
pub fn hash_key(key: &[u8]) -> u64 {
    use std::hash::BuildHasher;
    rustc_hash::FxBuildHasher.hash_one(key)
}

/// Whether `key`, made by oxttl's lenient parser, is exactly what the strict parser would
/// have produced: its IRIs (and datatype IRIs) are valid absolute IRIs, its language tag is
/// well formed, and no literal value holds a line break (the lenient lexer lets a raw
/// line break through a string, which cannot be told from an escaped `\n` afterwards, so
/// any line break sends the chunk to the strict parser). `false` means "re-parse strictly",
/// not necessarily "invalid".
pub fn is_strict_key(key: &[u8]) -> bool {
    let Some((&tag, rest)) = key.split_first() else {
        return false;
    };
    let Ok(text) = std::str::from_utf8(rest) else {
        return false;
    };
    let no_break = |v: &str| memchr::memchr2(b'\n', b'\r', v.as_bytes()).is_none();
    match tag {
        IRI => is_valid_iri(text),
        BLANK => true,
        SIMPLE => no_break(text),
        LANG => text.split_once('\0').is_some_and(|(lang, value)| {
            oxilangtag::LanguageTag::parse(lang).is_ok() && no_break(value)
        }),
        TYPED => text.split_once('\0').is_some_and(|(datatype, value)| {
            datatype != RDF_LANG_STRING
                && datatype != RDF_DIR_LANG_STRING
                && is_valid_iri(datatype)
                && no_break(value)
        }),
        _ => false,
    }
}

/// Whether `iri` is a valid absolute IRI, as `oxiri::Iri::parse` decides, with a quick
/// accept for the common shape `scheme://host/path` whose host and path use only the
/// characters RFC 3986 allows anywhere there (unreserved, sub-delims, `:` `@` `/` in the
/// path; unreserved in the host, so no port, user info or IP literal). Anything else —
/// `%`, `?`, `#`, non-ASCII, a port — goes to oxiri. The quick accept only ever says yes to
/// IRIs oxiri accepts; it exists because oxiri was ~8 % of load time even on distinct terms.
fn is_valid_iri(iri: &str) -> bool {
    fn unreserved(b: u8) -> bool {
        b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~')
    }
    fn path_char(b: u8) -> bool {
        unreserved(b)
            || matches!(
                b,
                b'!' | b'$' | b'&' | b'\'' | b'(' | b')' | b'*' | b'+' | b',' | b';' | b'='
            )
            || matches!(b, b':' | b'@' | b'/')
    }
    let quick = || -> Option<()> {
        // The first `:` ends a scheme (schemes hold no `:`); a `str` pattern here would
        // build a two-way searcher per IRI, which showed up in profiles.
        let colon = memchr::memchr(b':', iri.as_bytes())?;
        let (scheme, rest) = (&iri[..colon], iri[colon + 1..].strip_prefix("//")?);
        let (first, others) = scheme.as_bytes().split_first()?;
        let scheme_ok = first.is_ascii_alphabetic()
            && others
                .iter()
                .all(|&b| b.is_ascii_alphanumeric() || matches!(b, b'+' | b'-' | b'.'));
        let rest = rest.as_bytes();
        let host_end = rest
            .iter()
            .position(|&b| !unreserved(b))
            .unwrap_or(rest.len());
        let path = &rest[host_end..];
        let path_ok = path.is_empty() || (path[0] == b'/' && path.iter().all(|&b| path_char(b)));
        (scheme_ok && path_ok).then_some(())
    };
    quick().is_some() || oxiri::Iri::parse(iri).is_ok()
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
        ] {
            assert_eq!(is_valid_iri(iri), oxiri::Iri::parse(iri).is_ok(), "{iri}");
        }
    }

    proptest::proptest! {
        #[test]
        fn quick_iri_check_never_disagrees_with_oxiri(
            iri in "[a-z][a-z0-9+.-]{0,3}://[a-zA-Z0-9._~:/@!$&'()*+,;=%?# {}|\\[\\]-]{0,24}"
        ) {
            proptest::prop_assert_eq!(is_valid_iri(&iri), oxiri::Iri::parse(iri.as_str()).is_ok());
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
