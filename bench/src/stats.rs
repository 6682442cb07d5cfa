//! Summary statistics.

use serde::Serialize;

/// Summary of a sample.
#[derive(Debug, Clone, Copy, Default, Serialize)]
pub struct Summary {
    /// Sample size.
    pub n: usize,
    /// Median.
    pub median: f64,
    /// 95th percentile (nearest rank).
    pub p95: f64,
    /// Smallest.
    pub min: f64,
    /// Largest.
    pub max: f64,
    /// Mean.
    pub mean: f64,
}

/// Summarises `xs` (all zeros when empty).
pub fn summary(xs: &[f64]) -> Summary {
    if xs.is_empty() {
        return Summary::default();
    }
    let mut v = xs.to_vec();
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
        p95: v[rank - 1],
        min: v[0],
        max: v[n - 1],
        mean: v.iter().sum::<f64>() / n as f64,
    }
}

/// `a / b`, or `None` when either is missing or b is not positive.
pub fn ratio(a: Option<f64>, b: Option<f64>) -> Option<f64> {
    match (a, b) {
        (Some(a), Some(b)) if b > 0.0 && a.is_finite() => Some(a / b),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn median_and_p95() {
        let s = summary(&[5.0, 1.0, 3.0, 2.0, 4.0]);
        assert_eq!(s.median, 3.0);
        assert_eq!(s.p95, 5.0);
        assert_eq!(s.min, 1.0);
        let s = summary(&(1..=100).map(f64::from).collect::<Vec<_>>());
        assert_eq!(s.median, 50.5);
        assert_eq!(s.p95, 95.0);
        assert_eq!(summary(&[]).n, 0);
    }
}
