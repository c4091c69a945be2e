//! Sorting a load's new term keys by their bytes, for the dictionary's front-coded order.
//!
//! **Why not a comparison sort.** Term keys share long prefixes (a tag byte, then
//! `http://www.wikidata.org/entity/Q…`), so every comparison of a comparison sort walks
//! the shared prefix of two keys that lie far apart in memory: two cache misses and a
//! 30-40 byte `memcmp` per comparison, `n log n` times. This sort is a most-significant-
//! first radix sort over 8-byte chunks instead: each pass reads every key of a group
//! once, skips the prefix the whole group shares, and sorts `(chunk, index)` records
//! that sit in one array (no pointer chased per comparison). Groups whose chunks are
//! equal go down one level, 8 bytes further on; small groups fall back to comparisons.

use rayon::prelude::*;

use super::dictionary::common_prefix;

/// Groups of at most this many keys are sorted by comparing their bytes.
const SMALL: usize = 64;

/// Groups of at least this many keys run their passes on several threads.
const PARALLEL: usize = 1 << 15;

/// Sorts `keys` by their byte strings (the payloads ride along). Equal keys end up
/// adjacent in an unspecified order.
///
/// ```ignore
/// let mut keys = vec![(&b"b"[..], 0), (&b"ab"[..], 1), (&b"a"[..], 2)];
/// sort_keys(&mut keys);
/// assert_eq!(keys.iter().map(|k| k.1).collect::<Vec<_>>(), [2, 1, 0]);
/// ```
pub(crate) fn sort_keys<T: Copy + Send + Sync>(keys: &mut [(&[u8], T)]) {
    sort_from(keys, 0);
}

/// One key's place in a pass: the 8 bytes at the group's depth (big-endian, zero past
/// the key's end), how many of them the key has (a key that ends inside the chunk sorts
/// before the longer keys with the same bytes), and its index in the group.
#[derive(Clone, Copy)]
struct Place {
    chunk: u64,
    len: u8,
    index: u32,
}

/// Radix order of a place: its chunk, then its length (rdst's level 0 is the least
/// significant byte); the index is payload.
impl rdst::RadixKey for Place {
    const LEVELS: usize = 9;

    #[inline]
    fn get_level(&self, level: usize) -> u8 {
        match level {
            0 => self.len,
            _ => (self.chunk >> ((level - 1) * 8)) as u8,
        }
    }
}

impl Place {
    fn of(index: usize, key: &[u8], depth: usize) -> Place {
        let rest = &key[depth..];
        let len = rest.len().min(8);
        let mut bytes = [0u8; 8];
        bytes[..len].copy_from_slice(&rest[..len]);
        Place {
            chunk: u64::from_be_bytes(bytes),
            len: len as u8,
            index: index as u32,
        }
    }

    /// Whether two places tie on the bytes of this pass and both keys go on.
    fn continues_with(&self, other: &Place) -> bool {
        self.len == 8 && self.chunk == other.chunk && self.len == other.len
    }
}

/// Sorts `keys`, which share their first `depth` bytes.
fn sort_from<T: Copy + Send + Sync>(keys: &mut [(&[u8], T)], depth: usize) {
    if keys.len() <= SMALL {
        keys.sort_unstable_by(|a, b| a.0[depth..].cmp(&b.0[depth..]));
        return;
    }
    debug_assert!(keys.len() <= u32::MAX as usize);
    let parallel = keys.len() >= PARALLEL;
    let depth = depth + shared_prefix(keys, depth);

    // Groups below `PARALLEL` keys stay on one thread: each pass is one task then.
    let mut places: Vec<Place> = keys
        .par_iter()
        .with_min_len(PARALLEL)
        .enumerate()
        .map(|(i, k)| Place::of(i, k.0, depth))
        .collect();
    {
        use rdst::RadixSort;
        places.radix_sort_builder().with_parallel(parallel).sort();
    }
    // Runs of keys that tie on all 8 bytes are sorted 8 bytes further on. The runs are
    // found before the keys are permuted, so that the places are freed first: the places
    // and the permuted copy of the keys (16 bytes a key each) are never held together.
    let mut runs: Vec<(usize, usize)> = Vec::new();
    let mut a = 0;
    while a < places.len() {
        let mut b = a + 1;
        while b < places.len() && places[a].continues_with(&places[b]) {
            b += 1;
        }
        if b - a > 1 {
            runs.push((a, b));
        }
        a = b;
    }
    let order: Vec<u32> = places
        .par_iter()
        .with_min_len(PARALLEL)
        .map(|p| p.index)
        .collect();
    drop(places);
    let ordered: Vec<(&[u8], T)> = order
        .par_iter()
        .with_min_len(PARALLEL)
        .map(|&i| keys[i as usize])
        .collect();
    drop(order);
    keys.par_iter_mut()
        .zip(ordered.par_iter())
        .with_min_len(PARALLEL)
        .for_each(|(k, o)| *k = *o);
    drop(ordered);

    let mut groups: Vec<&mut [(&[u8], T)]> = Vec::with_capacity(runs.len());
    let mut rest = keys;
    let mut taken = 0;
    for (a, b) in runs {
        let (_, tail) = std::mem::take(&mut rest).split_at_mut(a - taken);
        let (group, tail) = tail.split_at_mut(b - a);
        groups.push(group);
        rest = tail;
        taken = b;
    }
    if parallel {
        groups.into_par_iter().for_each(|g| sort_from(g, depth + 8));
    } else {
        for g in groups {
            sort_from(g, depth + 8);
        }
    }
}

/// Length of the prefix that every key shares beyond `depth`.
fn shared_prefix<T: Sync>(keys: &[(&[u8], T)], depth: usize) -> usize {
    let first = &keys[0].0[depth..];
    keys.par_iter()
        .with_min_len(PARALLEL)
        .map(|k| common_prefix(first, &k.0[depth..]))
        .min()
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn check(keys: Vec<Vec<u8>>) {
        let mut ours: Vec<(&[u8], usize)> =
            keys.iter().enumerate().map(|(i, k)| (&k[..], i)).collect();
        sort_keys(&mut ours);
        let mut expect: Vec<&[u8]> = keys.iter().map(|k| &k[..]).collect();
        expect.sort();
        let got: Vec<&[u8]> = ours.iter().map(|k| k.0).collect();
        assert_eq!(got, expect);
        // Payloads stay with their keys.
        assert!(ours.iter().all(|&(k, i)| keys[i] == k));
    }

    #[test]
    fn sorts_keys_with_long_shared_prefixes_and_nul_bytes() {
        // Entity-like IRIs (shared 33-byte prefix), keys that are prefixes of others,
        // keys that differ only by trailing NULs (a zero-padded chunk must not tie
        // them), and duplicates.
        let mut keys: Vec<Vec<u8>> = Vec::new();
        for i in (0..20_000u32).rev() {
            keys.push(format!("\x01http://www.wikidata.org/entity/Q{i}").into_bytes());
        }
        for i in 0..3_000u32 {
            keys.push(format!("\x04http://www.w3.org/2001/XMLSchema#integer\0{i}").into_bytes());
        }
        for n in 0..20 {
            let mut k = b"\x02abcdefgh".to_vec();
            k.extend(std::iter::repeat_n(0u8, n));
            keys.push(k);
        }
        keys.push(b"".to_vec());
        keys.push(b"\x01http://www.wikidata.org/entity/Q7".to_vec());
        for i in 0..(PARALLEL as u32 + 10) {
            keys.push(format!("\x03same-prefix-{:0>40}", i % 977).into_bytes());
        }
        check(keys);
    }

    proptest! {
        #[test]
        fn matches_a_comparison_sort(
            keys in proptest::collection::vec(
                proptest::collection::vec(prop_oneof![Just(0u8), Just(1u8), any::<u8>()], 0..24),
                0..400,
            )
        ) {
            check(keys);
        }
    }
}

#[cfg(test)]
mod timing {
    /// Dev measurement (not a test): `K2RPQ_DICT=path/dict-0000.fc cargo test --release
    /// --lib key_sort::timing -- --ignored --nocapture`.
    #[test]
    #[ignore]
    fn compare_with_a_comparison_sort() {
        use rayon::prelude::*;
        let Ok(path) = std::env::var("K2RPQ_DICT") else {
            return;
        };
        let seg = crate::store::dictionary::Segment::open(path.as_ref(), None).unwrap();
        let n = seg.count();
        let mut keys: Vec<Vec<u8>> = (0..n).map(|i| seg.key(i).unwrap()).collect();
        // A load's arena order is first-seen order: shuffle.
        let mut x = 0x9e3779b97f4a7c15u64;
        for i in (1..keys.len()).rev() {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            keys.swap(i, (x % (i as u64 + 1)) as usize);
        }
        let arena: Vec<u8> = keys.concat();
        let mut at = 0;
        let slices: Vec<(&[u8], u32)> = keys
            .iter()
            .enumerate()
            .map(|(i, k)| {
                let s = &arena[at..at + k.len()];
                at += k.len();
                (s, i as u32)
            })
            .collect();
        drop(keys);
        for round in 0..3 {
            let mut a = slices.clone();
            let t = std::time::Instant::now();
            a.par_sort_unstable_by(|p, q| p.0.cmp(q.0));
            let cmp = t.elapsed().as_secs_f64();
            let mut b = slices.clone();
            let t = std::time::Instant::now();
            super::sort_keys(&mut b);
            let radix = t.elapsed().as_secs_f64();
            assert!(a.iter().zip(&b).all(|(p, q)| p.0 == q.0));
            eprintln!(
                "round {round}: {n} keys, {} threads: comparison {cmp:.3}s, radix {radix:.3}s",
                rayon::current_num_threads()
            );
        }
    }
}
