//! Arrays a call sizes by the user's memories, kept by the backend between calls.
//!
//! A packed recall of a large user fills a few arrays of one entry per memory (the index's
//! entries, the bounds, the keyword matches: about 7 MB for a hybrid call over 100,000 memories).
//! Freed at the end of each call, that much memory goes back to the kernel (the C allocator
//! trims its heap above a threshold), and the next call faults every page in again, zeroed:
//! a sixth of such a call was spent in the kernel. A [`Kept`] array is taken from its
//! backend-wide slot for the call and put back, emptied, when dropped (an error unwinds through
//! the drop too); an array grown past [`KEEP_BYTES`] is let go instead, so a backend holds on
//! to at most that much per slot.

use std::cell::RefCell;
use std::ops::{Deref, DerefMut};
use std::thread::LocalKey;

/// The largest array (its capacity, in bytes) a slot keeps between calls: enough for a user of
/// about 100,000 memories.
pub const KEEP_BYTES: usize = 3 << 20;

/// A backend-wide slot for one array (a `thread_local!`: a backend is one thread).
pub type Slot<T> = LocalKey<RefCell<Vec<T>>>;

/// An array taken from its slot for the length of a call.
pub struct Kept<T: 'static> {
    value: Vec<T>,
    slot: &'static Slot<T>,
}

/// The bytes an array holds (its capacity, not its length).
fn bytes<T>(v: &Vec<T>) -> usize {
    v.capacity() * std::mem::size_of::<T>()
}

impl<T: 'static> Kept<T> {
    /// Takes the slot's array (empty, with the capacity a former call left), or a new one when
    /// the slot is empty or in use.
    pub fn take(slot: &'static Slot<T>) -> Self {
        let value = slot.try_with(|s| s.try_borrow_mut().map(|mut v| std::mem::take(&mut *v)).unwrap_or_default()).unwrap_or_default();
        Kept { value, slot }
    }
}

impl<T: std::fmt::Debug> std::fmt::Debug for Kept<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.value.fmt(f)
    }
}

impl<T> Deref for Kept<T> {
    type Target = Vec<T>;

    fn deref(&self) -> &Vec<T> {
        &self.value
    }
}

impl<T> DerefMut for Kept<T> {
    fn deref_mut(&mut self) -> &mut Vec<T> {
        &mut self.value
    }
}

impl<T> Drop for Kept<T> {
    fn drop(&mut self) {
        let mut value = std::mem::take(&mut self.value);
        if bytes(&value) > KEEP_BYTES {
            return;
        }
        value.clear();
        // A slot already refilled (two arrays of one slot in use at once) keeps the larger.
        let _ = self.slot.try_with(|s| {
            if let Ok(mut s) = s.try_borrow_mut() {
                if bytes(&s) < bytes(&value) {
                    *s = value;
                }
            }
        });
    }
}

#[cfg(test)]
mod unit {
    use super::*;

    thread_local! {
        static NUMBERS: RefCell<Vec<u64>> = const { RefCell::new(Vec::new()) };
    }

    #[test]
    fn an_array_comes_back_empty_with_its_capacity() {
        {
            let mut a = Kept::take(&NUMBERS);
            a.extend(0..1000);
        }
        let a = Kept::take(&NUMBERS);
        assert!(a.is_empty());
        assert!(a.capacity() >= 1000);
        // Taken: the slot is empty until it is put back.
        let b = Kept::take(&NUMBERS);
        assert_eq!(b.capacity(), 0);
    }

    #[test]
    fn an_array_past_the_limit_is_let_go() {
        {
            let mut a = Kept::take(&NUMBERS);
            a.reserve(KEEP_BYTES / 8 + 1);
        }
        assert_eq!(Kept::take(&NUMBERS).capacity(), 0);
    }
}
