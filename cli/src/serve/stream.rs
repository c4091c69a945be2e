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

use rustc_hash::FxHashMap;

use super::evaluate::{Answer, Control, EvaluationError, PathRows, Rows, Triples};
use super::negotiate::Format;
use k2rpq::sparql::json::{self, JsonSolutionsWriter};

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
        (Answer::PathSolutions { variables, rows }, Format::Results(QueryResultsFormat::Json)) => {
            write_path_json(&variables, *rows, control, &mut out, sent, ENCODED_TERMS)
        }
        (Answer::PathSolutions { variables, rows }, Format::Results(f)) => {
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

/// Rows of a path answer encoded per batch: the batch's ids are decoded together, which
/// overlaps their dictionary cache misses, and the control is checked once per batch
/// (a clock read per row was 4 % of the server's time under load).
const PATH_BATCH: usize = 1024;

/// Terms a path answer keeps encoded for its later rows; past it the cache starts over,
/// so that an answer's memory stays bounded. Answers repeat their terms: the 46,214 rows
/// of `?x wdt:P530+ ?y` on CoDEx-M hold 222 distinct terms.
const ENCODED_TERMS: usize = 1 << 16;

/// The JSON values of the terms of a path answer, by id, each encoded once.
struct EncodedTerms {
    /// Where each id's value lies in `bytes`.
    spans: FxHashMap<u32, (usize, usize)>,
    bytes: Vec<u8>,
    /// The most terms kept.
    capacity: usize,
}

impl EncodedTerms {
    /// Encodes the ids of `cells` not encoded yet.
    fn add(&mut self, cells: &[Option<u32>], rows: &PathRows) -> Result<(), EvaluationError> {
        let mut ids: Vec<u32> = cells
            .iter()
            .flatten()
            .filter(|id| !self.spans.contains_key(id))
            .copied()
            .collect();
        if ids.is_empty() {
            return Ok(());
        }
        if self.spans.len() + ids.len() > self.capacity {
            self.spans.clear();
            self.bytes.clear();
            ids = cells.iter().flatten().copied().collect();
        }
        ids.sort_unstable();
        ids.dedup();
        for (id, term) in ids.iter().zip(rows.terms(&ids)?) {
            let start = self.bytes.len();
            json::write_term(&mut self.bytes, term.as_ref()).expect("writing to memory");
            self.spans.insert(*id, (start, self.bytes.len()));
        }
        Ok(())
    }

    /// The value of an id that [`EncodedTerms::add`] encoded.
    fn get(&self, id: u32) -> &[u8] {
        let (start, end) = self.spans[&id];
        &self.bytes[start..end]
    }
}

/// The rows of a path answer in SPARQL JSON, written from their ids with each distinct
/// term encoded once, keeping at most `capacity` terms encoded: the bytes of
/// [`write_solutions`] for the same rows, without a decoded term, a row's allocations or
/// an escape scan per cell. Returns why the rows were cut, if they were.
fn write_path_json(
    variables: &[oxrdf::Variable],
    mut rows: PathRows,
    control: &Control,
    out: &mut ChunkWriter,
    sent: &SentRecord,
    capacity: usize,
) -> io::Result<Option<Cut>> {
    let mut writer = JsonSolutionsWriter::start(&mut *out, variables)?;
    let keys: Vec<Vec<u8>> = variables.iter().map(json::encoded_key).collect();
    let mut terms = EncodedTerms {
        spans: FxHashMap::default(),
        bytes: Vec::new(),
        capacity,
    };
    let mut cells = Vec::with_capacity(PATH_BATCH * keys.len());
    let mut written = 0u64;
    let cut = loop {
        let room = control.row_limit().map_or(usize::MAX, |limit| {
            usize::try_from(limit.saturating_sub(written)).unwrap_or(usize::MAX)
        });
        match control.check() {
            Ok(()) => {}
            Err(EvaluationError::Timeout) => break Some(Cut::Timeout),
            Err(e) => return Err(io::Error::other(e.to_string())),
        }
        cells.clear();
        // One row past the room tells an answer cut at the limit from a whole one.
        let batch = match rows.next_ids(PATH_BATCH.min(room.saturating_add(1)), &mut cells) {
            Ok(0) => break None,
            Ok(n) => n,
            Err(EvaluationError::Timeout) => break Some(Cut::Timeout),
            Err(e) => break Some(Cut::Error(e.to_string())),
        };
        if let Err(e) = terms.add(&cells, &rows) {
            break Some(Cut::Error(e.to_string()));
        }
        for i in 0..batch.min(room) {
            // Indexed, not chunked: a query without columns has rows without cells.
            let row = &cells[i * keys.len()..(i + 1) * keys.len()];
            let solution = keys
                .iter()
                .zip(row)
                .filter_map(|(key, id)| Some((key.as_slice(), terms.get((*id)?))));
            if let Err(e) = writer.serialize_encoded(solution) {
                sent.lock().unwrap().rows = written;
                return Err(e);
            }
            written += 1;
        }
        if batch > room {
            sent.lock().unwrap().rows = written;
            break Some(Cut::Limit(written));
        }
        sent.lock().unwrap().rows = written;
    };
    // A cut JSON answer is a complete document followed by its note.
    writer.finish()?;
    Ok(cut)
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::serve::evaluate::Decoder;
    use k2rpq::sparql::group::QUERY_TERM_BASE;
    use oxrdf::{NamedNode, Term, Variable};
    use std::time::Duration;

    /// A term of each kind, with characters that JSON, CSV and TSV escape.
    fn terms() -> Vec<Term> {
        let quoted = "say \"hi\",\tthen\nleave \\ \u{1}";
        vec![
            NamedNode::new_unchecked("http://example.org/x\"y").into(),
            oxrdf::BlankNode::new_unchecked("n1").into(),
            oxrdf::Literal::new_simple_literal(quoted).into(),
            oxrdf::Literal::new_language_tagged_literal_unchecked(quoted, "de").into(),
            oxrdf::Literal::new_typed_literal("7", oxrdf::vocab::xsd::INT).into(),
        ]
    }

    /// The body that `write` sends, and whether it ended in an error.
    fn sent_body(write: impl FnOnce(mpsc::Sender<Chunk>)) -> (String, bool) {
        let (sender, mut receiver) = mpsc::channel::<Chunk>(4);
        let reader = std::thread::spawn(move || {
            let (mut bytes, mut aborted) = (Vec::new(), false);
            while let Some(chunk) = receiver.blocking_recv() {
                match chunk {
                    Ok(b) => bytes.extend_from_slice(&b),
                    Err(_) => aborted = true,
                }
            }
            (String::from_utf8(bytes).unwrap(), aborted)
        });
        write(sender);
        reader.join().unwrap()
    }

    /// The body `write_answer` sends for `answer`, and whether it ended in an error.
    fn body(answer: Answer, format: Format, control: &Control) -> (String, bool) {
        sent_body(|sender| {
            write_answer(
                answer,
                format,
                control,
                60.0,
                sender,
                &SentRecord::default(),
            )
        })
    }

    /// Path rows over the awkward terms: ids index them, `QUERY_TERM_BASE` is a query's
    /// own term, and the service's columns come in another order than the answer's,
    /// with one answer column the service lacks.
    fn path_rows(rows: &[Vec<Option<u32>>], control: &Control) -> PathRows {
        path_rows_in(rows, mixed(), control)
    }

    /// The answer's columns in the service's: swapped, with one the service lacks.
    fn mixed() -> Vec<Option<usize>> {
        vec![Some(1), None, Some(0)]
    }

    /// Path rows whose answer columns are the service's `columns`.
    fn path_rows_in(
        rows: &[Vec<Option<u32>>],
        columns: Vec<Option<usize>>,
        control: &Control,
    ) -> PathRows {
        let terms = terms();
        let decode: Decoder = Box::new(move |ids: &[u32]| {
            ids.iter()
                .map(|&i| terms.get(i as usize).cloned())
                .collect()
        });
        PathRows::new(
            rows.to_vec().into(),
            0..usize::MAX,
            columns,
            vec![NamedNode::new_unchecked("http://e/query-term").into()],
            decode,
            control.clone(),
        )
    }

    fn variables() -> Vec<Variable> {
        ["x", "unbound", "y\\"]
            .map(Variable::new_unchecked)
            .to_vec()
    }

    /// Every pair of terms, unbound cells and query terms, repeated past two batches.
    fn id_rows() -> Vec<Vec<Option<u32>>> {
        let n = terms().len() as u32;
        let ids: Vec<Option<u32>> = (0..n)
            .map(Some)
            .chain([None, Some(QUERY_TERM_BASE)])
            .collect();
        let pairs: Vec<Vec<Option<u32>>> = ids
            .iter()
            .flat_map(|&a| ids.iter().map(move |&b| vec![a, b]))
            .collect();
        pairs
            .iter()
            .cycle()
            .take(2 * PATH_BATCH + 7)
            .cloned()
            .collect()
    }

    /// The direct JSON writer gives sparesults' document, cut or not, with a cache that
    /// starts over or not.
    #[test]
    fn path_rows_in_json_are_sparesults_own() {
        let rows = id_rows();
        let json = Format::Results(QueryResultsFormat::Json);
        let control = Control::new(Duration::from_secs(60), None);
        let mut expected = QueryResultsSerializer::from_format(QueryResultsFormat::Json)
            .serialize_solutions_to_writer(Vec::new(), variables())
            .unwrap();
        for row in path_rows(&rows, &control) {
            let row: Vec<Option<Term>> = row.unwrap();
            expected
                .serialize(
                    variables()
                        .iter()
                        .zip(&row)
                        .filter_map(|(v, t)| Some((v.as_ref(), t.as_ref()?.as_ref()))),
                )
                .unwrap();
        }
        let expected = String::from_utf8(expected.finish().unwrap()).unwrap();
        let direct = |control: &Control| {
            let answer = Answer::PathSolutions {
                variables: variables(),
                rows: Box::new(path_rows(&rows, control)),
            };
            body(answer, json, control)
        };
        assert_eq!(direct(&control), (expected, false));
        // A cache smaller than a batch's terms starts over at each batch.
        let sent = SentRecord::default();
        let small = sent_body(|sender| {
            let mut out = ChunkWriter {
                buffer: Vec::new(),
                sender,
                gone: false,
            };
            let rows = path_rows(&rows, &control);
            let cut = write_path_json(&variables(), rows, &control, &mut out, &sent, 3);
            assert_eq!(cut.unwrap(), None);
            out.send_buffer();
        });
        assert_eq!(small, direct(&control));
        assert_eq!(sent.lock().unwrap().rows, rows.len() as u64);
        // Cut by the limit (inside a batch, at its end, at the last row): the general
        // writer's bytes, note included.
        for limit in [1, 100, PATH_BATCH as u64, rows.len() as u64] {
            let control = Control::new(Duration::from_secs(60), Some(limit));
            let general = Answer::Solutions {
                variables: variables(),
                rows: Box::new(path_rows(&rows, &control)),
            };
            let (general, _) = body(general, json, &control);
            assert_eq!(direct(&control), (general, false), "limit {limit}");
        }
    }

    /// Other formats, answers without columns and ids without terms: as the general
    /// route writes them.
    #[test]
    fn path_rows_are_written_as_the_general_route_writes_them() {
        let control = Control::new(Duration::from_secs(60), None);
        let both = |rows: &[Vec<Option<u32>>],
                    columns: Vec<Option<usize>>,
                    variables: Vec<Variable>,
                    format| {
            let direct = Answer::PathSolutions {
                variables: variables.clone(),
                rows: Box::new(path_rows_in(rows, columns.clone(), &control)),
            };
            let general = Answer::Solutions {
                variables,
                rows: Box::new(path_rows_in(rows, columns, &control)),
            };
            let format = Format::Results(format);
            (
                body(direct, format, &control),
                body(general, format, &control),
            )
        };
        let rows = id_rows();
        for format in [
            QueryResultsFormat::Json,
            QueryResultsFormat::Xml,
            QueryResultsFormat::Csv,
            QueryResultsFormat::Tsv,
        ] {
            let (direct, general) = both(&rows, mixed(), variables(), format);
            assert_eq!(direct, general, "{format:?}");
        }
        // Rows without cells.
        let empty = vec![Vec::new(); 3];
        let (direct, general) = both(&empty, Vec::new(), Vec::new(), QueryResultsFormat::Json);
        assert_eq!(direct, general);
        assert!(direct.0.contains("[{},{},{}]"), "{}", direct.0);
        // An id the dictionary lacks (a corrupt store) after a first batch.
        let mut corrupt = rows.clone();
        corrupt.push(vec![Some(99), Some(0)]);
        let (direct, general) = both(&corrupt, mixed(), variables(), QueryResultsFormat::Json);
        assert_eq!(direct, general);
        assert!(direct.0.contains("\"reason\":\"error\""), "{}", direct.0);
    }
}
