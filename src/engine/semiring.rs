//! The semirings of the paper's Table 1, plus exact counts: the CPU engine's definitions
//! here, the GPU kernels' in `cuda/include/semirings.cuh` (one struct per semiring, and
//! a fifth for bit-packed Boolean batches). A product's output starts at the semiring's
//! [`Semiring::zero`] on both.

use std::fmt::Debug;

/// Values a product vector may hold: plain 32-bit data that the GPU copies as is.
pub trait Element:
    Copy
    + Send
    + Sync
    + PartialEq
    + Debug
    + Default
    + 'static
    + cudarc::driver::DeviceRepr
    + cudarc::driver::ValidAsZeroBits
{
    /// The value's 32 bits as the device stores them.
    fn bits(self) -> u32;
}
impl Element for f32 {
    fn bits(self) -> u32 {
        self.to_bits()
    }
}
impl Element for u32 {
    fn bits(self) -> u32 {
        self
    }
}

/// Names the semiring for kernels and reports.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
pub enum SemiringKind {
    /// (+, ×) over f32.
    PlusTimes,
    /// (+, ×) over u32, wrapping: exact path counts.
    Counting,
    /// (∨, ∧) over {0, 1} held in u32.
    Boolean,
    /// (min, +) over non-negative f32 with ∞: hop distances.
    Tropical,
}

/// A semiring whose matrix is Boolean with every edge of weight `1̄`: a non-zero
/// `A[i][j]` contributes `w ⊗ x[j]` to `y[i]` by the semiring's addition.
pub trait Semiring: Copy + Send + Sync + 'static {
    /// Vector entries.
    type Elem: Element;
    /// Which semiring (kernels are specialised on it).
    const KIND: SemiringKind;
    /// The additive identity `0̄` (what `y` starts from, on the GPU too).
    fn zero() -> Self::Elem;
    /// `a ⊕ b`.
    fn add(a: Self::Elem, b: Self::Elem) -> Self::Elem;
    /// `w ⊗ x`, the contribution of a non-zero whose input entry is `x`.
    fn contribution(x: Self::Elem) -> Self::Elem;
}

/// Plus-times over f32 (PageRank, power iterations).
#[derive(Clone, Copy, Debug)]
pub struct PlusTimes;
impl Semiring for PlusTimes {
    type Elem = f32;
    const KIND: SemiringKind = SemiringKind::PlusTimes;
    fn zero() -> f32 {
        0.0
    }
    fn add(a: f32, b: f32) -> f32 {
        a + b
    }
    fn contribution(x: f32) -> f32 {
        x
    }
}

/// Plus-times over u32 with wrapping addition: exact path counts below 2^32.
#[derive(Clone, Copy, Debug)]
pub struct Counting;
impl Semiring for Counting {
    type Elem = u32;
    const KIND: SemiringKind = SemiringKind::Counting;
    fn zero() -> u32 {
        0
    }
    fn add(a: u32, b: u32) -> u32 {
        a.wrapping_add(b)
    }
    fn contribution(x: u32) -> u32 {
        x
    }
}

/// Boolean (∨, ∧): reachability; any non-zero input counts as 1.
#[derive(Clone, Copy, Debug)]
pub struct Boolean;
impl Semiring for Boolean {
    type Elem = u32;
    const KIND: SemiringKind = SemiringKind::Boolean;
    fn zero() -> u32 {
        0
    }
    fn add(a: u32, b: u32) -> u32 {
        a.max(b)
    }
    fn contribution(x: u32) -> u32 {
        (x != 0) as u32
    }
}

/// Tropical (min, +) with unit edge length: one Bellman–Ford relaxation per product.
/// Inputs are non-negative or `+∞` (so their bit patterns order like integers, which is
/// what the GPU's integer `atomicMin` relies on).
#[derive(Clone, Copy, Debug)]
pub struct Tropical;
impl Semiring for Tropical {
    type Elem = f32;
    const KIND: SemiringKind = SemiringKind::Tropical;
    fn zero() -> f32 {
        f32::INFINITY
    }
    fn add(a: f32, b: f32) -> f32 {
        a.min(b)
    }
    fn contribution(x: f32) -> f32 {
        1.0 + x
    }
}
