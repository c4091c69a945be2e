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
use std::io::{self, BufReader, Read};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

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

impl Format {
    /// The format named `name` (`nt`, `ntriples`, `n-triples`, `nq`, `ttl`, `turtle`, `trig`, ...).
    pub fn from_name(name: &str) -> Option<Format> {
        Some(match name.to_ascii_lowercase().as_str() {
            "nt" | "ntriples" | "n-triples" => Format::NTriples,
            "nq" | "nquads" | "n-quads" => Format::NQuads,
            "ttl" | "turtle" => Format::Turtle,
            "trig" => Format::TriG,
            _ => return None,
        })
    }

    /// Format and compression from a file name such as `dump.nt.gz`.
    pub fn guess(path: &Path) -> Option<(Format, Compression)> {
        let name = path.file_name()?.to_str()?.to_ascii_lowercase();
        let (stem, compression) = if let Some(s) = name.strip_suffix(".gz") {
            (s, Compression::Gzip)
        } else if let Some(s) = name.strip_suffix(".bz2") {
            (s, Compression::Bzip2)
        } else {
            (name.as_str(), Compression::None)
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
pub enum ParseError {
    /// A statement that does not parse (the default mode stops at the first one).
    #[error("{file}:{line}: {reason}")]
    Syntax {
        /// Input name.
        file: String,
        /// 1-based line number.
        line: u64,
        /// What the parser objected to.
        reason: String,
    },
    /// The input does not exist or cannot be opened.
    #[error("cannot open {file}: {source}")]
    Open {
        /// Input name.
        file: String,
        /// The OS error.
        source: io::Error,
    },
    /// Reading or decompressing failed part way.
    #[error("cannot read {file}: {source}")]
    Read {
        /// Input name.
        file: String,
        /// The I/O or decompression error.
        source: io::Error,
    },
    /// The format could not be told from the name and none was given.
    #[error("{file}: unknown RDF format (use .nt .nq .ttl .trig, optionally .gz or .bz2, or pass --format)")]
    UnknownFormat {
        /// Input name.
        file: String,
    },
    /// The consumer of the batches failed (for example, the edge spill file).
    #[error("{0}")]
    Sink(String),
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
    /// Lines skipped in lenient mode.
    pub bad: u64,
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
/// hashed twice.
#[derive(Default)]
struct BatchBuilder {
    batch: Batch,
    index: HashTable<u32>,
    scratch: Vec<u8>,
}

impl BatchBuilder {
    /// A builder sized for about `text_bytes` of N-Triples (~100 bytes and at most three new
    /// terms a line), so that neither the table nor the buffers grow by copying.
    fn for_text(text_bytes: usize) -> Self {
        let terms = text_bytes / 64;
        BatchBuilder {
            batch: Batch {
                bytes: Vec::with_capacity(text_bytes / 2),
                ends: Vec::with_capacity(terms),
                hashes: Vec::with_capacity(terms),
                quads: Vec::with_capacity(text_bytes / 80),
                bad: 0,
            },
            index: HashTable::with_capacity(terms),
            scratch: Vec::new(),
        }
    }

    fn term(&mut self, term: TermRef<'_>) -> u32 {
        self.scratch.clear();
        terms::encode_into(term, &mut self.scratch);
        self.intern_scratch()
    }

    fn raw(&mut self, term: RawTerm<'_>) -> u32 {
        self.scratch.clear();
        term.encode_into(&mut self.scratch);
        self.intern_scratch()
    }

    /// The index of the key in `scratch`, added to the batch if new.
    fn intern_scratch(&mut self) -> u32 {
        let hash = terms::hash_key(&self.scratch);
        let Batch {
            bytes,
            ends,
            hashes,
            ..
        } = &mut self.batch;
        let key = |i: u32| {
            let i = i as usize;
            let start = if i == 0 { 0 } else { ends[i - 1] };
            &bytes[start..ends[i]]
        };
        if let Some(&i) = self
            .index
            .find(hash, |&i| key(i) == self.scratch.as_slice())
        {
            return i;
        }
        let i = ends.len() as u32;
        bytes.extend_from_slice(&self.scratch);
        ends.push(bytes.len());
        hashes.push(hash);
        self.index.insert_unique(hash, i, |&j| hashes[j as usize]);
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
            let p = self.raw(predicate);
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
}

impl Default for ReadOptions {
    fn default() -> Self {
        ReadOptions {
            format: None,
            lenient: false,
            chunk_bytes: 4 << 20,
        }
    }
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

/// Reads `input` and hands its statements to `sink` in input order, batch by batch.
///
/// `read_bytes` grows with the bytes taken from the file (before decompression).
/// Returns the number of bad statements skipped (always 0 unless lenient).
pub fn read_input(
    input: &Input,
    options: &ReadOptions,
    read_bytes: Arc<AtomicU64>,
    sink: &mut dyn FnMut(Batch) -> Result<(), String>,
) -> Result<u64, ParseError> {
    let (format, compression) = resolve_format(input, options)?;
    let file = input.name();
    let raw: Box<dyn Read + Send> = match input {
        Input::Path(p) => Box::new(File::open(p).map_err(|source| ParseError::Open {
            file: file.clone(),
            source,
        })?),
        Input::Stdin => Box::new(io::stdin()),
    };
    let counted = BufReader::with_capacity(
        1 << 20,
        Counted {
            inner: raw,
            read: read_bytes,
        },
    );
    let reader: Box<dyn Read + Send> = match compression {
        Compression::None => Box::new(counted),
        Compression::Gzip => Box::new(flate2::bufread::MultiGzDecoder::new(counted)),
        Compression::Bzip2 => Box::new(bzip2::bufread::MultiBzDecoder::new(counted)),
    };
    if format.is_line_based() {
        read_lines(reader, format, &file, options, sink)
    } else {
        read_sequential(reader, format, &file, options, sink)
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
        Some(batch) => Ok(batch),
        None => parse_chunk_strict(chunk, format, first_line, file, lenient),
    }
}

/// The lenient parse of a chunk, or `None` when the strict parser must decide.
fn parse_chunk_fast(chunk: &[u8], format: Format) -> Option<Batch> {
    // Surrogate escapes: strict rejects a lone `\uD800`, lenient pairs them up.
    if memchr::memmem::find(chunk, b"\\uD").is_some()
        || memchr::memmem::find(chunk, b"\\ud").is_some()
    {
        return None;
    }
    let mut b = BatchBuilder::for_text(chunk.len());
    let quads = format == Format::NQuads;
    let mut start = 0;
    for end in memchr::memchr_iter(b'\n', chunk).chain(std::iter::once(chunk.len())) {
        let line = &chunk[start..end];
        start = end + 1;
        if let Some(scanned) = ntfast::scan_line(line, quads) {
            b.scanned(scanned);
            continue;
        }
        // Not the plain shape (escapes, comments, ...): oxttl reads the line.
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
    let batch = b.finish();
    (0..batch.term_count())
        .all(|i| terms::is_strict_key(batch.key(i)))
        .then_some(batch)
}

/// The strict parse of a chunk: errors with file, line and reason, or skipped and counted.
fn parse_chunk_strict(
    chunk: &[u8],
    format: Format,
    first_line: u64,
    file: &str,
    lenient: bool,
) -> Result<Batch, ParseError> {
    let mut b = BatchBuilder::for_text(chunk.len());
    let mut bad = 0;
    let mut on_error = |e: oxttl::TurtleSyntaxError| -> Result<(), ParseError> {
        if lenient {
            bad += 1;
            Ok(())
        } else {
            Err(ParseError::Syntax {
                file: file.to_string(),
                line: first_line + e.location().start.line,
                reason: e.message().to_string(),
            })
        }
    };
    match format {
        Format::NTriples => {
            for t in NTriplesParser::new().for_slice(chunk) {
                match t {
                    Ok(t) => b.triple(t.as_ref()),
                    Err(e) => on_error(e)?,
                }
            }
        }
        Format::NQuads => {
            for q in NQuadsParser::new().for_slice(chunk) {
                match q {
                    Ok(q) => b.quad(q.as_ref()),
                    Err(e) => on_error(e)?,
                }
            }
        }
        Format::Turtle | Format::TriG => unreachable!("not line based"),
    }
    let mut batch = b.finish();
    batch.bad = bad;
    Ok(batch)
}

/// Fills `buf` from `reader` up to `want` bytes; returns false at end of input.
fn fill(reader: &mut dyn Read, buf: &mut Vec<u8>, want: usize) -> io::Result<bool> {
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

fn read_lines(
    mut reader: Box<dyn Read + Send>,
    format: Format,
    file: &str,
    options: &ReadOptions,
    sink: &mut dyn FnMut(Batch) -> Result<(), String>,
) -> Result<u64, ParseError> {
    // Enough chunks in flight to keep every thread busy. Memory: up to three groups of
    // `2 × threads × chunk_bytes` of text (one being cut, one queued, one parsing) and up
    // to three groups of batches (one being made, one queued, one being consumed).
    let in_flight = 2 * rayon::current_num_threads().max(1);
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
        let (batch_tx, batch_rx) =
            std::sync::mpsc::sync_channel::<Vec<Result<Batch, ParseError>>>(1);
        // Parsed chunks' text buffers go back to the reader (at most one group's worth), so
        // that it does not allocate and page-fault a fresh `chunk_bytes` buffer per chunk
        // on the one thread every chunk passes through.
        let (free_tx, free_rx) = std::sync::mpsc::sync_channel::<Vec<u8>>(in_flight);
        scope.spawn(move || {
            let read_err = |source| ParseError::Read {
                file: file.to_string(),
                source,
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
                if chunk_tx.send((chunks, failed)).is_err() || stop {
                    break;
                }
            }
        });
        scope.spawn(move || {
            for (chunks, failed) in chunk_rx {
                let mut batches: Vec<Result<Batch, ParseError>> = chunks
                    .par_iter()
                    .map(|(chunk, first)| parse_chunk(chunk, format, *first, file, lenient))
                    .collect();
                // Hand the text back (or free it) before possibly waiting for the consumer.
                for (chunk, _) in chunks {
                    let _ = free_tx.try_send(chunk);
                }
                let stop = failed.is_some() || batches.iter().any(|b| b.is_err());
                batches.extend(failed.map(Err));
                if batch_tx.send(batches).is_err() || stop {
                    break;
                }
            }
        });
        let mut bad = 0u64;
        for group in batch_rx {
            for batch in group {
                let batch = batch?;
                bad += batch.bad;
                sink(batch).map_err(ParseError::Sink)?;
            }
        }
        Ok(bad)
    })
}

/// Statements per batch from the sequential parsers.
const SEQUENTIAL_BATCH: usize = 1 << 16;

fn read_sequential(
    reader: Box<dyn Read + Send>,
    format: Format,
    file: &str,
    options: &ReadOptions,
    sink: &mut dyn FnMut(Batch) -> Result<(), String>,
) -> Result<u64, ParseError> {
    let mut bad = 0u64;
    let mut builder = BatchBuilder::default();
    let on_error = |e: TurtleParseError, bad: &mut u64| -> Result<(), ParseError> {
        match e {
            TurtleParseError::Io(source) => Err(ParseError::Read {
                file: file.to_string(),
                source,
            }),
            TurtleParseError::Syntax(_) if options.lenient => {
                *bad += 1;
                Ok(())
            }
            TurtleParseError::Syntax(e) => Err(ParseError::Syntax {
                file: file.to_string(),
                line: e.location().start.line + 1,
                reason: e.message().to_string(),
            }),
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
    fn guesses_formats_from_names() {
        let g = |s: &str| Format::guess(Path::new(s));
        assert_eq!(g("a.nt"), Some((Format::NTriples, Compression::None)));
        assert_eq!(g("x/a.NQ.gz"), Some((Format::NQuads, Compression::Gzip)));
        assert_eq!(g("a.ttl.bz2"), Some((Format::Turtle, Compression::Bzip2)));
        assert_eq!(g("a.trig"), Some((Format::TriG, Compression::None)));
        assert_eq!(g("a.txt"), None);
        assert_eq!(g("nt"), None);
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
        result.map(|bad| (objects, bad))
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
        ]
        .into_iter()
        .enumerate()
        {
            let text = with_line_201(bad);
            match read_nt(&text, false, &format!("strict{i}")) {
                Err(ParseError::Syntax { line, reason, .. }) => {
                    assert_eq!(line, 201, "{bad}: {reason}");
                    assert!(!reason.is_empty());
                }
                other => panic!("{bad}: expected a syntax error, got {other:?}"),
            }
            let (objects, bad_count) = read_nt(&text, true, &format!("lenient{i}")).unwrap();
            assert_eq!((objects.len(), bad_count), (299, 1), "{bad}");
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
            let plain = format!("<http://e/s{i}> <http://e/p{}> \"v{i}\"@en .\n", i % 7);
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

    #[test]
    fn escaped_line_breaks_load_through_the_strict_path() {
        let text = with_line_201("<http://e/s> <http://p> \"a\\nb\" .\n");
        let (objects, bad) = read_nt(&text, false, "escaped").unwrap();
        assert_eq!((objects.len(), bad), (300, 0));
        assert_eq!(objects[200], "\"a\\nb\"");
        assert_eq!(objects[0], "\"v1\"");
    }
}
