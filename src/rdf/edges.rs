//! Edge collection in bounded memory: `(relation, subject, object)` records buffered up
//! to a budget, then sorted and spilled to run files; at the end [`SortedEdges`] hands out
//! any relation's edges on request, from any thread, so that relations can be built
//! concurrently while only the relations asked for are in memory.
//!
//! A record is 12 bytes (three `u32`). Runs are sorted by relation then cells and
//! deduplicated, so repeated triples cost disk only within a run. Each run keeps an index
//! of where each relation's records start, so one relation is read from every run by a
//! seek and a sequential read, independently of the other relations (no global k-way
//! merge, which would be one thread's work for the whole edge set).
//!
//! The records still in memory at the end are only *grouped* by relation (a counting
//! sort), not sorted: the tree build sorts each relation by Morton code and drops
//! repeated cells anyway, so an order by `(subject, object)` would be thrown away. Grouped,
//! they drop their relation (8 bytes an edge), and a relation with no edges in runs can
//! be turned into the tree build's codes where it lies
//! ([`SortedEdges::relation_in_place`]), so that building it allocates no edge vector.

use std::fs::File;
use std::io::{self, BufWriter, Read, Seek, SeekFrom, Write};
use std::path::PathBuf;

use std::sync::atomic::{AtomicBool, Ordering};

use rayon::prelude::*;

/// One edge of relation `rel`: `[rel, subject, object]`.
pub type Record = [u32; 3];

/// Bytes per buffered or spilled record.
pub const RECORD_BYTES: usize = 12;

/// Where each relation's records lie in a sorted sequence: `(relation, first, count)`.
type Index = Vec<(u32, u64, u64)>;

/// An edge as the grouped buffer keeps it: subject in the high half, object in the low.
fn pair(subject: u32, object: u32) -> u64 {
    (u64::from(subject) << 32) | u64::from(object)
}

/// The relation ranges of `records`, sorted by relation. O(relations × log records):
/// each range's end is found by binary search, not by a scan.
fn index_of(records: &[Record]) -> Index {
    let mut index = Vec::new();
    let mut a = 0;
    while a < records.len() {
        let rel = records[a][0];
        let len = records[a..].partition_point(|r| r[0] == rel);
        index.push((rel, a as u64, len as u64));
        a += len;
    }
    index
}

/// A pointer that parallel tasks write through at disjoint offsets.
struct SendPtr(*mut u64);
// SAFETY: used only for writes to disjoint slots (see `group_by_relation` and
// `SortedEdges::relation_in_place`), never for a slot another thread reads.
unsafe impl Sync for SendPtr {}
// SAFETY: as above; the pointer is only an address into a buffer its owner keeps alive.
unsafe impl Send for SendPtr {}

/// One spilled run: its file and the relations' ranges in it.
struct Run {
    path: PathBuf,
    index: Index,
}

/// Buffers records and spills sorted runs to `dir` when the buffer is full.
pub struct EdgeCollector {
    buf: Vec<Record>,
    /// Whole vectors handed over by [`EdgeCollector::add_piece`], gathered into `buf`
    /// (in parallel) only when a run is spilled or collection ends.
    pieces: Vec<Vec<Record>>,
    /// Records in `pieces`.
    in_pieces: usize,
    cap: usize,
    dir: PathBuf,
    runs: Vec<Run>,
    spilled: u64,
}

impl EdgeCollector {
    /// A collector holding at most `budget_bytes` of records in memory (at least 64 Ki
    /// records), spilling into `dir`.
    pub fn new(dir: PathBuf, budget_bytes: usize) -> Self {
        let cap = (budget_bytes / RECORD_BYTES).max(1 << 16);
        EdgeCollector {
            buf: Vec::new(),
            pieces: Vec::new(),
            in_pieces: 0,
            cap,
            dir,
            runs: Vec::new(),
            spilled: 0,
        }
    }

    /// Adds one edge.
    #[cfg(test)]
    pub fn push(&mut self, r: Record) -> io::Result<()> {
        if self.buffered() >= self.cap {
            self.spill()?;
        }
        self.buf.push(r);
        Ok(())
    }

    /// Adds edges in order, as [`EdgeCollector::push`] of each would (same spills).
    #[cfg(test)]
    pub fn extend(&mut self, mut records: &[Record]) -> io::Result<()> {
        while !records.is_empty() {
            if self.buffered() >= self.cap {
                self.spill()?;
            }
            let take = (self.cap - self.buffered()).min(records.len());
            self.buf.extend_from_slice(&records[..take]);
            records = &records[take..];
        }
        Ok(())
    }

    /// Adds a vector of edges without copying it now (the loader's parse tasks each
    /// hand over one). Spills as [`EdgeCollector::extend`] would only in that a piece is
    /// not split: the buffer is spilled before a piece that would overflow it, and a
    /// piece larger than the whole budget is spilled on its own. Runs differ from
    /// `extend`'s, the edges [`EdgeCollector::finish`] hands out do not.
    pub fn add_piece(&mut self, records: Vec<Record>) -> io::Result<()> {
        if records.is_empty() {
            return Ok(());
        }
        if self.buffered() > 0 && self.buffered() + records.len() > self.cap {
            self.spill()?;
        }
        self.in_pieces += records.len();
        self.pieces.push(records);
        if self.buffered() > self.cap {
            self.spill()?;
        }
        Ok(())
    }

    /// Records held in memory.
    fn buffered(&self) -> usize {
        self.buf.len() + self.in_pieces
    }

    /// Moves the pieces into `buf`, copying them in parallel into uninitialised space (a
    /// serial copy, or zero-filling the space first, would be one thread's pass over
    /// every edge).
    fn gather(&mut self) {
        if self.pieces.is_empty() {
            return;
        }
        if self.buf.is_empty() && self.pieces.len() == 1 {
            self.buf = self.pieces.pop().unwrap_or_default();
            self.in_pieces = 0;
            return;
        }
        let old = self.buf.len();
        self.buf.reserve_exact(self.in_pieces);
        let mut rest = &mut self.buf.spare_capacity_mut()[..self.in_pieces];
        let mut jobs = Vec::with_capacity(self.pieces.len());
        for piece in &self.pieces {
            let (dst, tail) = rest.split_at_mut(piece.len());
            jobs.push((dst, piece.as_slice()));
            rest = tail;
        }
        jobs.into_par_iter().for_each(|(dst, src)| {
            for (d, s) in dst.iter_mut().zip(src) {
                d.write(*s);
            }
        });
        // SAFETY: the pieces' lengths sum to `in_pieces`, so every slot of
        // `old..old + in_pieces` was written just above.
        unsafe { self.buf.set_len(old + self.in_pieces) };
        self.pieces.clear();
        self.in_pieces = 0;
    }

    /// Moves the buffer and the pieces into one vector of `(subject, object)` pairs
    /// grouped by relation, in increasing relation order, and returns it with its index:
    /// a parallel counting sort (one pass to count, one to place each record), where a
    /// full sort of the records took several passes. The relation is dropped from each
    /// record (8 bytes a pair instead of 12: the index says where each relation lies),
    /// and the pieces are freed as soon as they are placed, so that the records and the
    /// pairs (20 bytes an edge) are held together only at the start. Relation numbers
    /// are dense in the loader; sparse ones (more numbers than records) fall back to a
    /// sort by relation.
    fn group_by_relation(&mut self) -> (Vec<u64>, Index) {
        let mut parts = std::mem::take(&mut self.pieces);
        if !self.buf.is_empty() {
            parts.push(std::mem::take(&mut self.buf));
        }
        self.in_pieces = 0;
        let total: usize = parts.iter().map(Vec::len).sum();
        let relations = parts
            .par_iter()
            .filter_map(|s| s.iter().map(|r| r[0]).max())
            .max()
            .map_or(0, |m| m as usize + 1);
        if relations > total.max(1 << 16) {
            let mut all = parts.concat();
            drop(parts);
            all.par_sort_unstable_by_key(|r| r[0]);
            let index = index_of(&all);
            let pairs = all.par_iter().map(|r| pair(r[1], r[2])).collect();
            return (pairs, index);
        }
        // Groups of whole pieces (a piece is freed with its group), about `slice`
        // records each, enough of them to keep every thread busy.
        let threads = rayon::current_num_threads().max(1);
        let slice = (total / (threads * 8)).max(1 << 16);
        let mut groups: Vec<Vec<Vec<Record>>> = Vec::new();
        let mut size = slice;
        for part in parts {
            if size >= slice {
                groups.push(Vec::new());
                size = 0;
            }
            size += part.len();
            groups.last_mut().expect("pushed above").push(part);
        }
        // counts[i][r]: records of relation r in group i; then, in place, where group
        // i's first record of relation r goes.
        let mut counts: Vec<Vec<usize>> = groups
            .par_iter()
            .map(|g| {
                let mut c = vec![0usize; relations];
                for r in g.iter().flatten() {
                    c[r[0] as usize] += 1;
                }
                c
            })
            .collect();
        let mut index: Index = Vec::new();
        let mut at = 0;
        for rel in 0..relations {
            let first = at;
            for c in counts.iter_mut() {
                let n = c[rel];
                c[rel] = at;
                at += n;
            }
            if at > first {
                index.push((rel as u32, first as u64, (at - first) as u64));
            }
        }
        let mut out: Vec<u64> = Vec::with_capacity(total);
        let base = SendPtr(out.as_mut_ptr());
        groups
            .into_par_iter()
            .zip(counts.into_par_iter())
            .for_each(|(g, mut next)| {
                let base = &base;
                for r in g.iter().flatten() {
                    let slot = &mut next[r[0] as usize];
                    // SAFETY: the cursors of all (group, relation) pairs cover disjoint
                    // ranges of `0..total` (prefix sums of the counts), each written
                    // exactly once, inside the capacity reserved above.
                    unsafe { base.0.add(*slot).write(pair(r[1], r[2])) };
                    *slot += 1;
                }
                // The group's pieces are freed here, while other groups are placed.
                drop(g);
            });
        // SAFETY: every slot of `0..total` was written above.
        unsafe { out.set_len(total) };
        (out, index)
    }

    fn spill(&mut self) -> io::Result<()> {
        self.gather();
        self.buf.par_sort_unstable();
        self.buf.dedup();
        let path = self.dir.join(format!("run-{:05}.edges", self.runs.len()));
        let mut w = BufWriter::with_capacity(1 << 20, File::create(&path)?);
        for r in &self.buf {
            let mut b = [0u8; RECORD_BYTES];
            b[0..4].copy_from_slice(&r[0].to_le_bytes());
            b[4..8].copy_from_slice(&r[1].to_le_bytes());
            b[8..12].copy_from_slice(&r[2].to_le_bytes());
            w.write_all(&b)?;
        }
        w.flush()?;
        self.spilled += self.buf.len() as u64;
        let index = index_of(&self.buf);
        self.buf.clear();
        self.runs.push(Run { path, index });
        Ok(())
    }

    /// Number of runs written so far.
    pub fn runs(&self) -> usize {
        self.runs.len()
    }

    /// Records written to runs so far.
    #[cfg(test)]
    pub fn spilled(&self) -> u64 {
        self.spilled
    }

    /// Ends collection: the records grouped by relation (in increasing relation order),
    /// readable one relation at a time.
    pub fn finish(mut self) -> SortedEdges {
        let (mem, mem_index) = self.group_by_relation();
        let mut sizes: Vec<(u32, u64)> = mem_index
            .iter()
            .chain(self.runs.iter().flat_map(|r| r.index.iter()))
            .map(|&(rel, _, n)| (rel, n))
            .collect();
        sizes.sort_unstable();
        let mut relations: Vec<(u32, u64)> = Vec::new();
        for (rel, n) in sizes {
            match relations.last_mut() {
                Some(last) if last.0 == rel => last.1 += n,
                _ => relations.push((rel, n)),
            }
        }
        let mut mem = mem;
        SortedEdges {
            mem_ptr: SendPtr(mem.as_mut_ptr()),
            mem,
            taken: mem_index.iter().map(|_| AtomicBool::new(false)).collect(),
            mem_index,
            runs: std::mem::take(&mut self.runs),
            relations,
        }
    }
}

/// The collected edges, grouped by relation: each relation's edges on request.
///
/// [`SortedEdges::relation`] takes `&self` and opens its own file handles, so several
/// threads may read different relations at once; the caller bounds how many it holds.
pub struct SortedEdges {
    /// The records that were never spilled, as [`pair`]s grouped by relation.
    mem: Vec<u64>,
    /// `mem`'s buffer, taken once with write access: [`SortedEdges::relation_in_place`]
    /// writes each relation's range through it, from any thread.
    mem_ptr: SendPtr,
    /// Per entry of `mem_index`: whether that range was handed out for writing.
    taken: Vec<AtomicBool>,
    mem_index: Index,
    runs: Vec<Run>,
    relations: Vec<(u32, u64)>,
}

/// The range of `rel` in a sorted index, if present.
fn range_of(index: &Index, rel: u32) -> Option<(u64, u64)> {
    index
        .binary_search_by_key(&rel, |&(r, _, _)| r)
        .ok()
        .map(|i| (index[i].1, index[i].2))
}

impl SortedEdges {
    /// Every relation present, in increasing order, with its number of records over all
    /// runs and the buffer: an upper bound on its distinct edges (exact without spills
    /// and duplicates), for budgeting memory before reading it.
    pub fn relations(&self) -> &[(u32, u64)] {
        &self.relations
    }

    /// `f(subject, object)` of each edge of `rel`, written over the relation's own edges
    /// in the buffer and handed out for the caller to reorder in place (a tree build
    /// sorts them), when all of the relation's edges are in memory; `None` when some lie
    /// in runs, or none in memory, or the relation was taken already (each relation is
    /// handed out once: its edges are gone afterwards, and [`SortedEdges::relation_map`]
    /// must not be asked for it).
    #[allow(clippy::mut_from_ref)]
    pub fn relation_in_place<F: Fn(u32, u32) -> u64 + Sync>(
        &self,
        rel: u32,
        f: F,
    ) -> Option<&mut [u64]> {
        if self
            .runs
            .iter()
            .any(|run| range_of(&run.index, rel).is_some())
        {
            return None;
        }
        let i = self
            .mem_index
            .binary_search_by_key(&rel, |&(r, _, _)| r)
            .ok()?;
        if self.taken[i].swap(true, Ordering::AcqRel) {
            return None;
        }
        let (a, n) = (self.mem_index[i].1 as usize, self.mem_index[i].2 as usize);
        // SAFETY: `a..a + n` lies inside `mem` (the index was made from it), no other
        // range overlaps it, and the flag just set hands it out once: no other reference
        // to these slots exists or will be made (`relation_map` refuses taken ranges).
        let edges = unsafe { std::slice::from_raw_parts_mut(self.mem_ptr.0.add(a), n) };
        edges
            .par_iter_mut()
            .for_each(|e| *e = f((*e >> 32) as u32, *e as u32));
        Some(edges)
    }

    /// The `(subject, object)` edges of `rel` (empty when absent), in no particular
    /// order and possibly repeated: its consumer, the tree build, sorts by Morton code
    /// and drops repeats itself.
    #[cfg(test)]
    pub fn relation(&self, rel: u32) -> io::Result<Vec<(u32, u32)>> {
        self.relation_map(rel, |s, o| (s, o))
    }

    /// `f(subject, object)` of each edge of `rel`, as [`SortedEdges::relation`] lists
    /// them, computed as the edges are read (in parallel for those in memory): the
    /// caller's vector is the only one allocated.
    pub fn relation_map<U: Send, F: Fn(u32, u32) -> U + Sync>(
        &self,
        rel: u32,
        f: F,
    ) -> io::Result<Vec<U>> {
        let mut out: Vec<U> = Vec::new();
        if let Ok(i) = self.mem_index.binary_search_by_key(&rel, |&(r, _, _)| r) {
            assert!(
                !self.taken[i].load(Ordering::Acquire),
                "relation {rel} was handed out in place"
            );
            let (a, n) = (self.mem_index[i].1, self.mem_index[i].2);
            // SAFETY: the range was not handed out for writing (checked above), so only
            // reads reach it; the slice is made from the write pointer, not from `mem`,
            // so that every access to the buffer after `finish` goes through one pointer.
            let mem = unsafe { std::slice::from_raw_parts(self.mem_ptr.0, self.mem.len()) };
            mem[a as usize..(a + n) as usize]
                .par_iter()
                .map(|&p| f((p >> 32) as u32, p as u32))
                .collect_into_vec(&mut out);
        }
        for run in &self.runs {
            let Some((a, n)) = range_of(&run.index, rel) else {
                continue;
            };
            let mut file = File::open(&run.path)?;
            file.seek(SeekFrom::Start(a * RECORD_BYTES as u64))?;
            let mut left = n as usize;
            let mut b = vec![0u8; RECORD_BYTES * left.min(1 << 16)];
            out.reserve(left);
            while left > 0 {
                let k = left.min(1 << 16);
                file.read_exact(&mut b[..k * RECORD_BYTES])?;
                out.par_extend(
                    b[..k * RECORD_BYTES]
                        .par_chunks_exact(RECORD_BYTES)
                        .map(|c| {
                            f(
                                u32::from_le_bytes(c[4..8].try_into().unwrap()),
                                u32::from_le_bytes(c[8..12].try_into().unwrap()),
                            )
                        }),
                );
                left -= k;
            }
        }
        Ok(out)
    }
}

impl Drop for SortedEdges {
    fn drop(&mut self) {
        for r in &self.runs {
            let _ = std::fs::remove_file(&r.path);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn distinct(mut edges: Vec<(u32, u32)>) -> Vec<(u32, u32)> {
        edges.sort_unstable();
        edges.dedup();
        edges
    }

    #[test]
    fn spilled_and_in_memory_records_merge_by_relation() {
        let dir = tempfile::tempdir().unwrap();
        // Budget of one record: every 64 Ki records spill.
        let mut c = EdgeCollector::new(dir.path().to_path_buf(), 1);
        let mut expect: Vec<Record> = Vec::new();
        let mut x = 12345u64;
        for _ in 0..200_000 {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            let r = [
                (x >> 60) as u32,
                (x >> 40) as u32 % 1000,
                (x >> 20) as u32 % 1000,
            ];
            expect.push(r);
            c.push(r).unwrap();
        }
        assert!(c.runs() >= 3);
        expect.sort();
        expect.dedup();
        let s = c.finish();
        let rels: Vec<u32> = s.relations().iter().map(|&(r, _)| r).collect();
        assert!(rels.windows(2).all(|w| w[0] < w[1]), "increasing");
        // Read in reverse order, as concurrent workers may.
        let mut got: Vec<Record> = Vec::new();
        for &rel in rels.iter().rev() {
            let edges = distinct(s.relation(rel).unwrap());
            let mut part: Vec<Record> = edges.into_iter().map(|(a, b)| [rel, a, b]).collect();
            part.extend(got);
            got = part;
        }
        assert_eq!(got, expect);
        assert!(s.relation(1 << 20).unwrap().is_empty(), "absent relation");
        let records: u64 = s.relations().iter().map(|&(_, n)| n).sum();
        assert!(records >= expect.len() as u64, "sizes bound the edges");
        drop(s);
        assert_eq!(
            std::fs::read_dir(dir.path()).unwrap().count(),
            0,
            "runs removed"
        );
    }

    #[test]
    fn sparse_relation_numbers_group_too() {
        let dir = tempfile::tempdir().unwrap();
        let mut c = EdgeCollector::new(dir.path().to_path_buf(), 1 << 30);
        let rels = [u32::MAX - 1, 7, 1 << 30, 7];
        for (i, &rel) in rels.iter().enumerate() {
            c.push([rel, i as u32, 0]).unwrap();
        }
        c.add_piece(vec![[1 << 30, 9, 9], [0, 1, 1]]).unwrap();
        let s = c.finish();
        let got: Vec<u32> = s.relations().iter().map(|r| r.0).collect();
        assert_eq!(got, [0, 7, 1 << 30, u32::MAX - 1]);
        assert_eq!(distinct(s.relation(7).unwrap()), [(1, 0), (3, 0)]);
        assert_eq!(distinct(s.relation(1 << 30).unwrap()), [(2, 0), (9, 9)]);
    }

    #[test]
    fn extend_spills_as_pushes_do() {
        let (da, db) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
        let mut a = EdgeCollector::new(da.path().to_path_buf(), 1);
        let mut b = EdgeCollector::new(db.path().to_path_buf(), 1);
        let records: Vec<Record> = (0..150_000u32)
            .map(|i| [i % 7, i.wrapping_mul(2_654_435_761) % 5000, i % 913])
            .collect();
        for r in &records {
            a.push(*r).unwrap();
        }
        // Uneven slices, some crossing the 64 Ki-record spill boundary.
        for part in records.chunks(40_000) {
            b.extend(part).unwrap();
        }
        assert_eq!((a.runs(), a.spilled()), (b.runs(), b.spilled()));
        let (a, b) = (a.finish(), b.finish());
        assert_eq!(a.relations(), b.relations());
        for &(rel, _) in a.relations() {
            assert_eq!(
                distinct(a.relation(rel).unwrap()),
                distinct(b.relation(rel).unwrap())
            );
        }
    }

    #[test]
    fn pieces_give_the_edges_pushes_do() {
        let records: Vec<Record> = (0..200_000u32)
            .map(|i| [i % 5, i.wrapping_mul(2_654_435_761) % 7000, i % 611])
            .collect();
        // Budgets: none spilled, pieces smaller than the budget, and the smallest budget
        // (64 Ki records) with pieces both below and above it.
        for (budget, sizes) in [
            (1 << 30, &[1usize, 30_000, 77][..]),
            (1, &[10_000, 50_000, 7][..]),
            (1, &[100_000, 3, 70_000][..]),
        ] {
            let (da, db) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
            let mut a = EdgeCollector::new(da.path().to_path_buf(), budget);
            let mut b = EdgeCollector::new(db.path().to_path_buf(), budget);
            for r in &records {
                a.push(*r).unwrap();
            }
            let mut rest = records.as_slice();
            let mut k = 0;
            while !rest.is_empty() {
                let n = sizes[k % sizes.len()].min(rest.len());
                b.add_piece(rest[..n].to_vec()).unwrap();
                b.add_piece(Vec::new()).unwrap();
                rest = &rest[n..];
                k += 1;
            }
            assert!(b.buffered() <= b.cap || b.runs() > 0);
            if budget == 1 {
                assert!(b.runs() > 1, "small budgets spill");
            }
            let (a, b) = (a.finish(), b.finish());
            // Counts may differ (runs are deduplicated when spilled); the edges may not.
            let rels = |e: &SortedEdges| e.relations().iter().map(|r| r.0).collect::<Vec<_>>();
            assert_eq!(rels(&a), rels(&b));
            for &(rel, _) in a.relations() {
                assert_eq!(
                    distinct(a.relation(rel).unwrap()),
                    distinct(b.relation(rel).unwrap())
                );
            }
        }
    }
}
