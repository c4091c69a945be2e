//! The relations of a [`super::K2Store`] on disk: a checkpoint (the dictionary's terms
//! and every relation's pairs) and a log of the writes since, each record fsynced before
//! Oxigraph commits the write it describes.
//!
//! Recovery replays the log over the checkpoint. Writes are serialised, so only the last
//! record can describe a write Oxigraph did not commit (a kill between the fsync and the
//! commit): its first change is looked up in Oxigraph, and the record is dropped when
//! Oxigraph does not show it (an inserted quad was absent before and present after, a
//! deleted one the reverse, so one quad tells). A commit that fails is followed by an
//! abort record. A torn record at the end (a kill during the append) fails its checksum
//! and is dropped with everything after it.

use std::fs::{File, OpenOptions};
use std::io::{BufReader, BufWriter, Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::sync::Arc;

use oxrdf::Term;

use crate::checksum::Checksummed;
use crate::k2tree::K2Tree;
use crate::sparql::MemoryDictionary;

use super::live::{GraphKey, QuadIds};
use super::OxigraphError;
use crate::rpq::PredId;

const CHECKPOINT: &str = "checkpoint";
const LOG: &str = "log";
const MAGIC: &[u8; 8] = b"K2RPQCK1";

pub(super) fn io(what: &str, path: &Path, e: std::io::Error) -> OxigraphError {
    OxigraphError::Relations(format!("{what} {}: {e}", path.display()))
}

fn corrupt(path: &Path, why: &str) -> OxigraphError {
    OxigraphError::Relations(format!("{} is corrupt: {why}", path.display()))
}

fn graph_code(g: GraphKey) -> u32 {
    g.unwrap_or(u32::MAX)
}

fn graph_key(code: u32) -> GraphKey {
    (code != u32::MAX).then_some(code)
}

/// One relation's pairs: its graph, its predicate, its `(subject, object)` pairs.
pub(crate) type RelationPairs = (GraphKey, PredId, Vec<(u32, u32)>);

/// One relation's tree: its graph, its predicate, the tree.
pub(crate) type RelationTree = (GraphKey, PredId, Arc<K2Tree>);

/// What a checkpoint's header says.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct CheckpointInfo {
    /// The last log record it includes.
    pub seq: u64,
    /// The dictionary's terms it holds.
    pub terms: u32,
}

/// One write of the log.
pub(crate) struct Record {
    pub seq: u64,
    /// An abort marker for the write of record `seq`.
    pub abort: bool,
    /// Id of the first new term.
    pub first_term: u32,
    /// Terms numbered since the previous record.
    pub terms: Vec<Term>,
    /// The write's changes, in order.
    pub changes: Vec<(QuadIds, bool)>,
}

struct Writer(Vec<u8>);

impl Writer {
    /// Moves what was written to `out` once it holds 64 KiB: a checkpoint streams to
    /// its file through the same field writers as a log record.
    fn spill(&mut self, out: &mut impl Write) -> std::io::Result<()> {
        if self.0.len() >= 1 << 16 {
            out.write_all(&self.0)?;
            self.0.clear();
        }
        Ok(())
    }
    fn u32(&mut self, v: u32) {
        self.0.extend_from_slice(&v.to_le_bytes());
    }
    fn u64(&mut self, v: u64) {
        self.0.extend_from_slice(&v.to_le_bytes());
    }
    fn term(&mut self, t: &Term) {
        let s = t.to_string();
        self.u32(s.len() as u32);
        self.0.extend_from_slice(s.as_bytes());
    }
}

/// Reads the fields [`Writer`] writes; `None` at the end of the bytes or on a field
/// that does not read back.
struct Reader<R> {
    inner: R,
    buf: Vec<u8>,
}

impl<R: Read> Reader<R> {
    fn new(inner: R) -> Self {
        Reader {
            inner,
            buf: Vec::new(),
        }
    }
    /// Reads `n` bytes into the buffer. The buffer grows as bytes arrive, so a damaged
    /// length costs no more memory than the bytes that are there.
    fn fill(&mut self, n: usize) -> Option<&[u8]> {
        self.buf.clear();
        (&mut self.inner)
            .take(n as u64)
            .read_to_end(&mut self.buf)
            .ok()?;
        (self.buf.len() == n).then_some(&self.buf[..])
    }
    fn array<const N: usize>(&mut self) -> Option<[u8; N]> {
        let mut b = [0; N];
        self.inner.read_exact(&mut b).ok()?;
        Some(b)
    }
    fn u8(&mut self) -> Option<u8> {
        Some(self.array::<1>()?[0])
    }
    fn u32(&mut self) -> Option<u32> {
        Some(u32::from_le_bytes(self.array()?))
    }
    fn u64(&mut self) -> Option<u64> {
        Some(u64::from_le_bytes(self.array()?))
    }
    fn term(&mut self) -> Option<Term> {
        let n = self.u32()? as usize;
        let s = std::str::from_utf8(self.fill(n)?).ok()?;
        Term::from_str(s).ok()
    }
    /// A list: its length (`u32`), then that many items read by `item`.
    fn list<T>(&mut self, mut item: impl FnMut(&mut Self) -> Option<T>) -> Option<Vec<T>> {
        (0..self.u32()?).map(|_| item(self)).collect()
    }
    /// One relation: graph, predicate, pair count, pairs, each id below `terms`.
    fn relation(&mut self, terms: u32) -> Option<RelationPairs> {
        let g = graph_key(self.u32()?);
        let p = self.u32()?;
        let n = self.u64()?;
        let mut pairs = Vec::with_capacity(n.min(1 << 24) as usize);
        for _ in 0..n {
            let pair = (self.u32()?, self.u32()?);
            // Checked as read: the checksum comes last, after the pairs became trees.
            if pair.0 >= terms || pair.1 >= terms {
                return None;
            }
            pairs.push(pair);
        }
        Some((g, p, pairs))
    }
}

/// The relations folder: its log open for appending.
pub(crate) struct Log {
    folder: PathBuf,
    file: File,
    /// Bytes of valid records.
    len: u64,
    /// The last record's sequence number.
    seq: u64,
    /// Terms written to the checkpoint or the log so far.
    persisted_terms: u32,
}

impl Log {
    /// Opens (creating) the log of `folder`, whose checkpoint is `checkpoint` (see
    /// [`read_checkpoint`]); returns it and its records after the checkpoint with their
    /// offsets (a torn tail dropped).
    pub(crate) fn open(
        folder: &Path,
        checkpoint: CheckpointInfo,
    ) -> Result<(Log, Vec<(Record, u64)>), OxigraphError> {
        std::fs::create_dir_all(folder).map_err(|e| io("cannot create", folder, e))?;
        let path = folder.join(LOG);
        let mut file = OpenOptions::new()
            .create(true)
            .truncate(false)
            .read(true)
            .write(true)
            .open(&path)
            .map_err(|e| io("cannot open", &path, e))?;
        let mut bytes = Vec::new();
        file.read_to_end(&mut bytes)
            .map_err(|e| io("cannot read", &path, e))?;
        let mut records = Vec::new();
        let mut at = 0usize;
        while let Some((record, next)) = parse_record(&bytes[at..]) {
            if record.seq > checkpoint.seq {
                records.push((record, at as u64));
            }
            at += next;
        }
        let mut log = Log {
            folder: folder.to_owned(),
            file,
            len: at as u64,
            seq: checkpoint.seq,
            persisted_terms: checkpoint.terms,
        };
        if let Some((r, _)) = records.last() {
            log.seq = log.seq.max(r.seq);
        }
        for (r, _) in &records {
            log.persisted_terms = log.persisted_terms.max(r.first_term + r.terms.len() as u32);
        }
        log.truncate(log.len)?;
        Ok((log, records))
    }

    /// Drops the records from byte `offset` on (an uncommitted write); `terms` is the
    /// number of terms persisted before them.
    pub(crate) fn drop_from(&mut self, offset: u64, terms: u32) -> Result<(), OxigraphError> {
        self.persisted_terms = terms;
        self.truncate(offset)
    }

    /// Cuts the log to `len` bytes (dropping a torn or uncommitted tail).
    fn truncate(&mut self, len: u64) -> Result<(), OxigraphError> {
        let path = self.folder.join(LOG);
        self.file
            .set_len(len)
            .and_then(|()| self.file.sync_data())
            .map_err(|e| io("cannot truncate", &path, e))?;
        self.len = len;
        Ok(())
    }

    /// Bytes of valid records.
    pub(crate) fn len(&self) -> u64 {
        self.len
    }

    /// The terms a new record must carry: ids from this one up.
    pub(crate) fn persisted_terms(&self) -> u32 {
        self.persisted_terms
    }

    /// Appends a record of `changes` (with `terms`, numbered from the persisted ones)
    /// and fsyncs it; returns its sequence number. On an error the log is cut back.
    pub(crate) fn append(
        &mut self,
        terms: &[Term],
        changes: &[(QuadIds, bool)],
    ) -> Result<u64, OxigraphError> {
        let seq = self.seq + 1;
        let mut w = Writer(Vec::new());
        w.u64(seq);
        w.0.push(0);
        w.u32(self.persisted_terms);
        w.u32(terms.len() as u32);
        for t in terms {
            w.term(t);
        }
        w.u32(changes.len() as u32);
        for (q, inserted) in changes {
            w.u32(graph_code(q.graph));
            w.u32(q.subject);
            w.u32(q.predicate);
            w.u32(q.object);
            w.0.push(u8::from(*inserted));
        }
        self.write_frame(&w.0)?;
        self.seq = seq;
        self.persisted_terms += terms.len() as u32;
        Ok(seq)
    }

    /// Appends an abort marker for record `seq` (its write did not commit).
    pub(crate) fn abort(&mut self, seq: u64) -> Result<(), OxigraphError> {
        let mut w = Writer(Vec::new());
        w.u64(seq);
        w.0.push(1);
        self.write_frame(&w.0)
    }

    fn write_frame(&mut self, payload: &[u8]) -> Result<(), OxigraphError> {
        let path = self.folder.join(LOG);
        let mut frame = Vec::with_capacity(payload.len() + 8);
        frame.extend_from_slice(&(payload.len() as u32).to_le_bytes());
        frame.extend_from_slice(&crc32fast::hash(payload).to_le_bytes());
        frame.extend_from_slice(payload);
        let written = self
            .file
            .seek(SeekFrom::Start(self.len))
            .and_then(|_| self.file.write_all(&frame))
            .and_then(|()| self.file.sync_data());
        if let Err(e) = written {
            let _ = self.file.set_len(self.len);
            return Err(io("cannot append to", &path, e));
        }
        self.len += frame.len() as u64;
        Ok(())
    }

    /// Writes a checkpoint of the `terms` first terms of the dictionary (`term(id)`
    /// each) and of `relations` (to a temporary file, fsynced, renamed), then empties
    /// the log. Terms and pairs stream to the file: nothing but a relation's pairs is
    /// held at once.
    pub(crate) fn checkpoint(
        &mut self,
        terms: u32,
        term: impl Fn(u32) -> Option<Term>,
        relations: &[RelationTree],
    ) -> Result<(), OxigraphError> {
        let path = self.folder.join(CHECKPOINT);
        let tmp = self.folder.join("checkpoint.tmp");
        let write = || -> std::io::Result<()> {
            let mut out = Checksummed::new(BufWriter::with_capacity(1 << 20, File::create(&tmp)?));
            let mut w = Writer(Vec::with_capacity(1 << 16));
            w.0.extend_from_slice(MAGIC);
            w.u64(self.seq);
            w.u32(terms);
            for id in 0..terms {
                let t = term(id).ok_or_else(|| {
                    std::io::Error::other(format!("the dictionary has no term {id}"))
                })?;
                w.term(&t);
                w.spill(&mut out)?;
            }
            w.u32(relations.len() as u32);
            for (g, p, tree) in relations {
                let pairs = tree.cells();
                w.u32(graph_code(*g));
                w.u32(*p);
                w.u64(pairs.len() as u64);
                for (s, o) in pairs {
                    w.u32(s);
                    w.u32(o);
                    w.spill(&mut out)?;
                }
            }
            out.write_all(&w.0)?;
            let crc = out.crc32();
            out.inner.write_all(&crc.to_le_bytes())?;
            out.inner
                .into_inner()
                .map_err(|e| e.into_error())?
                .sync_all()?;
            std::fs::rename(&tmp, &path)?;
            File::open(&self.folder)?.sync_all()
        };
        write().map_err(|e| io("cannot write", &path, e))?;
        self.persisted_terms = terms;
        self.truncate(0)
    }
}

/// Reads the checkpoint of `folder`, if there is one: its terms are interned into
/// `dictionary` (which must be empty) in id order and each relation is handed to
/// `relation` as it is read, with the number of terms. A checkpoint that does not read
/// back (bad magic, truncated, checksum) is an error; the dictionary then holds part of it.
pub(crate) fn read_checkpoint(
    folder: &Path,
    dictionary: &mut MemoryDictionary,
    mut relation: impl FnMut(u32, RelationPairs),
) -> Result<CheckpointInfo, OxigraphError> {
    let path = folder.join(CHECKPOINT);
    let file = match File::open(&path) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(CheckpointInfo::default()),
        Err(e) => return Err(io("cannot open", &path, e)),
    };
    let len = file
        .metadata()
        .map_err(|e| io("cannot read", &path, e))?
        .len();
    if len < (MAGIC.len() + 4) as u64 {
        return Err(corrupt(&path, "not a k2rpq checkpoint"));
    }
    let mut file = BufReader::with_capacity(1 << 20, file);
    let mut r = Reader::new(Checksummed::new((&mut file).take(len - 4)));
    if r.fill(MAGIC.len()) != Some(&MAGIC[..]) {
        return Err(corrupt(&path, "not a k2rpq checkpoint"));
    }
    let mut parse = || -> Option<CheckpointInfo> {
        let seq = r.u64()?;
        let terms = r.u32()?;
        for id in 0..terms {
            // A term twice would shift every later id.
            if dictionary.intern(r.term()?.as_ref()) != id {
                return None;
            }
        }
        for _ in 0..r.u32()? {
            relation(terms, r.relation(terms)?);
        }
        Some(CheckpointInfo { seq, terms })
    };
    let info = parse();
    // The rest of the body goes through the checksum too, so that damage anywhere is
    // reported as such rather than as whatever the parse stumbled on.
    let rest = std::io::copy(&mut r.inner, &mut std::io::sink())
        .map_err(|e| io("cannot read", &path, e))?;
    let mut crc = [0; 4];
    r.inner
        .inner
        .get_mut()
        .read_exact(&mut crc)
        .map_err(|e| io("cannot read", &path, e))?;
    if r.inner.crc32().to_le_bytes() != crc {
        return Err(corrupt(&path, "checksum mismatch"));
    }
    info.filter(|_| rest == 0)
        .ok_or_else(|| corrupt(&path, "its content does not read back"))
}

/// The record at the start of `bytes` and its length with its frame, if whole.
fn parse_record(bytes: &[u8]) -> Option<(Record, usize)> {
    let mut r = Reader::new(bytes);
    let len = r.u32()? as usize;
    let crc = r.u32()?;
    let payload = r.fill(len)?;
    if crc32fast::hash(payload) != crc {
        return None;
    }
    let mut r = Reader::new(payload);
    let seq = r.u64()?;
    let abort = r.u8()? == 1;
    let record = if abort {
        Record {
            seq,
            abort,
            first_term: 0,
            terms: Vec::new(),
            changes: Vec::new(),
        }
    } else {
        let first_term = r.u32()?;
        let terms = r.list(Reader::term)?;
        let changes = r.list(|r| {
            let graph = graph_key(r.u32()?);
            let (subject, predicate, object) = (r.u32()?, r.u32()?, r.u32()?);
            let inserted = r.u8()? == 1;
            Some((
                QuadIds {
                    graph,
                    subject,
                    predicate,
                    object,
                },
                inserted,
            ))
        })?;
        Record {
            seq,
            abort,
            first_term,
            terms,
            changes,
        }
    };
    Some((record, 8 + len))
}
