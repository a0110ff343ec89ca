//! Recall's packed path: ranking a user's memories through their packs (built by
//! `api::pack`), exactly.
//!
//! Recall:
//!
//! 1. reads the ids of the user's active memories from the index `memories_user_model_active`
//!    (the index alone, no rows);
//! 2. reads the packs, and bounds the score of every memory a pack holds and that is not marked
//!    stale (`memory_pack_stale`, kept by triggers on the table); the next pack's page is brought
//!    into the processor's caches while the current one's entries are bounded;
//! 3. reads exactly (the visible row, with every filter) each memory no pack holds, then the
//!    packed ones from the highest bound down, until the next bound is below the score the
//!    ranking must beat.
//!
//! A memory left unread cannot be in the result, so results are exact, with or without packs.
//!
//! Beside each pack of embeddings, a words row holds the same memories' keyword facts, so a call
//! with `query_text` counts BM25 from the packs too, for every memory it can prove unchanged
//! (see [`rank_packed`]), and reads the rows of the others.

use std::cell::RefCell;

use pgrx::prelude::*;

use agent_memory_core::pack::{self as core_pack, Query};
use agent_memory_core::scratch::Kept;

use super::VectorRanker;
use crate::error::Result;
use crate::gucs;

/// The two parts of a pack, rows of `memory_packs`: the embeddings, and the words of the same
/// memories (read only when recall counts words).
pub(crate) const PART_EMBEDDINGS: &str = "embeddings";
pub(crate) const PART_WORDS: &str = "words";

/// The code of a kind of memory in a pack's keyword facts.
pub(crate) fn kind_code(kind: &str) -> u8 {
    match kind {
        "semantic" => 0,
        "episodic" => 1,
        "procedural" => 2,
        _ => u8::MAX,
    }
}

/// The keyword side of a packed hybrid or keyword call.
pub(crate) struct KeywordSide<'a> {
    /// The keyword statistics: counted from the packs for the memories they hold, from the
    /// rows for the others.
    pub scan: &'a mut agent_memory_core::keyword::KeywordScan,
    /// The exact similarity of every memory read (hybrid results show it); `None` for a
    /// keyword-only call. A memory counted from its pack is not in it: a hybrid result among them has its
    /// similarity read afterwards ([`similarities_of`]), from its place in [`Packed::entries`].
    pub similarities: Option<&'a mut Vec<(i64, f32)>>,
}

/// What [`rank_packed`] did: how many rows it read, and the user's index entries (id and place of
/// each active memory, in id order), where the results' rows are found again.
pub(crate) struct Packed {
    pub read: usize,
    pub entries: Kept<(i64, pg_sys::ItemPointerData)>,
}

thread_local! {
    /// The arrays of [`rank_packed`], one entry per memory of the user, kept by the backend for
    /// the next call ([`agent_memory_core::scratch`]).
    static ENTRIES: RefCell<Vec<(i64, pg_sys::ItemPointerData)>> = const { RefCell::new(Vec::new()) };
    static BOUNDED: RefCell<Vec<(f64, u32, u32)>> = const { RefCell::new(Vec::new()) };
    static COVERED: RefCell<Vec<bool>> = const { RefCell::new(Vec::new()) };
}

/// Ranks a user's memories through their packs. Returns `None` (nothing done) when the user has
/// no pack for the model.
///
/// With `keyword`, the keyword channel is counted too, and a packed memory is counted from its
/// pack only when nothing about it can differ from the row this statement sees: the pack has its
/// terms (made with the call's tokenizer options), it is not marked stale (the triggers mark a
/// change of the text, kind, archiving or validity), the index has one entry for it, and the
/// visibility map says that entry's heap page is visible to every transaction (so the entry's
/// row version is the one the statement sees). Every other memory's row is read, as without
/// packs. BM25's statistics range over every candidate, so each one is counted exactly once,
/// from its pack or from its row. An empty `q` ranks by keywords alone.
#[allow(clippy::too_many_arguments)]
pub(crate) fn rank_packed(
    user: &str,
    model: &str,
    kinds: Option<&[String]>,
    include_archived: bool,
    q: &[f32],
    min_similarity: f64,
    now: i64,
    ranker: &mut VectorRanker,
    mut keyword: Option<&mut KeywordSide<'_>>,
) -> Result<Option<Packed>> {
    let vector = !q.is_empty();
    if !vector {
        if let Some(kw) = keyword.as_mut() {
            return count_words(user, model, kinds, include_archived, now, kw);
        }
    }
    let mut entries = Kept::take(&ENTRIES);
    let query = Query::new(q);
    // (upper bound of the score, first entry, end of its entries): the packed memories.
    let mut bounded = Kept::take(&BOUNDED);
    let mut next = 0usize;
    let Some(mut packs) = crate::scan::PackCursor::open(user, model, PART_EMBEDDINGS)? else {
        return Ok(None);
    };
    let Some(first) = packs.next_with_ahead() else {
        return Ok(None);
    };
    // Memory per call grows with the user's memories (32 bytes each): above packed_limit, the
    // row-by-row path (or the approximate one) takes over.
    if !crate::scan::active_entries(user, model, gucs::packed_limit(), &mut entries)? {
        return Ok(None);
    }
    let mut covered = Kept::take(&COVERED);
    covered.resize(entries.len(), false);
    // Sized once: these grow with the user's memories, and a vector doubling its way up copies
    // them again (kept arrays come with the capacity of the backend's last call).
    bounded.reserve(if vector { entries.len() } else { 0 });
    if let Some(kw) = keyword.as_mut() {
        kw.scan.reserve(entries.len());
    }
    let stale = crate::scan::stale_ids(user, model)?;
    let mut fetcher = crate::scan::Fetcher::new(user)?;
    let kind_codes: Option<Vec<u8>> = kinds.map(|ks| ks.iter().map(|k| kind_code(k)).collect());
    // The words packs hold the same memories in the same order, more of them to a pack.
    let mut words = match keyword {
        Some(_) => crate::scan::PackCursor::open(user, model, PART_WORDS)?,
        None => None,
    };
    let mut reader = core_pack::WordsReader::default();
    if words.is_none() {
        reader.finish();
    }
    let mut bytes = Some(first);
    while let Some((b, ahead)) = bytes.take() {
        // A pack of another format: its memories stay uncovered and are read exactly.
        if let Some(pack) = core_pack::Pack::parse(b) {
            if vector && pack.dims() != q.len() {
                return Err(super::dimension_mismatch(q.len(), model, pack.dims()));
            }
            for i in 0..pack.len() {
                // The next pack's page comes in while this one's entries are bounded.
                ahead.prefetch(i, pack.len());
                let id = pack.id(i);
                let (start, end) = locate(&entries, &mut next, id);
                if start == end || stale.binary_search(&id).is_ok() {
                    continue;
                }
                if let Some(kw) = keyword.as_mut() {
                    let found = loop {
                        match reader.lookup(id) {
                            core_pack::Lookup::NeedPack => match words.as_mut().and_then(|w| w.next_pack()) {
                                Some(b) => reader.load(b, kw.scan.query_terms(), kw.scan.options()),
                                None => reader.finish(),
                            },
                            core_pack::Lookup::Found(at) => break Some(at),
                            core_pack::Lookup::Missing => break None,
                        }
                    };
                    // Not countable from the pack: the row is read, for both channels.
                    let Some(at) = found.filter(|_| end == start + 1 && fetcher.all_visible(&entries[start].1)) else {
                        continue;
                    };
                    covered[start] = true;
                    let f = reader.facts_at(at);
                    if !is_candidate(&f, kind_codes.as_deref(), include_archived, now) {
                        // Not a candidate of this call, in either channel.
                        continue;
                    }
                    kw.scan.add_counted(id, f.len, reader.hits_at(at));
                }
                covered[start..end].iter_mut().for_each(|c| *c = true);
                if !vector {
                    continue;
                }
                let e = pack.entry(i);
                let (lo, hi) = query.bounds(&e);
                if hi < min_similarity {
                    continue;
                }
                let (f_lo, f_hi) = ranker.factor_range(e.importance as f64);
                let ub = core_pack::product_upper_bound(lo, hi, f_lo, f_hi);
                // A relative allowance for the product's own rounding.
                bounded.push((ub + ub.abs() * 1e-9, start as u32, end as u32));
            }
        }
        bytes = packs.next_with_ahead();
    }
    drop(words);
    drop(packs);
    let mut scratch = Vec::new();
    let mut read = 0usize;
    // Reads one row: `full` for a memory no pack counted (both channels), else for the vector
    // ranking only.
    let mut offer = |fetcher: &mut crate::scan::Fetcher,
                     tid,
                     ranker: &mut VectorRanker,
                     full: bool,
                     keyword: &mut Option<&mut KeywordSide<'_>>|
     -> Result<()> {
        read += 1;
        if read.is_multiple_of(1024) {
            pgrx::check_for_interrupts!();
        }
        fetcher.fetch(tid, kinds, now, |c| {
            if c.archived && !include_archived {
                return Ok(());
            }
            if vector {
                let similarity = ranker.offer_candidate(c, q, model, min_similarity, now, &mut scratch)?;
                if let (Some(s), Some(sims)) = (similarity, keyword.as_mut().and_then(|k| k.similarities.as_mut())) {
                    sims.push((c.id, s as f32));
                }
            }
            if full {
                if let Some(kw) = keyword.as_mut() {
                    kw.scan.add(c.id, &c.content());
                }
            }
            Ok(())
        })?;
        Ok(())
    };
    for (i, (_, tid)) in entries.iter().enumerate() {
        if !covered[i] {
            offer(&mut fetcher, *tid, ranker, true, &mut keyword)?;
        }
    }
    // Highest bound first. Most calls stop after a few dozen, so the bounds are ordered a slice
    // at a time: the best `chunk` selected and sorted, then the next (twice as many), and so on.
    let by_bound = |a: &(f64, u32, u32), b: &(f64, u32, u32)| b.0.total_cmp(&a.0);
    let mut rest = &mut bounded[..];
    let mut chunk = 64;
    'ranked: while !rest.is_empty() {
        let take = rest.len().min(chunk);
        if take < rest.len() {
            rest.select_nth_unstable_by(take - 1, by_bound);
        }
        let (head, tail) = rest.split_at_mut(take);
        head.sort_unstable_by(by_bound);
        for &(ub, start, end) in head.iter() {
            if ranker.threshold().is_some_and(|t| ub < t) {
                break 'ranked;
            }
            for (_, tid) in &entries[start as usize..end as usize] {
                offer(&mut fetcher, *tid, ranker, false, &mut keyword)?;
            }
        }
        rest = tail;
        chunk *= 2;
    }
    drop(fetcher);
    debug1!("agent_memory: recall read {read} of {} memories of the user exactly; packs ruled out the rest", entries.len());
    Ok(Some(Packed { read, entries }))
}

/// The entries of memory `id`: `entries[start..end]` (empty when it has none). Packs and entries
/// both come in id order: the match is most often right after the last one (`next`); otherwise it
/// is searched after it (from the start for an id out of order).
fn locate(entries: &[(i64, pg_sys::ItemPointerData)], next: &mut usize, id: i64) -> (usize, usize) {
    let from = if *next > 0 && entries[*next - 1].0 >= id { 0 } else { *next };
    let start = match entries.get(from) {
        Some(e) if e.0 < id => from + entries[from..].partition_point(|e| e.0 < id),
        _ => from,
    };
    let end = start + entries[start..].iter().take_while(|e| e.0 == id).count();
    *next = end;
    (start, end)
}

/// Whether a memory counted from its words pack is a candidate of the call: of its kinds, not
/// archived unless archived memories are asked for, and not past its end (expiry or validity).
fn is_candidate(f: &core_pack::PackedFacts, kind_codes: Option<&[u8]>, include_archived: bool, now: i64) -> bool {
    kind_codes.is_none_or(|ks| ks.contains(&f.kind)) && (include_archived || !f.archived) && f.ends_at > now
}

/// The keyword channel alone through the packs (a keyword-only call): the words packs are walked
/// by themselves, the embeddings' packs holding nothing it needs. What is counted from a pack, and
/// what is read from its row, follows the rule of [`rank_packed`]. `None` when the user has no
/// words pack for the model.
fn count_words(
    user: &str,
    model: &str,
    kinds: Option<&[String]>,
    include_archived: bool,
    now: i64,
    kw: &mut KeywordSide<'_>,
) -> Result<Option<Packed>> {
    let Some(mut words) = crate::scan::PackCursor::open(user, model, PART_WORDS)? else {
        return Ok(None);
    };
    let Some(first) = words.next_pack() else {
        return Ok(None);
    };
    let mut reader = core_pack::WordsReader::default();
    reader.load(first, kw.scan.query_terms(), kw.scan.options());
    let mut entries = Kept::take(&ENTRIES);
    if !crate::scan::active_entries(user, model, gucs::packed_limit(), &mut entries)? {
        return Ok(None);
    }
    let mut covered = Kept::take(&COVERED);
    covered.resize(entries.len(), false);
    kw.scan.reserve(entries.len());
    let stale = crate::scan::stale_ids(user, model)?;
    let mut fetcher = crate::scan::Fetcher::new(user)?;
    let kind_codes: Option<Vec<u8>> = kinds.map(|ks| ks.iter().map(|k| kind_code(k)).collect());
    let mut next = 0usize;
    loop {
        for at in 0..reader.len() {
            let (id, has_terms) = reader.id_at(at);
            let (start, end) = locate(&entries, &mut next, id);
            // Not countable from the pack: the row is read.
            if !has_terms || end != start + 1 || stale.binary_search(&id).is_ok() || !fetcher.all_visible(&entries[start].1) {
                continue;
            }
            covered[start] = true;
            let f = reader.facts_at(at);
            if is_candidate(&f, kind_codes.as_deref(), include_archived, now) {
                kw.scan.add_counted(id, f.len, reader.hits_at(at));
            }
        }
        pgrx::check_for_interrupts!();
        match words.next_pack() {
            Some(b) => reader.load(b, kw.scan.query_terms(), kw.scan.options()),
            None => break,
        }
    }
    drop(words);
    let mut read = 0usize;
    for (i, (_, tid)) in entries.iter().enumerate() {
        if covered[i] {
            continue;
        }
        read += 1;
        if read.is_multiple_of(1024) {
            pgrx::check_for_interrupts!();
        }
        fetcher.fetch(*tid, kinds, now, |c| {
            if !c.archived || include_archived {
                kw.scan.add(c.id, &c.content());
            }
            Ok(())
        })?;
    }
    drop(fetcher);
    debug1!(
        "agent_memory: recall counted the words of {read} of {} memories of the user from their rows; packs held the rest",
        entries.len()
    );
    Ok(Some(Packed { read, entries }))
}

/// The exact similarity to `q` of the memories at `places` (visible rows: memories counted from
/// their packs, found in [`Packed::entries`]), by id.
pub(crate) fn similarities_of(user: &str, places: &[(i64, pg_sys::ItemPointerData)], q: &[f32], model: &str) -> Result<Vec<(i64, f32)>> {
    let mut out = Vec::with_capacity(places.len());
    if places.is_empty() {
        return Ok(out);
    }
    let mut fetcher = crate::scan::Fetcher::new(user)?;
    let mut scratch = Vec::new();
    for (_, tid) in places {
        fetcher.fetch(*tid, None, i64::MIN, |c| {
            if let Some(similarity) = super::with_similarity(c, q, model, &mut scratch, |s, _| s)? {
                out.push((c.id, similarity as f32));
            }
            Ok(())
        })?;
    }
    Ok(out)
}
