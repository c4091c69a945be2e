//! A **synthetic** Wikidata-"truthy"-style N-Triples generator, so that loading and
//! querying can be exercised at 10⁸–10⁹ triples without downloading a dump.
//!
//! Nothing here is real Wikidata data: only the IRI forms and the numbers of the
//! well-known predicates are real (`wd:Q…`, `wdt:P…`). The shapes imitate what matters
//! for path queries and for the store:
//! - **many predicates with a heavy-tailed size distribution**: twelve named predicates
//!   take fixed shares of the triples (below), and the rest of the `predicates` (5,000 by
//!   default) share [`TAIL_SHARE`] of them by a Zipf law, the predicate of rank `r` getting
//!   a share ∝ `r^−`[`TAIL_EXPONENT`]. At 10⁹ triples `P2860` has ~220 M edges, `P31`
//!   ~130 M, the largest tail predicate ~63 M, the median one ~40 k and the smallest
//!   ~5 k; at 10⁶ most tail predicates have a handful of edges. A tail predicate is, by a
//!   fixed draw from its number, an external identifier (string literals, 45 %), an
//!   item-to-item link with skewed objects (30 %), a link into a small set of values
//!   (15 %) or a quantity (`xsd:decimal`, 10 %), as Wikidata's long tail is mostly
//!   identifiers;
//! - `P31` (instance of, 13 %) points at a few very hot classes; `P279` (subclass of,
//!   0.6 %) is a DAG over classes, skewed toward the roots, so closures are deep and fan in;
//! - `P131` (located in, 5 %) is a tree over administrative entities (one fixed parent
//!   each) plus items hanging off it; `P361` (part of, 3 %) is a tree over parts (one fixed
//!   parent each, toward one root);
//! - `P17` (country, 4 %) points at 200 countries with skew; `P530` (diplomatic relation,
//!   0.2 %) is symmetric between countries;
//! - `P2860` (cites work, 22 %) is a dense citation DAG with preferential attachment;
//!   `P50` (author, 5 %) points at skewed authors; `P737` (influenced by, 0.5 %) is a DAG
//!   over people;
//! - `P577` (publication date, `xsd:dateTime`, 4 %), `P1082` (population, `xsd:decimal`,
//!   0.8 %) and `P1448` (official name, `@en`, 1.9 %) give literal objects.
//!
//! Entities are laid out by kind (classes, countries, administrative entities, people,
//! works, items; about one entity per six triples), and an entity's Q number is a **fixed
//! pseudo-random permutation** of its position ([`Scramble`]): as in a real dump, ids carry
//! no locality (a class's subclasses, a tree's nodes, a work's citations are scattered
//! over the id space). The permutation depends only on the entity count, so a workload
//! names the same entities for every seed.
//!
//! Generation is split into fixed chunks of triples, each with its own RNG stream derived
//! from `(seed, chunk)`, generated in parallel on rayon threads and written in order, so the
//! output depends only on `(triples, seed, predicates)`. With gzip each chunk is compressed
//! in parallel as its own gzip member (readers must accept multi-member gzip, as `load`
//! does).

use std::io::{self, Write};
use std::path::{Path, PathBuf};

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use rayon::prelude::*;

const ENTITY: &str = "http://www.wikidata.org/entity/Q";
const PROP: &str = "http://www.wikidata.org/prop/direct/P";
const XSD: &str = "http://www.w3.org/2001/XMLSchema#";
/// Triples per independently generated chunk.
const CHUNK: u64 = 1 << 18;

/// Predicates written by default: about Wikidata's count of properties in use.
pub const DEFAULT_PREDICATES: u32 = 5_000;
/// Share of the triples that the long tail of predicates (all but the twelve named
/// ones) takes together.
pub const TAIL_SHARE: f64 = 0.40;
/// Zipf exponent of the tail: the predicate of rank `r` takes a share ∝ `r^−1.1`.
pub const TAIL_EXPONENT: f64 = 1.1;

/// What to generate.
#[derive(Clone, Debug)]
pub struct GenOptions {
    /// Exact number of triples (lines).
    pub triples: u64,
    /// RNG seed; the same `(triples, seed, predicates)` gives the same bytes.
    pub seed: u64,
    /// Compress the output as multi-member gzip.
    pub gzip: bool,
    /// Distinct predicates: the twelve named ones and a Zipf tail (at least 13).
    pub predicates: u32,
}

impl GenOptions {
    /// `triples` plain N-Triples with seed 42 and [`DEFAULT_PREDICATES`] predicates.
    pub fn new(triples: u64) -> GenOptions {
        GenOptions {
            triples,
            seed: 42,
            gzip: false,
            predicates: DEFAULT_PREDICATES,
        }
    }
}

/// Index ranges of the kinds of entities; a Q number is the [`Scramble`]d index + 1.
#[derive(Clone, Copy, Debug)]
struct Layout {
    classes: u64,
    countries: u64,
    admins: u64,
    people: u64,
    works: u64,
    items: u64,
    /// The first `parts` items form the `P361` tree.
    parts: u64,
}

impl Layout {
    fn new(triples: u64) -> Layout {
        let entities = (triples / 6).max(2_000);
        let items = entities / 2;
        Layout {
            classes: (entities / 200).max(50),
            countries: 200,
            admins: (entities / 40).max(100),
            people: entities / 8,
            works: entities / 4,
            items,
            parts: (entities / 50).max(100).min(items),
        }
    }
    fn class(&self, i: u64) -> u64 {
        i
    }
    fn country(&self, i: u64) -> u64 {
        self.classes + i
    }
    fn admin(&self, i: u64) -> u64 {
        self.classes + self.countries + i
    }
    fn person(&self, i: u64) -> u64 {
        self.admin(self.admins) + i
    }
    fn work(&self, i: u64) -> u64 {
        self.person(self.people) + i
    }
    fn item(&self, i: u64) -> u64 {
        self.work(self.works) + i
    }
    fn all(&self) -> u64 {
        self.item(self.items)
    }
}

/// A fixed bijection of `0..n` without locality: a four-round Feistel network over the
/// smallest even power of two ≥ `n`, walked again while it lands outside `0..n` (fewer
/// than four rounds of walking on average, since that power is below `4n`).
#[derive(Clone, Copy, Debug)]
pub struct Scramble {
    n: u64,
    half: u32,
}

impl Scramble {
    /// The permutation of `0..n` (`n ≥ 1`).
    pub fn new(n: u64) -> Scramble {
        let bits = (64 - n.saturating_sub(1).leading_zeros()).max(2);
        Scramble {
            n,
            half: bits.div_ceil(2),
        }
    }

    fn feistel(&self, x: u64) -> u64 {
        let mask = (1u64 << self.half) - 1;
        let (mut l, mut r) = (x >> self.half, x & mask);
        for round in 0..4u64 {
            let f = mix(r ^ round.wrapping_mul(0xa076_1d64_78bd_642f)) & mask;
            (l, r) = (r, l ^ f);
        }
        (l << self.half) | r
    }

    /// The image of `i < n`.
    pub fn apply(&self, i: u64) -> u64 {
        debug_assert!(i < self.n);
        let mut x = self.feistel(i);
        while x >= self.n {
            x = self.feistel(x);
        }
        x
    }
}

/// A 64-bit mixing function (SplitMix64's finaliser).
fn mix(i: u64) -> u64 {
    let mut x = i.wrapping_add(0x9e37_79b9_7f4a_7c15);
    x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    x ^ (x >> 31)
}

/// An index in `0..n` skewed toward 0: density ∝ x^(1/a − 1).
fn skewed(rng: &mut StdRng, n: u64, a: f64) -> u64 {
    let u: f64 = rng.random();
    ((n as f64 * u.powf(a)) as u64).min(n.saturating_sub(1))
}

/// A fixed pseudo-random value in `[0, 1)` for `i` (the same on every draw), for trees.
fn fixed_unit(i: u64) -> f64 {
    (mix(i) >> 11) as f64 / (1u64 << 53) as f64
}

/// The fixed parent of tree node `i ≥ 1`: a lower index, skewed toward the root 0.
fn tree_parent(i: u64) -> u64 {
    ((i as f64 * fixed_unit(i).powf(1.5)) as u64).min(i - 1)
}

/// The twelve named predicates with their shares of the triples.
const NAMED: [(Named, u32, f64); 12] = [
    (Named::InstanceOf, 31, 0.13),
    (Named::SubclassOf, 279, 0.006),
    (Named::LocatedIn, 131, 0.05),
    (Named::Country, 17, 0.04),
    (Named::PartOf, 361, 0.03),
    (Named::Cites, 2860, 0.22),
    (Named::Author, 50, 0.05),
    (Named::InfluencedBy, 737, 0.005),
    (Named::Diplomatic, 530, 0.002),
    (Named::Published, 577, 0.04),
    (Named::Population, 1082, 0.008),
    (Named::OfficialName, 1448, 0.019),
];

#[derive(Clone, Copy, Debug, PartialEq)]
enum Named {
    InstanceOf,
    SubclassOf,
    LocatedIn,
    Country,
    PartOf,
    Cites,
    Author,
    InfluencedBy,
    Diplomatic,
    Published,
    Population,
    OfficialName,
}

/// What a tail predicate's objects are.
#[derive(Clone, Copy, Debug, PartialEq)]
enum TailKind {
    /// String literals (external identifiers).
    Identifier,
    /// Entities, skewed toward low positions.
    Link,
    /// One of a few hundred entities.
    Value,
    /// `xsd:decimal` literals.
    Quantity,
}

#[derive(Clone, Copy, Debug)]
enum Pick {
    Named(Named),
    /// A tail predicate: its number and kind.
    Tail(u32, TailKind),
}

/// The predicates and their cumulative shares.
struct Mixture {
    cumulative: Vec<f64>,
    picks: Vec<Pick>,
}

fn tail_kind(number: u32) -> TailKind {
    match fixed_unit(u64::from(number) ^ 0x5eed) {
        u if u < 0.45 => TailKind::Identifier,
        u if u < 0.75 => TailKind::Link,
        u if u < 0.90 => TailKind::Value,
        _ => TailKind::Quantity,
    }
}

impl Mixture {
    fn new(predicates: u32) -> Mixture {
        let tail = predicates.saturating_sub(NAMED.len() as u32);
        let named_total: f64 = NAMED.iter().map(|n| n.2).sum();
        let scale = if tail == 0 { 1.0 / named_total } else { 1.0 };
        let mut weights: Vec<(f64, Pick)> = NAMED
            .iter()
            .map(|&(p, _, share)| (share * scale, Pick::Named(p)))
            .collect();
        let h: f64 = (1..=tail).map(|r| f64::from(r).powf(-TAIL_EXPONENT)).sum();
        let mut number = 0;
        for r in 1..=tail {
            // Numbers ascend with rank: the next integer no named predicate uses.
            number += 1;
            while NAMED.iter().any(|n| n.1 == number) {
                number += 1;
            }
            let share = TAIL_SHARE * f64::from(r).powf(-TAIL_EXPONENT) / h;
            weights.push((share, Pick::Tail(number, tail_kind(number))));
        }
        let mut acc = 0.0;
        let mut cumulative = Vec::with_capacity(weights.len());
        let mut picks = Vec::with_capacity(weights.len());
        for (w, p) in weights {
            acc += w;
            cumulative.push(acc);
            picks.push(p);
        }
        Mixture { cumulative, picks }
    }

    fn pick(&self, rng: &mut StdRng) -> Pick {
        let total = *self
            .cumulative
            .last()
            .expect("at least the named predicates");
        let u = rng.random::<f64>() * total;
        let k = self.cumulative.partition_point(|&c| c <= u);
        self.picks[k.min(self.picks.len() - 1)]
    }
}

struct Out<'a> {
    buf: &'a mut Vec<u8>,
    scramble: &'a Scramble,
}

impl Out<'_> {
    fn iri(&mut self, i: u64) {
        let _ = write!(self.buf, "<{ENTITY}{}>", self.scramble.apply(i) + 1);
    }
    fn triple(&mut self, s: u64, p: u32, o: u64) {
        self.iri(s);
        let _ = write!(self.buf, " <{PROP}{p}> ");
        self.iri(o);
        self.buf.extend_from_slice(b" .\n");
    }
    fn literal(&mut self, s: u64, p: u32, lit: std::fmt::Arguments<'_>) {
        self.iri(s);
        let _ = write!(self.buf, " <{PROP}{p}> ");
        let _ = self.buf.write_fmt(lit);
        self.buf.extend_from_slice(b" .\n");
    }
}

/// Appends the `n` triples of chunk `chunk` to `buf`.
fn chunk_text(
    l: &Layout,
    mixture: &Mixture,
    scramble: &Scramble,
    seed: u64,
    chunk: u64,
    n: u64,
    buf: &mut Vec<u8>,
) {
    let mut rng = StdRng::seed_from_u64(seed ^ chunk.wrapping_mul(0x9e37_79b9_7f4a_7c15));
    let mut out = Out { buf, scramble };
    let mut left = n;
    while left > 0 {
        left -= 1;
        match mixture.pick(&mut rng) {
            Pick::Named(Named::InstanceOf) => {
                let s = rng.random_range(0..l.all());
                out.triple(s, 31, l.class(skewed(&mut rng, l.classes, 6.0)));
            }
            Pick::Named(Named::SubclassOf) => {
                let c = rng.random_range(1..l.classes);
                let parent = skewed(&mut rng, c, 2.0);
                out.triple(l.class(c), 279, l.class(parent));
            }
            Pick::Named(Named::LocatedIn) => {
                if rng.random_bool(0.5) {
                    let a = rng.random_range(1..l.admins);
                    out.triple(l.admin(a), 131, l.admin(tree_parent(a)));
                } else {
                    let i = rng.random_range(0..l.items);
                    out.triple(l.item(i), 131, l.admin(skewed(&mut rng, l.admins, 2.0)));
                }
            }
            Pick::Named(Named::Country) => {
                let s = if rng.random_bool(0.5) {
                    l.admin(rng.random_range(0..l.admins))
                } else {
                    l.item(rng.random_range(0..l.items))
                };
                out.triple(s, 17, l.country(skewed(&mut rng, l.countries, 2.0)));
            }
            Pick::Named(Named::PartOf) => {
                let i = rng.random_range(1..l.parts);
                out.triple(l.item(i), 361, l.item(tree_parent(i)));
            }
            Pick::Named(Named::Cites) => {
                let w = rng.random_range(1..l.works);
                out.triple(l.work(w), 2860, l.work(skewed(&mut rng, w, 3.0)));
            }
            Pick::Named(Named::Author) => {
                let w = rng.random_range(0..l.works);
                out.triple(l.work(w), 50, l.person(skewed(&mut rng, l.people, 2.0)));
            }
            Pick::Named(Named::InfluencedBy) => {
                let p = rng.random_range(1..l.people);
                out.triple(l.person(p), 737, l.person(skewed(&mut rng, p, 2.0)));
            }
            Pick::Named(Named::Diplomatic) => {
                let a = l.country(skewed(&mut rng, l.countries, 1.5));
                let b = l.country(rng.random_range(0..l.countries));
                out.triple(a, 530, b);
                if left > 0 {
                    left -= 1;
                    out.triple(b, 530, a);
                }
            }
            Pick::Named(Named::Published) => {
                let w = l.work(rng.random_range(0..l.works));
                let (y, m, d) = (
                    1900 + skewed(&mut rng, 125, 0.5),
                    rng.random_range(1..=12),
                    rng.random_range(1..=28),
                );
                out.literal(
                    w,
                    577,
                    format_args!("\"{y}-{m:02}-{d:02}T00:00:00Z\"^^<{XSD}dateTime>"),
                );
            }
            Pick::Named(Named::Population) => {
                let a = l.admin(rng.random_range(0..l.admins));
                let pop = 10u64.pow(rng.random_range(2..8)) * rng.random_range(1..10u64);
                out.literal(a, 1082, format_args!("\"{pop}\"^^<{XSD}decimal>"));
            }
            Pick::Named(Named::OfficialName) => {
                let a = rng.random_range(0..l.admins);
                out.literal(
                    l.admin(a),
                    1448,
                    format_args!("\"Synthetic place {}\"@en", a + 1),
                );
            }
            Pick::Tail(p, kind) => {
                let s = rng.random_range(0..l.all());
                match kind {
                    TailKind::Identifier => {
                        let id = mix(s ^ (u64::from(p) << 40)) % 100_000_000;
                        out.literal(s, p, format_args!("\"{p}-{id:08}\""));
                    }
                    TailKind::Link => {
                        out.triple(s, p, skewed(&mut rng, l.all(), 3.0));
                    }
                    TailKind::Value => {
                        // A few hundred values per predicate, scattered over the entities.
                        let v = skewed(&mut rng, 300, 2.0);
                        out.triple(s, p, mix((u64::from(p) << 20) | v) % l.all());
                    }
                    TailKind::Quantity => {
                        let q = skewed(&mut rng, 1_000_000, 3.0);
                        out.literal(s, p, format_args!("\"{q}\"^^<{XSD}decimal>"));
                    }
                }
            }
        }
    }
}

/// Writes `options.triples` synthetic triples to `out`; returns the bytes written.
pub fn write_wikidata_like(out: &mut dyn Write, options: &GenOptions) -> io::Result<u64> {
    let chunks = check_predicates(options)?;
    write_chunks(out, options, 0..chunks)
}

/// Writes the same triples as [`write_wikidata_like`] into `shards` gzip files in `dir`
/// (created if missing), `part-00000.nt.gz` and on, each a run of whole generator chunks
/// (262,144 triples; fewer shards when there are fewer chunks), so that the shards read in
/// name order are the single stream's triples in order. Each file is written under a
/// hidden temporary name and renamed when complete: an interrupted run leaves no
/// half-written shard under a shard's name. Returns each shard's path and bytes.
pub fn write_wikidata_like_shards(
    dir: &Path,
    options: &GenOptions,
    shards: usize,
) -> io::Result<Vec<(PathBuf, u64)>> {
    let chunks = check_predicates(options)?;
    if shards == 0 {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "at least one shard",
        ));
    }
    let shards = (shards as u64).min(chunks.max(1));
    let options = GenOptions {
        gzip: true,
        ..options.clone()
    };
    std::fs::create_dir_all(dir)?;
    let mut written = Vec::with_capacity(shards as usize);
    for k in 0..shards {
        let range = k * chunks / shards..(k + 1) * chunks / shards;
        let name = format!("part-{k:05}.nt.gz");
        let path = dir.join(&name);
        let tmp = dir.join(format!(".{name}.tmp"));
        let result = (|| {
            let mut file = io::BufWriter::with_capacity(1 << 20, std::fs::File::create(&tmp)?);
            let bytes = write_chunks(&mut file, &options, range)?;
            file.into_inner()
                .map_err(io::IntoInnerError::into_error)?
                .sync_all()?;
            std::fs::rename(&tmp, &path)?;
            Ok(bytes)
        })();
        match result {
            Ok(bytes) => written.push((path, bytes)),
            Err(e) => {
                let _ = std::fs::remove_file(&tmp);
                return Err(e);
            }
        }
    }
    Ok(written)
}

/// Refuses too few predicates; returns the number of generator chunks.
fn check_predicates(options: &GenOptions) -> io::Result<u64> {
    if options.predicates <= NAMED.len() as u32 {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!(
                "{} predicates asked for: at least {} (the named ones and a tail)",
                options.predicates,
                NAMED.len() + 1
            ),
        ));
    }
    Ok(options.triples.div_ceil(CHUNK))
}

/// Writes the generator chunks `chunks` (in order) to `out`; returns the bytes written.
fn write_chunks(
    out: &mut dyn Write,
    options: &GenOptions,
    chunks: std::ops::Range<u64>,
) -> io::Result<u64> {
    let layout = Layout::new(options.triples);
    let mixture = Mixture::new(options.predicates);
    let scramble = Scramble::new(layout.all());
    let group = 2 * rayon::current_num_threads().max(1) as u64;
    let mut written = 0u64;
    let mut next = chunks.start;
    while next < chunks.end {
        let end = (next + group).min(chunks.end);
        let parts: Vec<io::Result<Vec<u8>>> = (next..end)
            .into_par_iter()
            .map(|c| {
                let n = CHUNK.min(options.triples - c * CHUNK);
                let mut text = Vec::with_capacity(n as usize * 110);
                chunk_text(&layout, &mixture, &scramble, options.seed, c, n, &mut text);
                if options.gzip {
                    let mut gz = flate2::write::GzEncoder::new(
                        Vec::with_capacity(text.len() / 6),
                        flate2::Compression::fast(),
                    );
                    gz.write_all(&text)?;
                    gz.finish()
                } else {
                    Ok(text)
                }
            })
            .collect();
        for part in parts {
            let part = part?;
            out.write_all(&part)?;
            written += part.len() as u64;
        }
        next = end;
    }
    out.flush()?;
    Ok(written)
}

/// The entities a workload names, as positions in the generator's layout (relative to
/// its ranges, so the same entity plays the same part at every `--triples`).
#[derive(Clone, Copy, Debug)]
enum Role {
    /// `class(0)`: the root of the `P279` DAG (everything is a subclass of it).
    ClassRoot,
    /// `class(classes/250)`: a class near the roots (a few ancestors, most classes below it).
    ClassHigh,
    /// `class(classes/2)`: a middle class (about ten direct subclasses at every size).
    ClassMid,
    /// `class(classes − classes/50)`: a class near the leaves (many ancestors, few
    /// descendants, few instances).
    ClassLow,
    /// `country(0)`: the most frequent `P17` object.
    CountryHot,
    /// `country(100)`: a country of middling frequency.
    CountryMid,
    /// `country(199)`: the rarest country.
    CountryCold,
    /// `admin(0)`: the root of the `P131` tree.
    AdminRoot,
    /// `admin(admins/100)`: an administrative entity with a subtree of its own.
    AdminMid,
    /// `admin(admins − 1)`: the deepest-numbered one (a leaf of the tree).
    AdminLeaf,
    /// `person(0)`: the most frequent author.
    PersonHot,
    /// `person(people/100)`: an author of a few works.
    PersonMid,
    /// `work(works − 1)`: the newest work (cites older ones, cited by none).
    WorkNew,
    /// `work(0)`: the oldest work, where citation chains end.
    WorkFirst,
    /// `item(0)`: the root of the `P361` tree.
    PartRoot,
    /// `item(parts/100)`: a part with a subtree of its own.
    PartMid,
    /// `item(parts − 1)`: a leaf of the `P361` tree.
    PartLeaf,
}

impl Layout {
    /// The position of `role`.
    fn role(&self, role: Role) -> u64 {
        match role {
            Role::ClassRoot => self.class(0),
            Role::ClassHigh => self.class(self.classes / 250),
            Role::ClassMid => self.class(self.classes / 2),
            Role::ClassLow => self.class(self.classes - self.classes / 50),
            Role::CountryHot => self.country(0),
            Role::CountryMid => self.country(self.countries / 2),
            Role::CountryCold => self.country(self.countries - 1),
            Role::AdminRoot => self.admin(0),
            Role::AdminMid => self.admin(self.admins / 100),
            Role::AdminLeaf => self.admin(self.admins - 1),
            Role::PersonHot => self.person(0),
            Role::PersonMid => self.person(self.people / 100),
            Role::WorkNew => self.work(self.works - 1),
            Role::WorkFirst => self.work(0),
            Role::PartRoot => self.item(0),
            Role::PartMid => self.item(self.parts / 100),
            Role::PartLeaf => self.item(self.parts - 1),
        }
    }
}

/// The query classes of [`wikidata_like_workload`], the prefix of each query's id
/// (`class/name`): the four endpoint cases of WDBench's path queries and the heavy
/// queries (var→var closures and joins with large fan-outs).
pub const WORKLOAD_CLASSES: [&str; 5] = ["cv", "vc", "cc", "vv", "heavy"];

/// The property-path workload over `gen wikidata-like --triples N --predicates P` data:
/// one query per line, `class/name, S REGEX O` (the format of `k2rpq-bench workload
/// --queries`; the class before the `/` groups the report). It covers WDBench's path
/// shapes for each endpoint case (c→v, v→c, c→c, v→v over `*`, `+`, `/`, `|`, `^`, `?`,
/// plus a negated set) and a `heavy` class: var→var closures over the large predicates,
/// `?x P31/P279* ?c` from every entity, joins with large fan-outs. Its constants are
/// derived from the generator's layout for `triples` (see `Role`), so they name entities
/// of the intended kind at every size; answer sizes grow about linearly with `triples`.
pub fn wikidata_like_workload(triples: u64, predicates: u32) -> String {
    use Role::*;
    let l = Layout::new(triples);
    let scramble = Scramble::new(l.all());
    let q = |r: Role| format!("<{ENTITY}{}>", scramble.apply(l.role(r)) + 1);
    let p = |n: u32| format!("<{PROP}{n}>");
    let (p31, p279, p131, p17, p530) = (p(31), p(279), p(131), p(17), p(530));
    let (p2860, p50, p737, p361) = (p(2860), p(50), p(737), p(361));
    // Tail predicates that link entities: the largest such and one of rank ≥ 500.
    let mixture = Mixture::new(predicates.max(NAMED.len() as u32 + 1));
    let links: Vec<(usize, u32)> = mixture
        .picks
        .iter()
        .filter_map(|pick| match pick {
            Pick::Tail(n, TailKind::Link) => Some(*n),
            _ => None,
        })
        .enumerate()
        .collect();
    let tail_big = p(links.first().map_or(1, |l| l.1));
    let tail_small = p(links
        .iter()
        .find(|(k, _)| *k >= 150)
        .or(links.last())
        .map_or(1, |l| l.1));
    let queries: Vec<(&str, String)> = vec![
        ("cv", format!("{} {p279}+ ?y", q(ClassHigh))),
        ("cv", format!("{} {p279}* ?y", q(ClassLow))),
        ("cv", format!("{} {p279}? ?y", q(ClassHigh))),
        ("cv", format!("{} {p131}+ ?y", q(AdminLeaf))),
        ("cv", format!("{} {p131}*/{p17} ?y", q(AdminLeaf))),
        ("cv", format!("{} {p530} ?y", q(CountryMid))),
        ("cv", format!("{} {p530}/{p530} ?y", q(CountryMid))),
        ("cv", format!("{} {p530}+ ?y", q(CountryCold))),
        ("cv", format!("{} {p2860}+ ?y", q(WorkNew))),
        ("cv", format!("{} {p2860}/{p50} ?y", q(WorkNew))),
        ("cv", format!("{} ({p2860}|{p50})+ ?y", q(WorkNew))),
        ("cv", format!("{} ({p131}|{p361})+ ?y", q(AdminLeaf))),
        ("cv", format!("{} {p361}* ?y", q(PartLeaf))),
        ("cv", format!("{} ^{p361} ?y", q(PartMid))),
        ("cv", format!("{} ^{p50}/{p2860} ?y", q(PersonMid))),
        ("cv", format!("{} !({p131}) ?y", q(AdminMid))),
        ("vc", format!("?x {p31}/{p279}* {}", q(ClassLow))),
        ("vc", format!("?x {p279}* {}", q(ClassHigh))),
        ("vc", format!("?x {p279}+ {}", q(ClassMid))),
        ("vc", format!("?x {p131}* {}", q(AdminMid))),
        ("vc", format!("?x {p131}/{p17} {}", q(CountryCold))),
        ("vc", format!("?x {p131}?/{p131} {}", q(AdminMid))),
        ("vc", format!("?x {p17} {}", q(CountryMid))),
        ("vc", format!("?x ^{p17} {}", q(AdminMid))),
        ("vc", format!("?x ({p17}|^{p17}) {}", q(CountryHot))),
        ("vc", format!("?x {p50} {}", q(PersonHot))),
        ("vc", format!("?x {p2860}/{p50} {}", q(PersonHot))),
        ("vc", format!("?x {p2860}+/{p50} {}", q(PersonMid))),
        ("vc", format!("?x {p361}+ {}", q(PartMid))),
        ("vc", format!("?x {p737}* {}", q(PersonMid))),
        ("cc", format!("{} {p2860}+ {}", q(WorkNew), q(WorkFirst))),
        ("cc", format!("{} {p131}+ {}", q(AdminLeaf), q(AdminRoot))),
        ("cc", format!("{} {p279}* {}", q(ClassLow), q(ClassRoot))),
        ("cc", format!("{} {p361}* {}", q(PartLeaf), q(PartRoot))),
        (
            "cc",
            format!("{} {p530}+ {}", q(CountryCold), q(CountryHot)),
        ),
        (
            "cc",
            format!("{} ^{p17}/{p17} {}", q(CountryMid), q(CountryMid)),
        ),
        ("vv", format!("?x {p530}+ ?y")),
        ("vv", format!("?x {p530}/{p530} ?y")),
        ("vv", format!("?x {p737}+ ?y")),
        ("vv", format!("?x {p279}? ?y")),
        ("vv", format!("?x {tail_small} ?y")),
        ("vv", format!("?x {tail_small}/{p31} ?y")),
        ("heavy", format!("?x {p31}/{p279}* ?y")),
        ("heavy", format!("?x {p279}+ ?y")),
        ("heavy", format!("?x {p131}+ ?y")),
        ("heavy", format!("?x {p361}* ?y")),
        ("heavy", format!("?x {p2860}+ ?y")),
        ("heavy", format!("?x {p2860}/{p2860} ?y")),
        ("heavy", format!("?x ({p2860}|{p50}) ?y")),
        ("heavy", format!("?x {p31} ?y")),
        ("heavy", format!("?x {tail_big}/{p31} ?y")),
        ("heavy", format!("?x {p31}/{p279}* {}", q(ClassRoot))),
    ];
    let mut out = format!(
        "# Property-path workload over `k2rpq-bench gen wikidata-like --triples {triples} \
         --predicates {predicates}` (synthetic!).\n\
         # Written by `gen wikidata-like … --workload FILE`: constants are positions in the\n\
         # generator's layout for that size (bench/src/wikidata.rs, `Role`); ids are class/name.\n"
    );
    let mut numbers = std::collections::BTreeMap::new();
    for (class, text) in &queries {
        let k = numbers.entry(*class).or_insert(0);
        *k += 1;
        out.push_str(&format!("{class}/{k:02}, {text}\n"));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::{BTreeMap, BTreeSet};

    fn generate(triples: u64, seed: u64, predicates: u32) -> Vec<u8> {
        let mut out = Vec::new();
        write_wikidata_like(
            &mut out,
            &GenOptions {
                triples,
                seed,
                gzip: false,
                predicates,
            },
        )
        .unwrap();
        out
    }

    #[test]
    fn exact_count_deterministic_and_parseable() {
        let a = generate(3000, 7, 200);
        assert_eq!(a, generate(3000, 7, 200));
        assert_ne!(a, generate(3000, 8, 200));
        let triples: Vec<_> = oxttl::NTriplesParser::new()
            .for_slice(&a)
            .collect::<Result<_, _>>()
            .unwrap();
        assert_eq!(triples.len(), 3000);
        let p279 = triples
            .iter()
            .filter(|t| t.predicate.as_str().ends_with("/P279"))
            .count();
        assert!(p279 > 0);
        // Gzip members decode to the same text.
        let mut gz = Vec::new();
        write_wikidata_like(
            &mut gz,
            &GenOptions {
                triples: 3000,
                seed: 7,
                gzip: true,
                predicates: 200,
            },
        )
        .unwrap();
        let mut text = Vec::new();
        std::io::Read::read_to_end(&mut flate2::read::MultiGzDecoder::new(&gz[..]), &mut text)
            .unwrap();
        assert_eq!(text, a);
        let few = GenOptions {
            predicates: 12,
            ..GenOptions::new(10)
        };
        assert!(write_wikidata_like(&mut Vec::new(), &few).is_err());
    }

    #[test]
    fn predicate_sizes_are_heavy_tailed() {
        let text = String::from_utf8(generate(400_000, 42, DEFAULT_PREDICATES)).unwrap();
        let mut sizes: BTreeMap<&str, u64> = BTreeMap::new();
        for line in text.lines() {
            let p = line.split(' ').nth(1).unwrap();
            *sizes.entry(p).or_default() += 1;
        }
        // Most of the 5,000 predicates occur, most of them tiny, a few huge.
        assert!(sizes.len() > 3_000, "{} predicates", sizes.len());
        let mut counts: Vec<u64> = sizes.values().copied().collect();
        counts.sort_unstable();
        let median = counts[counts.len() / 2];
        let top = *counts.last().unwrap();
        assert!(median <= 20, "median predicate {median} edges");
        assert!(top >= 400_000 / 6, "largest predicate {top} edges");
        let cites = sizes[format!("<{PROP}2860>").as_str()];
        assert!((0.2..0.24).contains(&(cites as f64 / 400_000.0)), "{cites}");
        // The largest tail predicate sits between the named giants and the tail.
        let tail_top = Mixture::new(DEFAULT_PREDICATES)
            .picks
            .iter()
            .find_map(|p| match p {
                Pick::Tail(n, _) => Some(*n),
                _ => None,
            })
            .unwrap();
        let t = sizes[format!("<{PROP}{tail_top}>").as_str()] as f64 / 400_000.0;
        assert!(
            (0.04..0.09).contains(&t),
            "largest tail predicate share {t}"
        );
    }

    #[test]
    fn scramble_is_a_bijection_without_locality() {
        for n in [1u64, 2, 3, 5, 64, 1000, 4097, 100_003] {
            let s = Scramble::new(n);
            let image: BTreeSet<u64> = (0..n).map(|i| s.apply(i)).collect();
            assert_eq!(image.len() as u64, n);
            assert!(image.iter().all(|&x| x < n));
        }
        // Consecutive positions land far apart: 100 neighbours span most of the ids.
        let n = 10_000_000;
        let s = Scramble::new(n);
        let ids: Vec<u64> = (5_000..5_100).map(|i| s.apply(i)).collect();
        let (lo, hi) = (ids.iter().min().unwrap(), ids.iter().max().unwrap());
        assert!(hi - lo > n / 2, "{lo}..{hi}");
        let adjacent = ids
            .windows(2)
            .filter(|w| w[0].abs_diff(w[1]) < 1000)
            .count();
        assert!(adjacent <= 2, "{adjacent} neighbours stay close");
    }

    #[test]
    fn workload_constants_exist_and_the_shipped_files_are_current() {
        // Every query parses, and every entity it names occurs in data of that size (a
        // constant outside the data would make the query trivially empty).
        let triples = 400_000;
        let text = wikidata_like_workload(triples, DEFAULT_PREDICATES);
        let data = String::from_utf8(generate(triples, 42, DEFAULT_PREDICATES)).unwrap();
        let mut classes = BTreeMap::new();
        for line in text.lines().filter(|l| !l.starts_with('#')) {
            let q = k2rpq::rpq::parse_log_line(line).unwrap();
            let id = q.id.unwrap();
            let class = id.split('/').next().unwrap().to_owned();
            assert!(WORKLOAD_CLASSES.contains(&class.as_str()), "{id}");
            *classes.entry(class).or_insert(0) += 1;
            for iri in line
                .split(['<', '>'])
                .filter(|t| t.starts_with(ENTITY) || t.starts_with(PROP))
            {
                assert!(data.contains(&format!("<{iri}>")), "{iri} of {line}");
            }
        }
        assert_eq!(classes.len(), WORKLOAD_CLASSES.len());
        assert_eq!(classes.values().sum::<i32>(), 52);
        for (file, size) in [
            ("sparql/wikidata-like.rpq", 20_000_000),
            ("sparql/wikidata-like-100m.rpq", 100_000_000),
            ("sparql/wikidata-like-1b.rpq", 1_000_000_000),
        ] {
            let shipped = std::fs::read_to_string(
                std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
                    .join("..")
                    .join(file),
            )
            .unwrap();
            assert_eq!(
                shipped,
                wikidata_like_workload(size, DEFAULT_PREDICATES),
                "{file}"
            );
        }
    }
}
