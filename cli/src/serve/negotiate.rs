//! Content negotiation: the format of a response from the request's `Accept` header
//! (media ranges with `q` weights, RFC 9110 §12.5.1) or, for browsers and links, a
//! `format` parameter, among the formats the answer can take.

use oxrdfio::RdfFormat;
use sparesults::QueryResultsFormat;

/// A format the endpoint writes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    /// SPARQL query results (SELECT, ASK): JSON, XML, CSV or TSV.
    Results(QueryResultsFormat),
    /// RDF (CONSTRUCT, DESCRIBE, the service description).
    Rdf(RdfFormat),
    /// The query page.
    Html,
}

/// The formats of a SELECT or ASK answer, the first the default.
pub const RESULT_FORMATS: &[Format] = &[
    Format::Results(QueryResultsFormat::Json),
    Format::Results(QueryResultsFormat::Xml),
    Format::Results(QueryResultsFormat::Csv),
    Format::Results(QueryResultsFormat::Tsv),
];

/// The formats of a CONSTRUCT or DESCRIBE answer, the first the default.
pub const GRAPH_FORMATS: &[Format] = &[
    Format::Rdf(RdfFormat::NTriples),
    Format::Rdf(RdfFormat::Turtle),
];

/// What the endpoint's root shows: the query page, or the service description in RDF.
pub const ROOT_FORMATS: &[Format] = &[
    Format::Html,
    Format::Rdf(RdfFormat::Turtle),
    Format::Rdf(RdfFormat::NTriples),
    Format::Rdf(RdfFormat::RdfXml),
];

impl Format {
    /// The media type of a response in this format.
    pub fn media_type(self) -> &'static str {
        match self {
            Format::Results(f) => f.media_type(),
            Format::Rdf(f) => f.media_type(),
            Format::Html => "text/html",
        }
    }

    /// The `Content-Type` of a response in this format (text is UTF-8).
    pub fn content_type(self) -> String {
        let media_type = self.media_type();
        if media_type.contains("charset") || !media_type.starts_with("text/") {
            media_type.to_owned()
        } else {
            format!("{media_type}; charset=utf-8")
        }
    }

    /// Media types a client may ask for this format by, the canonical one first.
    fn media_types(self) -> &'static [&'static str] {
        match self {
            Format::Results(QueryResultsFormat::Json) => {
                &["application/sparql-results+json", "application/json"]
            }
            Format::Results(QueryResultsFormat::Xml) => {
                &["application/sparql-results+xml", "application/xml"]
            }
            Format::Results(QueryResultsFormat::Csv) => &["text/csv"],
            Format::Results(QueryResultsFormat::Tsv) => &["text/tab-separated-values"],
            Format::Rdf(RdfFormat::NTriples) => &["application/n-triples"],
            Format::Rdf(RdfFormat::Turtle) => &["text/turtle", "application/x-turtle"],
            Format::Rdf(RdfFormat::RdfXml) => &["application/rdf+xml"],
            Format::Html => &["text/html", "application/xhtml+xml"],
            _ => &[],
        }
    }

    /// Short names for the `format` parameter.
    fn names(self) -> &'static [&'static str] {
        match self {
            Format::Results(QueryResultsFormat::Json) => &["json", "srj"],
            Format::Results(QueryResultsFormat::Xml) => &["xml", "srx"],
            Format::Results(QueryResultsFormat::Csv) => &["csv"],
            Format::Results(QueryResultsFormat::Tsv) => &["tsv"],
            Format::Rdf(RdfFormat::NTriples) => &["nt", "ntriples", "n-triples"],
            Format::Rdf(RdfFormat::Turtle) => &["ttl", "turtle"],
            Format::Rdf(RdfFormat::RdfXml) => &["rdf", "rdfxml", "xml"],
            Format::Html => &["html"],
            _ => &[],
        }
    }
}

/// Why no format fits: the message of a 406 (or, for a malformed header, a 400).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NegotiationError {
    /// Nothing the client accepts is among the candidates.
    NotAcceptable(String),
    /// The header or parameter is malformed.
    Malformed(String),
}

/// The format to answer in, among `candidates` (the first is the default): the `format`
/// parameter when given, else the best match of `accept`.
pub fn negotiate(
    accept: Option<&str>,
    format_parameter: Option<&str>,
    candidates: &[Format],
) -> Result<Format, NegotiationError> {
    let offered = || {
        candidates
            .iter()
            .map(|f| f.media_types()[0])
            .collect::<Vec<_>>()
            .join(", ")
    };
    if let Some(wanted) = format_parameter {
        let wanted = wanted.trim();
        return candidates
            .iter()
            .copied()
            .find(|f| {
                f.names().iter().any(|n| n.eq_ignore_ascii_case(wanted))
                    || f.media_types()
                        .iter()
                        .any(|m| m.eq_ignore_ascii_case(media_type_of(wanted)))
            })
            .ok_or_else(|| {
                NegotiationError::NotAcceptable(format!(
                    "format {wanted:?} is not one this answer can take ({})",
                    offered()
                ))
            });
    }
    let accept = accept.map(str::trim).unwrap_or_default();
    if accept.is_empty() {
        return Ok(candidates[0]);
    }
    let ranges = parse_accept(accept)?;
    let mut best: Option<(Format, f32)> = None;
    for &candidate in candidates {
        let quality = quality_of(candidate, &ranges);
        if quality > 0.0 && best.is_none_or(|(_, q)| quality > q) {
            best = Some((candidate, quality));
        }
    }
    best.map(|(f, _)| f).ok_or_else(|| {
        NegotiationError::NotAcceptable(format!(
            "no format in the Accept header ({accept}) is one this answer can take ({})",
            offered()
        ))
    })
}

/// `text/csv` of `text/csv; charset=utf-8`.
fn media_type_of(value: &str) -> &str {
    value.split(';').next().unwrap_or_default().trim()
}

/// A media range of an `Accept` header.
#[derive(Debug)]
struct MediaRange {
    main: String,
    sub: String,
    quality: f32,
}

impl MediaRange {
    /// How specifically this range names `media_type` (2: exactly, 1: `type/*`, 0:
    /// `*/*`), or `None` when it does not match it.
    fn specificity(&self, media_type: &str) -> Option<u8> {
        let (main, sub) = media_type.split_once('/')?;
        match (self.main.as_str(), self.sub.as_str()) {
            ("*", "*") => Some(0),
            (m, "*") if m.eq_ignore_ascii_case(main) => Some(1),
            (m, s) if m.eq_ignore_ascii_case(main) && s.eq_ignore_ascii_case(sub) => Some(2),
            _ => None,
        }
    }
}

/// The media ranges of an `Accept` header.
fn parse_accept(header: &str) -> Result<Vec<MediaRange>, NegotiationError> {
    let mut ranges = Vec::new();
    for item in header.split(',').map(str::trim).filter(|i| !i.is_empty()) {
        let mut parts = item.split(';');
        let media = parts.next().unwrap_or_default().trim();
        let (main, sub) = media
            .split_once('/')
            .filter(|(m, s)| !m.is_empty() && !s.is_empty())
            .ok_or_else(|| {
                NegotiationError::Malformed(format!("invalid media range {media:?} in Accept"))
            })?;
        let mut quality = 1.0;
        for parameter in parts {
            if let Some((name, value)) = parameter.split_once('=') {
                if name.trim().eq_ignore_ascii_case("q") {
                    quality = value
                        .trim()
                        .parse::<f32>()
                        .ok()
                        .filter(|q| (0.0..=1.0).contains(q))
                        .ok_or_else(|| {
                            NegotiationError::Malformed(format!(
                                "invalid weight {:?} in Accept",
                                value.trim()
                            ))
                        })?;
                }
            }
        }
        ranges.push(MediaRange {
            main: main.trim().to_owned(),
            sub: sub.trim().to_owned(),
            quality,
        });
    }
    Ok(ranges)
}

/// The weight the client gives `format`: that of the most specific range matching one of
/// its media types (0 when none does).
fn quality_of(format: Format, ranges: &[MediaRange]) -> f32 {
    let mut best: Option<(u8, f32)> = None;
    for media_type in format.media_types() {
        for range in ranges {
            if let Some(s) = range.specificity(media_type) {
                let better = match best {
                    None => true,
                    Some((bs, bq)) => s > bs || (s == bs && range.quality > bq),
                };
                if better {
                    best = Some((s, range.quality));
                }
            }
        }
    }
    best.map_or(0.0, |(_, q)| q)
}

#[cfg(test)]
mod tests {
    use super::*;

    const JSON: Format = Format::Results(QueryResultsFormat::Json);
    const XML: Format = Format::Results(QueryResultsFormat::Xml);
    const CSV: Format = Format::Results(QueryResultsFormat::Csv);
    const TSV: Format = Format::Results(QueryResultsFormat::Tsv);
    const TTL: Format = Format::Rdf(RdfFormat::Turtle);

    fn pick(accept: &str, candidates: &[Format]) -> Result<Format, NegotiationError> {
        negotiate(Some(accept), None, candidates)
    }

    #[test]
    fn no_header_gives_the_default() {
        assert_eq!(negotiate(None, None, RESULT_FORMATS), Ok(JSON));
        assert_eq!(pick("", RESULT_FORMATS), Ok(JSON));
        assert_eq!(pick("*/*", RESULT_FORMATS), Ok(JSON));
        assert_eq!(pick("*/*", ROOT_FORMATS), Ok(Format::Html));
    }

    #[test]
    fn weights_and_specificity_decide() {
        assert_eq!(pick("text/csv", RESULT_FORMATS), Ok(CSV));
        assert_eq!(pick("text/tab-separated-values", RESULT_FORMATS), Ok(TSV));
        assert_eq!(
            pick(
                "application/sparql-results+json;q=0.5, application/sparql-results+xml",
                RESULT_FORMATS
            ),
            Ok(XML)
        );
        // `text/*` matches CSV first; an explicit weight on TSV beats it.
        assert_eq!(pick("text/*", RESULT_FORMATS), Ok(CSV));
        assert_eq!(
            pick("text/*;q=0.5, text/tab-separated-values", RESULT_FORMATS),
            Ok(TSV)
        );
        // The most specific range sets the weight: `text/csv;q=0` excludes CSV even
        // under `*/*`.
        assert_eq!(pick("text/csv;q=0, */*;q=0.1", &[CSV, TSV]), Ok(TSV));
        // A browser's header asks for the page at the root, and for XML results.
        let browser = "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8";
        assert_eq!(pick(browser, ROOT_FORMATS), Ok(Format::Html));
        assert_eq!(pick(browser, RESULT_FORMATS), Ok(XML));
        assert_eq!(pick("text/turtle", ROOT_FORMATS), Ok(TTL));
        assert_eq!(
            pick("application/rdf+xml", ROOT_FORMATS),
            Ok(Format::Rdf(RdfFormat::RdfXml))
        );
    }

    #[test]
    fn nothing_acceptable_is_an_error() {
        for (accept, candidates) in [
            ("image/png", RESULT_FORMATS),
            ("text/turtle", RESULT_FORMATS),
            ("application/sparql-results+json", GRAPH_FORMATS),
        ] {
            let got = pick(accept, candidates);
            assert!(
                matches!(got, Err(NegotiationError::NotAcceptable(_))),
                "{accept}: {got:?}"
            );
        }
        for accept in ["nonsense", "text/csv;q=2"] {
            let got = pick(accept, RESULT_FORMATS);
            assert!(
                matches!(got, Err(NegotiationError::Malformed(_))),
                "{accept}: {got:?}"
            );
        }
    }

    #[test]
    fn the_format_parameter_overrides_accept() {
        assert_eq!(
            negotiate(Some("text/csv"), Some("tsv"), RESULT_FORMATS),
            Ok(TSV)
        );
        assert_eq!(negotiate(None, Some("text/csv"), RESULT_FORMATS), Ok(CSV));
        assert_eq!(negotiate(None, Some("xml"), RESULT_FORMATS), Ok(XML));
        assert_eq!(negotiate(None, Some("ttl"), GRAPH_FORMATS), Ok(TTL));
        assert!(matches!(
            negotiate(None, Some("ttl"), RESULT_FORMATS),
            Err(NegotiationError::NotAcceptable(_))
        ));
    }
}
