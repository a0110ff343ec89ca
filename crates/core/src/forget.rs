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

/// How a forgetting pass shares its list of users above the capacity with a helper process: the
/// pass takes users from the front of the list, the helper from the back, and no user is taken
/// by both. The helper may hold only the list's tail (from `base` on), so it stops there.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Claims {
    front: u32,
    back: u32,
    base: u32,
}

impl Claims {
    /// A list of `len` users, of which the helper holds those from `base` on.
    pub const fn new(len: u32, base: u32) -> Self {
        Claims { front: 0, back: len, base: if base < len { base } else { len } }
    }

    /// The next user of the pass (from the front); `None` once every user is taken.
    pub fn take_front(&mut self) -> Option<u32> {
        (self.front < self.back).then(|| {
            self.front += 1;
            self.front - 1
        })
    }

    /// The next user of the helper (from the back); `None` once the pass has taken the rest, or
    /// the rest is not in the helper's part of the list.
    pub fn take_back(&mut self) -> Option<u32> {
        (self.back > self.front && self.back > self.base).then(|| {
            self.back -= 1;
            self.back
        })
    }

    /// The helper takes no more users (the pass has finished its part and waits for it).
    pub fn close(&mut self) {
        self.base = self.back;
    }
}

/// Where the longest tail of a list fits in `capacity` bytes: the index of its first entry,
/// given each entry's size (`sizes.len()` when not even the last one fits).
pub fn tail_that_fits(sizes: &[usize], capacity: usize) -> usize {
    let mut used = 0usize;
    let mut start = sizes.len();
    while start > 0 && used + sizes[start - 1] <= capacity {
        used += sizes[start - 1];
        start -= 1;
    }
    start
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

    #[test]
    fn claims_give_each_user_once() {
        // The pass and the helper alternate; every user is taken once, the pass's from the
        // front in order, the helper's from the back in order.
        let mut c = Claims::new(7, 0);
        let (mut front, mut back) = (Vec::new(), Vec::new());
        loop {
            let f = c.take_front();
            let b = c.take_back();
            front.extend(f);
            back.extend(b);
            if f.is_none() && b.is_none() {
                break;
            }
        }
        assert_eq!(front, vec![0, 1, 2, 3]);
        assert_eq!(back, vec![6, 5, 4]);
    }

    #[test]
    fn the_helper_stops_at_its_part_and_when_closed() {
        let mut c = Claims::new(10, 8);
        assert_eq!((c.take_back(), c.take_back(), c.take_back()), (Some(9), Some(8), None));
        // The pass takes the users the helper does not hold, up to the helper's.
        let front: Vec<u32> = std::iter::from_fn(|| c.take_front()).collect();
        assert_eq!(front, (0..8).collect::<Vec<_>>());

        let mut c = Claims::new(5, 0);
        assert_eq!(c.take_front(), Some(0));
        c.close();
        assert_eq!(c.take_back(), None);
        assert_eq!(c.take_front(), Some(1));

        // An empty list, and a part beyond its end.
        assert_eq!((Claims::new(0, 0).take_front(), Claims::new(0, 0).take_back()), (None, None));
        assert_eq!(Claims::new(3, 9).take_back(), None);
    }

    #[test]
    fn the_tail_that_fits() {
        assert_eq!(tail_that_fits(&[5, 5, 5], 100), 0);
        assert_eq!(tail_that_fits(&[5, 5, 5], 10), 1);
        assert_eq!(tail_that_fits(&[5, 5, 5], 9), 2);
        assert_eq!(tail_that_fits(&[5, 5, 50], 9), 3);
        assert_eq!(tail_that_fits(&[], 9), 0);
    }
}
