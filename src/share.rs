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
/// Erasures since the server started: a process drops its recent embeddings when it moves.
// SAFETY: as above.
static ERASURES: pgrx::PgAtomic<std::sync::atomic::AtomicU64> = unsafe { pgrx::PgAtomic::new(c"agent_memory erasures") };
/// Whether the shared memory above exists: the library was preloaded (set in the postmaster,
/// inherited by every process it starts).
static PRELOADED: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Reserves the shared memory; called from `_PG_init` while the library is preloaded.
#[allow(unexpected_cfgs)] // the macro names every PostgreSQL version's feature, not only ours
pub fn init() {
    pg_shmem_init!(SHARE = Slots([FREE; SLOTS]));
    pg_shmem_init!(EMBED_HITS);
    pg_shmem_init!(EMBED_MISSES);
    pg_shmem_init!(ERASURES);
    init_hits();
    PRELOADED.store(true, std::sync::atomic::Ordering::Relaxed);
}

/// Counts embedding cache hits and misses (nothing without the preload).
pub fn count_embeddings(hits: u64, misses: u64) {
    if PRELOADED.load(std::sync::atomic::Ordering::Relaxed) {
        EMBED_HITS.get().fetch_add(hits, std::sync::atomic::Ordering::Relaxed);
        EMBED_MISSES.get().fetch_add(misses, std::sync::atomic::Ordering::Relaxed);
    }
}

/// Counts an erasure, for every process's recent embeddings.
pub fn count_erasure() {
    if PRELOADED.load(std::sync::atomic::Ordering::Relaxed) {
        ERASURES.get().fetch_add(1, std::sync::atomic::Ordering::SeqCst);
    }
}

/// Erasures since the server started (`None` without the preload: then no process may keep
/// embeddings past its call, since none would learn of an erasure).
pub fn erasures() -> Option<u64> {
    PRELOADED.load(std::sync::atomic::Ordering::Relaxed).then(|| ERASURES.get().load(std::sync::atomic::Ordering::SeqCst))
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

// ---------------------------------------------------------------------------------------------
// Recall's hits, waiting for the worker to fold them (`agent_memory_core::hits`): a table of
// `agent_memory.hit_buffer` memories in shared memory, sized at server start, and its
// bookkeeping under one lock. A database's recalls defer their hits only while a worker of that
// database has said it folds them (`folding`); otherwise recall touches the rows itself.

use agent_memory_core::hits::{self as hit_table, Hit, Recorded, Slot as HitSlot};
use std::sync::atomic::{AtomicPtr, AtomicUsize, Ordering};

/// Databases whose workers can fold at the same time.
const FOLDERS: usize = 16;

#[derive(Clone, Copy, Default)]
struct Folder {
    database: u32,
    pid: i32,
}

#[derive(Clone, Copy, Default)]
struct HitBook {
    usage: hit_table::Usage,
    recorded: u64,
    dropped: u64,
    folded: u64,
    folders: [Folder; FOLDERS],
}

// SAFETY: plain values only, the same in every process.
unsafe impl PGRXSharedMemory for HitBook {}

// SAFETY: the name is this library's own.
static HIT_BOOK: PgLwLock<HitBook> = unsafe { PgLwLock::new(c"agent_memory recall hits") };
/// The table's slots, in shared memory (set in the postmaster, inherited by every process);
/// read and written only under `HIT_BOOK`'s lock.
static HIT_TABLE: AtomicPtr<HitSlot> = AtomicPtr::new(std::ptr::null_mut());
static HIT_SLOTS: AtomicUsize = AtomicUsize::new(0);
const HIT_TABLE_NAME: &std::ffi::CStr = c"agent_memory recall hit table";

static mut PREV_SHMEM_REQUEST: pg_sys::shmem_request_hook_type = None;
static mut PREV_SHMEM_STARTUP: pg_sys::shmem_startup_hook_type = None;

/// Reserves the hit table (`agent_memory.hit_buffer` memories); from `init`.
#[allow(unexpected_cfgs)] // the macro names every PostgreSQL version's feature, not only ours
fn init_hits() {
    pg_shmem_init!(HIT_BOOK = HitBook::default());
    HIT_SLOTS.store(hit_table::slots_for(crate::gucs::hit_buffer()), Ordering::Relaxed);
    // SAFETY: `_PG_init` runs in the postmaster before any hook is called; the previous hooks are
    // called first by ours.
    unsafe {
        PREV_SHMEM_REQUEST = pg_sys::shmem_request_hook;
        pg_sys::shmem_request_hook = Some(request_hit_table);
        PREV_SHMEM_STARTUP = pg_sys::shmem_startup_hook;
        pg_sys::shmem_startup_hook = Some(start_hit_table);
    }
}

fn hit_table_bytes() -> usize {
    HIT_SLOTS.load(Ordering::Relaxed) * std::mem::size_of::<HitSlot>()
}

#[pg_guard]
unsafe extern "C-unwind" fn request_hit_table() {
    // SAFETY: called by the postmaster in its shared memory request phase.
    unsafe {
        if let Some(prev) = PREV_SHMEM_REQUEST {
            prev();
        }
        pg_sys::RequestAddinShmemSpace(hit_table_bytes());
    }
}

#[pg_guard]
unsafe extern "C-unwind" fn start_hit_table() {
    // SAFETY: called once shared memory exists, by the postmaster (and by every process on
    // platforms without fork), under the lock PostgreSQL gives add-ins for their structs.
    unsafe {
        if let Some(prev) = PREV_SHMEM_STARTUP {
            prev();
        }
        let bytes = hit_table_bytes();
        if bytes == 0 {
            return;
        }
        let init_lock = &raw mut (*pg_sys::MainLWLockArray.add(21)).lock;
        pg_sys::LWLockAcquire(init_lock, pg_sys::LWLockMode::LW_EXCLUSIVE);
        let mut found = false;
        let p = pg_sys::ShmemInitStruct(HIT_TABLE_NAME.as_ptr(), bytes, &mut found).cast::<HitSlot>();
        if !found {
            std::ptr::write_bytes(p.cast::<u8>(), 0, bytes);
        }
        HIT_TABLE.store(p, Ordering::Relaxed);
        pg_sys::LWLockRelease(init_lock);
    }
}

/// The hit table with its bookkeeping, under the lock (exclusive).
fn with_hits<R>(f: impl FnOnce(&mut HitBook, &mut [HitSlot]) -> R) -> Option<R> {
    if !PRELOADED.load(Ordering::Relaxed) {
        return None;
    }
    let p = HIT_TABLE.load(Ordering::Relaxed);
    let mut book = HIT_BOOK.exclusive();
    let table: &mut [HitSlot] = if p.is_null() {
        &mut []
    } else {
        // SAFETY: the table has HIT_SLOTS slots in shared memory, and every process touches it
        // only while it holds HIT_BOOK's lock exclusively, as here.
        unsafe { std::slice::from_raw_parts_mut(p, HIT_SLOTS.load(Ordering::Relaxed)) }
    };
    Some(f(&mut book, table))
}

/// Whether this database's recalls defer their hits: the library is preloaded with a hit table,
/// this is not a standby, and a live worker of this database folds them.
pub fn hits_deferred() -> bool {
    if !PRELOADED.load(Ordering::Relaxed) || HIT_SLOTS.load(Ordering::Relaxed) == 0 || crate::pg::in_recovery() {
        return false;
    }
    let db = database();
    let pid = {
        let book = HIT_BOOK.share();
        book.folders.iter().find(|f| f.database == db).map(|f| f.pid)
    };
    pid.is_some_and(alive)
}

/// Records that recall returned `ids` of `user`'s table of memories `relation` at `at`
/// (PostgreSQL's microseconds); returns how many were dropped because the table, or the user's
/// share of it (an eighth: `agent_memory_core::hits::user_limit`), was full.
pub fn record_hits(relation: u32, ids: &[i64], at: i64, user: &str) -> usize {
    let db = database();
    let bucket = hit_table::user_bucket(user);
    with_hits(|book, table| {
        let mut dropped = 0;
        for id in ids {
            if hit_table::record(table, &mut book.usage, db, relation, *id, at, bucket) == Recorded::Dropped {
                dropped += 1;
            }
        }
        book.recorded += (ids.len() - dropped) as u64;
        book.dropped += dropped as u64;
        dropped
    })
    .unwrap_or(ids.len())
}

/// Takes this database's waiting hits out of the table, in id order.
pub fn take_hits() -> Vec<Hit> {
    let db = database();
    with_hits(|book, table| hit_table::take(table, &mut book.usage, db)).unwrap_or_default()
}

/// Puts back hits whose fold failed (they are dropped, and counted, if the table is full).
pub fn put_back_hits(hits: &[Hit]) {
    let db = database();
    with_hits(|book, table| {
        let lost = hit_table::put_back(table, &mut book.usage, db, hits);
        book.dropped += lost as u64;
    });
}

/// Counts hits folded into the table of memories, and hits passed over (of a table that is gone).
pub fn count_folded(folded: u64, passed_over: u64) {
    with_hits(|book, _| {
        book.folded += folded;
        book.dropped += passed_over;
    });
}

/// This process folds this database's hits from now on (`true`), or no longer does.
pub fn folding(on: bool) {
    let (db, pid) = (database(), crate::pg::backend_pid());
    with_hits(|book, _| {
        let mine = book.folders.iter().position(|f| f.database == db);
        match (on, mine) {
            (true, Some(i)) => book.folders[i].pid = pid,
            (true, None) => {
                if let Some(i) = book.folders.iter().position(|f| f.database == 0 || !alive(f.pid)) {
                    book.folders[i] = Folder { database: db, pid };
                }
            }
            (false, Some(i)) if book.folders[i].pid == pid => book.folders[i] = Folder::default(),
            (false, _) => {}
        }
    });
}

/// The hit table as `memory_hit_stats` shows it.
pub struct HitCounts {
    pub pending: i64,
    pub capacity: i64,
    pub recorded: i64,
    pub folded: i64,
    pub dropped: i64,
}

/// The hit table's counters (`None` without the preload).
pub fn hit_counts() -> Option<HitCounts> {
    let db = database();
    with_hits(|book, table| HitCounts {
        pending: hit_table::pending(table, db) as i64,
        capacity: hit_table::limit(table.len()) as i64,
        recorded: book.recorded as i64,
        folded: book.folded as i64,
        dropped: book.dropped as i64,
    })
}
