//! Reconciliation: what one candidate fact does to a user's memories.
//!
//! A fact is *structured* when it has a subject and a predicate, else *free text*. "The same
//! fact" is, for a structured fact, the active memory with the same (user, subject, predicate),
//! failing that the most similar active memory of the same user, kind and model with cosine ≥
//! the reconcile threshold; for free text, the active memory with identical content, failing
//! that the most similar one with cosine ≥ the merge threshold.

use std::fmt;
use std::str::FromStr;

/// The four outcomes of reconciliation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Action {
    /// A new memory.
    Add,
    /// A new memory that supersedes (retires) the old one.
    Update,
    /// The matching memory is retired.
    Delete,
    /// Nothing new: the matching memory is reinforced, or nothing matched a deletion.
    None,
}

impl Action {
    pub fn name(self) -> &'static str {
        match self {
            Action::Add => "ADD",
            Action::Update => "UPDATE",
            Action::Delete => "DELETE",
            Action::None => "NONE",
        }
    }
}

impl fmt::Display for Action {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// An action name that is not one of ADD, UPDATE, DELETE, NONE.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UnknownAction(pub String);

impl fmt::Display for UnknownAction {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "unknown action \"{}\"", self.0)
    }
}

impl FromStr for Action {
    type Err = UnknownAction;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.trim().to_ascii_uppercase().as_str() {
            "ADD" => Ok(Action::Add),
            "UPDATE" => Ok(Action::Update),
            "DELETE" => Ok(Action::Delete),
            "NONE" => Ok(Action::None),
            _ => Err(UnknownAction(s.to_string())),
        }
    }
}

/// Objects are compared without case and surrounding blanks: "Neovim" and "neovim " are the same.
pub fn same_object(a: Option<&str>, b: Option<&str>) -> bool {
    let norm = |s: Option<&str>| s.map(|s| s.trim().to_lowercase());
    norm(a) == norm(b)
}

/// A memory that may be "the same fact" as the candidate.
#[derive(Clone, Debug, PartialEq)]
pub struct Match {
    pub id: i64,
    pub version: i32,
    pub object: Option<String>,
    /// How it was found.
    pub by: MatchKind,
}

#[derive(Clone, Copy, Debug, PartialEq)]
pub enum MatchKind {
    /// Same (user, subject, predicate).
    Key,
    /// Identical content (free text).
    ContentHash,
    /// Cosine similarity at or above the threshold.
    Similarity(f64),
    /// Free text of the opposite polarity about the same words (`polarity::relate`), at this
    /// cosine: the newer statement supersedes the older.
    Contradiction(f64),
}

/// What to do, and to which memory.
#[derive(Clone, Debug, PartialEq)]
pub enum Decision {
    Add,
    Update {
        old: Match,
    },
    Delete {
        old: Match,
    },
    /// Reinforce the matching memory (importance up, hit count up).
    Reinforce {
        old: Match,
    },
    /// Change nothing: an identical free-text write (idempotent), or a deletion with no match.
    Unchanged {
        old: Option<Match>,
    },
}

impl Decision {
    pub fn action(&self) -> Action {
        match self {
            Decision::Add => Action::Add,
            Decision::Update { .. } => Action::Update,
            Decision::Delete { .. } => Action::Delete,
            Decision::Reinforce { .. } | Decision::Unchanged { .. } => Action::None,
        }
    }
}

/// Decides what a candidate does, given the match found (if any).
///
/// * `structured`: the candidate has a subject and a predicate;
/// * `object`: the candidate's object;
/// * `negate`: the candidate says the fact no longer holds.
pub fn decide(structured: bool, object: Option<&str>, negate: bool, found: Option<Match>) -> Decision {
    match (found, negate) {
        (None, true) => Decision::Unchanged { old: None },
        (None, false) => Decision::Add,
        (Some(old), true) => Decision::Delete { old },
        (Some(old), false) => {
            if !structured {
                match old.by {
                    MatchKind::ContentHash => Decision::Unchanged { old: Some(old) },
                    MatchKind::Contradiction(_) => Decision::Update { old },
                    _ => Decision::Reinforce { old },
                }
            } else if same_object(object, old.object.as_deref()) {
                Decision::Reinforce { old }
            } else {
                Decision::Update { old }
            }
        }
    }
}

/// The most similar candidate at or above `threshold`: `(index, similarity)`. Ties go to the
/// later candidate (the newer memory when candidates come in id order).
pub fn most_similar(similarities: impl IntoIterator<Item = f64>, threshold: f64) -> Option<(usize, f64)> {
    let mut best: Option<(usize, f64)> = None;
    for (i, s) in similarities.into_iter().enumerate() {
        if s >= threshold && best.is_none_or(|(_, b)| s >= b) {
            best = Some((i, s));
        }
    }
    best
}

#[cfg(test)]
mod tests {
    use super::*;

    fn m(id: i64, object: Option<&str>, by: MatchKind) -> Match {
        Match { id, version: 1, object: object.map(String::from), by }
    }

    #[test]
    fn the_eight_rounds_of_the_brief() {
        // Replays the decisions of the brief's reference session on one user.
        use Action::*;
        let mut active: Vec<(i64, &str, &str)> = Vec::new(); // (id, predicate, object)
        let mut next = 1;
        let rounds: [(&str, &str, bool); 8] = [
            ("editor", "vim", false),
            ("answer_style", "conclusion first", false),
            ("editor", "vim", false),
            ("editor", "neovim", false),
            ("theme", "dark", false),
            ("theme", "dark", true),
            ("os", "Ubuntu", false),
            ("editor", "neovim", false),
        ];
        let mut actions = Vec::new();
        let mut rows = 0;
        for (pred, obj, negate) in rounds {
            let found = active.iter().find(|r| r.1 == pred).map(|r| m(r.0, Some(r.2), MatchKind::Key));
            let d = decide(true, Some(obj), negate, found);
            match &d {
                Decision::Add => {
                    active.push((next, pred, obj));
                    next += 1;
                    rows += 1;
                }
                Decision::Update { old } => {
                    active.retain(|r| r.0 != old.id);
                    active.push((next, pred, obj));
                    next += 1;
                    rows += 1;
                }
                Decision::Delete { old } => active.retain(|r| r.0 != old.id),
                _ => {}
            }
            actions.push(d.action());
        }
        assert_eq!(actions, vec![Add, Add, None, Update, Add, Delete, Add, None]);
        assert_eq!(rows, 5);
        assert_eq!(active.len(), 3);
    }

    #[test]
    fn objects_compare_without_case_or_blanks() {
        assert!(same_object(Some("Neovim "), Some("neovim")));
        assert!(!same_object(Some("vim"), Some("neovim")));
        assert!(same_object(None, None));
        assert!(!same_object(Some("x"), None));
    }

    #[test]
    fn free_text_is_idempotent_or_reinforced() {
        let d = decide(false, None, false, Some(m(3, None, MatchKind::ContentHash)));
        assert_eq!(d, Decision::Unchanged { old: Some(m(3, None, MatchKind::ContentHash)) });
        assert_eq!(d.action(), Action::None);
        let d = decide(false, None, false, Some(m(3, None, MatchKind::Similarity(0.95))));
        assert!(matches!(d, Decision::Reinforce { .. }));
        assert_eq!(decide(false, None, false, None), Decision::Add);
    }

    #[test]
    fn a_contradiction_supersedes() {
        let d = decide(false, None, false, Some(m(7, None, MatchKind::Contradiction(0.97))));
        assert_eq!(d.action(), Action::Update);
    }

    #[test]
    fn negation_without_a_match_changes_nothing() {
        assert_eq!(decide(true, Some("dark"), true, None), Decision::Unchanged { old: None });
    }

    #[test]
    fn actions_parse_without_case() {
        assert_eq!("update".parse::<Action>(), Ok(Action::Update));
        assert_eq!(" NONE ".parse::<Action>(), Ok(Action::None));
        assert!("MERGE".parse::<Action>().is_err());
    }

    #[test]
    fn most_similar_respects_the_threshold_and_prefers_newer_on_ties() {
        assert_eq!(most_similar([0.5, 0.89, 0.3], 0.9), None);
        assert_eq!(most_similar([0.5, 0.95, 0.91], 0.9), Some((1, 0.95)));
        assert_eq!(most_similar([0.93, 0.93], 0.9), Some((1, 0.93)));
        assert_eq!(most_similar([0.9], 0.9), Some((0, 0.9)));
    }
}
