//! Compiled kernels kept on disk between processes, so that a process that opens a device
//! loads machine code instead of compiling every kernel file with NVRTC again.
//!
//! An entry is one kernel file's CUBIN for one architecture, named by a SHA-256 of
//! everything that decides it: the file's text, every shared header's, the architecture,
//! the compile options and NVRTC's version. A changed kernel, header, device or NVRTC is
//! therefore a miss, never a stale hit. Each entry carries its length and a CRC-32 of its
//! body; an entry that fails either check is rebuilt and rewritten, never loaded. Entries
//! are written to a temporary name and renamed into place, so a reader never sees half an
//! entry. The folder is `$K2RPQ_KERNEL_CACHE`, else `$XDG_CACHE_HOME/k2rpq/kernels`, else
//! `~/.cache/k2rpq/kernels`; `K2RPQ_KERNEL_CACHE=off` (or an unwritable folder) compiles
//! every time.

use std::io::Write;
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

/// The first bytes of an entry, with the format's version.
const MAGIC: &[u8; 8] = b"K2RPQKC1";

/// The cache folder, or `None` when caching is off or no folder can be named.
pub(crate) fn folder() -> Option<PathBuf> {
    match std::env::var_os("K2RPQ_KERNEL_CACHE") {
        Some(v) if v == "off" || v == "0" || v.is_empty() => None,
        Some(v) => Some(PathBuf::from(v)),
        None => std::env::var_os("XDG_CACHE_HOME")
            .map(PathBuf::from)
            .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache")))
            .map(|c| c.join("k2rpq").join("kernels")),
    }
}

/// The name of the entry for a kernel file compiled from `parts` (its text, the headers,
/// the architecture, the options, NVRTC's version: each hashed with its length, so that
/// no two lists of parts give the same bytes).
pub(crate) fn key(file: &str, parts: &[&[u8]]) -> String {
    let mut h = Sha256::new();
    for p in parts {
        h.update((p.len() as u64).to_le_bytes());
        h.update(p);
    }
    let digest = h.finalize();
    let hex: String = digest.iter().map(|b| format!("{b:02x}")).collect();
    format!("{file}-{hex}.cubin")
}

/// The body of entry `name` in `dir`, if it is there and whole.
pub(crate) fn read(dir: &Path, name: &str) -> Option<Vec<u8>> {
    let bytes = std::fs::read(dir.join(name)).ok()?;
    let rest = bytes.strip_prefix(MAGIC.as_slice())?;
    let (head, body) = rest.split_at_checked(12)?;
    let len = u64::from_le_bytes(head[..8].try_into().ok()?);
    let crc = u32::from_le_bytes(head[8..].try_into().ok()?);
    (body.len() as u64 == len && crc32fast::hash(body) == crc).then(|| body.to_vec())
}

/// Writes `body` as entry `name` in `dir` (creating the folder), atomically. Errors are
/// returned for the caller to ignore: a cache that cannot be written only costs time.
pub(crate) fn write(dir: &Path, name: &str, body: &[u8]) -> std::io::Result<()> {
    std::fs::create_dir_all(dir)?;
    let tmp = dir.join(format!(".{name}.{}.tmp", std::process::id()));
    let result = (|| {
        let mut f = std::fs::File::create(&tmp)?;
        f.write_all(MAGIC)?;
        f.write_all(&(body.len() as u64).to_le_bytes())?;
        f.write_all(&crc32fast::hash(body).to_le_bytes())?;
        f.write_all(body)?;
        f.sync_all()?;
        std::fs::rename(&tmp, dir.join(name))
    })();
    if result.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    result
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_round_trip_and_damaged_ones_are_misses() {
        let dir = std::env::temp_dir().join(format!("k2rpq-kc-{}", std::process::id()));
        let name = key("descent", &[b"text", b"sm_90"]);
        assert_ne!(
            name,
            key("descent", &[b"tex", b"tsm_90"]),
            "parts are delimited"
        );
        assert_ne!(name, key("descent", &[b"text", b"sm_80"]));
        assert!(read(&dir, &name).is_none());
        write(&dir, &name, b"machine code").unwrap();
        assert_eq!(read(&dir, &name).as_deref(), Some(&b"machine code"[..]));
        // A flipped byte, a truncated entry, a foreign file: each a miss.
        let path = dir.join(&name);
        let mut bytes = std::fs::read(&path).unwrap();
        let last = bytes.len() - 1;
        bytes[last] ^= 1;
        std::fs::write(&path, &bytes).unwrap();
        assert!(read(&dir, &name).is_none());
        std::fs::write(&path, &bytes[..bytes.len() - 3]).unwrap();
        assert!(read(&dir, &name).is_none());
        std::fs::write(&path, b"not an entry").unwrap();
        assert!(read(&dir, &name).is_none());
        // Rewritten, it is whole again.
        write(&dir, &name, b"machine code").unwrap();
        assert!(read(&dir, &name).is_some());
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
