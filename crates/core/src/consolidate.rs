//! Consolidation: near-duplicate clustering, the built-in extractive summariser, and the
//! embedding of a summary.

use crate::vecmath;

/// Groups near-duplicates. `vectors` are unit vectors ordered by preference to keep (newest
/// first); each one joins the first earlier keeper whose cosine similarity is at least
/// `threshold`, or becomes a keeper. Returns, per vector, the index of its keeper (itself for
/// a keeper).
///
/// Every vector is compared with every keeper, so the comparison must be cheap: for unit
/// vectors `|a - b|² = 2 - 2 cos`, and the squared distance over the first 64 dimensions is a
/// lower bound of the whole, so a pair whose prefixes are already too far apart cannot be a
/// near-duplicate. The keepers' prefixes sit in one contiguous array that stays in cache; only
/// the few pairs that pass get the exact cosine. Built for AVX2 + FMA when the CPU has them.
pub fn cluster_near_duplicates<V: AsRef<[f32]>>(vectors: &[V], threshold: f64) -> Vec<usize> {
    #[cfg(target_arch = "x86_64")]
    {
        if std::is_x86_feature_detected!("avx2") && std::is_x86_feature_detected!("fma") {
            // SAFETY: the CPU supports AVX2 and FMA, checked just above.
            return unsafe { cluster_avx2(vectors, threshold) };
        }
    }
    cluster_impl::<V, false>(vectors, threshold)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn cluster_avx2<V: AsRef<[f32]>>(vectors: &[V], threshold: f64) -> Vec<usize> {
    cluster_impl::<V, true>(vectors, threshold)
}

/// Dimensions of the prefix that screens pairs.
const PREFIX: usize = 64;

#[inline(always)]
fn cluster_impl<V: AsRef<[f32]>, const FUSED: bool>(vectors: &[V], threshold: f64) -> Vec<usize> {
    // A margin keeps rounding from dropping a pair that the exact check would accept.
    let limit = (2.0 - 2.0 * threshold) as f32 + 1e-3;
    let dims = vectors.first().map(|v| v.as_ref().len()).unwrap_or(0);
    let p = dims.min(PREFIX);
    let mut keepers: Vec<usize> = Vec::new();
    let mut prefixes: Vec<f32> = Vec::new();
    let mut keeper_of = Vec::with_capacity(vectors.len());
    for (i, v) in vectors.iter().enumerate() {
        let v = v.as_ref();
        let found = if v.len() != dims {
            None
        } else {
            let head = &v[..p];
            keepers.iter().enumerate().find_map(|(slot, &k)| {
                let kp = &prefixes[slot * p..slot * p + p];
                (vecmath::sq_distance_wide::<FUSED>(kp, head) <= limit && vecmath::dot_wide::<FUSED>(vectors[k].as_ref(), v) >= threshold)
                    .then_some(k)
            })
        };
        match found {
            Some(k) => keeper_of.push(k),
            None => {
                if v.len() == dims {
                    keepers.push(i);
                    prefixes.extend_from_slice(&v[..p]);
                }
                keeper_of.push(i);
            }
        }
    }
    keeper_of
}

/// The normalised mean of unit vectors (the embedding of a summary of them). `None` when there
/// are none, their dimensions differ, or they cancel out.
pub fn mean_direction<V: AsRef<[f32]>>(vectors: &[V]) -> Option<Vec<f32>> {
    let dims = vectors.first()?.as_ref().len();
    let mut sum = vec![0f64; dims];
    for v in vectors {
        let v = v.as_ref();
        if v.len() != dims {
            return None;
        }
        for (s, x) in sum.iter_mut().zip(v) {
            *s += *x as f64;
        }
    }
    let norm = sum.iter().map(|x| x * x).sum::<f64>().sqrt();
    if norm == 0.0 || !norm.is_finite() {
        return None;
    }
    Some(sum.iter().map(|x| (x / norm) as f32).collect())
}

/// The character budget of a built-in summary of `total` characters of fragments: a third,
/// at least 60 and at most 280.
pub fn summary_budget(total_chars: usize) -> usize {
    (total_chars / 3).clamp(60, 280)
}

fn is_sentence_end(c: char) -> bool {
    matches!(c, '.' | '!' | '?' | '。' | '！' | '？' | '\n' | ';' | '；')
}

/// Splits a text into sentences (kept with their end mark), trimmed, never empty.
fn sentences(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut cur = String::new();
    for c in text.chars() {
        if c == '\n' {
            push_sentence(&mut out, &mut cur);
            continue;
        }
        cur.push(c);
        if is_sentence_end(c) {
            push_sentence(&mut out, &mut cur);
        }
    }
    push_sentence(&mut out, &mut cur);
    out
}

fn push_sentence(out: &mut Vec<String>, cur: &mut String) {
    let s = cur.split_whitespace().collect::<Vec<_>>().join(" ");
    if s.chars().any(|c| c.is_alphanumeric()) {
        out.push(s);
    }
    cur.clear();
}

/// Lowercased words; each CJK character counts as a word.
fn tokens(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut word = String::new();
    for c in text.chars() {
        let cjk =
            ('\u{4e00}'..='\u{9fff}').contains(&c) || ('\u{3040}'..='\u{30ff}').contains(&c) || ('\u{ac00}'..='\u{d7af}').contains(&c);
        if cjk {
            if !word.is_empty() {
                out.push(std::mem::take(&mut word));
            }
            out.push(c.to_string());
        } else if c.is_alphanumeric() {
            word.extend(c.to_lowercase());
        } else if !word.is_empty() {
            out.push(std::mem::take(&mut word));
        }
    }
    if !word.is_empty() {
        out.push(word);
    }
    out.retain(|w| w.chars().count() > 2 || !w.is_ascii());
    out
}

/// The built-in summariser: deterministic and extractive. It splits the fragments (oldest
/// first) into sentences, drops repeats, scores each sentence by how many other fragments share
/// its words (what the fragments have in common is what they are about), and keeps the best
/// sentences that fit in the budget, in their original order. A first sentence longer than the
/// budget is cut at a word boundary.
pub fn extractive_summary(fragments: &[&str], budget_chars: usize) -> String {
    use std::collections::{HashMap, HashSet};
    struct Sentence {
        text: String,
        words: HashSet<String>,
        fragment: usize,
    }
    let mut all: Vec<Sentence> = Vec::new();
    let mut seen = HashSet::new();
    for (f, text) in fragments.iter().enumerate() {
        for s in sentences(text) {
            if seen.insert(s.to_lowercase()) {
                let words: HashSet<String> = tokens(&s).into_iter().collect();
                all.push(Sentence { text: s, words, fragment: f });
            }
        }
    }
    if all.is_empty() {
        return String::new();
    }
    // In how many fragments each word occurs.
    let mut df: HashMap<&str, HashSet<usize>> = HashMap::new();
    for s in &all {
        for w in &s.words {
            df.entry(w.as_str()).or_default().insert(s.fragment);
        }
    }
    let score = |s: &Sentence| -> f64 {
        let shared: f64 = s.words.iter().map(|w| (df[w.as_str()].len() - 1) as f64).sum();
        (shared + 0.5) / ((s.words.len().max(1)) as f64).sqrt()
    };
    let mut order: Vec<usize> = (0..all.len()).collect();
    order.sort_by(|&a, &b| score(&all[b]).total_cmp(&score(&all[a])).then(a.cmp(&b)));
    let mut chosen: Vec<usize> = Vec::new();
    let mut used = 0usize;
    for i in order {
        let len = all[i].text.chars().count();
        let sep = if chosen.is_empty() { 0 } else { 1 };
        if used + sep + len > budget_chars {
            continue;
        }
        // Skip a sentence that mostly repeats one already chosen.
        let redundant = chosen.iter().any(|&j| {
            let (a, b) = (&all[i].words, &all[j].words);
            let inter = a.intersection(b).count() as f64;
            let union = a.union(b).count().max(1) as f64;
            inter / union > 0.6
        });
        if !redundant {
            chosen.push(i);
            used += sep + len;
        }
    }
    if chosen.is_empty() {
        return cut_at_word(&all[0].text, budget_chars);
    }
    chosen.sort_unstable();
    chosen.iter().map(|&i| all[i].text.as_str()).collect::<Vec<_>>().join(" ")
}

/// `text` cut to at most `max_chars` characters at a word boundary, with an ellipsis.
fn cut_at_word(text: &str, max_chars: usize) -> String {
    if text.chars().count() <= max_chars {
        return text.to_string();
    }
    let limit = max_chars.saturating_sub(1);
    let cut: String = text.chars().take(limit).collect();
    let cut = match cut.rfind(char::is_whitespace) {
        Some(p) if p > limit / 2 => cut[..p].to_string(),
        _ => cut,
    };
    format!("{}…", cut.trim_end())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn unit(v: &[f32]) -> Vec<f32> {
        vecmath::normalized(v)
    }

    #[test]
    fn clusters_join_the_newest_similar_keeper() {
        let vs =
            vec![unit(&[1.0, 0.0, 0.0]), unit(&[0.0, 1.0, 0.0]), unit(&[1.0, 0.1, 0.0]), unit(&[0.0, 1.0, 0.05]), unit(&[0.0, 0.0, 1.0])];
        assert_eq!(cluster_near_duplicates(&vs, 0.95), vec![0, 1, 0, 1, 4]);
        // Nothing is similar enough at 0.9999: every vector keeps itself.
        assert_eq!(cluster_near_duplicates(&vs, 0.9999), vec![0, 1, 2, 3, 4]);
        assert!(cluster_near_duplicates::<Vec<f32>>(&[], 0.9).is_empty());
    }

    #[test]
    fn prefix_screen_agrees_with_the_dot_product() {
        let mut seed = 12345u64;
        let mut next = || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            (seed % 2000) as f32 / 1000.0 - 1.0
        };
        for dims in [3usize, 31, 32, 100, 384] {
            for _ in 0..200 {
                let a = unit(&(0..dims).map(|_| next()).collect::<Vec<_>>());
                let noise = next().abs() * 0.5;
                let b = unit(&a.iter().map(|x| x + noise * next()).collect::<Vec<_>>());
                for t in [0.5, 0.9, 0.92, 0.99] {
                    let joined = cluster_near_duplicates(&[a.clone(), b.clone()], t)[1] == 0;
                    assert_eq!(joined, vecmath::dot(&a, &b) >= t, "dims {dims}, t {t}");
                    let portable = cluster_impl::<Vec<f32>, false>(&[a.clone(), b.clone()], t)[1] == 0;
                    assert_eq!(portable, joined, "dims {dims}, t {t}");
                }
            }
        }
    }

    #[test]
    fn mean_direction_is_unit_and_between() {
        let m = mean_direction(&[unit(&[1.0, 0.0]), unit(&[0.0, 1.0])]).unwrap();
        assert!((m[0] - m[1]).abs() < 1e-6);
        assert!((vecmath::norm(&m) - 1.0).abs() < 1e-6);
        assert!(mean_direction(&[vec![1.0f32, 0.0], vec![-1.0, 0.0]]).is_none());
        assert!(mean_direction(&[vec![1.0f32, 0.0], vec![1.0]]).is_none());
        assert!(mean_direction::<Vec<f32>>(&[]).is_none());
    }

    #[test]
    fn summary_keeps_what_fragments_share_within_budget() {
        let fragments = [
            "Asked about the refund for order 1234.",
            "The refund for order 1234 was approved. Mentioned the weather.",
            "Complained that the refund took two weeks.",
            "Said thanks.",
        ];
        let s = extractive_summary(&fragments, 90);
        assert!(s.chars().count() <= 90, "{s}");
        assert!(s.contains("refund"), "{s}");
        assert!(!s.contains("weather"), "{s}");
        // Deterministic.
        assert_eq!(s, extractive_summary(&fragments, 90));
    }

    #[test]
    fn summary_of_repeats_is_one_sentence() {
        let s = extractive_summary(&["Likes tea.", "likes tea.", "Likes  tea."], 200);
        assert_eq!(s, "Likes tea.");
    }

    #[test]
    fn long_sentence_is_cut_at_a_word() {
        let s = extractive_summary(&["one two three four five six seven eight nine ten eleven twelve"], 30);
        assert!(s.chars().count() <= 30 && s.ends_with('…'), "{s}");
        assert!(s.starts_with("one two three"), "{s}");
    }

    #[test]
    fn chinese_fragments_are_summarised() {
        let s = extractive_summary(&["用户询问了退款。", "退款已经批准。", "天气很好。"], 60);
        assert!(s.contains("退款"), "{s}");
    }

    #[test]
    fn empty_input_gives_empty_summary() {
        assert_eq!(extractive_summary(&[], 100), "");
        assert_eq!(extractive_summary(&["  ", "..."], 100), "");
    }

    #[test]
    fn budget_is_a_third_within_bounds() {
        assert_eq!(summary_budget(243), 81);
        assert_eq!(summary_budget(30), 60);
        assert_eq!(summary_budget(10_000), 280);
    }
}
