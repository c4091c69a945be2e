//! Reading RDF inputs (files or stdin, plain, gzip or bzip2) into batches of quads whose
//! terms are byte keys ([`super::terms`]), ready for the dictionary.
//!
//! N-Triples and N-Quads have one statement per line, so the stream is cut into
//! line-aligned chunks of a few MiB that rayon parses in parallel (each chunk with its own
//! oxttl slice parser and its own small term table); the batches come back in input order
//! so errors are reported at the first bad line. oxttl's own
//! `split_file_for_parallel_parsing` needs a seekable uncompressed file and loses line
//! numbers, hence this streaming splitter, which works on `.gz`/`.bz2` and stdin alike.
//! Decompressing and cutting, parsing, and handing batches on run on three threads so that
//! the single-threaded decompression overlaps the parallel parsing. Chunks are parsed
//! leniently (plain lines by the borrowed scanner of [`super::ntfast`], every other line
//! by oxttl's lenient parser; no IRI/language-tag validation) and their distinct terms
//! validated after;
//! a chunk that fails goes through the strict parser, so errors and skip counts are the
//! strict parser's (see `parse_chunk`).
//! Turtle and TriG cannot be split without parsing them, so they go through one oxttl
//! reader parser.

use std::fs::File;
use std::io::{self, BufRead, BufReader, Read};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::Receiver;
use std::sync::Arc;
use std::time::{Duration, Instant};

use hashbrown::HashTable;
use oxrdf::{GraphNameRef, QuadRef, TermRef, TripleRef};
use oxttl::{NQuadsParser, NTriplesParser, TriGParser, TurtleParseError, TurtleParser};
use rayon::prelude::*;

use super::ntfast::{self, Line, RawTerm};
use super::terms;

/// Where RDF comes from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Input {
    /// A file; its extension tells the format unless one is given.
    Path(PathBuf),
    /// Standard input; needs an explicit format.
    Stdin,
}

impl Input {
    /// `-` is stdin, anything else a path.
    pub fn from_arg(arg: &str) -> Input {
        if arg == "-" {
            Input::Stdin
        } else {
            Input::Path(PathBuf::from(arg))
        }
    }

    /// The name used in messages: the path, or `<stdin>`.
    pub fn name(&self) -> String {
        match self {
            Input::Path(p) => p.display().to_string(),
            Input::Stdin => "<stdin>".into(),
        }
    }
}

/// RDF syntaxes read by the loader.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    /// N-Triples (`.nt`): one triple per line, parsed in parallel.
    NTriples,
    /// N-Quads (`.nq`): one quad per line, parsed in parallel.
    NQuads,
    /// Turtle (`.ttl`): parsed sequentially.
    Turtle,
    /// TriG (`.trig`): Turtle with named graphs, parsed sequentially.
    TriG,
}

/// Compression of an input stream.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Compression {
    /// Plain text.
    None,
    /// gzip (`.gz`), possibly several concatenated members.
    Gzip,
    /// bzip2 (`.bz2`), possibly several concatenated streams.
    Bzip2,
}

impl Compression {
    /// The compression a file name's suffix names (`.gz`, `.bz2`, in any case); none
    /// otherwise.
    pub fn of_path(path: &Path) -> Compression {
        let name = path
            .file_name()
            .map(|n| n.to_string_lossy().to_ascii_lowercase());
        match name.as_deref() {
            Some(n) if n.ends_with(".gz") => Compression::Gzip,
            Some(n) if n.ends_with(".bz2") => Compression::Bzip2,
            _ => Compression::None,
        }
    }

    /// `reader`'s bytes decompressed.
    pub fn decoder<'r>(self, reader: impl BufRead + Send + 'r) -> Box<dyn Read + Send + 'r> {
        match self {
            Compression::None => Box::new(reader),
            Compression::Gzip => Box::new(super::gzip::GzipReader::new(reader)),
            Compression::Bzip2 => Box::new(bzip2::bufread::MultiBzDecoder::new(reader)),
        }
    }
}

impl Format {
    /// The format named `name`: a short name (`nt`, `nq`, `ttl`, `trig`), a long one
    /// (`ntriples`, `n-triples`, `turtle`, ...) or a media type (`application/n-triples`).
    pub fn from_name(name: &str) -> Option<Format> {
        Some(match name.to_ascii_lowercase().as_str() {
            "nt" | "ntriples" | "n-triples" | "application/n-triples" => Format::NTriples,
            "nq" | "nquads" | "n-quads" | "application/n-quads" => Format::NQuads,
            "ttl" | "turtle" | "text/turtle" => Format::Turtle,
            "trig" | "application/trig" => Format::TriG,
            _ => return None,
        })
    }

    /// Format and compression from a file name such as `dump.nt.gz`.
    pub fn guess(path: &Path) -> Option<(Format, Compression)> {
        let name = path.file_name()?.to_str()?.to_ascii_lowercase();
        let compression = Compression::of_path(path);
        let stem = match compression {
            Compression::None => name.as_str(),
            Compression::Gzip => &name[..name.len() - ".gz".len()],
            Compression::Bzip2 => &name[..name.len() - ".bz2".len()],
        };
        let ext = stem.rsplit_once('.')?.1;
        Some((Format::from_name(ext)?, compression))
    }

    fn is_line_based(self) -> bool {
        matches!(self, Format::NTriples | Format::NQuads)
    }
}

/// Why an input could not be read.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ParseError {
    /// A statement that does not parse (the default mode stops at the first one).
    #[error("{0}")]
    Syntax(BadStatement),
    /// The input does not exist or cannot be opened.
    #[error("cannot open {file}: {error}")]
    Open {
        /// Input name.
        file: String,
        /// The OS error.
        error: io::Error,
    },
    /// Reading or decompressing failed part way.
    #[error("cannot read {file}: {error}")]
    Read {
        /// Input name.
        file: String,
        /// The I/O or decompression error.
        error: io::Error,
    },
    /// A folder holding no file of a known RDF format.
    #[error(
        "{file} is a folder with no RDF files in it (.nt .nq .ttl .trig, optionally .gz or .bz2)"
    )]
    Folder {
        /// Input name.
        file: String,
    },
    /// The format could not be told from the name and none was given.
    #[error("{file}: unknown RDF format (use .nt .nq .ttl .trig, optionally .gz or .bz2, or pass --format)")]
    UnknownFormat {
        /// Input name.
        file: String,
    },
    /// The consumer of the batches failed (for example, the edge spill file).
    #[error(transparent)]
    Sink(SinkError),
}

/// An error of the code that consumes parsed batches (numbering terms, spilling edges),
/// carried through the parser unchanged.
pub type SinkError = Box<dyn std::error::Error + Send + Sync>;

/// Where a statement does not parse, and why.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{file}:{line}:{column}: {reason}")]
pub struct BadStatement {
    /// Input name.
    pub file: String,
    /// 1-based line number.
    pub line: u64,
    /// 1-based column (characters) where the parser stopped.
    pub column: u64,
    /// What the parser objected to.
    pub reason: String,
}

impl BadStatement {
    /// The statement of `error`, whose position counts from line `first_line` (1-based)
    /// of `file`; `text` is the parsed text, for a clearer reason where oxttl's is terse.
    fn new(file: &str, first_line: u64, error: &oxttl::TurtleSyntaxError, text: &[u8]) -> Self {
        let at = error.location().start;
        let (column, reason) = match unterminated_literal(text, at.line) {
            Some(opened) => (opened, "unterminated string literal".to_owned()),
            None => (at.column + 1, error.message().to_string()),
        };
        BadStatement {
            file: file.to_string(),
            line: first_line + at.line,
            column,
            reason,
        }
    }
}

/// The 1-based column of the quote that opens a string literal left open on line `line`
/// (0-based) of `text`, if any: oxttl reports it only as an unexpected end.
fn unterminated_literal(text: &[u8], line: u64) -> Option<u64> {
    let text = std::str::from_utf8(text).ok()?;
    let line = text.lines().nth(line as usize)?;
    let (mut open, mut escaped, mut in_iri) = (None, false, false);
    for (column, c) in line.chars().enumerate() {
        match (open, c) {
            (None, '<') => in_iri = true,
            (None, '>') => in_iri = false,
            (None, '#') if !in_iri => break,
            (None, '"') if !in_iri => open = Some(column as u64 + 1),
            (Some(_), '\\') if !escaped => {
                escaped = true;
                continue;
            }
            (Some(_), '"') if !escaped => open = None,
            _ => {}
        }
        escaped = false;
    }
    open
}

/// Statements skipped in lenient mode: how many, and the first few with where and why.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Skipped {
    /// Statements skipped.
    pub count: u64,
    /// The first [`Skipped::SHOWN`] of them, in input order.
    pub first: Vec<BadStatement>,
}

impl Skipped {
    /// How many skipped statements are kept with their position.
    pub const SHOWN: usize = 10;

    /// Counts `bad`, keeping it if it is among the first.
    pub fn add(&mut self, bad: BadStatement) {
        self.count += 1;
        if self.first.len() < Self::SHOWN {
            self.first.push(bad);
        }
    }

    /// Adds the statements `later` skipped after these.
    pub fn extend(&mut self, later: Skipped) {
        self.count += later.count;
        let room = Self::SHOWN.saturating_sub(self.first.len());
        self.first.extend(later.first.into_iter().take(room));
    }
}

/// The UTF-8 byte-order mark, which some writers put at the start of a file.
const BOM: &[u8] = b"\xEF\xBB\xBF";

/// `reader` without the byte-order mark it may start with.
fn skip_bom(mut reader: Box<dyn Read + Send>) -> io::Result<Box<dyn Read + Send>> {
    let mut head = Vec::with_capacity(BOM.len());
    (&mut reader)
        .take(BOM.len() as u64)
        .read_to_end(&mut head)?;
    if head == BOM {
        Ok(reader)
    } else {
        Ok(Box::new(io::Cursor::new(head).chain(reader)))
    }
}

/// Default graph marker in [`Batch::quads`].
pub const DEFAULT_GRAPH: u32 = u32::MAX;

/// Statements of one stretch of input with their distinct terms.
#[derive(Default, Debug)]
pub struct Batch {
    /// Concatenated term keys; key `i` is `bytes[ends[i-1]..ends[i]]`.
    pub bytes: Vec<u8>,
    /// End offset of each key in `bytes`.
    pub ends: Vec<usize>,
    /// [`terms::hash_key`] of each key, for the term tables downstream.
    pub hashes: Vec<u64>,
    /// `[graph, predicate, subject, object]` as key indices (`graph` may be [`DEFAULT_GRAPH`]).
    pub quads: Vec<[u32; 4]>,
    /// Statements skipped in lenient mode.
    pub skipped: Skipped,
}

impl Batch {
    /// Key `i`.
    pub fn key(&self, i: usize) -> &[u8] {
        let start = if i == 0 { 0 } else { self.ends[i - 1] };
        &self.bytes[start..self.ends[i]]
    }

    /// Number of distinct keys.
    pub fn term_count(&self) -> usize {
        self.ends.len()
    }
}

/// Builds a [`Batch`], numbering each distinct key once.
///
/// The table holds key indices only (the key bytes live once, in the batch) and finds them
/// by the hash stored in [`Batch::hashes`], so a new key costs no allocation and no key is
/// hashed twice. A scanned IRI, blank node or simple literal is hashed and compared where
/// it lies in the input ([`terms::hash_parts`]) and copied once, into the batch, when new.
struct BatchBuilder {
    batch: Batch,
    index: HashTable<u32>,
    scratch: Vec<u8>,
    /// Batch indices of recent predicates (`u32::MAX`: none), by [`pred_slot`]: a line's
    /// predicate is nearly always one seen a few lines before, and comparing it with one
    /// candidate costs less than hashing it and probing the table.
    preds: [u32; PRED_SLOTS],
    /// Check each new key with [`terms::is_strict_key`] as it is added (the fast path),
    /// while its bytes are still in cache; `strict` says whether all passed so far.
    check: bool,
    strict: bool,
    /// The check, which resumes IRIs of the namespace it saw last.
    checker: terms::KeyCheck,
}

impl Default for BatchBuilder {
    /// An empty builder that does not check keys (the sequential Turtle/TriG reader).
    fn default() -> Self {
        BatchBuilder::for_text(0, false)
    }
}

/// Slots of [`BatchBuilder::preds`].
const PRED_SLOTS: usize = 32;

/// The slot of predicate IRI `iri` in [`BatchBuilder::preds`]: a mix of its length and
/// last two bytes, which tell apart the IRIs of one vocabulary (`.../P31`, `.../P2860`)
/// without reading them whole.
fn pred_slot(iri: &[u8]) -> usize {
    let n = iri.len();
    let last = u32::from(iri.get(n.wrapping_sub(1)).copied().unwrap_or(0));
    let prev = u32::from(iri.get(n.wrapping_sub(2)).copied().unwrap_or(0));
    let x = last | prev << 8 | (n as u32) << 16;
    (x.wrapping_mul(0x9e37_79b1) >> (32 - PRED_SLOTS.trailing_zeros())) as usize
}

impl BatchBuilder {
    /// A builder sized for about `text_bytes` of N-Triples (~100 bytes and at most three new
    /// terms a line), so that neither the table nor the buffers grow by copying. `check`:
    /// validate new keys ([`BatchBuilder::check`]).
    fn for_text(text_bytes: usize, check: bool) -> Self {
        let terms = text_bytes / 64;
        BatchBuilder {
            batch: Batch {
                bytes: Vec::with_capacity(text_bytes / 2),
                ends: Vec::with_capacity(terms),
                hashes: Vec::with_capacity(terms),
                quads: Vec::with_capacity(text_bytes / 80),
                skipped: Skipped::default(),
            },
            index: HashTable::with_capacity(terms),
            scratch: Vec::new(),
            preds: [u32::MAX; PRED_SLOTS],
            check,
            strict: true,
            checker: terms::KeyCheck::default(),
        }
    }

    fn term(&mut self, term: TermRef<'_>) -> u32 {
        self.scratch.clear();
        terms::encode_into(term, &mut self.scratch);
        self.intern_scratch()
    }

    fn raw(&mut self, term: RawTerm<'_>) -> u32 {
        match term {
            RawTerm::Iri(iri) => self.intern(terms::IRI, iri),
            RawTerm::Blank(label) => self.intern(terms::BLANK, label),
            RawTerm::Simple(value) => self.intern(terms::SIMPLE, value),
            RawTerm::Typed(datatype, value) if datatype == terms::XSD_STRING.as_bytes() => {
                self.intern(terms::SIMPLE, value)
            }
            RawTerm::Lang(..) | RawTerm::Typed(..) => {
                self.scratch.clear();
                term.encode_into(&mut self.scratch);
                self.intern_scratch()
            }
        }
    }

    /// A scanned predicate (an IRI): a recent one from [`BatchBuilder::preds`], else as
    /// any term.
    fn predicate(&mut self, term: RawTerm<'_>) -> u32 {
        let RawTerm::Iri(iri) = term else {
            return self.raw(term);
        };
        let slot = pred_slot(iri);
        let i = self.preds[slot];
        if i != u32::MAX {
            if let Some((&terms::IRI, rest)) = self.batch.key(i as usize).split_first() {
                if rest == iri {
                    return i;
                }
            }
        }
        let i = self.intern(terms::IRI, iri);
        self.preds[slot] = i;
        i
    }

    /// The index of the key in `scratch`, added to the batch if new.
    fn intern_scratch(&mut self) -> u32 {
        let scratch = std::mem::take(&mut self.scratch);
        let i = match scratch.split_first() {
            Some((&tag, rest)) => self.intern(tag, rest),
            None => self.intern(0, b""),
        };
        self.scratch = scratch;
        i
    }

    /// The index of the key `tag` + `rest`, added to the batch if new (and checked, when
    /// the builder checks).
    fn intern(&mut self, tag: u8, rest: &[u8]) -> u32 {
        let hash = terms::hash_parts(tag, rest);
        let Batch {
            bytes,
            ends,
            hashes,
            ..
        } = &mut self.batch;
        // One probe finds the key or the slot for it (`entry`, not `find` then insert).
        let entry = self.index.entry(
            hash,
            |&i| {
                let i = i as usize;
                let start = if i == 0 { 0 } else { ends[i - 1] };
                let key = &bytes[start..ends[i]];
                key.len() == rest.len() + 1 && key[0] == tag && key[1..] == *rest
            },
            |&j| hashes[j as usize],
        );
        let slot = match entry {
            hashbrown::hash_table::Entry::Occupied(o) => return *o.get(),
            hashbrown::hash_table::Entry::Vacant(v) => v,
        };
        let i = ends.len() as u32;
        slot.insert(i);
        bytes.push(tag);
        bytes.extend_from_slice(rest);
        ends.push(bytes.len());
        hashes.push(hash);
        // The source, not the fresh copy (see `KeyCheck::is_strict_parts`).
        if self.check && !self.checker.is_strict_parts(tag, rest) {
            self.strict = false;
        }
        i
    }

    /// A statement recognised by [`ntfast::scan_line`].
    fn scanned(&mut self, line: Line<'_>) {
        if let Line::Statement {
            subject,
            predicate,
            object,
            graph,
        } = line
        {
            let g = graph.map_or(DEFAULT_GRAPH, |g| self.raw(g));
            let p = self.predicate(predicate);
            let s = self.raw(subject);
            let o = self.raw(object);
            self.batch.quads.push([g, p, s, o]);
        }
    }

    fn quad(&mut self, q: QuadRef<'_>) {
        let g = match q.graph_name {
            GraphNameRef::DefaultGraph => DEFAULT_GRAPH,
            GraphNameRef::NamedNode(n) => self.term(n.into()),
            GraphNameRef::BlankNode(b) => self.term(b.into()),
        };
        let p = self.term(q.predicate.into());
        let s = self.term(q.subject.into());
        let o = self.term(q.object);
        self.batch.quads.push([g, p, s, o]);
    }

    fn triple(&mut self, t: TripleRef<'_>) {
        self.quad(t.in_graph(GraphNameRef::DefaultGraph));
    }

    fn finish(self) -> Batch {
        self.batch
    }
}

/// How to read one input.
#[derive(Clone, Debug)]
pub struct ReadOptions {
    /// The format; guessed from the file name when `None`.
    pub format: Option<Format>,
    /// Skip and count bad statements instead of stopping.
    pub lenient: bool,
    /// Target chunk size for parallel parsing, in bytes.
    pub chunk_bytes: usize,
    /// Inputs read at the same time, sharing the thread pool: each keeps that many times
    /// fewer chunks in flight, so that the text buffered stays as for one input.
    pub concurrent_inputs: usize,
}

impl Default for ReadOptions {
    fn default() -> Self {
        ReadOptions {
            format: None,
            lenient: false,
            chunk_bytes: 4 << 20,
            concurrent_inputs: 1,
        }
    }
}

/// `inputs` with each folder replaced by the files in it whose names tell an RDF format
/// ([`Format::guess`]: `.nt`, `.nq`, `.ttl`, `.trig`, optionally `.gz` or `.bz2`), in
/// name order; other files and names starting with `.` are passed over. A folder with
/// no such file is an error.
pub fn expand_folders(inputs: &[Input]) -> Result<Vec<Input>, ParseError> {
    let mut out = Vec::with_capacity(inputs.len());
    for input in inputs {
        let Input::Path(dir) = input else {
            out.push(input.clone());
            continue;
        };
        if !dir.is_dir() {
            out.push(input.clone());
            continue;
        }
        let open_err = |error| ParseError::Open {
            file: input.name(),
            error,
        };
        let mut files: Vec<PathBuf> = Vec::new();
        for entry in std::fs::read_dir(dir).map_err(open_err)? {
            let path = entry.map_err(open_err)?.path();
            let visible = path
                .file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| !n.starts_with('.'));
            if visible && path.is_file() && Format::guess(&path).is_some() {
                files.push(path);
            }
        }
        if files.is_empty() {
            return Err(ParseError::Folder { file: input.name() });
        }
        files.sort();
        out.extend(files.into_iter().map(Input::Path));
    }
    Ok(out)
}

/// Counting wrapper so that a progress bar can follow the (compressed) bytes read.
struct Counted<R> {
    inner: R,
    read: Arc<AtomicU64>,
}

impl<R: Read> Read for Counted<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.read.fetch_add(n as u64, Ordering::Relaxed);
        Ok(n)
    }
}

/// The format and compression `options` imply for `input`.
pub fn resolve_format(
    input: &Input,
    options: &ReadOptions,
) -> Result<(Format, Compression), ParseError> {
    let guessed = match input {
        Input::Path(p) => Format::guess(p),
        Input::Stdin => None,
    };
    let compression = match input {
        Input::Path(p) => {
            let name = p.to_string_lossy().to_ascii_lowercase();
            if name.ends_with(".gz") {
                Compression::Gzip
            } else if name.ends_with(".bz2") {
                Compression::Bzip2
            } else {
                Compression::None
            }
        }
        Input::Stdin => Compression::None,
    };
    match (options.format, guessed) {
        (Some(f), _) => Ok((f, compression)),
        (None, Some((f, c))) => Ok((f, c)),
        (None, None) => Err(ParseError::UnknownFormat { file: input.name() }),
    }
}

/// Size in bytes of the input as stored (for a progress bar), when known.
pub fn input_size(input: &Input) -> Option<u64> {
    match input {
        Input::Path(p) => std::fs::metadata(p).ok().map(|m| m.len()),
        Input::Stdin => None,
    }
}

/// Where the parse phase of one input spent its time (seconds, wall clock), so that a
/// load report can say which stage bounds it. The stages overlap: a reader cuts while the
/// pool parses while the consumer numbers.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct ReadTimes {
    /// The serial reader: reading, decompressing, copying and cutting the stream into
    /// chunks (0 for a memory-mapped file, whose chunks are cut in place).
    pub read_seconds: f64,
    /// Parsing chunks on the pool (from a group's start to its last chunk parsed).
    pub parse_seconds: f64,
    /// The consumer waiting for parsed batches (the stages upstream are the bottleneck).
    pub wait_seconds: f64,
    /// The consumer inside `sink` (numbering terms, buffering edges).
    pub sink_seconds: f64,
}

impl ReadTimes {
    /// Adds `other`'s times to these (several inputs in one load).
    pub fn add(&mut self, other: &ReadTimes) {
        self.read_seconds += other.read_seconds;
        self.parse_seconds += other.parse_seconds;
        self.wait_seconds += other.wait_seconds;
        self.sink_seconds += other.sink_seconds;
    }
}

/// Reads `input` and hands its statements to `sink` in input order, batch by batch.
///
/// `read_bytes` grows with the bytes taken from the file (before decompression).
/// Returns the bad statements skipped (none unless lenient).
#[cfg(test)]
pub fn read_input(
    input: &Input,
    options: &ReadOptions,
    read_bytes: Arc<AtomicU64>,
    sink: &mut dyn FnMut(Batch) -> Result<(), SinkError>,
) -> Result<Skipped, ParseError> {
    read_input_timed(input, options, read_bytes, sink).map(|(skipped, _)| skipped)
}

/// [`read_input`], also saying where the time went.
///
/// An uncompressed N-Triples/N-Quads file is memory-mapped and cut into line-aligned
/// slices in place (no reader thread, no copy); stdin, `.gz` and `.bz2` go through the
/// streaming reader.
#[cfg(test)]
pub fn read_input_timed(
    input: &Input,
    options: &ReadOptions,
    read_bytes: Arc<AtomicU64>,
    sink: &mut dyn FnMut(Batch) -> Result<(), SinkError>,
) -> Result<(Skipped, ReadTimes), ParseError> {
    read_input_with(input, options, read_bytes, &|batch| Ok(batch), sink)
}

/// [`read_input_timed`] with a first step, `process`, run on each batch inside the pool
/// task that parsed it (so in parallel, in no particular order), before its result goes
/// to `sink` in input order on the calling thread. A loader numbers terms in `process`,
/// so that no serial step touches every term; `sink` then only takes the results.
///
/// A `process` error stops reading like a parse error (as [`ParseError::Sink`]); batches
/// of later chunks may have been processed already.
pub fn read_input_with<T: Send>(
    input: &Input,
    options: &ReadOptions,
    read_bytes: Arc<AtomicU64>,
    process: &(dyn Fn(Batch) -> Result<T, SinkError> + Sync),
    sink: &mut dyn FnMut(T) -> Result<(), SinkError>,
) -> Result<(Skipped, ReadTimes), ParseError> {
    let (format, compression) = resolve_format(input, options)?;
    let file = input.name();
    let open_err = |error| ParseError::Open {
        file: file.clone(),
        error,
    };
    if let (Input::Path(p), Compression::None, true) = (input, compression, format.is_line_based())
    {
        let f = File::open(p).map_err(open_err)?;
        let meta = f.metadata().map_err(open_err)?;
        // Only non-empty regular files: a pipe or device cannot be mapped, and an empty
        // mapping is an error on some systems.
        if meta.is_file() && meta.len() > 0 {
            // SAFETY: the map is only read. A file truncated by another process while it
            // is read would fault (SIGBUS), as for any mapped input (the dictionary and
            // trees of a store are mapped the same way); appended bytes are not seen.
            let map = unsafe { memmap2::Mmap::map(&f) }.map_err(open_err)?;
            // Read-ahead helps the page faults of the first touch; advice is a hint.
            let _ = map.advise(memmap2::Advice::Sequential);
            return read_lines_mapped(&map, format, &file, options, &read_bytes, process, sink);
        }
    }
    let raw: Box<dyn Read + Send> = match input {
        Input::Path(p) => Box::new(File::open(p).map_err(open_err)?),
        Input::Stdin => Box::new(io::stdin()),
    };
    let counted = BufReader::with_capacity(
        1 << 20,
        Counted {
            inner: raw,
            read: read_bytes,
        },
    );
    let reader = skip_bom(compression.decoder(counted)).map_err(|error| ParseError::Read {
        file: file.clone(),
        error,
    })?;
    if format.is_line_based() {
        read_lines(reader, format, &file, options, process, sink)
    } else {
        let t0 = Instant::now();
        let mut sink_time = Duration::ZERO;
        let bad = read_sequential(reader, format, &file, options, &mut |batch| {
            let t = Instant::now();
            let r = process(batch).and_then(&mut *sink);
            sink_time += t.elapsed();
            r
        })?;
        // One thread parses and hands on, so everything but the sink is parsing.
        let total = t0.elapsed();
        let times = ReadTimes {
            parse_seconds: total.saturating_sub(sink_time).as_secs_f64(),
            sink_seconds: sink_time.as_secs_f64(),
            ..ReadTimes::default()
        };
        Ok((bad, times))
    }
}

/// Parses one line-aligned chunk whose first line is `first_line` (1-based).
///
/// Fast path first: each line through [`ntfast::scan_line`], or oxttl's lenient parser
/// when the line is not of the plain shape the scanner knows (neither validates IRIs or
/// language tags, the largest cost of strict parsing after lexing), then the chunk's
/// *distinct* terms are
/// checked with [`terms::is_strict_key`], which is far fewer validations than one per term
/// occurrence. Any syntax error, any term that fails the check, or a `\uD8..`-style
/// escape (which only the lenient parser accepts) sends the whole chunk to the strict
/// parser, which reports the first bad line exactly as before (or skips and counts bad
/// lines in lenient mode). So the result is the strict parser's, only cheaper when the
/// chunk is clean.
fn parse_chunk(
    chunk: &[u8],
    format: Format,
    first_line: u64,
    file: &str,
    lenient: bool,
) -> Result<Batch, ParseError> {
    match parse_chunk_fast(chunk, format) {
        Some((batch, _)) => Ok(batch),
        None => parse_chunk_strict(chunk, format, first_line, file, lenient),
    }
}

/// A chunk's result as the consumer takes it: its skipped statements and what `process`
/// made of its batch.
type Parsed<T> = Result<(Skipped, T), ParseError>;

/// Runs `process` on a parsed batch (in the pool task that parsed it).
fn processed<T>(
    batch: Result<Batch, ParseError>,
    process: &(dyn Fn(Batch) -> Result<T, SinkError> + Sync),
) -> Parsed<T> {
    let mut batch = batch?;
    let skipped = std::mem::take(&mut batch.skipped);
    Ok((skipped, process(batch).map_err(ParseError::Sink)?))
}

/// The lenient parse of a chunk and its number of line breaks, or `None` when the strict
/// parser must decide.
fn parse_chunk_fast(chunk: &[u8], format: Format) -> Option<(Batch, u64)> {
    let mut b = BatchBuilder::for_text(chunk.len(), true);
    let quads = format == Format::NQuads;
    let mut start = 0;
    // Counted here, in the pass that finds the lines anyway, for the next chunk's first
    // line number (the mapped reader cuts without counting).
    let mut breaks = 0u64;
    for end in memchr::memchr_iter(b'\n', chunk).chain(std::iter::once(chunk.len())) {
        let line = &chunk[start..end];
        start = end + 1;
        breaks += 1;
        if let Some(scanned) = ntfast::scan_line(line, quads) {
            b.scanned(scanned);
        } else {
            // Not the plain shape (escapes, comments, ...): oxttl reads the line. Surrogate
            // escapes: strict rejects a lone `\uD800`, lenient pairs them up. Only such
            // lines can hold one: a line the scanner accepts holds no `\\`.
            if memchr::memmem::find(line, b"\\uD").is_some()
                || memchr::memmem::find(line, b"\\ud").is_some()
            {
                return None;
            }
            match format {
                Format::NTriples => {
                    for t in NTriplesParser::new().lenient().for_slice(line) {
                        b.triple(t.ok()?.as_ref());
                    }
                }
                Format::NQuads => {
                    for q in NQuadsParser::new().lenient().for_slice(line) {
                        b.quad(q.ok()?.as_ref());
                    }
                }
                Format::Turtle | Format::TriG => unreachable!("not line based"),
            }
        }
        // A key failed the strict check (the builder checks each new one): the strict
        // parser decides, so parsing the rest would be wasted.
        if !b.strict {
            return None;
        }
    }
    // The chained end of the chunk is not a line break.
    Some((b.finish(), breaks - 1))
}

/// The strict parse of a chunk: errors with file, line, column and reason, or skipped
/// and counted. Line by line, so that a bad line (an unterminated literal, say) never
/// takes the next one with it in lenient mode, and positions are exact.
fn parse_chunk_strict(
    chunk: &[u8],
    format: Format,
    first_line: u64,
    file: &str,
    lenient: bool,
) -> Result<Batch, ParseError> {
    let mut b = BatchBuilder::for_text(chunk.len(), false);
    let mut skipped = Skipped::default();
    let mut start = 0;
    for (k, end) in memchr::memchr_iter(b'\n', chunk)
        .chain(std::iter::once(chunk.len()))
        .enumerate()
    {
        let line = &chunk[start..end];
        start = end + 1;
        // oxttl may report several errors for one line: it is one statement skipped.
        let mut line_bad = false;
        let mut on_error = |e: oxttl::TurtleSyntaxError| -> Result<(), ParseError> {
            let bad = BadStatement::new(file, first_line + k as u64, &e, line);
            if !lenient {
                return Err(ParseError::Syntax(bad));
            }
            if !std::mem::replace(&mut line_bad, true) {
                skipped.add(bad);
            }
            Ok(())
        };
        match format {
            Format::NTriples => {
                for t in NTriplesParser::new().for_slice(line) {
                    match t {
                        Ok(t) => b.triple(t.as_ref()),
                        Err(e) => on_error(e)?,
                    }
                }
            }
            Format::NQuads => {
                for q in NQuadsParser::new().for_slice(line) {
                    match q {
                        Ok(q) => b.quad(q.as_ref()),
                        Err(e) => on_error(e)?,
                    }
                }
            }
            Format::Turtle | Format::TriG => unreachable!("not line based"),
        }
    }
    let mut batch = b.finish();
    batch.skipped = skipped;
    Ok(batch)
}

/// Fills `buf` from `reader` up to `want` bytes; returns false at end of input.
pub(super) fn fill(reader: &mut dyn Read, buf: &mut Vec<u8>, want: usize) -> io::Result<bool> {
    while buf.len() < want {
        let old = buf.len();
        buf.resize(want, 0);
        let n = match reader.read(&mut buf[old..]) {
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {
                buf.truncate(old);
                continue;
            }
            Err(e) => {
                buf.truncate(old);
                return Err(e);
            }
        };
        buf.truncate(old + n);
        if n == 0 {
            return Ok(false);
        }
    }
    Ok(true)
}

fn read_lines<T: Send>(
    mut reader: Box<dyn Read + Send>,
    format: Format,
    file: &str,
    options: &ReadOptions,
    process: &(dyn Fn(Batch) -> Result<T, SinkError> + Sync),
    sink: &mut dyn FnMut(T) -> Result<(), SinkError>,
) -> Result<(Skipped, ReadTimes), ParseError> {
    // Enough chunks in flight to keep every thread busy. Memory: up to three groups of
    // `2 × threads × chunk_bytes` of text (one being cut, one queued, one parsing) and up
    // to three groups of batches (one being made, one queued, one being consumed).
    let in_flight = (2 * rayon::current_num_threads().max(1))
        .div_ceil(options.concurrent_inputs.max(1))
        .max(2);
    let chunk_bytes = options.chunk_bytes.max(1 << 12);
    let lenient = options.lenient;
    // Three stages, each on its own thread, so that none waits for another: a reader
    // decompresses and cuts group k+2, a parser parses group k+1 on the rayon pool, and this
    // thread hands group k to the sink, which is sequential (it numbers terms). Before,
    // the reader both decompressed and parsed, so decompression (a single-threaded
    // stream) and parsing took turns.
    type Group = (Vec<(Vec<u8>, u64)>, Option<ParseError>);
    std::thread::scope(|scope| {
        let (chunk_tx, chunk_rx) = std::sync::mpsc::sync_channel::<Group>(1);
        let (batch_tx, batch_rx) = std::sync::mpsc::sync_channel::<Vec<Parsed<T>>>(1);
        // Parsed chunks' text buffers go back to the reader (at most one group's worth), so
        // that it does not allocate and page-fault a fresh `chunk_bytes` buffer per chunk
        // on the one thread every chunk passes through.
        let (free_tx, free_rx) = std::sync::mpsc::sync_channel::<Vec<u8>>(in_flight);
        let reader = scope.spawn(move || {
            // Busy time only: waiting for the parser to take a group is not reading.
            let mut busy = Duration::ZERO;
            let mut t = Instant::now();
            let read_err = |error| ParseError::Read {
                file: file.to_string(),
                error,
            };
            let mut carry: Vec<u8> = Vec::new();
            let mut next_line = 1u64;
            let mut more = true;
            while more {
                // Cut up to `in_flight` chunks, each ending at a line break.
                let mut chunks: Vec<(Vec<u8>, u64)> = Vec::with_capacity(in_flight);
                let mut failed = None;
                while more && chunks.len() < in_flight {
                    let mut buf = free_rx.try_recv().unwrap_or_default();
                    buf.clear();
                    buf.extend_from_slice(&carry);
                    carry.clear();
                    let mut want = chunk_bytes.max(buf.len() + 1);
                    loop {
                        match fill(&mut *reader, &mut buf, want) {
                            Ok(m) => more = m,
                            Err(e) => {
                                failed = Some(read_err(e));
                                more = false;
                            }
                        }
                        if !more {
                            break;
                        }
                        if let Some(cut) = memchr::memrchr(b'\n', &buf) {
                            carry.extend_from_slice(&buf[cut + 1..]);
                            buf.truncate(cut + 1);
                            break;
                        }
                        // One line longer than the chunk: read on until it ends.
                        want *= 2;
                    }
                    if buf.is_empty() {
                        continue;
                    }
                    let lines = memchr::memchr_iter(b'\n', &buf).count() as u64;
                    chunks.push((buf, next_line));
                    next_line += lines;
                }
                let stop = failed.is_some();
                busy += t.elapsed();
                if chunk_tx.send((chunks, failed)).is_err() || stop {
                    break;
                }
                t = Instant::now();
            }
            busy
        });
        let parser = scope.spawn(move || {
            let mut busy = Duration::ZERO;
            for (chunks, failed) in chunk_rx {
                let t = Instant::now();
                let mut batches: Vec<Parsed<T>> = chunks
                    .par_iter()
                    .map(|(chunk, first)| {
                        processed(parse_chunk(chunk, format, *first, file, lenient), process)
                    })
                    .collect();
                // Hand the text back (or free it) before possibly waiting for the consumer.
                for (chunk, _) in chunks {
                    let _ = free_tx.try_send(chunk);
                }
                let stop = failed.is_some() || batches.iter().any(|b| b.is_err());
                batches.extend(failed.map(Err));
                busy += t.elapsed();
                if batch_tx.send(batches).is_err() || stop {
                    break;
                }
            }
            busy
        });
        let mut times = ReadTimes::default();
        let bad = consume(&batch_rx, sink, &mut times)?;
        drop(batch_rx);
        times.read_seconds = join(reader).as_secs_f64();
        times.parse_seconds = join(parser).as_secs_f64();
        Ok((bad, times))
    })
}

/// The result of a scoped thread, its panic passed on.
fn join<T>(handle: std::thread::ScopedJoinHandle<'_, T>) -> T {
    match handle.join() {
        Ok(v) => v,
        Err(panic) => std::panic::resume_unwind(panic),
    }
}

/// Hands every parsed group's batches to `sink` in order, timing the waits and the sink;
/// stops at the first error. Returns the statements skipped.
fn consume<T>(
    batch_rx: &Receiver<Vec<Parsed<T>>>,
    sink: &mut dyn FnMut(T) -> Result<(), SinkError>,
    times: &mut ReadTimes,
) -> Result<Skipped, ParseError> {
    let mut all = Skipped::default();
    let (mut wait, mut in_sink) = (Duration::ZERO, Duration::ZERO);
    let result = loop {
        let t = Instant::now();
        let Ok(group) = batch_rx.recv() else {
            break Ok(std::mem::take(&mut all));
        };
        wait += t.elapsed();
        let t = Instant::now();
        let step = group.into_iter().try_for_each(|parsed| {
            let (skipped, out) = parsed?;
            all.extend(skipped);
            sink(out).map_err(ParseError::Sink)
        });
        in_sink += t.elapsed();
        if let Err(e) = step {
            break Err(e);
        }
    };
    times.wait_seconds = wait.as_secs_f64();
    times.sink_seconds = in_sink.as_secs_f64();
    result
}

/// [`read_lines`] for a whole file in memory (mapped): chunks are line-aligned slices of
/// `text`, cut where the pool can take them, so no thread reads, copies or counts ahead.
///
/// Each chunk is parsed by the fast path, which also counts its lines; chunks are cut
/// without counting, so a chunk's first line number is only known once the chunks before
/// it are parsed. Hence the chunks that need the strict parser (its errors name lines) are
/// parsed in a second, parallel pass of their group, with their exact first lines.
fn read_lines_mapped<T: Send>(
    text: &memmap2::Mmap,
    format: Format,
    file: &str,
    options: &ReadOptions,
    read_bytes: &AtomicU64,
    process: &(dyn Fn(Batch) -> Result<T, SinkError> + Sync),
    sink: &mut dyn FnMut(T) -> Result<(), SinkError>,
) -> Result<(Skipped, ReadTimes), ParseError> {
    // Chunks per fork-join. Each chunk is parsed and numbered in one task; the pool idles
    // at each group's end while the last tasks finish, about half a task per thread, so
    // four tasks a thread (not two) halve that loss. Memory: one group of batches and
    // edge records more than two tasks a thread (~3 MiB a chunk).
    let in_flight = (4 * rayon::current_num_threads().max(1))
        .div_ceil(options.concurrent_inputs.max(1))
        .max(2);
    let chunk_bytes = options.chunk_bytes.max(1 << 12);
    let lenient = options.lenient;
    let page = page_size();
    std::thread::scope(|scope| {
        let (batch_tx, batch_rx) = std::sync::mpsc::sync_channel::<Vec<Parsed<T>>>(1);
        let parser = scope.spawn(move || {
            let mut busy = Duration::ZERO;
            let mut at = if text.starts_with(BOM) { BOM.len() } else { 0 };
            let mut dropped = 0usize;
            let mut next_line = 1u64;
            while at < text.len() {
                let t = Instant::now();
                let mut chunks: Vec<&[u8]> = Vec::with_capacity(in_flight);
                while at < text.len() && chunks.len() < in_flight {
                    let end = chunk_end(text, at, chunk_bytes);
                    chunks.push(&text[at..end]);
                    at = end;
                }
                // Fast path and `process` in one task per chunk (one fork-join per group).
                let fast: Vec<Option<(Parsed<T>, u64)>> = chunks
                    .par_iter()
                    .map(|chunk| {
                        parse_chunk_fast(chunk, format)
                            .map(|(batch, breaks)| (processed(Ok(batch), process), breaks))
                    })
                    .collect();
                // First line of each chunk; chunks the fast path refused count theirs now.
                let mut firsts = Vec::with_capacity(chunks.len());
                for (chunk, f) in chunks.iter().zip(&fast) {
                    firsts.push(next_line);
                    next_line += match f {
                        Some((_, breaks)) => *breaks,
                        None => memchr::memchr_iter(b'\n', chunk).count() as u64,
                    };
                }
                let batches: Vec<Parsed<T>> = fast
                    .into_par_iter()
                    .zip(chunks.par_iter().zip(&firsts))
                    .map(|(f, (chunk, &first))| match f {
                        Some((parsed, _)) => parsed,
                        None => processed(
                            parse_chunk_strict(chunk, format, first, file, lenient),
                            process,
                        ),
                    })
                    .collect();
                read_bytes.fetch_add(
                    chunks.iter().map(|c| c.len() as u64).sum::<u64>(),
                    Ordering::Relaxed,
                );
                // The parsed text is not read again: unmapping its pages keeps the
                // process's resident set (and its peak) from growing by the file's size.
                // File pages stay in the page cache; a page touched again is faulted back
                // in with the same bytes, so dropping is safe for a read-only map.
                let upto = at / page * page;
                if upto > dropped {
                    // SAFETY: a read-only file mapping; see above.
                    let _ = unsafe {
                        text.unchecked_advise_range(
                            memmap2::UncheckedAdvice::DontNeed,
                            dropped,
                            upto - dropped,
                        )
                    };
                    dropped = upto;
                }
                let stop = batches.iter().any(|b| b.is_err());
                busy += t.elapsed();
                if batch_tx.send(batches).is_err() || stop {
                    break;
                }
            }
            busy
        });
        let mut times = ReadTimes::default();
        let bad = consume(&batch_rx, sink, &mut times)?;
        drop(batch_rx);
        times.parse_seconds = join(parser).as_secs_f64();
        Ok((bad, times))
    })
}

/// End of the chunk that starts at `at`: just after the first line break at or beyond
/// `at + chunk_bytes - 1`, or the end of `text`.
fn chunk_end(text: &[u8], at: usize, chunk_bytes: usize) -> usize {
    let from = at + chunk_bytes - 1;
    if from >= text.len() {
        return text.len();
    }
    memchr::memchr(b'\n', &text[from..]).map_or(text.len(), |i| from + i + 1)
}

/// The system's page size (4 KiB when it cannot be read).
fn page_size() -> usize {
    // SAFETY: sysconf has no preconditions.
    let size = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    if size > 0 {
        size as usize
    } else {
        4096
    }
}

/// Statements per batch from the sequential parsers.
const SEQUENTIAL_BATCH: usize = 1 << 16;

fn read_sequential(
    reader: Box<dyn Read + Send>,
    format: Format,
    file: &str,
    options: &ReadOptions,
    sink: &mut dyn FnMut(Batch) -> Result<(), SinkError>,
) -> Result<Skipped, ParseError> {
    let mut bad = Skipped::default();
    let mut builder = BatchBuilder::default();
    let on_error = |e: TurtleParseError, bad: &mut Skipped| -> Result<(), ParseError> {
        match e {
            TurtleParseError::Io(error) => Err(ParseError::Read {
                file: file.to_string(),
                error,
            }),
            TurtleParseError::Syntax(e) => {
                // The whole input is one text here, so no line is at hand for a better
                // reason than oxttl's.
                let bad_statement = BadStatement::new(file, 1, &e, b"");
                if options.lenient {
                    bad.add(bad_statement);
                    Ok(())
                } else {
                    Err(ParseError::Syntax(bad_statement))
                }
            }
        }
    };
    let mut flush = |builder: &mut BatchBuilder, force: bool| -> Result<(), ParseError> {
        if force || builder.batch.quads.len() >= SEQUENTIAL_BATCH {
            let batch = std::mem::take(builder).finish();
            sink(batch).map_err(ParseError::Sink)?;
        }
        Ok(())
    };
    match format {
        Format::Turtle => {
            for t in TurtleParser::new().for_reader(reader) {
                match t {
                    Ok(t) => builder.triple(t.as_ref()),
                    Err(e) => on_error(e, &mut bad)?,
                }
                flush(&mut builder, false)?;
            }
        }
        Format::TriG => {
            for q in TriGParser::new().for_reader(reader) {
                match q {
                    Ok(q) => builder.quad(q.as_ref()),
                    Err(e) => on_error(e, &mut bad)?,
                }
                flush(&mut builder, false)?;
            }
        }
        Format::NTriples | Format::NQuads => unreachable!("line based"),
    }
    flush(&mut builder, true)?;
    Ok(bad)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unterminated_literals_are_named_with_their_column() {
        assert_eq!(unterminated_literal(b"<a> <p> \"abc .", 0), Some(9));
        assert_eq!(unterminated_literal(b"<a> <p> \"a\\\"b\" .", 0), None);
        assert_eq!(unterminated_literal(b"<a> <p> <x\"y> .", 0), None);
        assert_eq!(unterminated_literal(b"<a> <p> <b> . # \"", 0), None);
        assert_eq!(unterminated_literal(b"ok\n<a> <p> \"x", 1), Some(9));
    }

    #[test]
    fn a_byte_order_mark_is_skipped() {
        for (i, gzip) in [false, true].into_iter().enumerate() {
            let text = b"\xEF\xBB\xBF<http://e/a> <http://e/p> <http://e/b> .\n";
            let path = std::env::temp_dir().join(format!(
                "k2rpq-bom-{i}-{}.nt{}",
                std::process::id(),
                if gzip { ".gz" } else { "" }
            ));
            if gzip {
                let mut enc = flate2::write::GzEncoder::new(Vec::new(), Default::default());
                io::Write::write_all(&mut enc, text).unwrap();
                std::fs::write(&path, enc.finish().unwrap()).unwrap();
            } else {
                std::fs::write(&path, text).unwrap();
            }
            let (objects, skipped) = read_path(&path, false).unwrap();
            std::fs::remove_file(&path).unwrap();
            assert_eq!((objects, skipped), (vec!["<http://e/b>".to_owned()], 0));
        }
    }

    #[test]
    fn guesses_formats_from_names() {
        let g = |s: &str| Format::guess(Path::new(s));
        assert_eq!(g("a.nt"), Some((Format::NTriples, Compression::None)));
        assert_eq!(g("x/a.NQ.gz"), Some((Format::NQuads, Compression::Gzip)));
        assert_eq!(g("a.ttl.bz2"), Some((Format::Turtle, Compression::Bzip2)));
        assert_eq!(g("a.trig"), Some((Format::TriG, Compression::None)));
        assert_eq!(g("a.txt"), None);
        assert_eq!(g("nt"), None);
        let c = |s: &str| Compression::of_path(Path::new(s));
        assert_eq!(c("x/a.NT.GZ"), Compression::Gzip);
        assert_eq!(c("edges.tsv.bz2"), Compression::Bzip2);
        assert_eq!(c("a.gz/b.nt"), Compression::None);
    }

    #[test]
    fn small_chunks_keep_lines_and_order() {
        let mut text = String::new();
        for i in 0..500 {
            text.push_str(&format!("<http://e/{i}> <http://p> \"v{i}\" .\n"));
        }
        let seen: Vec<String> = loaded_keys(&text, "order", "nt")
            .iter()
            .map(|k| terms::decode(&k[2]).unwrap().to_string())
            .collect();
        let expect: Vec<String> = (0..500).map(|i| format!("<http://e/{i}>")).collect();
        assert_eq!(seen, expect);
    }

    /// Reads `text` as N-Triples in 4 KiB chunks: the subjects' terms, or the error.
    fn read_nt(text: &str, lenient: bool, tag: &str) -> Result<(Vec<String>, u64), ParseError> {
        let path = std::env::temp_dir().join(format!("k2rpq-{tag}-{}.nt", std::process::id()));
        std::fs::write(&path, text).unwrap();
        let options = ReadOptions {
            chunk_bytes: 4096,
            lenient,
            ..ReadOptions::default()
        };
        let mut objects = Vec::new();
        let result = read_input(
            &Input::Path(path.clone()),
            &options,
            Arc::default(),
            &mut |b| {
                for q in &b.quads {
                    objects.push(terms::decode(b.key(q[3] as usize)).unwrap().to_string());
                }
                Ok(())
            },
        );
        std::fs::remove_file(&path).unwrap();
        result.map(|skipped| (objects, skipped.count))
    }

    /// 300 good lines with `bad` as line 201.
    fn with_line_201(bad: &str) -> String {
        let mut text = String::new();
        for i in 1..=300 {
            if i == 201 {
                text.push_str(bad);
            } else {
                text.push_str(&format!("<http://e/{i}> <http://p> \"v{i}\" .\n"));
            }
        }
        text
    }

    #[test]
    fn what_only_the_lenient_parser_accepts_is_still_reported() {
        // Each is accepted by oxttl's lenient lexer and caught by the distinct-term check
        // (or the surrogate scan), then reported by the strict re-parse of its chunk.
        for (i, bad) in [
            "<http://e/s> <http://p> <relative> .\n",
            "<http://e/s> <http://p> \"x\"@toolonglangtag .\n",
            "<http://e/s> <http://p> \"x\"^^<not-absolute> .\n",
            "<http://e/s> <http://p> \"\\uD83D\\uDE00\" .\n",
            // The scanner takes an IRI up to the next `>`: the distinct-term check
            // catches the bytes `IRIREF` forbids.
            "<http://e/s> <http://p> <http://e/a b> .\n",
            "<http://e/s <http://p> <http://e/o> <http://e/x> .\n",
            "<http://e/s> <http://p> <http://e/{o}> .\n",
            "<http://e/s> <http://p> \"x\"^^<http://e/d\tt> .\n",
            "<http://e/s> <http://p> <http://e/o\"> .\n",
            "<http://e/s> <http://e/p<q> <http://e/o> .\n",
        ]
        .into_iter()
        .enumerate()
        {
            let text = with_line_201(bad);
            match read_nt(&text, false, &format!("strict{i}")) {
                Err(ParseError::Syntax(b)) => {
                    assert_eq!(b.line, 201, "{bad}: {}", b.reason);
                    assert!(b.column >= 1 && !b.reason.is_empty());
                }
                other => panic!("{bad}: expected a syntax error, got {other:?}"),
            }
            let (objects, bad_count) = read_nt(&text, true, &format!("lenient{i}")).unwrap();
            assert_eq!((objects.len(), bad_count), (299, 1), "{bad}");
        }
    }

    #[test]
    fn bytes_that_are_not_utf8_are_reported_at_their_line() {
        // The scanner checks no UTF-8; the distinct-term check does, for IRIs, literal
        // values and datatypes alike.
        for (i, bad) in [
            b"<http://e/s> <http://p> <http://e/\xff> .\n".as_slice(),
            b"<http://e/s> <http://p> \"a\xfeb\" .\n",
            b"<http://e/\xc3> <http://p> \"x\"@en .\n",
            b"<http://e/s> <http://p> \"1\"^^<http://e/\xe9> .\n",
        ]
        .into_iter()
        .enumerate()
        {
            let text = with_line_201("");
            let mut lines: Vec<&[u8]> = text.as_bytes().split_inclusive(|&c| c == b'\n').collect();
            lines.insert(200, bad);
            let bytes = lines.concat();
            let path =
                std::env::temp_dir().join(format!("k2rpq-utf8-{i}-{}.nt", std::process::id()));
            std::fs::write(&path, &bytes).unwrap();
            match read_path(&path, false) {
                Err(ParseError::Syntax(b)) => assert_eq!(b.line, 201, "{bad:?}"),
                other => panic!("{bad:?}: expected a syntax error, got {other:?}"),
            }
            // Lenient: exactly the bad line is skipped (lines are parsed one by one once
            // a chunk has an error, so a bad byte in a string takes no other line along).
            let (objects, skipped) = read_path(&path, true).unwrap();
            assert_eq!((objects.len(), skipped), (299, 1), "{bad:?}");
            std::fs::remove_file(&path).unwrap();
        }
    }

    /// Every statement of `text` as `[g, p, s, o]` keys, read through `read_input` in
    /// 4 KiB chunks (so both the scanner and the per-line oxttl fallback run).
    fn loaded_keys(text: &str, tag: &str, ext: &str) -> Vec<[Vec<u8>; 4]> {
        let path = std::env::temp_dir().join(format!("k2rpq-{tag}-{}.{ext}", std::process::id()));
        std::fs::write(&path, text).unwrap();
        let options = ReadOptions {
            chunk_bytes: 4096,
            ..ReadOptions::default()
        };
        let mut out = Vec::new();
        read_input(
            &Input::Path(path.clone()),
            &options,
            Arc::default(),
            &mut |b| {
                for q in &b.quads {
                    let k = |i: u32| {
                        if i == DEFAULT_GRAPH {
                            Vec::new()
                        } else {
                            b.key(i as usize).to_vec()
                        }
                    };
                    out.push([k(q[0]), k(q[1]), k(q[2]), k(q[3])]);
                }
                Ok(())
            },
        )
        .unwrap();
        std::fs::remove_file(&path).unwrap();
        out
    }

    #[test]
    fn mixed_plain_and_odd_lines_load_as_oxttl_reads_them() {
        let odd = [
            "<http://e/s{i}> <http://e/p> \"tab\\tquote\\\" {i}\" .",
            "# a comment {i}",
            "",
            "<http://e/s{i}> <http://e/p> \"é\\u00e9{i}\"@EN-gb .  # trailing comment",
            "_:b{i}.x <http://e/p> _:c{i} .",
            "<http://e/s{i}> <http://e/p> <http://e/\\u0041{i}> .\r",
            "<http://e/s{i}><http://e/p>\"x{i}\"^^<http://www.w3.org/2001/XMLSchema#string>.",
        ];
        let mut nt = String::new();
        let mut nq = String::new();
        for i in 0..600 {
            // Predicates of one length and last two bytes share a slot of the
            // builder's predicate cache.
            let plain = format!(
                "<http://e/s{i}> <http://{}/p{}x> \"v{i}\"@en .\n",
                ["e", "f"][i % 2],
                i % 7
            );
            nt.push_str(&plain);
            nq.push_str(&plain);
            nq.push_str(&format!(
                "_:s{i} <http://e/p> <http://e/o{i}> <http://e/g{}> .\n",
                i % 3
            ));
            let line = odd[i % odd.len()].replace("{i}", &i.to_string());
            nt.push_str(&line);
            nt.push('\n');
            nq.push_str(&line);
            nq.push('\n');
        }
        let graph_key = |g: oxrdf::GraphNameRef<'_>| match g {
            oxrdf::GraphNameRef::DefaultGraph => Vec::new(),
            oxrdf::GraphNameRef::NamedNode(n) => terms::encode(n.into()),
            oxrdf::GraphNameRef::BlankNode(b) => terms::encode(b.into()),
        };
        let expect_nt: Vec<[Vec<u8>; 4]> = NTriplesParser::new()
            .for_slice(nt.as_bytes())
            .map(|t| {
                let t = t.unwrap();
                [
                    Vec::new(),
                    terms::encode(t.predicate.as_ref().into()),
                    terms::encode(t.subject.as_ref().into()),
                    terms::encode(t.object.as_ref()),
                ]
            })
            .collect();
        let expect_nq: Vec<[Vec<u8>; 4]> = NQuadsParser::new()
            .for_slice(nq.as_bytes())
            .map(|q| {
                let q = q.unwrap();
                [
                    graph_key(q.graph_name.as_ref()),
                    terms::encode(q.predicate.as_ref().into()),
                    terms::encode(q.subject.as_ref().into()),
                    terms::encode(q.object.as_ref()),
                ]
            })
            .collect();
        assert_eq!(
            expect_nt.len(),
            600 + 428,
            "two odd lines in seven hold no statement"
        );
        assert_eq!(loaded_keys(&nt, "mixed", "nt"), expect_nt);
        assert_eq!(loaded_keys(&nq, "mixed", "nq"), expect_nq);
    }

    /// Objects of every statement of `path` read in 4 KiB chunks, or the error.
    fn read_path(path: &Path, lenient: bool) -> Result<(Vec<String>, u64), ParseError> {
        let options = ReadOptions {
            chunk_bytes: 4096,
            lenient,
            ..ReadOptions::default()
        };
        let mut objects = Vec::new();
        let read = Arc::new(AtomicU64::new(0));
        let result = read_input(&Input::Path(path.to_path_buf()), &options, read, &mut |b| {
            for q in &b.quads {
                objects.push(terms::decode(b.key(q[3] as usize)).unwrap().to_string());
            }
            Ok(())
        });
        result.map(|skipped| (objects, skipped.count))
    }

    #[test]
    fn mapped_and_streamed_files_give_the_same_statements_and_error_lines() {
        // 3000 lines in ~30 chunks of 4 KiB; some chunks hold an escaped line break (they go
        // to the strict parser, whose line count the mapped reader must take over), the
        // last line has no line break, and `bad` (when given) is line 2501: the error must
        // name it whether chunks before it took the fast or the strict path.
        let text = |bad: Option<&str>| {
            let mut t = String::new();
            for i in 1..=3000 {
                match (i, bad) {
                    (2501, Some(b)) => t.push_str(b),
                    _ if i % 700 == 0 => {
                        t.push_str(&format!("<http://e/{i}> <http://p> \"a\\nb{i}\" .\n"))
                    }
                    _ => t.push_str(&format!("<http://e/{i}> <http://p> \"v{i}\" .\n")),
                }
            }
            t.pop();
            t
        };
        let dir = std::env::temp_dir();
        let id = std::process::id();
        for (k, bad) in [None, Some("<http://e/s> <http://p> <relative> .\n")]
            .into_iter()
            .enumerate()
        {
            let t = text(bad);
            let plain = dir.join(format!("k2rpq-mapped-{k}-{id}.nt"));
            let gz = dir.join(format!("k2rpq-streamed-{k}-{id}.nt.gz"));
            std::fs::write(&plain, &t).unwrap();
            let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
            std::io::Write::write_all(&mut enc, t.as_bytes()).unwrap();
            std::fs::write(&gz, enc.finish().unwrap()).unwrap();
            for lenient in [false, true] {
                let (m, s) = (read_path(&plain, lenient), read_path(&gz, lenient));
                match (bad, lenient, &m, &s) {
                    (None, _, Ok(a), Ok(b)) | (Some(_), true, Ok(a), Ok(b)) => {
                        assert_eq!(a, b);
                        let expect = 3000 - bad.map_or(0, |_| 1);
                        assert_eq!((a.0.len(), a.1), (expect, 3000 - expect as u64));
                        assert_eq!(a.0[699], "\"a\\nb700\"");
                        assert_eq!(a.0.last().unwrap(), "\"v3000\"");
                    }
                    (Some(_), false, Err(ParseError::Syntax(a)), Err(ParseError::Syntax(b))) => {
                        assert_eq!((a.line, b.line), (2501, 2501))
                    }
                    _ => panic!("case {k} lenient {lenient}: {m:?} / {s:?}"),
                }
            }
            std::fs::remove_file(&plain).unwrap();
            std::fs::remove_file(&gz).unwrap();
        }
    }

    #[test]
    fn chunks_end_after_a_line_break_or_at_the_end() {
        let text = b"aaaa\nbb\ncccccc\nd";
        assert_eq!(chunk_end(text, 0, 1), 5);
        assert_eq!(chunk_end(text, 0, 5), 5);
        assert_eq!(chunk_end(text, 0, 6), 8);
        assert_eq!(chunk_end(text, 5, 4), 15);
        assert_eq!(chunk_end(text, 15, 1), 16);
        assert_eq!(chunk_end(text, 8, 100), 16);
    }

    #[test]
    fn escaped_line_breaks_load_through_the_strict_path() {
        let text = with_line_201("<http://e/s> <http://p> \"a\\nb\" .\n");
        let (objects, bad) = read_nt(&text, false, "escaped").unwrap();
        assert_eq!((objects.len(), bad), (300, 0));
        assert_eq!(objects[200], "\"a\\nb\"");
        assert_eq!(objects[0], "\"v1\"");
    }
}
