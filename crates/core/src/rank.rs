//! Recall's vector ranking: time decides between memories that compete, not between unrelated
//! ones.
//!
//! A changed preference must beat its stale version, yet an old event must still be found when
//! nothing newer answers the question. Decaying every memory by its age serves the first and
//! buries the second (on real conversations it returned less than plain similarity). So the
//! ranking works in two steps:
//!
//! 1. a **pool**: the `P` candidates with the highest `similarity × importance factor` (kept in a
//!    bounded heap while the candidates stream past, with their unit embeddings);
//! 2. within the pool, a memory **competes** with a newer one (written later) whose cosine to it
//!    is at least `compete`: versions of one preference, a fact said again. Only a memory that
//!    has a newer competitor is decayed by its age (with its kind's floor); the newest version,
//!    and every memory nothing newer resembles, keeps its full score.
//!
//! The final score is `similarity × importance factor × (decay(age) if it has a newer competitor,
//! else 1)`, best first, ties to the higher similarity, then the newer id.

use crate::topk::{Ranked, TopKWith};
use crate::vecmath;

/// A candidate in the pool.
#[derive(Clone, Debug)]
pub struct PoolEntry {
    pub id: i64,
    pub similarity: f64,
    /// `similarity × importance factor`: the score before decay, which orders the pool.
    pub base: f64,
    /// When it was written (any monotonic unit): "newer" compares these, then ids.
    pub created: i64,
    pub age_hours: f64,
    pub episodic: bool,
    /// The embedding at unit length.
    pub unit: Vec<f32>,
}

impl PoolEntry {
    fn key(&self) -> Ranked {
        Ranked { id: self.id, score: self.base, similarity: self.similarity }
    }
}

/// The best `cap` candidates by their score before decay.
pub struct Pool(TopKWith<PoolEntry>);

/// The pool size for `wanted` results: room for a competitor of every result.
pub fn pool_size(wanted: usize) -> usize {
    (2 * wanted).max(40)
}

impl Pool {
    pub fn new(cap: usize) -> Self {
        Pool(TopKWith::new(cap.max(1)))
    }

    /// Whether a candidate with these values would enter the pool (so its embedding need only
    /// be copied then).
    pub fn admits(&self, id: i64, base: f64, similarity: f64) -> bool {
        self.0.admits(&Ranked { id, score: base, similarity })
    }

    pub fn push(&mut self, e: PoolEntry) {
        self.0.push_with(e.key(), e);
    }

    pub fn len(&self) -> usize {
        self.0.len()
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The score before decay a candidate must beat to enter, once the pool is full.
    pub fn threshold(&self) -> Option<f64> {
        self.0.threshold().map(|r| r.score)
    }

    /// The entries, best before decay first.
    pub fn into_entries(self) -> Vec<PoolEntry> {
        self.0.into_sorted_with().into_iter().map(|(_, e)| e).collect()
    }
}

/// Whether entry `i` has a newer entry whose cosine to it is at least `compete`.
pub fn has_newer_competitor(entries: &[PoolEntry], i: usize, compete: f64) -> bool {
    Competition::new(entries, compete).has_newer(i)
}

/// Dimensions of each slice of the screen that checks pairs before the full dot product.
const PREFIX: usize = 64;

/// The pairwise check of a pool, screened: `|a-b|² = |a|² + |b|² - 2a·b`, and the distance over
/// the first dimensions is at most the whole distance, so a pair already farther apart over a
/// prefix than `a·b >= compete` allows cannot compete. The prefix grows a slice at a time until
/// the pair is ruled out or the whole vector is covered; only then is the dot product computed.
struct Competition<'a> {
    entries: &'a [PoolEntry],
    compete: f64,
    sq_norms: Vec<f64>,
    prefix: usize,
}

impl<'a> Competition<'a> {
    fn new(entries: &'a [PoolEntry], compete: f64) -> Self {
        let sq_norms = entries.iter().map(|e| vecmath::dot_fast(&e.unit, &e.unit)).collect();
        let prefix = entries.first().map_or(0, |e| e.unit.len().min(PREFIX));
        Competition { entries, compete, sq_norms, prefix }
    }

    fn competes(&self, i: usize, j: usize) -> bool {
        let (a, b) = (&self.entries[i].unit, &self.entries[j].unit);
        if a.len() == b.len() && self.prefix > 0 && a.len() >= self.prefix {
            // A margin for rounding: the screen only ever lets more pairs through.
            let limit = self.sq_norms[i] + self.sq_norms[j] - 2.0 * self.compete + 1e-3;
            let mut partial = 0f64;
            let mut at = 0;
            while at < a.len() {
                let end = (at + self.prefix).min(a.len());
                partial += vecmath::sq_distance_fast(&a[at..end], &b[at..end]) as f64;
                if partial > limit {
                    return false;
                }
                at = end;
            }
        }
        vecmath::dot_fast(a, b) >= self.compete
    }

    fn has_newer(&self, i: usize) -> bool {
        let e = &self.entries[i];
        (0..self.entries.len()).any(|j| {
            let o = &self.entries[j];
            (o.created, o.id) > (e.created, e.id) && self.competes(i, j)
        })
    }
}

/// Ranks the pool: returns every entry with its final score, best first. `multiplier(age_hours,
/// episodic)` is the decay of a memory that has a newer competitor.
pub fn rank_pool(entries: &[PoolEntry], compete: f64, multiplier: impl Fn(f64, bool) -> f64) -> Vec<Ranked> {
    let competition = Competition::new(entries, compete);
    let mut out: Vec<Ranked> = (0..entries.len())
        .map(|i| {
            let e = &entries[i];
            let m = if competition.has_newer(i) { multiplier(e.age_hours, e.episodic) } else { 1.0 };
            Ranked { id: e.id, score: e.base * m, similarity: e.similarity }
        })
        .collect();
    out.sort_by(|a, b| b.rank_cmp(a));
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::decay::{DecayMode, DecayParams};

    fn unit(v: &[f32]) -> Vec<f32> {
        vecmath::normalized(v)
    }

    fn entry(id: i64, emb: &[f32], q: &[f32], days_old: f64, episodic: bool) -> PoolEntry {
        let u = unit(emb);
        let s = vecmath::dot(&u, &unit(q));
        PoolEntry { id, similarity: s, base: s, created: -(days_old * 24.0) as i64, age_hours: days_old * 24.0, episodic, unit: u }
    }

    fn decay(age: f64, episodic: bool) -> f64 {
        DecayParams::default().multiplier(DecayMode::Exponential, age, if episodic { 0.4 } else { 0.0 })
    }

    #[test]
    fn the_screened_check_agrees_with_the_full_dot_product() {
        // Near-duplicates, unrelated vectors, and some not of unit length.
        let mut state = 5u64;
        let mut f = || {
            state = state.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            ((state >> 40) as f32 / (1u64 << 24) as f32) * 2.0 - 1.0
        };
        for &d in &[8usize, 100, 512] {
            let base: Vec<f32> = (0..d).map(|_| f()).collect();
            let entries: Vec<PoolEntry> = (0..30)
                .map(|i| {
                    let noise = [0.02f32, 0.2, 2.0][i % 3];
                    let mut v: Vec<f32> = base.iter().map(|x| x + noise * f()).collect();
                    if i % 4 != 0 {
                        v = vecmath::normalized(&v);
                    }
                    PoolEntry { id: i as i64, similarity: 0.5, base: 0.5, created: i as i64, age_hours: 1.0, episodic: false, unit: v }
                })
                .collect();
            for compete in [0.5, 0.9, 0.99] {
                let c = Competition::new(&entries, compete);
                for i in 0..entries.len() {
                    let naive = entries.iter().any(|o| {
                        (o.created, o.id) > (entries[i].created, entries[i].id) && vecmath::dot(&entries[i].unit, &o.unit) >= compete
                    });
                    assert_eq!(c.has_newer(i), naive, "d={d} compete={compete} i={i}");
                }
            }
        }
    }

    #[test]
    fn the_current_preference_beats_its_stale_versions() {
        // The brief's six editor preferences over 200 days: the oldest is the most similar.
        let q = [1.0, 0.0, 0.0, 0.0];
        let prefs: Vec<PoolEntry> = [(1, 0.2, 200.0), (2, 0.3, 160.0), (3, 0.4, 120.0), (4, 0.5, 80.0), (5, 0.6, 40.0), (6, 0.7, 2.0)]
            .iter()
            .map(|&(id, y, days)| entry(id, &[1.0, y, 0.0, 0.0], &q, days, false))
            .collect();
        let by_similarity = {
            let mut v = prefs.clone();
            v.sort_by(|a, b| b.similarity.total_cmp(&a.similarity));
            v[0].id
        };
        assert_eq!(by_similarity, 1, "similarity alone picks the oldest");
        let ranked = rank_pool(&prefs, 0.9, decay);
        assert_eq!(ranked[0].id, 6, "the newest version ranks first: {ranked:?}");
    }

    #[test]
    fn an_old_episode_nothing_newer_resembles_keeps_its_score() {
        let q = [1.0, 0.0, 0.0, 0.0];
        let pool = vec![
            entry(1, &[0.8, 0.6, 0.0, 0.0], &q, 120.0, true),
            entry(2, &[0.2, 0.0, 1.0, 0.0], &q, 3.0, true),
            entry(3, &[0.3, 0.0, 0.0, 1.0], &q, 1.0, true),
        ];
        let ranked = rank_pool(&pool, 0.9, decay);
        assert_eq!(ranked[0].id, 1);
        assert!((ranked[0].score - pool[0].base).abs() < 1e-12, "not decayed at all");
    }

    #[test]
    fn a_newer_competitor_decays_the_old_one_down_to_its_floor() {
        let q = [1.0, 0.0, 0.0, 0.0];
        let pool = vec![entry(1, &[1.0, 0.1, 0.0, 0.0], &q, 120.0, true), entry(2, &[1.0, 0.3, 0.0, 0.0], &q, 1.0, true)];
        let ranked = rank_pool(&pool, 0.9, decay);
        assert_eq!(ranked[0].id, 2);
        let old = ranked.iter().find(|r| r.id == 1).unwrap();
        assert!((old.score - pool[0].base * 0.4).abs() < 1e-3, "an episode keeps its floor: {}", old.score);
        // Unrelated memories do not compete, whatever their age.
        assert!(!has_newer_competitor(&pool, 1, 0.9));
        assert!(has_newer_competitor(&pool, 0, 0.9));
        assert!(!has_newer_competitor(&pool, 0, 0.9999));
    }

    #[test]
    fn the_pool_keeps_the_best_before_decay() {
        let mut p = Pool::new(2);
        for (id, s) in [(1, 0.5), (2, 0.9), (3, 0.7), (4, 0.1)] {
            if p.admits(id, s, s) {
                p.push(PoolEntry { id, similarity: s, base: s, created: id, age_hours: 0.0, episodic: false, unit: vec![1.0] });
            }
        }
        let mut ids: Vec<i64> = p.into_entries().iter().map(|e| e.id).collect();
        ids.sort();
        assert_eq!(ids, vec![2, 3]);
        assert_eq!(pool_size(5), 40);
        assert_eq!(pool_size(50), 100);
    }
}
