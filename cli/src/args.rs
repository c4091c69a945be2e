//! Arguments shared by several commands: the device options of a store opened as a
//! [`Database`], the engine choice, counts.

use anyhow::Context;
use k2rpq::database::{Database, DatabaseOptions, EngineChoice};
use k2rpq::engine::gpu::{FrontierLayout, GpuEngine, GpuOptions, GpuSelection};

/// Device options of the commands that open a store as a [`Database`] (`rpq`, `explain`,
/// `query`, `bench`).
#[derive(clap::Args, Debug, Clone, Default)]
pub struct DeviceArgs {
    /// GPUs: `all` or a list like `0,1` (default: GPU 0). With several, the batches of a
    /// var→var query are split across them and one-batch queries go to the least busy.
    #[arg(long)]
    pub gpus: Option<GpuSelection>,
    /// GPU memory for resident relations plus query working memory, per GPU (`8GiB`,
    /// `512MB`, `60%` of free device memory; default 75% of free device memory). Over a
    /// `--store`, relations stay resident across the queries of a run.
    #[arg(long)]
    pub gpu_budget: Option<String>,
    /// Host memory for the decoded line lists of the store's relations, which make host
    /// walks read a frontier node's edges instead of descending the k²-tree (`2GiB`,
    /// `512MB`, `10%` of physical memory; default 25%). A relation's lists are built once
    /// walks have spent a share of their build on descents; builds that do not fit are
    /// skipped (the walks keep descending). `0` builds none.
    #[arg(long)]
    pub line_memory: Option<String>,
    /// Print the device cache statistics (hits, misses, evictions, bytes uploaded, upload
    /// time, peak bytes) at the end (over a `--store`).
    #[arg(long)]
    pub stats: bool,
    /// What a resident relation's cached frontier holds on the GPU: `rowblocks` (default:
    /// fastest right products), `colblocks` (fastest left products, i.e. backward paths),
    /// `both` (both sorted copies: each direction fast, twice the frontier's memory),
    /// `blocks` or `codes` (the paper's).
    #[arg(long, value_parser = parse_frontier_layout)]
    pub frontier_layout: Option<FrontierLayout>,
    /// Keep a `rowblocks` frontier as plain row-sorted entries instead of laying it out in
    /// row windows (by default it is, when the relation's empty rows and the windows' pads
    /// add at most 10 % to it: bit-packed right products then store their output once,
    /// with no clear and no atomics).
    #[arg(long)]
    pub no_row_windows: bool,
    /// The most nodes of the top level a tree-only relation keeps expanded on the GPU
    /// (`1048576` or `2^20`, the default): a deeper top level skips expand steps for
    /// more resident bytes (at most the tree's own again). On 206 M-edge graphs `2^24`
    /// made tree-only products 22-35 % faster for 63-104 MB more per relation.
    #[arg(long, value_parser = parse_top_nodes)]
    pub top_nodes: Option<u64>,
    /// Also keep a `rowblocks` frontier's entries in row groups (6 bytes per entry and its
    /// pads, beside the windows' 8), which bit-packed right products read instead of the
    /// row windows: faster on relations whose vectors stay in the GPU's L2 cache (cnr-2000:
    /// 0.70x the time), slower on larger ones.
    #[arg(long)]
    pub row_groups: bool,
    /// Tree-only relations keep each cell that hangs alone below a path of at least this
    /// many tree nodes in lists beside the tree the GPU descends (16 bytes per cell against
    /// about half a byte per node saved): their products skip those paths' nodes. Web
    /// graphs with many far, isolated links gain most. Default 0: none.
    #[arg(long, value_name = "NODES", default_value_t = 0)]
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
            gpu_budget: self.gpu_budget.clone(),
            gpus: self.gpus.clone(),
            line_memory: self.line_memory.clone(),
            gpu_options: self.gpu_options(),
        }
    }

    /// The GPU engines' options these arguments ask for.
    pub fn gpu_options(&self) -> GpuOptions {
        GpuOptions {
            frontier: self.frontier_layout.unwrap_or_default(),
            row_windows: !self.no_row_windows,
            top_nodes: self.top_nodes.unwrap_or(GpuOptions::default().top_nodes),
            row_groups: self.row_groups,
            lone_paths: self.lone_paths,
            ..GpuOptions::default()
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
        Database::open(dir, &self.database_options(engine))
            .with_context(|| format!("opening store {}", dir.display()))
    }

    /// Errors out when a store-only option is given for another source; for another
    /// source, `--line-memory` sets the process-wide budget of its trees' lists.
    pub fn check_store_only(&self, has_store: bool) -> anyhow::Result<()> {
        if let (false, Some(text)) = (has_store, &self.line_memory) {
            k2rpq::k2tree::LineBudget::global()
                .set_limit(k2rpq::database::parse_line_memory(text)?);
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
