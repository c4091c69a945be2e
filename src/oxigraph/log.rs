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

use oxrdf::Term;

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

/// What a checkpoint holds.
#[derive(Default)]
pub(crate) struct Checkpoint {
    /// The last log record it includes.
    pub seq: u64,
    /// The dictionary's terms, by id.
    pub terms: Vec<Term>,
    /// Every relation's pairs.
    pub relations: Vec<RelationPairs>,
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

struct Reader<'a>(&'a [u8]);

impl Reader<'_> {
    fn take(&mut self, n: usize) -> Option<&[u8]> {
        if self.0.len() < n {
            return None;
        }
        let (a, b) = self.0.split_at(n);
        self.0 = b;
        Some(a)
    }
    fn u32(&mut self) -> Option<u32> {
        Some(u32::from_le_bytes(self.take(4)?.try_into().ok()?))
    }
    fn u64(&mut self) -> Option<u64> {
        Some(u64::from_le_bytes(self.take(8)?.try_into().ok()?))
    }
    fn term(&mut self) -> Option<Term> {
        let n = self.u32()? as usize;
        let s = std::str::from_utf8(self.take(n)?).ok()?;
        Term::from_str(s).ok()
    }
    /// A list: its length (`u32`), then that many items read by `item`.
    fn list<T>(&mut self, mut item: impl FnMut(&mut Self) -> Option<T>) -> Option<Vec<T>> {
        (0..self.u32()?).map(|_| item(self)).collect()
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
    /// Opens (creating) the folder; returns the log, the checkpoint and the log's
    /// records after it with their offsets (a torn tail dropped).
    #[allow(clippy::type_complexity)]
    pub(crate) fn open(
        folder: &Path,
    ) -> Result<(Log, Checkpoint, Vec<(Record, u64)>), OxigraphError> {
        std::fs::create_dir_all(folder).map_err(|e| io("cannot create", folder, e))?;
        let checkpoint = read_checkpoint(&folder.join(CHECKPOINT))?;
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
            persisted_terms: checkpoint.terms.len() as u32,
        };
        if let Some((r, _)) = records.last() {
            log.seq = log.seq.max(r.seq);
        }
        for (r, _) in &records {
            log.persisted_terms = log.persisted_terms.max(r.first_term + r.terms.len() as u32);
        }
        log.truncate(log.len)?;
        Ok((log, checkpoint, records))
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

    /// Writes `checkpoint` (to a temporary file, fsynced, renamed) and empties the log.
    pub(crate) fn checkpoint(&mut self, mut checkpoint: Checkpoint) -> Result<(), OxigraphError> {
        checkpoint.seq = self.seq;
        let path = self.folder.join(CHECKPOINT);
        let tmp = self.folder.join("checkpoint.tmp");
        let write = || -> std::io::Result<()> {
            let mut out = BufWriter::new(File::create(&tmp)?);
            let mut w = Writer(Vec::new());
            w.0.extend_from_slice(MAGIC);
            w.u64(checkpoint.seq);
            w.u32(checkpoint.terms.len() as u32);
            for t in &checkpoint.terms {
                w.term(t);
            }
            w.u32(checkpoint.relations.len() as u32);
            for (g, p, pairs) in &checkpoint.relations {
                w.u32(graph_code(*g));
                w.u32(*p);
                w.u64(pairs.len() as u64);
                for &(s, o) in pairs {
                    w.u32(s);
                    w.u32(o);
                }
            }
            let crc = crc32fast::hash(&w.0);
            out.write_all(&w.0)?;
            out.write_all(&crc.to_le_bytes())?;
            out.into_inner().map_err(|e| e.into_error())?.sync_all()?;
            std::fs::rename(&tmp, &path)?;
            File::open(&self.folder)?.sync_all()
        };
        write().map_err(|e| io("cannot write", &path, e))?;
        self.persisted_terms = checkpoint.terms.len() as u32;
        self.truncate(0)
    }
}

fn read_checkpoint(path: &Path) -> Result<Checkpoint, OxigraphError> {
    let mut bytes = Vec::new();
    match File::open(path) {
        Ok(f) => BufReader::new(f)
            .read_to_end(&mut bytes)
            .map_err(|e| io("cannot read", path, e))?,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Checkpoint::default()),
        Err(e) => return Err(io("cannot open", path, e)),
    };
    if bytes.len() < MAGIC.len() + 4 || &bytes[..MAGIC.len()] != MAGIC {
        return Err(corrupt(path, "not a k2rpq checkpoint"));
    }
    let (body, crc) = bytes.split_at(bytes.len() - 4);
    if crc32fast::hash(body).to_le_bytes() != crc {
        return Err(corrupt(path, "checksum mismatch"));
    }
    let mut r = Reader(&body[MAGIC.len()..]);
    let parse = |r: &mut Reader<'_>| -> Option<Checkpoint> {
        let seq = r.u64()?;
        let terms = r.list(Reader::term)?;
        let relations = r.list(|r| {
            let g = graph_key(r.u32()?);
            let p = r.u32()?;
            let n = r.u64()?;
            let mut pairs = Vec::with_capacity(n.min(1 << 24) as usize);
            for _ in 0..n {
                pairs.push((r.u32()?, r.u32()?));
            }
            Some((g, p, pairs))
        })?;
        Some(Checkpoint {
            seq,
            terms,
            relations,
        })
    };
    parse(&mut r).ok_or_else(|| corrupt(path, "truncated"))
}

/// The record at the start of `bytes` and its length with its frame, if whole.
fn parse_record(bytes: &[u8]) -> Option<(Record, usize)> {
    let mut r = Reader(bytes);
    let len = r.u32()? as usize;
    let crc = r.u32()?;
    let payload = r.take(len)?;
    if crc32fast::hash(payload) != crc {
        return None;
    }
    let mut r = Reader(payload);
    let seq = r.u64()?;
    let abort = r.take(1)?[0] == 1;
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
            let inserted = r.take(1)?[0] == 1;
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
