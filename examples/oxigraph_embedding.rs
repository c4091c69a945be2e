//! Embedding k2rpq in a live Oxigraph store: writes go through `K2Store` (inserts,
//! SPARQL UPDATE, transactions) and each query sees them, with its property paths
//! evaluated by k2rpq over relations kept current from the writes, the rest by Oxigraph.
//!
//! Run: `cargo run --example oxigraph_embedding`

use k2rpq::oxigraph::K2Store;
use oxigraph::io::RdfFormat;
use oxigraph::model::{GraphNameRef, NamedNode, Quad};
use oxigraph::sparql::QueryResults;

const DATA: &str = r#"
@prefix : <http://example.org/> .
@prefix wdt: <http://www.wikidata.org/prop/direct/> .
:rex wdt:P31 :dog .
:dog wdt:P279 :mammal .
:mammal wdt:P279 :animal .
:rex :name "Rex" .
"#;

const QUERY: &str = r#"
    PREFIX : <http://example.org/>
    PREFIX wdt: <http://www.wikidata.org/prop/direct/>
    SELECT ?name ?class WHERE {
        ?x wdt:P31/wdt:P279* ?class .       # k2rpq: one path, one SERVICE call
        OPTIONAL { ?x :name ?name }          # Oxigraph
    } ORDER BY ?class"#;

fn print(store: &K2Store, title: &str) -> Result<(), Box<dyn std::error::Error>> {
    println!("-- {title}");
    if let QueryResults::Solutions(solutions) = store.query(QUERY)? {
        for s in solutions {
            let s = s?;
            println!(
                "{}\t{}",
                s.get("name").map(|t| t.to_string()).unwrap_or_default(),
                s.get("class").map(|t| t.to_string()).unwrap_or_default()
            );
        }
    }
    Ok(())
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    // In memory here; `K2Store::open(path)` (with `--features rocksdb`) keeps the store
    // and its relations on disk.
    let store = K2Store::new()?;
    store.load_from_reader(
        RdfFormat::Turtle,
        DATA.as_bytes(),
        GraphNameRef::DefaultGraph,
    )?;
    print(&store, "loaded")?;

    // A write is visible to the next query: no rebuild, no scan of the store.
    let ex = |s: &str| NamedNode::new(format!("http://example.org/{s}")).unwrap();
    let p279 = NamedNode::new("http://www.wikidata.org/prop/direct/P279")?;
    store.insert(&Quad::new(
        ex("animal"),
        p279,
        ex("organism"),
        GraphNameRef::DefaultGraph,
    ))?;
    print(&store, "after inserting :animal wdt:P279 :organism")?;

    // SPARQL UPDATE, with the exact quads each operation changes.
    store.update(
        "PREFIX : <http://example.org/> PREFIX wdt: <http://www.wikidata.org/prop/direct/>
         DELETE { :dog wdt:P279 ?c } INSERT { :dog wdt:P279 :canid . :canid wdt:P279 ?c }
         WHERE { :dog wdt:P279 ?c }",
    )?;
    print(&store, "after the update")?;

    // Several writes in one transaction: all or nothing.
    let p31 = NamedNode::new("http://www.wikidata.org/prop/direct/P31")?;
    store.transaction(|t| {
        t.insert(&Quad::new(
            ex("fido"),
            p31,
            ex("dog"),
            GraphNameRef::DefaultGraph,
        ))?;
        t.insert(&Quad::new(
            ex("fido"),
            ex("name"),
            oxigraph::model::Literal::from("Fido"),
            GraphNameRef::DefaultGraph,
        ))?;
        Ok(())
    })?;
    print(&store, "after a transaction")?;
    println!("-- {:?}", store.stats());
    Ok(())
}
