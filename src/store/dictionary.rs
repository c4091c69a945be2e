//! The term dictionary: term ↔ dense `u32` id, stored as front-coded blocks.
//!
//! **Why front coding and not an FST.** Both directions must be fast and the file must be
//! mmap'ed, not rebuilt, on open. An FST (`fst` crate) maps a key to a value very
//! compactly but offers no id → term lookup, so it would need a second structure holding
//! every term again. Front-coded blocks give both directions from one copy of the text:
//! term → id is a binary search over the blocks' first keys plus a scan of one block;
//! id → term decodes at most one block. Sorted RDF terms share long prefixes (namespaces,
//! datatypes), which is what front coding removes; Wikidata-style IRIs shrink to a few
//! bytes each.
//!
//! **Huge pages.** A segment of at least `MIN_DICT_BYTES` (in `huge_pages`) is read
//! into anonymous memory advised for huge pages instead of being mapped (its file is read
//! whole for the checksum anyway): an answer's terms lie in as many blocks as terms, and
//! each cold decode otherwise pays a page walk on top of its two cache misses.
//! `K2RPQ_HUGE_PAGES=0` keeps the mapping.
//!
//! **Segments.** Ids are stable across incremental loads, so a load cannot re-sort terms
//! already numbered. Each load appends one *segment*: the terms it introduced, sorted,
//! numbered consecutively from the previous node count. A lookup by id picks the segment by
//! range; a lookup by term tries each segment (a store loaded in `k` steps has `k`).
//!
//! **File layout** (little-endian): `b"K2RDICT1"`, `first_id: u32`, `count: u32`,
//! `block_size: u32`, 4 bytes of padding; then the blocks; then one `u64` offset per block
//! (relative to the end of the header) and one past the end; then `offsets_at: u64` (file
//! position of the offsets) and a CRC-32 of everything before it. In a block the first key
//! is `varint(len) bytes`, each next one `varint(shared prefix) varint(len of rest) rest`.

use std::fs::File;
use std::io::{self, BufWriter, Write};
use std::path::Path;
use std::sync::Arc;

use memmap2::Mmap;
use oxrdf::{Term, TermRef};

use super::prefetch::prefetch;
use crate::checksum::Checksummed;
use crate::huge_pages::{self, Use};
use crate::rdf::terms;

const MAGIC: &[u8; 8] = b"K2RDICT1";
const HEADER: usize = 24;
const FOOTER: usize = 12;
/// Keys per front-coded block: 16 keeps a scan short while saving most of the prefix bytes.
pub const BLOCK_SIZE: u32 = 16;

/// Ids ahead of the one decoded whose block offset [`Dictionary::terms`] prefetches.
const OFFSET_AHEAD: usize = 8;

/// Ids ahead of the one decoded whose block [`Dictionary::terms`] prefetches (its offset
/// was prefetched [`OFFSET_AHEAD`]` - BLOCK_AHEAD` ids earlier).
const BLOCK_AHEAD: usize = 4;

/// A dictionary segment that does not read back.
#[derive(Debug, thiserror::Error)]
#[error("dictionary file {file}: {reason}")]
pub struct DictionaryError {
    /// The file.
    pub file: String,
    /// What is wrong with it.
    pub reason: String,
}

fn put_varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

/// Reads a varint at `*pos`, advancing it; `None` past the end or on overlong input.
fn get_varint(bytes: &[u8], pos: &mut usize) -> Option<u64> {
    let mut v = 0u64;
    for shift in (0..64).step_by(7) {
        let b = *bytes.get(*pos)?;
        *pos += 1;
        v |= ((b & 0x7f) as u64) << shift;
        if b < 0x80 {
            return Some(v);
        }
    }
    None
}

/// Length of the common prefix of `a` and `b`, eight bytes at a time: sorted keys share
/// long namespace prefixes, and a byte loop over them showed in load profiles.
pub(crate) fn common_prefix(a: &[u8], b: &[u8]) -> usize {
    let n = a.len().min(b.len());
    let mut i = 0;
    while i + 8 <= n {
        let x = u64::from_le_bytes(a[i..i + 8].try_into().expect("8 bytes"));
        let y = u64::from_le_bytes(b[i..i + 8].try_into().expect("8 bytes"));
        if x != y {
            // Little-endian: the lowest differing bit lies in the first differing byte.
            return i + ((x ^ y).trailing_zeros() / 8) as usize;
        }
        i += 8;
    }
    i + a[i..n]
        .iter()
        .zip(&b[i..n])
        .take_while(|(x, y)| x == y)
        .count()
}

/// Writes a segment of `keys` (sorted, distinct) numbered from `first_id`; returns
/// `(bytes, crc32)` of the file. The file is fsynced.
#[cfg(test)]
pub fn write_segment<'a>(
    path: &Path,
    first_id: u32,
    keys: impl ExactSizeIterator<Item = &'a [u8]>,
) -> io::Result<(u64, u32)> {
    let keys: Vec<&[u8]> = keys.collect();
    write_segment_of(path, first_id, &keys, |k| k)
}

/// Keys front-coded per parallel piece of [`write_segment_of`] (a multiple of
/// [`BLOCK_SIZE`]): large enough that a piece outweighs its task, small enough that the
/// pieces in flight stay a few MiB.
const PIECE_KEYS: usize = 1 << 16;

/// [`write_segment`] of the keys `key(&items[i])`, front-coded in parallel.
///
/// Blocks are independent (each starts with a whole key), so pieces of blocks are encoded
/// on the rayon pool and only the writing and the checksum are sequential: a load of
/// tens of millions of new terms otherwise spends seconds front-coding on one thread. The
/// bytes are the same as a sequential encoding's.
pub fn write_segment_of<T: Sync>(
    path: &Path,
    first_id: u32,
    items: &[T],
    key: impl Fn(&T) -> &[u8] + Sync,
) -> io::Result<(u64, u32)> {
    use rayon::prelude::*;
    let count = u32::try_from(items.len()).map_err(io::Error::other)?;
    let file = File::create(path)?;
    let mut out = Checksummed::new(BufWriter::with_capacity(1 << 20, file));
    let mut header = Vec::with_capacity(HEADER);
    header.extend_from_slice(MAGIC);
    header.extend_from_slice(&first_id.to_le_bytes());
    header.extend_from_slice(&count.to_le_bytes());
    header.extend_from_slice(&BLOCK_SIZE.to_le_bytes());
    header.extend_from_slice(&[0; 4]);
    out.write_all(&header)?;
    let mut offsets = Vec::with_capacity((count / BLOCK_SIZE + 2) as usize);
    let mut data_len = 0u64;
    // A group of pieces per round, so that one round's encoded bytes are bounded.
    let group = PIECE_KEYS * rayon::current_num_threads().max(1);
    for round in items.chunks(group) {
        let pieces: Vec<(Vec<u8>, Vec<u64>)> = round
            .par_chunks(PIECE_KEYS)
            .map(|piece| {
                let mut bytes = Vec::new();
                let mut starts = Vec::with_capacity(piece.len() / BLOCK_SIZE as usize + 1);
                for block in piece.chunks(BLOCK_SIZE as usize) {
                    starts.push(bytes.len() as u64);
                    let mut prev: &[u8] = &[];
                    for (i, item) in block.iter().enumerate() {
                        let k = key(item);
                        if i == 0 {
                            put_varint(&mut bytes, k.len() as u64);
                            bytes.extend_from_slice(k);
                        } else {
                            let shared = common_prefix(prev, k);
                            put_varint(&mut bytes, shared as u64);
                            put_varint(&mut bytes, (k.len() - shared) as u64);
                            bytes.extend_from_slice(&k[shared..]);
                        }
                        prev = k;
                    }
                }
                (bytes, starts)
            })
            .collect();
        for (bytes, starts) in pieces {
            offsets.extend(starts.iter().map(|s| data_len + s));
            out.write_all(&bytes)?;
            data_len += bytes.len() as u64;
        }
    }
    offsets.push(data_len);
    let offsets_at = out.bytes;
    for o in &offsets {
        out.write_all(&o.to_le_bytes())?;
    }
    out.write_all(&offsets_at.to_le_bytes())?;
    let crc = out.crc32();
    let mut inner = out.inner;
    inner.write_all(&crc.to_le_bytes())?;
    let file = inner.into_inner().map_err(|e| e.into_error())?;
    file.sync_all()?;
    Ok((out.bytes + 4, crc))
}

/// One segment, mapped from its file or (when large) read into huge pages: ids
/// `first_id .. first_id + count`.
#[derive(Debug)]
pub struct Segment {
    map: Arc<Mmap>,
    first_id: u32,
    count: u32,
    block_size: u32,
    offsets_at: usize,
    blocks: usize,
}

impl Segment {
    /// Maps `path` and checks its header, bounds and CRC (and `expect_crc` when given).
    pub fn open(path: &Path, expect_crc: Option<u32>) -> Result<Segment, DictionaryError> {
        let err = |reason: String| DictionaryError {
            file: path.display().to_string(),
            reason,
        };
        let file = File::open(path).map_err(|e| err(format!("cannot open: {e}")))?;
        let len = file
            .metadata()
            .map_err(|e| err(format!("cannot open: {e}")))?
            .len();
        // A large segment is read into anonymous huge pages (`crate::huge_pages`): a cold
        // term decode's two misses (block offset, block) then skip the page walk. The
        // whole file is read for the checksum below anyway; on any failure, mapped.
        let copied = (len >= huge_pages::MIN_DICT_BYTES && huge_pages::enabled(Use::Dictionary))
            .then(|| huge_pages::read_into_huge_pages(&file, len).ok())
            .flatten();
        let map = match copied {
            Some(map) => map,
            // SAFETY: store files are never modified in place (a load writes new files
            // and renames); a concurrent truncation by another program is outside our
            // contract.
            None => unsafe { Mmap::map(&file) }.map_err(|e| err(format!("cannot map: {e}")))?,
        };
        if map.len() < HEADER + FOOTER + 8 || &map[..8] != MAGIC {
            return Err(err(
                "not a k2rpq dictionary segment (bad magic or too short)".into(),
            ));
        }
        let body = map.len() - 4;
        let stored = u32::from_le_bytes(map[body..].try_into().unwrap());
        let actual = crc32fast::hash(&map[..body]);
        if stored != actual {
            return Err(err(format!(
                "checksum mismatch (stored {stored:08x}, computed {actual:08x}): the file is corrupt"
            )));
        }
        if let Some(e) = expect_crc {
            if e != actual {
                return Err(err(format!(
                    "checksum {actual:08x} differs from the manifest's {e:08x}: file replaced?"
                )));
            }
        }
        let u32_at = |p: usize| u32::from_le_bytes(map[p..p + 4].try_into().unwrap());
        let (first_id, count, block_size) = (u32_at(8), u32_at(12), u32_at(16));
        let offsets_at = u64::from_le_bytes(map[body - 8..body].try_into().unwrap()) as usize;
        let blocks = count.div_ceil(block_size.max(1)) as usize;
        if block_size == 0
            || offsets_at < HEADER
            || offsets_at.checked_add((blocks + 1) * 8) != Some(body - 8)
        {
            return Err(err("inconsistent header".into()));
        }
        let seg = Segment {
            map: Arc::new(map),
            first_id,
            count,
            block_size,
            offsets_at,
            blocks,
        };
        if seg.offset(blocks) as usize + HEADER != offsets_at {
            return Err(err("block offsets do not end at the offset table".into()));
        }
        Ok(seg)
    }

    /// First id of the segment.
    pub fn first_id(&self) -> u32 {
        self.first_id
    }

    /// Terms in the segment.
    pub fn count(&self) -> u32 {
        self.count
    }

    fn offset(&self, block: usize) -> u64 {
        let p = self.offsets_at + 8 * block;
        u64::from_le_bytes(self.map[p..p + 8].try_into().unwrap())
    }

    fn block_bytes(&self, block: usize) -> &[u8] {
        let (a, b) = (self.offset(block) as usize, self.offset(block + 1) as usize);
        let (a, b) = (HEADER + a.min(b), HEADER + b);
        &self.map[a.min(self.offsets_at)..b.min(self.offsets_at)]
    }

    /// Decodes the keys of `block` one by one, calling `f(i, key)`; stops when `f`
    /// returns false. Returns false when the block is malformed.
    fn scan(&self, block: usize, f: impl FnMut(usize, &[u8]) -> bool) -> bool {
        // Room for typical keys up front: one allocation per scan instead of regrowth.
        self.scan_into(block, &mut Vec::with_capacity(128), f)
    }

    /// [`Segment::scan`] rebuilding the keys in `key` (cleared first): a caller decoding
    /// many keys reuses one buffer.
    fn scan_into(
        &self,
        block: usize,
        key: &mut Vec<u8>,
        mut f: impl FnMut(usize, &[u8]) -> bool,
    ) -> bool {
        let bytes = self.block_bytes(block);
        let n =
            (self.count as usize - block * self.block_size as usize).min(self.block_size as usize);
        key.clear();
        let mut pos = 0;
        for i in 0..n {
            let shared = if i == 0 {
                0
            } else {
                match get_varint(bytes, &mut pos) {
                    Some(s) if s as usize <= key.len() => s as usize,
                    _ => return false,
                }
            };
            let Some(len) = get_varint(bytes, &mut pos) else {
                return false;
            };
            let Some(rest) = bytes.get(pos..pos.saturating_add(len as usize)) else {
                return false;
            };
            pos += len as usize;
            key.truncate(shared);
            key.extend_from_slice(rest);
            if !f(i, key) {
                break;
            }
        }
        true
    }

    fn first_key(&self, block: usize) -> Option<&[u8]> {
        let bytes = self.block_bytes(block);
        let mut pos = 0;
        let len = get_varint(bytes, &mut pos)? as usize;
        bytes.get(pos..pos + len)
    }

    /// The key of `id`, if the segment holds it.
    pub fn key(&self, id: u32) -> Option<Vec<u8>> {
        self.with_key(id, <[u8]>::to_vec)
    }

    /// `f` of the key of `id` (borrowed from the decoding buffer), if the segment holds it.
    fn with_key<T>(&self, id: u32, f: impl FnOnce(&[u8]) -> T) -> Option<T> {
        self.with_key_in(id, &mut Vec::with_capacity(128), f)
    }

    /// The block of `id` and its position in the block, if the segment holds `id`.
    fn locate(&self, id: u32) -> Option<(usize, usize)> {
        let rank = id.checked_sub(self.first_id)?;
        (rank < self.count).then(|| {
            (
                (rank / self.block_size) as usize,
                (rank % self.block_size) as usize,
            )
        })
    }

    /// Hints the cache to fetch the offset-table entry of `id`'s block.
    fn prefetch_offset(&self, id: u32) {
        if let Some((block, _)) = self.locate(id) {
            prefetch(self.map[self.offsets_at..].as_ptr().wrapping_add(8 * block));
        }
    }

    /// Hints the cache to fetch the first bytes of `id`'s block: reads the block's offset
    /// (prefetched earlier by [`Segment::prefetch_offset`]).
    fn prefetch_block(&self, id: u32) {
        if let Some((block, _)) = self.locate(id) {
            let start = self.map[HEADER..]
                .as_ptr()
                .wrapping_add(self.offset(block) as usize);
            // A block of 16 IRIs is ~100-200 bytes: its first lines hold most wanted keys.
            prefetch(start);
            prefetch(start.wrapping_add(64));
        }
    }

    /// [`Segment::with_key`] decoding in `key`.
    fn with_key_in<T>(&self, id: u32, key: &mut Vec<u8>, f: impl FnOnce(&[u8]) -> T) -> Option<T> {
        let (block, within) = self.locate(id)?;
        let (mut f, mut found) = (Some(f), None);
        self.scan_into(block, key, |i, k| {
            if i == within {
                found = f.take().map(|f| f(k));
                false
            } else {
                true
            }
        });
        found
    }

    /// The id of `key`, if the segment holds it.
    pub fn id(&self, key: &[u8]) -> Option<u32> {
        // Last block whose first key is <= key.
        let (mut lo, mut hi) = (0usize, self.blocks);
        while lo < hi {
            let mid = (lo + hi) / 2;
            if self.first_key(mid)? <= key {
                lo = mid + 1;
            } else {
                hi = mid;
            }
        }
        let block = lo.checked_sub(1)?;
        let mut found = None;
        self.scan(block, |i, k| match k.cmp(key) {
            std::cmp::Ordering::Less => true,
            std::cmp::Ordering::Equal => {
                found = Some(i);
                false
            }
            std::cmp::Ordering::Greater => false,
        });
        found.map(|i| self.first_id + (block * self.block_size as usize + i) as u32)
    }

    /// Decodes every block once; false at the first malformed one (a deep check).
    pub fn check_blocks(&self) -> bool {
        (0..self.blocks).all(|b| self.scan(b, |_, _| true))
    }
}

/// Term ↔ id over all segments of a store.
#[derive(Debug, Default)]
pub struct Dictionary {
    segments: Vec<Segment>,
    len: u32,
}

impl Dictionary {
    /// A dictionary of `segments`, which must number ids consecutively from 0.
    pub fn from_segments(segments: Vec<Segment>) -> Result<Dictionary, DictionaryError> {
        let mut len = 0u32;
        for (i, s) in segments.iter().enumerate() {
            let err = |reason: String| DictionaryError {
                file: format!("segment {i}"),
                reason,
            };
            if s.first_id != len {
                return Err(err(format!(
                    "segment starts at id {} but {} ids precede it",
                    s.first_id, len
                )));
            }
            len = len
                .checked_add(s.count)
                .ok_or_else(|| err("more than 2^32 terms".into()))?;
        }
        Ok(Dictionary { segments, len })
    }

    /// The id of `term`, if it occurs in the store.
    pub fn id(&self, term: TermRef<'_>) -> Option<u32> {
        self.id_of_key(&terms::encode(term))
    }

    /// The id of a term key ([`crate::rdf::terms`]).
    pub(crate) fn id_of_key(&self, key: &[u8]) -> Option<u32> {
        self.segments.iter().find_map(|s| s.id(key))
    }

    /// The term of `id`.
    pub fn term(&self, id: u32) -> Option<Term> {
        // Decoded from the block's buffer: answers decode a term per row.
        self.segment_of(id)?.with_key(id, terms::decode)?
    }

    /// The terms of `ids`, in order, as [`Dictionary::term`] gives them one by one.
    ///
    /// An answer's ids are spread over the dictionary: each decode misses the cache twice
    /// in a row (its block's offset, then the block), ~0.1-0.2 µs each once a query's walk
    /// has evicted the answer's lines (w19 at 100M: 605 ids in 604 blocks, 70 % of
    /// `term`'s time on those two loads). Here the offset of the id `OFFSET_AHEAD`
    /// positions later and the block of the id `BLOCK_AHEAD` later are prefetched, so
    /// the misses of several ids overlap, and one key buffer serves all ids.
    pub fn terms(&self, ids: &[u32]) -> Vec<Option<Term>> {
        let mut key = Vec::with_capacity(128);
        let mut out = Vec::with_capacity(ids.len());
        for (i, &id) in ids.iter().enumerate() {
            if let Some(&far) = ids.get(i + OFFSET_AHEAD) {
                if let Some(s) = self.segment_of(far) {
                    s.prefetch_offset(far);
                }
            }
            if let Some(&near) = ids.get(i + BLOCK_AHEAD) {
                if let Some(s) = self.segment_of(near) {
                    s.prefetch_block(near);
                }
            }
            out.push(
                self.segment_of(id)
                    .and_then(|s| s.with_key_in(id, &mut key, terms::decode))
                    .flatten(),
            );
        }
        out
    }

    /// The key of `id`.
    pub fn key(&self, id: u32) -> Option<Vec<u8>> {
        self.segment_of(id)?.key(id)
    }

    /// The segment whose id range would hold `id`.
    fn segment_of(&self, id: u32) -> Option<&Segment> {
        let i = self.segments.partition_point(|s| s.first_id <= id);
        self.segments.get(i.checked_sub(1)?)
    }

    /// Number of terms (= the store's node count).
    pub fn len(&self) -> u32 {
        self.len
    }

    /// True when the dictionary holds no term.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The segments, oldest first.
    pub fn segments(&self) -> &[Segment] {
        &self.segments
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn common_prefix_matches_a_byte_loop() {
        let keys: [&[u8]; 6] = [
            b"",
            b"<http://www.wikidata.org/entity/Q1",
            b"<http://www.wikidata.org/entity/Q12",
            b"<http://www.wikidata.org/entity/Q2",
            b"<http://www.wikidata.org/prop/P31",
            b"@en\0chat",
        ];
        for a in keys {
            for b in keys {
                let slow = a.iter().zip(b).take_while(|(x, y)| x == y).count();
                assert_eq!(super::common_prefix(a, b), slow, "{a:?} {b:?}");
            }
        }
    }

    use super::*;

    #[test]
    fn segment_round_trip_and_lookups() {
        let mut keys: Vec<Vec<u8>> = (0..1000)
            .map(|i| format!("<http://www.wikidata.org/entity/Q{i}").into_bytes())
            .collect();
        keys.push(b"\"".to_vec()); // the empty simple literal
        keys.sort();
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("d");
        let (bytes, crc) = write_segment(&path, 7, keys.iter().map(|k| k.as_slice())).unwrap();
        assert_eq!(bytes, std::fs::metadata(&path).unwrap().len());
        let seg = Segment::open(&path, Some(crc)).unwrap();
        assert!(seg.check_blocks());
        for (i, k) in keys.iter().enumerate() {
            assert_eq!(seg.key(7 + i as u32).as_ref(), Some(k));
            assert_eq!(seg.id(k), Some(7 + i as u32));
        }
        assert_eq!(seg.id(b"<http://www.wikidata.org/entity/Q5x"), None);
        assert_eq!(seg.id(b""), None);
        assert_eq!(seg.id(b"~"), None);
        assert_eq!(seg.key(6), None);
        assert_eq!(seg.key(7 + keys.len() as u32), None);
        // Prefix sharing pays: far fewer bytes than the raw keys.
        let raw: usize = keys.iter().map(|k| k.len()).sum();
        assert!((bytes as usize) < raw / 2, "{bytes} vs {raw}");
    }

    #[test]
    fn parallel_pieces_read_back_across_piece_and_round_boundaries() {
        // 300_001 keys: several rounds of 3 pieces of `PIECE_KEYS`, the last piece and the
        // last block partial; every key must come back under its id.
        let n = 300_001u32;
        let keys: Vec<Vec<u8>> = (0..n)
            .map(|i| format!("<http://www.wikidata.org/entity/Q{i:09}").into_bytes())
            .collect();
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("d");
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(3)
            .build()
            .unwrap();
        let (bytes, crc) = pool
            .install(|| write_segment_of(&path, 5, &keys, |k| k.as_slice()))
            .unwrap();
        assert_eq!(bytes, std::fs::metadata(&path).unwrap().len());
        let seg = Segment::open(&path, Some(crc)).unwrap();
        assert!(seg.check_blocks());
        assert_eq!(seg.count(), n);
        for (i, k) in keys.iter().enumerate() {
            assert_eq!(seg.key(5 + i as u32).as_ref(), Some(k), "key {i}");
        }
        assert_eq!(
            seg.id(&keys[PIECE_KEYS * 3]),
            Some(5 + PIECE_KEYS as u32 * 3)
        );
        // The same bytes as one sequential piece would give.
        let one = dir.path().join("one");
        let one_pool = rayon::ThreadPoolBuilder::new()
            .num_threads(1)
            .build()
            .unwrap();
        one_pool
            .install(|| write_segment(&one, 5, keys.iter().map(|k| k.as_slice())))
            .unwrap();
        assert_eq!(std::fs::read(&one).unwrap(), std::fs::read(&path).unwrap());
    }

    /// The batch decode gives what `term` gives id by id: any order, repeats, ids in
    /// either of two segments, ids past the end, batches shorter than the prefetch
    /// distances.
    #[test]
    fn terms_in_a_batch_match_term_by_term() {
        use proptest::prelude::*;
        let dir = tempfile::tempdir().unwrap();
        let mut segments = Vec::new();
        let mut first = 0u32;
        for (s, n) in [(0, 300u32), (1, 45)] {
            let mut keys: Vec<Vec<u8>> = (0..n)
                .map(|i| {
                    let iri = format!("http://www.wikidata.org/entity/Q{s}_{i}");
                    terms::encode(oxrdf::NamedNode::new_unchecked(iri).as_ref().into())
                })
                .collect();
            keys.sort();
            let path = dir.path().join(format!("d{s}"));
            write_segment(&path, first, keys.iter().map(|k| k.as_slice())).unwrap();
            segments.push(Segment::open(&path, None).unwrap());
            first += n;
        }
        let dict = Dictionary::from_segments(segments).unwrap();
        let len = dict.len();
        proptest!(|(ids in prop::collection::vec(0..len + 10, 0..100))| {
            let one: Vec<Option<Term>> = ids.iter().map(|&id| dict.term(id)).collect();
            prop_assert_eq!(dict.terms(&ids), one);
        });
        let all: Vec<u32> = (0..len).collect();
        assert!(dict.terms(&all).iter().all(Option::is_some));
    }

    /// Keys with prefixes shared to every depth (a two-letter alphabet) read back as
    /// written, at every position of a block.
    #[test]
    fn keys_with_any_shared_prefix_read_back() {
        use proptest::prelude::*;
        let dir = tempfile::tempdir().unwrap();
        proptest!(ProptestConfig::with_cases(32), |(raw in prop::collection::btree_set(
            prop::collection::vec(prop::sample::select(vec![b'a', b'b']), 0..12), 1..80))| {
            let keys: Vec<Vec<u8>> = raw.into_iter().collect();
            let path = dir.path().join("d");
            write_segment(&path, 3, keys.iter().map(|k| k.as_slice())).unwrap();
            let seg = Segment::open(&path, None).unwrap();
            for (i, k) in keys.iter().enumerate() {
                prop_assert_eq!(seg.key(3 + i as u32), Some(k.clone()));
            }
        });
    }

    #[test]
    fn empty_segment_and_corruption() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("d");
        write_segment(&path, 0, std::iter::empty()).unwrap();
        let seg = Segment::open(&path, None).unwrap();
        assert_eq!((seg.count(), seg.id(b"<x")), (0, None));
        let mut bytes = std::fs::read(&path).unwrap();
        bytes[9] ^= 1;
        std::fs::write(&path, &bytes).unwrap();
        let e = Segment::open(&path, None).unwrap_err();
        assert!(e.reason.contains("checksum"), "{e}");
    }
}
