//! Edge collection in bounded memory: `(relation, subject, object)` records buffered up
//! to a budget, then sorted and spilled to run files; at the end a k-way merge hands out
//! each relation's edges in turn, so only one relation's edges are in memory at a time.
//!
//! A record is 12 bytes (three `u32`). Runs are sorted by relation then cells and
//! deduplicated, so repeated triples cost disk only within a run.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::fs::File;
use std::io::{self, BufReader, BufWriter, Read, Write};
use std::path::PathBuf;

use rayon::prelude::*;

/// One edge of relation `rel`: `[rel, subject, object]`.
pub type Record = [u32; 3];

/// One relation's number and its distinct `(subject, object)` edges, sorted.
pub type RelationEdges = (u32, Vec<(u32, u32)>);

/// Bytes per buffered or spilled record.
pub const RECORD_BYTES: usize = 12;

/// Buffers records and spills sorted runs to `dir` when the buffer is full.
pub struct EdgeCollector {
    buf: Vec<Record>,
    cap: usize,
    dir: PathBuf,
    runs: Vec<PathBuf>,
    spilled: u64,
}

impl EdgeCollector {
    /// A collector holding at most `budget_bytes` of records in memory (at least 64 Ki
    /// records), spilling into `dir`.
    pub fn new(dir: PathBuf, budget_bytes: usize) -> Self {
        let cap = (budget_bytes / RECORD_BYTES).max(1 << 16);
        EdgeCollector {
            buf: Vec::new(),
            cap,
            dir,
            runs: Vec::new(),
            spilled: 0,
        }
    }

    /// Adds one edge.
    pub fn push(&mut self, r: Record) -> io::Result<()> {
        if self.buf.len() >= self.cap {
            self.spill()?;
        }
        self.buf.push(r);
        Ok(())
    }

    fn sort_buffer(&mut self) {
        self.buf.par_sort_unstable();
        self.buf.dedup();
    }

    fn spill(&mut self) -> io::Result<()> {
        self.sort_buffer();
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
        self.buf.clear();
        self.runs.push(path);
        Ok(())
    }

    /// Number of runs written so far.
    pub fn runs(&self) -> usize {
        self.runs.len()
    }

    /// Records written to runs so far.
    pub fn spilled(&self) -> u64 {
        self.spilled
    }

    /// Ends collection: a stream of relations in increasing order.
    pub fn finish(mut self) -> io::Result<RelationStream> {
        self.sort_buffer();
        let mut sources = Vec::with_capacity(self.runs.len() + 1);
        for p in &self.runs {
            sources.push(Source::Run(BufReader::with_capacity(
                1 << 20,
                File::open(p)?,
            )));
        }
        sources.push(Source::Memory(std::mem::take(&mut self.buf).into_iter()));
        let mut heap = BinaryHeap::new();
        for (i, s) in sources.iter_mut().enumerate() {
            if let Some(r) = s.next()? {
                heap.push(Reverse((r, i)));
            }
        }
        Ok(RelationStream {
            sources,
            heap,
            run_files: self.runs,
        })
    }
}

enum Source {
    Run(BufReader<File>),
    Memory(std::vec::IntoIter<Record>),
}

impl Source {
    fn next(&mut self) -> io::Result<Option<Record>> {
        match self {
            Source::Memory(it) => Ok(it.next()),
            Source::Run(r) => {
                let mut b = [0u8; RECORD_BYTES];
                match r.read_exact(&mut b) {
                    Ok(()) => Ok(Some([
                        u32::from_le_bytes(b[0..4].try_into().unwrap()),
                        u32::from_le_bytes(b[4..8].try_into().unwrap()),
                        u32::from_le_bytes(b[8..12].try_into().unwrap()),
                    ])),
                    Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => Ok(None),
                    Err(e) => Err(e),
                }
            }
        }
    }
}

/// Merged, deduplicated edges, one relation at a time.
pub struct RelationStream {
    sources: Vec<Source>,
    heap: BinaryHeap<Reverse<(Record, usize)>>,
    run_files: Vec<PathBuf>,
}

impl RelationStream {
    /// The next relation and its distinct `(subject, object)` edges, sorted.
    pub fn next_relation(&mut self) -> io::Result<Option<RelationEdges>> {
        let Some(&Reverse((first, _))) = self.heap.peek() else {
            return Ok(None);
        };
        let rel = first[0];
        let mut edges: Vec<(u32, u32)> = Vec::new();
        while let Some(&Reverse((r, i))) = self.heap.peek() {
            if r[0] != rel {
                break;
            }
            self.heap.pop();
            if edges.last() != Some(&(r[1], r[2])) {
                edges.push((r[1], r[2]));
            }
            if let Some(next) = self.sources[i].next()? {
                self.heap.push(Reverse((next, i)));
            }
        }
        Ok(Some((rel, edges)))
    }
}

impl Drop for RelationStream {
    fn drop(&mut self) {
        for p in &self.run_files {
            let _ = std::fs::remove_file(p);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
        let mut s = c.finish().unwrap();
        let mut got: Vec<Record> = Vec::new();
        let mut last_rel = None;
        while let Some((rel, edges)) = s.next_relation().unwrap() {
            assert!(last_rel < Some(rel));
            last_rel = Some(rel);
            got.extend(edges.into_iter().map(|(a, b)| [rel, a, b]));
        }
        assert_eq!(got, expect);
        drop(s);
        assert_eq!(
            std::fs::read_dir(dir.path()).unwrap().count(),
            0,
            "runs removed"
        );
    }
}
