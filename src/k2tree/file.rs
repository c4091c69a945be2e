//! The `.k2` file: one k²-tree, its optional sampled directory and cached frontier.
//!
//! Layout (little-endian; every section starts 8-byte aligned so it can be used in place
//! from a memory map):
//!
//! ```text
//! offset  size  field
//!      0     8  magic "K2RPQ.K2"
//!      8     4  format version (FORMAT_VERSION)
//!     12     4  flags: bit 0 directory present, bit 1 frontier present
//!     16     8  rows
//!     24     8  cols
//!     32     8  nnz
//!     40     4  levels h
//!     44     4  directory sample S (0 when there is no directory)
//!     48    72  3 section entries (signatures, directory, frontier):
//!               offset u64, length in bytes u64, CRC32 u32, zero u32
//!    120   8·h  nodes per level, u64 each
//!  120+8h    4  CRC32 of bytes 0 .. 120+8h
//!  124+8h    4  zero
//!  128+8h       sections, back to back, in the order above; the file ends with the last
//! ```
//!
//! Every byte of the file is covered by a check: the header CRC, the section CRCs, and
//! the rule that padding is zero and nothing follows the last section. Structure is always
//! validated on open (whatever the checksum setting), so arbitrary bytes give an error,
//! never a panic or a tree that answers differently from the one written.

use std::fs::File;
use std::io::{self, Read, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use memmap2::Mmap;

use super::{height_for, Directory, InvalidTree, K2Tree, Words, DEFAULT_SAMPLE};

#[cfg(not(target_endian = "little"))]
compile_error!("the .k2 format is read in place from memory maps and needs a little-endian target");

/// The first 8 bytes of every `.k2` file.
pub const MAGIC: [u8; 8] = *b"K2RPQ.K2";
/// The format version this build writes and reads.
pub const FORMAT_VERSION: u32 = 1;

const FLAG_DIRECTORY: u32 = 1;
const FLAG_FRONTIER: u32 = 2;
/// Bytes before the per-level node counts.
const FIXED_LEN: usize = 120;
/// The most levels a tree can have: coordinates are u32, so the side is at most 2^32.
const MAX_LEVELS: u32 = 32;
const SECTION_NAMES: [&str; 3] = ["signatures", "directory", "frontier"];

/// Errors reading or writing a `.k2` file; each names the file.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum FileError {
    /// The operating system refused a read, write, map or rename.
    #[error("{path}: {error}")]
    Io {
        /// The file.
        path: PathBuf,
        /// What the OS said.
        error: io::Error,
    },
    /// The file does not start with [`MAGIC`].
    #[error("{path}: not a .k2 file (bad magic bytes)")]
    BadMagic {
        /// The file.
        path: PathBuf,
    },
    /// The file was written by a different version of the format.
    #[error("{path}: .k2 format version {found}, this build reads version {supported}")]
    UnsupportedVersion {
        /// The file.
        path: PathBuf,
        /// Version in the file.
        found: u32,
        /// Version this build reads.
        supported: u32,
    },
    /// The file is shorter than its header says.
    #[error("{path}: truncated: {needed} bytes needed, the file has {len}")]
    Truncated {
        /// The file.
        path: PathBuf,
        /// Bytes the header requires.
        needed: u64,
        /// Bytes present.
        len: u64,
    },
    /// A checksum does not match: the named part of the file is corrupted.
    #[error("{path}: checksum mismatch in the {section}: the file is corrupted")]
    Checksum {
        /// The file.
        path: PathBuf,
        /// `header`, `signatures`, `directory` or `frontier`.
        section: &'static str,
    },
    /// The header or payload is inconsistent (a damaged or hand-made file).
    #[error("{path}: {error}")]
    Invalid {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        error: InvalidTree,
    },
}

/// What [`write()`] stores besides the signatures.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WriteOptions {
    /// Store the sampled directory with this period (rounded up to a power of two >= 16);
    /// `None` stores none (it is rebuilt on first use).
    pub directory: Option<u32>,
    /// Store the cached frontier (8 bytes per node of the last internal level).
    pub frontier: bool,
}

impl Default for WriteOptions {
    fn default() -> Self {
        WriteOptions {
            directory: Some(DEFAULT_SAMPLE),
            frontier: false,
        }
    }
}

/// How [`open`] reads a file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct OpenOptions {
    /// Check the CRC32 of every section (one pass over the file). The structure is
    /// validated either way; this catches corruption that still forms a valid tree.
    pub verify_checksums: bool,
}

impl Default for OpenOptions {
    fn default() -> Self {
        OpenOptions {
            verify_checksums: true,
        }
    }
}

/// Where one payload section lies.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
pub struct Section {
    /// Byte offset from the start of the file (a multiple of 8).
    pub offset: u64,
    /// Length in bytes (a multiple of 8).
    pub len: u64,
    /// CRC32 of the section's bytes.
    pub crc: u32,
}

/// The header of a `.k2` file: the tree's shape and sizes without reading its payload.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct Header {
    /// Format version.
    pub version: u32,
    /// Matrix rows.
    pub rows: u64,
    /// Matrix columns.
    pub cols: u64,
    /// Non-zero cells.
    pub nnz: u64,
    /// Nodes per level, root first.
    pub level_nodes: Vec<u64>,
    /// Directory sampling period, when the file stores a directory.
    pub directory_sample: Option<u32>,
    /// Whether the file stores the cached frontier.
    pub has_frontier: bool,
    /// Signatures, directory, frontier (absent ones have length 0).
    pub sections: [Section; 3],
}

impl Header {
    /// All nodes.
    pub fn nodes(&self) -> u64 {
        self.level_nodes.iter().sum()
    }
    /// Bytes of the header.
    pub fn header_len(&self) -> u64 {
        header_len(self.level_nodes.len() as u32) as u64
    }
    /// Bytes of the whole file.
    pub fn file_len(&self) -> u64 {
        self.sections[2].offset + self.sections[2].len
    }
}

fn header_len(levels: u32) -> usize {
    FIXED_LEN + 8 * levels as usize + 8
}

/// Unsigned integers, whose slices can be viewed as bytes (no padding, every bit
/// pattern valid).
pub(crate) trait Plain: Copy {}
impl Plain for u32 {}
impl Plain for u64 {}

/// The bytes of a word slice (the formats are little-endian, as is the target).
pub(crate) fn as_bytes<T: Plain>(words: &[T]) -> &[u8] {
    // SAFETY: `Plain` types have no padding and any byte pattern is a valid u8; the
    // length is exact.
    unsafe { std::slice::from_raw_parts(words.as_ptr() as *const u8, std::mem::size_of_val(words)) }
}

/// CRC-32 of `bytes`, computed in parallel pieces for large inputs.
pub(crate) fn crc(bytes: &[u8]) -> u32 {
    // Large sections are hashed in parallel pieces and combined.
    const PIECE: usize = 8 << 20;
    if bytes.len() <= PIECE {
        return crc32fast::hash(bytes);
    }
    use rayon::prelude::*;
    let parts: Vec<crc32fast::Hasher> = bytes
        .par_chunks(PIECE)
        .map(|p| {
            let mut h = crc32fast::Hasher::new();
            h.update(p);
            h
        })
        .collect();
    let mut all = crc32fast::Hasher::new();
    for p in parts {
        all.combine(&p);
    }
    all.finalize()
}

fn encode_header(h: &Header) -> Vec<u8> {
    let mut b = Vec::with_capacity(header_len(h.level_nodes.len() as u32));
    b.extend_from_slice(&MAGIC);
    b.extend_from_slice(&h.version.to_le_bytes());
    let flags = if h.directory_sample.is_some() {
        FLAG_DIRECTORY
    } else {
        0
    } | if h.has_frontier { FLAG_FRONTIER } else { 0 };
    b.extend_from_slice(&flags.to_le_bytes());
    b.extend_from_slice(&h.rows.to_le_bytes());
    b.extend_from_slice(&h.cols.to_le_bytes());
    b.extend_from_slice(&h.nnz.to_le_bytes());
    b.extend_from_slice(&(h.level_nodes.len() as u32).to_le_bytes());
    b.extend_from_slice(&h.directory_sample.unwrap_or(0).to_le_bytes());
    for s in &h.sections {
        b.extend_from_slice(&s.offset.to_le_bytes());
        b.extend_from_slice(&s.len.to_le_bytes());
        b.extend_from_slice(&s.crc.to_le_bytes());
        b.extend_from_slice(&0u32.to_le_bytes());
    }
    for n in &h.level_nodes {
        b.extend_from_slice(&n.to_le_bytes());
    }
    let c = crc32fast::hash(&b);
    b.extend_from_slice(&c.to_le_bytes());
    b.extend_from_slice(&0u32.to_le_bytes());
    b
}

fn u32_at(b: &[u8], at: usize) -> u32 {
    u32::from_le_bytes(b[at..at + 4].try_into().unwrap())
}
fn u64_at(b: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(b[at..at + 8].try_into().unwrap())
}

/// Parses and checks the header at the start of `bytes` (`file_len` is the whole file's
/// length). Checks everything that does not need the payload.
fn decode_header(
    path: &Path,
    bytes: &[u8],
    file_len: u64,
    verify: bool,
) -> Result<Header, FileError> {
    let invalid = |msg: String| FileError::Invalid {
        path: path.to_path_buf(),
        error: InvalidTree(msg),
    };
    let truncated = |needed: u64| FileError::Truncated {
        path: path.to_path_buf(),
        needed,
        len: file_len,
    };
    // A short file that is not a prefix of the magic is not a .k2 file at all.
    let head = bytes.len().min(MAGIC.len());
    if bytes[..head] != MAGIC[..head] {
        return Err(FileError::BadMagic {
            path: path.to_path_buf(),
        });
    }
    if bytes.len() < MAGIC.len() {
        return Err(truncated(FIXED_LEN as u64));
    }
    if bytes[..8] != MAGIC {
        return Err(FileError::BadMagic {
            path: path.to_path_buf(),
        });
    }
    if bytes.len() < 12 {
        return Err(truncated(FIXED_LEN as u64));
    }
    let version = u32_at(bytes, 8);
    if version != FORMAT_VERSION {
        return Err(FileError::UnsupportedVersion {
            path: path.to_path_buf(),
            found: version,
            supported: FORMAT_VERSION,
        });
    }
    if bytes.len() < FIXED_LEN {
        return Err(truncated(FIXED_LEN as u64));
    }
    let levels = u32_at(bytes, 40);
    if levels > MAX_LEVELS {
        // Checked before the CRC only to bound the header length we read; a corrupted
        // count is reported as corruption when checksums are on.
        return Err(if verify {
            FileError::Checksum {
                path: path.to_path_buf(),
                section: "header",
            }
        } else {
            invalid(format!("{levels} levels (at most {MAX_LEVELS})"))
        });
    }
    let hlen = header_len(levels);
    if bytes.len() < hlen {
        return Err(truncated(hlen as u64));
    }
    let crc_at = hlen - 8;
    if verify && crc32fast::hash(&bytes[..crc_at]) != u32_at(bytes, crc_at) {
        return Err(FileError::Checksum {
            path: path.to_path_buf(),
            section: "header",
        });
    }
    if u32_at(bytes, crc_at + 4) != 0 {
        return Err(invalid("non-zero header padding".into()));
    }
    let flags = u32_at(bytes, 12);
    if flags & !(FLAG_DIRECTORY | FLAG_FRONTIER) != 0 {
        return Err(invalid(format!("unknown flags {flags:#x}")));
    }
    let rows = u64_at(bytes, 16);
    let cols = u64_at(bytes, 24);
    let nnz = u64_at(bytes, 32);
    if rows > 1 << 32 || cols > 1 << 32 {
        return Err(invalid(format!(
            "{rows}×{cols} matrix: coordinates are 32-bit"
        )));
    }
    if levels != height_for(rows, cols) {
        return Err(invalid(format!(
            "{levels} levels stored, {} expected for a {rows}×{cols} matrix",
            height_for(rows, cols)
        )));
    }
    let sample = u32_at(bytes, 44);
    let directory_sample = if flags & FLAG_DIRECTORY != 0 {
        if sample < 16 || !sample.is_power_of_two() {
            return Err(invalid(format!(
                "directory sample {sample} is not a power of two >= 16"
            )));
        }
        Some(sample)
    } else {
        if sample != 0 {
            return Err(invalid("directory sample set without a directory".into()));
        }
        None
    };
    let mut sections = [Section {
        offset: 0,
        len: 0,
        crc: 0,
    }; 3];
    for (k, s) in sections.iter_mut().enumerate() {
        let at = 48 + 24 * k;
        *s = Section {
            offset: u64_at(bytes, at),
            len: u64_at(bytes, at + 8),
            crc: u32_at(bytes, at + 16),
        };
        if u32_at(bytes, at + 20) != 0 {
            return Err(invalid("non-zero section padding".into()));
        }
    }
    let level_nodes: Vec<u64> = (0..levels as usize)
        .map(|d| u64_at(bytes, FIXED_LEN + 8 * d))
        .collect();
    let mut nodes = 0u64;
    for &n in &level_nodes {
        nodes = nodes
            .checked_add(n)
            .ok_or_else(|| invalid("node count overflows".into()))?;
    }
    // Section sizes follow from the counts; sections are back to back after the header.
    let internal = if nodes == 0 {
        0
    } else {
        nodes - level_nodes[levels as usize - 1]
    };
    let last_internal = if nodes == 0 {
        0
    } else {
        level_nodes[levels as usize - 2]
    };
    let expected = [
        Some(nodes.div_ceil(16) * 8),
        directory_sample.map(|s| (internal / s as u64 + 1) * 8),
        (flags & FLAG_FRONTIER != 0).then(|| last_internal.saturating_mul(8)),
    ];
    let mut pos = hlen as u64;
    for k in 0..3 {
        let s = sections[k];
        let want = expected[k].unwrap_or(0);
        if s.offset != pos || s.len != want {
            return Err(invalid(format!(
                "{} section at {} (+{} bytes), expected at {pos} (+{want} bytes)",
                SECTION_NAMES[k], s.offset, s.len
            )));
        }
        if expected[k].is_none() && s.crc != 0 {
            return Err(invalid(format!("CRC set for absent {}", SECTION_NAMES[k])));
        }
        pos = pos
            .checked_add(want)
            .ok_or_else(|| invalid("sections overflow".into()))?;
    }
    Ok(Header {
        version,
        rows,
        cols,
        nnz,
        level_nodes,
        directory_sample,
        has_frontier: flags & FLAG_FRONTIER != 0,
        sections,
    })
}

/// Reads and checks only the header of a `.k2` file (cheap statistics; the header CRC is
/// verified, the payload is not read).
pub fn read_header(path: impl AsRef<Path>) -> Result<Header, FileError> {
    let path = path.as_ref();
    let io = |error| FileError::Io {
        path: path.to_path_buf(),
        error,
    };
    let mut f = File::open(path).map_err(io)?;
    let file_len = f.metadata().map_err(io)?.len();
    let max = header_len(MAX_LEVELS) as u64;
    let mut buf = Vec::with_capacity(max as usize);
    (&mut f).take(max).read_to_end(&mut buf).map_err(io)?;
    // A header shorter than its own level count says is reported as truncated there.
    let h = decode_header(path, &buf, file_len, true)?;
    check_length(path, &h, file_len)?;
    Ok(h)
}

fn check_length(path: &Path, h: &Header, file_len: u64) -> Result<(), FileError> {
    let end = h.file_len();
    if file_len < end {
        return Err(FileError::Truncated {
            path: path.to_path_buf(),
            needed: end,
            len: file_len,
        });
    }
    if file_len > end {
        return Err(FileError::Invalid {
            path: path.to_path_buf(),
            error: InvalidTree(format!("{} bytes after the last section", file_len - end)),
        });
    }
    Ok(())
}

/// Opens a `.k2` file by memory-mapping it: the signatures, directory and frontier are
/// used in place, not copied. The structure is validated (O(nodes), parallel) and, with
/// `verify_checksums`, every CRC.
pub fn open(path: impl AsRef<Path>, options: OpenOptions) -> Result<K2Tree, FileError> {
    let path = path.as_ref();
    let io = |error| FileError::Io {
        path: path.to_path_buf(),
        error,
    };
    let invalid = |error: InvalidTree| FileError::Invalid {
        path: path.to_path_buf(),
        error,
    };
    let f = File::open(path).map_err(io)?;
    let file_len = f.metadata().map_err(io)?.len();
    if file_len < FIXED_LEN as u64 {
        // Too short to map usefully; read what is there to tell bad magic from truncation.
        let mut buf = Vec::new();
        (&f).take(FIXED_LEN as u64)
            .read_to_end(&mut buf)
            .map_err(io)?;
        // (A header shorter than FIXED_LEN is always rejected by `decode_header`.)
        return Err(
            decode_header(path, &buf, file_len, options.verify_checksums)
                .err()
                .unwrap_or(FileError::Truncated {
                    path: path.to_path_buf(),
                    needed: FIXED_LEN as u64,
                    len: file_len,
                }),
        );
    }
    // SAFETY: the map is read-only. Like every mmap-based reader, we rely on the file not
    // being truncated or rewritten in place while mapped; `write` only ever replaces
    // files by rename, which leaves existing maps intact.
    let map = Arc::new(unsafe { Mmap::map(&f) }.map_err(io)?);
    let h = decode_header(path, &map, file_len, options.verify_checksums)?;
    check_length(path, &h, file_len)?;
    if options.verify_checksums {
        for (k, s) in h.sections.iter().enumerate() {
            let bytes = &map[s.offset as usize..(s.offset + s.len) as usize];
            if crc(bytes) != s.crc {
                return Err(FileError::Checksum {
                    path: path.to_path_buf(),
                    section: SECTION_NAMES[k],
                });
            }
        }
    }
    let words = |s: &Section| {
        Words::mapped(map.clone(), s.offset as usize, (s.len / 8) as usize)
            .ok_or_else(|| invalid(InvalidTree("misaligned section".into())))
    };
    let nibbles = words(&h.sections[0])?;
    let mut tree =
        K2Tree::from_parts(h.rows, h.cols, h.nnz, &h.level_nodes, nibbles).map_err(invalid)?;
    if let Some(sample) = h.directory_sample {
        let dir = Directory {
            sample,
            ranks: words(&h.sections[1])?,
        };
        // A wrong rank would send descents to the wrong children: recompute and compare
        // (a popcount pass over the signatures, far cheaper than the validation above).
        if dir != Directory::build(&tree, sample) {
            return Err(invalid(InvalidTree(
                "directory ranks do not match the tree".into(),
            )));
        }
        tree = tree.with_directory(dir);
    }
    if h.has_frontier {
        let frontier = words(&h.sections[2])?;
        if *frontier != *tree.level_codes(tree.height() - 2) {
            return Err(invalid(InvalidTree(
                "cached frontier does not match the tree".into(),
            )));
        }
        tree = tree.with_frontier(frontier);
    }
    Ok(tree)
}

/// Writes `tree` to `path` atomically: a temporary file in the same folder is written,
/// synced and renamed over `path`, then the folder is synced. A crash leaves either the
/// old file or the new one, never a mix.
pub fn write(
    tree: &K2Tree,
    path: impl AsRef<Path>,
    options: WriteOptions,
) -> Result<Header, FileError> {
    let path = path.as_ref();
    let mut header = None;
    write_atomically(path, |w| {
        header = Some(write_to(tree, w, options)?);
        Ok(())
    })
    .map_err(|error| FileError::Io {
        path: path.to_path_buf(),
        error,
    })?;
    Ok(header.expect("a successful write made the header"))
}

/// Writes `tree` in this format to `w` and returns the header written: the bytes of a
/// file that [`open`] reads, for a writer that makes the file durable itself (as
/// [`write()`] does).
pub fn write_to(tree: &K2Tree, w: &mut dyn Write, options: WriteOptions) -> io::Result<Header> {
    let nodes = tree.nodes();
    let nibbles: &[u64] = &tree.nibbles()[..nodes.div_ceil(16) as usize];
    let dir_owned;
    let directory: Option<&Directory> = match options.directory {
        None => None,
        Some(s) => {
            let sample = Directory::period(s);
            match tree.directory_if_built() {
                Some(d) if d.sample == sample => Some(d),
                _ => {
                    dir_owned = Directory::build(tree, sample);
                    Some(&dir_owned)
                }
            }
        }
    };
    let frontier: Option<&[u64]> = options.frontier.then(|| &**tree.frontier());
    let hlen = header_len(tree.height()) as u64;
    let payload: [&[u64]; 3] = [
        nibbles,
        directory.map_or(&[][..], |d| &d.ranks[..]),
        frontier.unwrap_or(&[]),
    ];
    let mut sections = [Section {
        offset: 0,
        len: 0,
        crc: 0,
    }; 3];
    let mut pos = hlen;
    for (k, p) in payload.iter().enumerate() {
        let present = k == 0 || (k == 1 && directory.is_some()) || (k == 2 && frontier.is_some());
        sections[k] = Section {
            offset: pos,
            len: p.len() as u64 * 8,
            crc: if present { crc(as_bytes(p)) } else { 0 },
        };
        pos += p.len() as u64 * 8;
    }
    let header = Header {
        version: FORMAT_VERSION,
        rows: tree.rows(),
        cols: tree.cols(),
        nnz: tree.nnz(),
        level_nodes: (0..tree.height()).map(|d| tree.level_nodes(d)).collect(),
        directory_sample: directory.map(|d| d.sample),
        has_frontier: frontier.is_some(),
        sections,
    };
    w.write_all(&encode_header(&header))?;
    for p in payload {
        w.write_all(as_bytes(p))?;
    }
    Ok(header)
}

/// Writes `path` as a whole or not at all: `write` fills a temporary file beside it, which
/// is synced and renamed over `path`, and the folder is synced so that the rename lasts. On
/// an error the temporary file is removed and `path` is as before.
pub(crate) fn write_atomically(
    path: &Path,
    write: impl FnOnce(&mut dyn Write) -> io::Result<()>,
) -> io::Result<()> {
    let dir = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    };
    let name = path
        .file_name()
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "not a file name"))?;
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let tmp = dir.join(format!(
        ".{}.tmp.{}.{}",
        name.to_string_lossy(),
        std::process::id(),
        COUNTER.fetch_add(1, Ordering::Relaxed)
    ));
    let result = (|| -> io::Result<()> {
        let f = File::create(&tmp)?;
        let mut w = io::BufWriter::with_capacity(1 << 20, &f);
        write(&mut w)?;
        w.flush()?;
        drop(w);
        f.sync_all()?;
        std::fs::rename(&tmp, path)?;
        // The rename is durable once the folder's entry is.
        File::open(&dir)?.sync_all()
    })();
    if result.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    result
}
