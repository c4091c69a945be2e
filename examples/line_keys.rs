//! Prints, for every relation whose line lists a workload's queries read, how its keys
//! (non-empty lines) are spread: count, first and last key, cells, the index kept (by
//! line, rank, or none: a binary search), and the lists' bytes.
//!
//! `cargo run --release --example line_keys -- STORE WORKLOAD.rpq`

use k2rpq::database::{Database, DatabaseOptions, EngineChoice};
use k2rpq::rpq::{parse_log_line, EvalOptions};

fn main() -> anyhow::Result<()> {
    let mut args = std::env::args().skip(1);
    let dir = args.next().expect("usage: line_keys STORE WORKLOAD");
    let workload = args.next().expect("a workload file");
    let db = Database::open(
        dir.as_ref(),
        &DatabaseOptions {
            engine: EngineChoice::Cpu,
            ..Default::default()
        },
    )?;
    for line in std::fs::read_to_string(&workload)?.lines() {
        if line.trim().is_empty() || line.starts_with('#') {
            continue;
        }
        let q = parse_log_line(line)?;
        db.run_log_query(&q, &EvalOptions::default())?;
    }
    let store = db.store();
    println!("relation side keys first last span/keys cells index MiB rank-MiB");
    for info in store.predicates(0).to_vec() {
        let tree = store.relation(0, info.id)?.expect("listed");
        for by_column in [false, true] {
            if let Some(l) = tree.lines_if_built(by_column) {
                let keys = l.keys();
                let (first, last) = (
                    keys.first().copied().unwrap_or(0),
                    keys.last().copied().unwrap_or(0),
                );
                println!(
                    "{} {} {} {} {} {:.1} {} {} {:.1} {:.2}",
                    info.iri,
                    if by_column { "cols" } else { "rows" },
                    keys.len(),
                    first,
                    last,
                    (last as f64 + 1.0) / keys.len().max(1) as f64,
                    info.edges,
                    if l.has_index() {
                        "by_line"
                    } else {
                        "rank-or-search"
                    },
                    l.bytes() as f64 / (1 << 20) as f64,
                    (last as f64 + 1.0) / 8.0 * 1.06 / (1 << 20) as f64,
                );
            }
        }
    }
    Ok(())
}
