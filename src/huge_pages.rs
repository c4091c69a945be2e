//! Transparent huge pages for the arrays that query walks read at random: the term
//! dictionary and the relations' line lists.
//!
//! A small query on a large store touches a few hundred random lines of arrays of tens to
//! hundreds of MB (an answer of 605 terms lies in 604 dictionary blocks; a P279 walk reads
//! 373 lines of 12 MB of lists). With 4 KiB pages each such read is a TLB miss on top of
//! its cache miss; 2 MiB pages make the page walk hit. Most kernels give huge pages only
//! to anonymous memory that asks for them (`transparent_hugepage=madvise`), so:
//!
//! - heap arrays of at least [`MIN_BYTES`] (line lists read or built) are advised with
//!   `MADV_HUGEPAGE` before they are first written: no extra memory;
//! - a dictionary segment of at least [`MIN_DICT_BYTES`] is *read into* advised anonymous
//!   memory at open instead of being mapped from its file: its file's size in extra
//!   resident memory that the kernel cannot reclaim (128 MB on the 100M wikidata-like
//!   store), for ~half the cost of a cold term decode.
//!
//! The environment variable `K2RPQ_HUGE_PAGES` picks what gets them: unset, `1`, `on` or
//! `all` both; `0`, `off` or `none` neither (the dictionary is then mapped from its
//! file); `dict` the dictionary only; `lines` the lists only. Read once per process.

use std::fs::File;
use std::io::{self, Read};
use std::sync::OnceLock;

use memmap2::{Mmap, MmapMut};

/// Heap arrays from this size on are advised (a huge page's size: a smaller array cannot
/// hold one).
pub const MIN_BYTES: usize = 2 << 20;

/// Dictionary files from this size on are copied into huge pages: a smaller dictionary
/// spans few enough 4 KiB pages that its TLB misses are rare.
pub const MIN_DICT_BYTES: u64 = 16 << 20;

/// What [`enabled`] is asked about.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Use {
    /// Dictionary segments copied into anonymous huge pages at open.
    Dictionary,
    /// Heap arrays of line lists advised before they are written.
    Lines,
}

/// Whether `what` gets huge pages under `K2RPQ_HUGE_PAGES` (see the module's text).
pub fn enabled(what: Use) -> bool {
    static CHOICE: OnceLock<(bool, bool)> = OnceLock::new();
    let (dict, lines) =
        *CHOICE.get_or_init(|| parse_choice(std::env::var("K2RPQ_HUGE_PAGES").ok().as_deref()));
    match what {
        Use::Dictionary => dict,
        Use::Lines => lines,
    }
}

/// `(dictionary, lines)` for a value of `K2RPQ_HUGE_PAGES`; unknown values mean the
/// default (both).
fn parse_choice(value: Option<&str>) -> (bool, bool) {
    match value.map(|v| v.trim().to_ascii_lowercase()).as_deref() {
        Some("0" | "off" | "none" | "no" | "false") => (false, false),
        Some("dict" | "dictionary") => (true, false),
        Some("lines") => (false, true),
        _ => (true, true),
    }
}

/// Advises the kernel to back the whole 2 MiB pages inside `len` bytes at `ptr` with
/// huge pages; a hint, without effect where unsupported, on a short range or on error.
/// Call it before the range is first written: a page faulted in as 4 KiB pages is only
/// collapsed later by a background scan.
pub fn advise(ptr: *const u8, len: usize) {
    #[cfg(target_os = "linux")]
    {
        const HUGE: usize = 2 << 20;
        if len < MIN_BYTES {
            return;
        }
        let start = (ptr as usize).next_multiple_of(HUGE);
        let end = (ptr as usize + len) / HUGE * HUGE;
        if end > start {
            // SAFETY: MADV_HUGEPAGE changes no contents and no access rights; the range
            // lies inside the caller's allocation, page-aligned.
            unsafe {
                libc::madvise(start as *mut libc::c_void, end - start, libc::MADV_HUGEPAGE);
            }
        }
    }
    #[cfg(not(target_os = "linux"))]
    let _ = (ptr, len);
}

/// Advises the spare capacity of `v` (up to its capacity), as [`advise`]: for an array
/// reserved but not yet filled, only where [`Use::Lines`] is enabled.
pub fn advise_vec<T>(v: &Vec<T>) {
    if enabled(Use::Lines) {
        advise(v.as_ptr().cast(), v.capacity() * std::mem::size_of::<T>());
    }
}

/// The whole of `file` (`len` bytes long) read into anonymous memory advised for huge
/// pages, read-only; an error when the memory cannot be had or the read fails (the
/// caller then maps the file).
pub fn read_into_huge_pages(file: &File, len: u64) -> io::Result<Mmap> {
    let len = usize::try_from(len).map_err(io::Error::other)?;
    let mut anon = MmapMut::map_anon(len)?;
    #[cfg(target_os = "linux")]
    let _ = anon.advise(memmap2::Advice::HugePage);
    let mut read = 0;
    let mut f = file;
    while read < len {
        match f.read(&mut anon[read..]) {
            Ok(0) => return Err(io::Error::from(io::ErrorKind::UnexpectedEof)),
            Ok(n) => read += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    anon.make_read_only()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn choice_values() {
        assert_eq!(parse_choice(None), (true, true));
        assert_eq!(parse_choice(Some("0")), (false, false));
        assert_eq!(parse_choice(Some("OFF")), (false, false));
        assert_eq!(parse_choice(Some("dict")), (true, false));
        assert_eq!(parse_choice(Some("lines")), (false, true));
        assert_eq!(parse_choice(Some("all")), (true, true));
    }

    #[test]
    fn a_file_reads_back_whole() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f");
        let bytes: Vec<u8> = (0..(3u32 << 20)).map(|i| (i % 251) as u8).collect();
        std::fs::write(&path, &bytes).unwrap();
        let file = File::open(&path).unwrap();
        let map = read_into_huge_pages(&file, bytes.len() as u64).unwrap();
        assert_eq!(&map[..], &bytes[..]);
        // A file shorter than claimed is an error, not a short map.
        let file = File::open(&path).unwrap();
        assert!(read_into_huge_pages(&file, bytes.len() as u64 + 1).is_err());
        // Advising any range is harmless.
        let v: Vec<u64> = Vec::with_capacity(1 << 20);
        advise(v.as_ptr().cast(), 8 << 20);
        advise_vec(&v);
    }
}
