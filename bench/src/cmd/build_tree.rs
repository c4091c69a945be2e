//! `k2rpq-bench build-tree`: reads an edge list, builds its k²-tree, prints statistics and
//! (with `--out`) writes a `.k2` file.

use std::path::PathBuf;
use std::time::Instant;

use anyhow::Context;
use indicatif::{ProgressBar, ProgressStyle};
use k2rpq::k2tree::file::{self, WriteOptions};
use k2rpq::k2tree::{Directory, K2Tree};
use k2rpq_bench::input::{read_edges, InputFormat};

/// Arguments of `k2rpq build-tree`.
#[derive(clap::Args)]
pub struct Args {
    /// Edge list: `src<TAB>dst` per line (tsv) or Matrix Market (mtx); `.gz` allowed.
    pub input: PathBuf,
    /// Input format (default: from the file name, `.mtx[.gz]` is mtx, else tsv).
    #[arg(long, value_enum)]
    pub format: Option<InputFormat>,
    /// Write the tree to this `.k2` file.
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// Directory sampling period in nodes (a power of two >= 16; 0 stores none).
    #[arg(long, default_value_t = 256)]
    pub directory_sample: u32,
    /// Also store the cached frontier (8 bytes per last-internal-level node).
    #[arg(long)]
    pub frontier: bool,
}

/// Runs the command.
pub fn run(args: Args) -> anyhow::Result<()> {
    let format = args
        .format
        .unwrap_or_else(|| InputFormat::from_path(&args.input));
    let pb = ProgressBar::new(0);
    pb.set_style(ProgressStyle::with_template(
        "reading [{elapsed_precise}] {wide_bar} {bytes}/{total_bytes}",
    )?);
    let t = Instant::now();
    let mut edges = read_edges(&args.input, format, Some(&pb))?;
    pb.finish_and_clear();
    let read_s = t.elapsed().as_secs_f64();
    let t = Instant::now();
    let tree = K2Tree::from_codes(edges.rows, edges.cols, &mut edges.codes)
        .with_context(|| format!("{}: building the tree", args.input.display()))?;
    let build_s = t.elapsed().as_secs_f64();
    let input_edges = edges.codes.len();
    drop(edges);
    let mut tree = tree;
    if args.directory_sample > 0 {
        let dir = Directory::build(&tree, args.directory_sample);
        tree = tree.with_directory(dir);
    }
    if args.frontier {
        tree.frontier();
    }
    let s = tree.stats();
    println!("input            {}", args.input.display());
    println!("shape            {} x {}", s.rows, s.cols);
    println!("edges read       {input_edges} ({} distinct)", s.nnz);
    println!("levels           {}", s.levels);
    println!("nodes            {}", s.nodes);
    println!("nodes per level  {:?}", s.level_nodes);
    println!("bits/edge        {:.3}", s.bits_per_edge);
    println!("tree bytes       {}", s.tree_bytes);
    match tree.directory_if_built() {
        Some(d) if args.directory_sample > 0 => {
            println!("directory bytes  {} (sample {})", d.bytes(), d.sample)
        }
        _ => println!("directory bytes  0 (not stored)"),
    }
    if args.frontier {
        println!("frontier bytes   {}", s.frontier_bytes);
    } else {
        println!(
            "frontier bytes   0 (not stored; {} if --frontier)",
            s.frontier_bytes
        );
    }
    println!("read             {read_s:.2} s");
    println!(
        "build            {build_s:.3} s ({:.1} M edges/s)",
        input_edges as f64 / build_s.max(1e-9) / 1e6
    );
    if let Some(out) = &args.out {
        let h = file::write(
            &tree,
            out,
            WriteOptions {
                directory: (args.directory_sample > 0).then_some(args.directory_sample),
                frontier: args.frontier,
            },
        )?;
        println!(
            "wrote            {} ({} bytes)",
            out.display(),
            h.file_len()
        );
        // Read it back as a user would (mmap, checksums, structure), and compare.
        let t = Instant::now();
        let back = file::open(out, file::OpenOptions::default())?;
        let open_s = t.elapsed().as_secs_f64();
        anyhow::ensure!(
            back == tree,
            "{}: the file read back differs from the tree written",
            out.display()
        );
        println!("reopened         {open_s:.3} s (mmap; checksums and structure verified)");
    }
    Ok(())
}
