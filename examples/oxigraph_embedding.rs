//! Embedding k2rpq in Oxigraph: load a few triples into an Oxigraph store and answer
//! SPARQL queries whose property paths k2rpq evaluates while Oxigraph does the rest.
//!
//! Run: `cargo run --example oxigraph_embedding`

use k2rpq::oxigraph::K2Paths;
use oxigraph::io::RdfFormat;
use oxigraph::sparql::QueryResults;
use oxigraph::store::Store;

const DATA: &str = r#"
@prefix : <http://example.org/> .
@prefix wdt: <http://www.wikidata.org/prop/direct/> .
:rex wdt:P31 :dog .
:dog wdt:P279 :mammal .
:mammal wdt:P279 :animal .
:rex :name "Rex" .
"#;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let store = Store::new()?;
    store.load_from_reader(RdfFormat::Turtle, DATA.as_bytes())?;

    // One K2Paths keeps the k²-tree relations between queries and rebuilds them when the
    // store changes.
    let paths = K2Paths::cpu();
    let query = r#"
        PREFIX : <http://example.org/>
        PREFIX wdt: <http://www.wikidata.org/prop/direct/>
        SELECT ?name ?class WHERE {
            ?x wdt:P31/wdt:P279* ?class .       # k2rpq: one path, one SERVICE call
            OPTIONAL { ?x :name ?name }          # Oxigraph
        } ORDER BY ?class"#;
    if let QueryResults::Solutions(solutions) = paths.evaluate(&store, query)? {
        for s in solutions {
            let s = s?;
            println!(
                "{}\t{}",
                s.get("name").map(|t| t.to_string()).unwrap_or_default(),
                s.get("class").map(|t| t.to_string()).unwrap_or_default()
            );
        }
    }

    // The rewritten query Oxigraph runs, for the curious.
    let parsed = spargebra::SparqlParser::new().parse_query(query)?;
    println!("{}", k2rpq::sparql::rewrite::wrap_paths_in_service(&parsed));
    Ok(())
}
