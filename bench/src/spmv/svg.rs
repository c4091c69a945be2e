//! The paper's Figure 5 as a small hand-written SVG: working set against time, both
//! relative to cuSPARSE on log scales (absolute milliseconds and bytes when cuSPARSE did
//! not run). One point per measured product; circles are right products, squares left.

use std::fmt::Write as _;

use super::report::SpmvReport;
use k2rpq::engine::Direction;

const W: f64 = 640.0;
const H: f64 = 480.0;
const LEFT: f64 = 70.0;
const RIGHT: f64 = 20.0;
const TOP: f64 = 40.0;
const BOTTOM: f64 = 50.0;

struct Point {
    x: f64,
    y: f64,
    label: String,
    color: &'static str,
    left: bool,
}

fn color(contender: &str) -> &'static str {
    if contender.starts_with("cusparse") {
        "#000000"
    } else if contender.starts_with("bcsr") {
        "#7f7f7f"
    } else if contender.starts_with("cpu") {
        "#2ca02c"
    } else if contender.contains("k2+F") {
        "#1f77b4"
    } else {
        "#d62728"
    }
}

/// A log10 axis covering `[min, max]` by whole decades.
struct Axis {
    lo: f64,
    hi: f64,
}

impl Axis {
    fn covering(values: impl Iterator<Item = f64>) -> Axis {
        let (mut lo, mut hi) = (f64::INFINITY, f64::NEG_INFINITY);
        for v in values.filter(|v| *v > 0.0 && v.is_finite()) {
            lo = lo.min(v.log10().floor());
            hi = hi.max(v.log10().ceil());
        }
        if !lo.is_finite() {
            (lo, hi) = (-1.0, 1.0);
        }
        if hi <= lo {
            hi = lo + 1.0;
        }
        Axis { lo, hi }
    }
    /// Position in [0, 1].
    fn at(&self, v: f64) -> f64 {
        (v.max(1e-300).log10() - self.lo) / (self.hi - self.lo)
    }
}

fn tick(e: f64) -> String {
    let v = 10f64.powi(e as i32);
    if (-3.0..=4.0).contains(&e) {
        format!("{v}")
    } else {
        format!("1e{e}")
    }
}

fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

/// The figure of a report.
pub fn figure(report: &SpmvReport) -> String {
    let relative = report
        .measurements
        .iter()
        .any(|m| m.time_vs_cusparse.is_some());
    let points: Vec<Point> = report
        .measurements
        .iter()
        .filter_map(|m| {
            let (x, y) = if relative {
                (m.time_vs_cusparse?, m.working_set_vs_cusparse?)
            } else {
                (m.timing.median_ms, m.working_set_bytes as f64)
            };
            if relative && m.contender == "cusparse" && m.batch != 1 {
                return None; // every cuSPARSE point sits at (1, 1): label it once
            }
            Some(Point {
                x,
                y,
                label: format!(
                    "{} B={}{}",
                    m.contender,
                    m.batch,
                    if m.bit_packed { " bits" } else { "" }
                ),
                color: color(&m.contender),
                left: m.direction == Direction::Left,
            })
        })
        .collect();
    let ax = Axis::covering(points.iter().map(|p| p.x));
    let ay = Axis::covering(points.iter().map(|p| p.y));
    let (pw, ph) = (W - LEFT - RIGHT, H - TOP - BOTTOM);
    let px = |v: f64| LEFT + ax.at(v) * pw;
    let py = |v: f64| TOP + (1.0 - ay.at(v)) * ph;

    let mut s = String::new();
    let _ = writeln!(
        s,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H}" viewBox="0 0 {W} {H}" font-family="sans-serif" font-size="11">"#
    );
    let _ = writeln!(s, r#"<rect width="{W}" height="{H}" fill="white"/>"#);
    let title = format!(
        "{}: working set vs time{}",
        report.graph.name,
        if relative {
            ", relative to cuSPARSE"
        } else {
            ""
        }
    );
    let _ = writeln!(
        s,
        r#"<text x="{}" y="20" text-anchor="middle" font-size="13">{}</text>"#,
        W / 2.0,
        esc(&title)
    );
    // Decade grid and tick labels.
    for e in ax.lo as i32..=ax.hi as i32 {
        let x = px(10f64.powi(e));
        let _ = writeln!(
            s,
            r##"<line x1="{x:.1}" y1="{TOP}" x2="{x:.1}" y2="{:.1}" stroke="#ddd"/><text x="{x:.1}" y="{:.1}" text-anchor="middle">{}</text>"##,
            TOP + ph,
            TOP + ph + 15.0,
            tick(e as f64)
        );
    }
    for e in ay.lo as i32..=ay.hi as i32 {
        let y = py(10f64.powi(e));
        let _ = writeln!(
            s,
            r##"<line x1="{LEFT}" y1="{y:.1}" x2="{:.1}" y2="{y:.1}" stroke="#ddd"/><text x="{:.1}" y="{:.1}" text-anchor="end">{}</text>"##,
            LEFT + pw,
            LEFT - 5.0,
            y + 4.0,
            tick(e as f64)
        );
    }
    if relative {
        // cuSPARSE's time and working set.
        let _ = writeln!(
            s,
            r##"<line x1="{:.1}" y1="{TOP}" x2="{:.1}" y2="{:.1}" stroke="#999" stroke-dasharray="4 3"/><line x1="{LEFT}" y1="{:.1}" x2="{:.1}" y2="{:.1}" stroke="#999" stroke-dasharray="4 3"/>"##,
            px(1.0),
            px(1.0),
            TOP + ph,
            py(1.0),
            LEFT + pw,
            py(1.0)
        );
    }
    let _ = writeln!(
        s,
        r#"<rect x="{LEFT}" y="{TOP}" width="{pw}" height="{ph}" fill="none" stroke="black"/>"#
    );
    let (xl, yl) = if relative {
        ("time / cuSPARSE time", "working set / cuSPARSE working set")
    } else {
        ("median time (ms)", "working set (bytes)")
    };
    let _ = writeln!(
        s,
        r#"<text x="{:.1}" y="{:.1}" text-anchor="middle">{xl} (log)</text>"#,
        LEFT + pw / 2.0,
        H - 12.0
    );
    let _ = writeln!(
        s,
        r#"<text x="15" y="{:.1}" text-anchor="middle" transform="rotate(-90 15 {:.1})">{yl} (log)</text>"#,
        TOP + ph / 2.0,
        TOP + ph / 2.0
    );
    for p in &points {
        let (x, y) = (px(p.x), py(p.y));
        if p.left {
            let _ = writeln!(
                s,
                r#"<rect x="{:.1}" y="{:.1}" width="7" height="7" fill="{}"/>"#,
                x - 3.5,
                y - 3.5,
                p.color
            );
        } else {
            let _ = writeln!(
                s,
                r#"<circle cx="{x:.1}" cy="{y:.1}" r="4" fill="{}"/>"#,
                p.color
            );
        }
        let _ = writeln!(
            s,
            r#"<text x="{:.1}" y="{:.1}" font-size="9" fill="{}">{}</text>"#,
            x + 6.0,
            y - 4.0,
            p.color,
            esc(&p.label)
        );
    }
    let _ = writeln!(
        s,
        r#"<text x="{:.1}" y="{:.1}" font-size="9" text-anchor="end">circle: right, square: left</text>"#,
        LEFT + pw - 4.0,
        TOP + 12.0
    );
    s.push_str("</svg>\n");
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::spmv::report::tests::sample;

    #[test]
    fn relative_figure_places_cusparse_at_one_one() {
        let mut r = sample();
        r.compute_ratios();
        let svg = figure(&r);
        assert!(svg.starts_with("<svg") && svg.trim_end().ends_with("</svg>"));
        assert!(svg.contains("relative to cuSPARSE"));
        // cpu k2+F (2.5x time, 0.1x working set) and cuSPARSE; cpu k2 at B=4 has no ratio.
        assert_eq!(svg.matches("<circle").count(), 2, "{svg}");
        assert!(svg.contains("cpu k2+F B=1") && !svg.contains("cpu k2 B=4"));
        // Axes cover 0.1..10 in x (1 and 2.5) and 0.1..1 in y.
        assert!(svg.contains(">0.1</text>") && svg.contains(">10</text>"));
    }

    #[test]
    fn absolute_figure_without_cusparse() {
        let mut r = sample();
        r.measurements.retain(|m| m.contender != "cusparse");
        r.compute_ratios();
        let svg = figure(&r);
        assert!(svg.contains("median time (ms)"));
        assert_eq!(svg.matches("<circle").count(), 2);
    }

    #[test]
    fn axis_covers_whole_decades() {
        let a = Axis::covering([0.3, 42.0].into_iter());
        assert_eq!((a.lo, a.hi), (-1.0, 2.0));
        assert!((a.at(1.0) - 1.0 / 3.0).abs() < 1e-12);
        let e = Axis::covering(std::iter::empty());
        assert!(e.hi > e.lo);
    }
}
