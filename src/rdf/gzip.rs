//! gzip input inflated a whole member at a time by libdeflate.
//!
//! Dumps cut into members (`k2rpq-bench gen`, `bgzip`, concatenated shards) inflate 1.8
//! times as fast through libdeflate's whole-buffer decoder as through a streaming one
//! (zlib-rs: 0.30 against 0.52 s for 495 MB of N-Triples in 16 members, on the
//! development machine). A whole-buffer decoder needs a member's compressed bytes in
//! memory and room for its output; a member larger than [`MAX_INPUT`] or [`MAX_OUTPUT`]
//! (a dump written by `gzip` or `pigz` is one member) is inflated by the streaming decoder
//! from that member on, as is anything libdeflate rejects, so that errors read as they
//! always did. Finding that a member is too large takes a few tries on growing buffers,
//! about 230 MB of output inflated in vain once per file.

use std::io::{self, BufRead, Cursor, Read};
use std::ptr::NonNull;

use flate2::bufread::MultiGzDecoder;

/// Compressed bytes read ahead before a member is tried.
const READ_AHEAD: usize = 8 << 20;
/// The most compressed bytes held for one member.
const MAX_INPUT: usize = 16 << 20;
/// The most output held for one member.
const MAX_OUTPUT: usize = 128 << 20;
/// The first output buffer's size (grown to the largest member seen).
const FIRST_OUTPUT: usize = 4 << 20;

/// A libdeflate decompressor, freed on drop.
struct Inflater(NonNull<libdeflate_sys::libdeflate_decompressor>);

// SAFETY: a libdeflate decompressor holds no thread-bound state; it is only ever used
// through `&mut self`, so never from two threads at once.
unsafe impl Send for Inflater {}

impl Drop for Inflater {
    fn drop(&mut self) {
        // SAFETY: the pointer came from `libdeflate_alloc_decompressor` and is freed once.
        unsafe { libdeflate_sys::libdeflate_free_decompressor(self.0.as_ptr()) }
    }
}

/// What one member's inflation came to.
enum Member {
    /// Inflated: compressed bytes consumed, bytes written.
    Done(usize, usize),
    /// The output buffer is too small.
    NoRoom,
    /// Invalid, or cut short by the end of the bytes given.
    Bad,
}

impl Inflater {
    fn new() -> Inflater {
        // SAFETY: plain allocation; a null return means out of memory, which ends the
        // process as any other failed allocation does.
        let p = unsafe { libdeflate_sys::libdeflate_alloc_decompressor() };
        match NonNull::new(p) {
            Some(p) => Inflater(p),
            None => std::alloc::handle_alloc_error(std::alloc::Layout::new::<[u8; 32 << 10]>()),
        }
    }

    fn member(&mut self, input: &[u8], output: &mut [u8]) -> Member {
        let (mut read, mut written) = (0usize, 0usize);
        // SAFETY: both pointers and lengths come from live slices, the decompressor is
        // exclusively borrowed, and libdeflate writes at most `output.len()` bytes.
        let result = unsafe {
            libdeflate_sys::libdeflate_gzip_decompress_ex(
                self.0.as_ptr(),
                input.as_ptr().cast(),
                input.len(),
                output.as_mut_ptr().cast(),
                output.len(),
                &mut read,
                &mut written,
            )
        };
        match result {
            libdeflate_sys::libdeflate_result_LIBDEFLATE_SUCCESS => Member::Done(read, written),
            libdeflate_sys::libdeflate_result_LIBDEFLATE_INSUFFICIENT_SPACE => Member::NoRoom,
            _ => Member::Bad,
        }
    }
}

/// The streaming decoder's input once members are no longer taken whole: the bytes
/// already read, then the rest.
type Rest<R> = io::Chain<Cursor<Vec<u8>>, R>;

enum State<R: BufRead> {
    /// Whole members through libdeflate.
    Members {
        inner: R,
        inflater: Inflater,
        /// Compressed bytes; those before `start` are consumed.
        input: Vec<u8>,
        start: usize,
        /// `inner` is exhausted.
        eof: bool,
        /// Compressed bytes of the last member inflated.
        last: usize,
        /// The current member's output; `pos..end` is not yet handed out.
        output: Vec<u8>,
        pos: usize,
        end: usize,
    },
    /// The streaming decoder, from the member libdeflate did not take on.
    Stream(Box<MultiGzDecoder<Rest<R>>>),
    /// Only while switching from one to the other.
    Switching,
}

/// Multi-member gzip from `R`, inflated a whole member at a time where members are of a
/// bounded size, and by a streaming decoder otherwise.
pub struct GzipReader<R: BufRead> {
    state: State<R>,
}

impl<R: BufRead> GzipReader<R> {
    /// A reader of the gzip stream `inner`.
    pub fn new(inner: R) -> GzipReader<R> {
        GzipReader {
            state: State::Members {
                inner,
                inflater: Inflater::new(),
                input: Vec::new(),
                start: 0,
                eof: false,
                last: 0,
                output: Vec::new(),
                pos: 0,
                end: 0,
            },
        }
    }

    /// Hands the unconsumed input to the streaming decoder.
    fn switch(&mut self) {
        if let State::Members {
            inner,
            mut input,
            start,
            ..
        } = std::mem::replace(&mut self.state, State::Switching)
        {
            input.drain(..start);
            self.state = State::Stream(Box::new(MultiGzDecoder::new(
                Cursor::new(input).chain(inner),
            )));
        }
    }
}

/// Reads from `inner` until `input` holds `want` bytes from `start` on (fewer at the end
/// of the stream), moving the unconsumed bytes to the front first. Returns whether the
/// stream has ended.
fn read_ahead(
    inner: &mut dyn Read,
    input: &mut Vec<u8>,
    start: &mut usize,
    want: usize,
) -> io::Result<bool> {
    input.drain(..*start);
    *start = 0;
    Ok(!super::parse::fill(inner, input, want)?)
}

impl<R: BufRead> Read for GzipReader<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        loop {
            let State::Members {
                inner,
                inflater,
                input,
                start,
                eof,
                last,
                output,
                pos,
                end,
            } = &mut self.state
            else {
                return match &mut self.state {
                    State::Stream(stream) => stream.read(buf),
                    _ => unreachable!("the reader switches within one call"),
                };
            };
            if *pos < *end {
                let n = buf.len().min(*end - *pos);
                buf[..n].copy_from_slice(&output[*pos..*pos + n]);
                *pos += n;
                return Ok(n);
            }
            // The next member: read ahead where what is left may not hold it (members
            // tend to be of one size; moving what is left to the front then costs about
            // as many bytes as were consumed, for members of 64 KiB as of megabytes),
            // then try it whole, reading more or growing the output until it fits, or
            // hand it to the streaming decoder.
            if input.len() - *start < (READ_AHEAD / 2).max(*last + *last / 4) && !*eof {
                let want = READ_AHEAD.max(2 * *last).min(MAX_INPUT);
                *eof = read_ahead(inner, input, start, want)?;
            }
            if *start == input.len() {
                return Ok(0);
            }
            if output.is_empty() {
                output.resize(FIRST_OUTPUT, 0);
            }
            let switch = loop {
                match inflater.member(&input[*start..], output) {
                    Member::Done(read, written) => {
                        *start += read;
                        *last = read;
                        (*pos, *end) = (0, written);
                        break false;
                    }
                    Member::NoRoom if output.len() < MAX_OUTPUT => {
                        let len = (4 * output.len()).min(MAX_OUTPUT);
                        output.resize(len, 0);
                    }
                    Member::Bad if !*eof && input.len() - *start < MAX_INPUT => {
                        let want = (2 * (input.len() - *start)).clamp(READ_AHEAD, MAX_INPUT);
                        *eof = read_ahead(inner, input, start, want)?;
                    }
                    _ => break true,
                }
            };
            if switch {
                self.switch();
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    fn gzip(text: &[u8]) -> Vec<u8> {
        let mut z = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        z.write_all(text).unwrap();
        z.finish().unwrap()
    }

    /// The text of `bytes` read `chunk` bytes at a time, and whether the streaming
    /// decoder took over.
    fn inflate(bytes: &[u8], chunk: usize) -> io::Result<(Vec<u8>, bool)> {
        let mut r = GzipReader::new(io::BufReader::new(bytes));
        let mut out = Vec::new();
        let mut buf = vec![0u8; chunk];
        loop {
            let n = r.read(&mut buf)?;
            if n == 0 {
                return Ok((out, matches!(r.state, State::Stream(_))));
            }
            out.extend_from_slice(&buf[..n]);
        }
    }

    fn text(seed: u64, len: usize) -> Vec<u8> {
        let mut x = seed | 1;
        (0..len)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                b"<http://a/b> \n"[(x % 14) as usize]
            })
            .collect()
    }

    #[test]
    fn members_of_every_size_inflate_to_their_text() {
        let parts: Vec<Vec<u8>> = [0, 1, 100, 70_000, 3 << 20, 5]
            .iter()
            .enumerate()
            .map(|(i, &len)| text(i as u64 + 1, len))
            .collect();
        let bytes: Vec<u8> = parts.iter().flat_map(|p| gzip(p)).collect();
        let want: Vec<u8> = parts.concat();
        for chunk in [1, 7, 1 << 16] {
            assert_eq!(inflate(&bytes, chunk).unwrap(), (want.clone(), false));
        }
        assert_eq!(inflate(&[], 64).unwrap(), (Vec::new(), false));
    }

    /// Many small members (as `bgzip` writes them) across several read-aheads.
    #[test]
    fn small_members_across_read_aheads() {
        let parts: Vec<Vec<u8>> = (0..400).map(|i| text(i + 100, 65_536)).collect();
        let bytes: Vec<u8> = parts.iter().flat_map(|p| gzip(p)).collect();
        assert!(bytes.len() > READ_AHEAD);
        assert_eq!(inflate(&bytes, 1 << 16).unwrap(), (parts.concat(), false));
    }

    /// A member whose output passes the first buffer grows it; one read ahead past its
    /// compressed size is read on.
    #[test]
    fn a_member_larger_than_the_buffers_is_read_whole() {
        let big = text(9, FIRST_OUTPUT * 4 + 17);
        let mut bytes = gzip(&big);
        assert!(
            (READ_AHEAD..MAX_INPUT).contains(&bytes.len()),
            "a member read in several steps, and taken whole: {} bytes",
            bytes.len()
        );
        bytes.extend(gzip(b"tail\n"));
        let mut want = big;
        want.extend_from_slice(b"tail\n");
        let (out, streamed) = inflate(&bytes, 1 << 20).unwrap();
        assert!(out == want && !streamed);
    }

    /// A member past the limits (a dump written by `gzip`) streams, from its start.
    #[test]
    fn a_member_past_the_limits_streams() {
        let small = text(12, 1000);
        let big = text(11, 40 << 20);
        let mut bytes = gzip(&small);
        let member = gzip(&big);
        assert!(member.len() > MAX_INPUT);
        bytes.extend(member);
        bytes.extend(gzip(b"tail\n"));
        let want = [&small[..], &big, b"tail\n"].concat();
        let (out, streamed) = inflate(&bytes, 1 << 20).unwrap();
        assert!(out == want && streamed);
    }

    /// Corrupt or cut input fails as it does through the streaming decoder, and the
    /// members before the damage come out first.
    #[test]
    fn damage_is_an_error_after_the_good_members() {
        let good = text(3, 50_000);
        let mut bytes = gzip(&good);
        let second = gzip(&text(4, 50_000));
        bytes.extend_from_slice(&second[..second.len() / 2]);
        let mut r = GzipReader::new(io::BufReader::new(&bytes[..]));
        let mut out = Vec::new();
        assert!(r.read_to_end(&mut out).is_err());
        assert!(out.starts_with(&good));

        let mut flipped = gzip(&good);
        let mid = flipped.len() / 2;
        flipped[mid] ^= 0xff;
        assert!(inflate(&flipped, 4096).is_err());
        assert!(inflate(b"not gzip at all", 4096).is_err());
    }
}
