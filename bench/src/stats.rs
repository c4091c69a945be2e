//! Summary statistics of repeated timings.

/// Median, mean and tail of a set of samples (seconds or milliseconds: any unit).
#[derive(Clone, Copy, Debug, Default, PartialEq, serde::Serialize)]
pub struct Summary {
    /// Samples.
    pub n: usize,
    /// Median (mean of the two middle samples for an even count).
    pub median: f64,
    /// Arithmetic mean.
    pub mean: f64,
    /// 95th percentile (nearest rank).
    pub p95: f64,
    /// Smallest sample.
    pub min: f64,
    /// Largest sample.
    pub max: f64,
}

impl Summary {
    /// Summarises `samples` (NaNs are ignored); all zero when empty.
    ///
    /// ```
    /// use k2rpq_bench::stats::Summary;
    /// let s = Summary::of(&[3.0, 1.0, 2.0, 10.0]);
    /// assert_eq!((s.median, s.min, s.max, s.p95), (2.5, 1.0, 10.0, 10.0));
    /// ```
    pub fn of(samples: &[f64]) -> Summary {
        let mut v: Vec<f64> = samples.iter().copied().filter(|x| !x.is_nan()).collect();
        if v.is_empty() {
            return Summary::default();
        }
        v.sort_by(|a, b| a.total_cmp(b));
        let n = v.len();
        let median = if n % 2 == 1 {
            v[n / 2]
        } else {
            (v[n / 2 - 1] + v[n / 2]) / 2.0
        };
        let rank = ((0.95 * n as f64).ceil() as usize).clamp(1, n);
        Summary {
            n,
            median,
            mean: v.iter().sum::<f64>() / n as f64,
            p95: v[rank - 1],
            min: v[0],
            max: v[n - 1],
        }
    }
}

/// Geometric mean of positive values (zero when there are none).
pub fn geomean(values: &[f64]) -> f64 {
    let v: Vec<f64> = values
        .iter()
        .copied()
        .filter(|x| *x > 0.0 && x.is_finite())
        .collect();
    if v.is_empty() {
        return 0.0;
    }
    (v.iter().map(|x| x.ln()).sum::<f64>() / v.len() as f64).exp()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn summaries() {
        assert_eq!(Summary::of(&[]), Summary::default());
        let s = Summary::of(&[5.0]);
        assert_eq!((s.median, s.mean, s.p95), (5.0, 5.0, 5.0));
        let v: Vec<f64> = (1..=100).map(|x| x as f64).collect();
        let s = Summary::of(&v);
        assert_eq!((s.median, s.p95, s.mean), (50.5, 95.0, 50.5));
        assert!((geomean(&[1.0, 100.0]) - 10.0).abs() < 1e-9);
    }
}
