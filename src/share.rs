//! What a worker's forgetting pass shares with its helper process, in the server's shared memory
//! (so only when the library is preloaded, as the workers are): the users above the capacity, in
//! the order the pass evicts them, and which of them each process has taken
//! (`agent_memory_core::forget::Claims`). The pass takes users from the front; the helper, once
//! its own steps are done, takes them from the back, so the two finish together and no user is
//! ranked by both.
//!
//! A few slots, one per forgetting pass running at a time (one pass per database): a pass takes
//! its database's slot, or a free one, before it starts its helper, and frees it after the helper
//! has exited; a slot whose pass's process is gone is free as well, and a helper waiting on it
//! stops. A pass that finds none free evicts every user itself. The list holds what fits in
//! `LIST_BYTES`: the helper takes users only from that tail.
#![allow(unsafe_code)] // the shared memory's registration, the database's id, the process lookup

use agent_memory_core::forget::{tail_that_fits, Claims};
use pgrx::prelude::*;
use pgrx::{pg_shmem_init, PGRXSharedMemory, PgLwLock};

/// A user above the capacity as the evict step plans it: the user, how many memories they can
/// lose, and their embedding models.
pub type OverUser = (String, i64, Vec<String>);

/// Passes that can share their list at the same time (one per database).
const SLOTS: usize = 4;
/// The bytes of a slot's list (its tail that fits; about 1,000 users of short ids and one model).
const LIST_BYTES: usize = 32 * 1024;

#[derive(Clone, Copy, PartialEq, Eq)]
enum State {
    Free,
    /// Taken by a pass that has not counted its users yet: a helper waits.
    Listing,
    /// The list is there to take from.
    Shared,
    /// The helper takes no more users.
    Closed,
}

#[derive(Clone, Copy)]
struct Slot {
    database: u32,
    run_id: i64,
    /// The pass's process: a slot whose process has gone (it exited without freeing it) is
    /// free, and its helper stops waiting.
    pid: i32,
    state: State,
    claims: Claims,
    /// The first user of the list the helper holds (its tail).
    base: u32,
    bytes: usize,
    list: [u8; LIST_BYTES],
}

const FREE: Slot =
    Slot { database: 0, run_id: 0, pid: 0, state: State::Free, claims: Claims::new(0, 0), base: 0, bytes: 0, list: [0; LIST_BYTES] };

#[derive(Clone, Copy)]
struct Slots([Slot; SLOTS]);

// SAFETY: plain values only (no pointer, nothing on the heap), the same in every process.
unsafe impl PGRXSharedMemory for Slots {}

// SAFETY: the name is this library's own.
static SHARE: PgLwLock<Slots> = unsafe { PgLwLock::new(c"agent_memory forgetting share") };

/// The embedding cache's hits and misses since the server started, counted by every process.
// SAFETY: the names are this library's own.
static EMBED_HITS: pgrx::PgAtomic<std::sync::atomic::AtomicU64> = unsafe { pgrx::PgAtomic::new(c"agent_memory embedding cache hits") };
// SAFETY: as above.
static EMBED_MISSES: pgrx::PgAtomic<std::sync::atomic::AtomicU64> = unsafe { pgrx::PgAtomic::new(c"agent_memory embedding cache misses") };
/// Whether the shared memory above exists: the library was preloaded (set in the postmaster,
/// inherited by every process it starts).
static PRELOADED: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Reserves the shared memory; called from `_PG_init` while the library is preloaded.
#[allow(unexpected_cfgs)] // the macro names every PostgreSQL version's feature, not only ours
pub fn init() {
    pg_shmem_init!(SHARE = Slots([FREE; SLOTS]));
    pg_shmem_init!(EMBED_HITS);
    pg_shmem_init!(EMBED_MISSES);
    PRELOADED.store(true, std::sync::atomic::Ordering::Relaxed);
}

/// Counts embedding cache hits and misses (nothing without the preload).
pub fn count_embeddings(hits: u64, misses: u64) {
    if PRELOADED.load(std::sync::atomic::Ordering::Relaxed) {
        EMBED_HITS.get().fetch_add(hits, std::sync::atomic::Ordering::Relaxed);
        EMBED_MISSES.get().fetch_add(misses, std::sync::atomic::Ordering::Relaxed);
    }
}

/// The embedding cache's hits and misses since the server started (`None` without the preload).
pub fn embedding_counts() -> Option<(u64, u64)> {
    PRELOADED.load(std::sync::atomic::Ordering::Relaxed).then(|| {
        (EMBED_HITS.get().load(std::sync::atomic::Ordering::Relaxed), EMBED_MISSES.get().load(std::sync::atomic::Ordering::Relaxed))
    })
}

fn database() -> u32 {
    // SAFETY: set once the process has connected to its database, read-only after.
    unsafe { pg_sys::MyDatabaseId }.to_u32()
}

/// Whether `pid` is a live process of the server (a backend or a background worker).
fn alive(pid: i32) -> bool {
    // SAFETY: looks the process up in the process array under its own lock; any pid is valid.
    !unsafe { pg_sys::BackendPidGetProc(pid) }.is_null()
}

impl Slot {
    fn in_use(&self) -> bool {
        self.state != State::Free && alive(self.pid)
    }
}

/// A pass's slot, freed when dropped.
pub struct Reserved {
    slot: usize,
    run_id: i64,
}

/// Takes a slot for the forgetting run `run_id` of this database, in the state where its helper
/// waits for the list; `None` when every slot is in use.
pub fn reserve(run_id: i64) -> Option<Reserved> {
    let db = database();
    let mut slots = SHARE.exclusive();
    // A slot of this database is left from a pass that stopped (one pass per database runs).
    let i = slots.0.iter().position(|s| s.state != State::Free && s.database == db).or_else(|| slots.0.iter().position(|s| !s.in_use()))?;
    let s = &mut slots.0[i];
    (s.database, s.run_id, s.pid, s.state, s.claims, s.base, s.bytes) =
        (db, run_id, crate::pg::backend_pid(), State::Listing, Claims::new(0, 0), 0, 0);
    Some(Reserved { slot: i, run_id })
}

impl Reserved {
    /// Shares the pass's list of users (the tail that fits); the helper may take from it.
    pub fn share(&self, users: &[OverUser]) {
        let encoded: Vec<Vec<u8>> = users.iter().map(|u| serde_json::to_vec(u).unwrap_or_default()).collect();
        let sizes: Vec<usize> = encoded.iter().map(|e| e.len() + 1).collect();
        let base = tail_that_fits(&sizes, LIST_BYTES - 2);
        let mut list = Vec::with_capacity(LIST_BYTES);
        list.push(b'[');
        for (k, e) in encoded[base..].iter().enumerate() {
            if k > 0 {
                list.push(b',');
            }
            list.extend_from_slice(e);
        }
        list.push(b']');
        let len = users.len() as u32;
        self.with(|s| {
            s.list[..list.len()].copy_from_slice(&list);
            s.bytes = list.len();
            s.base = base as u32;
            s.claims = Claims::new(len, base as u32);
            s.state = State::Shared;
        });
    }

    /// The pass's next user (the index in its list); `None` once the helper has the rest.
    pub fn take_front(&self) -> Option<usize> {
        self.with(|s| s.claims.take_front()).map(|i| i as usize)
    }

    /// The helper takes no more users.
    pub fn close(&self) {
        self.with(|s| {
            s.claims.close();
            s.state = State::Closed;
        })
    }

    fn with<R>(&self, f: impl FnOnce(&mut Slot) -> R) -> R {
        let mut slots = SHARE.exclusive();
        let s = &mut slots.0[self.slot];
        debug_assert!(s.run_id == self.run_id);
        f(s)
    }
}

impl Drop for Reserved {
    fn drop(&mut self) {
        let mut slots = SHARE.exclusive();
        let s = &mut slots.0[self.slot];
        if s.run_id == self.run_id && s.database == database() {
            (s.database, s.run_id, s.state) = (0, 0, State::Free);
        }
    }
}

/// What the helper of run `run_id` sees of its pass's slot.
pub enum Offer {
    /// No slot for the run (none was free, or the pass has finished or gone).
    None,
    /// The pass is still counting its users.
    NotYet,
    /// The users the helper may take from, `(first index, users)`: the list's tail.
    Users(usize, Vec<OverUser>),
}

fn find(run_id: i64) -> impl Fn(&Slot) -> bool {
    let db = database();
    move |s: &Slot| s.state != State::Free && s.database == db && s.run_id == run_id
}

/// The list the pass of run `run_id` shares, for its helper.
pub fn offer(run_id: i64) -> Offer {
    let copy = {
        let slots = SHARE.share();
        match slots.0.iter().find(|s| find(run_id)(s)) {
            None => return Offer::None,
            Some(s) if s.state == State::Closed || !alive(s.pid) => return Offer::None,
            Some(s) if s.state == State::Listing => return Offer::NotYet,
            Some(s) => (s.base as usize, s.list[..s.bytes].to_vec()),
        }
    };
    match serde_json::from_slice::<Vec<OverUser>>(&copy.1) {
        Ok(users) => Offer::Users(copy.0, users),
        Err(_) => Offer::None,
    }
}

/// The helper's next user of run `run_id` (the index in the pass's list), from the back; `None`
/// once the pass has taken the rest, or has closed the list (the claims of a list not shared yet
/// or closed give none).
pub fn take_back(run_id: i64) -> Option<usize> {
    let mut slots = SHARE.exclusive();
    let s = slots.0.iter_mut().find(|s| find(run_id)(s))?;
    s.claims.take_back().map(|i| i as usize)
}
