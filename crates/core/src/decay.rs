//! Time decay and the recall score.
//!
//! The score of a memory for a query is
//!
//! ```text
//! score = similarity × decay(age) × (importance_base + importance_weight × importance)
//! ```
//!
//! where `age` is the time since the memory was last recalled (or written). With the defaults
//! (`0.995` per hour, factor `0.8 + 0.4 × importance`) this is the brief's reference score.
//!
//! `decay(age)` never drops below a *floor*: `floor + (1 − floor) × d(age)`. A floor of 0 is the
//! plain decay curve (a changed preference beats its stale version); a floor above 0 keeps old
//! memories in the competition, so an old episode is still found when nothing newer answers the
//! question. The extension applies a floor per kind of memory.

use std::fmt;
use std::str::FromStr;

/// The shape of the decay curve.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DecayMode {
    /// No decay: the score is similarity × importance factor.
    None,
    /// `max(0, 1 − age / horizon)`.
    Linear,
    /// `base ^ age_hours`.
    Exponential,
    /// `(1 + age / scale) ^ −exponent`: a heavy tail.
    Power,
}

impl DecayMode {
    /// Every mode, by the name SQL uses for it.
    pub const ALL: [(&'static str, DecayMode); 4] =
        [("none", DecayMode::None), ("linear", DecayMode::Linear), ("exponential", DecayMode::Exponential), ("power", DecayMode::Power)];

    /// The name SQL uses for this mode.
    pub fn name(self) -> &'static str {
        Self::ALL.iter().find(|(_, m)| *m == self).map(|(n, _)| *n).unwrap_or("none")
    }
}

/// An unknown decay mode name.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UnknownDecayMode(pub String);

impl fmt::Display for UnknownDecayMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "unknown decay mode \"{}\"", self.0)
    }
}

impl FromStr for DecayMode {
    type Err = UnknownDecayMode;

    /// Parses a mode name, ignoring case and surrounding blanks.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let wanted = s.trim().to_ascii_lowercase();
        Self::ALL.iter().find(|(n, _)| *n == wanted).map(|(_, m)| *m).ok_or_else(|| UnknownDecayMode(s.to_string()))
    }
}

/// The constants of the decay curves.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct DecayParams {
    /// Exponential mode: the multiplier per hour (0 < base ≤ 1).
    pub exp_base: f64,
    /// Linear mode: the age, in hours, at which the multiplier reaches 0 (> 0).
    pub linear_horizon_hours: f64,
    /// Power mode: the age scale, in hours (> 0).
    pub power_scale_hours: f64,
    /// Power mode: the exponent (≥ 0).
    pub power_exponent: f64,
}

impl Default for DecayParams {
    fn default() -> Self {
        DecayParams { exp_base: 0.995, linear_horizon_hours: 30.0 * 24.0, power_scale_hours: 24.0, power_exponent: 0.3 }
    }
}

impl DecayParams {
    /// The raw decay curve `d(age)` in `[0, 1]`, without a floor. Negative ages (a clock that
    /// moved backwards) count as 0.
    pub fn curve(&self, mode: DecayMode, age_hours: f64) -> f64 {
        let age = if age_hours.is_finite() { age_hours.max(0.0) } else { f64::MAX };
        let d = match mode {
            DecayMode::None => 1.0,
            DecayMode::Linear => (1.0 - age / self.linear_horizon_hours).max(0.0),
            DecayMode::Exponential => self.exp_base.powf(age),
            DecayMode::Power => (1.0 + age / self.power_scale_hours).powf(-self.power_exponent),
        };
        if d.is_finite() {
            d.clamp(0.0, 1.0)
        } else {
            0.0
        }
    }

    /// The decay multiplier with a floor: `floor + (1 − floor) × d(age)`, in `[floor, 1]`.
    pub fn multiplier(&self, mode: DecayMode, age_hours: f64, floor: f64) -> f64 {
        let floor = floor.clamp(0.0, 1.0);
        floor + (1.0 - floor) * self.curve(mode, age_hours)
    }
}

/// The importance factor `base + weight × importance`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ImportanceWeights {
    pub base: f64,
    pub weight: f64,
}

impl Default for ImportanceWeights {
    fn default() -> Self {
        ImportanceWeights { base: 0.8, weight: 0.4 }
    }
}

impl ImportanceWeights {
    /// The factor for an importance in `[0, 1]` (values outside are clamped).
    pub fn factor(&self, importance: f64) -> f64 {
        let i = if importance.is_finite() { importance.clamp(0.0, 1.0) } else { 0.0 };
        self.base + self.weight * i
    }
}

/// Everything the score needs besides the memory itself.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Scorer {
    pub mode: DecayMode,
    pub params: DecayParams,
    pub importance: ImportanceWeights,
}

impl Scorer {
    /// `similarity × multiplier(age, floor) × importance factor`.
    pub fn score(&self, similarity: f64, age_hours: f64, importance: f64, floor: f64) -> f64 {
        similarity * self.params.multiplier(self.mode, age_hours, floor) * self.importance.factor(importance)
    }
}

/// Hours from `then` to `now`, both PostgreSQL timestamps (microseconds; `i64::MIN` is
/// `-infinity`, `i64::MAX` is `infinity`). A time in the future counts as now; `-infinity` is
/// infinitely old, so every curve gives it its floor.
pub fn age_hours(now: i64, then: i64) -> f64 {
    if then == i64::MIN {
        return f64::INFINITY;
    }
    (now.saturating_sub(then).max(0)) as f64 / 3_600_000_000.0
}

/// Hours in an interval given as PostgreSQL stores it (months, days, microseconds), counting a
/// month as 30 days and a day as 24 hours, as `EXTRACT(EPOCH FROM interval)` does.
pub fn interval_hours(months: i32, days: i32, micros: i64) -> f64 {
    (months as f64) * 30.0 * 24.0 + (days as f64) * 24.0 + (micros as f64) / 3_600_000_000.0
}

#[cfg(test)]
mod tests {
    use super::*;

    fn close(a: f64, b: f64, eps: f64) -> bool {
        (a - b).abs() <= eps
    }

    #[test]
    fn modes_parse_by_name() {
        assert_eq!("exponential".parse::<DecayMode>(), Ok(DecayMode::Exponential));
        assert_eq!(" Linear ".parse::<DecayMode>(), Ok(DecayMode::Linear));
        assert_eq!("POWER".parse::<DecayMode>(), Ok(DecayMode::Power));
        assert_eq!("none".parse::<DecayMode>(), Ok(DecayMode::None));
        assert!("hyperbolic".parse::<DecayMode>().is_err());
        for (name, mode) in DecayMode::ALL {
            assert_eq!(mode.name(), name);
        }
    }

    #[test]
    fn exponential_matches_the_reference_figures() {
        let p = DecayParams::default();
        // 3 days multiply by about 0.697, 200 days by about 0.
        assert!(close(p.curve(DecayMode::Exponential, 72.0), 0.697, 0.001));
        assert!(p.curve(DecayMode::Exponential, 200.0 * 24.0) < 1e-9);
        assert_eq!(p.curve(DecayMode::Exponential, 0.0), 1.0);
    }

    #[test]
    fn linear_reaches_zero_at_the_horizon() {
        let p = DecayParams::default();
        assert_eq!(p.curve(DecayMode::Linear, 0.0), 1.0);
        assert!(close(p.curve(DecayMode::Linear, 360.0), 0.5, 1e-12));
        assert_eq!(p.curve(DecayMode::Linear, 720.0), 0.0);
        assert_eq!(p.curve(DecayMode::Linear, 10_000.0), 0.0);
    }

    #[test]
    fn power_law_has_a_heavy_tail() {
        let p = DecayParams::default();
        let day200 = p.curve(DecayMode::Power, 200.0 * 24.0);
        assert!(day200 > 0.1 && day200 < 0.3, "{day200}");
        assert!(day200 > p.curve(DecayMode::Exponential, 200.0 * 24.0));
    }

    #[test]
    fn every_curve_is_monotone_and_bounded() {
        let p = DecayParams::default();
        for (_, mode) in DecayMode::ALL {
            let mut last = f64::INFINITY;
            for h in (0..10_000).step_by(7) {
                let d = p.curve(mode, h as f64);
                assert!((0.0..=1.0).contains(&d));
                assert!(d <= last, "{mode:?} rises at {h} h");
                last = d;
            }
        }
    }

    #[test]
    fn negative_and_infinite_ages_are_tamed() {
        let p = DecayParams::default();
        assert_eq!(p.curve(DecayMode::Exponential, -5.0), 1.0);
        assert_eq!(p.curve(DecayMode::Exponential, f64::INFINITY), 0.0);
        assert!(p.curve(DecayMode::Power, f64::NAN) < 1e-9);
    }

    #[test]
    fn the_floor_bounds_the_multiplier() {
        let p = DecayParams::default();
        assert!(close(p.multiplier(DecayMode::Exponential, 1e6, 0.4), 0.4, 1e-12));
        assert_eq!(p.multiplier(DecayMode::Exponential, 0.0, 0.4), 1.0);
        assert_eq!(p.multiplier(DecayMode::Exponential, 72.0, 0.0), p.curve(DecayMode::Exponential, 72.0));
    }

    #[test]
    fn importance_factor_spans_0_8_to_1_2() {
        let w = ImportanceWeights::default();
        assert!(close(w.factor(0.0), 0.8, 1e-12));
        assert!(close(w.factor(1.0), 1.2, 1e-12));
        assert!(close(w.factor(0.5), 1.0, 1e-12));
        assert!(close(w.factor(7.0), 1.2, 1e-12));
    }

    #[test]
    fn the_reference_score() {
        let s = Scorer { mode: DecayMode::Exponential, params: DecayParams::default(), importance: ImportanceWeights::default() };
        let want = 0.9 * 0.995f64.powf(72.0) * (0.8 + 0.4 * 0.5);
        assert!(close(s.score(0.9, 72.0, 0.5, 0.0), want, 1e-12));
    }

    #[test]
    fn decay_picks_the_current_preference_and_none_picks_the_most_similar() {
        // Six preferences of one user over 200 days; the oldest is the most similar.
        let prefs = [(0.95, 200.0), (0.93, 160.0), (0.91, 120.0), (0.90, 80.0), (0.89, 40.0), (0.86, 1.0)];
        let best = |mode| {
            let s = Scorer { mode, params: DecayParams::default(), importance: ImportanceWeights::default() };
            (0..prefs.len())
                .max_by(|&a, &b| {
                    let sa = s.score(prefs[a].0, prefs[a].1 * 24.0, 0.5, 0.0);
                    let sb = s.score(prefs[b].0, prefs[b].1 * 24.0, 0.5, 0.0);
                    sa.total_cmp(&sb)
                })
                .unwrap()
        };
        assert_eq!(best(DecayMode::Exponential), 5);
        assert_eq!(best(DecayMode::Linear), 5);
        assert_eq!(best(DecayMode::Power), 5);
        assert_eq!(best(DecayMode::None), 0);
    }

    #[test]
    fn a_floor_keeps_an_old_relevant_episode_above_new_noise() {
        let s = Scorer { mode: DecayMode::Exponential, params: DecayParams::default(), importance: ImportanceWeights::default() };
        let old_relevant = (0.8, 120.0 * 24.0);
        let new_noise = (0.25, 2.0);
        // Without a floor the old episode is gone, with one it wins.
        assert!(s.score(old_relevant.0, old_relevant.1, 0.5, 0.0) < s.score(new_noise.0, new_noise.1, 0.5, 0.0));
        assert!(s.score(old_relevant.0, old_relevant.1, 0.5, 0.4) > s.score(new_noise.0, new_noise.1, 0.5, 0.4));
    }

    #[test]
    fn ages_count_hours_and_treat_infinities_as_the_ends_of_time() {
        let now = 1_000 * 3_600_000_000;
        assert!(close(age_hours(now, now - 3 * 3_600_000_000), 3.0, 1e-12));
        assert_eq!(age_hours(now, now + 3_600_000_000), 0.0);
        assert_eq!(age_hours(now, i64::MAX), 0.0);
        assert_eq!(age_hours(now, i64::MIN), f64::INFINITY);
        let p = DecayParams::default();
        assert!(close(p.multiplier(DecayMode::Exponential, age_hours(now, i64::MIN), 0.4), 0.4, 1e-12));
    }

    #[test]
    fn interval_hours_counts_like_epoch() {
        assert_eq!(interval_hours(0, 3, 0), 72.0);
        assert_eq!(interval_hours(1, 0, 0), 720.0);
        assert_eq!(interval_hours(0, 0, 5_400_000_000), 1.5);
        assert_eq!(interval_hours(0, -1, 0), -24.0);
    }
}
