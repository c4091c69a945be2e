//! Word storage that is either owned or borrowed from a memory-mapped file.

use std::ops::Deref;
use std::sync::Arc;

use memmap2::Mmap;

/// A read-only `[u64]` that lives in a `Vec` or inside a memory-mapped file.
///
/// Trees opened from disk borrow their payload from the map, so opening a store
/// costs no copy; trees built in memory own their words.
#[derive(Clone)]
pub struct Words(Repr);

#[derive(Clone)]
enum Repr {
    Owned(Arc<Vec<u64>>),
    Mapped {
        map: Arc<Mmap>,
        offset: usize,
        len: usize,
    },
}

impl Words {
    /// Words owned by this value.
    pub fn owned(words: Vec<u64>) -> Self {
        Words(Repr::Owned(Arc::new(words)))
    }

    /// `len` words starting at byte `offset` of `map`.
    ///
    /// Returns `None` when the range is out of bounds or not 8-byte aligned in memory.
    pub fn mapped(map: Arc<Mmap>, offset: usize, len: usize) -> Option<Self> {
        let end = offset.checked_add(len.checked_mul(8)?)?;
        if end > map.len() || !(map.as_ptr() as usize + offset).is_multiple_of(8) {
            return None;
        }
        Some(Words(Repr::Mapped { map, offset, len }))
    }

    /// Bytes held (the payload, not the map around it).
    pub fn bytes(&self) -> u64 {
        self.len() as u64 * 8
    }
}

impl Deref for Words {
    type Target = [u64];
    fn deref(&self) -> &[u64] {
        match &self.0 {
            Repr::Owned(v) => v,
            Repr::Mapped { map, offset, len } => {
                // SAFETY: `mapped` checked bounds and 8-byte alignment; the map is
                // read-only and kept alive by the Arc for as long as `self`.
                unsafe { std::slice::from_raw_parts(map.as_ptr().add(*offset) as *const u64, *len) }
            }
        }
    }
}

impl std::fmt::Debug for Words {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Words({} words)", self.len())
    }
}

impl PartialEq for Words {
    fn eq(&self, other: &Self) -> bool {
        **self == **other
    }
}
