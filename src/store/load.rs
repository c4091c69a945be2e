//! `load`: RDF inputs → a new or updated store, built beside the target and swapped in.
//!
//! Pipeline: inputs are parsed batch by batch ([`crate::rdf::parse`]); each distinct term
//! of a batch gets a *provisional* id (its final id if an existing store already has it,
//! else a fresh number) from a term table split into 256 locked hash shards, in the pool
//! task that parsed the batch (no serial step touches every term); edges go as
//! `(relation, s, o)` records, one vector per batch handed over without a copy,
//! into an [`EdgeCollector`] that spills sorted runs to disk beyond `--memory`. At the end
//! the new terms are sorted and numbered after the old ones (so each load's terms form one
//! front-coded segment with ids in key order) and written on a thread of its own, while
//! the relations' k²-trees are built and written concurrently: each relation's edges are
//! read from the buffer and every run ([`SortedEdges::relation`]), remapped, and built, in
//! waves of at most `--memory / 16` edges (a larger relation runs alone).
//!
//! Memory: the edge buffer is bounded by [`LoadOptions::memory`] (12 bytes per buffered
//! triple while parsing; grouped by relation at the end into 8-byte pairs, the records
//! freed as they are placed); the term table grows with the distinct *new* terms (their
//! key bytes, in one arena per shard, plus 21 to 43 bytes each: a 16-byte table slot
//! holding offset, length, id and hash bits, in a table kept between 3/8 and 3/4 full).
//! The tables are freed once the new terms are listed (16 bytes each, for the sort); the
//! arenas stay for the dictionary, written beside the trees. A relation whose edges are
//! all in memory is turned into Morton codes where its pairs lie; building trees
//! otherwise holds the codes of the relations in flight (8 bytes per edge, plus the old
//! cells of an incremental rebuild), at most `--memory / 16` edges of them unless one
//! relation alone is larger.
//!
//! Inputs (files, or folders of them) are read several at a time, each decompressed on a
//! thread of its own, their chunks parsed on the one pool; the first input to fail stops
//! the others, and its error (with file and line) is the load's.
//!
//! Blank nodes keep the labels they have in the input (oxttl's), so one label used in two
//! inputs, or in two loads, is one node; give inputs distinct labels if they must not meet.
//!
//! Safety: everything is written into `.NAME.k2rpq-tmp-PID-…` beside the target, fsynced,
//! and renamed into place; an existing store is swapped atomically (`renameat2` with
//! `RENAME_EXCHANGE` on Linux) and the old folder removed afterwards. A failure at any point
//! removes the temporary folder and leaves the old store as it was; temporaries of killed
//! loads (dead PID) are removed by the next load into the same target.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::fs::File;
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError, RwLock, TryLockError};
use std::time::Instant;

use rayon::prelude::*;
use roaring::RoaringBitmap;
use rustc_hash::FxHashMap;
use serde::{Deserialize, Serialize};

use super::prefetch::prefetch;
use super::{
    GraphEntry, Manifest, PredicateInfo, SegmentInfo, Store, StoreError, FORMAT_NAME,
    FORMAT_VERSION, MANIFEST,
};
use crate::checksum::Checksummed;
use crate::k2tree::{file, height_for, morton, K2Tree};
use crate::progress::{ProgressHandle, Stage, Unit};
use crate::rdf::edges::{EdgeCollector, Record, SortedEdges};
use crate::rdf::parse::{
    self, BadStatement, Batch, Format, Input, ParseError, ReadOptions, Skipped, DEFAULT_GRAPH,
};
use crate::rdf::terms;

/// How to load.
#[derive(Clone, Debug)]
pub struct LoadOptions {
    /// Format of every input; guessed from each file name when `None`.
    pub format: Option<Format>,
    /// Skip and count malformed statements instead of stopping at the first. N-Triples and
    /// N-Quads skip exactly the bad line; Turtle and TriG resume where oxttl's error
    /// recovery does, which may drop the rest of the bad statement.
    pub lenient: bool,
    /// Bytes of edges buffered in memory before sorted runs are spilled to disk; also the
    /// budget of the relations whose trees are built concurrently (16 bytes an edge; a
    /// relation over it is built alone).
    pub memory: usize,
    /// Where the load reports its stages (parse, trees); `None`: nowhere.
    pub progress: ProgressHandle,
    /// Chunk size for parallel N-Triples/N-Quads parsing.
    pub chunk_bytes: usize,
    /// Set to `true` (from a signal handler, another thread) to stop the load: it then
    /// fails with [`LoadError::Interrupted`], removes its temporary folder and leaves the
    /// target as it was. Checked between batches of input and between trees.
    pub interrupt: Option<Arc<AtomicBool>>,
    /// Test hook: fail after writing this many trees, before the swap.
    #[doc(hidden)]
    pub fail_after_trees: Option<usize>,
}

impl Default for LoadOptions {
    fn default() -> Self {
        LoadOptions {
            format: None,
            lenient: false,
            memory: default_memory(),
            progress: ProgressHandle::default(),
            chunk_bytes: 4 << 20,
            interrupt: None,
            fail_after_trees: None,
        }
    }
}

/// A quarter of physical memory (1 GiB when it cannot be read).
pub fn default_memory() -> usize {
    let total = std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("MemTotal:"))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        })
        .map(|kb| kb * 1024);
    total.map_or(1 << 30, |b| (b / 4) as usize)
}

/// What a load did; also kept in the manifest's `loads`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct LoadReport {
    /// Input names.
    pub inputs: Vec<String>,
    /// Statements read (triples and quads), duplicates included.
    pub statements: u64,
    /// Malformed statements skipped (lenient mode).
    pub skipped: u64,
    /// The first skipped statements, with where and why (not kept in the manifest).
    #[serde(skip)]
    pub skipped_first: Vec<BadStatement>,
    /// Terms this load added to the dictionary.
    pub new_terms: u64,
    /// Node count after the load.
    pub node_count: u32,
    /// Distinct (graph, predicate, s, o) edges read (before merging with old trees).
    pub distinct_edges: u64,
    /// Relations (graph, predicate) built or rebuilt.
    pub relations_built: usize,
    /// Relations carried over unchanged.
    pub relations_kept: usize,
    /// Sorted runs spilled to disk.
    pub runs_spilled: usize,
    /// Seconds parsing and numbering terms.
    pub parse_seconds: f64,
    /// Of the parse phase: seconds the serial reader spent reading, decompressing and
    /// cutting chunks (0 for memory-mapped files). Stages overlap, so these sub-times are
    /// each a stage's busy time, not parts of a sum.
    #[serde(default)]
    pub parse_read_seconds: f64,
    /// Of the parse phase: seconds the pool was parsing groups of chunks.
    #[serde(default)]
    pub parse_chunks_seconds: f64,
    /// Of the parse phase: seconds the numbering waited for parsed batches.
    #[serde(default)]
    pub parse_wait_seconds: f64,
    /// Of the parse phase: seconds numbering terms, summed over the threads (each parse
    /// task numbers its own batch).
    #[serde(default)]
    pub number_seconds: f64,
    /// Of the parse phase: seconds the consumer spent taking the parse tasks' edge
    /// records into the edge buffer (spills included).
    #[serde(default)]
    pub parse_hand_on_seconds: f64,
    /// Seconds building and writing trees, dictionary and manifest.
    pub build_seconds: f64,
    /// Of the build phase: seconds sorting and numbering the new terms and grouping the
    /// edge buffer by relation (one after the other).
    #[serde(default)]
    pub sort_seconds: f64,
    /// Of the sort phase: seconds grouping the edge buffer by relation.
    #[serde(default)]
    pub sort_edges_seconds: f64,
    /// Of the sort phase: seconds listing, sorting and renumbering the new terms.
    #[serde(default)]
    pub sort_terms_seconds: f64,
    /// Of the build phase: seconds writing the new dictionary segment (on its own thread,
    /// beside the trees).
    #[serde(default)]
    pub dictionary_seconds: f64,
    /// Of the build phase: seconds building and writing the trees.
    #[serde(default)]
    pub trees_seconds: f64,
    /// Seconds end to end.
    pub total_seconds: f64,
    /// Bytes of the finished store.
    pub store_bytes: u64,
    /// Peak resident memory of the process (Linux `VmHWM`), when known.
    pub peak_rss_bytes: Option<u64>,
}

/// Why a load failed. The target is unchanged whenever one is returned.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum LoadError {
    /// An input is missing, unreadable, of unknown format or malformed.
    #[error(transparent)]
    Parse(#[from] ParseError),
    /// The existing store cannot be opened (it is never overwritten then).
    #[error("existing store: {0}")]
    Existing(StoreError),
    /// The target exists but is not a store.
    #[error("{0}: exists and is not a k2rpq store; refusing to replace it")]
    NotAStore(PathBuf),
    /// Writing the new store failed.
    #[error("{path}: {error}")]
    Io {
        /// The file or folder.
        path: PathBuf,
        /// The error.
        error: io::Error,
    },
    /// More distinct terms than a `u32` id space holds.
    #[error("more than {} distinct terms", u32::MAX - 1)]
    TooManyTerms,
    /// A term longer than a store keeps.
    #[error("a term of {bytes} bytes (at most {} are kept)", MAX_KEY)]
    TermTooLong {
        /// Its length in bytes.
        bytes: usize,
    },
    /// Over 1 TiB of new term bytes in one shard of the term table.
    #[error("over 1 TiB of new terms in one shard of the term table")]
    TooManyTermBytes,
    /// Edges could not be spilled to the temporary folder.
    #[error("spilling edges: {0}")]
    Spill(io::Error),
    /// A tree could not be built or written.
    #[error("building {file}: {reason}")]
    Tree {
        /// The tree file.
        file: String,
        /// Why.
        reason: String,
    },
    /// [`LoadOptions::interrupt`] was set.
    #[error("interrupted; the store is as it was before the load")]
    Interrupted,
    /// The target cannot hold a store: the current folder, `..`, or a file system root.
    #[error("{0}: cannot load into the current folder or a root; name a new folder for the store")]
    BadTarget(PathBuf),
    /// The failure injected by [`LoadOptions::fail_after_trees`].
    #[error("injected failure (test hook)")]
    Injected,
}

impl LoadError {
    /// A parse error, with the load's own errors that crossed the parser as sink errors
    /// taken out again.
    fn from_parse(e: ParseError) -> LoadError {
        match e {
            ParseError::Sink(e) => match e.downcast::<LoadError>() {
                Ok(own) => *own,
                Err(other) => LoadError::Parse(ParseError::Sink(other)),
            },
            e => LoadError::Parse(e),
        }
    }
}

impl From<StoreError> for LoadError {
    fn from(e: StoreError) -> Self {
        LoadError::Existing(e)
    }
}

fn io_err(path: &Path) -> impl Fn(io::Error) -> LoadError + '_ {
    move |error| LoadError::Io {
        path: path.to_path_buf(),
        error,
    }
}

/// Removes the temporary folder unless the load committed.
struct TempDir {
    path: PathBuf,
    keep: bool,
}

impl Drop for TempDir {
    fn drop(&mut self) {
        if !self.keep {
            let _ = std::fs::remove_dir_all(&self.path);
        }
    }
}

/// Refuses targets that a finished store cannot be renamed onto: `.`, `..`, a root, or
/// the current folder under another name.
fn check_target(dir: &Path) -> Result<(), LoadError> {
    let bad = || LoadError::BadTarget(dir.to_path_buf());
    if dir.file_name().is_none() {
        return Err(bad());
    }
    if let (Ok(target), Ok(cwd)) = (dir.canonicalize(), std::env::current_dir()) {
        if cwd.starts_with(&target) {
            return Err(bad());
        }
    }
    Ok(())
}

/// Marks the temporary folders of loads: `.NAME` + this + `PID-NANOS`.
const TEMP_MARK: &str = ".k2rpq-tmp-";

fn temp_prefix(dir: &Path) -> String {
    let name = dir
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "store".into());
    format!(".{name}{TEMP_MARK}")
}

/// Removes the temporary folders that loads into any store of `parent` left when their
/// process was killed.
fn remove_stale_temps(parent: &Path) {
    let Ok(entries) = std::fs::read_dir(parent) else {
        return;
    };
    for e in entries.flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        let Some((_, rest)) = name.strip_prefix('.').and_then(|n| n.split_once(TEMP_MARK)) else {
            continue;
        };
        let pid = rest.split('-').next().unwrap_or("");
        let alive = pid
            .parse::<u32>()
            .is_ok_and(|p| p == std::process::id() || Path::new(&format!("/proc/{p}")).exists());
        if !alive {
            let _ = std::fs::remove_dir_all(e.path());
        }
    }
}

fn link_or_copy(from: &Path, to: &Path) -> io::Result<()> {
    std::fs::hard_link(from, to).or_else(|_| std::fs::copy(from, to).map(|_| ()))
}

/// Writes a new file of the temporary folder with `fill` and syncs it; returns its length
/// and CRC-32, taken as it is written. The folder is synced and put in place whole at the
/// end, so a file needs no rename or folder sync of its own (a load of 5,000 relations
/// made 5,000 of each), nor a second read for its checksum.
fn write_new(
    path: &Path,
    fill: impl FnOnce(&mut dyn Write) -> io::Result<()>,
) -> io::Result<(u64, u32)> {
    let f = File::create(path)?;
    let mut w = Checksummed::new(io::BufWriter::with_capacity(1 << 20, &f));
    fill(&mut w)?;
    w.flush()?;
    let (bytes, crc) = (w.bytes, w.crc32());
    drop(w);
    f.sync_all()?;
    Ok((bytes, crc))
}

/// Atomically exchanges two paths (Linux), or reports that it cannot.
#[cfg(target_os = "linux")]
fn exchange(a: &Path, b: &Path) -> io::Result<()> {
    use std::ffi::CString;
    use std::os::unix::ffi::OsStrExt;
    let ca = CString::new(a.as_os_str().as_bytes()).map_err(io::Error::other)?;
    let cb = CString::new(b.as_os_str().as_bytes()).map_err(io::Error::other)?;
    // SAFETY: two valid NUL-terminated paths; renameat2 touches nothing else.
    let r = unsafe {
        libc::renameat2(
            libc::AT_FDCWD,
            ca.as_ptr(),
            libc::AT_FDCWD,
            cb.as_ptr(),
            libc::RENAME_EXCHANGE,
        )
    };
    if r == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

#[cfg(not(target_os = "linux"))]
fn exchange(_: &Path, _: &Path) -> io::Result<()> {
    Err(io::Error::from(io::ErrorKind::Unsupported))
}

/// Puts the finished `tmp` in place of `dir`.
fn commit(tmp: &Path, dir: &Path, replace: bool) -> io::Result<()> {
    if !replace {
        std::fs::rename(tmp, dir)?;
    } else if exchange(tmp, dir).is_ok() {
        // `tmp` now holds the old store.
        std::fs::remove_dir_all(tmp)?;
    } else {
        // Not atomic: between the two renames the target is briefly absent (the old
        // store is still whole under `old`).
        let old = tmp.with_extension("old");
        std::fs::rename(dir, &old)?;
        std::fs::rename(tmp, dir)?;
        std::fs::remove_dir_all(&old)?;
    }
    if let Some(parent) = dir.parent() {
        if let Ok(f) = File::open(if parent.as_os_str().is_empty() {
            Path::new(".")
        } else {
            parent
        }) {
            let _ = f.sync_all();
        }
    }
    Ok(())
}

fn peak_rss() -> Option<u64> {
    let s = std::fs::read_to_string("/proc/self/status").ok()?;
    let kb = s
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))?
        .trim()
        .trim_end_matches("kB")
        .trim()
        .parse::<u64>()
        .ok()?;
    Some(kb * 1024)
}

/// Shards of the term table. Every parse task numbers its own batch, taking the shards'
/// locks one at a time, so there must be many more shards than threads for the tasks to
/// rarely wait for one another.
const SHARDS: usize = 256;

/// The shard of a key from its [`terms::hash_key`]. The hash is re-mixed so that the shard
/// does not correlate with the bits each shard's table uses (the low bits of the high
/// half pick the bucket).
fn shard_of(hash: u64) -> usize {
    (hash.wrapping_mul(0x9e37_79b9_7f4a_7c15).rotate_left(17) % SHARDS as u64) as usize
}

/// One entry of a shard's table: where the key lies in the arena, its provisional id and
/// the hash bits the table uses, so that a probe reads the table slot, then the key bytes
/// (only when the length matches too), and nothing else. All zeros is an empty slot (a
/// stored entry's length field holds the key length plus one).
#[derive(Clone, Copy, Default)]
struct Entry {
    /// Offset in the arena (low 40 bits) and key length plus one (high 24 bits).
    at: u64,
    /// Provisional id (final for old terms; `old_n + k·SHARDS + shard` for the shard's
    /// `k`-th new term).
    id: u32,
    /// High half of the key's [`terms::hash_key`].
    hash: u32,
}

impl Entry {
    /// Whether this slot holds no entry.
    fn is_empty(&self) -> bool {
        self.at == 0
    }

    /// Offset of the key in the arena.
    fn start(&self) -> usize {
        (self.at & ((1 << 40) - 1)) as usize
    }

    /// `at >> 40` of an entry whose key is `len` bytes long.
    fn len_field(len: usize) -> u64 {
        len as u64 + 1
    }
}

/// Keys longer than this (16 MiB) are kept whole in the arena but do not fit the
/// entry's length field; they are rejected as a load error (no RDF term is that long in
/// practice).
const MAX_KEY: usize = (1 << 24) - 2;

/// Entries per bucket: 4 × 16 bytes, one cache line.
const BUCKET: usize = 4;

/// One cache line of entries: a probe reads whole buckets, so it misses the cache once
/// for up to four entries, and the bucket for a key can be prefetched before it is read.
#[derive(Clone, Copy, Default)]
#[repr(C, align(64))]
struct Bucket([Entry; BUCKET]);

/// How many keys ahead of the one being numbered [`Shard::number_all`] prefetches: its
/// table bucket `2 × AHEAD` ahead, the key bytes of the matching entries `AHEAD` ahead.
/// A few lines in flight per stage cover the ~100 ns of a miss at ~20 ns a key.
const AHEAD: usize = 8;

/// One shard of the term table.
///
/// Keys live back to back in one arena (no allocation per term, no pointer to chase per
/// probe). The table is a small open-addressing hash table of its own rather than
/// hashbrown's, because a batch looks up its keys shard by shard and the probes can then
/// be prefetched a few keys ahead ([`Shard::number_all`]): the table (hundreds of MiB in
/// all) and the arena are far beyond the caches, so each lookup would otherwise wait for
/// two or three memory misses in turn. Buckets of four entries are probed linearly from
/// the bucket the key's hash picks; there are no deletions, so an empty slot ends a probe.
#[derive(Default)]
struct Shard {
    /// Power-of-two many buckets (none before the first key).
    buckets: Vec<Bucket>,
    /// Entries in `buckets`.
    len: usize,
    /// Concatenated keys.
    keys: Vec<u8>,
    /// New terms numbered by this shard.
    new: u32,
}

impl Shard {
    /// Key of `entry`.
    fn key(&self, entry: &Entry) -> &[u8] {
        let start = entry.start();
        &self.keys[start..start + (entry.at >> 40) as usize - 1]
    }

    /// The bucket where the probe for hash bits `h32` starts (`buckets` is not empty).
    fn home(&self, h32: u32) -> usize {
        h32 as usize & (self.buckets.len() - 1)
    }

    /// Where `key` (of hash bits `h32`) is: `Ok` its entry, or `Err` the empty slot
    /// (bucket, index) where it would go. `buckets` must have an empty slot.
    fn find(&self, key: &[u8], h32: u32) -> Result<Entry, (usize, usize)> {
        let len = Entry::len_field(key.len());
        let mask = self.buckets.len() - 1;
        let mut b = self.home(h32);
        loop {
            for (k, e) in self.buckets[b].0.iter().enumerate() {
                if e.is_empty() {
                    return Err((b, k));
                }
                if e.hash == h32 && e.at >> 40 == len && self.key(e) == key {
                    return Ok(*e);
                }
            }
            b = (b + 1) & mask;
        }
    }

    /// Doubles the table (or makes the first one) and re-inserts its entries by their
    /// stored hash bits.
    fn grow(&mut self) {
        let n = (self.buckets.len() * 2).max(16);
        let old = std::mem::replace(&mut self.buckets, vec![Bucket::default(); n]);
        let mask = n - 1;
        for e in old
            .iter()
            .flat_map(|b| b.0.iter())
            .filter(|e| !e.is_empty())
        {
            let mut b = e.hash as usize & mask;
            loop {
                if let Some(slot) = self.buckets[b].0.iter_mut().find(|s| s.is_empty()) {
                    *slot = *e;
                    break;
                }
                b = (b + 1) & mask;
            }
        }
    }

    /// Provisional id of `key` (whose [`terms::hash_key`] is `hash`), numbering it if new.
    fn id(
        &mut self,
        key: &[u8],
        hash: u64,
        shard: usize,
        old: Option<&Store>,
        old_n: u32,
    ) -> Result<u32, LoadError> {
        let h32 = (hash >> 32) as u32;
        // At most 3/4 full: probes stay short and always meet an empty slot.
        if (self.len + 1) * 4 > self.buckets.len() * BUCKET * 3 {
            self.grow();
        }
        let (b, k) = match self.find(key, h32) {
            Ok(e) => return Ok(e.id),
            Err(slot) => slot,
        };
        if key.len() > MAX_KEY {
            return Err(LoadError::TermTooLong { bytes: key.len() });
        }
        if self.keys.len() as u64 >= 1 << 40 {
            return Err(LoadError::TooManyTermBytes);
        }
        // Old terms seen are cached in the same table: a dictionary lookup (binary search
        // and block decode) costs far more than a hash probe.
        let id = match old.and_then(|s| s.dictionary().id_of_key(key)) {
            Some(id) => id,
            None => {
                let id = old_n as u64 + self.new as u64 * SHARDS as u64 + shard as u64;
                if id >= u32::MAX as u64 {
                    return Err(LoadError::TooManyTerms);
                }
                self.new += 1;
                id as u32
            }
        };
        self.buckets[b].0[k] = Entry {
            at: self.keys.len() as u64 | (Entry::len_field(key.len()) << 40),
            id,
            hash: h32,
        };
        self.len += 1;
        self.keys.extend_from_slice(key);
        Ok(id)
    }

    /// Numbers the keys `idx` of `batch` (all of this shard; `(index, hash)` pairs, so
    /// that hashes are read in order, not at random in the batch) into `ids`, prefetching
    /// ahead: the bucket and the key's place in `batch.ends` for key `j + 2·AHEAD`, then
    /// (once those are likely cached) the batch's key bytes and the arena bytes of the
    /// bucket's entries whose hash bits match, for key `j + AHEAD`, so that [`Shard::id`]
    /// finds all of them in cache. Prefetches are hints only: a table that grows in
    /// between just makes some of them useless.
    fn number_all(
        &mut self,
        batch: &Batch,
        idx: &[(u32, u64)],
        ids: &mut [u32],
        shard: usize,
        old: Option<&Store>,
        old_n: u32,
    ) -> Result<(), LoadError> {
        for (j, &(i, hash)) in idx.iter().enumerate() {
            if !self.buckets.is_empty() {
                if let Some(&(far, hash)) = idx.get(j + 2 * AHEAD) {
                    prefetch(&self.buckets[self.home((hash >> 32) as u32)]);
                    prefetch(batch.ends.as_ptr().wrapping_add(far as usize));
                }
                if let Some(&(near, hash)) = idx.get(j + AHEAD) {
                    prefetch(batch.key(near as usize).as_ptr());
                    let h32 = (hash >> 32) as u32;
                    for e in &self.buckets[self.home(h32)].0 {
                        if e.hash == h32 && !e.is_empty() {
                            prefetch(self.keys.as_ptr().wrapping_add(e.start()));
                        }
                    }
                }
            }
            let i = i as usize;
            ids[i] = self.id(batch.key(i), hash, shard, old, old_n)?;
        }
        Ok(())
    }

    /// The entries of the new terms, in arena order, with the table freed (numbering is
    /// over: at 1B wikidata-like triples the tables held 21 to 43 bytes for each of 287M
    /// terms, which the term sort and the edge grouping must not find still allocated).
    /// The term sort reads keys in the order of this list in its first passes, and the
    /// table's order would make every one of those reads a cache miss (measured: +10-30 %
    /// sort time).
    fn take_new_entries(&mut self, old_n: u32) -> Vec<Entry> {
        let mut entries: Vec<Entry> = self
            .buckets
            .iter()
            .flat_map(|b| b.0.iter())
            .filter(|e| !e.is_empty() && e.id >= old_n)
            .copied()
            .collect();
        self.buckets = Vec::new();
        self.len = 0;
        entries.sort_unstable_by_key(Entry::start);
        entries
    }
}

/// `(key, provisional id)` of the new terms of every shard, shard after shard (each in
/// arena order), from [`Shard::take_new_entries`]'s lists: allocated once at its exact
/// size and filled in parallel.
fn new_terms<'a>(shards: &'a [Shard], entries: &[Vec<Entry>]) -> Vec<(&'a [u8], u32)> {
    let mut starts = Vec::with_capacity(entries.len() + 1);
    starts.push(0usize);
    for e in entries {
        starts.push(starts[starts.len() - 1] + e.len());
    }
    let total = starts[entries.len()];
    (0..total)
        .into_par_iter()
        .map(|i| {
            let s = starts.partition_point(|&a| a <= i) - 1;
            let e = &entries[s][i - starts[s]];
            (shards[s].key(e), e.id)
        })
        .collect()
}

/// Parsing state shared by the parse tasks: provisional term ids and relation numbers.
///
/// Each parse task numbers its own batch ([`Numbering::number`]): no serial step
/// touches every term. Provisional ids and relation numbers then depend on which task
/// came first, but nothing stored does: new terms are renumbered by key order after
/// parsing, and relations are built and recorded by (graph, predicate) ids.
struct Numbering<'a> {
    old: Option<&'a Store>,
    old_n: u32,
    shards: Vec<Mutex<Shard>>,
    relations: RwLock<Relations>,
    /// Nanoseconds spent in [`Numbering::number`], summed over threads.
    busy_nanos: AtomicU64,
}

/// Relation numbers of `(graph, predicate)` provisional ids, and the inverse.
#[derive(Default)]
struct Relations {
    numbers: FxHashMap<(u32, u32), u32>,
    keys: Vec<(u32, u32)>,
}

/// A lock's guard even if another thread panicked holding it (the load then fails by
/// that panic anyway; a shard is never left half-updated by an error return).
fn locked<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

impl Numbering<'_> {
    /// The edge records of `batch`, its terms numbered (new terms added to the shards).
    ///
    /// The batch's keys are ordered by shard (a counting sort); then each shard's keys
    /// are numbered under its lock, starting at a shard that depends on the thread and
    /// skipping shards another task holds until the end, so that tasks rarely queue on
    /// one lock.
    fn number(&self, batch: &Batch) -> Result<Vec<Record>, LoadError> {
        let t = Instant::now();
        let n = batch.term_count();
        let shard: Vec<u8> = batch.hashes.iter().map(|&h| shard_of(h) as u8).collect();
        let mut starts = vec![0u32; SHARDS + 1];
        for &s in &shard {
            starts[s as usize + 1] += 1;
        }
        for s in 0..SHARDS {
            starts[s + 1] += starts[s];
        }
        let mut pos = starts.clone();
        let mut order = vec![(0u32, 0u64); n];
        for (i, &s) in shard.iter().enumerate() {
            order[pos[s as usize] as usize] = (i as u32, batch.hashes[i]);
            pos[s as usize] += 1;
        }
        let mut ids = vec![0u32; n];
        let (old, old_n) = (self.old, self.old_n);
        let mut number_shard = |s: usize, shard: &mut Shard| -> Result<(), LoadError> {
            let idx = &order[starts[s] as usize..starts[s + 1] as usize];
            shard.number_all(batch, idx, &mut ids, s, old, old_n)
        };
        let first = rayon::current_thread_index().unwrap_or(0) * 61 % SHARDS;
        let mut busy = Vec::new();
        for s in (first..SHARDS).chain(0..first) {
            if starts[s] == starts[s + 1] {
                continue;
            }
            match self.shards[s].try_lock() {
                Ok(mut shard) => number_shard(s, &mut shard)?,
                Err(TryLockError::Poisoned(p)) => number_shard(s, &mut p.into_inner())?,
                Err(TryLockError::WouldBlock) => busy.push(s),
            }
        }
        for s in busy {
            number_shard(s, &mut locked(&self.shards[s]))?;
        }
        // Relations: a batch has few distinct ones, so a local map spares the shared lock.
        let mut local: FxHashMap<(u32, u32), u32> = FxHashMap::default();
        let records = batch
            .quads
            .iter()
            .map(|&[g, p, s, o]| {
                let g = if g == DEFAULT_GRAPH {
                    DEFAULT_GRAPH
                } else {
                    ids[g as usize]
                };
                let key = (g, ids[p as usize]);
                let rel = *local.entry(key).or_insert_with(|| self.relation(key));
                [rel, ids[s as usize], ids[o as usize]]
            })
            .collect();
        self.busy_nanos
            .fetch_add(t.elapsed().as_nanos() as u64, Ordering::Relaxed);
        Ok(records)
    }

    /// The number of relation `key`, given the next free one if it has none yet.
    fn relation(&self, key: (u32, u32)) -> u32 {
        let known = self
            .relations
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .numbers
            .get(&key)
            .copied();
        known.unwrap_or_else(|| {
            let mut r = self
                .relations
                .write()
                .unwrap_or_else(PoisonError::into_inner);
            let next = r.keys.len() as u32;
            let rel = *r.numbers.entry(key).or_insert(next);
            if rel == next {
                r.keys.push(key);
            }
            rel
        })
    }
}

/// The sink error of an input's reader stopped because another input failed.
#[derive(Debug, thiserror::Error)]
#[error("stopped: another input failed")]
struct Stopped;

/// How many of `inputs` inputs are read at the same time: enough readers that their
/// inflating (one thread each) keeps the parsing pool busy, as many as half the threads
/// (at least two), since each reader thread also waits on the pool for its chunks.
fn concurrent_inputs(inputs: usize) -> usize {
    (rayon::current_num_threads() / 2).max(2).min(inputs).max(1)
}

/// Loads `inputs` into the store at `dir` (created, or extended incrementally).
///
/// On success the store at `dir` holds the old contents (ids unchanged) plus the inputs;
/// on any error it is exactly as before and no temporary folder remains.
pub fn load(inputs: &[Input], dir: &Path, options: &LoadOptions) -> Result<LoadReport, LoadError> {
    let start = Instant::now();
    // Fail fast on targets and inputs that cannot work, before any work.
    check_target(dir)?;
    let inputs = parse::expand_folders(inputs)?;
    let inputs = inputs.as_slice();
    let readers = concurrent_inputs(inputs.len());
    let read_options = ReadOptions {
        format: options.format,
        lenient: options.lenient,
        chunk_bytes: options.chunk_bytes,
        concurrent_inputs: readers,
    };
    for input in inputs {
        if let Input::Path(p) = input {
            File::open(p).map_err(|error| ParseError::Open {
                file: input.name(),
                error,
            })?;
        }
        parse::resolve_format(input, &read_options)?;
    }
    let interrupted = || {
        options
            .interrupt
            .as_ref()
            .is_some_and(|f| f.load(Ordering::Relaxed))
    };
    let old = if dir.join(MANIFEST).exists() {
        Some(Store::open(dir)?)
    } else if dir.exists()
        && std::fs::read_dir(dir)
            .map_err(io_err(dir))?
            .next()
            .is_some()
    {
        return Err(LoadError::NotAStore(dir.to_path_buf()));
    } else {
        None
    };
    let replace = dir.exists();
    let parent = match dir.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    };
    std::fs::create_dir_all(&parent).map_err(io_err(&parent))?;
    remove_stale_temps(&parent);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    let tmp = TempDir {
        path: parent.join(format!(
            "{}{}-{nanos}",
            temp_prefix(dir),
            std::process::id()
        )),
        keep: false,
    };
    let runs_dir = tmp.path.join("runs");
    std::fs::create_dir_all(&runs_dir).map_err(io_err(&runs_dir))?;

    // ---- Parse and number.
    let old_n = old.as_ref().map_or(0, |s| s.node_count());
    let numbering = Numbering {
        old: old.as_ref(),
        old_n,
        shards: (0..SHARDS).map(|_| Mutex::default()).collect(),
        relations: RwLock::default(),
        busy_nanos: AtomicU64::new(0),
    };
    let edges = Mutex::new(EdgeCollector::new(runs_dir.clone(), options.memory));
    let statements = AtomicU64::new(0);
    let sizes: Option<u64> = inputs.iter().map(parse::input_size).sum();
    let read_bytes = Arc::new(AtomicU64::new(0));
    let pb = Stage::begin(options.progress.get(), "parse", Unit::Bytes, sizes);
    // Inputs are read `readers` at a time, each by a thread of its own taking the next
    // input when done (its reader decompresses on a thread of its own too, and every
    // input's chunks are parsed on the shared pool): one gzip stream inflates on one
    // thread, too slowly for the parsers, while a dump cut into shards inflates on as
    // many. The first input to fail stops the others at their next batch.
    let next_input = AtomicUsize::new(0);
    let stop = AtomicBool::new(false);
    type Outcome = Result<(Skipped, parse::ReadTimes), ParseError>;
    let outcomes: Vec<Mutex<Option<Outcome>>> = inputs.iter().map(|_| Mutex::new(None)).collect();
    let t0 = Instant::now();
    std::thread::scope(|scope| {
        for _ in 0..readers {
            scope.spawn(|| loop {
                let i = next_input.fetch_add(1, Ordering::Relaxed);
                if i >= inputs.len() || stop.load(Ordering::Relaxed) {
                    break;
                }
                let outcome = parse::read_input_with(
                    &inputs[i],
                    &read_options,
                    read_bytes.clone(),
                    &|batch| Ok(numbering.number(&batch)?),
                    &mut |records| {
                        if interrupted() {
                            return Err(LoadError::Interrupted.into());
                        }
                        if stop.load(Ordering::Relaxed) {
                            return Err(Box::new(Stopped));
                        }
                        let n = records.len() as u64;
                        locked(&edges)
                            .add_piece(records)
                            .map_err(LoadError::Spill)?;
                        let done = statements.fetch_add(n, Ordering::Relaxed) + n;
                        pb.set(read_bytes.load(Ordering::Relaxed));
                        let secs = t0.elapsed().as_secs_f64().max(1e-9);
                        pb.message(&format!(
                            "{done} statements, {:.2} M/s",
                            done as f64 / secs / 1e6
                        ));
                        Ok(())
                    },
                );
                if outcome.is_err() {
                    stop.store(true, Ordering::Relaxed);
                }
                *locked(&outcomes[i]) = Some(outcome);
            });
        }
    });
    // The error of the first failed input in input order (not one stopped by it).
    let mut skipped = Skipped::default();
    let mut times = parse::ReadTimes::default();
    let mut first_error = None;
    for outcome in outcomes
        .into_iter()
        .filter_map(|m| m.into_inner().unwrap_or_else(PoisonError::into_inner))
    {
        match outcome {
            Ok((bad, t)) => {
                skipped.extend(bad);
                times.add(&t);
            }
            Err(ParseError::Sink(e)) if e.is::<Stopped>() => {}
            Err(e) => {
                first_error.get_or_insert(e);
            }
        }
    }
    if let Some(e) = first_error {
        return Err(LoadError::from_parse(e));
    }
    let statements = statements.into_inner();
    let edges = edges.into_inner().unwrap_or_else(PoisonError::into_inner);
    drop(pb);
    let parse_seconds = start.elapsed().as_secs_f64();
    let build_start = Instant::now();
    let runs_spilled = edges.runs();

    // ---- Dictionary: new terms sorted and numbered after the old ones.
    let number_seconds = numbering.busy_nanos.load(Ordering::Relaxed) as f64 * 1e-9;
    let mut shards: Vec<Shard> = numbering
        .shards
        .into_iter()
        .map(|m| m.into_inner().unwrap_or_else(PoisonError::into_inner))
        .collect();
    let relation_keys = numbering
        .relations
        .into_inner()
        .unwrap_or_else(PoisonError::into_inner)
        .keys;
    // Provisional ids of new terms are `old_n + k·SHARDS + shard`: `perm` spans them all.
    let span = shards.iter().map(|s| s.new as usize).max().unwrap_or(0) * SHARDS;
    // One step after the other, each parallel, so that the transient memory of each
    // meets the least of the others': the term tables are freed as the new terms are
    // listed (16 bytes a term); the edge buffer is grouped (records and pairs, 20 bytes
    // an edge, at its start); the new terms are sorted and numbered. Side by side, the
    // grouping and the term sort made the load's memory peak (20M wikidata-like
    // triples: 977 to 1,062 MiB side by side, 962 to 983 MiB one after the other), for
    // the grouping's time (2 s of a 30 s build there).
    let sort_start = Instant::now();
    let t = Instant::now();
    let entries: Vec<Vec<Entry>> = shards
        .par_iter_mut()
        .map(|s| s.take_new_entries(old_n))
        .collect();
    let mut sort_terms_seconds = t.elapsed().as_secs_f64();
    let t = Instant::now();
    let sorted = edges.finish();
    let sort_edges_seconds = t.elapsed().as_secs_f64();
    let t = Instant::now();
    let mut new_keys = new_terms(&shards, &entries);
    drop(entries);
    super::key_sort::sort_keys(&mut new_keys);
    // Each provisional id is written once: relaxed atomics let the writes run in
    // parallel (random writes over `span` ids, one thread's pass otherwise).
    let perm: Vec<AtomicU32> = (0..span)
        .into_par_iter()
        .map(|_| AtomicU32::new(0))
        .collect();
    new_keys
        .par_iter()
        .enumerate()
        .for_each(|(rank, (_, prov))| {
            perm[(*prov - old_n) as usize].store(old_n + rank as u32, Ordering::Relaxed);
        });
    sort_terms_seconds += t.elapsed().as_secs_f64();
    let sort_seconds = sort_start.elapsed().as_secs_f64();
    let new_n = old_n + new_keys.len() as u32;
    let remap = |id: u32| {
        if id < old_n || id == DEFAULT_GRAPH {
            id
        } else {
            perm[(id - old_n) as usize].load(Ordering::Relaxed)
        }
    };
    let mut segments: Vec<SegmentInfo> = old
        .as_ref()
        .map_or_else(Vec::new, |s| s.manifest().dictionary.clone());
    for s in &segments {
        let to = tmp.path.join(&s.file);
        link_or_copy(&dir.join(&s.file), &to).map_err(io_err(&to))?;
    }
    // The new segment is written on its own thread while the trees are built (below):
    // front-coding is sequential, and on many cores it would otherwise add its whole
    // time to the build phase.
    let new_segment = (!new_keys.is_empty() || segments.is_empty()).then(|| {
        let file = format!("dict-{:04}.fc", segments.len());
        let path = tmp.path.join(&file);
        (file, path)
    });
    let write_dictionary = || -> Result<(Option<SegmentInfo>, f64), LoadError> {
        let Some((file, path)) = &new_segment else {
            return Ok((None, 0.0));
        };
        let t = Instant::now();
        let (bytes, crc32) =
            super::dictionary::write_segment_of(path, old_n, &new_keys, |(k, _)| k)
                .map_err(io_err(path))?;
        let segment = SegmentInfo {
            file: file.clone(),
            first_id: old_n,
            count: new_keys.len() as u32,
            bytes,
            crc32,
        };
        Ok((Some(segment), t.elapsed().as_secs_f64()))
    };
    // Terms of ids, for predicate IRIs and graph names in the manifest.
    let term_of = |id: u32| -> Option<oxrdf::Term> {
        if id >= old_n {
            terms::decode(new_keys[(id - old_n) as usize].0)
        } else {
            old.as_ref().and_then(|s| s.dictionary().term(id))
        }
    };
    let iri_of = |id: u32| -> String {
        match term_of(id) {
            Some(oxrdf::Term::NamedNode(n)) => n.into_string(),
            Some(t) => t.to_string(),
            None => String::new(),
        }
    };

    // ---- Graphs: old ones keep their index; new ones follow in id order.
    let mut graphs: Vec<GraphEntry> = old.as_ref().map_or_else(
        || vec![GraphEntry::default()],
        |s| s.manifest().graphs.clone(),
    );
    let mut graph_index: HashMap<Option<u32>, usize> =
        graphs.iter().enumerate().map(|(i, g)| (g.id, i)).collect();
    let mut fresh: Vec<u32> = relation_keys
        .iter()
        .map(|&(g, _)| remap(g))
        .filter(|&g| g != DEFAULT_GRAPH && !graph_index.contains_key(&Some(g)))
        .collect();
    fresh.sort_unstable();
    fresh.dedup();
    for g in fresh {
        graph_index.insert(Some(g), graphs.len());
        let name = term_of(g).map_or_else(String::new, |t| t.to_string());
        graphs.push(GraphEntry {
            name: Some(name),
            id: Some(g),
            ..GraphEntry::default()
        });
    }
    let graph_of = |g: u32| graph_index[&(if g == DEFAULT_GRAPH { None } else { Some(g) })];

    // ---- Trees: one job per touched relation, plus the untouched ones to rebuild when
    // the padded side grew; the others are carried over as files.
    let mut new_preds: Vec<BTreeMap<u32, PredicateInfo>> = graphs
        .iter()
        .map(|g| g.predicates.iter().map(|p| (p.id, p.clone())).collect())
        .collect();
    let mut node_sets: Vec<Option<RoaringBitmap>> = vec![None; graphs.len()];
    let side_changed =
        height_for(old_n as u64, old_n as u64) != height_for(new_n as u64, new_n as u64);
    let mut jobs: Vec<TreeJob> = Vec::new();
    let mut touched: HashSet<(usize, u32)> = HashSet::new();
    for &(rel, records) in sorted.relations() {
        let (g, p) = relation_keys[rel as usize];
        let (gi, pid) = (graph_of(remap(g)), remap(p));
        if node_sets[gi].is_none() {
            // Graphs that get edges start from their old node sets.
            node_sets[gi] = Some(match &old {
                Some(s) if gi < s.graphs().len() => s.graph_nodes(gi)?,
                _ => RoaringBitmap::new(),
            });
        }
        let old_edges = new_preds[gi].get(&pid).map(|info| info.edges);
        touched.insert((gi, pid));
        jobs.push(TreeJob {
            gi,
            pid,
            iri: iri_of(pid),
            rel: Some(rel),
            incremental: old_edges.is_some(),
            weight: records + old_edges.unwrap_or(0),
        });
    }
    // Relation numbers depend on which parse task met a relation first: order the jobs
    // by what is stored instead, so that the error reported (the first job's) does not
    // depend on scheduling.
    jobs.sort_by_key(|j| (j.gi, j.pid));
    let mut relations_kept = 0;
    for (gi, preds) in new_preds.iter().enumerate() {
        for (&pid, info) in preds {
            if touched.contains(&(gi, pid)) {
                continue;
            }
            if side_changed {
                jobs.push(TreeJob {
                    gi,
                    pid,
                    iri: info.iri.clone(),
                    rel: None,
                    incremental: true,
                    weight: info.edges,
                });
            } else {
                let to = tmp.path.join(&info.file);
                link_or_copy(&dir.join(&info.file), &to).map_err(io_err(&to))?;
                // Its line lists (same tree, same CRC) come along where they can; they
                // are a cache, so one that cannot is dropped below, not an error.
                for l in &info.lines {
                    let _ = link_or_copy(&dir.join(&l.file), &tmp.path.join(&l.file));
                }
                relations_kept += 1;
            }
        }
    }
    for info in new_preds.iter_mut().flat_map(|p| p.values_mut()) {
        info.lines.retain(|l| tmp.path.join(&l.file).exists());
    }
    let pb = Stage::begin(
        options.progress.get(),
        "trees",
        Unit::Items,
        Some(jobs.len() as u64),
    );
    let ctx = TreeContext {
        sorted: &sorted,
        remap: &remap,
        old: &old,
        tmp: &tmp.path,
        runs_dir: &runs_dir,
        n: new_n,
        written: AtomicUsize::new(0),
        fail_after: options.fail_after_trees,
        interrupt: options.interrupt.as_deref(),
        pb: &pb,
    };
    // Jobs run in waves of at most `budget` edges (16 bytes each in flight: cells, then
    // codes), largest first; a relation larger than the budget runs alone. Within a
    // wave, relations are built concurrently and each also sorts and builds in parallel.
    let budget = (options.memory / 16).max(1) as u64;
    let mut order: Vec<usize> = (0..jobs.len()).collect();
    order.sort_by_key(|&j| (std::cmp::Reverse(jobs[j].weight), j));
    let trees_start = Instant::now();
    let mut trees_seconds = 0.0;
    let (dictionary, built) = std::thread::scope(|scope| {
        let dictionary = scope.spawn(write_dictionary);
        let mut built: Vec<Option<Built>> = (0..jobs.len()).map(|_| None).collect();
        let mut result = Ok(());
        let mut i = 0;
        while i < order.len() && result.is_ok() {
            let mut j = i + 1;
            let mut weight = jobs[order[i]].weight;
            while j < order.len() && weight + jobs[order[j]].weight <= budget {
                weight += jobs[order[j]].weight;
                j += 1;
            }
            let wave: Vec<(usize, Result<Built, LoadError>)> = order[i..j]
                .par_iter()
                .map(|&k| (k, ctx.build(&jobs[k])))
                .collect();
            // The error of the first job in relation order, whatever finished first.
            let mut first: Option<(usize, LoadError)> = None;
            for (k, r) in wave {
                match r {
                    Ok(b) => built[k] = Some(b),
                    Err(e) if first.as_ref().is_none_or(|f| k < f.0) => first = Some((k, e)),
                    Err(_) => {}
                }
            }
            if let Some((_, e)) = first {
                result = Err(e);
            }
            i = j;
        }
        // The trees' own time, not the wait for the dictionary's thread.
        trees_seconds = trees_start.elapsed().as_secs_f64();
        let dictionary = match dictionary.join() {
            Ok(d) => d,
            Err(panic) => std::panic::resume_unwind(panic),
        };
        (dictionary, result.map(|()| built))
    });
    // A dictionary error first, as when the dictionary was written before the trees.
    let (segment, dictionary_seconds) = dictionary?;
    if let Some(segment) = segment {
        segments.push(segment);
    }
    let built = built?;
    drop(sorted);
    std::fs::remove_dir(&runs_dir).map_err(io_err(&runs_dir))?;
    let written = jobs.len();
    let mut distinct_edges = 0u64;
    for (job, b) in jobs.iter().zip(built) {
        let b = b.expect("every job of a successful load was built");
        distinct_edges += b.distinct;
        if let Some(nodes) = b.nodes {
            if let Some(set) = node_sets[job.gi].as_mut() {
                *set |= nodes;
            }
        }
        new_preds[job.gi].insert(job.pid, b.info);
    }
    drop(pb);

    // ---- Node bitmaps and graph entries.
    for (gi, g) in graphs.iter_mut().enumerate() {
        g.predicates = std::mem::take(&mut new_preds[gi]).into_values().collect();
        g.edges = g.predicates.iter().map(|p| p.edges).sum();
        g.nodes_file = format!("g{gi}.nodes");
        let to = tmp.path.join(&g.nodes_file);
        let bitmap = match node_sets[gi].take() {
            Some(bitmap) => bitmap,
            None if old.as_ref().is_some_and(|o| gi < o.graphs().len()) => {
                link_or_copy(&dir.join(&g.nodes_file), &to).map_err(io_err(&to))?;
                continue;
            }
            None => RoaringBitmap::new(),
        };
        let (bytes, crc32) = write_new(&to, |w| bitmap.serialize_into(w)).map_err(io_err(&to))?;
        g.nodes = bitmap.len();
        g.nodes_crc32 = crc32;
        g.nodes_bytes = bytes;
    }

    // ---- Manifest, sync, swap.
    let mut report = LoadReport {
        inputs: inputs.iter().map(Input::name).collect(),
        statements,
        skipped: skipped.count,
        skipped_first: skipped.first,
        new_terms: (new_n - old_n) as u64,
        node_count: new_n,
        distinct_edges,
        relations_built: written,
        relations_kept,
        runs_spilled,
        parse_seconds,
        parse_read_seconds: times.read_seconds,
        parse_chunks_seconds: times.parse_seconds,
        parse_wait_seconds: times.wait_seconds,
        parse_hand_on_seconds: times.sink_seconds,
        number_seconds,
        build_seconds: 0.0,
        sort_seconds,
        sort_edges_seconds,
        sort_terms_seconds,
        dictionary_seconds,
        trees_seconds,
        total_seconds: 0.0,
        store_bytes: 0,
        peak_rss_bytes: None,
    };
    let mut loads = old
        .as_ref()
        .map_or_else(Vec::new, |s| s.manifest().loads.clone());
    report.store_bytes = segments.iter().map(|s| s.bytes).sum::<u64>()
        + graphs
            .iter()
            .map(|g| g.nodes_bytes + g.predicates.iter().map(|p| p.bytes).sum::<u64>())
            .sum::<u64>();
    report.build_seconds = build_start.elapsed().as_secs_f64();
    report.total_seconds = start.elapsed().as_secs_f64();
    report.peak_rss_bytes = peak_rss();
    loads.push(report.clone());
    let manifest = Manifest {
        format: FORMAT_NAME.into(),
        version: FORMAT_VERSION,
        node_count: new_n,
        dictionary: segments,
        graphs,
        loads,
    };
    let mpath = tmp.path.join(MANIFEST);
    let json = serde_json::to_vec_pretty(&manifest).map_err(|e| LoadError::Io {
        path: mpath.clone(),
        error: io::Error::other(e),
    })?;
    write_new(&mpath, |w| w.write_all(&json)).map_err(io_err(&mpath))?;
    File::open(&tmp.path)
        .and_then(|f| f.sync_all())
        .map_err(io_err(&tmp.path))?;
    drop(old); // unmap before the old folder is removed
    let mut tmp = tmp;
    commit(&tmp.path, dir, replace).map_err(io_err(dir))?;
    tmp.keep = true;
    Ok(report)
}

/// One tree to build: a relation with new edges (`rel`), or an untouched one rebuilt
/// from its old tree because the padded side grew (`rel` is `None`).
struct TreeJob {
    gi: usize,
    pid: u32,
    iri: String,
    /// The relation's number in the edge stream, when it has new edges.
    rel: Option<u32>,
    /// Whether the old tree's cells join the new edges.
    incremental: bool,
    /// Edges it holds in memory at most (new records plus old cells), for budgeting.
    weight: u64,
}

/// What building one [`TreeJob`] gives.
struct Built {
    info: PredicateInfo,
    /// Nodes of the new edges (merged into the graph's node set afterwards).
    nodes: Option<RoaringBitmap>,
    /// Distinct new edges.
    distinct: u64,
}

/// What every tree job shares (read-only, but for the written-trees counter).
struct TreeContext<'a, R> {
    sorted: &'a SortedEdges,
    remap: &'a R,
    old: &'a Option<Store>,
    tmp: &'a Path,
    runs_dir: &'a Path,
    n: u32,
    written: AtomicUsize,
    fail_after: Option<usize>,
    interrupt: Option<&'a AtomicBool>,
    pb: &'a Stage<'a>,
}

/// Fewest edges per parallel piece when a small relation's nodes are gathered into
/// roaring bitmaps (one per piece, merged afterwards: roaring's union is container by
/// container, cheap).
const NODES_CHUNK: usize = 1 << 16;

/// A relation whose edges number at least `nodes / DENSE_NODES` marks its nodes in a
/// plain bitset (`nodes / 8` bytes: at most the size of its edges' codes) instead of
/// inserting them into roaring bitmaps: in load profiles (20M triples) roaring's
/// insertion of two random ids per edge was 16 % of the build phase.
const DENSE_NODES: u64 = 128;

/// Node ids marked from many threads at once (`fetch_or`, relaxed: only the final
/// contents matter, read after the threads have joined).
struct NodeBits(Vec<AtomicU64>);

impl NodeBits {
    fn new(nodes: u32) -> NodeBits {
        NodeBits(
            (0..(nodes as usize).div_ceil(64))
                .map(|_| AtomicU64::new(0))
                .collect(),
        )
    }

    fn insert(&self, id: u32) {
        let (word, bit) = (&self.0[id as usize / 64], 1 << (id % 64));
        // A plain load first: a dense relation meets most of its nodes again, and a locked
        // read-modify-write per edge keeps the next edge's loads from overlapping it.
        if word.load(Ordering::Relaxed) & bit == 0 {
            word.fetch_or(bit, Ordering::Relaxed);
        }
    }

    fn into_roaring(self) -> RoaringBitmap {
        let bytes: Vec<u8> = self
            .0
            .into_iter()
            .flat_map(|w| w.into_inner().to_le_bytes())
            .collect();
        RoaringBitmap::from_lsb0_bytes(0, &bytes)
    }
}

impl<R: Fn(u32) -> u32 + Sync> TreeContext<'_, R> {
    fn build(&self, job: &TreeJob) -> Result<Built, LoadError> {
        // A new relation whose edges are all in memory becomes codes where its edges lie
        // (no allocation); the others are read into a vector of their own.
        let mut owned: Vec<u64> = Vec::new();
        let (codes, nodes): (&mut [u64], _) = match job.rel {
            Some(rel) => {
                let remap = self.remap;
                let dense =
                    (job.weight >= self.n as u64 / DENSE_NODES).then(|| NodeBits::new(self.n));
                let code = |s: u32, o: u32| {
                    let (s, o) = (remap(s), remap(o));
                    if let Some(d) = &dense {
                        d.insert(s);
                        d.insert(o);
                    }
                    morton::encode(s, o)
                };
                let in_place = if job.incremental {
                    None
                } else {
                    self.sorted.relation_in_place(rel, code)
                };
                let codes = match in_place {
                    Some(codes) => codes,
                    None => {
                        owned = self
                            .sorted
                            .relation_map(rel, code)
                            .map_err(io_err(self.runs_dir))?;
                        &mut owned
                    }
                };
                let nodes = match dense {
                    Some(d) => d.into_roaring(),
                    None => codes
                        .par_chunks(NODES_CHUNK)
                        .map(|piece| {
                            let mut nodes = RoaringBitmap::new();
                            for &code in piece {
                                let (s, o) = morton::decode(code);
                                nodes.insert(s);
                                nodes.insert(o);
                            }
                            nodes
                        })
                        .reduce(RoaringBitmap::new, |a, b| a | b),
                };
                (codes, Some(nodes))
            }
            None => (&mut owned[..], None),
        };
        // The edges read may repeat: the tree keeps each cell once, and for a new
        // relation its cell count is the distinct count. An old relation's new cells
        // (none for a rebuild without new edges) are counted apart, before the old ones
        // join them.
        let mut distinct = None;
        let codes = if job.incremental {
            // Incremental jobs always read into `owned`, which the old cells extend.
            codes.par_sort_unstable();
            distinct = Some(distinct_count(codes));
            // The old cells join the new edges (ids of old terms are stable).
            let cells = old_tree(self.old, job.gi, job.pid)?.cells();
            owned.par_extend(cells.par_iter().map(|&(s, o)| morton::encode(s, o)));
            &mut owned[..]
        } else {
            codes
        };
        let info = build_and_write(self.tmp, job.gi, job.pid, job.iri.clone(), self.n, codes)?;
        self.pb.inc(1);
        let written = self.written.fetch_add(1, Ordering::SeqCst) + 1;
        if self.fail_after == Some(written) {
            return Err(LoadError::Injected);
        }
        if self.interrupt.is_some_and(|f| f.load(Ordering::Relaxed)) {
            return Err(LoadError::Interrupted);
        }
        Ok(Built {
            distinct: distinct.unwrap_or(info.edges),
            info,
            nodes,
        })
    }
}

/// Distinct values of sorted `codes`.
fn distinct_count(codes: &[u64]) -> u64 {
    codes.par_windows(2).filter(|w| w[0] != w[1]).count() as u64 + u64::from(!codes.is_empty())
}

fn old_tree(old: &Option<Store>, gi: usize, pid: u32) -> Result<Arc<K2Tree>, LoadError> {
    let s = old.as_ref().expect("a kept relation implies an old store");
    Ok(s.relation(gi, pid)?
        .expect("the old manifest lists this relation"))
}

fn build_and_write(
    tmp: &Path,
    gi: usize,
    pid: u32,
    iri: String,
    n: u32,
    codes: &mut [u64],
) -> Result<PredicateInfo, LoadError> {
    let file = format!("g{gi}-p{pid}.k2");
    let err = |reason: String| LoadError::Tree {
        file: file.clone(),
        reason,
    };
    let tree = K2Tree::from_codes(n as u64, n as u64, codes).map_err(|e| err(e.to_string()))?;
    let path = tmp.join(&file);
    // With the sampled directory, so that opening needs no rebuild; the frontier cache is
    // left to the engine, which builds it on demand.
    let (bytes, crc32) = write_new(&path, |w| {
        file::write_to(&tree, w, file::WriteOptions::default()).map(drop)
    })
    .map_err(io_err(&path))?;
    let stats = tree.stats();
    Ok(PredicateInfo {
        iri,
        id: pid,
        edges: tree.nnz(),
        bits_per_edge: stats.bits_per_edge,
        bytes,
        crc32,
        file,
        side: n as u64,
        lines: Vec::new(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The shard table through growth: every key keeps its first id, new ids follow the
    /// `old_n + k·SHARDS + shard` rule, and new terms come back in arena order.
    #[test]
    fn shard_numbers_each_key_once() {
        let mut shard = Shard::default();
        let key = |n: u32| format!("\u{1}http://example.org/{n}").into_bytes();
        // Few distinct hash bits, so that probes run over full buckets and wrap around.
        let hash = |n: u32| ((n % 37) as u64) << 32;
        for round in 0..2 {
            for n in 0..5000u32 {
                let id = shard.id(&key(n), hash(n), 3, None, 10).unwrap();
                assert_eq!(id, 10 + n * SHARDS as u32 + 3, "round {round}, key {n}");
            }
        }
        assert_eq!((shard.len, shard.new), (5000, 5000));
        assert!(shard.len * 4 <= shard.buckets.len() * BUCKET * 3);
        let entries = shard.take_new_entries(10);
        assert!(shard.buckets.is_empty());
        let shards = [shard];
        let new = new_terms(&shards, &[entries]);
        assert_eq!(new.len(), 5000);
        for (n, (k, id)) in new.into_iter().enumerate() {
            assert_eq!(
                (k, id),
                (key(n as u32).as_slice(), 10 + n as u32 * SHARDS as u32 + 3)
            );
        }
    }

    /// An empty key is a key like any other (an all-zero slot means empty, not it), and
    /// one over [`MAX_KEY`] is an error, not a panic.
    #[test]
    fn shard_edge_keys() {
        let mut shard = Shard::default();
        assert_eq!(shard.id(b"", 0, 0, None, 0).unwrap(), 0);
        assert_eq!(shard.id(b"x", 0, 0, None, 0).unwrap(), SHARDS as u32);
        assert_eq!(shard.id(b"", 0, 0, None, 0).unwrap(), 0);
        assert!(shard.id(&vec![b'a'; MAX_KEY + 1], 7, 0, None, 0).is_err());
        assert_eq!(shard.len, 2);
    }

    /// Batch numbering with prefetching gives the same ids as one key at a time.
    #[test]
    fn number_all_matches_id() {
        let mut batch = Batch::default();
        for n in 0..3000u32 {
            batch
                .bytes
                .extend_from_slice(format!("k{}", n % 1000).as_bytes());
            batch.ends.push(batch.bytes.len());
            batch.hashes.push(terms::hash_key(batch.key(n as usize)));
        }
        let idx: Vec<(u32, u64)> = (0..3000).map(|i| (i, batch.hashes[i as usize])).collect();
        let mut ids = vec![0; 3000];
        let mut shard = Shard::default();
        shard
            .number_all(&batch, &idx, &mut ids, 1, None, 0)
            .unwrap();
        let mut one = Shard::default();
        for (i, &id) in ids.iter().enumerate() {
            assert_eq!(id, ids[i % 1000]);
            assert_eq!(
                one.id(batch.key(i), batch.hashes[i], 1, None, 0).unwrap(),
                id
            );
        }
    }
}
