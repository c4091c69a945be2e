//! Small hand-written SVG plots for benchmark reports (no plotting dependency).

use std::fmt::Write;

/// One series of points of a scatter plot.
pub struct Series {
    /// Legend label.
    pub label: String,
    /// CSS colour.
    pub color: String,
    /// `(x, y, tooltip)`; non-positive values are skipped on log axes.
    pub points: Vec<(f64, f64, String)>,
}

/// A log–log scatter plot with an optional `y = x` diagonal.
pub struct LogLogPlot {
    /// Title on top.
    pub title: String,
    /// X-axis label.
    pub x_label: String,
    /// Y-axis label.
    pub y_label: String,
    /// Draw the `y = x` line (for "ours vs theirs" plots).
    pub diagonal: bool,
    /// The data.
    pub series: Vec<Series>,
}

const W: f64 = 640.0;
const H: f64 = 480.0;
const M: f64 = 64.0;

fn decade_bounds(values: impl Iterator<Item = f64>) -> (f64, f64) {
    let (mut lo, mut hi) = (f64::INFINITY, f64::NEG_INFINITY);
    for v in values.filter(|v| *v > 0.0 && v.is_finite()) {
        lo = lo.min(v.log10().floor());
        hi = hi.max(v.log10().ceil());
    }
    if !lo.is_finite() {
        return (0.0, 1.0);
    }
    if hi <= lo {
        hi = lo + 1.0;
    }
    (lo, hi)
}

fn escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

impl LogLogPlot {
    /// Renders the plot as a standalone SVG document.
    pub fn render(&self) -> String {
        let pts = || self.series.iter().flat_map(|s| s.points.iter());
        let (mut x0, mut x1) = decade_bounds(pts().map(|p| p.0));
        let (mut y0, mut y1) = decade_bounds(pts().map(|p| p.1));
        if self.diagonal {
            (x0, x1) = (x0.min(y0), x1.max(y1));
            (y0, y1) = (x0, x1);
        }
        let sx = |v: f64| M + (v.log10() - x0) / (x1 - x0) * (W - 2.0 * M);
        let sy = |v: f64| H - M - (v.log10() - y0) / (y1 - y0) * (H - 2.0 * M);
        let mut s = String::new();
        let _ = writeln!(
            s,
            r#"<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H}" font-family="sans-serif" font-size="12">"#
        );
        let _ = writeln!(s, r#"<rect width="100%" height="100%" fill="white"/>"#);
        let _ = writeln!(
            s,
            r#"<text x="{}" y="24" text-anchor="middle" font-size="15">{}</text>"#,
            W / 2.0,
            escape(&self.title)
        );
        // Grid and decade labels.
        for d in (x0 as i32)..=(x1 as i32) {
            let x = sx(10f64.powi(d));
            let _ = writeln!(
                s,
                r##"<line x1="{x:.1}" y1="{M}" x2="{x:.1}" y2="{}" stroke="#ddd"/>"##,
                H - M
            );
            let _ = writeln!(
                s,
                r#"<text x="{x:.1}" y="{}" text-anchor="middle">1e{d}</text>"#,
                H - M + 16.0
            );
        }
        for d in (y0 as i32)..=(y1 as i32) {
            let y = sy(10f64.powi(d));
            let _ = writeln!(
                s,
                r##"<line x1="{M}" y1="{y:.1}" x2="{}" y2="{y:.1}" stroke="#ddd"/>"##,
                W - M
            );
            let _ = writeln!(
                s,
                r#"<text x="{}" y="{:.1}" text-anchor="end">1e{d}</text>"#,
                M - 6.0,
                y + 4.0
            );
        }
        let _ = writeln!(
            s,
            r##"<rect x="{M}" y="{M}" width="{}" height="{}" fill="none" stroke="#333"/>"##,
            W - 2.0 * M,
            H - 2.0 * M
        );
        if self.diagonal {
            let (a, b) = (10f64.powf(x0), 10f64.powf(x1));
            let _ = writeln!(
                s,
                r##"<line x1="{:.1}" y1="{:.1}" x2="{:.1}" y2="{:.1}" stroke="#999" stroke-dasharray="4 4"/>"##,
                sx(a),
                sy(a),
                sx(b),
                sy(b)
            );
        }
        let _ = writeln!(
            s,
            r#"<text x="{}" y="{}" text-anchor="middle">{}</text>"#,
            W / 2.0,
            H - 18.0,
            escape(&self.x_label)
        );
        let _ = writeln!(
            s,
            r#"<text x="16" y="{}" text-anchor="middle" transform="rotate(-90 16 {})">{}</text>"#,
            H / 2.0,
            H / 2.0,
            escape(&self.y_label)
        );
        for (i, series) in self.series.iter().enumerate() {
            for (x, y, tip) in &series.points {
                if *x > 0.0 && *y > 0.0 && x.is_finite() && y.is_finite() {
                    let _ = writeln!(
                        s,
                        r#"<circle cx="{:.1}" cy="{:.1}" r="3.5" fill="{}" fill-opacity="0.75"><title>{}</title></circle>"#,
                        sx(*x),
                        sy(*y),
                        series.color,
                        escape(tip)
                    );
                }
            }
            let ly = M + 16.0 + 16.0 * i as f64;
            let _ = writeln!(
                s,
                r#"<circle cx="{}" cy="{}" r="4" fill="{}"/>"#,
                M + 12.0,
                ly - 4.0,
                series.color
            );
            let _ = writeln!(
                s,
                r#"<text x="{}" y="{ly}">{}</text>"#,
                M + 22.0,
                escape(&series.label)
            );
        }
        s.push_str("</svg>\n");
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_points_and_escapes() {
        let p = LogLogPlot {
            title: "a < b".into(),
            x_label: "x".into(),
            y_label: "y".into(),
            diagonal: true,
            series: vec![Series {
                label: "s".into(),
                color: "red".into(),
                points: vec![
                    (1.0, 10.0, "q1".into()),
                    (0.0, 1.0, "skipped".into()),
                    (100.0, 0.5, "q3".into()),
                ],
            }],
        };
        let svg = p.render();
        assert!(svg.starts_with("<svg") && svg.trim_end().ends_with("</svg>"));
        assert_eq!(
            svg.matches("<circle").count(),
            2 + 1,
            "two points plus the legend dot"
        );
        assert!(svg.contains("a &lt; b") && !svg.contains("skipped"));
    }
}
