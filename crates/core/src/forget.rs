//! Forgetting: which memories a user keeps when there are more than the capacity allows.
//!
//! Memory is not a cache: an evicted memory cannot be fetched again. So the rule is not "least
//! recently used" but a retention score that weighs what the memory is worth (importance), whether
//! it is still in use (recency of real recalls) and how often it has been used lately (a hit count
//! that is halved on a schedule, so that yesterday's hot spot does not outvote today's). Protected
//! memories (hard facts) are never evicted, whatever their score.
//!
//! Bulk reads cannot pollute the score: recall with `touch => false` changes neither the last hit
//! nor the hit count, and the score reads nothing else.

/// The weights of the retention score. The defaults were chosen on the eviction simulation
/// (`bench/run.sh evict`), which compares this policy with TTL, LRU, LFU and others.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct RetentionWeights {
    /// Weight of importance (0..1).
    pub importance: f64,
    /// Weight of recency: `0.5 ^ (hours since the last hit / recency_halflife_hours)`.
    pub recency: f64,
    /// Weight of frequency: `hits / (hits + 1)` of the aged hit count.
    pub frequency: f64,
    /// Hours after which the recency term has halved.
    pub recency_halflife_hours: f64,
}

impl Default for RetentionWeights {
    fn default() -> Self {
        RetentionWeights { importance: 0.4, recency: 0.4, frequency: 0.2, recency_halflife_hours: 7.0 * 24.0 }
    }
}

impl RetentionWeights {
    /// The retention score of a memory: higher is kept longer. `hours_since_hit` counts from
    /// the last real recall (or the write, for a memory never recalled); `hits` is the aged hit
    /// count. Between 0 and the sum of the weights.
    pub fn score(&self, importance: f64, hours_since_hit: f64, hits: f64) -> f64 {
        let importance = if importance.is_finite() { importance.clamp(0.0, 1.0) } else { 0.0 };
        let age = if hours_since_hit.is_finite() { hours_since_hit.max(0.0) } else { f64::INFINITY };
        let recency = if self.recency_halflife_hours > 0.0 { 0.5f64.powf(age / self.recency_halflife_hours) } else { 0.0 };
        let hits = if hits.is_finite() { hits.max(0.0) } else { 0.0 };
        self.importance * importance + self.recency * recency + self.frequency * (hits / (hits + 1.0))
    }
}

/// The aged hit count after one halving: `ceil(hits / 2)`, so a memory recalled once stays
/// "recalled" (archiving looks for memories never recalled) while old popularity fades.
pub fn halve_hits(hits: i32) -> i32 {
    if hits <= 0 {
        0
    } else {
        hits / 2 + hits % 2
    }
}

/// One memory as eviction sees it.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Keepable {
    pub id: i64,
    pub protected: bool,
    pub score: f64,
}

/// The memories to evict so that at most `capacity` stay: the lowest scores among the
/// unprotected (ties: the older id goes first). Protected memories count towards the capacity
/// but are never chosen; when they alone exceed it, every unprotected memory goes.
pub fn select_evictions(rows: &[Keepable], capacity: usize) -> Vec<i64> {
    if rows.len() <= capacity {
        return Vec::new();
    }
    let excess = rows.len() - capacity;
    let mut candidates: Vec<&Keepable> = rows.iter().filter(|r| !r.protected).collect();
    candidates.sort_by(|a, b| a.score.total_cmp(&b.score).then(a.id.cmp(&b.id)));
    candidates.into_iter().take(excess).map(|r| r.id).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn score_grows_with_each_signal() {
        let w = RetentionWeights::default();
        let base = w.score(0.5, 48.0, 2.0);
        assert!(w.score(0.9, 48.0, 2.0) > base);
        assert!(w.score(0.5, 1.0, 2.0) > base);
        assert!(w.score(0.5, 48.0, 10.0) > base);
        assert!(w.score(0.5, 480.0, 2.0) < base);
    }

    #[test]
    fn recency_halves_after_the_halflife() {
        let w = RetentionWeights { importance: 0.0, recency: 1.0, frequency: 0.0, recency_halflife_hours: 10.0 };
        assert!((w.score(0.0, 0.0, 0.0) - 1.0).abs() < 1e-12);
        assert!((w.score(0.0, 10.0, 0.0) - 0.5).abs() < 1e-12);
        assert!((w.score(0.0, 30.0, 0.0) - 0.125).abs() < 1e-12);
    }

    #[test]
    fn bad_inputs_score_low_not_nan() {
        let w = RetentionWeights::default();
        for s in [w.score(f64::NAN, 1.0, 1.0), w.score(0.5, f64::NAN, 1.0), w.score(0.5, 1.0, f64::INFINITY), w.score(2.0, -5.0, -1.0)] {
            assert!(s.is_finite() && (0.0..=1.0 + 1e-12).contains(&s), "{s}");
        }
    }

    #[test]
    fn halving_keeps_ever_recalled() {
        assert_eq!([0, 1, 2, 3, 4, 9, 100].map(halve_hits), [0, 1, 1, 2, 2, 5, 50]);
        assert_eq!(halve_hits(-3), 0);
    }

    #[test]
    fn evictions_take_the_lowest_unprotected() {
        let rows = [
            Keepable { id: 1, protected: true, score: 0.0 },
            Keepable { id: 2, protected: false, score: 0.3 },
            Keepable { id: 3, protected: false, score: 0.1 },
            Keepable { id: 4, protected: false, score: 0.9 },
            Keepable { id: 5, protected: false, score: 0.1 },
        ];
        assert_eq!(select_evictions(&rows, 5), Vec::<i64>::new());
        assert_eq!(select_evictions(&rows, 3), vec![3, 5]);
        assert_eq!(select_evictions(&rows, 2), vec![3, 5, 2]);
        // Protected rows above the capacity: every unprotected row goes, the protected one stays.
        assert_eq!(select_evictions(&rows, 0), vec![3, 5, 2, 4]);
    }
}
