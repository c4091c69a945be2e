//! `k2rpq explain`: print the plan of an `S REGEX O` query (automaton, direction,
//! batching) and, after running it, the steps taken with frontier sizes and times.

use k2rpq::engine::Engine;
use k2rpq::rpq::terms::resolve_log_query;
use k2rpq::rpq::{
    parse_log_line_with, path_iris, plan, EvalOptions, PathGraph, PathResult, Plan,
    UNKNOWN_PREDICATE,
};

use crate::rpq::{evaluate_on, relations_of, EngineTask, EvalArgs};
use crate::source::{open_source, SourceArgs};

/// Arguments of `k2rpq explain`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// The graph.
    #[command(flatten)]
    pub source: SourceArgs,
    /// The query, `S REGEX O`.
    pub query: String,
    /// Print the plan only, without running it.
    #[arg(long)]
    pub plan_only: bool,
    /// Evaluation options.
    #[command(flatten)]
    pub eval: EvalArgs,
}

/// Runs the command.
pub fn run(args: Args) -> anyhow::Result<()> {
    crate::report::silence_notices(args.eval.quiet);
    let options = args.eval.options(true)?;
    let (graph, terms) = open_source(&args.source)?;
    let q = parse_log_line_with(&args.query, &args.eval.prefixes())?;
    let rq = resolve_log_query(&q, terms.as_ref());
    let p = plan(graph.as_ref(), &rq.path, rq.subject, rq.object, &options);
    let missing: Vec<String> = path_iris(&q.path)
        .into_iter()
        .filter(|iri| terms.iri_id(iri).is_none())
        .map(|iri| format!("<{iri}>"))
        .collect();
    // Predicates the graph lacks all resolve to one id that matches nothing.
    let unknown = match missing.as_slice() {
        [one] => format!("{one} (not in the graph)"),
        _ => "(a predicate not in the graph)".to_owned(),
    };
    if !missing.is_empty() {
        println!("not in the graph: {}", missing.join(", "));
    }
    let name = |id: u32| match id {
        UNKNOWN_PREDICATE => Some(unknown.clone()),
        id => terms.term(id),
    };
    print!("{}", p.display_with(&name));
    if args.plan_only {
        return Ok(());
    }
    args.eval
        .device
        .check_store_only(args.source.store.is_some())?;
    let (r, db) = match &args.source.store {
        // A store runs through a Database: the engine the `auto` choice picks for this
        // query, relations from the device cache.
        Some(dir) => {
            let db = args.eval.open_database(dir)?;
            (db.run_log_query(&q, &options)?.result, Some(db))
        }
        None => (
            args.eval.dispatch(Run {
                graph: graph.as_ref(),
                plan: &p,
                options: &options,
            })?,
            None,
        ),
    };
    println!(
        "result: {} pairs{}{}",
        r.count,
        if r.truncated { " (limit reached)" } else { "" },
        if r.timed_out { " (timed out)" } else { "" }
    );
    print!("{}", r.trace);
    if let Some(db) = &db {
        args.eval.device.print_stats(db);
        print_lines(db);
    }
    Ok(())
}

struct Run<'a> {
    graph: &'a dyn PathGraph,
    plan: &'a Plan,
    options: &'a EvalOptions,
}

impl EngineTask for Run<'_> {
    type Output = PathResult;
    fn run<E: Engine>(self, engines: &[E]) -> anyhow::Result<PathResult> {
        let mut rels = relations_of(engines, self.graph, self.options);
        evaluate_on(engines, &mut rels, self.graph, self.plan, self.options)
    }
}

/// The line lists of the relations the query mapped: built, read from a kept file, or
/// not yet (with the visits spent towards the build), bytes and time; then the store's
/// line memory totals.
fn print_lines(db: &k2rpq::database::Database) {
    for (_, p, tree) in db.store().mapped_relations() {
        let name = db
            .term(p)
            .map(|t| t.to_string())
            .unwrap_or_else(|| format!("#{p}"));
        let side = |i: &k2rpq::k2tree::LineInfo| {
            use k2rpq::k2tree::LineFileState;
            let how = match &i.file {
                Some(LineFileState::Read) => "read from its file".to_string(),
                Some(LineFileState::Failed(e)) => format!("built (its file failed: {e})"),
                _ => "built".to_string(),
            };
            match (i.bytes, i.build_time) {
                (Some(b), Some(t)) => format!(
                    "{how} ({:.1} MiB, {:.1} ms)",
                    b as f64 / (1 << 20) as f64,
                    t.as_secs_f64() * 1e3
                ),
                _ => format!("not built ({} of {} visits)", i.spent_visits, i.threshold),
            }
        };
        let [rows, cols] = tree.line_info();
        println!(
            "lines {name} ({} cells, {} nodes): rows {}, columns {}",
            tree.nnz(),
            tree.nodes(),
            side(&rows),
            side(&cols)
        );
    }
    println!("{}", db.store().line_budget().stats());
}
