//! Polarity: whether a statement says something holds or that it does not, and whether two
//! statements speak of the same thing.
//!
//! With a real embedding model a statement and its negation are often *more* similar than the
//! merge threshold ("allergic to peanuts" / "not allergic to peanuts": cosine 0.97), so a cosine
//! alone cannot tell "the same fact again" from "its contradiction". Polarity is detected from
//! words, deterministically: English negation words (not, no, never, no longer, don't, doesn't,
//! isn't, ..., anymore) and Chinese negation characters (不, 没, 没有, 别, 不再, 无, 未, 非). Two
//! statements are then compared by what is left of them: their words without the negation
//! markers, stop words and the generic subject ("user", "用户").

use std::collections::HashSet;

use crate::text::{for_each_token, TokenizerOptions};

/// English words that negate (lower case, apostrophes removed as the tokeniser removes them).
const NEGATIONS: &[&str] = &[
    "not", "no", "never", "nobody", "nothing", "none", "neither", "nor", "cannot", "cant", "dont", "doesnt", "didnt", "isnt", "arent",
    "wasnt", "werent", "wont", "wouldnt", "shouldnt", "couldnt", "hasnt", "havent", "hadnt", "anymore", "stopped", "quit",
];

/// Chinese negation markers; longer ones first, so "不再" is removed whole. (非 and 未 are left
/// out: they begin common words that negate nothing, 非常 "very" and 未来 "future".)
const NEGATIONS_ZH: &[&str] = &["没有", "不再", "不", "没", "别", "无"];

/// Words that name the user, not the fact: left out of the comparison.
const SUBJECT_WORDS: &[&str] = &["user", "users", "用户"];

fn plain_words(text: &str) -> Vec<String> {
    text.to_lowercase()
        .split(|c: char| !(c.is_alphanumeric() || c == '\'' || c == '’'))
        .map(|w| w.chars().filter(|c| *c != '\'' && *c != '’').collect::<String>())
        .filter(|w| !w.is_empty())
        .collect()
}

/// Whether `text` says that something does *not* hold.
pub fn is_negated(text: &str) -> bool {
    if NEGATIONS_ZH.iter().any(|m| text.contains(m)) {
        return true;
    }
    plain_words(text).iter().any(|w| NEGATIONS.contains(&w.as_str()))
}

/// `text` without its negation markers (and with "no longer" gone whole).
pub fn without_negation(text: &str) -> String {
    let mut t = text.to_string();
    for m in NEGATIONS_ZH {
        // Removed without a gap, so the characters around it still make their bigrams.
        t = t.replace(m, "");
    }
    let mut out: Vec<&str> = Vec::new();
    let mut previous = String::new();
    for raw in t.split_whitespace() {
        let w: String = raw.to_lowercase().chars().filter(|c| c.is_alphanumeric()).collect();
        let negation = NEGATIONS.contains(&w.as_str()) || (w == "longer" && previous == "no");
        previous = w;
        if !negation {
            out.push(raw);
        }
    }
    out.join(" ")
}

/// The words of a statement that say what it is about: tokens (stemmed, stop words out) of its
/// text without negation markers and without the generic subject.
pub fn content_words(text: &str) -> HashSet<u64> {
    let mut t = without_negation(text);
    for s in SUBJECT_WORDS {
        t = t.replace(s, " ");
        // A capitalised subject word too ("User", "User's").
        let cap: String = s.chars().enumerate().map(|(i, c)| if i == 0 { c.to_ascii_uppercase() } else { c }).collect();
        t = t.replace(&cap, " ");
    }
    let mut out = HashSet::new();
    for_each_token(&t, TokenizerOptions { stop_words: true, stem: true }, |h| {
        out.insert(h);
    });
    out
}

/// How much two statements' content words overlap: the shared words, and their share of the
/// smaller set (1 when one says everything the other says).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Overlap {
    pub shared: usize,
    pub smaller: usize,
    pub larger: usize,
}

impl Overlap {
    pub fn of(a: &HashSet<u64>, b: &HashSet<u64>) -> Self {
        let shared = a.intersection(b).count();
        Overlap { shared, smaller: a.len().min(b.len()), larger: a.len().max(b.len()) }
    }

    /// `shared / smaller` (0 when a side has no words).
    pub fn coefficient(&self) -> f64 {
        if self.smaller == 0 {
            0.0
        } else {
            self.shared as f64 / self.smaller as f64
        }
    }

    /// Whether the two speak of the same thing: at least half of the smaller side's words are
    /// shared, and at least two words (or all of them, for one-word statements).
    pub fn same_topic(&self) -> bool {
        self.smaller > 0 && self.coefficient() >= 0.5 && self.shared >= self.smaller.min(2)
    }
}

/// The rule for two statements (the older `a`, the newer `b`) at cosine `cosine`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Relation {
    /// Nothing to do with each other (as far as this rule can tell).
    Unrelated,
    /// The same fact said again: merge.
    Same,
    /// Opposite polarity about the same thing: the newer supersedes the older.
    Contradiction,
}

/// Lowest cosine at which two statements of opposite polarity and the same words are taken for a
/// contradiction (the model's similarity of a statement and its negation runs from 0.6 to 0.97).
pub const CONTRADICTION_COSINE: f64 = 0.5;

/// Decides how two free-text statements relate. `merge` is the cosine at which statements of
/// the same polarity are the same fact (`agent_memory.merge_similarity`); a paraphrase a little
/// below it (down to `merge − 0.07`) is the same fact when nearly all its words agree
/// (overlap ≥ 0.75).
pub fn relate(a: &str, b: &str, cosine: f64, merge: f64) -> Relation {
    let (na, nb) = (is_negated(a), is_negated(b));
    if na != nb {
        if cosine >= CONTRADICTION_COSINE && Overlap::of(&content_words(a), &content_words(b)).same_topic() {
            return Relation::Contradiction;
        }
        // Opposite polarity never merges, however similar the vectors.
        return Relation::Unrelated;
    }
    if cosine >= merge {
        return Relation::Same;
    }
    if cosine >= merge - 0.07 {
        let o = Overlap::of(&content_words(a), &content_words(b));
        if o.same_topic() && o.coefficient() >= 0.75 {
            return Relation::Same;
        }
    }
    Relation::Unrelated
}

/// An object that negates a value ("not peanuts", "无花生"): the value it negates.
pub fn negated_value(object: &str) -> Option<String> {
    if !is_negated(object) {
        return None;
    }
    let rest = without_negation(object).trim().to_string();
    (!rest.is_empty()).then_some(rest)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn polarity_in_english_and_chinese() {
        for t in [
            "The user is not allergic to peanuts",
            "User no longer wants dark mode",
            "User doesn't drink coffee anymore",
            "User never wants email notifications",
            "User isn't vegan",
            "用户对花生不过敏",
            "用户不再喜欢深色主题",
            "用户已经不喝咖啡了",
            "用户没有孩子",
        ] {
            assert!(is_negated(t), "{t}");
        }
        for t in [
            "The user is allergic to peanuts",
            "User prefers dark mode",
            "用户每天喝咖啡",
            "Knows Noah",
            "Wants a longer vacation",
            "非常喜欢茶",
        ] {
            assert!(!is_negated(t), "{t}");
        }
        assert_eq!(without_negation("User no longer wants dark mode"), "User wants dark mode");
    }

    #[test]
    fn what_is_left_compares_by_words() {
        let a = content_words("The user is allergic to peanuts");
        let b = content_words("The user is not allergic to peanuts");
        assert_eq!(a, b);
        let o = Overlap::of(&content_words("User drinks coffee every morning"), &content_words("User doesn't drink coffee anymore"));
        assert_eq!(o.shared, 2);
        assert!(o.same_topic());
        let o = Overlap::of(&content_words("用户每天喝咖啡"), &content_words("用户已经不喝咖啡了"));
        assert!(o.same_topic(), "{o:?}");
        let o = Overlap::of(&content_words("User never eats meat"), &content_words("User eats breakfast at 8"));
        assert!(!o.same_topic(), "one shared word of two is not the same thing: {o:?}");
    }

    #[test]
    fn contradictions_merges_and_strangers() {
        assert_eq!(relate("The user is allergic to peanuts", "The user is not allergic to peanuts", 0.966, 0.92), Relation::Contradiction);
        assert_eq!(relate("User smokes", "User no longer smokes", 0.79, 0.92), Relation::Contradiction);
        assert_eq!(relate("用户每天喝咖啡", "用户已经不喝咖啡了", 0.604, 0.92), Relation::Contradiction);
        assert_eq!(relate("Works at Acme as an engineer", "Works as an engineer at Acme", 0.993, 0.92), Relation::Same);
        assert_eq!(relate("User lives in Lisbon", "The user's home is in Lisbon", 0.88, 0.92), Relation::Unrelated);
        // Very similar vectors of opposite polarity about different things do not merge.
        assert_eq!(relate("User likes tea", "User never travels by plane", 0.95, 0.92), Relation::Unrelated);
        assert_eq!(relate("User eats breakfast at 8", "User never eats meat", 0.55, 0.92), Relation::Unrelated);
    }

    #[test]
    fn negated_objects_name_the_value() {
        assert_eq!(negated_value("not peanuts").as_deref(), Some("peanuts"));
        assert_eq!(negated_value("no longer Acme").as_deref(), Some("Acme"));
        assert_eq!(negated_value("peanuts"), None);
        assert_eq!(negated_value("not"), None);
    }
}
