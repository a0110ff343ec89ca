//! A direct index scan over one user's active memories of one model, for recall.
//!
//! Recall visits every candidate of a user, so the per-row cost is everything. Through SPI, each
//! row is executed by the executor, copied into a tuple table and read back; here the rows are
//! read in place. The scan walks the btree index `memories_user_model_active` with the keys
//! (user_id, embedding_model), fetches each visible heap tuple into a slot, and hands its
//! attributes to the caller while the buffer is pinned. Nothing is copied except an embedding
//! that must be detoasted.
//!
//! The scan uses the transaction's active snapshot, so it sees exactly what a query of the same
//! statement would. Locks are `AccessShareLock`, as for a SELECT.

#![allow(unsafe_code)]

use std::borrow::Cow;
use std::ffi::CStr;

use pgrx::pg_sys;
use pgrx::IntoDatum;

use crate::error::Result;

/// One candidate, valid only during the callback.
pub struct Candidate {
    pub id: i64,
    pub importance: f32,
    /// `last_hit_at` in PostgreSQL's microseconds since 2000-01-01.
    pub last_hit: i64,
    pub episodic: bool,
    /// `created_at`, in the same unit as `last_hit`.
    pub created: i64,
    pub protected: bool,
    /// Whether consolidation archived it (`archived_at` is set).
    pub archived: bool,
    pub hit_count: i32,
    /// Whether `expires_at` or `valid_until` has passed (only [`for_each_active`] passes these).
    pub expired: bool,
    /// Where the row version is (its `ctid`), for a write that follows in the same transaction.
    pub tid: pg_sys::ItemPointerData,
    /// The `emb` datum, pointing into the pinned buffer (or a toast pointer); `None` while the
    /// memory waits for the background worker to embed it (`agent_memory.embed_async`).
    emb: Option<pg_sys::Datum>,
    /// The `emb_windows` datum (a `vector[]`: the embeddings of a long memory's further windows,
    /// `agent_memory.embed_windows`), when not NULL.
    emb_windows: Option<pg_sys::Datum>,
    /// The `content` datum (a `text`), in the buffer or a toast pointer.
    content: pg_sys::Datum,
    /// The `kind` datum (`text`).
    kind: pg_sys::Datum,
    /// The `subject`, `predicate`, `object` and `object_key` datums (`text`), when not NULL.
    subject: Option<pg_sys::Datum>,
    predicate: Option<pg_sys::Datum>,
    object: Option<pg_sys::Datum>,
    object_key: Option<pg_sys::Datum>,
    /// Whether it is a standing instruction (`kind = 'procedural'`).
    pub procedural: bool,
    /// The `task_id` datum (`text`), when not NULL.
    task_id: Option<pg_sys::Datum>,
}

// The datums point into the buffer the scan holds pinned while the callback runs, and a
// candidate is only lent to the callback (it cannot be copied out), so what these return is
// valid for as long as the candidate is.
impl Candidate {
    /// `memories.emb` (a `vector`), or `None` while the memory is not yet embedded.
    pub fn emb(&self) -> Result<Option<crate::vector::VectorDatum>> {
        match self.emb {
            // SAFETY: the datum is the row's `emb`, of type `vector` (see above).
            Some(d) => unsafe { crate::vector::VectorDatum::from_datum(d, crate::vector::Element::F32) }.map(Some),
            None => Ok(None),
        }
    }

    /// The best cosine similarity of the unit vector `q` to the embeddings of
    /// `memories.emb_windows` (`None` when it is NULL), as [`crate::vector::best_in_array`].
    pub fn best_window(
        &self,
        q: &[f32],
        scratch: &mut Vec<f32>,
        mismatch: impl Fn(usize) -> crate::error::MemoryError,
    ) -> Result<Option<f64>> {
        match self.emb_windows {
            // SAFETY: the datum is the row's `emb_windows`, of type `vector[]` (see above).
            Some(d) => unsafe { crate::vector::best_in_array(d, q, scratch, mismatch) },
            None => Ok(None),
        }
    }

    /// `memories.content`.
    pub fn content(&self) -> Cow<'_, str> {
        // SAFETY: the datum is the row's `content`, of type `text` (see above).
        unsafe { crate::vector::text_of(self.content) }
    }

    /// `memories.kind`, as SQL reads it.
    pub fn kind_string(&self) -> String {
        sql_string(Some(self.kind)).unwrap_or_default()
    }

    /// `memories.content`, as SQL reads it.
    pub fn content_string(&self) -> String {
        sql_string(Some(self.content)).unwrap_or_default()
    }

    /// `memories.subject`, as SQL reads it.
    pub fn subject_string(&self) -> Option<String> {
        sql_string(self.subject)
    }

    /// `memories.predicate`, as SQL reads it.
    pub fn predicate_string(&self) -> Option<String> {
        sql_string(self.predicate)
    }

    /// `memories.object`, as SQL reads it.
    pub fn object_string(&self) -> Option<String> {
        sql_string(self.object)
    }

    /// `memories.predicate`, when not NULL.
    pub fn predicate(&self) -> Option<Cow<'_, str>> {
        // SAFETY: the datum is the row's `predicate`, of type `text` (see above).
        self.predicate.map(|d| unsafe { crate::vector::text_of(d) })
    }

    /// `memories.object_key`, when not NULL.
    pub fn object_key(&self) -> Option<Cow<'_, str>> {
        // SAFETY: the datum is the row's `object_key`, of type `text` (see above).
        self.object_key.map(|d| unsafe { crate::vector::text_of(d) })
    }

    /// `memories.task_id`, when not NULL.
    pub fn task_id(&self) -> Option<Cow<'_, str>> {
        // SAFETY: the datum is the row's `task_id`, of type `text` (see above).
        self.task_id.map(|d| unsafe { crate::vector::text_of(d) })
    }
}

/// A `text` datum of a candidate (or NULL) as a `String`, converted as SQL's results are.
fn sql_string(datum: Option<pg_sys::Datum>) -> Option<String> {
    // SAFETY: the callers pass the datums of `text` columns of the candidate's row, valid while
    // the candidate is (see above).
    datum.and_then(|d| unsafe { <String as pgrx::FromDatum>::from_datum(d, false) })
}

/// The attributes the scan reads, by number.
struct Columns {
    id: usize,
    content: usize,
    subject: usize,
    predicate: usize,
    object: usize,
    object_key: usize,
    task_id: usize,
    kind: usize,
    emb: usize,
    emb_windows: usize,
    importance: usize,
    active: usize,
    valid_until: usize,
    expires_at: usize,
    last_hit_at: usize,
    created_at: usize,
    protected: usize,
    archived_at: usize,
    hit_count: usize,
}

impl Columns {
    /// The highest attribute number the scan reads: the slot is deformed up to it.
    fn max(&self) -> i32 {
        [
            self.id,
            self.content,
            self.subject,
            self.predicate,
            self.object,
            self.object_key,
            self.task_id,
            self.kind,
            self.emb,
            self.emb_windows,
            self.importance,
            self.active,
            self.valid_until,
            self.expires_at,
            self.last_hit_at,
            self.created_at,
            self.protected,
            self.archived_at,
            self.hit_count,
        ]
        .into_iter()
        .max()
        .unwrap_or(1) as i32
    }
}

use crate::placement::missing;

fn attnum(rel: pg_sys::Oid, name: &CStr) -> Result<usize> {
    // SAFETY: a syscache lookup by name; returns InvalidAttrNumber (0) when there is none.
    let n = unsafe { pg_sys::get_attnum(rel, name.as_ptr()) };
    if n <= 0 {
        Err(missing(&format!("column {}", name.to_string_lossy())))
    } else {
        Ok(n as usize)
    }
}

/// Releases what the scan holds. On an error raised by PostgreSQL, the transaction abort
/// releases the same resources, so nothing is done while unwinding.
struct Scan {
    rel: pg_sys::Relation,
    index: pg_sys::Relation,
    scan: pg_sys::IndexScanDesc,
    slot: *mut pg_sys::TupleTableSlot,
    /// A second slot: the candidate handed to the caller stays pinned in one slot while the
    /// next row is fetched into the other (see [`scan_active`]).
    slot2: *mut pg_sys::TupleTableSlot,
}

impl Drop for Scan {
    fn drop(&mut self) {
        if std::thread::panicking() {
            return;
        }
        let lock = pg_sys::AccessShareLock as pg_sys::LOCKMODE;
        // SAFETY: each pointer was obtained by the matching open/begin/create call in `scan`
        // and is released exactly once, in reverse order.
        unsafe {
            if !self.slot.is_null() {
                pg_sys::ExecDropSingleTupleTableSlot(self.slot);
            }
            if !self.slot2.is_null() {
                pg_sys::ExecDropSingleTupleTableSlot(self.slot2);
            }
            if !self.scan.is_null() {
                pg_sys::index_endscan(self.scan);
            }
            if !self.index.is_null() {
                pg_sys::index_close(self.index, lock);
            }
            if !self.rel.is_null() {
                pg_sys::table_close(self.rel, lock);
            }
        }
    }
}

/// The table and its per-user index that hold `user`'s memories.
fn relations(user: &str) -> Result<(pg_sys::Oid, pg_sys::Oid)> {
    let p = crate::placement::of_user(user)?;
    Ok((p.memories, p.active_index))
}

/// The id of the table that holds `user`'s memories (recall's hits name it: `api::hits`).
pub fn memories_oid(user: &str) -> Result<u32> {
    Ok(crate::placement::of_user(user)?.memories.to_u32())
}

/// The snapshot of the running statement (a query of the same statement sees the same rows).
///
/// # Safety
/// Must run inside a transaction.
unsafe fn statement_snapshot() -> pg_sys::Snapshot {
    // SAFETY: the caller's promise; GetTransactionSnapshot is valid in a transaction.
    unsafe {
        let snapshot = pg_sys::GetActiveSnapshot();
        if snapshot.is_null() {
            pg_sys::GetTransactionSnapshot()
        } else {
            snapshot
        }
    }
}

/// Opens the table and the index and positions an index scan on (user, model).
///
/// # Safety
/// Must run inside a transaction with an active snapshot (a SQL function call).
unsafe fn begin(rel_oid: pg_sys::Oid, index_oid: pg_sys::Oid, user: &str, model: &str) -> Result<Scan> {
    // SAFETY: the caller's promise.
    unsafe { begin_with(rel_oid, index_oid, user, Some(model), false) }
}

/// [`begin`], with the model's key only when `model` is given, and with `want_itup` the index
/// tuples are returned too (`xs_itup`).
///
/// # Safety
/// As [`begin`].
unsafe fn begin_with(rel_oid: pg_sys::Oid, index_oid: pg_sys::Oid, user: &str, model: Option<&str>, want_itup: bool) -> Result<Scan> {
    let keys: Vec<&str> = std::iter::once(user).chain(model).collect();
    // SAFETY: the caller's promise.
    unsafe { begin_keys(rel_oid, index_oid, &keys, want_itup) }
}

/// Opens the table and the index and positions an index scan on equal values of the index's
/// first `keys.len()` columns (text).
///
/// # Safety
/// As [`begin`]; the index's first `keys.len()` columns are text.
unsafe fn begin_keys(rel_oid: pg_sys::Oid, index_oid: pg_sys::Oid, keys: &[&str], want_itup: bool) -> Result<Scan> {
    let lock = pg_sys::AccessShareLock as pg_sys::LOCKMODE;
    let mut s = Scan {
        rel: std::ptr::null_mut(),
        index: std::ptr::null_mut(),
        scan: std::ptr::null_mut(),
        slot: std::ptr::null_mut(),
        slot2: std::ptr::null_mut(),
    };
    // SAFETY: the OIDs are of this extension's tables and of their btree indexes whose first
    // columns are text (user_id, embedding_model, and a pack's part), so the scan keys compare
    // text with text equality under the index's collations. The snapshot is the active one of
    // the running statement. Every pointer is released by `Scan`.
    unsafe {
        s.rel = pg_sys::table_open(rel_oid, lock);
        s.index = pg_sys::index_open(index_oid, lock);
        let collations = (*s.index).rd_indcollation;
        let mut scankeys: Vec<pg_sys::ScanKeyData> = vec![std::mem::zeroed(); keys.len()];
        let mut datums = Vec::with_capacity(keys.len());
        for k in keys {
            datums.push(k.into_datum().ok_or_else(|| missing("a key"))?);
        }
        let nkeys = datums.len() as i32;
        for (i, datum) in datums.into_iter().enumerate() {
            pg_sys::ScanKeyEntryInitialize(
                &mut scankeys[i],
                0,
                (i + 1) as pg_sys::AttrNumber,
                pg_sys::BTEqualStrategyNumber as pg_sys::StrategyNumber,
                pg_sys::Oid::INVALID,
                *collations.add(i),
                pg_sys::Oid::from(pg_sys::F_TEXTEQ),
                datum,
            );
        }
        s.scan = pg_sys::index_beginscan(s.rel, s.index, statement_snapshot(), nkeys, 0);
        (*s.scan).xs_want_itup = want_itup;
        pg_sys::index_rescan(s.scan, scankeys.as_mut_ptr(), nkeys, std::ptr::null_mut(), 0);
    }
    Ok(s)
}

/// Counts the index entries of (user, model), up to `limit`, without reading the table: a cheap
/// size estimate (entries of rows deleted but not yet vacuumed count too).
pub fn count_entries(user: &str, model: &str, limit: usize) -> Result<usize> {
    let (rel_oid, index_oid) = relations(user)?;
    // SAFETY: called from a SQL function; the scan is released by `Scan`.
    let s = unsafe { begin(rel_oid, index_oid, user, model)? };
    let mut n = 0;
    // SAFETY: `s.scan` is a positioned index scan; index_getnext_tid returns NULL at the end.
    while n < limit && !unsafe { pg_sys::index_getnext_tid(s.scan, pg_sys::ScanDirection::ForwardScanDirection) }.is_null() {
        n += 1;
    }
    drop(s);
    Ok(n)
}

/// Calls `f` for every active memory of `user` and `model` that has not expired at `now` and,
/// when `kinds` is given, is of one of those kinds, until `f` returns `false`. Returns whether
/// the scan ran to the end.
pub fn for_each_candidate(
    user: &str,
    model: &str,
    kinds: Option<&[String]>,
    now: i64,
    f: impl FnMut(&Candidate) -> Result<bool>,
) -> Result<bool> {
    scan_active(user, model, kinds, now, Visible::Live, f)
}

/// Like [`for_each_candidate`], but expired memories are passed too (marked `expired`).
pub fn for_each_active(user: &str, model: &str, now: i64, f: impl FnMut(&Candidate) -> Result<bool>) -> Result<bool> {
    scan_active(user, model, None, now, Visible::Active, f)
}

fn scan_active(
    user: &str,
    model: &str,
    kinds: Option<&[String]>,
    now: i64,
    visible: Visible,
    mut f: impl FnMut(&Candidate) -> Result<bool>,
) -> Result<bool> {
    let (rel_oid, index_oid) = relations(user)?;
    let cols = Columns::of(rel_oid)?;
    let max_attr = cols.max();
    // SAFETY: called from a SQL function, inside its transaction and snapshot; every pointer is
    // released by `Scan`.
    let mut s = unsafe { begin(rel_oid, index_oid, user, model)? };
    // SAFETY: the slots are made for the opened table and released by `Scan`; a candidate is made
    // only from a slot that holds a tuple, and used only while it does.
    //
    // The rows are handed to `f` one behind the scan: row n is fetched into one slot and its
    // embedding prefetched into the CPU cache, then row n-1, still pinned in the other slot, is
    // passed to `f`. The embedding of a candidate is then mostly in cache when it is compared,
    // instead of each row stalling on its own page's memory.
    unsafe {
        s.slot = pg_sys::table_slot_create(s.rel, std::ptr::null_mut());
        s.slot2 = pg_sys::table_slot_create(s.rel, std::ptr::null_mut());
        let slots = [s.slot, s.slot2];
        let mut pending: Option<(Candidate, usize)> = None;

        let mut read = 0u32;
        loop {
            // Fetch into the slot that does not hold the pending candidate.
            let which = match pending {
                Some((_, 0)) => 1,
                _ => 0,
            };
            let slot = slots[which];
            if !pg_sys::index_getnext_slot(s.scan, pg_sys::ScanDirection::ForwardScanDirection, slot) {
                break;
            }
            // A cancel or statement_timeout stops a scan of a large user within a few thousand rows.
            read = read.wrapping_add(1);
            if read.is_multiple_of(1024) {
                pgrx::check_for_interrupts!();
            }
            let Some(c) = candidate(slot, &cols, max_attr, now, visible, kinds) else {
                continue;
            };
            if let Some((previous, _)) = pending.replace((c, which)) {
                if !f(&previous)? {
                    drop(s);
                    return Ok(false);
                }
            }
        }
        if let Some((last, _)) = pending.take() {
            if !f(&last)? {
                drop(s);
                return Ok(false);
            }
        }
    }
    drop(s);
    Ok(true)
}

impl Columns {
    fn of(rel_oid: pg_sys::Oid) -> Result<Columns> {
        Ok(Columns {
            id: attnum(rel_oid, c"id")?,
            content: attnum(rel_oid, c"content")?,
            subject: attnum(rel_oid, c"subject")?,
            predicate: attnum(rel_oid, c"predicate")?,
            object: attnum(rel_oid, c"object")?,
            object_key: attnum(rel_oid, c"object_key")?,
            task_id: attnum(rel_oid, c"task_id")?,
            kind: attnum(rel_oid, c"kind")?,
            emb: attnum(rel_oid, c"emb")?,
            emb_windows: attnum(rel_oid, c"emb_windows")?,
            importance: attnum(rel_oid, c"importance")?,
            active: attnum(rel_oid, c"active")?,
            valid_until: attnum(rel_oid, c"valid_until")?,
            expires_at: attnum(rel_oid, c"expires_at")?,
            last_hit_at: attnum(rel_oid, c"last_hit_at")?,
            created_at: attnum(rel_oid, c"created_at")?,
            protected: attnum(rel_oid, c"protected")?,
            archived_at: attnum(rel_oid, c"archived_at")?,
            hit_count: attnum(rel_oid, c"hit_count")?,
        })
    }
}

/// Which row versions make candidates.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Visible {
    /// Active memories that have not expired (`expires_at`, `valid_until`) at `now`.
    Live,
    /// Active memories, expired ones marked [`Candidate::expired`].
    Active,
    /// Any version, active or retired: the caller chose the rows (recall `as_of` a past moment).
    Any,
}

/// The candidate in `slot`, when its visible version is one that `visible` admits, and of one of
/// `kinds`.
///
/// # Safety
/// `slot` must hold a tuple of `agent_memory.memories` described by `cols`; the candidate is
/// valid only while the slot holds it.
unsafe fn candidate(
    slot: *mut pg_sys::TupleTableSlot,
    cols: &Columns,
    max_attr: i32,
    now: i64,
    visible: Visible,
    kinds: Option<&[String]>,
) -> Option<Candidate> {
    // SAFETY: the caller's promise; attributes are read only up to `max_attr`, after
    // slot_getsomeattrs.
    unsafe {
        if ((*slot).tts_nvalid as i32) < max_attr {
            pg_sys::slot_getsomeattrs_int(slot, max_attr);
        }
        let values = (*slot).tts_values;
        let nulls = (*slot).tts_isnull;
        let get = |attno: usize| -> Option<pg_sys::Datum> {
            if *nulls.add(attno - 1) {
                None
            } else {
                Some(*values.add(attno - 1))
            }
        };
        // The index holds active rows only, but the visible version decides.
        if visible != Visible::Any && get(cols.active).map(|d| d.value() == 0).unwrap_or(true) {
            return None;
        }
        let live = |attno: usize| get(attno).is_none_or(|d| (d.value() as i64) > now);
        let expired = !live(cols.expires_at) || !live(cols.valid_until);
        if expired && visible == Visible::Live {
            return None;
        }
        // A memory not yet embedded is a candidate of the keyword channel only.
        let emb = get(cols.emb);
        let (Some(id), Some(kind), Some(content)) = (get(cols.id), get(cols.kind), get(cols.content)) else {
            return None;
        };
        let kind_name: &str = <&str as pgrx::FromDatum>::from_datum(kind, false).unwrap_or("");
        if let Some(ks) = kinds {
            if !ks.iter().any(|k| k == kind_name) {
                return None;
            }
        }
        if let Some(e) = emb {
            prefetch_varlena(e);
        }
        Some(Candidate {
            id: id.value() as i64,
            importance: get(cols.importance).map(|d| f32::from_bits(d.value() as u32)).unwrap_or(0.0),
            last_hit: get(cols.last_hit_at).map(|d| d.value() as i64).unwrap_or(now),
            episodic: kind_name == "episodic",
            created: get(cols.created_at).map(|d| d.value() as i64).unwrap_or(now),
            protected: get(cols.protected).map(|d| d.value() != 0).unwrap_or(false),
            archived: get(cols.archived_at).is_some(),
            hit_count: get(cols.hit_count).map(|d| d.value() as i32).unwrap_or(0),
            expired,
            tid: (*slot).tts_tid,
            emb,
            emb_windows: get(cols.emb_windows),
            content,
            kind,
            subject: get(cols.subject),
            predicate: get(cols.predicate),
            object: get(cols.object),
            object_key: get(cols.object_key),
            procedural: kind_name == "procedural",
            task_id: get(cols.task_id),
        })
    }
}

/// Asks the CPU to bring a varlena (an embedding in a pinned heap page) into its cache, up to
/// 8 kB, without waiting for it.
///
/// # Safety
/// `datum` must point to a varlena that stays readable (its buffer pinned).
unsafe fn prefetch_varlena(datum: pg_sys::Datum) {
    let p = datum.cast_mut_ptr::<u8>() as *const u8;
    // SAFETY: the header of a varlena is readable (the caller's promise).
    let first = unsafe { p.read() };
    // A 4-byte header (the only kind that holds a whole embedding) has its low bits 00.
    // SAFETY: as above, a 4-byte header is readable whole.
    let len = if first & 0x03 == 0 { (unsafe { p.cast::<u32>().read_unaligned() } >> 2) as usize } else { 64 };
    prefetch_range(p, 64, len.min(8192));
}

/// Asks the CPU to bring bytes `from..to` after `p` into its cache, a line (64 bytes) at a time,
/// without waiting for them: a hint, which reads nothing the program sees and never faults,
/// whatever the address (nothing is done off x86-64).
#[inline]
fn prefetch_range(p: *const u8, from: usize, to: usize) {
    #[cfg(target_arch = "x86_64")]
    for at in (from..to).step_by(64) {
        // SAFETY: a prefetch cannot fault; the address is only computed, never dereferenced.
        unsafe { std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(p.wrapping_add(at) as *const i8) };
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = (p, from, to);
}

/// Runs `f` with an active snapshot that sees every change this transaction has made so far,
/// as each SPI statement does. A function that writes through SPI and then scans with
/// [`for_each_candidate`] needs it: the calling statement's snapshot predates those writes.
pub fn with_fresh_snapshot<R>(f: impl FnOnce() -> R) -> R {
    struct Pop;
    impl Drop for Pop {
        fn drop(&mut self) {
            if !std::thread::panicking() {
                // SAFETY: pops the snapshot pushed below; on an error the transaction abort
                // unwinds the snapshot stack instead.
                unsafe { pg_sys::PopActiveSnapshot() };
            }
        }
    }
    // SAFETY: inside a transaction (a SQL call or a worker's unit of work): make earlier
    // commands visible, then push a snapshot with the current command id, as SPI does.
    unsafe {
        pg_sys::CommandCounterIncrement();
        pg_sys::PushActiveSnapshot(pg_sys::GetTransactionSnapshot());
        pg_sys::UpdateActiveSnapshotCommandId();
    }
    let _pop = Pop;
    f()
}

/// The layout of a btree page's special space (`BTPageOpaqueData` of `access/nbtree.h`, the same
/// since PostgreSQL 14).
#[repr(C)]
struct BtPageOpaque {
    prev: u32,
    next: u32,
    level: u32,
    flags: u16,
    cycle_id: u16,
}

const BTP_LEAF: u16 = 1 << 0;
const BTP_DELETED: u16 = 1 << 2;
const BTP_HALF_DEAD: u16 = 1 << 4;
const BTREE_MAGIC: u32 = 0x053162;
/// `INDEX_ALT_TID_MASK` and `BT_IS_POSTING`: a leaf tuple whose TID field holds a posting list's
/// place and length.
const INDEX_ALT_TID: u16 = 0x2000;
const BT_IS_POSTING: u16 = 0x2000;
const BT_OFFSET_MASK: u16 = 0x0FFF;
/// Bytes of a page header (`SizeOfPageHeaderData`), where the line pointers start.
const PAGE_HEADER: usize = 24;

/// A btree page, share-locked and pinned until dropped.
struct LockedPage {
    buf: pg_sys::Buffer,
    page: *const u8,
}

impl LockedPage {
    /// # Safety
    /// `index` is an open btree index and `block` one of its blocks.
    unsafe fn read(index: pg_sys::Relation, block: u32) -> LockedPage {
        // SAFETY: the caller's promise; the buffer is pinned and share-locked until Drop.
        unsafe {
            let buf = pg_sys::ReadBuffer(index, block);
            pg_sys::LockBuffer(buf, pg_sys::BUFFER_LOCK_SHARE as i32);
            LockedPage { buf, page: pg_sys::BufferGetPage(buf) as *const u8 }
        }
    }

    fn header_u16(&self, at: usize) -> usize {
        // SAFETY: within the page header of a pinned, locked page.
        unsafe { self.page.add(at).cast::<u16>().read_unaligned() as usize }
    }

    /// The special space, when the page has one of a btree page's size.
    fn opaque(&self) -> Option<&BtPageOpaque> {
        let special = self.header_u16(16);
        if special + std::mem::size_of::<BtPageOpaque>() > pg_sys::BLCKSZ as usize {
            return None;
        }
        // SAFETY: within the page; the special space of a btree page is a BtPageOpaque.
        Some(unsafe { &*self.page.add(special).cast::<BtPageOpaque>() })
    }

    /// The number of line pointers.
    fn items(&self) -> usize {
        self.header_u16(12).saturating_sub(PAGE_HEADER) / 4
    }

    /// The tuple of line pointer `n` (from 1) and whether it is marked dead, when it is a normal
    /// or dead item within the page.
    fn item(&self, n: usize) -> Option<(pg_sys::IndexTuple, bool)> {
        // SAFETY: within the line pointer array of the page (n <= items()).
        let lp = unsafe { self.page.add(PAGE_HEADER + 4 * (n - 1)).cast::<u32>().read_unaligned() };
        let (off, flags, len) = ((lp & 0x7fff) as usize, (lp >> 15) & 3, (lp >> 17) as usize);
        if !(flags == 1 || flags == 3) || off < PAGE_HEADER || len < 8 || off + len > pg_sys::BLCKSZ as usize {
            return None;
        }
        // SAFETY: the item lies within the page.
        Some((unsafe { self.page.add(off) } as pg_sys::IndexTuple, flags == 3))
    }
}

impl Drop for LockedPage {
    fn drop(&mut self) {
        if !std::thread::panicking() {
            // SAFETY: locked and pinned in `read`; released once.
            unsafe { pg_sys::UnlockReleaseBuffer(self.buf) };
        }
    }
}

/// The first key column (a `text`) of an index tuple, read in place; `None` for a tuple with no
/// key (the first item of an internal page), a NULL, or a value not in line.
///
/// # Safety
/// `itup` must be a tuple of an index whose first column is `text`, within a pinned page.
unsafe fn first_text<'a>(itup: pg_sys::IndexTuple) -> Option<&'a [u8]> {
    // SAFETY: the caller's promise.
    unsafe {
        let (base, size) = key_area(itup)?;
        varlena_at(base, std::mem::size_of::<pg_sys::IndexTupleData>(), size).map(|(v, _)| v)
    }
}

/// An index tuple's bytes and size, when it has no NULL.
///
/// # Safety
/// `itup` must be an index tuple, readable.
unsafe fn key_area(itup: pg_sys::IndexTuple) -> Option<(*const u8, usize)> {
    // SAFETY: the caller's promise: the header is readable.
    let info = unsafe { (*itup).t_info } as u32;
    if info & pg_sys::INDEX_NULL_MASK != 0 {
        return None;
    }
    Some((itup as *const u8, (info & pg_sys::INDEX_SIZE_MASK) as usize))
}

/// The data of the in-line varlena at `off` of a tuple of `size` bytes (a 1-byte header is not
/// aligned, a 4-byte one is aligned to 4, its padding zero), and the offset after it; `None`
/// past the tuple's end, for a toast pointer or a compressed value.
///
/// # Safety
/// `base` must point to `size` readable bytes.
unsafe fn varlena_at<'a>(base: *const u8, mut off: usize, size: usize) -> Option<(&'a [u8], usize)> {
    // SAFETY: the caller's promise; every read is checked against `size` first.
    unsafe {
        if off >= size {
            return None;
        }
        if *base.add(off) == 0 {
            off = (off + 3) & !3;
        }
        if off + 4 > size {
            return None;
        }
        let p = base.add(off);
        let first = *p;
        let (len, header) = if first == 0x01 {
            return None; // a toast pointer: never in an index
        } else if first & 0x01 == 0x01 {
            ((first >> 1) as usize, 1)
        } else if first & 0x03 == 0x00 {
            ((p.cast::<u32>().read_unaligned() >> 2) as usize, 4)
        } else {
            return None; // compressed in line
        };
        if len < header || off + len > size {
            return None;
        }
        Some((std::slice::from_raw_parts(p.add(header), len - header), off + len))
    }
}

/// The heap places of a leaf tuple: its TID, or each TID of its posting list.
///
/// # Safety
/// `itup` must be a leaf tuple of a btree index, within a pinned page.
unsafe fn heap_tids(itup: pg_sys::IndexTuple, mut f: impl FnMut(pg_sys::ItemPointerData)) -> Option<()> {
    // SAFETY: the caller's promise; the posting list is checked to lie within the tuple.
    unsafe {
        let tid = (*itup).t_tid;
        let info = (*itup).t_info;
        if info & INDEX_ALT_TID != 0 {
            if tid.ip_posid & BT_IS_POSTING == 0 {
                return None; // a pivot tuple: never on a leaf's data items
            }
            let n = (tid.ip_posid & BT_OFFSET_MASK) as usize;
            let at = (((tid.ip_blkid.bi_hi as u32) << 16) | tid.ip_blkid.bi_lo as u32) as usize;
            let size = (info as u32 & pg_sys::INDEX_SIZE_MASK) as usize;
            let item = std::mem::size_of::<pg_sys::ItemPointerData>();
            if at + n * item > size {
                return None;
            }
            let list = (itup as *const u8).add(at).cast::<pg_sys::ItemPointerData>();
            for i in 0..n {
                f(list.add(i).read_unaligned());
            }
        } else {
            f(tid);
        }
        Some(())
    }
}

/// [`active_entries`] by walking the index's pages directly: down from the root to the first
/// leaf that can hold the user's entries, then right along the leaves, reading each entry in
/// place, as the btree's own forward scan does (each leaf read under its share lock, its right
/// sibling noted then, so a concurrent split neither hides nor repeats an entry). It saves the
/// btree's per-entry key check and copy. `None` when it cannot (an unexpected page or tuple, a
/// collation that is not bytewise): the caller then scans through the index AM. Entries marked
/// dead are left out, as the index AM's scan does outside recovery.
///
/// # Safety
/// `index` is `memories_user_model_active`, open; inside a transaction.
unsafe fn walk_leaves(
    index: pg_sys::Relation,
    user: &str,
    model: &str,
    limit: usize,
    out: &mut Vec<(i64, pg_sys::ItemPointerData)>,
) -> Option<bool> {
    // SAFETY: the caller's promise; pages are read under share locks through `LockedPage`.
    unsafe {
        let collation = *(*index).rd_indcollation;
        let cmp = |a: &[u8]| -> i32 {
            pg_sys::varstr_cmp(a.as_ptr() as *const _, a.len() as i32, user.as_ptr() as *const _, user.len() as i32, collation)
        };
        let skip_dead = !pg_sys::RecoveryInProgress();
        // The root: the metapage's fast root.
        let mut block = {
            let meta = LockedPage::read(index, 0);
            let m = meta.page.add(PAGE_HEADER).cast::<u32>();
            if m.read_unaligned() != BTREE_MAGIC {
                return None;
            }
            let fastroot = m.add(4).read_unaligned();
            if fastroot == 0 {
                return Some(true); // an empty index
            }
            fastroot
        };
        // Down to a leaf at or left of the user's first entry.
        let mut page = loop {
            pgrx::check_for_interrupts!();
            let page = LockedPage::read(index, block);
            let o = page.opaque()?;
            let rightmost = o.next == 0;
            if o.flags & (BTP_DELETED | BTP_HALF_DEAD) != 0 {
                if rightmost {
                    return None;
                }
                block = o.next;
                continue;
            }
            let first_data = if rightmost { 1 } else { 2 };
            // A split moved the user's entries right of this page: follow its right link.
            if !rightmost {
                let (hk, _) = page.item(1)?;
                if let Some(k) = first_text(hk) {
                    if cmp(k) < 0 {
                        block = o.next;
                        continue;
                    }
                }
            }
            if o.flags & BTP_LEAF != 0 {
                break page;
            }
            // The last downlink whose separator is below the user (the first has no key).
            let n = page.items();
            if n < first_data {
                return None;
            }
            let (mut lo, mut hi) = (first_data, n);
            while lo < hi {
                let mid = (lo + hi).div_ceil(2);
                let (t, _) = page.item(mid)?;
                let below = match first_text(t) {
                    Some(k) => cmp(k) < 0,
                    None => return None,
                };
                if below {
                    lo = mid;
                } else {
                    hi = mid - 1;
                }
            }
            let (t, _) = page.item(lo)?;
            let tid = (*t).t_tid;
            block = ((tid.ip_blkid.bi_hi as u32) << 16) | tid.ip_blkid.bi_lo as u32;
        };
        // Right along the leaves.
        let mut seen = false;
        let mut checked = false;
        loop {
            let o = page.opaque()?;
            let next = o.next;
            if o.flags & (BTP_DELETED | BTP_HALF_DEAD) == 0 {
                if o.flags & BTP_LEAF == 0 {
                    return None;
                }
                let first_data = if next == 0 { 1 } else { 2 };
                for n in first_data..=page.items() {
                    let (t, dead) = page.item(n)?;
                    let k = first_text(t)?;
                    if k == user.as_bytes() {
                        seen = true;
                        if dead && skip_dead {
                            continue;
                        }
                        let (m, id) = in_place(t)?;
                        // The in-place reading checked once against PostgreSQL's own deforming.
                        if !checked {
                            if deformed_key(t, (*index).rd_att) != Some((user.as_bytes(), m, id)) {
                                return None;
                            }
                            checked = true;
                        }
                        if m != model.as_bytes() {
                            continue;
                        }
                        let mut full = false;
                        heap_tids(t, |tid| {
                            if out.len() == limit {
                                full = true;
                            } else {
                                out.push((id, tid));
                            }
                        })?;
                        if full {
                            return Some(false);
                        }
                    } else if seen || cmp(k) > 0 {
                        return Some(true);
                    }
                }
                // The high key says whether the user's entries can go on.
                if next != 0 {
                    let (hk, _) = page.item(1)?;
                    if let Some(k) = first_text(hk) {
                        if k != user.as_bytes() && cmp(k) > 0 {
                            return Some(true);
                        }
                    }
                }
            }
            if next == 0 {
                return Some(true);
            }
            drop(page);
            pgrx::check_for_interrupts!();
            page = LockedPage::read(index, next);
        }
    }
}

/// Whether column `attno` of an index compares bytewise: its collation is deterministic (or it
/// has none), so that equality is byte equality.
fn column_bytewise(index_oid: pg_sys::Oid, attno: i16) -> bool {
    // SAFETY: syscache lookups of the index's column.
    unsafe {
        let (mut typ, mut typmod, mut collation) = (pg_sys::Oid::INVALID, 0, pg_sys::Oid::INVALID);
        pg_sys::get_atttypetypmodcoll(index_oid, attno, &mut typ, &mut typmod, &mut collation);
        collation == pg_sys::Oid::INVALID || pg_sys::get_collation_isdeterministic(collation)
    }
}

/// [`active_entries`] by reading the index's pages directly ([`walk_leaves`]), when both key
/// columns compare bytewise and no serializable transaction needs the index AM's predicate
/// locks; `None` when it does not apply or cannot read a page it meets.
pub(crate) fn entries_by_walk(
    user: &str,
    model: &str,
    limit: usize,
    out: &mut Vec<(i64, pg_sys::ItemPointerData)>,
) -> Result<Option<bool>> {
    let (_, index_oid) = relations(user)?;
    // SAFETY: reads a backend global.
    let serializable = unsafe { pg_sys::XactIsoLevel } == pg_sys::XACT_SERIALIZABLE as i32;
    if serializable || !column_bytewise(index_oid, 1) || !column_bytewise(index_oid, 2) {
        return Ok(None);
    }
    // SAFETY: the index is opened and closed with the lock a SELECT takes; `walk_leaves` gets
    // the open btree index of (user_id, embedding_model, id).
    unsafe {
        let lock = pg_sys::AccessShareLock as pg_sys::LOCKMODE;
        let index = pg_sys::index_open(index_oid, lock);
        let natts = (*(*index).rd_index).indnatts;
        let am_btree = (*index).rd_rel.as_ref().is_some_and(|r| r.relam == pg_sys::BTREE_AM_OID);
        let walked = if natts >= 3 && am_btree { walk_leaves(index, user, model, limit, out) } else { None };
        pg_sys::index_close(index, lock);
        Ok(walked)
    }
}

/// The entries of `memories_user_model_active` for (user, model): each memory's id and where
/// its row is, in id order, read from the index alone. Entries of row versions that are not
/// visible (deleted, or not yet committed) are included: the caller reads the row to know.
/// Stops, returning false, before the entry after `limit`.
pub fn active_entries(user: &str, model: &str, limit: usize, out: &mut Vec<(i64, pg_sys::ItemPointerData)>) -> Result<bool> {
    if let Some(complete) = entries_by_walk(user, model, limit, out)? {
        return Ok(complete);
    }
    out.clear();
    entries_by_scan(user, model, limit, out)
}

/// [`active_entries`] through the index AM's scan.
pub(crate) fn entries_by_scan(user: &str, model: &str, limit: usize, out: &mut Vec<(i64, pg_sys::ItemPointerData)>) -> Result<bool> {
    let (rel_oid, index_oid) = relations(user)?;
    // The scan's key is the user alone and the model is compared here, in place (when its
    // column compares bytewise): the index's own check of a second text key on every entry costs
    // more than the rest of the walk.
    let bytewise = column_bytewise(index_oid, 2);
    // SAFETY: called from a SQL function; the scan is released by `Scan`.
    let s = unsafe { begin_with(rel_oid, index_oid, user, (!bytewise).then_some(model), true)? };
    // SAFETY: index_getnext_tid returns NULL at the end; otherwise `xs_itup` is the index tuple
    // of the entry (asked for with xs_want_itup), described by `xs_itupdesc`, whose columns are
    // (user_id text, embedding_model text, id bigint).
    unsafe {
        if (*(*s.index).rd_index).indnatts < 3 {
            return Err(missing("index memories_user_model_active on (user_id, embedding_model, id)"));
        }
        let mut read = 0u32;
        // The model and id are read from the index tuple in place (see `in_place`), checked
        // against PostgreSQL's own deforming on the first tuple; if they ever differ, every tuple
        // is deformed.
        let mut in_place_ok: Option<bool> = None;
        loop {
            let tid = pg_sys::index_getnext_tid(s.scan, pg_sys::ScanDirection::ForwardScanDirection);
            if tid.is_null() {
                break;
            }
            read = read.wrapping_add(1);
            if read.is_multiple_of(4096) {
                pgrx::check_for_interrupts!();
            }
            let itup = (*s.scan).xs_itup;
            if itup.is_null() {
                return Err(missing("index tuple"));
            }
            let fast = if in_place_ok != Some(false) { in_place(itup) } else { None };
            let entry = match (fast, in_place_ok) {
                (Some((m, id)), Some(true)) => (m == model.as_bytes()).then_some(id),
                _ => deformed_key(itup, (*s.scan).xs_itupdesc).and_then(|(_, m, id)| {
                    if in_place_ok.is_none() {
                        in_place_ok = Some(fast == Some((m, id)));
                    }
                    (m == model.as_bytes()).then_some(id)
                }),
            };
            if let Some(id) = entry {
                if out.len() == limit {
                    drop(s);
                    return Ok(false);
                }
                out.push((id, *tid));
            }
        }
    }
    drop(s);
    Ok(true)
}

/// The (user_id, embedding_model, id) key of an index tuple of `memories_user_model_active`, as
/// PostgreSQL deforms it (the check of [`in_place`]); `None` when a column is NULL.
///
/// # Safety
/// `itup` must be an index tuple of that index described by `desc`, valid for `'a`.
unsafe fn deformed_key<'a>(itup: pg_sys::IndexTuple, desc: pg_sys::TupleDesc) -> Option<(&'a [u8], &'a [u8], i64)> {
    let mut values = [pg_sys::Datum::from(0usize); pg_sys::INDEX_MAX_KEYS as usize];
    let mut nulls = [false; pg_sys::INDEX_MAX_KEYS as usize];
    // SAFETY: the caller's promise; the text datums point into the tuple (or are detoasted into
    // the call's memory), valid for as long as it is.
    unsafe {
        pg_sys::index_deform_tuple(itup, desc, values.as_mut_ptr(), nulls.as_mut_ptr());
        if nulls[..3].iter().any(|n| *n) {
            return None;
        }
        Some((crate::vector::bytes_of(values[0]), crate::vector::bytes_of(values[1]), values[2].value() as i64))
    }
}

/// The model (its bytes) and the id of an index tuple of `memories_user_model_active`, read in
/// place: after the 8-byte header come the two text columns (varlenas: a 1-byte header is not
/// aligned, a 4-byte one is aligned to 4), then the id aligned to 8. `None` for a tuple with a
/// NULL or a compressed model.
///
/// # Safety
/// `itup` must be an index tuple of that index, valid for `'a`.
unsafe fn in_place<'a>(itup: pg_sys::IndexTuple) -> Option<(&'a [u8], i64)> {
    // SAFETY: the caller's promise: the tuple holds the header, two varlenas and an int8 within
    // its size, which is checked before anything past the header is read.
    unsafe {
        let (base, size) = key_area(itup)?;
        let (_, off) = varlena_at(base, std::mem::size_of::<pg_sys::IndexTupleData>(), size)?;
        let (model, off) = varlena_at(base, off, size)?;
        let off = (off + 7) & !7;
        if off + 8 > size {
            return None;
        }
        Some((model, base.add(off).cast::<i64>().read_unaligned()))
    }
}

/// Reads rows of `agent_memory.memories` by their place (from [`active_entries`]), following
/// HOT chains to the version the statement's snapshot sees.
pub struct Fetcher {
    rel: pg_sys::Relation,
    fetch: *mut pg_sys::IndexFetchTableData,
    slot: *mut pg_sys::TupleTableSlot,
    snapshot: pg_sys::Snapshot,
    cols: Columns,
    max_attr: i32,
    /// The visibility map's page last read by [`Fetcher::all_visible`] (pinned), and which
    /// page of the map it is.
    vm: pg_sys::Buffer,
    vm_block: u32,
}

/// Heap pages per page of the visibility map (two bits each), and where a map page's bits
/// start: as `visibilitymap.c` lays them out.
const VM_CONTENTS: usize = std::mem::offset_of!(pg_sys::PageHeaderData, pd_linp).next_multiple_of(8);
const VM_HEAP_BLOCKS_PER_PAGE: u32 = ((pg_sys::BLCKSZ as usize - VM_CONTENTS) * 4) as u32;

impl Fetcher {
    /// A fetcher of `user`'s rows.
    pub fn new(user: &str) -> Result<Fetcher> {
        let (rel_oid, _) = relations(user)?;
        let cols = Columns::of(rel_oid)?;
        let max_attr = cols.max();
        // SAFETY: inside a SQL call's transaction; the table is opened with the lock a SELECT
        // takes, and everything is released by Drop.
        unsafe {
            let rel = pg_sys::table_open(rel_oid, pg_sys::AccessShareLock as pg_sys::LOCKMODE);
            let snapshot = statement_snapshot();
            let mut f = Fetcher {
                rel,
                fetch: std::ptr::null_mut(),
                slot: std::ptr::null_mut(),
                snapshot,
                cols,
                max_attr,
                vm: pg_sys::InvalidBuffer as pg_sys::Buffer,
                vm_block: u32::MAX,
            };
            f.fetch = pg_sys::table_index_fetch_begin(rel);
            f.slot = pg_sys::table_slot_create(rel, std::ptr::null_mut());
            Ok(f)
        }
    }

    /// Calls `f` with the candidate at `tid`, when the version this statement sees there is an
    /// active memory (live, of one of `kinds`); returns what `f` returned, or `None`.
    pub fn fetch<R>(
        &mut self,
        tid: pg_sys::ItemPointerData,
        kinds: Option<&[String]>,
        now: i64,
        f: impl FnOnce(&Candidate) -> Result<R>,
    ) -> Result<Option<R>> {
        self.fetch_as(tid, kinds, now, Visible::Live, f)
    }

    /// Calls `f` with the candidate at exactly `tid` (one of `kinds`), when this statement sees
    /// that version, whatever it is: active or retired, expired or not. For rows that a query
    /// chose by their `ctid` (recall `as_of` a past moment).
    pub fn fetch_version<R>(
        &mut self,
        tid: pg_sys::ItemPointerData,
        kinds: Option<&[String]>,
        now: i64,
        f: impl FnOnce(&Candidate) -> Result<R>,
    ) -> Result<Option<R>> {
        self.fetch_as(tid, kinds, now, Visible::Any, f)
    }

    fn fetch_as<R>(
        &mut self,
        tid: pg_sys::ItemPointerData,
        kinds: Option<&[String]>,
        now: i64,
        visible: Visible,
        f: impl FnOnce(&Candidate) -> Result<R>,
    ) -> Result<Option<R>> {
        let mut tid = tid;
        let mut call_again = false;
        let mut all_dead = false;
        // SAFETY: `fetch` and `slot` belong to the open table; the slot holds the tuple (its buffer
        // pinned) until the next fetch or the end, and the candidate lives only during `f`.
        unsafe {
            let found = if visible == Visible::Any {
                // The version at exactly `tid` (a row a query chose: it may be a heap-only tuple,
                // where an index fetch, which starts HOT chains at their root, finds nothing).
                let am = (*self.rel).rd_tableam;
                match (*am).tuple_fetch_row_version {
                    Some(fetch_row_version) => fetch_row_version(self.rel, &mut tid, self.snapshot, self.slot),
                    None => false,
                }
            } else {
                pg_sys::table_index_fetch_tuple(self.fetch, &mut tid, self.snapshot, self.slot, &mut call_again, &mut all_dead)
            };
            if !found {
                return Ok(None);
            }
            match candidate(self.slot, &self.cols, self.max_attr, now, visible, kinds) {
                Some(c) => f(&c).map(Some),
                None => Ok(None),
            }
        }
    }

    /// Whether the visibility map says every row version on the heap page of `tid` is visible
    /// to every transaction, as an index-only scan asks: then an index entry pointing there
    /// points to a visible version (a vacuum removes index entries before it sets the bit, and
    /// any change to the page clears it).
    pub fn all_visible(&mut self, tid: &pg_sys::ItemPointerData) -> bool {
        let block = ((tid.ip_blkid.bi_hi as u32) << 16) | tid.ip_blkid.bi_lo as u32;
        let map_block = block / VM_HEAP_BLOCKS_PER_PAGE;
        if map_block == self.vm_block {
            // The map's page is pinned: its two bits are read in place, without a lock, as
            // `visibilitymap_get_status` reads them (a byte is read whole).
            let at = (block % VM_HEAP_BLOCKS_PER_PAGE) as usize;
            // SAFETY: `vm` is pinned (it was read for `vm_block`), and the byte is inside its page.
            let byte = unsafe { std::ptr::read_volatile((pg_sys::BufferGetPage(self.vm) as *const u8).add(VM_CONTENTS + at / 4)) };
            return (byte >> (2 * (at % 4))) as u32 & pg_sys::VISIBILITYMAP_ALL_VISIBLE != 0;
        }
        // SAFETY: the table is open; the map's page stays pinned in `vm` until the next call or
        // the end (Drop releases it).
        let status = unsafe { pg_sys::visibilitymap_get_status(self.rel, block, &mut self.vm) };
        // A map too short for the block leaves `vm` unpinned (and the page not all-visible).
        self.vm_block = if self.vm != pg_sys::InvalidBuffer as pg_sys::Buffer { map_block } else { u32::MAX };
        status as u32 & pg_sys::VISIBILITYMAP_ALL_VISIBLE != 0
    }
}

impl Drop for Fetcher {
    fn drop(&mut self) {
        if std::thread::panicking() {
            return;
        }
        // SAFETY: each pointer was made in `new` and is released once, in reverse order.
        unsafe {
            if self.vm != pg_sys::InvalidBuffer as pg_sys::Buffer {
                pg_sys::ReleaseBuffer(self.vm);
            }
            if !self.slot.is_null() {
                pg_sys::ExecDropSingleTupleTableSlot(self.slot);
            }
            if !self.fetch.is_null() {
                pg_sys::table_index_fetch_end(self.fetch);
            }
            pg_sys::table_close(self.rel, pg_sys::AccessShareLock as pg_sys::LOCKMODE);
        }
    }
}

/// The packs of one user, model and part (`embeddings` or `words`), in pack order.
///
/// The cursor reads one pack ahead: the pack handed out stays pinned in one slot while the next
/// one is fetched into the other, so the caller can pull the next pack's page towards the CPU
/// ([`Ahead`]) while it works on this one. A pack is a page of its own, somewhere in shared
/// buffers, and the processor's own prefetching stops at the page's edge.
pub struct PackCursor {
    scan: Scan,
    payload: usize,
    read: u32,
    started: bool,
    /// The pack fetched ahead, and whether it is in `slot2` (else in `slot`).
    ahead: Option<(*const u8, usize)>,
    ahead_in_second: bool,
}

/// The next pack's bytes, for [`Ahead::prefetch`]: valid until the cursor moves twice.
#[derive(Clone, Copy)]
pub struct Ahead(Option<(*const u8, usize)>);

impl Ahead {
    /// Asks the processor to bring part `i` of `n` of the next pack into its caches (a hint: it
    /// never faults and changes nothing). Spread over the work on the current pack, so that the
    /// next one's lines arrive a few at a time.
    #[inline]
    pub fn prefetch(&self, i: usize, n: usize) {
        let Some((p, len)) = self.0 else {
            return;
        };
        if n == 0 || i >= n {
            return;
        }
        prefetch_range(p, len * i / n, len * (i + 1) / n);
    }

    /// The next pack's bytes (for tests: the cursor's own use is [`Ahead::prefetch`]).
    #[cfg(any(test, feature = "pg_test"))]
    pub fn bytes(&self) -> Option<&[u8]> {
        // SAFETY: read right after the cursor moved, while the next pack is pinned.
        self.0.map(|(p, len)| unsafe { std::slice::from_raw_parts(p, len) })
    }
}

impl PackCursor {
    /// A cursor over the packs of (user, model, part); `None` when the schema has no packs.
    pub fn open(user: &str, model: &str, part: &str) -> Result<Option<PackCursor>> {
        let Some(crate::placement::Packs { packs, packs_pkey, .. }) = crate::placement::packs_of_user(user)? else {
            return Ok(None);
        };
        let payload = attnum(packs, c"payload")?;
        // SAFETY: called from a SQL function; the scan and slots are released by `Scan`.
        unsafe {
            let mut scan = begin_keys(packs, packs_pkey, &[user, model, part], false)?;
            scan.slot = pg_sys::table_slot_create(scan.rel, std::ptr::null_mut());
            scan.slot2 = pg_sys::table_slot_create(scan.rel, std::ptr::null_mut());
            Ok(Some(PackCursor { scan, payload, read: 0, started: false, ahead: None, ahead_in_second: false }))
        }
    }

    /// Fetches the next pack into `slot` (or `slot2`), replacing what that slot held.
    fn fetch(&mut self, second: bool) -> Option<(*const u8, usize)> {
        // SAFETY: the scan is positioned; the payload points into the slot's tuple, whose buffer
        // the slot keeps pinned until the slot is reused (the other slot's pin is untouched).
        unsafe {
            let s = &mut self.scan;
            let slot = if second { s.slot2 } else { s.slot };
            while pg_sys::index_getnext_slot(s.scan, pg_sys::ScanDirection::ForwardScanDirection, slot) {
                self.read = self.read.wrapping_add(1);
                if self.read.is_multiple_of(256) {
                    pgrx::check_for_interrupts!();
                }
                pg_sys::slot_getsomeattrs_int(slot, self.payload as i32);
                if *(*slot).tts_isnull.add(self.payload - 1) {
                    continue;
                }
                let b = crate::vector::bytes_of(*(*slot).tts_values.add(self.payload - 1));
                return Some((b.as_ptr(), b.len()));
            }
            None
        }
    }

    /// The next pack's payload, valid until the next call, and the one after it for
    /// [`Ahead::prefetch`].
    pub fn next_with_ahead(&mut self) -> Option<(&[u8], Ahead)> {
        if !self.started {
            self.started = true;
            self.ahead = self.fetch(false);
            self.ahead_in_second = false;
        }
        let (p, len) = self.ahead.take()?;
        // The current pack stays pinned in its slot; the next goes into the other one.
        let other = !self.ahead_in_second;
        self.ahead = self.fetch(other);
        self.ahead_in_second = other;
        // SAFETY: `p` points to `len` bytes of a payload pinned by the slot that holds the
        // current pack, which the cursor does not touch until the call after next; the borrow
        // of `self` ends before that.
        let bytes = unsafe { std::slice::from_raw_parts(p, len) };
        Some((bytes, Ahead(self.ahead)))
    }

    /// The next pack's payload, valid until the next call.
    pub fn next_pack(&mut self) -> Option<&[u8]> {
        self.next_with_ahead().map(|(b, _)| b)
    }
}

/// The ids of (user, model) whose packed copy may be out of date (`memory_pack_stale`).
pub fn stale_ids(user: &str, model: &str) -> Result<Vec<i64>> {
    let Some(crate::placement::Packs { stale, stale_index, .. }) = crate::placement::packs_of_user(user)? else {
        return Ok(Vec::new());
    };
    let id = attnum(stale, c"id")?;
    let mut out = Vec::new();
    // SAFETY: as in `for_each_pack`.
    unsafe {
        let mut s = begin(stale, stale_index, user, model)?;
        s.slot = pg_sys::table_slot_create(s.rel, std::ptr::null_mut());
        while pg_sys::index_getnext_slot(s.scan, pg_sys::ScanDirection::ForwardScanDirection, s.slot) {
            if out.len().is_multiple_of(4096) {
                pgrx::check_for_interrupts!();
            }
            pg_sys::slot_getsomeattrs_int(s.slot, id as i32);
            if !*(*s.slot).tts_isnull.add(id - 1) {
                out.push((*(*s.slot).tts_values.add(id - 1)).value() as i64);
            }
        }
        drop(s);
    }
    out.sort_unstable();
    out.dedup();
    Ok(out)
}
