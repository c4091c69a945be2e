//! `k2rpq-bench spmv`: our engines against cuSPARSE CSR and a Boolean CSR on one matrix -
//! bytes, working set, median product time and the ratio to cuSPARSE; a table on stdout,
//! every figure as JSON (`--json`), the working-set/time figure as SVG (`--svg`).

use std::path::PathBuf;
use std::time::Instant;

use anyhow::Context;
use indicatif::ProgressBar;
use k2rpq::engine::gpu::GpuSelection;
use k2rpq::engine::gpu::LeafKernel;
use k2rpq::k2tree::K2Tree;
use k2rpq_bench::build::{Source, Synthetic};
use k2rpq_bench::input::InputFormat;
use k2rpq_bench::spmv::graph::{load, SpmvInput};
use k2rpq_bench::spmv::stripes::{run_stripes, StripeOptions};
use k2rpq_bench::spmv::{prepare, run as bench, svg, SpmvOptions};

/// Arguments of `k2rpq bench-spmv`.
#[derive(clap::Args)]
#[command(group(clap::ArgGroup::new("input").required(true).args(["tsv", "mtx", "bvgraph", "synthetic", "store"])))]
pub struct Args {
    /// Edge list, `src<TAB>dst` per line (`.gz` allowed).
    #[arg(long)]
    pub tsv: Option<PathBuf>,
    /// Matrix Market coordinate file (`.gz` allowed).
    #[arg(long)]
    pub mtx: Option<PathBuf>,
    /// BVGraph basename (`BASENAME.graph` + `.properties`); needs the `webgraph` feature.
    #[arg(long)]
    pub bvgraph: Option<PathBuf>,
    /// A store made by `k2rpq load`: benchmark one of its predicates (`--predicate`).
    #[arg(long, requires = "predicate")]
    pub store: Option<PathBuf>,
    /// The predicate IRI (without `<>`) of `--store` to benchmark, in the default graph.
    #[arg(long)]
    pub predicate: Option<String>,
    /// A synthetic graph: R-MAT (Graph500 parameters) or web-like.
    #[arg(long, value_enum)]
    pub synthetic: Option<Synthetic>,
    /// Edges of the synthetic graph (e.g. 200M, 1G).
    #[arg(long, default_value = "10M", value_parser = k2rpq_cli::args::parse_count)]
    pub edges: u64,
    /// Benchmark this many copies of the input along the diagonal: a larger graph with
    /// the input's clustering (`--tsv cnr-2000.arcs.tsv.gz --copies 64`: 206M edges).
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..))]
    pub copies: u32,
    /// Seed of the generator.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Timed repeats per product (the median is reported).
    #[arg(long, default_value_t = 50)]
    pub repeats: usize,
    /// Untimed runs before timing.
    #[arg(long, default_value_t = 5)]
    pub warmup: usize,
    /// Microseconds each timed repeat holds the stream before its start event, so that
    /// the events time the device's work, not the host's submission of it (0: no hold,
    /// timing from an idle stream; see docs/PERFORMANCE.md, "Method").
    #[arg(long, default_value_t = 200)]
    pub hold_us: u64,
    /// Batch widths of the f32 products.
    #[arg(long, value_delimiter = ',', default_value = "1,4,16,64,128")]
    pub batches: Vec<usize>,
    /// Sources of the bit-packed Boolean batches (multiples of 64).
    #[arg(long, value_delimiter = ',', default_value = "64,128,256")]
    pub bit_batches: Vec<usize>,
    /// Write every figure as JSON here.
    #[arg(long)]
    pub json: Option<PathBuf>,
    /// Write the working-set vs time figure (SVG) here.
    #[arg(long)]
    pub svg: Option<PathBuf>,
    /// Memory budget in bytes (`12G` allowed): products whose working set exceeds it are
    /// skipped, and a CSR that does not fit is not built (the tree runs alone).
    #[arg(long, value_parser = k2rpq_cli::args::parse_count)]
    pub budget: Option<u64>,
    /// CPU only: run no GPU contender.
    #[arg(long)]
    pub cpu: bool,
    /// GPUs (`all` or a list like `0,1`): time only one bit-packed Boolean product (the
    /// first `--bit-batches` width) with the matrix split in row stripes across 1, 2, ..,
    /// N of these GPUs, checked against the CPU engine's result; no other contender.
    #[arg(long)]
    pub gpus: Option<GpuSelection>,
    /// With --gpus: device bytes each GPU may use (`40G`); a GPU count whose largest
    /// stripe does not fit is reported as not fitting (shows a graph larger than one GPU).
    #[arg(long, value_parser = k2rpq_cli::args::parse_count)]
    pub gpu_budget: Option<u64>,
    /// Do not time the CPU engine (it still computes the reference the others are
    /// checked against); for billion-edge graphs.
    #[arg(long, conflicts_with = "cpu")]
    pub skip_cpu: bool,
    /// GPU leaf-kernel variants to run beside the default (`tuned`), each as contenders of
    /// their own: `cells` (the paper's), `rows`, `wrank`, `wagg`, `window`, and `runs`
    /// (block entries only).
    #[arg(long, value_delimiter = ',', default_value = "cells,rows,wrank,wagg,window,runs", value_parser = parse_leaf_kernel)]
    pub leaf_kernels: Vec<LeafKernel>,
    /// Iteration caps of the row groups (`gpu k2+F rowgrp`), each timed as a contender of
    /// its own (` I<cap>` unless the default, 8): the longest chain a warp runs against the
    /// number of warps; 1-64.
    #[arg(long, value_delimiter = ',', default_value = "8,10,12", value_parser = clap::value_parser!(u32).range(1..=64))]
    pub row_group_iterations: Vec<u32>,
}

fn parse_leaf_kernel(s: &str) -> Result<LeafKernel, String> {
    LeafKernel::from_name(s).ok_or_else(|| {
        let names: Vec<&str> = LeafKernel::ALL.iter().map(|k| k.name()).collect();
        format!("unknown leaf kernel `{s}` (one of {})", names.join(", "))
    })
}

/// Runs the command.
pub fn run(args: Args) -> anyhow::Result<()> {
    k2rpq::engine::gpu::set_timing_hold_ns(args.hold_us.saturating_mul(1000));
    let input = if let Some(p) = &args.tsv {
        SpmvInput::Source(Source::File {
            path: p.clone(),
            format: InputFormat::Tsv,
        })
    } else if let Some(p) = &args.mtx {
        SpmvInput::Source(Source::File {
            path: p.clone(),
            format: InputFormat::Mtx,
        })
    } else if let Some(p) = &args.bvgraph {
        SpmvInput::BvGraph(p.clone())
    } else if let Some(kind) = args.synthetic {
        SpmvInput::Source(Source::Synthetic {
            kind,
            edges: args.edges,
            seed: args.seed,
        })
    } else if let (Some(dir), Some(iri)) = (&args.store, &args.predicate) {
        let store = k2rpq::store::Store::open(dir)
            .with_context(|| format!("opening store {}", dir.display()))?;
        let id = store
            .dictionary()
            .id(oxrdf::NamedNodeRef::new(iri)
                .with_context(|| format!("bad IRI `{iri}`"))?
                .into())
            .with_context(|| format!("the store does not know <{iri}>"))?;
        let tree = store.relation(0, id)?.with_context(|| {
            format!(
                "<{iri}> has no edge in the default graph of {}",
                dir.display()
            )
        })?;
        SpmvInput::Tree {
            name: format!("<{iri}>"),
            tree,
        }
    } else {
        anyhow::bail!("give one of --tsv, --mtx, --bvgraph, --synthetic, --store with --predicate");
    };
    let opts = SpmvOptions {
        repeats: args.repeats,
        warmup: args.warmup,
        batches: args.batches.clone(),
        bit_batches: args.bit_batches.clone(),
        budget: args.budget,
        cpu_only: args.cpu,
        skip_cpu: args.skip_cpu,
        progress: true,
        leaf_kernels: args.leaf_kernels.clone(),
        row_group_iterations: args.row_group_iterations.clone(),
    };
    if let Some(gpus) = &args.gpus {
        return run_stripes_cmd(&args, gpus, &input);
    }
    let t = Instant::now();
    let pb = ProgressBar::new_spinner();
    pb.set_message("loading the graph");
    let g = load(&input, Some(&pb))
        .and_then(|g| g.diagonal_copies(args.copies))
        .context("loading the benchmark graph")?;
    pb.set_message(format!("building the tree and CSR of {}", g.name));
    let prepared = prepare(g, &opts)?;
    pb.finish_and_clear();
    eprintln!(
        "{}: {} cells, tree and CSR built in {:.1} s",
        prepared.info.name,
        prepared.info.nnz,
        t.elapsed().as_secs_f64()
    );
    let report = bench(&prepared, &opts)?;
    print!("{}", report.table());
    if report
        .measurements
        .iter()
        .any(|m| !m.contender.starts_with("cpu"))
    {
        print_timing_note(args.hold_us);
    }
    if let Some(p) = &args.json {
        report
            .write_json(p)
            .with_context(|| format!("writing {}", p.display()))?;
    }
    if let Some(p) = &args.svg {
        std::fs::write(p, svg::figure(&report))
            .with_context(|| format!("writing {}", p.display()))?;
    }
    Ok(())
}

/// `k2rpq bench-spmv --gpus`: the row-stripe product on 1..N GPUs.
fn run_stripes_cmd(args: &Args, gpus: &GpuSelection, input: &SpmvInput) -> anyhow::Result<()> {
    let ordinals = gpus.ordinals().context("bench-spmv --gpus")?;
    let sources = args.bit_batches.first().copied().unwrap_or(64);
    let t = Instant::now();
    let g = load(input, None)
        .and_then(|g| g.diagonal_copies(args.copies))
        .context("loading the benchmark graph")?;
    let tree = match (g.tree, g.codes) {
        (Some(t), _) => t,
        (None, Some(mut codes)) => std::sync::Arc::new(
            K2Tree::from_codes(g.rows, g.cols, &mut codes).context("building the tree")?,
        ),
        (None, None) => anyhow::bail!("{}: neither edges nor a tree", g.name),
    };
    eprintln!(
        "{}: {} cells, tree built in {:.1} s; row stripes on GPUs {:?}",
        g.name,
        tree.nnz(),
        t.elapsed().as_secs_f64(),
        ordinals
    );
    let opts = StripeOptions {
        sources,
        repeats: args.repeats,
        warmup: args.warmup,
        gpu_budget: args.gpu_budget,
    };
    let report = run_stripes(&tree, &ordinals, &opts)?;
    print!("{}", report.table());
    if let Some(p) = &args.json {
        std::fs::write(p, serde_json::to_string_pretty(&report)?)
            .with_context(|| format!("writing {}", p.display()))?;
    }
    Ok(())
}

/// The line under a table that says how its GPU times were taken.
fn print_timing_note(hold_us: u64) {
    if hold_us == 0 {
        println!("GPU timing: events around each repeat on an idle stream (--hold-us 0: the host's submission counted)");
    } else {
        println!("GPU timing: events around each repeat, queued behind a {hold_us} µs hold of the stream (--hold-us)");
    }
}
