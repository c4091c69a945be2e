//! Writing an answer as it comes: rows are serialized one by one into a buffer that goes
//! to the response body in chunks through a bounded channel, so a large answer is never
//! held whole and a slow client slows the writer instead of filling memory.
//!
//! What a client sees of a cut answer is described in the [module](super) docs.

use std::io::{self, Write};
use std::sync::{Arc, Mutex};

use axum::body::Bytes;
use oxrdfio::{RdfFormat, RdfSerializer};
use sparesults::{QueryResultsFormat, QueryResultsSerializer, WriterSolutionsSerializer};
use tokio::sync::mpsc;

use super::evaluate::{Answer, Control, EvaluationError, Rows, Triples};
use super::json::JsonSolutionsWriter;
use super::negotiate::Format;

/// Bytes gathered before a chunk goes to the client.
const CHUNK_BYTES: usize = 32 * 1024;

/// A piece of the response body, or the error that aborts it.
pub type Chunk = Result<Bytes, io::Error>;

/// Why an answer was cut.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Cut {
    /// The row limit was reached and more rows followed.
    Limit(u64),
    /// The deadline passed.
    Timeout,
    /// The evaluation failed after the first row.
    Error(String),
}

impl Cut {
    /// Its name in a `cut` note.
    pub fn reason(&self) -> &'static str {
        match self {
            Cut::Limit(_) => "limit",
            Cut::Timeout => "timeout",
            Cut::Error(_) => "error",
        }
    }

    /// A sentence for people.
    pub fn message(&self, timeout_s: f64) -> String {
        match self {
            Cut::Limit(n) => format!("the answer was cut at the endpoint's limit of {n} rows"),
            Cut::Timeout => {
                format!("the answer was cut at the endpoint's timeout of {timeout_s} s")
            }
            Cut::Error(e) => format!("the evaluation failed: {e}"),
        }
    }
}

/// What was sent, for the request log: rows (triples, or 1 for a boolean), and the cut.
#[derive(Clone, Debug, Default)]
pub struct Sent {
    /// Rows written.
    pub rows: u64,
    /// Why the answer is incomplete, if it is.
    pub cut: Option<Cut>,
    /// The client left before the end.
    pub abandoned: bool,
}

/// Shared between the writer and the request log.
pub type SentRecord = Arc<Mutex<Sent>>;

/// Bytes a [`ChunkWriter`] keeps back when it sends a chunk, so that the end of a
/// finished document is still in its buffer (to add the JSON `cut` note after it).
const TAIL_BYTES: usize = 16;

/// A [`Write`] that gathers bytes and sends them as chunks on a channel, keeping the last
/// [`TAIL_BYTES`] back until [`ChunkWriter::send_buffer`].
struct ChunkWriter {
    buffer: Vec<u8>,
    sender: mpsc::Sender<Chunk>,
    /// The receiver was dropped: the client left.
    gone: bool,
}

impl Write for ChunkWriter {
    fn write(&mut self, data: &[u8]) -> io::Result<usize> {
        if self.gone {
            return Err(io::ErrorKind::BrokenPipe.into());
        }
        self.buffer.extend_from_slice(data);
        if self.buffer.len() >= CHUNK_BYTES {
            let tail = self.buffer.split_off(self.buffer.len() - TAIL_BYTES);
            let chunk = Bytes::from(std::mem::replace(&mut self.buffer, tail));
            if self.sender.blocking_send(Ok(chunk)).is_err() {
                self.gone = true;
                return Err(io::ErrorKind::BrokenPipe.into());
            }
        }
        Ok(data.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

impl ChunkWriter {
    /// Sends all that the buffer holds.
    fn send_buffer(&mut self) {
        if self.buffer.is_empty() || self.gone {
            return;
        }
        let chunk = Bytes::from(std::mem::take(&mut self.buffer));
        self.gone = self.sender.blocking_send(Ok(chunk)).is_err();
    }

    /// Sends what is left, then the error that ends the body without its last chunk.
    fn abort(&mut self, why: &str) {
        self.send_buffer();
        if !self.gone {
            let _ = self
                .sender
                .blocking_send(Err(io::Error::other(why.to_owned())));
        }
    }
}

/// Writes `answer` in `format` to `sender`, cutting it at the row limit or the deadline
/// of `control`. Records what was sent in `sent`. Runs on a blocking thread.
pub fn write_answer(
    answer: Answer,
    format: Format,
    control: &Control,
    timeout_s: f64,
    sender: mpsc::Sender<Chunk>,
    sent: &SentRecord,
) {
    let mut out = ChunkWriter {
        buffer: Vec::with_capacity(CHUNK_BYTES + 4096),
        sender,
        gone: false,
    };
    let result = match (answer, format) {
        (Answer::Boolean(b), Format::Results(f)) => {
            sent.lock().unwrap().rows = 1;
            QueryResultsSerializer::from_format(f)
                .serialize_boolean_to_writer(&mut out, b)
                .map(|_| None)
        }
        (Answer::Solutions { variables, rows }, Format::Results(f)) => {
            write_solutions(f, variables, rows, control, &mut out, sent)
        }
        (Answer::Graph(triples), Format::Rdf(f)) => {
            write_triples(f, triples, control, &mut out, sent)
        }
        _ => Err(io::Error::other(
            "the answer's kind does not fit the format",
        )),
    };
    match result {
        _ if out.gone => {}
        Ok(None) => out.send_buffer(),
        Ok(Some(cut)) => {
            let message = cut.message(timeout_s);
            match format {
                Format::Results(QueryResultsFormat::Json) => {
                    add_json_note(&mut out.buffer, &cut, sent.lock().unwrap().rows, &message);
                    out.send_buffer();
                }
                Format::Results(QueryResultsFormat::Xml) => {
                    let _ = write!(out, "\n<!-- {} -->\n", message.replace("--", "- -"));
                    out.abort(&message);
                }
                Format::Rdf(_) => {
                    let _ = write!(out, "\n# {message}\n");
                    out.abort(&message);
                }
                _ => out.abort(&message),
            }
            sent.lock().unwrap().cut = Some(cut);
        }
        Err(e) => {
            let cut = Cut::Error(e.to_string());
            out.abort(&cut.message(timeout_s));
            sent.lock().unwrap().cut = Some(cut);
        }
    }
    sent.lock().unwrap().abandoned = out.gone;
}

/// Whether to stop before the next row, and why: the limit reached with more rows to
/// come, or the control's deadline.
fn stop_before(
    written: u64,
    control: &Control,
    more: bool,
) -> Result<Option<Cut>, EvaluationError> {
    if !more {
        return Ok(None);
    }
    if control.row_limit().is_some_and(|limit| written >= limit) {
        return Ok(Some(Cut::Limit(written)));
    }
    // A check is an atomic load and a clock read, small next to writing a row.
    match control.check() {
        Err(EvaluationError::Timeout) => Ok(Some(Cut::Timeout)),
        Err(e) => Err(e),
        Ok(()) => Ok(None),
    }
}

/// A SELECT answer's writer: JSON by [`JsonSolutionsWriter`], the other formats by
/// sparesults.
enum Solutions<W: Write> {
    Json(JsonSolutionsWriter<W>),
    Other(WriterSolutionsSerializer<W>),
}

impl<W: Write> Solutions<W> {
    fn serialize<'a>(
        &mut self,
        solution: impl IntoIterator<Item = (oxrdf::VariableRef<'a>, oxrdf::TermRef<'a>)>,
    ) -> io::Result<()> {
        match self {
            Solutions::Json(w) => w.serialize(solution),
            Solutions::Other(w) => w.serialize(solution),
        }
    }

    fn finish(self) -> io::Result<W> {
        match self {
            Solutions::Json(w) => w.finish(),
            Solutions::Other(w) => w.finish(),
        }
    }
}

/// The rows of a SELECT answer; returns why they were cut, if they were.
fn write_solutions(
    format: QueryResultsFormat,
    variables: Vec<oxrdf::Variable>,
    rows: Rows,
    control: &Control,
    out: &mut ChunkWriter,
    sent: &SentRecord,
) -> io::Result<Option<Cut>> {
    let mut serializer = if format == QueryResultsFormat::Json {
        Solutions::Json(JsonSolutionsWriter::start(&mut *out, &variables)?)
    } else {
        Solutions::Other(
            QueryResultsSerializer::from_format(format)
                .serialize_solutions_to_writer(&mut *out, variables.clone())?,
        )
    };
    let mut rows = rows.peekable();
    let mut written = 0u64;
    loop {
        let more = rows.peek().is_some();
        match stop_before(written, control, more) {
            Ok(Some(cut)) => {
                // JSON gets a note after a complete document; the other formats end
                // without their closing bytes.
                if format == QueryResultsFormat::Json {
                    serializer.finish()?;
                }
                return Ok(Some(cut));
            }
            Ok(None) if !more => break,
            Ok(None) => {}
            Err(e) => return Err(io::Error::other(e.to_string())),
        }
        let row = match rows.next() {
            Some(Ok(row)) => row,
            Some(Err(EvaluationError::Timeout)) => {
                if format == QueryResultsFormat::Json {
                    serializer.finish()?;
                }
                return Ok(Some(Cut::Timeout));
            }
            Some(Err(e)) => {
                if format == QueryResultsFormat::Json {
                    serializer.finish()?;
                }
                return Ok(Some(Cut::Error(e.to_string())));
            }
            None => break,
        };
        serializer.serialize(
            variables
                .iter()
                .zip(&row)
                .filter_map(|(v, t)| Some((v.as_ref(), t.as_ref()?.as_ref()))),
        )?;
        written += 1;
        sent.lock().unwrap().rows = written;
    }
    serializer.finish()?;
    Ok(None)
}

/// The triples of a CONSTRUCT or DESCRIBE answer; returns why they were cut, if they
/// were.
fn write_triples(
    format: RdfFormat,
    triples: Triples,
    control: &Control,
    out: &mut ChunkWriter,
    sent: &SentRecord,
) -> io::Result<Option<Cut>> {
    let mut serializer = RdfSerializer::from_format(format).for_writer(&mut *out);
    let mut triples = triples.peekable();
    let mut written = 0u64;
    loop {
        let more = triples.peek().is_some();
        match stop_before(written, control, more) {
            Ok(Some(cut)) => return Ok(Some(cut)),
            Ok(None) if !more => break,
            Ok(None) => {}
            Err(e) => return Err(io::Error::other(e.to_string())),
        }
        match triples.next() {
            Some(Ok(t)) => serializer.serialize_triple(&t)?,
            Some(Err(EvaluationError::Timeout)) => return Ok(Some(Cut::Timeout)),
            Some(Err(e)) => return Ok(Some(Cut::Error(e.to_string()))),
            None => break,
        }
        written += 1;
        sent.lock().unwrap().rows = written;
    }
    serializer.finish()?;
    Ok(None)
}

/// Adds the `cut` member to a finished SPARQL JSON document at the end of `buffer`.
fn add_json_note(buffer: &mut Vec<u8>, cut: &Cut, rows: u64, message: &str) {
    debug_assert_eq!(buffer.last(), Some(&b'}'));
    if buffer.last() == Some(&b'}') {
        buffer.pop();
    }
    let note = serde_json::json!({
        "reason": cut.reason(),
        "rows": rows,
        "message": message,
    });
    buffer.extend_from_slice(format!(",\"cut\":{note}}}").as_bytes());
}
