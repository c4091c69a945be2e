//! `k2rpq-bench cache`: throughput of a mixed workload of products over many relations
//! at several cache budgets (fractions of the data's size); prints a Markdown table.

use std::path::PathBuf;
use std::sync::Arc;

use anyhow::Context;
use k2rpq::cache::human_bytes;
use k2rpq::engine::cpu::CpuEngine;
use k2rpq::engine::{Engine, MatrixConfig};
use k2rpq::k2tree::K2Tree;
use k2rpq_bench::build::Synthetic;
use k2rpq_bench::cache::{data_bytes, run as bench, side_of, split_relations, table, Workload};
use k2rpq_bench::gen::{Rmat, Web};
use k2rpq_bench::input::{read_edges, InputFormat};

/// Which engine runs the products.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum EngineKind {
    /// The multi-threaded CPU engine.
    Cpu,
    /// The GPU engine.
    Gpu,
}

/// The configuration asked for every relation.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum ConfigArg {
    /// Signatures and directory only.
    TreeOnly,
    /// Also the cached frontier, where the cache finds it worth it.
    Frontier,
}

/// Arguments of `k2rpq bench-cache`.
#[derive(clap::Args)]
pub struct Args {
    /// An edge-list file (tsv or mtx, `.gz` allowed) to split into relations; without it a
    /// synthetic graph is generated.
    #[arg(long)]
    pub input: Option<PathBuf>,
    /// Format of `--input` (default: from the file name).
    #[arg(long, value_enum)]
    pub format: Option<InputFormat>,
    /// The synthetic graph (without `--input`).
    #[arg(long, value_enum, default_value = "rmat")]
    pub synthetic: Synthetic,
    /// Edges of the synthetic graph (e.g. 10M).
    #[arg(long, default_value = "4M", value_parser = k2rpq_cli::args::parse_count)]
    pub edges: u64,
    /// Relations the graph is split into (edges assigned by hash).
    #[arg(long, visible_alias = "synthetic-relations", default_value_t = 50)]
    pub relations: usize,
    /// Budgets, in percent of the data's size.
    #[arg(long, value_delimiter = ',', default_value = "100,50,10")]
    pub budgets: Vec<f64>,
    /// Products in the workload.
    #[arg(long, default_value_t = 2000)]
    pub ops: usize,
    /// The GPU whose cache is measured (`--gpus 1`; default GPU 0). One device only: the
    /// benchmark measures one device cache.
    #[arg(long)]
    pub gpus: Option<k2rpq::engine::gpu::GpuSelection>,
    /// Threads sharing the cache.
    #[arg(long, default_value_t = 4)]
    pub threads: usize,
    /// Words per node of each batch (64 sources per word).
    #[arg(long, default_value_t = 1)]
    pub words: usize,
    /// Zipf exponent of relation popularity (0: uniform).
    #[arg(long, default_value_t = 1.0)]
    pub zipf: f64,
    /// Share of dense products (the rest are masked).
    #[arg(long, default_value_t = 0.25)]
    pub dense_share: f64,
    /// Configuration asked for every relation.
    #[arg(long, value_enum, default_value = "frontier")]
    pub config: ConfigArg,
    /// Requests before a relation is hot enough for its cached frontier.
    #[arg(long, default_value_t = 1)]
    pub hot_after: u64,
    /// Seed of the generator, the split and the workload.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// The engine.
    #[arg(long, value_enum, default_value = "cpu")]
    pub engine: EngineKind,
    /// Also print each budget's full cache statistics.
    #[arg(long)]
    pub stats: bool,
}

/// Runs the command.
pub fn run(args: Args) -> anyhow::Result<()> {
    anyhow::ensure!(args.relations > 0, "--relations must be at least 1");
    anyhow::ensure!(
        args.budgets.iter().all(|&b| b > 0.0),
        "--budgets are percentages above 0"
    );
    let (nodes, codes, what) = match &args.input {
        Some(path) => {
            let format = args.format.unwrap_or_else(|| InputFormat::from_path(path));
            let list = read_edges(path, format, None)
                .with_context(|| format!("reading {}", path.display()))?;
            let side = list.rows.max(list.cols);
            (side, list.codes, path.display().to_string())
        }
        None => {
            let g = match args.synthetic {
                Synthetic::Rmat => Rmat::graph500(args.edges, args.seed).generate(),
                Synthetic::Web => Web::like_cnr(args.edges, args.seed).generate(),
            };
            let side = g.nodes.max(side_of(&g.codes));
            (
                side,
                g.codes,
                format!("{:?} {} edges", args.synthetic, args.edges),
            )
        }
    };
    let relations = split_relations(nodes, &codes, args.relations, args.seed);
    drop(codes);
    let workload = Workload {
        ops: args.ops,
        threads: args.threads.max(1),
        words: args.words.max(1),
        zipf: args.zipf,
        dense_share: args.dense_share,
        config: match args.config {
            ConfigArg::TreeOnly => MatrixConfig::TreeOnly,
            ConfigArg::Frontier => MatrixConfig::CachedFrontier,
        },
        hot_after: args.hot_after,
        seed: args.seed,
        ..Workload::default()
    };
    let fractions: Vec<f64> = args.budgets.iter().map(|b| b / 100.0).collect();
    match args.engine {
        EngineKind::Cpu => report(
            Arc::new(CpuEngine::new()),
            &relations,
            &fractions,
            &workload,
            &what,
            args.stats,
        ),
        EngineKind::Gpu => report(
            Arc::new(one_gpu(args.gpus.as_ref())?),
            &relations,
            &fractions,
            &workload,
            &what,
            args.stats,
        ),
    }
}

fn report<E: Engine>(
    engine: Arc<E>,
    relations: &[Arc<K2Tree>],
    fractions: &[f64],
    w: &Workload,
    what: &str,
    stats: bool,
) -> anyhow::Result<()> {
    let data = data_bytes(&*engine, relations, w.config);
    let nnz: u64 = relations.iter().map(|t| t.nnz()).sum();
    println!(
        "{what}: {} relations, {nnz} edges, {} with {:?} on the {} engine; {} products on {} threads, {} sources each",
        relations.len(),
        human_bytes(data),
        w.config,
        engine.name(),
        w.ops,
        w.threads,
        64 * w.words
    );
    let rows = bench(engine, relations, fractions, w)?;
    println!("\n{}", table(data, &rows));
    if stats {
        for r in &rows {
            println!("budget {:.0}% of data:\n{}\n", 100.0 * r.fraction, r.stats);
        }
    }
    Ok(())
}

/// The one GPU engine `--gpus` names (GPU 0 by default); an error for several.
fn one_gpu(
    gpus: Option<&k2rpq::engine::gpu::GpuSelection>,
) -> anyhow::Result<k2rpq::engine::gpu::GpuEngine> {
    let ordinals = gpus
        .cloned()
        .unwrap_or_default()
        .ordinals()
        .context("--engine gpu")?;
    match ordinals.as_slice() {
        [k] => Ok(k2rpq::engine::gpu::GpuEngine::new(*k).context("--engine gpu")?),
        _ => anyhow::bail!(
            "bench-cache measures one device cache: give one GPU (--gpus {}), not {:?}",
            ordinals[0],
            ordinals
        ),
    }
}
