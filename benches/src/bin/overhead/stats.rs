//! One figure's samples summarised: median, nearest-rank percentiles, minimum,
//! mean.

#[derive(Clone, Copy)]
pub struct Stat {
    pub median: f64,
    pub p90: f64,
    /// JSON only: the rest of the distribution (round trips are often
    /// bimodal on a busy host, which the median alone hides).
    pub p10: f64,
    pub p25: f64,
    pub p75: f64,
    pub p99: f64,
    pub min: f64,
    pub mean: f64,
    pub n: usize,
}

pub fn stat(samples: &[f64]) -> Stat {
    let mut v = samples.to_vec();
    v.sort_by(f64::total_cmp);
    let n = v.len();
    if n == 0 {
        return Stat {
            median: f64::NAN,
            p90: f64::NAN,
            p10: f64::NAN,
            p25: f64::NAN,
            p75: f64::NAN,
            p99: f64::NAN,
            min: f64::NAN,
            mean: f64::NAN,
            n,
        };
    }
    let median = if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    };
    // Nearest-rank percentiles.
    let pct = |p: f64| v[((p * n as f64).ceil() as usize).clamp(1, n) - 1];
    Stat {
        median,
        p90: pct(0.9),
        p10: pct(0.1),
        p25: pct(0.25),
        p75: pct(0.75),
        p99: pct(0.99),
        min: v[0],
        mean: v.iter().sum::<f64>() / n as f64,
        n,
    }
}
