//! Memory budgets as users write them (`8GiB`, `512MB`, `10%`) and the memory readings a
//! percentage is taken of.

/// The budget used when none is given: three quarters of the memory free when the cache
/// is created (device memory for the GPU engine, available RAM for the CPU engine). The
/// remaining quarter leaves room for allocations outside the cache (CUDA context, kernels,
/// the host side of a query) that the cache does not see.
pub const DEFAULT_BUDGET: &str = "75%";

/// A budget string that could not be read.
#[derive(Debug, thiserror::Error)]
#[error("invalid memory budget {text:?}: {reason} (examples: 8GiB, 512MB, 1.5G, 4096, 10%)")]
pub struct BudgetError {
    /// The text given.
    pub text: String,
    /// What is wrong with it.
    pub reason: String,
}

/// Reads a byte count: a number with an optional unit, or a percentage of `free_memory`.
///
/// Units are case-insensitive: `B`; decimal `K`/`KB`, `M`/`MB`, `G`/`GB`, `T`/`TB`
/// (powers of 1000); binary `KiB`, `MiB`, `GiB`, `TiB` (powers of 1024). The number may
/// have a fraction (`1.5GiB`). `P%` is `P` percent of `free_memory` (0 < P ≤ 100). The
/// result must be at least one byte.
///
/// ```
/// use k2rpq::cache::parse_bytes;
/// assert_eq!(parse_bytes("8GiB", 0).unwrap(), 8 << 30);
/// assert_eq!(parse_bytes("512MB", 0).unwrap(), 512_000_000);
/// assert_eq!(parse_bytes("10%", 1000).unwrap(), 100);
/// assert!(parse_bytes("ten", 0).is_err());
/// ```
pub fn parse_bytes(text: &str, free_memory: u64) -> Result<u64, BudgetError> {
    let err = |reason: &str| BudgetError {
        text: text.to_string(),
        reason: reason.to_string(),
    };
    let t = text.trim();
    if let Some(p) = t.strip_suffix('%') {
        let p: f64 = p
            .trim()
            .parse()
            .map_err(|_| err("the percentage is not a number"))?;
        if !(p > 0.0 && p <= 100.0) {
            return Err(err("a percentage must be above 0 and at most 100"));
        }
        let bytes = (free_memory as f64 * p / 100.0) as u64;
        if bytes == 0 {
            return Err(err(&format!(
                "{p}% of the {free_memory} bytes of free memory is nothing"
            )));
        }
        return Ok(bytes);
    }
    let split = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(t.len());
    let (number, unit) = t.split_at(split);
    if number.is_empty() {
        return Err(err("no number"));
    }
    let value: f64 = number.parse().map_err(|_| err("malformed number"))?;
    let scale: u64 = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 1,
        "k" | "kb" => 1_000,
        "m" | "mb" => 1_000_000,
        "g" | "gb" => 1_000_000_000,
        "t" | "tb" => 1_000_000_000_000,
        "kib" => 1 << 10,
        "mib" => 1 << 20,
        "gib" => 1 << 30,
        "tib" => 1 << 40,
        _ => return Err(err(&format!("unknown unit {:?}", unit.trim()))),
    };
    let bytes = value * scale as f64;
    if !(bytes >= 1.0 && bytes < u64::MAX as f64) {
        return Err(err("must be at least one byte"));
    }
    Ok(bytes as u64)
}

/// The budget a user asked for (`--gpu-budget`), or [`DEFAULT_BUDGET`] of `free_memory`
/// when none was given.
///
/// ```
/// use k2rpq::cache::budget::budget_or_default;
/// assert_eq!(budget_or_default(Some("1KiB"), 4000).unwrap(), 1024);
/// assert_eq!(budget_or_default(None, 4000).unwrap(), 3000);
/// ```
pub fn budget_or_default(text: Option<&str>, free_memory: u64) -> Result<u64, BudgetError> {
    parse_bytes(text.unwrap_or(DEFAULT_BUDGET), free_memory)
}

/// `MemAvailable` of `/proc/meminfo` in bytes: the RAM the kernel can hand out without
/// swapping. `None` where it cannot be read (not Linux).
pub fn available_host_memory() -> Option<u64> {
    let info = std::fs::read_to_string("/proc/meminfo").ok()?;
    let line = info.lines().find(|l| l.starts_with("MemAvailable:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib * 1024)
}

/// `bytes` for people: `1.50 GiB`, `12.0 MiB`, `512 B`.
pub fn human_bytes(bytes: u64) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut v = bytes as f64;
    let mut u = 0;
    while v >= 1024.0 && u + 1 < UNITS.len() {
        v /= 1024.0;
        u += 1;
    }
    if u == 0 {
        format!("{bytes} B")
    } else if v < 100.0 {
        format!("{v:.2} {}", UNITS[u])
    } else {
        format!("{v:.1} {}", UNITS[u])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn units_and_percentages() {
        assert_eq!(parse_bytes("4096", 0).unwrap(), 4096);
        assert_eq!(parse_bytes(" 2 KiB ", 0).unwrap(), 2048);
        assert_eq!(parse_bytes("1.5gib", 0).unwrap(), 3 << 29);
        assert_eq!(parse_bytes("3G", 0).unwrap(), 3_000_000_000);
        assert_eq!(parse_bytes("1TiB", 0).unwrap(), 1 << 40);
        assert_eq!(parse_bytes("50%", 1 << 30).unwrap(), 1 << 29);
        assert_eq!(parse_bytes("100%", 77).unwrap(), 77);
    }

    #[test]
    fn rejects_nonsense() {
        for bad in [
            "", "GiB", "12XB", "1.2.3MB", "0", "0%", "101%", "-5%", "x%", "0.1",
        ] {
            let e = parse_bytes(bad, 1000).unwrap_err();
            assert!(
                e.to_string().contains("invalid memory budget"),
                "{bad}: {e}"
            );
        }
        // 1% of a tiny free memory rounds to nothing.
        assert!(parse_bytes("1%", 10).is_err());
    }

    #[test]
    fn human_readable() {
        assert_eq!(human_bytes(512), "512 B");
        assert_eq!(human_bytes(3 << 29), "1.50 GiB");
        assert_eq!(human_bytes(200 << 20), "200.0 MiB");
    }

    #[test]
    fn host_memory_reading_on_linux() {
        if cfg!(target_os = "linux") {
            assert!(available_host_memory().unwrap() > 0);
        }
    }
}
