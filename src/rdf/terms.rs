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

const IRI: u8 = b'<';
const BLANK: u8 = b'_';
const SIMPLE: u8 = b'"';
const LANG: u8 = b'@';
const TYPED: u8 = b'^';
const XSD_STRING: &str = "http://www.w3.org/2001/XMLSchema#string";

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
}
