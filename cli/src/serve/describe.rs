//! The SPARQL 1.1 Service Description of the endpoint: what it answers (SPARQL 1.1
//! queries, no updates), the formats it writes, and the graphs of its dataset with their
//! sizes (VoID triple counts).

use oxrdf::vocab::rdf;
use oxrdf::{BlankNode, Literal, NamedNode, Term, Triple};
use oxrdfio::{RdfFormat, RdfSerializer};

use super::evaluate::GraphSummary;
use super::negotiate::{Format, GRAPH_FORMATS, RESULT_FORMATS};

const SD: &str = "http://www.w3.org/ns/sparql-service-description#";
const VOID: &str = "http://rdfs.org/ns/void#";

fn sd(name: &str) -> NamedNode {
    NamedNode::new_unchecked(format!("{SD}{name}"))
}

/// The description in `format`, for the endpoint at `base` (`http://host:port`).
pub fn service_description(format: RdfFormat, base: &str, graphs: &[GraphSummary]) -> Vec<u8> {
    let mut triples = Vec::new();
    let service = BlankNode::default();
    let mut add = |s: &BlankNode, p: NamedNode, o: Term| {
        triples.push(Triple::new(s.clone(), p, o));
    };
    add(&service, rdf::TYPE.into_owned(), sd("Service").into());
    for path in ["query", "sparql"] {
        add(
            &service,
            sd("endpoint"),
            NamedNode::new_unchecked(format!("{base}/{path}")).into(),
        );
    }
    add(
        &service,
        sd("supportedLanguage"),
        sd("SPARQL10Query").into(),
    );
    add(
        &service,
        sd("supportedLanguage"),
        sd("SPARQL11Query").into(),
    );
    for f in RESULT_FORMATS.iter().chain(GRAPH_FORMATS) {
        let iri = match f {
            Format::Results(r) => r.iri(),
            Format::Rdf(r) => r.iri(),
            Format::Html => continue,
        };
        add(
            &service,
            sd("resultFormat"),
            NamedNode::new_unchecked(iri).into(),
        );
    }
    let dataset = BlankNode::default();
    add(&service, sd("defaultDataset"), dataset.clone().into());
    add(&dataset, rdf::TYPE.into_owned(), sd("Dataset").into());
    for graph in graphs {
        let node = BlankNode::default();
        add(&node, rdf::TYPE.into_owned(), sd("Graph").into());
        add(
            &node,
            NamedNode::new_unchecked(format!("{VOID}triples")),
            Literal::from(graph.triples).into(),
        );
        match &graph.name {
            None => add(&dataset, sd("defaultGraph"), node.into()),
            Some(name) => {
                let named = BlankNode::default();
                add(&dataset, sd("namedGraph"), named.clone().into());
                add(&named, rdf::TYPE.into_owned(), sd("NamedGraph").into());
                add(&named, sd("name"), name.clone().into());
                add(&named, sd("graph"), node.into());
            }
        }
    }
    let mut serializer = RdfSerializer::from_format(format);
    if !matches!(format, RdfFormat::NTriples) {
        for (prefix, iri) in [("sd", SD), ("void", VOID)] {
            serializer = serializer
                .with_prefix(prefix, iri)
                .expect("the prefixes are valid IRIs");
        }
    }
    let mut writer = serializer.for_writer(Vec::new());
    for t in &triples {
        writer
            .serialize_triple(t)
            .expect("writing to memory cannot fail");
    }
    writer.finish().expect("writing to memory cannot fail")
}
