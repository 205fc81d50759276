//! [`DecorrelatedJitter`]: the delays between retries when the server did not say.
//!
//! The "decorrelated jitter" of Marc Brooker's "Exponential Backoff And Jitter" (AWS
//! Architecture Blog, 2015), exactly as its companion simulator computes it:
//!
//! ```text
//! sleep = base                                          (before the first retry)
//! sleep = min(cap, random_between(base, sleep * 3))     (each retry)
//! ```
//!
//! `random_between(a, b)` is uniform on `[a, b]`; the sample is drawn from
//! `[base, previous * 3]` and only **then** capped (some variants in the wild cap
//! before sampling; this one does not). The delay never goes below `base` and its
//! upper bound grows ×3 per step, so clients that failed together spread apart
//! instead of retrying in lockstep.
//!
//! Terms: *base* is the smallest delay, *cap* the largest; a *uniform source* returns
//! `u` in `[0, 1]` and the sample is `base + (previous * 3 - base) * u`. Injecting the
//! source is what makes the sequence testable (see the tests, which reproduce the
//! vector tables of `shared/vectors/backoff_retry.md`).

use std::time::Duration;

/// The smallest delay between attempts by default: 100 ms, the base delay of the AWS
/// SDKs' standard mode (`DEFAULT_RETRY_DELAY_BASE`).
pub const DEFAULT_BASE_DELAY: Duration = Duration::from_millis(100);
/// The largest delay between attempts by default: 20 s, the AWS SDKs'
/// `MAXIMUM_RETRY_DELAY`.
pub const DEFAULT_MAX_DELAY: Duration = Duration::from_secs(20);

/// An endless sequence of decorrelated-jitter delays (`min(cap, random_between(base,
/// previous * 3))`). Each call gets its own: the state is the previous delay.
///
/// `U` is the uniform source, a function returning `u` in `[0, 1]` (values outside
/// are clamped). [`DecorrelatedJitter::new`] uses a thread-local random generator.
///
/// ```
/// use std::time::Duration;
/// use switchboard_sdk::DecorrelatedJitter;
///
/// let ms = Duration::from_millis;
/// // u = 1 every time: the upper bound of every step.
/// let delays: Vec<_> = DecorrelatedJitter::with_uniform(ms(5), ms(2000), || 1.0).take(7).collect();
/// assert_eq!(delays, [ms(15), ms(45), ms(135), ms(405), ms(1215), ms(2000), ms(2000)]);
/// ```
#[derive(Debug, Clone)]
pub struct DecorrelatedJitter<U = fn() -> f64> {
    base: Duration,
    cap: Duration,
    /// The delay returned last (`base` before the first one): the next sample is
    /// drawn from `[base, previous * 3]`.
    previous: Duration,
    uniform: U,
}

impl DecorrelatedJitter {
    /// Delays between `base` and `cap`, drawn from a thread-local random generator.
    pub fn new(base: Duration, cap: Duration) -> Self {
        Self::with_uniform(base, cap, uniform_random)
    }
}

/// `u` uniform on `[0, 1)` from the thread-local generator.
pub(crate) fn uniform_random() -> f64 {
    rand::random::<f64>()
}

impl Default for DecorrelatedJitter {
    /// Base [`DEFAULT_BASE_DELAY`] (100 ms), cap [`DEFAULT_MAX_DELAY`] (20 s).
    fn default() -> Self {
        Self::new(DEFAULT_BASE_DELAY, DEFAULT_MAX_DELAY)
    }
}

impl<U: FnMut() -> f64> DecorrelatedJitter<U> {
    /// Delays between `base` and `cap` with `uniform` as the random source (for
    /// deterministic tests, or another generator).
    pub fn with_uniform(base: Duration, cap: Duration, uniform: U) -> Self {
        Self {
            base,
            cap,
            previous: base,
            uniform,
        }
    }

    /// Resumes a sequence whose last delay was `previous` (a durable outbox keeps it
    /// between attempts, across restarts).
    pub fn after(mut self, previous: Duration) -> Self {
        self.previous = previous.max(self.base);
        self
    }

    /// The next delay: `min(cap, base + (previous * 3 - base) * u)`.
    pub fn next_delay(&mut self) -> Duration {
        let u = (self.uniform)();
        let u = if u.is_nan() { 0.0 } else { u.clamp(0.0, 1.0) };
        // In nanoseconds as f64: exact for every delay under 104 days, so the vector
        // tables (halves, quarters, … of a millisecond) come out exact.
        let base = self.base.as_nanos() as f64;
        let high = (self.previous.as_nanos() as f64 * 3.0).max(base);
        let sample = base + (high - base) * u;
        let sample = Duration::from_nanos(sample.round() as u64);
        self.previous = sample.min(self.cap);
        self.previous
    }
}

/// Endless: stopping is the retry budget's job, not the backoff's.
impl<U: FnMut() -> f64> Iterator for DecorrelatedJitter<U> {
    type Item = Duration;

    fn next(&mut self) -> Option<Duration> {
        Some(self.next_delay())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A uniform source replaying `values`, then failing the test if it runs dry.
    fn replay(values: &'static [f64]) -> impl FnMut() -> f64 {
        let mut values = values.iter().copied();
        move || values.next().expect("the table has a u for every call")
    }

    /// Milliseconds (possibly fractional) as a duration, for the vector tables.
    fn ms(value: f64) -> Duration {
        Duration::from_nanos((value * 1e6).round() as u64)
    }

    /// `shared/vectors/backoff_retry.md` §1, "Deterministic vectors": base = 5,
    /// cap = 2000 (ms), `random_between(a, b) = a + (b - a) * u`.
    #[test]
    fn reproduces_the_decorrelated_vector_tables() {
        let tables: [(&'static [f64], &[f64]); 3] = [
            (
                &[1.0; 7],
                &[15.0, 45.0, 135.0, 405.0, 1215.0, 2000.0, 2000.0],
            ),
            (&[0.5; 6], &[10.0, 17.5, 28.75, 45.625, 70.9375, 108.90625]),
            (&[0.0; 3], &[5.0, 5.0, 5.0]),
        ];
        for (us, expected) in tables {
            let got: Vec<Duration> =
                DecorrelatedJitter::with_uniform(ms(5.0), ms(2000.0), replay(us))
                    .take(expected.len())
                    .collect();
            let expected: Vec<Duration> = expected.iter().copied().map(ms).collect();
            assert_eq!(got, expected, "u = {us:?}");
        }
    }

    #[test]
    fn random_delays_stay_inside_their_bounds() {
        let (base, cap) = (DEFAULT_BASE_DELAY, DEFAULT_MAX_DELAY);
        for _ in 0..100 {
            let mut previous = base;
            for delay in DecorrelatedJitter::new(base, cap).take(20) {
                assert!(delay >= base, "{delay:?} is below the base");
                assert!(delay <= cap, "{delay:?} is above the cap");
                assert!(delay <= previous * 3, "{delay:?} grew more than ×3");
                previous = delay;
            }
        }
    }

    #[test]
    fn out_of_range_samples_are_clamped() {
        let ms = Duration::from_millis;
        let got: Vec<Duration> =
            DecorrelatedJitter::with_uniform(ms(10), ms(1000), replay(&[-1.0, 7.0, f64::NAN]))
                .take(3)
                .collect();
        assert_eq!(got, [ms(10), ms(30), ms(10)]);
    }
}
