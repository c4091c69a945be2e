//! Synthetic graphs for benchmarks, generated directly as Morton codes (8 bytes per edge,
//! nothing else edge-sized), in parallel and reproducibly: edges come in fixed blocks,
//! each with its own seeded generator, so the output does not depend on the thread count.

use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use rayon::prelude::*;

use k2rpq::k2tree::morton;

/// Navigation pages at the start of each host of a [`Web`] graph.
const MENU: u64 = 16;

/// Edges generated per seeded block.
const BLOCK: usize = 1 << 16;

/// A generated graph: a square `nodes × nodes` matrix as Morton codes (duplicates and,
/// for R-MAT, self-loops possible, as in the generators' definitions).
#[derive(Clone, Debug)]
pub struct Generated {
    /// Side of the matrix.
    pub nodes: u64,
    /// One code per generated edge.
    pub codes: Vec<u64>,
}

/// The generator of block `k` under `seed`.
fn block_rng(seed: u64, k: usize) -> SmallRng {
    SmallRng::seed_from_u64(seed ^ (k as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15))
}

/// R-MAT parameters (Chakrabarti et al.): each edge picks one of four quadrants at every
/// level with probabilities `a, b, c, 1 − a − b − c`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Rmat {
    /// log2 of the node count.
    pub scale: u32,
    /// Edges to generate.
    pub edges: u64,
    /// Top-left probability.
    pub a: f64,
    /// Top-right probability.
    pub b: f64,
    /// Bottom-left probability.
    pub c: f64,
    /// Relabel nodes by a fixed bijection of `0..2^scale`, as Graph500 does (it breaks the
    /// artificial locality of low ids; the k²-tree compresses the unscrambled graph better).
    pub scramble: bool,
    /// Seed.
    pub seed: u64,
}

impl Rmat {
    /// Graph500 parameters (a = 0.57, b = c = 0.19) with edge factor 16 and scrambled ids:
    /// `edges / 16` nodes rounded up to a power of two.
    pub fn graph500(edges: u64, seed: u64) -> Self {
        let nodes = (edges / 16).max(4);
        Rmat {
            scale: 64 - (nodes - 1).leading_zeros(),
            edges,
            a: 0.57,
            b: 0.19,
            c: 0.19,
            scramble: true,
            seed,
        }
    }

    /// Generates the edges.
    pub fn generate(&self) -> Generated {
        assert!(self.scale <= 32, "R-MAT scale {} > 32", self.scale);
        // Quadrant thresholds on a 16-bit uniform: four levels per random u64.
        let t = |p: f64| (p * 65536.0).round() as u32;
        let (ta, tab, tabc) = (t(self.a), t(self.a + self.b), t(self.a + self.b + self.c));
        let scale = self.scale;
        let mask = if scale == 32 {
            u32::MAX
        } else {
            (1u32 << scale) - 1
        };
        let scramble = self.scramble;
        let seed = self.seed;
        let mut codes = vec![0u64; self.edges as usize];
        codes
            .par_chunks_mut(BLOCK)
            .enumerate()
            .for_each(|(k, out)| {
                let mut rng = block_rng(seed, k);
                for slot in out {
                    let mut code = 0u64;
                    let mut bits = 0u64;
                    for level in 0..scale {
                        if level % 4 == 0 {
                            bits = rng.random();
                        }
                        let u = (bits & 0xFFFF) as u32;
                        bits >>= 16;
                        let q = (u >= ta) as u64 + (u >= tab) as u64 + (u >= tabc) as u64;
                        code = (code << 2) | q;
                    }
                    if scramble {
                        let (r, c) = morton::decode(code);
                        code = morton::encode(permute(r, mask, seed), permute(c, mask, seed));
                    }
                    *slot = code;
                }
            });
        Generated {
            nodes: 1u64 << scale,
            codes,
        }
    }
}

/// A bijection of `0 ..= mask` (`mask = 2^s − 1`): odd multiplications and xor-shifts
/// within `s` bits.
fn permute(x: u32, mask: u32, seed: u64) -> u32 {
    let bits = mask.count_ones();
    let k1 = (seed as u32 | 1).wrapping_mul(0x9E37_79B1) | 1;
    let k2 = ((seed >> 32) as u32 | 1).wrapping_mul(0x85EB_CA6B) | 1;
    let mut v = x;
    for k in [k1, k2] {
        v = v.wrapping_mul(k) & mask;
        v ^= v >> (bits / 2).max(1);
    }
    v & mask
}

/// A web-like graph: pages (nodes) grouped into hosts of consecutive ids, as a crawl
/// ordered by URL produces. Each page has `degree` out-links on average: most stay in the
/// page's host (50% to the host's first 16 "navigation" pages, which makes rows of a
/// host alike, as on real sites; 45% to pages at most 8 ids away; 5% anywhere in the host),
/// some go to popular pages anywhere (a heavy-tailed choice), the rest to uniform pages.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Web {
    /// Edges to generate.
    pub edges: u64,
    /// Average out-degree; pages = edges / degree.
    pub degree: u32,
    /// Average host size (host sizes are geometric with this mean).
    pub host_size: u32,
    /// Fraction of links within the source's host.
    pub p_host: f64,
    /// Fraction of links to popular pages.
    pub p_popular: f64,
    /// Seed.
    pub seed: u64,
}

impl Web {
    /// Parameters meant to resemble the cnr-2000 crawl: degree 10, hosts of ~300 pages,
    /// 95% of links within the host, 4% to popular pages, 1% uniform.
    pub fn like_cnr(edges: u64, seed: u64) -> Self {
        Web {
            edges,
            degree: 10,
            host_size: 300,
            p_host: 0.95,
            p_popular: 0.04,
            seed,
        }
    }

    /// Pages (the matrix side).
    pub fn nodes(&self) -> u64 {
        (self.edges / self.degree.max(1) as u64).clamp(1, u32::MAX as u64)
    }

    /// Whether a host starts at page `x` (a hash decides, so any block can find its hosts
    /// without the others).
    fn host_starts_at(&self, x: u64) -> bool {
        x == 0
            || splitmix(x ^ self.seed.rotate_left(17)).is_multiple_of(self.host_size.max(1) as u64)
    }

    /// Generates the edges.
    pub fn generate(&self) -> Generated {
        let n = self.nodes();
        let edges = self.edges;
        let t_host = (self.p_host * u32::MAX as f64) as u32;
        let t_pop = ((self.p_host + self.p_popular).min(1.0) * u32::MAX as f64) as u32;
        // Popular pages: a heavy-tailed rank spread over the ids by a stride coprime to n.
        let mut stride = (n as f64 * 0.618_033_988_7) as u64 | 1;
        while gcd(stride, n) != 1 {
            stride += 2;
        }
        let mut codes = vec![0u64; edges as usize];
        codes
            .par_chunks_mut(BLOCK)
            .enumerate()
            .for_each(|(k, out)| {
                let mut rng = block_rng(self.seed, k);
                let first = (k * BLOCK) as u64;
                // Edge i leaves page i·n/edges: pages in order, degree edges/n each.
                let src_of = |i: u64| ((i as u128 * n as u128) / edges as u128) as u64;
                let mut host_lo = u64::MAX;
                let mut host_hi = 0;
                for (i, slot) in out.iter_mut().enumerate() {
                    let src = src_of(first + i as u64);
                    if src >= host_hi || host_lo == u64::MAX {
                        host_lo = src;
                        while !self.host_starts_at(host_lo) {
                            host_lo -= 1;
                        }
                        host_hi = src + 1;
                        while host_hi < n && !self.host_starts_at(host_hi) {
                            host_hi += 1;
                        }
                    }
                    let u: u32 = rng.random();
                    let dst = if u < t_host {
                        // Within the host: its navigation pages (the first few of the host, which
                        // every page links to), pages near the source, or any page of the host.
                        let size = host_hi - host_lo;
                        let kind = rng.random_range(0..100u32);
                        if kind < 50 {
                            let menu = size.min(MENU);
                            host_lo + (rng.random_range(0..menu) * rng.random_range(0..menu)) / menu
                        } else if kind < 95 {
                            let reach = 1u64 << rng.random_range(0..4);
                            let off = rng.random_range(1..=reach);
                            let d = if rng.random::<bool>() {
                                src + off
                            } else {
                                src.saturating_sub(off)
                            };
                            d.clamp(host_lo, host_hi - 1)
                        } else {
                            host_lo + rng.random_range(0..size)
                        }
                    } else if u < t_pop {
                        let x: f64 = rng.random();
                        let rank = ((n as f64) * x.powi(4)) as u64;
                        (rank.min(n - 1) as u128 * stride as u128 % n as u128) as u64
                    } else {
                        rng.random_range(0..n)
                    };
                    *slot = morton::encode(src as u32, dst as u32);
                }
            });
        Generated { nodes: n, codes }
    }
}

fn splitmix(mut x: u64) -> u64 {
    x = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
    x = (x ^ (x >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    x ^ (x >> 31)
}

fn gcd(a: u64, b: u64) -> u64 {
    if b == 0 {
        a
    } else {
        gcd(b, a % b)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn permute_is_a_bijection() {
        for s in [2u32, 5, 10] {
            let mask = (1u32 << s) - 1;
            let mut seen = vec![false; 1 << s];
            for x in 0..=mask {
                let y = permute(x, mask, 42);
                assert!(!seen[y as usize]);
                seen[y as usize] = true;
            }
        }
    }

    #[test]
    fn rmat_is_reproducible_and_skewed() {
        let g = Rmat::graph500(200_000, 7);
        assert_eq!(g.generate().codes, g.generate().codes);
        let plain = Rmat {
            scramble: false,
            ..g
        }
        .generate();
        assert_eq!(plain.nodes, 1 << g.scale);
        assert!(plain.codes.iter().all(|&m| m < plain.nodes * plain.nodes));
        // a = 0.57: top-left quadrant at the root level holds about 57% of the edges.
        let top = 2 * (g.scale - 1);
        let tl = plain.codes.iter().filter(|&&m| m >> top == 0).count() as f64;
        let frac = tl / plain.codes.len() as f64;
        assert!((frac - 0.57).abs() < 0.01, "{frac}");
        // The same on one thread.
        let one = rayon::ThreadPoolBuilder::new()
            .num_threads(1)
            .build()
            .unwrap();
        assert_eq!(one.install(|| g.generate().codes), g.generate().codes);
    }

    #[test]
    fn web_graph_is_local_and_in_range() {
        let w = Web::like_cnr(300_000, 3);
        let g = w.generate();
        assert_eq!(g.codes.len(), 300_000);
        assert_eq!(g.codes, w.generate().codes);
        let n = w.nodes();
        let mut near = 0;
        for &m in &g.codes {
            let (r, c) = morton::decode(m);
            assert!((r as u64) < n && (c as u64) < n);
            if (r as i64 - c as i64).abs() < 2000 {
                near += 1;
            }
        }
        // Most links stay in the host, so close to the diagonal.
        assert!(near as f64 > 0.8 * g.codes.len() as f64, "{near}");
    }
}
