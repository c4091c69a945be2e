//! Host-side bit-packed Boolean batches.

/// A `rows × words` bit matrix, row-major: `64·words` sources (columns of bits) per row.
///
/// ```
/// use k2rpq::engine::BitMatrix;
/// let mut m = BitMatrix::zeroed(10, 2);
/// m.set(3, 70);
/// assert!(m.get(3, 70) && !m.get(3, 6));
/// assert_eq!(m.count_ones(), 1);
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BitMatrix {
    rows: usize,
    words: usize,
    data: Vec<u64>,
}

impl BitMatrix {
    /// All zero.
    pub fn zeroed(rows: usize, words: usize) -> Self {
        BitMatrix {
            rows,
            words,
            data: vec![0; rows * words],
        }
    }

    /// From row-major words; `data.len()` must be `rows · words`.
    pub fn from_words(rows: usize, words: usize, data: Vec<u64>) -> Self {
        assert_eq!(
            data.len(),
            rows * words,
            "BitMatrix::from_words: wrong length"
        );
        BitMatrix { rows, words, data }
    }

    /// Rows (nodes).
    pub fn rows(&self) -> usize {
        self.rows
    }
    /// Words per row.
    pub fn words(&self) -> usize {
        self.words
    }
    /// `(rows, words)`.
    pub fn shape(&self) -> (usize, usize) {
        (self.rows, self.words)
    }
    /// The words, row-major.
    pub fn as_words(&self) -> &[u64] {
        &self.data
    }
    /// The words, row-major, mutable.
    pub fn as_words_mut(&mut self) -> &mut [u64] {
        &mut self.data
    }
    /// Consumes the matrix into its words.
    pub fn into_words(self) -> Vec<u64> {
        self.data
    }
    /// The words of one row.
    pub fn row(&self, r: usize) -> &[u64] {
        &self.data[r * self.words..(r + 1) * self.words]
    }
    /// Bit `(r, s)`.
    pub fn get(&self, r: usize, s: usize) -> bool {
        self.data[r * self.words + s / 64] >> (s % 64) & 1 != 0
    }
    /// Sets bit `(r, s)`.
    pub fn set(&mut self, r: usize, s: usize) {
        self.data[r * self.words + s / 64] |= 1 << (s % 64);
    }
    /// Set bits.
    pub fn count_ones(&self) -> u64 {
        self.data.iter().map(|w| w.count_ones() as u64).sum()
    }
    /// Whether no bit is set.
    pub fn is_empty(&self) -> bool {
        self.data.iter().all(|&w| w == 0)
    }
}
