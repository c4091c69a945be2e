//! Measures what decoding an answer's terms costs, and where: the ids of one query's
//! answer decoded many times through `Dictionary::term`, `Dictionary::terms` (batch,
//! prefetched), the key only, and a copy of the block scan over (a) the memory-mapped
//! file and (b) a copy of the file in an anonymous mapping advised `MADV_HUGEPAGE` (the
//! TLB hypothesis), each with and without prefetching; "warm" repeats the decode back to
//! back, "cold" writes 32 MiB of other memory between rounds, as a query's walk does
//! between two decodes of its answer in a benchmark.
//!
//! `cargo run --release --example term_decode -- STORE 'LOG LINE' [ROUNDS]`

use std::time::Instant;

use k2rpq::database::{Database, DatabaseOptions, EngineChoice};
use k2rpq::rpq::{parse_log_line, EvalOptions};

/// A segment's bytes, parsed just enough to scan a block (the file layout of
/// `store::dictionary`).
struct Seg<'a> {
    bytes: &'a [u8],
    first_id: u32,
    count: u32,
    block_size: u32,
    offsets_at: usize,
}

fn varint(b: &[u8], pos: &mut usize) -> usize {
    let mut v = 0usize;
    let mut shift = 0;
    loop {
        let x = b[*pos];
        *pos += 1;
        v |= ((x & 0x7f) as usize) << shift;
        if x < 0x80 {
            return v;
        }
        shift += 7;
    }
}

impl<'a> Seg<'a> {
    fn block_of(&self, id: u32) -> usize {
        ((id - self.first_id) / self.block_size) as usize
    }
    /// Decodes `ids` with the offsets of id i+16 and the blocks of id i+8 prefetched.
    fn keys_prefetched(&self, ids: &[u32], key: &mut Vec<u8>) -> usize {
        let mut sink = 0;
        for i in 0..ids.len() {
            if let Some(&far) = ids.get(i + 16) {
                prefetch(self.bytes[self.offsets_at + 8 * self.block_of(far)..].as_ptr());
            }
            if let Some(&near) = ids.get(i + 8) {
                prefetch(self.bytes[24 + self.offset(self.block_of(near))..].as_ptr());
            }
            self.key(ids[i], key);
            sink += key.len();
        }
        sink
    }
    fn new(bytes: &'a [u8]) -> Self {
        let u32_at = |p: usize| u32::from_le_bytes(bytes[p..p + 4].try_into().unwrap());
        let body = bytes.len() - 4;
        Seg {
            bytes,
            first_id: u32_at(8),
            count: u32_at(12),
            block_size: u32_at(16),
            offsets_at: u64::from_le_bytes(bytes[body - 8..body].try_into().unwrap()) as usize,
        }
    }
    fn offset(&self, block: usize) -> usize {
        let p = self.offsets_at + 8 * block;
        u64::from_le_bytes(self.bytes[p..p + 8].try_into().unwrap()) as usize
    }
    fn key(&self, id: u32, key: &mut Vec<u8>) {
        let rank = id - self.first_id;
        assert!(rank < self.count);
        let (block, within) = (
            (rank / self.block_size) as usize,
            (rank % self.block_size) as usize,
        );
        let b = &self.bytes[24 + self.offset(block)..];
        let mut pos = 0;
        key.clear();
        for i in 0..=within {
            let shared = if i == 0 { 0 } else { varint(b, &mut pos) };
            let len = varint(b, &mut pos);
            key.truncate(shared);
            key.extend_from_slice(&b[pos..pos + len]);
            pos += len;
        }
    }
}

/// Reads `THRASH_BYTES` of other memory between rounds when `thrash`, as a query's walk
/// does between two answers' decodes (evicting cache lines and TLB entries).
const THRASH_BYTES: usize = 32 << 20;

fn time(
    label: &str,
    ids: &[u32],
    rounds: usize,
    thrash: &mut [u64],
    f: impl FnMut(&[u32]) -> usize,
) {
    time_batches(label, ids, rounds, thrash, f)
}

fn time_batches(
    label: &str,
    ids: &[u32],
    rounds: usize,
    thrash: &mut [u64],
    mut f: impl FnMut(&[u32]) -> usize,
) {
    let mut best = f64::MAX;
    let mut all = Vec::new();
    for _ in 0..5 {
        let mut spent = 0.0;
        let mut sink = 0usize;
        for r in 0..rounds {
            if !thrash.is_empty() {
                // Touch every page and line: writes, so the lines leave other caches too.
                for w in thrash.iter_mut().step_by(8) {
                    *w = w.wrapping_add(r as u64);
                }
            }
            let t = Instant::now();
            sink = sink.wrapping_add(f(ids));
            spent += t.elapsed().as_secs_f64();
        }
        std::hint::black_box(sink);
        let ns = spent * 1e9 / (rounds * ids.len()) as f64;
        best = best.min(ns);
        all.push(format!("{ns:.0}"));
    }
    let cold = if thrash.is_empty() { "warm" } else { "cold" };
    println!("{label:44} {cold} {best:6.1} ns/id   ({})", all.join(" "));
}

/// One id at a time.
fn each(mut f: impl FnMut(u32) -> usize) -> impl FnMut(&[u32]) -> usize {
    move |ids| ids.iter().map(|&id| f(id)).fold(0, usize::wrapping_add)
}

#[cfg(target_arch = "x86_64")]
fn prefetch(p: *const u8) {
    // SAFETY: a prefetch is a hint; any address is allowed.
    unsafe { std::arch::x86_64::_mm_prefetch(p as *const i8, std::arch::x86_64::_MM_HINT_T0) }
}

fn main() -> anyhow::Result<()> {
    let mut args = std::env::args().skip(1);
    let dir = args
        .next()
        .expect("usage: term_decode STORE 'LOG LINE' [ROUNDS]");
    let line = args.next().expect("a log line");
    let rounds: usize = args.next().map_or(Ok(200), |s| s.parse())?;
    let db = Database::open(
        dir.as_ref(),
        &DatabaseOptions {
            engine: EngineChoice::Cpu,
            ..Default::default()
        },
    )?;
    let q = parse_log_line(&line)?;
    let a = db.run_log_query(&q, &EvalOptions::default())?;
    let subject_var = matches!(q.subject, k2rpq::rpq::LogEndpoint::Var(_));
    let ids: Vec<u32> = a
        .result
        .pairs
        .iter()
        .map(|&(s, o)| if subject_var { s } else { o })
        .collect();
    let mut blocks: Vec<u32> = ids.iter().map(|&i| i / 16).collect();
    blocks.sort_unstable();
    blocks.dedup();
    let mut pages: Vec<u32> = ids.iter().map(|&i| i / 16 * 8 / 4096).collect();
    pages.sort_unstable();
    pages.dedup();
    println!(
        "{} ids, {} distinct blocks, {} distinct 4 KiB pages of the offset table; ids {}..{}",
        ids.len(),
        blocks.len(),
        pages.len(),
        ids.iter().min().unwrap_or(&0),
        ids.iter().max().unwrap_or(&0)
    );
    let dict = db.store().dictionary();
    let path = std::path::Path::new(&dir).join("dict-0000.fc");
    let file = std::fs::File::open(&path)?;
    // SAFETY: a read-only map of a store file nobody writes.
    let map = unsafe { memmap2::Mmap::map(&file)? };
    let seg = Seg::new(&map);
    let mut anon = memmap2::MmapMut::map_anon(map.len())?;
    let advised = anon.advise(memmap2::Advice::HugePage).is_ok();
    anon.copy_from_slice(&map);
    let seg2 = Seg::new(&anon);
    let huge = std::fs::read_to_string("/proc/self/smaps_rollup")?
        .lines()
        .filter(|l| l.starts_with("AnonHugePages"))
        .collect::<Vec<_>>()
        .join(" ");
    println!("huge pages advised: {advised}; {huge}");
    let mut big = vec![1u64; THRASH_BYTES / 8];
    let mut key = Vec::with_capacity(128);
    for thrash in [&mut [][..], &mut big[..]] {
        time(
            "Dictionary::term",
            &ids,
            rounds,
            thrash,
            each(|id| dict.term(id).map_or(0, |t| std::mem::size_of_val(&t))),
        );
        time_batches("Dictionary::terms (batch)", &ids, rounds, thrash, |ids| {
            dict.terms(ids).iter().map(|t| t.is_some() as usize).sum()
        });
        time(
            "Dictionary::key",
            &ids,
            rounds,
            thrash,
            each(|id| dict.key(id).map_or(0, |k| k.len())),
        );
        time(
            "scan copy, mmap",
            &ids,
            rounds,
            thrash,
            each(|id| {
                seg.key(id, &mut key);
                key.len()
            }),
        );
        time(
            "scan copy, anon huge",
            &ids,
            rounds,
            thrash,
            each(|id| {
                seg2.key(id, &mut key);
                key.len()
            }),
        );
        time_batches("scan copy, mmap, prefetched", &ids, rounds, thrash, |ids| {
            seg.keys_prefetched(ids, &mut key)
        });
        time_batches(
            "scan copy, anon huge, prefetched",
            &ids,
            rounds,
            thrash,
            |ids| seg2.keys_prefetched(ids, &mut key),
        );
    }
    Ok(())
}
