//! Hybrid recall's fusion of its channels, and the share a strong hit gives its neighbours.
//!
//! * [`convex`]: each channel's scores are scaled to 0..1 over its own list (min-max: its best
//!   result 1, its last 0), and a result scores the weighted sum over the channels; a result a
//!   channel did not list has 0 there. Unlike reciprocal rank fusion ([`crate::keyword::rrf`]),
//!   how far apart two results are in a channel counts, not only their order: a memory far ahead
//!   on words and middling on meaning beats one that is second on both by a hair.
//! * [`share_with_neighbours`]: the memory said just before or after a strong hit (the other half
//!   of a question and its answer, the next step of a story) gets a share of the hit's score
//!   added to its own. Which memories are neighbours is the caller's (recall: adjacent in the
//!   user's timeline, close in time).

use crate::keyword::Fused;

/// Convex fusion of scored channels (each best first, `(id, score)`), with one weight per
/// channel. Best first; ties go to the better best rank, then to the newer id.
pub fn convex(channels: &[&[(i64, f64)]], weights: &[f64]) -> Vec<Fused> {
    let mut out: Vec<Fused> = Vec::new();
    let mut at: std::collections::HashMap<i64, usize> = std::collections::HashMap::new();
    for (c, ranking) in channels.iter().enumerate() {
        let w = weights.get(c).copied().unwrap_or(1.0);
        let finite = ranking.iter().map(|r| r.1).filter(|s| s.is_finite());
        let (lo, hi) = finite.fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), s| (lo.min(s), hi.max(s)));
        for (r, (id, s)) in ranking.iter().enumerate() {
            let i = *at.entry(*id).or_insert_with(|| {
                out.push(Fused { id: *id, score: 0.0, ranks: vec![None; channels.len()] });
                out.len() - 1
            });
            if out[i].ranks[c].is_none() {
                out[i].ranks[c] = Some(r + 1);
                let scaled = if !s.is_finite() {
                    0.0
                } else if hi > lo {
                    (s - lo) / (hi - lo)
                } else {
                    1.0
                };
                out[i].score += w * scaled;
            }
        }
    }
    sort(&mut out);
    out
}

/// The factor a fused score is multiplied by for a memory of `length` words: 1 up to `words`,
/// `(words / length) ^ exponent` beyond (`exponent` 0 or `words` 0: always 1). A question asks
/// for a fact, and a fact is said in a sentence or two; a long memory (an answer of several
/// paragraphs, a document) is near many questions in meaning and holds many of their words
/// without being what any one of them asks for.
pub fn length_prior(length: u32, words: u32, exponent: f64) -> f64 {
    if words == 0 || exponent <= 0.0 || length <= words {
        1.0
    } else {
        (words as f64 / length as f64).powf(exponent)
    }
}

/// Multiplies each fused score by [`length_prior`] of its memory's length (`lengths`: `(id,
/// length in words)` sorted by id; a memory not there is left as it is), and sorts again.
pub fn weigh_by_length(fused: &mut [Fused], lengths: &[(i64, u32)], words: u32, exponent: f64) {
    if words == 0 || exponent <= 0.0 {
        return;
    }
    for f in fused.iter_mut() {
        if let Ok(i) = lengths.binary_search_by_key(&f.id, |l| l.0) {
            f.score *= length_prior(lengths[i].1, words, exponent);
        }
    }
    sort(fused);
}

/// A memory said beside a hit: `(hit, neighbour, distance, the neighbour's length in
/// characters)`, distance 1 adjacent.
pub type Neighbour = (i64, i64, u32, usize);

/// The part of a neighbour's share that a memory of `length` characters takes: all of it up to
/// `full` characters, and `full / length` beyond (0: all of it, whatever the length). A short
/// memory (a line of a dialogue) lacks the context said around it; a long one (an answer of
/// several paragraphs) carries its own, and the channels find it on its own merits.
pub fn length_weight(length: usize, full: usize) -> f64 {
    if full == 0 || length <= full {
        1.0
    } else {
        full as f64 / length as f64
    }
}

/// Adds `share × score` of each hit to its neighbour, halved for each step further away and
/// weighted by the neighbour's length (`length_weight` with `full`), for each neighbour whose hit
/// is among the `sources` best of `fused`; a neighbour not in `fused` joins it (with no rank in
/// any channel). Each hit gives its share once per neighbour; a memory with two hits beside it
/// gets both shares. Sorted again, best first.
pub fn share_with_neighbours(fused: &mut Vec<Fused>, pairs: &[Neighbour], share: f64, sources: usize, full: usize) {
    if share <= 0.0 || pairs.is_empty() || fused.is_empty() {
        return;
    }
    let channels = fused[0].ranks.len();
    let given: std::collections::HashMap<i64, f64> = fused.iter().take(sources).map(|f| (f.id, f.score)).collect();
    let mut add: std::collections::HashMap<i64, f64> = std::collections::HashMap::new();
    let mut seen = std::collections::HashSet::new();
    for (hit, neighbour, distance, length) in pairs {
        if hit == neighbour || *distance == 0 || !seen.insert((*hit, *neighbour)) {
            continue;
        }
        if let Some(s) = given.get(hit) {
            *add.entry(*neighbour).or_insert(0.0) += share * 0.5f64.powi(*distance as i32 - 1) * length_weight(*length, full) * s;
        }
    }
    for f in fused.iter_mut() {
        if let Some(a) = add.remove(&f.id) {
            f.score += a;
        }
    }
    let mut joined: Vec<(i64, f64)> = add.into_iter().collect();
    joined.sort_unstable_by_key(|j| j.0);
    fused.extend(joined.into_iter().map(|(id, score)| Fused { id, score, ranks: vec![None; channels] }));
    sort(fused);
}

fn sort(out: &mut [Fused]) {
    let best = |f: &Fused| f.ranks.iter().flatten().min().copied().unwrap_or(usize::MAX);
    out.sort_by(|a, b| b.score.total_cmp(&a.score).then(best(a).cmp(&best(b))).then(b.id.cmp(&a.id)));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn convex_scales_each_channel_and_weights_them() {
        // Vector: 1 far ahead of 2 and 3; words: 3 first, 2 a hair behind, 4 last.
        let vector = [(1, 0.9), (2, 0.5), (3, 0.49)];
        let words = [(3, 10.0), (2, 9.9), (4, 1.0)];
        let fused = convex(&[&vector, &words], &[0.5, 0.5]);
        let ids: Vec<i64> = fused.iter().map(|f| f.id).collect();
        // 2: 0.5 × 0.0244 + 0.5 × 0.989 ≈ 0.507; 3: 0 + 0.5; 1: 0.5 + 0; 4: 0.
        assert_eq!(ids, vec![2, 3, 1, 4]);
        assert!((fused[0].score - (0.5 * (0.01 / 0.41) + 0.5 * (8.9 / 9.0))).abs() < 1e-9);
        assert_eq!(fused[0].ranks, vec![Some(2), Some(2)]);
        assert_eq!(fused[3].ranks, vec![None, Some(3)]);
        // Weights move the balance: all on the vector channel is its order.
        let fused = convex(&[&vector, &words], &[1.0, 0.0]);
        assert_eq!(fused.iter().map(|f| f.id).take(3).collect::<Vec<_>>(), vec![1, 2, 3]);
    }

    #[test]
    fn the_length_prior_leaves_short_memories_and_lowers_long_ones_by_their_length() {
        assert_eq!(length_prior(10, 60, 0.5), 1.0);
        assert_eq!(length_prior(60, 60, 0.5), 1.0);
        assert!((length_prior(240, 60, 0.5) - 0.5).abs() < 1e-12);
        assert!((length_prior(120, 60, 1.0) - 0.5).abs() < 1e-12);
        // Off: no threshold, or no exponent.
        assert_eq!(length_prior(1000, 0, 0.5), 1.0);
        assert_eq!(length_prior(1000, 60, 0.0), 1.0);
        // Longer is never better.
        let mut last = 1.0;
        for l in (0..2000).step_by(7) {
            let p = length_prior(l, 60, 0.5);
            assert!(p <= last && p > 0.0);
            last = p;
        }
    }

    #[test]
    fn weighing_by_length_reorders_a_long_memory_below_a_short_one() {
        // 1 leads on both channels but is long (240 words: × 0.5); 2 is short.
        let vector = [(1, 0.9), (2, 0.8), (3, 0.1)];
        let words = [(1, 10.0), (2, 8.0), (3, 1.0)];
        let mut fused = convex(&[&vector, &words], &[0.5, 0.5]);
        assert_eq!(fused[0].id, 1);
        let before: Vec<(i64, f64)> = fused.iter().map(|f| (f.id, f.score)).collect();
        weigh_by_length(&mut fused, &[(1, 240), (2, 30), (3, 20)], 60, 0.5);
        assert_eq!(fused.iter().map(|f| f.id).collect::<Vec<_>>(), vec![2, 1, 3]);
        assert!((fused[1].score - before[0].1 * 0.5).abs() < 1e-12);
        // A memory of unknown length keeps its score; off changes nothing.
        let mut fused = convex(&[&vector, &words], &[0.5, 0.5]);
        weigh_by_length(&mut fused, &[(2, 30)], 60, 0.5);
        assert_eq!(fused.iter().map(|f| (f.id, f.score)).collect::<Vec<_>>(), before);
        weigh_by_length(&mut fused, &[(1, 240)], 60, 0.0);
        assert_eq!(fused.iter().map(|f| (f.id, f.score)).collect::<Vec<_>>(), before);
    }

    #[test]
    fn a_flat_channel_counts_fully_and_ties_go_to_the_better_rank_then_newer_id() {
        let a = [(5, 2.0), (6, 2.0)];
        let fused = convex(&[&a], &[1.0]);
        assert_eq!(fused.iter().map(|f| (f.id, f.score)).collect::<Vec<_>>(), vec![(5, 1.0), (6, 1.0)]);
        let b = [(7, 1.0)];
        let c = [(8, 1.0)];
        let fused = convex(&[&b, &c], &[1.0, 1.0]);
        assert_eq!(fused.iter().map(|f| f.id).collect::<Vec<_>>(), vec![8, 7]);
        assert!(convex(&[&[], &[]], &[0.5, 0.5]).is_empty());
    }

    #[test]
    fn neighbours_of_the_best_hits_get_a_share() {
        let mut fused = convex(&[&[(1, 1.0), (2, 0.6), (3, 0.5), (4, 0.0)]], &[1.0]);
        // 1 (score 1.0) is beside 9 (not listed) and 4; 3 is beside 4 but is not among the 2 best.
        share_with_neighbours(&mut fused, &[(1, 9, 1, 10), (1, 4, 1, 10), (3, 4, 1, 10), (1, 9, 1, 10)], 0.7, 2, 400);
        let got: Vec<(i64, f64)> = fused.iter().map(|f| (f.id, (f.score * 1000.0).round() / 1000.0)).collect();
        assert_eq!(got, vec![(1, 1.0), (4, 0.7), (9, 0.7), (2, 0.6), (3, 0.5)]);
        // Two steps away: half the share.
        let mut far = convex(&[&[(1, 1.0), (2, 0.0)]], &[1.0]);
        share_with_neighbours(&mut far, &[(1, 7, 2, 400), (1, 8, 3, 400)], 0.4, 1, 400);
        let got: Vec<(i64, f64)> = far.iter().map(|f| (f.id, (f.score * 1000.0).round() / 1000.0)).collect();
        assert_eq!(got, vec![(1, 1.0), (7, 0.2), (8, 0.1), (2, 0.0)]);
        // The joined neighbour has no rank; the listed one keeps its rank.
        assert_eq!(fused.iter().find(|f| f.id == 9).unwrap().ranks, vec![None]);
        assert_eq!(fused.iter().find(|f| f.id == 4).unwrap().ranks, vec![Some(4)]);
        // No share: nothing changes.
        let before = fused.clone();
        share_with_neighbours(&mut fused, &[(1, 2, 1, 10)], 0.0, 5, 400);
        assert_eq!(fused, before);
    }

    #[test]
    fn a_long_neighbour_takes_a_share_in_proportion_to_its_shortness() {
        assert_eq!(length_weight(100, 400), 1.0);
        assert_eq!(length_weight(400, 400), 1.0);
        assert_eq!(length_weight(1600, 400), 0.25);
        assert_eq!(length_weight(1600, 0), 1.0);
        let mut fused = convex(&[&[(1, 1.0), (2, 0.0)]], &[1.0]);
        // 1 sits between a short line (5) and a long answer (6) four times the full length.
        share_with_neighbours(&mut fused, &[(1, 5, 1, 120), (1, 6, 1, 1600)], 0.4, 1, 400);
        let got: Vec<(i64, f64)> = fused.iter().map(|f| (f.id, (f.score * 1000.0).round() / 1000.0)).collect();
        assert_eq!(got, vec![(1, 1.0), (5, 0.4), (6, 0.1), (2, 0.0)]);
        // Without a full length, both take the whole share.
        let mut fused = convex(&[&[(1, 1.0), (2, 0.0)]], &[1.0]);
        share_with_neighbours(&mut fused, &[(1, 5, 1, 120), (1, 6, 1, 1600)], 0.4, 1, 0);
        assert_eq!(fused.iter().filter(|f| (f.score - 0.4).abs() < 1e-9).count(), 2);
    }
}
