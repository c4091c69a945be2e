//! A reader or writer that takes the CRC-32 and the length of what passes through it, so
//! that a file's checksum costs no second pass over its bytes.

use std::io::{self, Read, Write};

/// Checksums and counts the bytes read from or written to `inner`.
pub(crate) struct Checksummed<T> {
    /// The reader or writer underneath.
    pub(crate) inner: T,
    crc: crc32fast::Hasher,
    /// How many bytes have passed.
    pub(crate) bytes: u64,
}

impl<T> Checksummed<T> {
    /// Nothing passed yet.
    pub(crate) fn new(inner: T) -> Checksummed<T> {
        Checksummed {
            inner,
            crc: crc32fast::Hasher::new(),
            bytes: 0,
        }
    }

    /// The CRC-32 of the bytes so far.
    pub(crate) fn crc32(&self) -> u32 {
        self.crc.clone().finalize()
    }
}

impl<W: Write> Write for Checksummed<W> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let n = self.inner.write(buf)?;
        self.crc.update(&buf[..n]);
        self.bytes += n as u64;
        Ok(n)
    }
    fn flush(&mut self) -> io::Result<()> {
        self.inner.flush()
    }
}

impl<R: Read> Read for Checksummed<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.crc.update(&buf[..n]);
        self.bytes += n as u64;
        Ok(n)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn both_ways_agree_with_a_whole_hash() {
        let data: Vec<u8> = (0..10_000u32).map(|i| (i * 31 % 251) as u8).collect();
        let mut w = Checksummed::new(Vec::new());
        for piece in data.chunks(777) {
            w.write_all(piece).unwrap();
        }
        assert_eq!(w.bytes, data.len() as u64);
        assert_eq!(w.crc32(), crc32fast::hash(&data));
        let mut r = Checksummed::new(&data[..]);
        io::copy(&mut r, &mut io::sink()).unwrap();
        assert_eq!((r.bytes, r.crc32()), (w.bytes, w.crc32()));
    }
}
