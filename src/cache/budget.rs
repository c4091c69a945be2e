//! Memory budgets as users write them (`8GiB`, `512MB`, `10%`) and the memory readings a
//! percentage is taken of.

/// A memory budget as users give it: a byte count, or a share of the memory that is free
/// when the budget is applied (device memory for a GPU's cache, physical memory for line
/// lists). Read from text with [`str::parse`]:
///
/// ```
/// use k2rpq::cache::MemoryBudget;
/// let gpu: MemoryBudget = "8GiB".parse().unwrap();
/// assert_eq!(gpu.bytes_of(0).unwrap(), 8 << 30);
/// assert_eq!("512MB".parse::<MemoryBudget>().unwrap(), MemoryBudget::Bytes(512_000_000));
/// assert_eq!("10%".parse::<MemoryBudget>().unwrap().bytes_of(1000).unwrap(), 100);
/// assert!("ten".parse::<MemoryBudget>().is_err());
/// ```
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum MemoryBudget {
    /// This many bytes (`0` only where the budget's user allows none at all).
    Bytes(u64),
    /// This percentage (above 0, at most 100) of the free memory.
    Percent(f64),
}

/// The budget used when none is given: three quarters of the memory free when the cache
/// is created (device memory for the GPU engine, available RAM for the CPU engine). The
/// remaining quarter leaves room for allocations outside the cache (CUDA context, kernels,
/// the host side of a query) that the cache does not see.
pub const DEFAULT_BUDGET: MemoryBudget = MemoryBudget::Percent(75.0);

/// A budget that could not be read or applied.
#[derive(Debug, thiserror::Error)]
#[error("invalid memory budget {text:?}: {reason} (examples: 8GiB, 512MB, 1.5G, 4096, 10%)")]
pub struct BudgetError {
    /// The text given.
    pub text: String,
    /// What is wrong with it.
    pub reason: String,
}

impl MemoryBudget {
    /// The bytes this budget grants when `free_memory` bytes are free. A budget that
    /// grants nothing (a percentage of too little memory) is an error; `Bytes(0)` is
    /// returned as is, for the caller to accept or refuse.
    pub fn bytes_of(self, free_memory: u64) -> Result<u64, BudgetError> {
        match self {
            MemoryBudget::Bytes(b) => Ok(b),
            MemoryBudget::Percent(p) => {
                let bytes = (free_memory as f64 * p / 100.0) as u64;
                if bytes == 0 {
                    return Err(BudgetError {
                        text: self.to_string(),
                        reason: format!(
                            "{p}% of the {free_memory} bytes of free memory is nothing"
                        ),
                    });
                }
                Ok(bytes)
            }
        }
    }
}

impl std::fmt::Display for MemoryBudget {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            MemoryBudget::Bytes(b) => write!(f, "{b}"),
            MemoryBudget::Percent(p) => write!(f, "{p}%"),
        }
    }
}

impl std::str::FromStr for MemoryBudget {
    type Err = BudgetError;

    /// A number with an optional unit, or a percentage. Units are case-insensitive: `B`;
    /// decimal `K`/`KB`, `M`/`MB`, `G`/`GB`, `T`/`TB` (powers of 1000); binary `KiB`,
    /// `MiB`, `GiB`, `TiB` (powers of 1024). The number may have a fraction (`1.5GiB`).
    /// `P%` is `P` percent of the free memory (0 < P ≤ 100). `0` is zero bytes.
    fn from_str(text: &str) -> Result<Self, BudgetError> {
        let err = |reason: &str| BudgetError {
            text: text.to_string(),
            reason: reason.to_string(),
        };
        let t = text.trim();
        if t == "0" {
            return Ok(MemoryBudget::Bytes(0));
        }
        if let Some(p) = t.strip_suffix('%') {
            let p: f64 = p
                .trim()
                .parse()
                .map_err(|_| err("the percentage is not a number"))?;
            if !(p > 0.0 && p <= 100.0) {
                return Err(err("a percentage must be above 0 and at most 100"));
            }
            return Ok(MemoryBudget::Percent(p));
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
        Ok(MemoryBudget::Bytes(bytes as u64))
    }
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

    fn parse_bytes(text: &str, free: u64) -> Result<u64, BudgetError> {
        text.parse::<MemoryBudget>()?.bytes_of(free)
    }

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
            "", "GiB", "12XB", "1.2.3MB", "0%", "101%", "-5%", "x%", "0.1",
        ] {
            let e = parse_bytes(bad, 1000).unwrap_err();
            assert!(
                e.to_string().contains("invalid memory budget"),
                "{bad}: {e}"
            );
        }
        // 1% of a tiny free memory rounds to nothing.
        assert!(parse_bytes("1%", 10).is_err());
        // Zero is a budget of its own, which callers accept (no line lists) or refuse.
        assert_eq!("0".parse::<MemoryBudget>().unwrap(), MemoryBudget::Bytes(0));
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
