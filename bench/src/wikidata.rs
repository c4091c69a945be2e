//! A **synthetic** Wikidata-"truthy"-style N-Triples generator, so that loading and
//! querying can be exercised at 10⁸–10⁹ triples without downloading a dump.
//!
//! Nothing here is real Wikidata data: only the IRI forms and the predicate numbers are
//! real (`wd:Q…`, `wdt:P…`). The shapes imitate what matters for path queries:
//! - `P31` (instance of) points at a few very hot classes;
//! - `P279` (subclass of) is a DAG over classes, skewed toward the roots, so closures are
//!   deep and fan in;
//! - `P131` (located in the administrative entity) is a tree over administrative entities
//!   (one fixed parent each, with a lower index) plus places hanging off it;
//! - `P17` (country) points at ~200 countries with skew; `P530` (diplomatic relation) is
//!   symmetric between countries;
//! - `P361` (part of) and `P737` (influenced by) are DAGs toward lower ids;
//! - `P2860` (cites work) is a citation DAG with preferential attachment; `P50` (author)
//!   points at skewed authors;
//! - `P577` (publication date, `xsd:dateTime`), `P1082` (population, `xsd:decimal`) and
//!   `P1448` (official name, `@en`) give literal objects.
//!
//! Generation is split into fixed chunks of triples, each with its own RNG stream derived
//! from `(seed, chunk)`, generated in parallel on rayon threads and written in order, so the
//! output depends only on `(triples, seed)`. With gzip each chunk is compressed in parallel
//! as its own gzip member (readers must accept multi-member gzip, as `load` does).

use std::io::{self, Write};

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use rayon::prelude::*;

const ENTITY: &str = "http://www.wikidata.org/entity/Q";
const PROP: &str = "http://www.wikidata.org/prop/direct/P";
const XSD: &str = "http://www.w3.org/2001/XMLSchema#";
/// Triples per independently generated chunk.
const CHUNK: u64 = 1 << 18;

/// What to generate.
#[derive(Clone, Debug)]
pub struct GenOptions {
    /// Exact number of triples (lines).
    pub triples: u64,
    /// RNG seed; the same `(triples, seed)` gives the same bytes.
    pub seed: u64,
    /// Compress the output as multi-member gzip.
    pub gzip: bool,
}

/// Index ranges of the kinds of entities; a Q number is index + 1.
#[derive(Clone, Copy, Debug)]
struct Layout {
    classes: u64,
    countries: u64,
    admins: u64,
    people: u64,
    works: u64,
    items: u64,
}

impl Layout {
    fn new(triples: u64) -> Layout {
        let entities = (triples / 4).max(2_000);
        Layout {
            classes: (entities / 200).max(50),
            countries: 200,
            admins: (entities / 40).max(100),
            people: entities / 8,
            works: entities / 4,
            items: entities / 2,
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

/// An index in `0..n` skewed toward 0: density ∝ x^(1/a − 1).
fn skewed(rng: &mut StdRng, n: u64, a: f64) -> u64 {
    let u: f64 = rng.random();
    ((n as f64 * u.powf(a)) as u64).min(n.saturating_sub(1))
}

/// A fixed pseudo-random value in `[0, 1)` for `i` (the same on every draw), for trees.
fn fixed_unit(i: u64) -> f64 {
    let mut x = i.wrapping_add(0x9e37_79b9_7f4a_7c15);
    x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    x ^= x >> 31;
    (x >> 11) as f64 / (1u64 << 53) as f64
}

struct Out<'a> {
    buf: &'a mut Vec<u8>,
}

impl Out<'_> {
    fn iri(&mut self, q: u64) {
        let _ = write!(self.buf, "<{ENTITY}{}>", q + 1);
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
fn chunk_text(l: &Layout, seed: u64, chunk: u64, n: u64, buf: &mut Vec<u8>) {
    let mut rng = StdRng::seed_from_u64(seed ^ chunk.wrapping_mul(0x9e37_79b9_7f4a_7c15));
    let mut out = Out { buf };
    let mut left = n;
    while left > 0 {
        left -= 1;
        let pick = rng.random_range(0..1000u32);
        match pick {
            0..250 => {
                let s = rng.random_range(0..l.all());
                out.triple(s, 31, l.class(skewed(&mut rng, l.classes, 6.0)));
            }
            250..280 => {
                let c = rng.random_range(1..l.classes);
                let parent = skewed(&mut rng, c, 2.0);
                out.triple(l.class(c), 279, l.class(parent));
            }
            280..380 => {
                if rng.random_bool(0.5) {
                    let a = rng.random_range(1..l.admins);
                    let parent = (a as f64 * fixed_unit(a).powf(1.5)) as u64;
                    out.triple(l.admin(a), 131, l.admin(parent.min(a - 1)));
                } else {
                    let i = rng.random_range(0..l.items);
                    out.triple(l.item(i), 131, l.admin(skewed(&mut rng, l.admins, 2.0)));
                }
            }
            380..460 => {
                let s = if rng.random_bool(0.5) {
                    l.admin(rng.random_range(0..l.admins))
                } else {
                    l.item(rng.random_range(0..l.items))
                };
                out.triple(s, 17, l.country(skewed(&mut rng, l.countries, 2.0)));
            }
            460..510 => {
                let i = rng.random_range(1..l.all());
                out.triple(i, 361, (i as f64 * rng.random::<f64>()) as u64);
            }
            510..760 => {
                let w = rng.random_range(1..l.works);
                out.triple(l.work(w), 2860, l.work(skewed(&mut rng, w, 3.0)));
            }
            760..840 => {
                let w = rng.random_range(0..l.works);
                out.triple(l.work(w), 50, l.person(skewed(&mut rng, l.people, 2.0)));
            }
            840..860 => {
                let p = rng.random_range(1..l.people);
                out.triple(l.person(p), 737, l.person(skewed(&mut rng, p, 2.0)));
            }
            860..880 => {
                let a = l.country(skewed(&mut rng, l.countries, 1.5));
                let b = l.country(rng.random_range(0..l.countries));
                out.triple(a, 530, b);
                if left > 0 {
                    left -= 1;
                    out.triple(b, 530, a);
                }
            }
            880..940 => {
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
            940..970 => {
                let a = l.admin(rng.random_range(0..l.admins));
                let pop = 10u64.pow(rng.random_range(2..8)) * rng.random_range(1..10u64);
                out.literal(a, 1082, format_args!("\"{pop}\"^^<{XSD}decimal>"));
            }
            _ => {
                let a = rng.random_range(0..l.admins);
                out.literal(
                    l.admin(a),
                    1448,
                    format_args!("\"Synthetic place {}\"@en", a + 1),
                );
            }
        }
    }
}

/// Writes `options.triples` synthetic triples to `out`; returns the bytes written.
pub fn write_wikidata_like(out: &mut dyn Write, options: &GenOptions) -> io::Result<u64> {
    let layout = Layout::new(options.triples);
    let chunks = options.triples.div_ceil(CHUNK);
    let group = 2 * rayon::current_num_threads().max(1) as u64;
    let mut written = 0u64;
    let mut next = 0u64;
    while next < chunks {
        let end = (next + group).min(chunks);
        let parts: Vec<io::Result<Vec<u8>>> = (next..end)
            .into_par_iter()
            .map(|c| {
                let n = CHUNK.min(options.triples - c * CHUNK);
                let mut text = Vec::with_capacity(n as usize * 110);
                chunk_text(&layout, options.seed, c, n, &mut text);
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
}

impl Layout {
    /// The index (Q number − 1) of `role`.
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
        }
    }
}

/// The property-path workload over `gen wikidata-like --triples N` data: one query per
/// line, `id, S REGEX O` (the format of `k2rpq bench --queries`), covering the query
/// shapes of a Wikidata log (c→v, v→c, v→v, c→c; `*`, `+`, `/`, `|`, `^`, `?`, negated
/// sets). Its constants are derived from the generator's layout for `triples` (see
/// `Role`), so they name entities of the intended kind at every size; the layout
/// scales with `triples`, so answer sizes grow about linearly with it.
pub fn wikidata_like_workload(triples: u64) -> String {
    use Role::*;
    let l = Layout::new(triples);
    let q = |r: Role| format!("<{ENTITY}{}>", l.role(r) + 1);
    let p = |n: u32| format!("<{PROP}{n}>");
    let (p31, p279, p131, p17, p530) = (p(31), p(279), p(131), p(17), p(530));
    let (p2860, p50, p737, p361) = (p(2860), p(50), p(737), p(361));
    let queries: Vec<String> = vec![
        format!("?x {p31}/{p279}* {}", q(ClassLow)),
        format!("?x {p279}* {}", q(ClassHigh)),
        format!("?x {p279}+ {}", q(ClassMid)),
        format!("{} {p279}+ ?y", q(ClassHigh)),
        format!("{} {p279}* ?y", q(ClassLow)),
        format!("{} {p131}+ ?y", q(AdminLeaf)),
        format!("{} {p131}*/{p17} ?y", q(AdminLeaf)),
        format!("?x {p131}* {}", q(AdminMid)),
        format!("?x {p131}/{p17} {}", q(CountryCold)),
        format!("{} {p530} ?y", q(CountryMid)),
        format!("{} {p530}/{p530} ?y", q(CountryMid)),
        format!("{} {p530}+ ?y", q(CountryCold)),
        format!("?x {p17} {}", q(CountryMid)),
        format!("?x ^{p17} {}", q(AdminMid)),
        format!("{} {p2860}+ ?y", q(WorkNew)),
        format!("{} {p2860}/{p50} ?y", q(WorkNew)),
        format!("?x {p50} {}", q(PersonHot)),
        format!("?x {p2860}/{p50} {}", q(PersonHot)),
        format!("?x {p2860}+/{p50} {}", q(PersonMid)),
        format!("{} ({p2860}|{p50})+ ?y", q(WorkNew)),
        format!("{} ({p131}|{p361})+ ?y", q(AdminLeaf)),
        format!("{} !({p131}) ?y", q(AdminMid)),
        format!("{} {p279}? ?y", q(ClassHigh)),
        format!("{} {p2860}+ {}", q(WorkNew), q(WorkFirst)),
        format!("{} {p131}+ {}", q(AdminLeaf), q(AdminRoot)),
        format!("?x {p530}+ ?y"),
        format!("?x {p737}+ ?y"),
        format!("?x {p530}/{p530} ?y"),
        format!("{} !({p530}|^{p530}) ?y", q(CountryCold)),
        format!("{} ^{p50}/{p2860} ?y", q(PersonMid)),
        format!("?x {p131}?/{p131} {}", q(AdminMid)),
        format!("?x {p279}* {}", q(ClassRoot)),
        format!("?x {p737}* {}", q(PersonMid)),
        format!("?x ({p17}|^{p17}) {}", q(CountryHot)),
    ];
    let mut out = format!(
        "# Property-path workload over `k2rpq gen wikidata-like --triples {triples}` (synthetic!).\n\
         # Written by `k2rpq gen wikidata-like --triples {triples} --workload FILE`: constants are\n\
         # positions in the generator's layout for that size (src/rdf/gen.rs, `Role`).\n"
    );
    for (i, text) in queries.iter().enumerate() {
        out.push_str(&format!("w{:02}, {text}\n", i + 1));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exact_count_deterministic_and_parseable() {
        let opts = GenOptions {
            triples: 3000,
            seed: 7,
            gzip: false,
        };
        let mut a = Vec::new();
        write_wikidata_like(&mut a, &opts).unwrap();
        let mut b = Vec::new();
        write_wikidata_like(&mut b, &opts).unwrap();
        assert_eq!(a, b);
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
    }

    #[test]
    fn workload_constants_exist_and_the_shipped_files_are_current() {
        // Every query parses, and every entity it names occurs in data of that size (a
        // constant outside the data would make the query trivially empty).
        let triples = 400_000;
        let text = wikidata_like_workload(triples);
        let mut data = Vec::new();
        write_wikidata_like(
            &mut data,
            &GenOptions {
                triples,
                seed: 42,
                gzip: false,
            },
        )
        .unwrap();
        let data = String::from_utf8(data).unwrap();
        let mut lines = 0;
        for line in text.lines().filter(|l| !l.starts_with('#')) {
            k2rpq::rpq::parse_log_line(line).unwrap();
            lines += 1;
            for iri in line.split(['<', '>']).filter(|t| t.starts_with(ENTITY)) {
                assert!(data.contains(&format!("<{iri}>")), "{iri} of {line}");
            }
        }
        assert_eq!(lines, 34);
        for (file, size) in [
            ("sparql/wikidata-like.rpq", 20_000_000),
            ("sparql/wikidata-like-100m.rpq", 100_000_000),
        ] {
            let shipped = std::fs::read_to_string(
                std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
                    .join("..")
                    .join(file),
            )
            .unwrap();
            assert_eq!(shipped, wikidata_like_workload(size), "{file}");
        }
    }
}
