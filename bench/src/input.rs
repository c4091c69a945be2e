//! Edge-list readers: TSV (`src<TAB>dst`) and Matrix Market coordinate files, plain or
//! compressed (`.gz`, `.bz2`).
//!
//! Cells are returned as Morton codes (8 bytes per edge, what construction consumes), so
//! reading a billion-edge file needs no second edge-sized buffer.

use std::fs::File;
use std::io::{self, BufRead, BufReader, Read};
use std::path::{Path, PathBuf};

use indicatif::ProgressBar;

use k2rpq::k2tree::{morton, InvalidTree, K2Tree};
use k2rpq::store::Compression;

/// A file format for edge lists.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum, serde::Serialize)]
pub enum InputFormat {
    /// One `src<TAB>dst` pair of 0-based ids per line (spaces also accepted); `#` starts
    /// a comment line. The matrix is square: side = largest id + 1.
    Tsv,
    /// Matrix Market `coordinate` (pattern, integer or real; general), 1-based. Entries
    /// with value 0 are skipped (a Boolean matrix holds the non-zeros).
    Mtx,
}

impl InputFormat {
    /// The format a file name suggests: `.mtx`, `.mtx.gz` and `.mtx.bz2` are Matrix
    /// Market, anything else TSV.
    pub fn from_path(path: &Path) -> Self {
        let name = path.to_string_lossy().to_ascii_lowercase();
        if [".mtx", ".mtx.gz", ".mtx.bz2"]
            .iter()
            .any(|e| name.ends_with(e))
        {
            InputFormat::Mtx
        } else {
            InputFormat::Tsv
        }
    }
}

/// The graph a measuring program names by `source`: a number of edges (the synthetic web
/// graph of `bench-spmv --synthetic web`, named `web N edges`) or the path of an edge-list
/// file (named by its path), as `(name, EdgeList)`. `SOURCE*N` takes N copies of it along
/// the diagonal ([`EdgeList::diagonal_copies`], `bench-spmv --copies`).
pub fn web_or_edge_list(source: &str) -> Result<(String, EdgeList), InputError> {
    if let Some((inner, n)) = source.rsplit_once('*') {
        if let Ok(copies) = n.parse::<u32>() {
            let (name, list) = web_or_edge_list(inner)?;
            let copied = list
                .diagonal_copies(copies)
                .map_err(|e| InputError::Parse {
                    path: PathBuf::from(inner),
                    line: 0,
                    reason: e.to_string(),
                })?;
            return Ok((format!("{name} x {copies}"), copied));
        }
    }
    match source.parse::<u64>() {
        Ok(edges) => {
            let g = super::gen::Web::like_cnr(edges, 1).generate();
            let list = EdgeList {
                rows: g.nodes,
                cols: g.nodes,
                codes: g.codes,
            };
            Ok((format!("web {edges} edges"), list))
        }
        Err(_) => {
            let path = Path::new(source);
            let list = read_edges(path, InputFormat::from_path(path), None)?;
            Ok((source.to_string(), list))
        }
    }
}

/// The cells of a matrix read from a file.
#[derive(Clone, Debug)]
pub struct EdgeList {
    /// Matrix rows.
    pub rows: u64,
    /// Matrix columns.
    pub cols: u64,
    /// One Morton code per edge line, in file order (duplicates kept).
    pub codes: Vec<u64>,
}

impl EdgeList {
    /// The k²-tree of these edges (duplicates merged), consuming the list.
    pub fn into_tree(mut self) -> Result<K2Tree, InvalidTree> {
        K2Tree::from_codes(self.rows, self.cols, &mut self.codes)
    }

    /// Edges `(row, col)` in file order.
    pub fn edges(&self) -> impl ExactSizeIterator<Item = (u32, u32)> + '_ {
        self.codes.iter().map(|&m| morton::decode(m))
    }

    /// `copies` copies of the matrix along the diagonal (copy `i` at rows `i · rows`,
    /// columns `i · cols`): a larger graph with the clustering of this one, for
    /// benchmarks that need a real graph's structure at a size the data does not come
    /// in (`bench-spmv --copies`). The copies start at offsets that are not powers of
    /// two in general, so their trees below the top levels differ. An error if the side
    /// would not fit 32-bit ids.
    pub fn diagonal_copies(&self, copies: u32) -> Result<EdgeList, TooManyCopies> {
        let too_many = TooManyCopies(copies);
        let copies = copies.max(1) as u64;
        let rows = self.rows.checked_mul(copies).ok_or(too_many)?;
        let cols = self.cols.checked_mul(copies).ok_or(too_many)?;
        if rows.max(cols) > 1 << 32 {
            return Err(too_many);
        }
        let mut codes = Vec::with_capacity(self.codes.len() * copies as usize);
        for i in 0..copies {
            let (dr, dc) = (i * self.rows, i * self.cols);
            codes.extend(self.codes.iter().map(|&m| {
                let (r, c) = morton::decode(m);
                morton::encode((r as u64 + dr) as u32, (c as u64 + dc) as u32)
            }));
        }
        Ok(EdgeList { rows, cols, codes })
    }
}

/// [`EdgeList::diagonal_copies`] was asked for more copies than 32-bit node ids allow.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("{0} copies would need node ids beyond 32 bits")]
pub struct TooManyCopies(pub u32);

/// Errors reading an edge list; each names the file, and parse errors the line.
#[derive(Debug, thiserror::Error)]
pub enum InputError {
    /// The file could not be opened or read (also: corrupt compressed data).
    #[error("{path}: {error}")]
    Io {
        /// The file.
        path: PathBuf,
        /// What the OS or decoder said.
        error: io::Error,
    },
    /// A line that does not parse.
    #[error("{path}:{line}: {reason}")]
    Parse {
        /// The file.
        path: PathBuf,
        /// 1-based line number (0 for problems found at the end of the file).
        line: u64,
        /// What is wrong.
        reason: String,
    },
}

/// Reads an edge list, decompressing `.gz` and `.bz2` files; `progress` (if any) advances by the
/// bytes read from disk.
pub fn read_edges(
    path: &Path,
    format: InputFormat,
    progress: Option<&ProgressBar>,
) -> Result<EdgeList, InputError> {
    let io = |error| InputError::Io {
        path: path.to_path_buf(),
        error,
    };
    let file = File::open(path).map_err(io)?;
    if let Some(pb) = progress {
        pb.set_length(file.metadata().map_err(io)?.len());
    }
    let raw: Box<dyn Read + Send> = match progress {
        Some(pb) => Box::new(pb.wrap_read(file)),
        None => Box::new(file),
    };
    let reader = BufReader::with_capacity(
        1 << 20,
        Compression::of_path(path).decoder(BufReader::with_capacity(1 << 20, raw)),
    );
    match format {
        InputFormat::Tsv => read_tsv(reader, path),
        InputFormat::Mtx => read_mtx(reader, path),
    }
}

/// Splits a line into whitespace-separated fields without allocating.
fn fields(line: &[u8]) -> impl Iterator<Item = &[u8]> {
    line.split(|b| b.is_ascii_whitespace())
        .filter(|f| !f.is_empty())
}

fn parse_u64(f: &[u8]) -> Option<u64> {
    if f.is_empty() || f.len() > 20 {
        return None;
    }
    let mut v = 0u64;
    for &b in f {
        if !b.is_ascii_digit() {
            return None;
        }
        v = v.checked_mul(10)?.checked_add((b - b'0') as u64)?;
    }
    Some(v)
}

/// Calls `f(line_number, line)` for every line (without the newline).
fn for_lines(
    mut reader: impl BufRead,
    path: &Path,
    mut f: impl FnMut(u64, &[u8]) -> Result<(), InputError>,
) -> Result<(), InputError> {
    let mut buf = Vec::with_capacity(256);
    let mut line = 0u64;
    loop {
        buf.clear();
        let n = reader
            .read_until(b'\n', &mut buf)
            .map_err(|error| InputError::Io {
                path: path.to_path_buf(),
                error,
            })?;
        if n == 0 {
            return Ok(());
        }
        line += 1;
        let mut l = &buf[..];
        while let [rest @ .., b'\n' | b'\r'] = l {
            l = rest;
        }
        f(line, l)?;
    }
}

/// Reads `src<TAB>dst` lines (see [`InputFormat::Tsv`]) from `reader`; `path` names it in
/// errors.
pub fn read_tsv(reader: impl BufRead, path: &Path) -> Result<EdgeList, InputError> {
    let err = |line, reason: String| InputError::Parse {
        path: path.to_path_buf(),
        line,
        reason,
    };
    let mut codes = Vec::new();
    let mut max_id = None::<u32>;
    for_lines(reader, path, |n, l| {
        let mut fs = fields(l);
        let Some(a) = fs.next() else { return Ok(()) };
        if a.starts_with(b"#") || a.starts_with(b"%") {
            return Ok(());
        }
        let b = fs
            .next()
            .ok_or_else(|| err(n, "expected two ids `src<TAB>dst`, found one".into()))?;
        if fs.next().is_some() {
            return Err(err(n, "expected two ids `src<TAB>dst`, found more".into()));
        }
        let id = |f: &[u8]| {
            parse_u64(f)
                .filter(|&v| v < u32::MAX as u64)
                .map(|v| v as u32)
                .ok_or_else(|| {
                    err(
                        n,
                        format!(
                            "`{}` is not a node id (an integer 0 ..= {})",
                            String::from_utf8_lossy(f),
                            u32::MAX - 1
                        ),
                    )
                })
        };
        let (r, c) = (id(a)?, id(b)?);
        max_id = Some(max_id.map_or(r.max(c), |m| m.max(r).max(c)));
        codes.push(morton::encode(r, c));
        Ok(())
    })?;
    let side = max_id.map_or(0, |m| m as u64 + 1);
    Ok(EdgeList {
        rows: side,
        cols: side,
        codes,
    })
}

/// Reads a Matrix Market coordinate file (see [`InputFormat::Mtx`]) from `reader`; `path`
/// names it in errors.
pub fn read_mtx(reader: impl BufRead, path: &Path) -> Result<EdgeList, InputError> {
    let err = |line, reason: String| InputError::Parse {
        path: path.to_path_buf(),
        line,
        reason,
    };
    #[derive(PartialEq)]
    enum Field {
        Pattern,
        Integer,
        Real,
    }
    let mut field = None::<Field>;
    let mut size = None::<(u64, u64, u64)>;
    let mut codes = Vec::new();
    let mut entries = 0u64;
    for_lines(reader, path, |n, l| {
        if n == 1 {
            let h: Vec<String> = fields(l)
                .map(|f| String::from_utf8_lossy(f).to_ascii_lowercase())
                .collect();
            if h.first().map(String::as_str) != Some("%%matrixmarket") || h.len() != 5 {
                return Err(err(
                    n,
                    "expected a `%%MatrixMarket matrix coordinate <field> general` header".into(),
                ));
            }
            if h[1] != "matrix" || h[2] != "coordinate" {
                return Err(err(
                    n,
                    format!(
                        "`{} {}` is not supported: only `matrix coordinate`",
                        h[1], h[2]
                    ),
                ));
            }
            field = Some(match h[3].as_str() {
                "pattern" => Field::Pattern,
                "integer" => Field::Integer,
                "real" => Field::Real,
                other => {
                    return Err(err(
                        n,
                        format!("field `{other}` is not supported: pattern, integer or real"),
                    ))
                }
            });
            if h[4] != "general" {
                return Err(err(
                    n,
                    format!("symmetry `{}` is not supported: only `general`", h[4]),
                ));
            }
            return Ok(());
        }
        if l.starts_with(b"%") || fields(l).next().is_none() {
            return Ok(());
        }
        let fs: Vec<&[u8]> = fields(l).collect();
        let Some((rows, cols, nnz)) = size else {
            let v: Vec<u64> = fs.iter().filter_map(|f| parse_u64(f)).collect();
            if fs.len() != 3 || v.len() != 3 {
                return Err(err(n, "expected the size line `rows cols entries`".into()));
            }
            if v[0] > 1 << 32 || v[1] > 1 << 32 {
                return Err(err(
                    n,
                    format!("{}×{} matrix: at most 2^32 rows and columns", v[0], v[1]),
                ));
            }
            size = Some((v[0], v[1], v[2]));
            codes.reserve(v[2].min(1 << 30) as usize);
            return Ok(());
        };
        let want = if field == Some(Field::Pattern) { 2 } else { 3 };
        if fs.len() != want {
            return Err(err(
                n,
                format!("expected {want} fields per entry, found {}", fs.len()),
            ));
        }
        let index = |f: &[u8], limit: u64, what: &str| {
            parse_u64(f)
                .filter(|&v| v >= 1 && v <= limit)
                .map(|v| (v - 1) as u32)
                .ok_or_else(|| {
                    err(
                        n,
                        format!(
                            "{what} `{}` is not in 1 ..= {limit}",
                            String::from_utf8_lossy(f)
                        ),
                    )
                })
        };
        let r = index(fs[0], rows, "row")?;
        let c = index(fs[1], cols, "column")?;
        entries += 1;
        if entries > nnz {
            return Err(err(n, format!("more entries than the {nnz} declared")));
        }
        let nonzero = match field {
            Some(Field::Pattern) | None => true,
            Some(Field::Integer) => {
                let s = String::from_utf8_lossy(fs[2]);
                s.parse::<i64>()
                    .map_err(|_| err(n, format!("`{s}` is not an integer")))?
                    != 0
            }
            Some(Field::Real) => {
                let s = String::from_utf8_lossy(fs[2]);
                s.parse::<f64>()
                    .map_err(|_| err(n, format!("`{s}` is not a real number")))?
                    != 0.0
            }
        };
        if nonzero {
            codes.push(morton::encode(r, c));
        }
        Ok(())
    })?;
    if field.is_none() {
        return Err(err(0, "empty file: no Matrix Market header".into()));
    }
    let Some((rows, cols, nnz)) = size else {
        return Err(err(0, "no size line `rows cols entries`".into()));
    };
    if entries != nnz {
        return Err(err(
            0,
            format!("{nnz} entries declared, {entries} found (truncated file?)"),
        ));
    }
    Ok(EdgeList { rows, cols, codes })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tsv(s: &str) -> Result<EdgeList, InputError> {
        read_tsv(s.as_bytes(), Path::new("x.tsv"))
    }

    #[test]
    fn diagonal_copies_shift_each_copy() {
        let g = tsv("0\t1\n2\t0\n").unwrap(); // 3 x 3
        let g3 = g.diagonal_copies(3).unwrap();
        assert_eq!((g3.rows, g3.cols), (9, 9));
        let edges: Vec<_> = g3.edges().collect();
        assert_eq!(edges, [(0, 1), (2, 0), (3, 4), (5, 3), (6, 7), (8, 6)]);
        assert_eq!(g.diagonal_copies(1).unwrap().codes, g.codes);
        let wide = EdgeList {
            rows: 1 << 31,
            cols: 1 << 31,
            codes: vec![],
        };
        assert!(wide.diagonal_copies(2).is_ok());
        assert_eq!(wide.diagonal_copies(3).unwrap_err(), TooManyCopies(3));
    }
    fn mtx(s: &str) -> Result<EdgeList, InputError> {
        read_mtx(s.as_bytes(), Path::new("x.mtx"))
    }
    fn line_of(e: InputError) -> u64 {
        match e {
            InputError::Parse { line, .. } => line,
            e => panic!("{e}"),
        }
    }

    #[test]
    fn tsv_reads_pairs_comments_and_blank_lines() {
        let e = tsv("# comment\n0\t1\n\n5 2\r\n5\t2\n").unwrap();
        assert_eq!((e.rows, e.cols), (6, 6));
        assert_eq!(e.edges().collect::<Vec<_>>(), vec![(0, 1), (5, 2), (5, 2)]);
        let empty = tsv("# nothing\n").unwrap();
        assert_eq!((empty.rows, empty.codes.len()), (0, 0));
    }

    #[test]
    fn tsv_errors_name_the_line() {
        assert_eq!(line_of(tsv("0\t1\n2\n").unwrap_err()), 2);
        assert_eq!(line_of(tsv("0\t1\t3\n").unwrap_err()), 1);
        assert_eq!(line_of(tsv("0\t1\n\n-1\t2\n").unwrap_err()), 3);
        assert_eq!(line_of(tsv("4294967295\t1\n").unwrap_err()), 1);
        let msg = tsv("a\tb\n").unwrap_err().to_string();
        assert!(msg.starts_with("x.tsv:1:") && msg.contains("`a`"), "{msg}");
    }

    #[test]
    fn mtx_reads_pattern_integer_real() {
        let e = mtx("%%MatrixMarket matrix coordinate pattern general\n% c\n3 4 2\n1 1\n3 4\n")
            .unwrap();
        assert_eq!((e.rows, e.cols), (3, 4));
        assert_eq!(e.edges().collect::<Vec<_>>(), vec![(0, 0), (2, 3)]);
        let e =
            mtx("%%MatrixMarket matrix coordinate integer general\n2 2 2\n1 2 7\n2 1 0\n").unwrap();
        assert_eq!(e.edges().collect::<Vec<_>>(), vec![(0, 1)]);
        let e = mtx("%%MatrixMarket matrix coordinate real general\n2 2 1\n2 2 -0.5e3\n").unwrap();
        assert_eq!(e.edges().collect::<Vec<_>>(), vec![(1, 1)]);
    }

    #[test]
    fn mtx_errors_name_the_line() {
        let h = "%%MatrixMarket matrix coordinate pattern general\n";
        assert_eq!(line_of(mtx("hello\n").unwrap_err()), 1);
        assert_eq!(
            line_of(mtx("%%MatrixMarket matrix coordinate pattern symmetric\n").unwrap_err()),
            1
        );
        assert_eq!(
            line_of(mtx("%%MatrixMarket matrix array real general\n").unwrap_err()),
            1
        );
        assert_eq!(line_of(mtx(&format!("{h}2 2\n")).unwrap_err()), 2);
        assert_eq!(line_of(mtx(&format!("{h}2 2 1\n3 1\n")).unwrap_err()), 3);
        assert_eq!(line_of(mtx(&format!("{h}2 2 1\n0 1\n")).unwrap_err()), 3);
        assert_eq!(line_of(mtx(&format!("{h}2 2 1\n1 1 5\n")).unwrap_err()), 3);
        assert_eq!(
            line_of(mtx(&format!("{h}2 2 1\n1 1\n2 2\n")).unwrap_err()),
            4
        );
        assert_eq!(line_of(mtx(&format!("{h}2 2 2\n1 1\n")).unwrap_err()), 0);
        assert_eq!(line_of(mtx("").unwrap_err()), 0);
        let e =
            mtx("%%MatrixMarket matrix coordinate integer general\n2 2 1\n1 1 x\n").unwrap_err();
        assert!(
            e.to_string().contains("x.mtx:3: `x` is not an integer"),
            "{e}"
        );
    }

    #[test]
    fn compressed_files_are_decompressed() {
        use std::io::Write;
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("g.tsv.gz");
        let mut z = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        z.write_all(b"1\t2\n3\t0\n").unwrap();
        std::fs::write(&p, z.finish().unwrap()).unwrap();
        let e = read_edges(&p, InputFormat::from_path(&p), None).unwrap();
        assert_eq!(e.edges().collect::<Vec<_>>(), vec![(1, 2), (3, 0)]);
        // A file that claims gzip but is not: an I/O error naming the file.
        let bad = dir.path().join("bad.tsv.gz");
        std::fs::write(&bad, b"1\t2\n").unwrap();
        let err = read_edges(&bad, InputFormat::Tsv, None).unwrap_err();
        assert!(matches!(err, InputError::Io { .. }) && err.to_string().contains("bad.tsv.gz"));
        assert_eq!(
            InputFormat::from_path(Path::new("a.MTX.gz")),
            InputFormat::Mtx
        );
        // bzip2 too.
        let b = dir.path().join("g.tsv.bz2");
        let mut z = bzip2::write::BzEncoder::new(Vec::new(), bzip2::Compression::fast());
        z.write_all(b"4\t5\n").unwrap();
        std::fs::write(&b, z.finish().unwrap()).unwrap();
        let e = read_edges(&b, InputFormat::from_path(&b), None).unwrap();
        assert_eq!(e.edges().collect::<Vec<_>>(), vec![(4, 5)]);
        assert_eq!(
            InputFormat::from_path(Path::new("a.mtx.bz2")),
            InputFormat::Mtx
        );
    }
}
