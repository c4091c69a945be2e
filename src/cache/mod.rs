//! Relations resident in an engine's memory (the GPU's, or the host's for the CPU
//! engine) under a fixed byte budget, evicted least-recently-used.
//!
//! A knowledge graph has thousands of predicates; a query touches a few. [`DeviceCache`]
//! loads a relation through [`Engine::load`] on first use and keeps it until room is
//! needed. Its invariant: **bytes of resident relations + bytes being loaded + bytes of
//! evicted relations not yet freed + working memory reserved by running queries ≤ budget**,
//! at every instant. It holds because sizes are known before anything is allocated
//! ([`Engine::load_bytes`]; a query's scratch from the engine's own size functions), and
//! because an evicted relation's bytes are counted until its memory is actually released.
//!
//! - **Pinning.** [`DeviceCache::get`] returns a [`Pinned`] guard: the relation stays
//!   resident and is never evicted while a guard is alive. A plan that needs more
//!   relations than fit at once runs in phases: it asks again at every step and drops the
//!   guards of the step before, so eviction (only ever among unpinned relations) makes room.
//! - **Working memory.** [`DeviceCache::reserve`] books a query's frontiers and scratch
//!   against the same budget; the [`Reservation`] returns it when dropped.
//! - **Waiting.** When the budget is taken by pinned relations and reservations of other
//!   queries, a request waits until they release memory. When every byte in the way is held
//!   by queries that are themselves waiting (a deadlock), the request fails with
//!   [`CacheError::Exhausted`] instead of hanging. Waiting for another thread's load of the
//!   same relation counts as waiting: when that load is itself blocked on memory the waiter
//!   holds, the loader gives up. Before failing so, a load that asked for the cached
//!   frontier tries tree-only. Guards are attributed to the thread that created them, so
//!   keep a guard on its thread: moved to another, it can make the detection report a
//!   deadlock that the other thread would have resolved, or miss one while its creator
//!   runs elsewhere (the creator does not count as blocked).
//! - **Configuration per relation.** A request names the configuration it prefers. The
//!   cached frontier ([`MatrixConfig::CachedFrontier`], `k2+F`, ~8 bytes per last-level
//!   node: usually several times the tree) is used when the relation is hot (asked for at
//!   least [`CacheOptions::hot_after`] times) and fits comfortably: in
//!   [`CacheOptions::comfortable_fraction`] of the budget, or in the memory free right now.
//!   Otherwise the relation is loaded tree-only, and upgraded later when it becomes hot and
//!   nobody pins it.
//! - **Relations larger than the budget** (the paper's open question). This cache does
//!   *not* stream: a relation whose cached frontier does not fit runs tree-only, and one
//!   whose tree alone exceeds the whole budget is an error ([`CacheError::TooLarge`]).
//!   Streaming tiles from pinned host memory is left open.
//! - **Budget.** Given in bytes; a [`MemoryBudget`] reads what users write (`8GiB`,
//!   `512MB`, `10%` of free memory), and [`DEFAULT_BUDGET`] is 75% of the memory free at
//!   start (device memory for the GPU, [`available_host_memory`] for the CPU).
//! - **Threads.** One cache is shared by any number of threads ([`DeviceCache`] is a cheap
//!   handle: clone it). A mutex guards the LRU and the byte counts; loads, frees and the
//!   caller's tree function run outside it. A relation being loaded has a placeholder, so
//!   two threads asking for it at once load it once: the second waits for the first.
//!
//! ```
//! use std::sync::Arc;
//! use k2rpq::cache::{CacheOptions, DeviceCache};
//! use k2rpq::engine::{cpu::CpuEngine, MatrixConfig};
//! use k2rpq::k2tree::K2Tree;
//!
//! let tree = Arc::new(K2Tree::from_edges(4, 4, vec![(0, 1), (1, 2)]));
//! let cache: DeviceCache<CpuEngine> =
//!     DeviceCache::new(Arc::new(CpuEngine::new()), CacheOptions::with_budget(1 << 20));
//! let a = cache.get((0, 7), || tree.clone(), MatrixConfig::CachedFrontier).unwrap();
//! assert_eq!(a.tree().nnz(), 2); // the guard dereferences to the engine's matrix
//! drop(a);
//! let again = cache.get((0, 7), || unreachable!(), MatrixConfig::CachedFrontier).unwrap();
//! assert_eq!(cache.stats().hits, 1);
//! # drop(again);
//! ```

mod budget;
mod stats;

use std::collections::HashMap;
use std::convert::Infallible;
use std::hash::Hash;
use std::ops::Deref;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::{self, ThreadId};
use std::time::{Duration, Instant};

use lru::LruCache;

pub use budget::{available_host_memory, human_bytes, BudgetError, MemoryBudget, DEFAULT_BUDGET};
pub use stats::CacheStats;

use crate::engine::{Engine, EngineError, MatrixConfig};
use crate::k2tree::K2Tree;

/// The default key of a relation: `(graph, predicate)` ids.
pub type RelationKey = (u32, u32);

/// Errors of the cache.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum CacheError {
    /// One relation (tree-only) or one reservation is larger than the whole budget.
    #[error("needs {bytes} bytes, more than the whole cache budget of {budget} bytes ({}); raise the budget", human_bytes(*budget))]
    TooLarge {
        /// Bytes asked for.
        bytes: u64,
        /// The budget.
        budget: u64,
    },
    /// The budget is held by pinned relations and reservations of queries that are all
    /// waiting for more memory: none can proceed.
    #[error("cache budget of {budget} bytes exhausted: {needed} bytes needed, {held} held by pinned relations and reservations of waiting queries (release guards between plan steps)")]
    Exhausted {
        /// Bytes asked for.
        needed: u64,
        /// Bytes pinned or reserved.
        held: u64,
        /// The budget.
        budget: u64,
    },
    /// The caller's function producing the tree failed.
    #[error("reading the relation failed: {0}")]
    Source(Box<dyn std::error::Error + Send + Sync>),
    /// The engine failed to load the relation.
    #[error(transparent)]
    Engine(#[from] EngineError),
}

/// Tuning of a [`DeviceCache`].
#[derive(Clone, Debug, PartialEq)]
pub struct CacheOptions {
    /// Bytes the cache may use: resident relations plus reserved working memory.
    pub budget: u64,
    /// Requests for a relation (over the cache's life) before it counts as hot and gets
    /// its cached frontier. 1 (the default): from the first use, when it fits comfortably.
    pub hot_after: u64,
    /// A cached-frontier relation fits comfortably when it takes at most this fraction of
    /// the budget (or fits in the memory free at the time). Default 0.25.
    pub comfortable_fraction: f64,
}

impl CacheOptions {
    /// Default tuning with the given budget in bytes.
    pub fn with_budget(budget: u64) -> Self {
        CacheOptions {
            budget,
            hot_after: 1,
            comfortable_fraction: 0.25,
        }
    }
}

/// A relation loaded into the engine.
struct Entry<E: Engine> {
    matrix: E::Matrix,
    bytes: u64,
    config: MatrixConfig,
    /// Bytes with the cached frontier, to decide upgrades of tree-only entries.
    frontier_bytes: u64,
}

/// What the LRU holds per key.
enum Slot<E: Engine> {
    /// `loader` is producing or loading it; others wait for it.
    Loading { loader: ThreadId },
    /// Resident; evictable when `pins == 0`.
    Ready { entry: Arc<Entry<E>>, pins: usize },
}

/// Everything the mutex guards.
struct State<E: Engine, K> {
    /// Unbounded: capacity is in bytes, enforced by the cache.
    lru: LruCache<K, Slot<E>>,
    /// Requests per key over the cache's life (for "hot").
    uses: HashMap<K, u64>,
    resident: u64,
    /// Bytes admitted for loads in progress.
    loading: u64,
    reserved: u64,
    /// Bytes of evicted relations whose memory is being released (outside the lock).
    freeing: u64,
    /// Guards (pins, reservations, and loads in progress) alive per creating thread.
    holders: HashMap<ThreadId, usize>,
    /// Threads blocked in the cache since the last change of memory or loads: a notified
    /// thread leaves the list at once, so it never counts as blocked while it re-checks.
    waiting: Vec<ThreadId>,
    /// Loaders asked to give up their wait for memory: a thread waiting for their load holds
    /// what they wait for (see `try_get`).
    give_up: Vec<ThreadId>,
    hits: u64,
    misses: u64,
    evictions: u64,
    bytes_uploaded: u64,
    upload_time: Duration,
    peak: u64,
    tree_only_loads: u64,
    upgrades: u64,
    waits: u64,
}

impl<E: Engine, K: Hash + Eq> State<E, K> {
    fn used(&self) -> u64 {
        self.resident + self.loading + self.reserved + self.freeing
    }

    fn note_peak(&mut self) {
        self.peak = self.peak.max(self.used());
    }

    fn unpinned_bytes(&self) -> u64 {
        self.lru
            .iter()
            .map(|(_, s)| match s {
                Slot::Ready { entry, pins: 0 } => entry.bytes,
                _ => 0,
            })
            .sum()
    }

    fn hold(&mut self, who: ThreadId) {
        *self.holders.entry(who).or_insert(0) += 1;
    }

    fn release(&mut self, who: ThreadId) {
        if let Some(n) = self.holders.get_mut(&who) {
            *n -= 1;
            if *n == 0 {
                self.holders.remove(&who);
            }
        }
    }

    /// Whether no one could ever free memory for `me`: no free in progress, and every
    /// thread holding a guard or loading a relation is blocked in the cache.
    fn deadlocked(&self, me: ThreadId) -> bool {
        self.freeing == 0
            && self
                .holders
                .keys()
                .all(|t| *t == me || self.waiting.contains(t))
    }

    /// Removes the least-recently-used unpinned relation, moving its bytes to `freeing`.
    fn evict_one(&mut self) -> Option<Arc<Entry<E>>>
    where
        K: Clone,
    {
        let key = self.lru.iter().rev().find_map(|(k, s)| match s {
            Slot::Ready { pins: 0, .. } => Some(k.clone()),
            _ => None,
        })?;
        match self.lru.pop(&key) {
            Some(Slot::Ready { entry, .. }) => {
                self.resident -= entry.bytes;
                self.freeing += entry.bytes;
                self.evictions += 1;
                Some(entry)
            }
            _ => unreachable!("the key was found unpinned and ready"),
        }
    }
}

struct Shared<E: Engine, K> {
    engine: Arc<E>,
    options: CacheOptions,
    state: Mutex<State<E, K>>,
    /// Signalled whenever memory is released or a load finishes.
    changed: Condvar,
}

/// Relations resident in `E`'s memory under a byte budget; see the [module docs](self).
///
/// `K` identifies a relation (default [`RelationKey`], `(graph, predicate)`). Cloning the
/// cache clones a handle to the same cache.
pub struct DeviceCache<E: Engine, K = RelationKey> {
    shared: Arc<Shared<E, K>>,
}

impl<E: Engine, K> Clone for DeviceCache<E, K> {
    fn clone(&self) -> Self {
        DeviceCache {
            shared: self.shared.clone(),
        }
    }
}

/// A relation kept resident while the guard lives; dereferences to the engine's matrix.
/// Cloning pins it once more.
pub struct Pinned<E: Engine, K: Hash + Eq + Clone = RelationKey> {
    shared: Arc<Shared<E, K>>,
    /// `None` only inside `drop`, which releases it under the lock (see there).
    entry: Option<Arc<Entry<E>>>,
    key: K,
    owner: ThreadId,
}

/// Working memory booked against the budget; returned when dropped.
pub struct Reservation<E: Engine, K: Hash + Eq + Clone = RelationKey> {
    shared: Arc<Shared<E, K>>,
    bytes: u64,
    owner: ThreadId,
}

/// Undoes a load that does not complete (error or panic): removes the `Loading`
/// placeholder, returns the admitted bytes, and ends the loading thread's hold.
struct Placeholder<'a, E: Engine, K: Hash + Eq + Clone> {
    shared: &'a Shared<E, K>,
    key: K,
    owner: ThreadId,
    /// Bytes admitted for the load so far.
    admitted: u64,
    armed: bool,
}

impl<E: Engine, K: Hash + Eq + Clone> Drop for Placeholder<'_, E, K> {
    fn drop(&mut self) {
        if self.armed {
            let mut st = self.shared.lock();
            if matches!(st.lru.peek(&self.key), Some(Slot::Loading { .. })) {
                st.lru.pop(&self.key);
            }
            st.loading -= self.admitted;
            st.release(self.owner);
            self.shared.notify(&mut st);
        }
    }
}

impl<E: Engine, K> Shared<E, K> {
    fn lock(&self) -> MutexGuard<'_, State<E, K>> {
        // A panic while holding the lock cannot leave the counts half-updated (every
        // update is a few arithmetic statements), so a poisoned lock is still usable.
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Wakes every waiting thread to re-check. Called with the lock held, so that `waiting`
    /// lists exactly the threads that are blocked and not yet woken.
    fn notify(&self, st: &mut State<E, K>) {
        st.waiting.clear();
        self.changed.notify_all();
    }

    fn wait<'a>(
        &self,
        mut st: MutexGuard<'a, State<E, K>>,
        me: ThreadId,
    ) -> MutexGuard<'a, State<E, K>> {
        st.waiting.push(me);
        let mut st = self.changed.wait(st).unwrap_or_else(|p| p.into_inner());
        if let Some(i) = st.waiting.iter().position(|t| *t == me) {
            st.waiting.swap_remove(i);
        }
        st
    }
}

impl<E: Engine, K: Hash + Eq + Clone + Send + Sync> DeviceCache<E, K> {
    /// An empty cache over `engine`.
    pub fn new(engine: Arc<E>, options: CacheOptions) -> Self {
        DeviceCache {
            shared: Arc::new(Shared {
                engine,
                options,
                state: Mutex::new(State {
                    lru: LruCache::unbounded(),
                    uses: HashMap::new(),
                    resident: 0,
                    loading: 0,
                    reserved: 0,
                    freeing: 0,
                    holders: HashMap::new(),
                    waiting: Vec::new(),
                    give_up: Vec::new(),
                    hits: 0,
                    misses: 0,
                    evictions: 0,
                    bytes_uploaded: 0,
                    upload_time: Duration::ZERO,
                    peak: 0,
                    tree_only_loads: 0,
                    upgrades: 0,
                    waits: 0,
                }),
                changed: Condvar::new(),
            }),
        }
    }

    /// The engine relations are loaded into.
    pub fn engine(&self) -> &Arc<E> {
        &self.shared.engine
    }

    /// The budget in bytes.
    pub fn budget(&self) -> u64 {
        self.shared.options.budget
    }

    /// The options the cache was created with.
    pub fn options(&self) -> &CacheOptions {
        &self.shared.options
    }

    /// Bytes in use now: resident + being loaded + being freed + reserved. Never above
    /// [`DeviceCache::budget`].
    pub fn used_bytes(&self) -> u64 {
        self.shared.lock().used()
    }

    /// Whether `key` is resident now (does not count as a use).
    pub fn contains(&self, key: &K) -> bool {
        matches!(self.shared.lock().lru.peek(key), Some(Slot::Ready { .. }))
    }

    /// The relation `key`, loaded from `tree()` on a miss with (preferably) `config`, pinned
    /// until the guard is dropped. Waits while other queries hold the memory it needs.
    ///
    /// Errors: [`CacheError::TooLarge`] when even the tree alone exceeds the budget,
    /// [`CacheError::Exhausted`] on a deadlock (see the [module docs](self)), and the
    /// engine's load errors.
    pub fn get(
        &self,
        key: K,
        tree: impl FnOnce() -> Arc<K2Tree>,
        config: MatrixConfig,
    ) -> Result<Pinned<E, K>, CacheError> {
        self.try_get(key, || Ok::<_, Infallible>(tree()), config)
    }

    /// [`DeviceCache::get`] with a fallible tree function (e.g. opening a file); its error
    /// becomes [`CacheError::Source`].
    pub fn try_get<Er>(
        &self,
        key: K,
        tree: impl FnOnce() -> Result<Arc<K2Tree>, Er>,
        config: MatrixConfig,
    ) -> Result<Pinned<E, K>, CacheError>
    where
        Er: Into<Box<dyn std::error::Error + Send + Sync>>,
    {
        let sh = &*self.shared;
        let me = thread::current().id();
        let mut st = sh.lock();
        let uses = {
            let u = st.uses.entry(key.clone()).or_insert(0);
            *u += 1;
            *u
        };
        loop {
            let free_now = sh.options.budget - st.used();
            let upgrade = match st.lru.get_mut(&key) {
                Some(Slot::Loading { loader }) => {
                    let loader = *loader;
                    if st.deadlocked(me) {
                        // Every other holder is blocked, the loader among them (its
                        // placeholder is a hold), so this wait closes a cycle: the loader
                        // waits for memory while this thread may hold some. Ask the loader
                        // to give up (it retries tree-only or fails), which frees this
                        // thread to load the relation itself.
                        if !st.give_up.contains(&loader) {
                            st.give_up.push(loader);
                        }
                        sh.notify(&mut st);
                    }
                    st = sh.wait(st, me);
                    continue;
                }
                Some(Slot::Ready { entry, pins }) => {
                    // A tree-only relation asked for with its frontier is reloaded with it
                    // when it is now hot, fits comfortably and nobody uses it right now.
                    let upgrade = config == MatrixConfig::CachedFrontier
                        && entry.config == MatrixConfig::TreeOnly
                        && *pins == 0
                        && self.frontier_fits(entry.frontier_bytes, free_now + entry.bytes, uses);
                    if !upgrade {
                        *pins += 1;
                        let entry = entry.clone();
                        st.hits += 1;
                        st.hold(me);
                        return Ok(Pinned {
                            shared: self.shared.clone(),
                            entry: Some(entry),
                            key,
                            owner: me,
                        });
                    }
                    true
                }
                None => false,
            };
            if upgrade {
                let Some(Slot::Ready { entry, .. }) = st.lru.pop(&key) else {
                    unreachable!("the slot was ready under the same lock")
                };
                st.resident -= entry.bytes;
                st.freeing += entry.bytes;
                st.evictions += 1;
                st.upgrades += 1;
                st = self.free_outside_lock(st, vec![entry]);
                continue;
            }
            break;
        }

        // Miss: claim the key so other threads wait for this load instead of repeating it.
        // The loading thread counts as a holder: it will make progress unless it blocks.
        st.lru.put(key.clone(), Slot::Loading { loader: me });
        st.misses += 1;
        st.hold(me);
        drop(st);
        let mut placeholder = Placeholder {
            shared: sh,
            key: key.clone(),
            owner: me,
            admitted: 0,
            armed: true,
        };
        let tree = tree().map_err(|e| CacheError::Source(e.into()))?;
        let tree_only = sh.engine.load_bytes(&tree, MatrixConfig::TreeOnly);
        if tree_only > sh.options.budget {
            return Err(CacheError::TooLarge {
                bytes: tree_only,
                budget: sh.options.budget,
            });
        }
        let full = sh.engine.load_bytes(&tree, MatrixConfig::CachedFrontier);
        let mut chosen = MatrixConfig::TreeOnly;
        let mut bytes = tree_only;
        if config == MatrixConfig::CachedFrontier {
            let free = sh.options.budget.saturating_sub(sh.lock().used());
            if self.frontier_fits(full, free, uses) {
                chosen = MatrixConfig::CachedFrontier;
                bytes = full;
            }
        }

        let mut st = match self.admit(sh.lock(), bytes, me) {
            // Blocked for good with the frontier: the tree alone may still get through.
            Err(CacheError::Exhausted { .. }) if chosen == MatrixConfig::CachedFrontier => {
                chosen = MatrixConfig::TreeOnly;
                bytes = tree_only;
                self.admit(sh.lock(), bytes, me)?
            }
            admitted => admitted?,
        };
        st.loading += bytes;
        placeholder.admitted = bytes;
        st.note_peak();
        if chosen != config {
            st.tree_only_loads += 1;
        }
        drop(st);

        let t0 = Instant::now();
        let loaded = sh.engine.load(&tree, chosen);
        let elapsed = t0.elapsed();
        let loaded = loaded.map(|matrix| {
            debug_assert_eq!(
                sh.engine.matrix_bytes(&matrix),
                bytes,
                "Engine::load_bytes disagrees with matrix_bytes"
            );
            Arc::new(Entry {
                matrix,
                bytes,
                config: chosen,
                frontier_bytes: full,
            })
        });

        let entry = loaded?; // on error the placeholder's drop undoes the load
        let mut st = sh.lock();
        st.loading -= bytes;
        st.resident += bytes;
        st.bytes_uploaded += bytes;
        st.upload_time += elapsed;
        if let Some(slot) = st.lru.get_mut(&key) {
            *slot = Slot::Ready {
                entry: entry.clone(),
                pins: 1,
            };
        } else {
            unreachable!("only the loading thread removes its placeholder");
        }
        placeholder.armed = false; // its hold passes to the returned guard
        sh.notify(&mut st);
        drop(st);
        Ok(Pinned {
            shared: self.shared.clone(),
            entry: Some(entry),
            key,
            owner: me,
        })
    }

    /// Books `bytes` of working memory (a query's frontiers, scratch) against the budget,
    /// evicting unpinned relations and waiting as [`DeviceCache::get`] does.
    pub fn reserve(&self, bytes: u64) -> Result<Reservation<E, K>, CacheError> {
        let me = thread::current().id();
        let mut st = self.admit(self.shared.lock(), bytes, me)?;
        st.reserved += bytes;
        st.hold(me);
        st.note_peak();
        Ok(Reservation {
            shared: self.shared.clone(),
            bytes,
            owner: me,
        })
    }

    /// Evicts every unpinned relation (e.g. before measuring cold runs). Returns how many.
    pub fn evict_unpinned(&self) -> usize {
        let mut st = self.shared.lock();
        let mut victims = Vec::new();
        while let Some(e) = st.evict_one() {
            victims.push(e);
        }
        let n = victims.len();
        drop(self.free_outside_lock(st, victims));
        n
    }

    /// Evicts the unpinned relations whose key satisfies `stale` (e.g. the relations a
    /// write changed); pinned ones stay with the queries using them and age out by LRU.
    /// Returns how many were evicted.
    pub fn evict_where(&self, mut stale: impl FnMut(&K) -> bool) -> usize {
        let mut st = self.shared.lock();
        let keys: Vec<K> = st
            .lru
            .iter()
            .filter_map(|(k, s)| match s {
                Slot::Ready { pins: 0, .. } if stale(k) => Some(k.clone()),
                _ => None,
            })
            .collect();
        let mut victims = Vec::new();
        for k in keys {
            if let Some(Slot::Ready { entry, .. }) = st.lru.pop(&k) {
                st.resident -= entry.bytes;
                st.freeing += entry.bytes;
                st.evictions += 1;
                victims.push(entry);
            }
        }
        let n = victims.len();
        drop(self.free_outside_lock(st, victims));
        n
    }

    /// A snapshot of the counters and memory.
    pub fn stats(&self) -> CacheStats {
        let st = self.shared.lock();
        CacheStats {
            hits: st.hits,
            misses: st.misses,
            evictions: st.evictions,
            bytes_uploaded: st.bytes_uploaded,
            upload_time: st.upload_time,
            peak_bytes: st.peak,
            resident_bytes: st.resident,
            reserved_bytes: st.reserved,
            budget: self.shared.options.budget,
            entries: st
                .lru
                .iter()
                .filter(|(_, s)| matches!(s, Slot::Ready { .. }))
                .count(),
            pinned_entries: st
                .lru
                .iter()
                .filter(|(_, s)| matches!(s, Slot::Ready { pins, .. } if *pins > 0))
                .count(),
            tree_only_loads: st.tree_only_loads,
            upgrades: st.upgrades,
            waits: st.waits,
        }
    }

    /// Whether a cached-frontier load of `full` bytes is worth it for a relation asked for
    /// `uses` times with `free` bytes free now.
    fn frontier_fits(&self, full: u64, free: u64, uses: u64) -> bool {
        let o = &self.shared.options;
        full <= o.budget
            && uses >= o.hot_after
            && (full as f64 <= o.budget as f64 * o.comfortable_fraction || full <= free)
    }

    /// Releases evicted relations outside the lock, then takes their bytes off `freeing`.
    fn free_outside_lock<'a>(
        &'a self,
        st: MutexGuard<'a, State<E, K>>,
        victims: Vec<Arc<Entry<E>>>,
    ) -> MutexGuard<'a, State<E, K>> {
        if victims.is_empty() {
            return st;
        }
        drop(st);
        let bytes: u64 = victims.iter().map(|e| e.bytes).sum();
        drop(victims); // the cache held the only reference: this frees the engine's memory
        let mut st = self.shared.lock();
        st.freeing -= bytes;
        self.shared.notify(&mut st);
        st
    }

    /// Returns the lock once `need` more bytes fit in the budget, evicting unpinned
    /// relations least-recently-used first and waiting for other queries' memory.
    fn admit<'a>(
        &'a self,
        mut st: MutexGuard<'a, State<E, K>>,
        need: u64,
        me: ThreadId,
    ) -> Result<MutexGuard<'a, State<E, K>>, CacheError> {
        let budget = self.shared.options.budget;
        if need > budget {
            return Err(CacheError::TooLarge {
                bytes: need,
                budget,
            });
        }
        let mut waited = false;
        loop {
            let used = st.used();
            if used + need <= budget {
                if waited {
                    st.waits += 1;
                }
                st.give_up.retain(|t| *t != me);
                return Ok(st);
            }
            let excess = used + need - budget;
            if st.unpinned_bytes() + st.freeing >= excess {
                // Evicting (and finishing frees in progress) is enough.
                let mut victims = Vec::new();
                let mut evicted = 0;
                while st.freeing + evicted < excess {
                    let e = st.evict_one().expect("enough unpinned bytes were counted");
                    evicted += e.bytes;
                    victims.push(e);
                }
                if victims.is_empty() {
                    // Only frees by other threads are pending: wait for them.
                    st = self.shared.wait(st, me);
                    waited = true;
                } else {
                    st = self.free_outside_lock(st, victims);
                }
                continue;
            }
            if st.give_up.contains(&me) || st.deadlocked(me) {
                st.give_up.retain(|t| *t != me);
                let held = st.used() - st.unpinned_bytes();
                return Err(CacheError::Exhausted {
                    needed: need,
                    held,
                    budget,
                });
            }
            st = self.shared.wait(st, me);
            waited = true;
        }
    }
}

impl<E: Engine, K: Hash + Eq + Clone> Pinned<E, K> {
    fn entry(&self) -> &Entry<E> {
        self.entry.as_ref().expect("only drop takes the entry")
    }

    /// The key of the relation.
    pub fn key(&self) -> &K {
        &self.key
    }
    /// The configuration it was loaded with (may be tree-only although the cached
    /// frontier was asked for: see the [module docs](self)).
    pub fn config(&self) -> MatrixConfig {
        self.entry().config
    }
    /// Bytes it takes in the engine's memory.
    pub fn bytes(&self) -> u64 {
        self.entry().bytes
    }
    /// The engine's matrix.
    pub fn matrix(&self) -> &E::Matrix {
        &self.entry().matrix
    }
}

impl<E: Engine, K: Hash + Eq + Clone> Deref for Pinned<E, K> {
    type Target = E::Matrix;
    fn deref(&self) -> &E::Matrix {
        &self.entry().matrix
    }
}

impl<E: Engine, K: Hash + Eq + Clone> Clone for Pinned<E, K> {
    fn clone(&self) -> Self {
        let me = thread::current().id();
        let mut st = self.shared.lock();
        if let Some(Slot::Ready { pins, .. }) = st.lru.peek_mut(&self.key) {
            *pins += 1;
        }
        st.hold(me);
        drop(st);
        Pinned {
            shared: self.shared.clone(),
            entry: self.entry.clone(),
            key: self.key.clone(),
            owner: me,
        }
    }
}

impl<E: Engine, K: Hash + Eq + Clone> Drop for Pinned<E, K> {
    fn drop(&mut self) {
        let mut st = self.shared.lock();
        if let Some(Slot::Ready { pins, .. }) = st.lru.peek_mut(&self.key) {
            *pins -= 1;
        }
        st.release(self.owner);
        // Drop this reference while the lock is held: the LRU still holds one (a pinned
        // entry is never evicted), so this frees nothing, and an eviction that follows the
        // unlock really frees the memory when it drops the last reference.
        self.entry = None;
        self.shared.notify(&mut st);
        drop(st);
    }
}

impl<E: Engine, K: Hash + Eq + Clone> Reservation<E, K> {
    /// Bytes reserved.
    pub fn bytes(&self) -> u64 {
        self.bytes
    }
}

impl<E: Engine, K: Hash + Eq + Clone> Drop for Reservation<E, K> {
    fn drop(&mut self) {
        let mut st = self.shared.lock();
        st.reserved -= self.bytes;
        st.release(self.owner);
        self.shared.notify(&mut st);
        drop(st);
    }
}
