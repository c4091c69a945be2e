//! Arguments shared by several commands: the device options of a store opened as a
//! [`Database`], the engine choice, counts.

use anyhow::Context;
use k2rpq::cache::MemoryBudget;
use k2rpq::database::{Database, DatabaseError, DatabaseOptions, EngineChoice};
use k2rpq::engine::gpu::{FrontierLayout, GpuEngine, GpuOptions, GpuSelection, Tuning};

/// Device options of the commands that open a store as a [`Database`] (`rpq`, `explain`,
/// `query`, and the workload benchmark).
#[derive(clap::Args, Debug, Clone, Default)]
#[command(next_help_heading = "Device")]
pub struct DeviceArgs {
    /// GPUs: `all` or a list like `0,1` (default: GPU 0). With several, the batches of a
    /// var→var query are split across them and one-batch queries go to the least busy.
    #[arg(long)]
    pub gpus: Option<GpuSelection>,
    /// GPU memory for resident relations plus query working memory, per GPU (`8GiB`,
    /// `512MB`, or `60%` of free device memory; default 75%). Relations stay resident
    /// across the queries of a run.
    #[arg(long, value_name = "BYTES|PERCENT")]
    pub gpu_budget: Option<MemoryBudget>,
    /// Host memory for the decoded successor and predecessor lists that speed up walks
    /// from constants (`2GiB`, `512MB`, or `10%` of physical memory; default 25%; `0`:
    /// none).
    #[arg(long, value_name = "BYTES|PERCENT")]
    pub line_memory: Option<MemoryBudget>,
    /// Print the device cache statistics at the end (hits, misses, evictions, bytes
    /// uploaded, peak bytes).
    #[arg(long)]
    pub stats: bool,
    /// How resident relations are laid out on the GPU.
    #[command(flatten)]
    pub tuning: TuningArgs,
}

/// How resident relations are laid out on the GPU. The defaults are the measured best for
/// most workloads; docs/ARCHITECTURE.md explains each layout.
#[derive(clap::Args, Debug, Clone, Default)]
#[command(next_help_heading = "Tuning")]
pub struct TuningArgs {
    /// What a resident relation's cached frontier holds: `rowblocks` (default: for
    /// forward paths), `colblocks` (for backward paths), `both` (each direction fast,
    /// twice the memory), `blocks` or `codes`.
    #[arg(long, value_parser = parse_frontier_layout, hide_short_help = true)]
    pub frontier_layout: Option<FrontierLayout>,
    /// Keep a `rowblocks` frontier as plain row-sorted entries, not in row windows.
    #[arg(long, hide_short_help = true)]
    pub no_row_windows: bool,
    /// The most nodes of the top level a relation held without its cached frontier
    /// keeps expanded (`1048576` or `2^20`, the default): more resident bytes, fewer
    /// steps per product.
    #[arg(long, value_parser = parse_top_nodes, hide_short_help = true)]
    pub top_nodes: Option<u64>,
    /// Also keep a `rowblocks` frontier's entries in row groups, which bit-packed right
    /// products read instead (for relations whose vectors fit the GPU's L2 cache).
    #[arg(long, hide_short_help = true)]
    pub row_groups: bool,
    /// Relations held without their cached frontier list each cell that hangs alone
    /// below a path of at least this many tree nodes beside the tree (0: none).
    #[arg(
        long,
        value_name = "NODES",
        default_value_t = 0,
        hide_short_help = true
    )]
    pub lone_paths: u32,
}

/// A node count written as a number or as `2^K`.
fn parse_top_nodes(s: &str) -> Result<u64, String> {
    let bad =
        || format!("invalid top-level size {s:?} (a node count like 1048576 or 2^20, up to 2^40)");
    let n = match s.trim().split_once('^') {
        Some(("2", k)) => match k.trim().parse::<u32>() {
            Ok(k) if k <= 40 => 1u64 << k,
            _ => return Err(bad()),
        },
        Some(_) => return Err(bad()),
        None => s.trim().parse::<u64>().map_err(|_| bad())?,
    };
    if n == 0 || n > 1 << 40 {
        return Err(bad());
    }
    Ok(n)
}

/// A [`FrontierLayout`] by its name.
fn parse_frontier_layout(s: &str) -> Result<FrontierLayout, String> {
    FrontierLayout::from_name(s).ok_or_else(|| {
        let names: Vec<&str> = FrontierLayout::ALL.iter().map(|l| l.name()).collect();
        format!(
            "unknown frontier layout {s:?} (one of {})",
            names.join(", ")
        )
    })
}

impl DeviceArgs {
    /// The options of a [`Database`] on `engine`.
    pub fn database_options(&self, engine: EngineChoice) -> DatabaseOptions {
        DatabaseOptions {
            engine,
            gpu_budget: self.gpu_budget,
            gpus: self.gpus.clone(),
            line_memory: self.line_memory,
            gpu_options: self.gpu_options(),
        }
    }

    /// The GPU engines' options these arguments ask for.
    pub fn gpu_options(&self) -> GpuOptions {
        let t = &self.tuning;
        let tuning = Tuning::default();
        GpuOptions {
            frontier: t.frontier_layout.unwrap_or_default(),
            tuning: Tuning {
                row_windows: !t.no_row_windows,
                top_nodes: t.top_nodes.unwrap_or(tuning.top_nodes),
                row_groups: t.row_groups,
                lone_paths: t.lone_paths,
                ..tuning
            },
        }
    }

    /// The GPU engines `engine` runs on with these device options (see
    /// [`EngineChoice::gpu_engines`]); empty for the CPU engine.
    pub fn gpu_engines(&self, engine: EngineChoice) -> anyhow::Result<Vec<GpuEngine>> {
        engine
            .gpu_engines(self.gpus.as_ref(), self.gpu_options())
            .with_context(|| format!("--engine {engine}"))
    }

    /// Opens the store in `dir` on `engine` with these device options.
    pub fn open_database(
        &self,
        dir: &std::path::Path,
        engine: EngineChoice,
    ) -> anyhow::Result<Database> {
        Database::open(dir, &self.database_options(engine)).map_err(|e| {
            // A missing GPU is about the flags, not the store.
            let context = match e {
                DatabaseError::NoGpu(_) | DatabaseError::Gpus(_) => format!("--engine {engine}"),
                _ => format!("opening store {}", dir.display()),
            };
            anyhow::Error::new(e).context(context)
        })
    }

    /// Errors out when a store-only option is given for another source; for another
    /// source, `--line-memory` sets the process-wide budget of its trees' lists.
    pub fn check_store_only(&self, has_store: bool) -> anyhow::Result<()> {
        if let (false, Some(budget)) = (has_store, self.line_memory) {
            k2rpq::k2tree::LineBudget::global()
                .set_limit(k2rpq::database::line_memory_bytes(budget)?);
        }
        if !has_store && (self.gpu_budget.is_some() || self.stats) {
            anyhow::bail!(
                "--gpu-budget and --stats need --store (the device cache serves a store's relations)"
            );
        }
        Ok(())
    }

    /// Prints `db`'s device cache statistics on stderr when `--stats` asked for them.
    pub fn print_stats(&self, db: &Database) {
        if self.stats {
            match db.gpu_stats() {
                Some(s) => eprintln!("device cache:\n{s}"),
                None => eprintln!("device cache: not in use (no GPU engine)"),
            }
        }
    }
}

/// A count with an optional decimal suffix: `123`, `50M`, `1.5G`, `10k`.
pub fn parse_count(s: &str) -> Result<u64, String> {
    let (num, mul) = match s.chars().last() {
        Some('k' | 'K') => (&s[..s.len() - 1], 1e3),
        Some('m' | 'M') => (&s[..s.len() - 1], 1e6),
        Some('g' | 'G') => (&s[..s.len() - 1], 1e9),
        _ => (s, 1.0),
    };
    match num.parse::<f64>() {
        Ok(v) if v >= 0.0 && v.is_finite() => Ok((v * mul).round() as u64),
        _ => Err(format!("`{s}` is not a count")),
    }
}

/// A `--timeout`: a number of seconds, finite and positive, that fits in a
/// [`std::time::Duration`] (decimals allowed: `0.5`).
///
/// ```
/// use k2rpq_cli::args::parse_seconds;
/// assert_eq!(parse_seconds("1.5"), Ok(std::time::Duration::from_millis(1500)));
/// for bad in ["0", "-1", "nan", "inf", "1e20", "soon", ""] {
///     assert!(parse_seconds(bad).is_err(), "{bad}");
/// }
/// ```
pub fn parse_seconds(s: &str) -> Result<std::time::Duration, String> {
    let bad = |why: &str| format!("{s:?} is not a number of seconds ({why})");
    let v: f64 = s
        .trim()
        .parse()
        .map_err(|_| bad("give a positive number such as 30 or 0.5"))?;
    if !v.is_finite() || v <= 0.0 {
        return Err(bad("give a finite positive number"));
    }
    // Durations hold up to 2^64 seconds; a checked conversion, where `from_secs_f64`
    // would panic.
    match std::time::Duration::try_from_secs_f64(v) {
        Ok(d) if d > std::time::Duration::ZERO && v <= MAX_SECONDS => Ok(d),
        Ok(_) => Err(bad(&format!("at most {MAX_SECONDS:e}, a positive number"))),
        Err(_) => Err(bad("too large")),
    }
}

/// The longest `--timeout`: about 31.7 years, past any run and well inside what an
/// [`std::time::Instant`] can be moved by on every platform.
const MAX_SECONDS: f64 = 1e9;

/// A `--limit`: a whole number of rows from 1 up.
///
/// ```
/// use k2rpq_cli::args::parse_limit;
/// assert_eq!(parse_limit("10"), Ok(10));
/// for bad in ["0", "-3", "1.5", "lots", "99999999999999999999999"] {
///     assert!(parse_limit(bad).is_err(), "{bad}");
/// }
/// ```
pub fn parse_limit(s: &str) -> Result<u64, String> {
    match s.trim().parse::<u64>() {
        Ok(0) => Err("--limit 0 would write nothing: give at least 1".into()),
        Ok(n) => Ok(n),
        Err(e) => Err(format!("{s:?} is not a number of rows: {e}")),
    }
}

/// The `--engine` values, listed in help and checked by clap.
pub fn engine_parser() -> impl clap::builder::TypedValueParser<Value = EngineChoice> {
    use clap::builder::TypedValueParser;
    clap::builder::PossibleValuesParser::new(EngineChoice::ALL.map(EngineChoice::name))
        .map(|s| s.parse::<EngineChoice>().expect("one of the listed names"))
}

#[cfg(test)]
mod tests {
    use super::parse_top_nodes;

    #[test]
    fn top_nodes_take_counts_and_powers_of_two() {
        assert_eq!(parse_top_nodes("1048576"), Ok(1 << 20));
        assert_eq!(parse_top_nodes("2^24"), Ok(1 << 24));
        assert_eq!(parse_top_nodes(" 2^ 0"), Ok(1));
        for bad in ["0", "2^41", "3^4", "2^x", "-5", "", "1e6"] {
            let err = parse_top_nodes(bad).unwrap_err();
            assert!(err.contains("invalid top-level size"), "{bad}: {err}");
        }
    }
}
