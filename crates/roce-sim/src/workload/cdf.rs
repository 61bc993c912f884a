//! Flow-size distributions in HPCC's CDF format (`traffic_gen/*.txt` of
//! `alibaba-edu/High-Precision-Congestion-Control`): one point per line,
//! `<flow size in bytes> <cumulative percent>`, the first `0 0`, the last at percent 100, both
//! columns strictly increasing (`custom_rand.py`, `testCdf`). Lines starting with `#` are
//! comments (ours have a header citing their source; HPCC's have none) and blank lines are
//! skipped.
//!
//! Semantics as `custom_rand.py` gives them: a sample draws `r` uniform in [0, 100) and
//! interpolates linearly between the two points whose percents enclose it; the size is the
//! interpolated value truncated to whole bytes, and at least 1 (`traffic_gen.py`). The mean is the
//! trapezoid rule, `Σ (x0 + x1) / 2 · (y1 − y0) / 100` (`getAvg`), which is the exact mean of the
//! interpolated distribution.

use rand::Rng;

/// A piecewise-linear cumulative distribution of flow sizes.
#[derive(Debug, Clone, PartialEq)]
pub struct Cdf {
    /// (size in bytes, cumulative percent), checked as the module describes.
    points: Vec<(f64, f64)>,
}

/// Why a CDF file was refused: the file, the 1-based line and the rule broken there.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{file}:{line}: {kind}")]
pub struct CdfError {
    /// The file name given to the parser.
    pub file: String,
    /// The line at fault (the last line for a rule about the end).
    pub line: usize,
    /// The rule broken.
    pub kind: CdfErrorKind,
}

/// The rule a CDF line broke.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum CdfErrorKind {
    /// Fewer than two points.
    #[error("a CDF needs at least two points (`0 0` and `<max size> 100`), found {0}")]
    TooFewPoints(usize),
    /// Not two fields.
    #[error("expected 2 fields `<size bytes> <cumulative percent>`, got {0}")]
    FieldCount(usize),
    /// A field that is not a finite number.
    #[error("{column} {value:?} is not a number")]
    BadNumber {
        /// `size` or `percent`.
        column: &'static str,
        /// The text found.
        value: String,
    },
    /// The first point is not `0 0`.
    #[error("the first point must be `0 0`, found `{size} {percent}`")]
    FirstNotZero {
        /// Its size.
        size: f64,
        /// Its percent.
        percent: f64,
    },
    /// The last percent is not 100.
    #[error("the last percent must be 100, found {0}")]
    LastNot100(f64),
    /// A column that does not strictly increase.
    #[error(
        "{column} not monotone: {value} after {previous} (both columns must strictly increase)"
    )]
    NotMonotone {
        /// `size` or `percent`.
        column: &'static str,
        /// The previous line's value.
        previous: f64,
        /// This line's value.
        value: f64,
    },
}

impl Cdf {
    /// Parses the format above; `file` names the source in errors.
    pub fn parse(file: &str, text: &str) -> Result<Self, CdfError> {
        let err = |line, kind| CdfError {
            file: file.to_owned(),
            line,
            kind,
        };
        let mut points: Vec<(f64, f64)> = Vec::new();
        let mut last_line = text.lines().count().max(1);
        for (n, line) in crate::text::content_lines(text) {
            let fields: Vec<&str> = line.split_whitespace().collect();
            let &[size, percent] = fields.as_slice() else {
                return Err(err(n, CdfErrorKind::FieldCount(fields.len())));
            };
            let size = number(size, "size").map_err(|k| err(n, k))?;
            let percent = number(percent, "percent").map_err(|k| err(n, k))?;
            match points.last() {
                None if size != 0.0 || percent != 0.0 => {
                    return Err(err(n, CdfErrorKind::FirstNotZero { size, percent }));
                }
                Some(&(ps, pp)) => {
                    let broken = if size <= ps {
                        Some(("size", ps, size))
                    } else if percent <= pp {
                        Some(("percent", pp, percent))
                    } else {
                        None
                    };
                    if let Some((column, previous, value)) = broken {
                        let kind = CdfErrorKind::NotMonotone {
                            column,
                            previous,
                            value,
                        };
                        return Err(err(n, kind));
                    }
                }
                None => {}
            }
            points.push((size, percent));
            last_line = n;
        }
        if points.len() < 2 {
            return Err(err(last_line, CdfErrorKind::TooFewPoints(points.len())));
        }
        let &(_, top) = points.last().expect("at least two points");
        if top != 100.0 {
            return Err(err(last_line, CdfErrorKind::LastNot100(top)));
        }
        Ok(Self { points })
    }

    /// HPCC's WebSearch distribution (DCTCP, SIGCOMM'10): `workloads/websearch.cdf`.
    pub fn websearch() -> Self {
        Self::parse(
            "websearch.cdf",
            include_str!("../../workloads/websearch.cdf"),
        )
        .expect("the shipped websearch.cdf is valid (pinned by a test)")
    }

    /// HPCC's FB_Hadoop distribution (Roy et al., SIGCOMM'15): `workloads/fb_hadoop.cdf`.
    pub fn fb_hadoop() -> Self {
        Self::parse(
            "fb_hadoop.cdf",
            include_str!("../../workloads/fb_hadoop.cdf"),
        )
        .expect("the shipped fb_hadoop.cdf is valid (pinned by a test)")
    }

    /// The points, (size in bytes, cumulative percent).
    pub fn points(&self) -> &[(f64, f64)] {
        &self.points
    }

    /// The size at cumulative `percent` (clamped to [0, 100]), by linear interpolation
    /// (`getValueFromPercentile`: the first point whose percent is at least `percent` and the
    /// one before it).
    pub fn size_at(&self, percent: f64) -> f64 {
        let y = if percent.is_nan() {
            0.0
        } else {
            percent.clamp(0.0, 100.0)
        };
        let i = self
            .points
            .partition_point(|&(_, p)| p < y)
            .clamp(1, self.points.len() - 1);
        let ((x0, y0), (x1, y1)) = (self.points[i - 1], self.points[i]);
        x0 + (x1 - x0) / (y1 - y0) * (y - y0)
    }

    /// A flow size: [`Cdf::size_at`] a uniform percent in [0, 100), truncated, at least 1 byte.
    pub fn sample<R: Rng + ?Sized>(&self, rng: &mut R) -> u64 {
        let r = rng.random::<f64>() * 100.0;
        // `as` saturates; sizes are below 2^53 in any real CDF, where truncation is exact.
        (self.size_at(r) as u64).max(1)
    }

    /// The mean size in bytes, by the trapezoid rule.
    pub fn mean(&self) -> f64 {
        let sum: f64 = self
            .points
            .windows(2)
            .map(|w| (w[0].0 + w[1].0) / 2.0 * (w[1].1 - w[0].1))
            .sum();
        sum / 100.0
    }
}

fn number(text: &str, column: &'static str) -> Result<f64, CdfErrorKind> {
    text.parse::<f64>()
        .ok()
        .filter(|v| v.is_finite())
        .ok_or_else(|| CdfErrorKind::BadNumber {
            column,
            value: text.to_owned(),
        })
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;
    use rand::SeedableRng;
    use rand_chacha::ChaCha8Rng;

    use super::*;

    #[test]
    fn shipped_files_are_hpccs_points_and_means() {
        // The points of traffic_gen/WebSearch_distribution.txt and FbHdp_distribution.txt, as
        // sim-facts §4.1 lists them: "WebSearch" must always mean this variant.
        let web: &[(f64, f64)] = &[
            (0.0, 0.0),
            (1e4, 15.0),
            (2e4, 20.0),
            (3e4, 30.0),
            (5e4, 40.0),
            (8e4, 53.0),
            (2e5, 60.0),
            (1e6, 70.0),
            (2e6, 80.0),
            (5e6, 90.0),
            (1e7, 97.0),
            (3e7, 100.0),
        ];
        assert_eq!(Cdf::websearch().points(), web);
        assert_eq!(Cdf::fb_hadoop().points().len(), 20);
        assert_eq!(Cdf::fb_hadoop().points()[17], (1e6, 97.5));
        // Means as sim-facts §4.1 reports them from HPCC's getAvg.
        assert!((Cdf::websearch().mean() - 1_711_250.0).abs() <= 1.0);
        assert!((Cdf::fb_hadoop().mean() - 120_421.0).abs() <= 1.0);
    }

    #[test]
    fn sample_medians_are_near_the_documented_medians() {
        // sim-facts §4.1: WebSearch median ≈ 73 KB, FB_Hadoop median 700 B.
        for (cdf, median) in [(Cdf::websearch(), 73_000.0), (Cdf::fb_hadoop(), 700.0)] {
            let mut rng = ChaCha8Rng::seed_from_u64(1);
            let mut s: Vec<u64> = (0..100_001).map(|_| cdf.sample(&mut rng)).collect();
            s.sort_unstable();
            let got = s[s.len() / 2] as f64;
            assert!(
                (got - median).abs() / median < 0.02,
                "median {got}, documented {median}"
            );
        }
    }

    #[test]
    fn interpolates_between_points() {
        let c = Cdf::parse("t", "0 0\n100 50\n300 100\n").unwrap();
        assert_eq!(c.size_at(25.0), 50.0);
        assert_eq!(c.size_at(50.0), 100.0);
        assert_eq!(c.size_at(75.0), 200.0);
        assert_eq!(c.size_at(0.0), 0.0);
        assert_eq!(c.size_at(100.0), 300.0);
        assert_eq!(c.size_at(-5.0), 0.0);
        assert_eq!(c.mean(), (50.0 * 50.0 + 200.0 * 50.0) / 100.0);
    }

    #[test]
    fn malformed_cdfs_name_file_line_and_rule() {
        let cases: &[(&str, &str)] = &[
            ("", "c.cdf:1: a CDF needs at least two points"),
            ("0 0\n", "c.cdf:1: a CDF needs at least two points"),
            ("# c\n0 0\n10\n", "c.cdf:3: expected 2 fields"),
            ("0 0\n10 x\n", "c.cdf:2: percent \"x\" is not a number"),
            ("0 0\ninf 100\n", "c.cdf:2: size \"inf\" is not a number"),
            ("5 0\n10 100\n", "c.cdf:1: the first point must be `0 0`"),
            ("0 1\n10 100\n", "c.cdf:1: the first point must be `0 0`"),
            (
                "0 0\n10 50\n10 100\n",
                "c.cdf:3: size not monotone: 10 after 10",
            ),
            (
                "0 0\n10 50\n20 40\n30 100\n",
                "c.cdf:3: percent not monotone: 40 after 50",
            ),
            (
                "0 0\n10 50\n20 99\n",
                "c.cdf:3: the last percent must be 100, found 99",
            ),
        ];
        for (text, want) in cases {
            let err = Cdf::parse("c.cdf", text).unwrap_err().to_string();
            assert!(
                err.starts_with(want),
                "{text:?}: got {err:?}, want {want:?}"
            );
        }
    }

    proptest! {
        #[test]
        fn arbitrary_text_never_panics(text in "[0-9. #\\n-]{0,80}") {
            if let Ok(c) = Cdf::parse("p", &text) {
                let mut rng = ChaCha8Rng::seed_from_u64(0);
                prop_assert!(c.sample(&mut rng) >= 1);
                prop_assert!(c.mean().is_finite());
            }
        }
    }
}
