//! Write-time policies: the importance of a memory when the caller gives none, and how long a
//! memory is kept.

/// Words that mark a preference or a standing instruction, in English and Chinese. Matched
/// case-insensitively anywhere in the text (so "prefers" and "preferred" count as "prefer").
pub const PREFERENCE_MARKERS: &[&str] = &[
    "prefer",
    "remember",
    "never",
    "always",
    "from now on",
    "喜欢",
    "偏好",
    "更喜欢",
    "记住",
    "别忘",
    "永远",
    "总是",
    "一直",
    "从不",
    "绝不",
    "决不",
    "以后都",
    "从现在起",
    "从今以后",
];

/// The importance rule: `base`, +0.3 when the text has a preference marker, +0.2 when it is
/// 20 to 200 characters long; capped at 1. A caller-given importance always wins over this.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ImportanceRule {
    pub base: f64,
    pub preference_bonus: f64,
    pub length_bonus: f64,
}

impl Default for ImportanceRule {
    fn default() -> Self {
        ImportanceRule { base: 0.5, preference_bonus: 0.3, length_bonus: 0.2 }
    }
}

/// Whether `text` holds a preference marker.
pub fn has_preference_marker(text: &str) -> bool {
    let lower = text.to_lowercase();
    PREFERENCE_MARKERS.iter().any(|m| lower.contains(m))
}

impl ImportanceRule {
    /// The importance of a memory of a kind: the rule for facts and preferences (semantic); the
    /// base for an episode (a conversation turn, an event), whose words say nothing of how much
    /// it matters. Measured on real conversations (`bench/run.sh quality`), the rule's bonuses
    /// on turns only reorder recall by noise: they cost 0.015 of recall@5.
    pub fn importance_of(&self, episodic: bool, text: &str) -> f64 {
        if episodic {
            self.base.clamp(0.0, 1.0)
        } else {
            self.importance(text)
        }
    }

    pub fn importance(&self, text: &str) -> f64 {
        let mut i = self.base;
        if has_preference_marker(text) {
            i += self.preference_bonus;
        }
        let chars = text.trim().chars().count();
        if (20..=200).contains(&chars) {
            i += self.length_bonus;
        }
        i.clamp(0.0, 1.0)
    }
}

/// How long memories are kept when the caller sets no `expires_at`, in minutes; `None` is forever.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Retention {
    /// Ordinary memories (7 days).
    pub default_minutes: Option<i64>,
    /// Memories above `important_above` (30 days).
    pub important_minutes: Option<i64>,
    /// Semantic memories (90 days).
    pub semantic_minutes: Option<i64>,
    pub important_above: f64,
}

impl Default for Retention {
    fn default() -> Self {
        Retention {
            default_minutes: Some(7 * 24 * 60),
            important_minutes: Some(30 * 24 * 60),
            semantic_minutes: Some(90 * 24 * 60),
            important_above: 0.7,
        }
    }
}

impl Retention {
    /// The retention of a memory, in minutes (`None`: never expires). Protected facts never
    /// expire; otherwise the longest retention that applies wins.
    pub fn minutes(&self, semantic: bool, importance: f64, protected: bool) -> Option<i64> {
        if protected {
            return None;
        }
        let mut candidates = vec![self.default_minutes];
        if importance > self.important_above {
            candidates.push(self.important_minutes);
        }
        if semantic {
            candidates.push(self.semantic_minutes);
        }
        if candidates.iter().any(Option::is_none) {
            return None;
        }
        candidates.into_iter().flatten().max()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn episodes_start_at_the_base() {
        let r = ImportanceRule::default();
        assert_eq!(r.importance_of(true, "From now on, answer with the conclusion first."), 0.5);
        assert_eq!(r.importance_of(false, "From now on, answer with the conclusion first."), 1.0);
    }

    #[test]
    fn importance_follows_the_rule() {
        let r = ImportanceRule::default();
        assert_eq!(r.importance("ok"), 0.5);
        assert!((r.importance("The meeting moved to Tuesday at ten.") - 0.7).abs() < 1e-12);
        assert!((r.importance("Always") - 0.8).abs() < 1e-12);
        assert_eq!(r.importance("From now on, answer with the conclusion first."), 1.0);
        // 15 characters: the marker counts, the length does not.
        assert!((r.importance("以后都用中文回答我，记住这一点") - 0.8).abs() < 1e-12);
        assert!((r.importance("我喜欢茶") - 0.8).abs() < 1e-12);
        // Over 200 characters: no length bonus.
        assert_eq!(r.importance(&"x".repeat(201)), 0.5);
        assert!((r.importance(&"x".repeat(200)) - 0.7).abs() < 1e-12);
        // Characters, not bytes: 20 Chinese characters get the bonus.
        assert!((r.importance(&"字".repeat(20)) - 0.7).abs() < 1e-12);
    }

    #[test]
    fn preference_markers_ignore_case() {
        assert!(has_preference_marker("I PREFER tea"));
        assert!(has_preference_marker("Never call after 9pm"));
        assert!(!has_preference_marker("The sky is blue"));
    }

    #[test]
    fn retention_follows_the_brief() {
        let r = Retention::default();
        assert_eq!(r.minutes(false, 0.5, false), Some(7 * 24 * 60));
        assert_eq!(r.minutes(false, 0.71, false), Some(30 * 24 * 60));
        assert_eq!(r.minutes(false, 0.7, false), Some(7 * 24 * 60));
        assert_eq!(r.minutes(true, 0.1, false), Some(90 * 24 * 60));
        assert_eq!(r.minutes(true, 0.9, false), Some(90 * 24 * 60));
        assert_eq!(r.minutes(true, 0.9, true), None);
        assert_eq!(r.minutes(false, 0.1, true), None);
        let forever = Retention { semantic_minutes: None, ..Retention::default() };
        assert_eq!(forever.minutes(true, 0.1, false), None);
        assert_eq!(forever.minutes(false, 0.1, false), Some(7 * 24 * 60));
    }
}
