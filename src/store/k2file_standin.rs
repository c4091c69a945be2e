//! STAND-IN for `k2tree::file` (being written in another branch): a minimal `.k2` writer
//! and mmap reader with the same call shape, so the store can be built and tested now.
//! Delete this module and switch [`super::tree_io`] to `k2tree::file` once it lands.
//!
//! Layout: `b"K2STANDN"`, rows, cols, nnz, levels (u64 each), one u64 node count per
//! level, the signature words, then a CRC-32 (u64 slot) of everything before it.

use std::fs::File;
use std::io::{self, Write};
use std::path::Path;
use std::sync::Arc;

use memmap2::Mmap;

use crate::k2tree::{K2Tree, Words};

const MAGIC: &[u8; 8] = b"K2STANDN";

/// Writes `tree` to `path` (via a temporary name, fsynced, renamed).
pub fn standin_write(tree: &K2Tree, path: &Path) -> io::Result<()> {
    let mut bytes: Vec<u8> = Vec::with_capacity(64 + tree.nibbles().len() * 8);
    bytes.extend_from_slice(MAGIC);
    let levels = tree.height() as u64;
    for v in [tree.rows(), tree.cols(), tree.nnz(), levels] {
        bytes.extend_from_slice(&v.to_le_bytes());
    }
    for d in 0..tree.height() {
        bytes.extend_from_slice(&tree.level_nodes(d).to_le_bytes());
    }
    for w in tree.nibbles().iter() {
        bytes.extend_from_slice(&w.to_le_bytes());
    }
    let crc = crc32fast::hash(&bytes) as u64;
    bytes.extend_from_slice(&crc.to_le_bytes());
    let tmp = path.with_extension("k2.part");
    let mut f = File::create(&tmp)?;
    f.write_all(&bytes)?;
    f.sync_all()?;
    std::fs::rename(&tmp, path)
}

/// Maps `path`, checks its CRC and structure, and returns the tree borrowing the map.
pub fn standin_open(path: &Path) -> Result<K2Tree, String> {
    let file = File::open(path).map_err(|e| format!("cannot open: {e}"))?;
    // SAFETY: store files are written once and never modified in place.
    let map = Arc::new(unsafe { Mmap::map(&file) }.map_err(|e| format!("cannot map: {e}"))?);
    if map.len() < 48 || &map[..8] != MAGIC || !map.len().is_multiple_of(8) {
        return Err("not a .k2 file (bad magic or length)".into());
    }
    let body = map.len() - 8;
    let word = |i: usize| u64::from_le_bytes(map[8 * i..8 * i + 8].try_into().unwrap());
    if word(body / 8) != crc32fast::hash(&map[..body]) as u64 {
        return Err("checksum mismatch: the file is corrupt".into());
    }
    let (rows, cols, nnz, levels) = (word(1), word(2), word(3), word(4) as usize);
    if 5 + levels > body / 8 {
        return Err("level table past the end".into());
    }
    let level_nodes: Vec<u64> = (0..levels).map(|d| word(5 + d)).collect();
    let start = 8 * (5 + levels);
    let words = Words::mapped(map.clone(), start, (body - start) / 8)
        .ok_or("signature words out of bounds or misaligned")?;
    K2Tree::from_parts(rows, cols, nnz, &level_nodes, words).map_err(|e| e.to_string())
}
