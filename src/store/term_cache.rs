//! Terms decoded from the dictionary and ids looked up in it, kept for every query over a
//! store: an evaluator decodes a term at each row it hands out and at each comparison of
//! an `ORDER BY`, and a front-coded decode costs a block scan and a UTF-8 check (a sixth
//! of a `DESCRIBE` of three CoDEx-M items). Queries repeat their terms, across requests
//! too, and a store never changes once opened, so what one query decoded serves the next.

use std::hash::{BuildHasher, Hash};
use std::sync::Mutex;

use oxrdf::Term;
use rustc_hash::{FxBuildHasher, FxHashMap};

/// Shards of each map: requests on many threads at once take different locks.
const SHARDS: usize = 16;

/// Entries a shard keeps; past that it is emptied and fills again, so that memory stays
/// bounded (16 × 4,096 terms of each kind, a few MiB).
const SHARD_ENTRIES: usize = 1 << 12;

/// A bounded map split into locked shards.
struct Sharded<K, V> {
    shards: Vec<Mutex<FxHashMap<K, V>>>,
}

impl<K: Hash + Eq + Clone, V: Clone> Sharded<K, V> {
    fn new() -> Self {
        Sharded {
            shards: (0..SHARDS).map(|_| Mutex::default()).collect(),
        }
    }

    /// The value kept for `key`, or `make`'s (kept for the next call).
    fn get_or(&self, key: &K, make: impl FnOnce() -> V) -> V {
        let shard = &self.shards[FxBuildHasher.hash_one(key) as usize % SHARDS];
        if let Some(v) = shard.lock().unwrap_or_else(|p| p.into_inner()).get(key) {
            return v.clone();
        }
        // Made outside the lock: a decode is slower than the look-ups it would block.
        let v = make();
        let mut map = shard.lock().unwrap_or_else(|p| p.into_inner());
        if map.len() >= SHARD_ENTRIES {
            map.clear();
        }
        map.insert(key.clone(), v.clone());
        v
    }
}

/// The store's kept terms and ids.
pub(crate) struct TermCache {
    terms: Sharded<u32, Option<Term>>,
    ids: Sharded<Term, Option<u32>>,
}

impl TermCache {
    pub(crate) fn new() -> Self {
        TermCache {
            terms: Sharded::new(),
            ids: Sharded::new(),
        }
    }

    /// The term of `id`, from `decode` the first time.
    pub(crate) fn term(&self, id: u32, decode: impl FnOnce() -> Option<Term>) -> Option<Term> {
        self.terms.get_or(&id, decode)
    }

    /// The id of `term`, from `look_up` the first time.
    pub(crate) fn id(&self, term: &Term, look_up: impl FnOnce() -> Option<u32>) -> Option<u32> {
        self.ids.get_or(term, look_up)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kept_values_are_made_once_and_memory_stays_bounded() {
        let cache = TermCache::new();
        let t = Term::from(oxrdf::NamedNode::new_unchecked("http://e/a"));
        let mut made = 0;
        for _ in 0..3 {
            let got = cache.term(7, || {
                made += 1;
                Some(t.clone())
            });
            assert_eq!(got.as_ref(), Some(&t));
        }
        assert_eq!(made, 1);
        assert_eq!(cache.id(&t, || Some(7)), Some(7));
        assert_eq!(cache.id(&t, || unreachable!()), Some(7));
        // An absent term is kept as absent.
        let absent = Term::from(oxrdf::NamedNode::new_unchecked("http://e/none"));
        assert_eq!(cache.id(&absent, || None), None);
        assert_eq!(cache.id(&absent, || unreachable!()), None);
        for id in 0..(SHARDS * SHARD_ENTRIES * 2) as u32 {
            cache.term(id, || None);
        }
        let kept: usize = cache
            .terms
            .shards
            .iter()
            .map(|s| s.lock().unwrap().len())
            .sum();
        assert!(kept <= SHARDS * SHARD_ENTRIES, "{kept}");
    }
}
