//! `k2rpq info`: what a store holds, as a table or as the manifest JSON.

use std::path::PathBuf;

use anyhow::Context;
use k2rpq::store::Store;

/// Arguments of `k2rpq info`.
#[derive(clap::Args)]
pub struct Args {
    /// Store folder.
    pub store: PathBuf,
    /// Print the manifest as JSON instead of a table.
    #[arg(long)]
    pub json: bool,
    /// Also read every tree, bitmap and kept line list and check their checksums.
    #[arg(long)]
    pub verify: bool,
}

/// Runs the command.
pub fn run(args: Args) -> anyhow::Result<()> {
    let store =
        Store::open(&args.store).with_context(|| format!("opening {}", args.store.display()))?;
    if args.verify {
        store.verify().context("verifying")?;
    }
    let m = store.manifest();
    if args.json {
        println!("{}", serde_json::to_string_pretty(m)?);
        return Ok(());
    }
    let dict_bytes: u64 = m.dictionary.iter().map(|s| s.bytes).sum();
    println!(
        "store {} (format {} v{}): {} nodes, dictionary {} segment(s) {:.1} KiB ({:.1} bytes/term), {} graph(s)",
        args.store.display(),
        m.format,
        m.version,
        m.node_count,
        m.dictionary.len(),
        dict_bytes as f64 / 1024.0,
        dict_bytes as f64 / (m.node_count.max(1)) as f64,
        m.graphs.len()
    );
    for (gi, g) in m.graphs.iter().enumerate() {
        println!();
        println!(
            "graph {gi}: {} - {} edges, {} nodes, {} predicates",
            g.name.as_deref().unwrap_or("(default graph)"),
            g.edges,
            g.nodes,
            g.predicates.len()
        );
        let width = g
            .predicates
            .iter()
            .map(|p| p.iri.len())
            .max()
            .unwrap_or(9)
            .max(9);
        println!(
            "  {:<width$} {:>10} {:>12} {:>9} {:>12} {:>12}  file",
            "predicate", "id", "edges", "bits/edge", "bytes", "lists bytes"
        );
        for p in &g.predicates {
            // The line lists kept on disk (`k2rpq lines`), both orientations together.
            let lists = match p.lines.iter().map(|l| l.bytes).sum::<u64>() {
                0 => "-".to_string(),
                b => b.to_string(),
            };
            println!(
                "  {:<width$} {:>10} {:>12} {:>9.2} {:>12} {:>12}  {}",
                p.iri, p.id, p.edges, p.bits_per_edge, p.bytes, lists, p.file
            );
        }
    }
    if let Some(last) = m.loads.last() {
        println!();
        println!(
            "last load: {} statements ({} skipped) in {:.2}s from {}",
            last.statements,
            last.skipped,
            last.total_seconds,
            last.inputs.join(", ")
        );
    }
    if args.verify {
        println!("verified: every file matches its checksum");
    }
    Ok(())
}
