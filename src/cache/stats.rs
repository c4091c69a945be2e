//! What the cache did: counters returned by [`DeviceCache::stats`](super::DeviceCache::stats)
//! and printed by `--stats`.

use std::fmt;
use std::time::Duration;

use super::budget::human_bytes;

/// A snapshot of the cache's counters and memory. Counters are totals since the cache
/// was created; byte figures are in the engine's memory (device bytes for the GPU).
#[derive(Clone, Debug, Default, PartialEq, serde::Serialize)]
pub struct CacheStats {
    /// Requests served by a resident relation.
    pub hits: u64,
    /// Requests that loaded the relation (including reloads after eviction and upgrades).
    pub misses: u64,
    /// Relations dropped to make room (upgrades included).
    pub evictions: u64,
    /// Bytes loaded into the engine (uploaded, for the GPU), all loads together.
    pub bytes_uploaded: u64,
    /// Time spent in [`Engine::load`](crate::engine::Engine::load), all loads together.
    pub upload_time: Duration,
    /// The most bytes ever in use at once: resident, being loaded, being freed and reserved.
    pub peak_bytes: u64,
    /// Bytes of the relations resident now.
    pub resident_bytes: u64,
    /// Working memory reserved by running queries now.
    pub reserved_bytes: u64,
    /// The budget.
    pub budget: u64,
    /// Relations resident now.
    pub entries: usize,
    /// Relations pinned by a running query now.
    pub pinned_entries: usize,
    /// Loads that chose tree-only although the cached frontier was asked for (it did not
    /// fit comfortably, or the relation was not hot yet).
    pub tree_only_loads: u64,
    /// Tree-only relations reloaded with their cached frontier once they became hot.
    pub upgrades: u64,
    /// Requests that had to wait for another query to release memory.
    pub waits: u64,
}

impl CacheStats {
    /// Hits over all requests (0 when there were none).
    pub fn hit_rate(&self) -> f64 {
        let n = self.hits + self.misses;
        if n == 0 {
            0.0
        } else {
            self.hits as f64 / n as f64
        }
    }
}

impl fmt::Display for CacheStats {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "cache: budget {}, peak {} ({:.1}%), resident {} in {} relations ({} pinned), reserved {}",
            human_bytes(self.budget),
            human_bytes(self.peak_bytes),
            if self.budget == 0 {
                0.0
            } else {
                100.0 * self.peak_bytes as f64 / self.budget as f64
            },
            human_bytes(self.resident_bytes),
            self.entries,
            self.pinned_entries,
            human_bytes(self.reserved_bytes),
        )?;
        writeln!(
            f,
            "cache: {} hits, {} misses ({:.1}% hit rate), {} evictions, {} waits",
            self.hits,
            self.misses,
            100.0 * self.hit_rate(),
            self.evictions,
            self.waits,
        )?;
        write!(
            f,
            "cache: uploaded {} in {:.3} s, {} tree-only loads, {} upgrades to cached frontier",
            human_bytes(self.bytes_uploaded),
            self.upload_time.as_secs_f64(),
            self.tree_only_loads,
            self.upgrades,
        )
    }
}
