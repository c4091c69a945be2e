//! The `.rows` / `.cols` file: one orientation of a tree's [`Lines`], kept beside its
//! `.k2` file so that a store's first queries read the lists instead of paying their
//! build (`k2rpq lines`, `k2rpq load --line-lists`).
//!
//! Layout (little-endian):
//!
//! ```text
//! offset  size  field
//!      0     8  magic "K2RPQ.LN"
//!      8     4  format version (FORMAT_VERSION)
//!     12     4  flags: bit 0 by column (predecessor lists), else by row
//!     16     8  cells (the tree's nnz; the number of values)
//!     24     8  non-empty lines k (the number of keys)
//!     32     4  CRC-32 of the tree's `.k2` file: the lists belong to that tree only
//!     36     4  CRC-32 of the body
//!     40     4  CRC-32 of bytes 0 .. 40
//!     44     4  zero
//!     48        body: keys (u32 × k), offsets (u32 × (k + 1)), values (u32 × cells)
//! ```
//!
//! Only what a build sorts is stored; the index by line (or the rank bitmap) is derived
//! again on reading, in parallel, in a fraction of a build's time. Reading checks every
//! byte (header and body checksums, exact length) and the structure
//! (`Lines::from_parts`), so a damaged or foreign file is an error, never a panic or
//! lists that answer differently from the tree's.

use std::io;
use std::path::{Path, PathBuf};

use memmap2::Mmap;
use rayon::prelude::*;

use super::file::{as_bytes, crc, write_atomically};
use super::{K2Tree, LineBudget, LineBuildError, Lines};

/// The first 8 bytes of every lines file.
pub const MAGIC: [u8; 8] = *b"K2RPQ.LN";
/// The format version this build writes and reads.
pub const FORMAT_VERSION: u32 = 1;
/// Bytes before the body.
const HEADER_LEN: usize = 48;
const FLAG_BY_COLUMN: u32 = 1;

/// Errors reading or writing a lines file; each names the file.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum LinesFileError {
    /// The operating system refused a read, write, map or rename.
    #[error("{path}: {error}")]
    Io {
        /// The file.
        path: PathBuf,
        /// What the OS said.
        error: io::Error,
    },
    /// Not a lines file of this version, of this tree and orientation, or damaged.
    #[error("{path}: {reason}")]
    Invalid {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        reason: String,
    },
    /// The line memory budget has no room for the lists.
    #[error("{path}: {error}")]
    Budget {
        /// The file.
        path: PathBuf,
        /// The budget's refusal.
        error: LineBuildError,
    },
}

/// The usual name of a tree's lines file: `g0-p42.k2` → `g0-p42.rows` / `g0-p42.cols`.
pub fn file_name(tree_file: &str, by_column: bool) -> String {
    let stem = tree_file.strip_suffix(".k2").unwrap_or(tree_file);
    format!("{stem}.{}", if by_column { "cols" } else { "rows" })
}

fn u32_at(b: &[u8], at: usize) -> u32 {
    u32::from_le_bytes(b[at..at + 4].try_into().unwrap())
}

fn u64_at(b: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(b[at..at + 8].try_into().unwrap())
}

/// Writes `lines` (one orientation, `by_column`, of the tree whose `.k2` file has CRC
/// `tree_crc`) to `path` atomically; returns the file's size.
pub fn write(
    lines: &Lines,
    by_column: bool,
    tree_crc: u32,
    path: &Path,
) -> Result<u64, LinesFileError> {
    let parts = lines.parts();
    let [keys, _, values] = parts;
    let mut body = crc32fast::Hasher::new();
    for p in parts {
        body.update(as_bytes(p));
    }
    let mut h = Vec::with_capacity(HEADER_LEN);
    h.extend_from_slice(&MAGIC);
    h.extend_from_slice(&FORMAT_VERSION.to_le_bytes());
    h.extend_from_slice(&(if by_column { FLAG_BY_COLUMN } else { 0 }).to_le_bytes());
    h.extend_from_slice(&(values.len() as u64).to_le_bytes());
    h.extend_from_slice(&(keys.len() as u64).to_le_bytes());
    h.extend_from_slice(&tree_crc.to_le_bytes());
    h.extend_from_slice(&body.finalize().to_le_bytes());
    h.extend_from_slice(&crc32fast::hash(&h).to_le_bytes());
    h.extend_from_slice(&0u32.to_le_bytes());
    write_atomically(path, |w| {
        w.write_all(&h)?;
        parts.iter().try_for_each(|p| w.write_all(as_bytes(p)))
    })
    .map_err(|error| LinesFileError::Io {
        path: path.to_path_buf(),
        error,
    })?;
    Ok((HEADER_LEN + 4 * parts.iter().map(|p| p.len()).sum::<usize>()) as u64)
}

/// Reads the lists of `tree`'s rows (`by_column == false`) or columns from `path`,
/// checking that the file was written for that orientation of the tree whose `.k2`
/// file has CRC `tree_crc`. The lists' bytes are taken from `budget` (given back with
/// [`LineBudget::release`] of [`Lines::bytes`] when they are dropped).
pub fn read(
    path: &Path,
    by_column: bool,
    tree: &K2Tree,
    tree_crc: u32,
    budget: &LineBudget,
) -> Result<Lines, LinesFileError> {
    let invalid = |reason: String| LinesFileError::Invalid {
        path: path.to_path_buf(),
        reason,
    };
    let io = |error| LinesFileError::Io {
        path: path.to_path_buf(),
        error,
    };
    let file = std::fs::File::open(path).map_err(io)?;
    // SAFETY: the store's files are never changed in place (they are replaced by
    // renames), so the mapping stays as read.
    let map = unsafe { Mmap::map(&file) }.map_err(io)?;
    let b = &map[..];
    if b.len() < HEADER_LEN || b[..8] != MAGIC {
        return Err(invalid(
            "not a lines file (bad magic bytes or too short)".into(),
        ));
    }
    let version = u32_at(b, 8);
    if version != FORMAT_VERSION {
        return Err(invalid(format!(
            "lines format version {version}, this build reads version {FORMAT_VERSION}"
        )));
    }
    if crc32fast::hash(&b[..40]) != u32_at(b, 40) || u32_at(b, 44) != 0 {
        return Err(invalid(
            "checksum mismatch in the header: the file is corrupted".into(),
        ));
    }
    if (u32_at(b, 12) & FLAG_BY_COLUMN != 0) != by_column || u32_at(b, 12) > FLAG_BY_COLUMN {
        return Err(invalid("the lists of the other orientation".into()));
    }
    let (cells, k) = (u64_at(b, 16), u64_at(b, 24));
    if u32_at(b, 32) != tree_crc || cells != tree.nnz() {
        return Err(invalid("the lists of another tree (a stale file)".into()));
    }
    let words = cells
        .checked_add(2 * k + 1)
        .filter(|&w| k <= cells && HEADER_LEN as u64 + 4 * w == b.len() as u64)
        .ok_or_else(|| invalid("length does not match the header".into()))?;
    let body = &b[HEADER_LEN..];
    if crc(body) != u32_at(b, 36) {
        return Err(invalid(
            "checksum mismatch in the body: the file is corrupted".into(),
        ));
    }
    let arrays = 4 * words;
    budget
        .reserve(arrays)
        .map_err(|error| LinesFileError::Budget {
            path: path.to_path_buf(),
            error,
        })?;
    let k = k as usize;
    let (keys, rest) = body.split_at(4 * k);
    let (offsets, values) = rest.split_at(4 * (k + 1));
    let side = tree.rows().max(tree.cols());
    Lines::from_parts(u32s(keys), u32s(offsets), u32s(values), side, budget).map_err(|reason| {
        budget.release(arrays);
        invalid(reason)
    })
}

/// Little-endian `u32`s of `bytes` (a multiple of 4 long), decoded in parallel.
fn u32s(bytes: &[u8]) -> Vec<u32> {
    // Sized and advised before the writes: walks read the lists at random, and huge
    // pages spare them the TLB misses (`crate::huge_pages`).
    let mut v = Vec::with_capacity(bytes.len() / 4);
    crate::huge_pages::advise_vec(&v);
    bytes
        .par_chunks_exact(4)
        .map(|c| u32::from_le_bytes(c.try_into().unwrap()))
        .collect_into_vec(&mut v);
    v
}
