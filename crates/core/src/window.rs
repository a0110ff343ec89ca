//! Time in recall: which memories a call with `since`, `until` and `as_of` sees.
//!
//! * `since` and `until` bound when a memory was said (its `created_at`): the window is half-open,
//!   `since <= created_at < until`, so consecutive windows ("the week before last", "last week")
//!   neither overlap nor leave a gap.
//! * `as_of` asks for the memories that held at that moment: said by then (`created_at <= as_of`),
//!   still valid then (`valid_until` after it), and either still active or retired after it by a
//!   change of the facts themselves ([`HISTORY_REASONS`]: a newer version superseded it).
//!   Memories the user asked to forget (retired as deleted), and those that forgetting or
//!   consolidation retired, stay forgotten: `as_of` shows what was true, never what the user or
//!   the store has let go of.
//!
//! Times are PostgreSQL's microseconds since 2000-01-01 (any one clock works); an unbounded side
//! is `None`.

/// Why a version retired that a call `as_of` a moment before its retirement still sees: the
/// reason reconcile gives when the facts change (`memories.retired_reason`). Not `deleted`: a
/// memory the user asked to forget is not brought back by a look at an earlier moment.
pub const HISTORY_REASONS: [&str; 1] = ["superseded"];

/// The time bounds of one call; `Window::default()` has none.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Window {
    pub since: Option<i64>,
    pub until: Option<i64>,
    pub as_of: Option<i64>,
}

/// A window that no memory can be in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WindowError {
    /// `since` is not before `until`.
    Empty { since: i64, until: i64 },
    /// `as_of` is before `since`: nothing said since then existed at that moment.
    AsOfBeforeSince { since: i64, as_of: i64 },
}

impl Window {
    /// The window of `since`, `until` and `as_of`, or why no memory could be in it.
    pub fn new(since: Option<i64>, until: Option<i64>, as_of: Option<i64>) -> Result<Window, WindowError> {
        if let (Some(s), Some(u)) = (since, until) {
            if s >= u {
                return Err(WindowError::Empty { since: s, until: u });
            }
        }
        if let (Some(s), Some(a)) = (since, as_of) {
            if a < s {
                return Err(WindowError::AsOfBeforeSince { since: s, as_of: a });
            }
        }
        Ok(Window { since, until, as_of })
    }

    /// Whether the call has any bound at all (else recall takes its usual paths).
    pub fn is_bounded(&self) -> bool {
        self.since.is_some() || self.until.is_some() || self.as_of.is_some()
    }

    /// Whether a memory said at `created` is inside the window's bounds on when it was said.
    pub fn said_within(&self, created: i64) -> bool {
        self.since.is_none_or(|s| created >= s) && self.until.is_none_or(|u| created < u) && self.as_of.is_none_or(|a| created <= a)
    }

    /// Whether a version held at `as_of`: said by then, valid then, and active or retired after
    /// it for one of [`HISTORY_REASONS`]. `retired` is `None` for an active version, else its
    /// reason and `retired_at`. Without `as_of`, only active versions hold.
    pub fn held(&self, created: i64, valid_until: Option<i64>, retired: Option<(&str, i64)>) -> bool {
        match self.as_of {
            None => retired.is_none(),
            Some(a) => {
                created <= a
                    && valid_until.is_none_or(|v| v > a)
                    && retired.is_none_or(|(reason, at)| at > a && HISTORY_REASONS.contains(&reason))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_window_is_half_open() {
        let w = Window::new(Some(10), Some(20), None).unwrap();
        assert!(!w.said_within(9));
        assert!(w.said_within(10));
        assert!(w.said_within(19));
        assert!(!w.said_within(20));
        // Consecutive windows cover every moment once.
        let before = Window::new(Some(0), Some(10), None).unwrap();
        for t in 0..20 {
            assert_eq!(before.said_within(t) as u8 + w.said_within(t) as u8, 1, "{t}");
        }
    }

    #[test]
    fn one_side_or_none() {
        let w = Window::new(Some(10), None, None).unwrap();
        assert!(w.said_within(i64::MAX) && !w.said_within(9));
        let w = Window::new(None, Some(10), None).unwrap();
        assert!(w.said_within(i64::MIN) && !w.said_within(10));
        assert!(!Window::default().is_bounded());
        assert!(Window::default().said_within(0));
        assert!(w.is_bounded());
    }

    #[test]
    fn empty_windows_are_refused() {
        assert_eq!(Window::new(Some(5), Some(5), None), Err(WindowError::Empty { since: 5, until: 5 }));
        assert_eq!(Window::new(Some(6), Some(5), None), Err(WindowError::Empty { since: 6, until: 5 }));
        assert_eq!(Window::new(Some(6), None, Some(5)), Err(WindowError::AsOfBeforeSince { since: 6, as_of: 5 }));
        assert!(Window::new(Some(5), None, Some(5)).is_ok());
    }

    #[test]
    fn as_of_sees_what_held_then() {
        let w = Window::new(None, None, Some(100)).unwrap();
        // Said after the moment: not yet known.
        assert!(!w.said_within(101) && !w.held(101, None, None));
        assert!(w.said_within(100) && w.held(100, None, None));
        // Superseded after the moment: it held; before: it did not.
        assert!(w.held(50, None, Some(("superseded", 150))));
        assert!(!w.held(50, None, Some(("superseded", 100))));
        // Deleted at the user's word, forgotten or consolidated: never seen again.
        for reason in ["deleted", "evicted", "expired", "summarized", "merged"] {
            assert!(!w.held(50, None, Some((reason, 150))), "{reason}");
        }
        // Validity is judged at the moment.
        assert!(w.held(50, Some(101), None));
        assert!(!w.held(50, Some(100), None));
        // Without as_of only active versions hold.
        assert!(Window::default().held(50, None, None));
        assert!(!Window::default().held(50, None, Some(("superseded", 150))));
    }
}
