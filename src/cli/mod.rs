//! One module per subcommand: its clap arguments and a `run` that calls the library.

pub mod bench;
pub mod bench_build;
pub mod bench_cache;
pub mod bench_spmv;
pub mod build_tree;
pub mod explain;
pub mod gen;
pub mod graph_source;
pub mod info;
pub mod load;
pub mod query;
pub mod rpq;

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
