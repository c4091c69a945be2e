//! Morton (Z-order) codes: row bits at odd positions, column bits at even ones.
//!
//! Two bits per tree level, `b = 2·row_bit + col_bit`, so a node's quadrant `b`
//! is also the index of its bit in the parent's signature.

/// Spreads the 32 bits of `v` to the even bit positions of a u64.
#[inline]
pub fn spread(v: u32) -> u64 {
    let mut x = v as u64;
    x = (x | (x << 16)) & 0x0000_FFFF_0000_FFFF;
    x = (x | (x << 8)) & 0x00FF_00FF_00FF_00FF;
    x = (x | (x << 4)) & 0x0F0F_0F0F_0F0F_0F0F;
    x = (x | (x << 2)) & 0x3333_3333_3333_3333;
    x = (x | (x << 1)) & 0x5555_5555_5555_5555;
    x
}

/// Inverse of [`spread`]: gathers the even bits of `x`.
#[inline]
pub fn compact(x: u64) -> u32 {
    let mut x = x & 0x5555_5555_5555_5555;
    x = (x | (x >> 1)) & 0x3333_3333_3333_3333;
    x = (x | (x >> 2)) & 0x0F0F_0F0F_0F0F_0F0F;
    x = (x | (x >> 4)) & 0x00FF_00FF_00FF_00FF;
    x = (x | (x >> 8)) & 0x0000_FFFF_0000_FFFF;
    x = (x | (x >> 16)) & 0x0000_0000_FFFF_FFFF;
    x as u32
}

/// Morton code of cell `(row, col)`.
#[inline]
pub fn encode(row: u32, col: u32) -> u64 {
    (spread(row) << 1) | spread(col)
}

/// `(row, col)` of a Morton code.
#[inline]
pub fn decode(code: u64) -> (u32, u32) {
    (compact(code >> 1), compact(code))
}

/// Level of the first differing bit pair of two distinct codes of a tree of `height`
/// levels: the base-4 digits (levels below the root) they share from the top.
///
/// ```
/// use k2rpq::k2tree::morton::{divergence, encode};
/// // In a 16x16 matrix (4 levels), (0, 0) and (1, 1) share a leaf's parent, 3 levels.
/// assert_eq!(divergence(4, encode(0, 0), encode(1, 1)), 3);
/// assert_eq!(divergence(4, encode(0, 0), encode(15, 3)), 0);
/// ```
#[inline]
pub fn divergence(height: u32, a: u64, b: u64) -> u32 {
    let msb = 63 - (a ^ b).leading_zeros();
    height - 1 - msb / 2
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip() {
        for &(r, c) in &[
            (0, 0),
            (1, 0),
            (0, 1),
            (3, 5),
            (u32::MAX, 7),
            (12345, u32::MAX),
        ] {
            assert_eq!(decode(encode(r, c)), (r, c));
        }
        // The paper's Figure 1 example: cell (3, 5) has code 01 10 11.
        assert_eq!(encode(3, 5), 0b01_10_11);
    }
}
