//! `agent_memory.memory_consolidate(dry_run)`: what the consolidation worker runs.
//!
//! Steps, in order:
//! 1. `merge_duplicates`: per user, model and (predicate, object), keep the newest memory, raise
//!    its importance by 0.1 per memory merged into it, and retire the rest pointing to it
//!    (reason `merged`);
//! 2. `merge_similar`: semantic memories of one user whose embeddings have a cosine similarity of
//!    at least `agent_memory.merge_similarity` merge the same way into the newest;
//! 3. `summarize`: live episodic memories older than `agent_memory.summarize_after`, per user,
//!    model and subject (or per day when they have none), at most 20 at a time, become one semantic summary (the summariser
//!    of `agent_memory.summarizer`, or the built-in extractive one; its embedding is the
//!    normalised mean of theirs). The originals are its evidence: they move to the archive,
//!    pointing to the summary (`memory_evidence` lists them), and recall still finds them, so a
//!    question about one detail meets the detail;
//! 4. `archive`: one-off facts (semantic memories never recalled, never rewritten, older than
//!    `agent_memory.archive_after`) drop to `agent_memory.archive_importance` and move to the
//!    archive, out of the capacity.
//!
//! Nothing is deleted. With `dry_run`, each step counts what it would change.

use std::collections::{HashMap, HashSet};

use agent_memory_core::consolidate::{cluster_near_duplicates, extractive_summary, mean_direction, summary_budget};
use agent_memory_core::vecmath;
use pgrx::prelude::*;
use pgrx::spi::SpiClient;

use crate::error::{first_value, spi, MemoryError, OrRaise, Result};
use crate::gucs;
use crate::placement::TableSet;
use crate::runs::{self, step, Driver, Job, Steps};

/// Groups of duplicates: ids newest first. Objects compare without case or surrounding blanks,
/// as in reconciliation.
const DUPLICATE_GROUPS: &str = "\
SELECT array_agg(m.id ORDER BY m.created_at DESC, m.id DESC) \
  FROM agent_memory.memories m \
 WHERE m.active AND m.predicate IS NOT NULL AND m.object IS NOT NULL \
 GROUP BY m.user_id, m.embedding_model, m.predicate, lower(btrim(m.object)) \
HAVING count(*) > 1";

/// Retires `$1[i]` in favour of `$2[i]` (when both are still active) and raises each keeper's
/// importance by 0.1 per memory merged into it; a keeper inherits protection.
const MERGE_BATCH: &str = "\
WITH x AS (SELECT * FROM unnest($1::bigint[], $2::bigint[]) AS x(id, keeper)), \
     live AS (SELECT k.id FROM agent_memory.memories k WHERE k.id = ANY ($2::bigint[]) AND k.active), \
     r AS (UPDATE agent_memory.memories m \
              SET active = false, retired_reason = 'merged', retired_at = now(), superseded_by = x.keeper, \
                  version = m.version + 1 \
             FROM x JOIN live ON live.id = x.keeper WHERE m.id = x.id AND m.active AND m.id <> x.keeper \
           RETURNING x.keeper, m.protected), \
     g AS (SELECT r.keeper, count(*) AS n, bool_or(r.protected) AS prot FROM r GROUP BY r.keeper), \
     u AS (UPDATE agent_memory.memories m \
              SET importance = least(1, m.importance + 0.1 * g.n), protected = m.protected OR g.prot, \
                  version = m.version + 1 \
             FROM g WHERE m.id = g.keeper RETURNING 1) \
SELECT (SELECT count(*) FROM r), (SELECT count(*) FROM u)";

const USERS_AND_MODELS: &str = "\
SELECT DISTINCT m.user_id, m.embedding_model FROM agent_memory.memories m WHERE m.active AND m.embedding_model <> 'none' ORDER BY 1, 2";

/// Old live (not archived) episodic memories per user, model and subject (a topic), or per day
/// (standing for a session) when they have no subject: ids oldest first.
const SUMMARY_GROUPS: &str = "\
SELECT array_agg(m.id ORDER BY m.created_at, m.id) \
  FROM agent_memory.memories m \
 WHERE m.active AND m.kind = 'episodic' AND m.archived_at IS NULL AND m.created_at < now() - make_interval(mins => $1) \
   AND m.embedding_model <> 'none' \
 GROUP BY m.user_id, m.embedding_model, m.subject, CASE WHEN m.subject IS NULL THEN date_trunc('day', m.created_at) END \
HAVING count(*) >= $2";

const SUMMARY_SOURCES: &str = "\
SELECT m.id, m.user_id, m.embedding_model, m.subject, m.content, m.importance, m.emb \
  FROM agent_memory.memories m WHERE m.id = ANY ($1) AND m.active AND m.kind = 'episodic' AND m.archived_at IS NULL \
 ORDER BY m.created_at, m.id FOR UPDATE";

const NEXT_IDS: &str = "\
SELECT nextval(pg_catalog.pg_get_serial_sequence('agent_memory.memories', 'id')) FROM generate_series(1, $1)";

const INSERT_SUMMARIES: &str = "\
INSERT INTO agent_memory.memories (id, user_id, kind, subject, content, emb, embedding_model, importance, source, metadata) \
SELECT x.id, x.user_id, 'semantic', x.subject, x.content, x.emb, x.model, x.importance, 'consolidation', \
       jsonb_build_object('summary_of', x.n) \
  FROM unnest($1::bigint[], $2::text[], $3::text[], $4::text[], $5, $6::text[], $7::real[], $8::integer[]) \
       AS x(id, user_id, subject, content, emb, model, importance, n)";

/// The originals become the evidence of their summary: they move to the archive (out of the
/// capacity, still found by recall) and point to the summary.
const ARCHIVE_EVIDENCE: &str = "\
UPDATE agent_memory.memories m \
   SET archived_at = now(), expires_at = NULL, superseded_by = x.summary, version = m.version + 1 \
  FROM unnest($1::bigint[], $2::bigint[]) AS x(id, summary) \
 WHERE m.id = x.id AND m.active";

/// One-off facts: semantic, never recalled, never rewritten (version 1), old, not protected.
/// (Episodes reach the archive through forgetting, at the end of their retention.)
/// Archives the one-off memories among `$1` (still one-off: the conditions are checked again).
const ARCHIVE_BATCH: &str = "\
WITH u AS (UPDATE agent_memory.memories m \
              SET archived_at = now(), importance = least(m.importance, $3::real), version = m.version + 1 \
             FROM unnest($1::bigint[]) AS x(id) \
            WHERE m.id = x.id AND m.active AND m.kind = 'semantic' AND NOT m.protected AND m.archived_at IS NULL AND m.hit_count = 0 \
              AND m.version = 1 AND m.created_at < now() - make_interval(mins => $2) \
           RETURNING 1) \
SELECT count(*) FROM u";
const ARCHIVE_CANDIDATES: &str = "\
SELECT m.id FROM agent_memory.memories m \
 WHERE m.active AND m.kind = 'semantic' AND NOT m.protected AND m.archived_at IS NULL AND m.hit_count = 0 AND m.version = 1 \
   AND m.created_at < now() - make_interval(mins => $1) \
 ORDER BY m.id";

/// Rows a batch of `merge_similar` may read before it writes, so no batch runs long.
const SIMILAR_SCAN_ROWS: usize = 20_000;

/// Most episodes one summary is made from: a summary stays about one thing, and its embedding
/// (the mean of its sources') does not drift to the centre of everything the user said.
const MAX_SUMMARY_SOURCES: usize = 20;

/// What a dry run's earlier steps would have changed, so later steps do not count it twice.
#[derive(Default)]
struct WouldChange {
    retired: HashSet<i64>,
    rewritten: HashSet<i64>,
}

fn ids_of(
    client: &mut SpiClient<'_>,
    sql: &'static str,
    args: &[pgrx::datum::DatumWithOid<'_>],
    what: &'static str,
) -> Result<Vec<Vec<i64>>> {
    let table = crate::plans::read(client, sql, args).map_err(spi(what))?;
    let mut out = Vec::new();
    for row in table {
        let ids: Option<Vec<Option<i64>>> = row.get(1).map_err(spi(what))?;
        out.push(ids.unwrap_or_default().into_iter().flatten().collect());
    }
    Ok(out)
}

/// Applies merges (`(id, keeper)` pairs) in one statement; returns the rows retired.
fn merge(client: &mut SpiClient<'_>, t: &TableSet, pairs: &[(i64, i64)]) -> Result<i64> {
    if pairs.is_empty() {
        return Ok(0);
    }
    let ids: Vec<i64> = pairs.iter().map(|p| p.0).collect();
    let keepers: Vec<i64> = pairs.iter().map(|p| p.1).collect();
    let table = crate::plans::write(client, t.sql(MERGE_BATCH), &[ids.into(), keepers.into()]).map_err(spi("merging memories"))?;
    Ok(table.first().get_one::<i64>().map_err(spi("merging memories"))?.unwrap_or(0))
}

/// The whole consolidation pass.
pub fn consolidate_pass<D: Driver>(d: &mut D, dry_run: bool) -> Result<Steps> {
    let batch = gucs::batch_size();
    let mut would = WouldChange::default();
    Ok(vec![
        step("merge_duplicates", || merge_duplicates(d, dry_run, batch, &mut would))?,
        step("merge_similar", || merge_similar(d, dry_run, batch, &mut would))?,
        step("summarize", || summarize(d, dry_run, batch, &mut would))?,
        step("archive", || archive(d, dry_run, batch, &would))?,
    ])
}

fn merge_duplicates<D: Driver>(d: &mut D, dry_run: bool, batch: i64, would: &mut WouldChange) -> Result<i64> {
    let t = d.tables().clone();
    let groups = d.read(|c| ids_of(c, t.sql(DUPLICATE_GROUPS), &[], "finding duplicates"))?;
    let mut pairs: Vec<(i64, i64)> = Vec::new();
    for g in &groups {
        for &id in &g[1..] {
            pairs.push((id, g[0]));
        }
    }
    if dry_run {
        for g in &groups {
            would.rewritten.insert(g[0]);
            would.retired.extend(&g[1..]);
        }
        return Ok(pairs.len() as i64);
    }
    let mut total = 0;
    for chunk in pairs.chunks(batch as usize) {
        total += d.unit(|c| merge(c, &t, chunk))?;
    }
    Ok(total)
}

/// One user's near-duplicate merges: `(id, keeper)` pairs. The write trigger stores every
/// embedding at unit length, so they are compared as stored, copied once into one buffer.
fn similar_pairs(user: &str, model: &str, threshold: f64, skip: &HashSet<i64>, scanned: &mut usize) -> Result<Vec<(i64, i64)>> {
    let now = crate::pg::transaction_start();
    let kinds = ["semantic".to_string()];
    // Rows are clustered within groups that may merge: the same polarity (a statement never
    // merges with its contradiction), and the same predicate and value (facts of different
    // predicates, or different values of a many-valued one, are different facts); a fact's
    // subject too (the same predicate of two subjects, or of two LangGraph namespaces, are two
    // facts).
    type Group = (bool, Option<String>, Option<String>, Option<String>);
    /// (created_at, id, offset of its embedding) of each memory of a group.
    type GroupRows = Vec<(i64, i64, usize)>;
    let mut groups: HashMap<Group, GroupRows> = HashMap::new();
    let mut flat: Vec<f32> = Vec::new();
    let mut dims = None;
    let mut scratch = Vec::new();
    crate::scan::with_fresh_snapshot(|| {
        crate::scan::for_each_candidate(user, model, Some(&kinds), now, |c| {
            *scanned += 1;
            if skip.contains(&c.id) {
                return Ok(true);
            }
            // A memory not yet embedded waits for its embedding to be compared.
            let Some(emb) = c.emb()? else {
                return Ok(true);
            };
            if *dims.get_or_insert(emb.dims()) != emb.dims() {
                return Ok(true);
            }
            let (negated, predicate, value) = (
                agent_memory_core::polarity::is_negated(&c.content()),
                c.predicate().map(|p| p.into_owned()),
                c.object_key().map(|v| v.into_owned()),
            );
            let subject = predicate.as_ref().and_then(|_| c.subject_string());
            groups.entry((negated, subject, predicate, value)).or_default().push((c.created, c.id, flat.len()));
            emb.with_f32(&mut scratch, |x| flat.extend_from_slice(x));
            Ok(true)
        })
    })?;
    let dims = dims.unwrap_or(0);
    let mut pairs = Vec::new();
    let mut groups: Vec<(Group, GroupRows)> = groups.into_iter().collect();
    groups.sort_by(|a, b| a.0.cmp(&b.0));
    for (_, mut rows) in groups {
        pgrx::check_for_interrupts!();
        // Newest first: the newest of a group is kept.
        rows.sort_by(|a, b| b.0.cmp(&a.0).then(b.1.cmp(&a.1)));
        let vectors: Vec<&[f32]> = rows.iter().map(|r| &flat[r.2..r.2 + dims]).collect();
        let keeper_of = cluster_near_duplicates(&vectors, threshold);
        pairs.extend(keeper_of.iter().enumerate().filter(|(i, k)| *i != **k).map(|(i, &k)| (rows[i].1, rows[k].1)));
    }
    Ok(pairs)
}

fn merge_similar<D: Driver>(d: &mut D, dry_run: bool, batch: i64, would: &mut WouldChange) -> Result<i64> {
    let t = d.tables().clone();
    let threshold = gucs::merge_similarity();
    let users: Vec<(String, String)> = d.read(|c| {
        let table = crate::plans::read(c, t.sql(USERS_AND_MODELS), &[]).map_err(spi("listing users"))?;
        let mut out = Vec::new();
        for row in table {
            if let (Some(u), Some(m)) =
                (row.get::<String>(1).map_err(spi("listing users"))?, row.get::<String>(2).map_err(spi("listing users"))?)
            {
                out.push((u, m));
            }
        }
        Ok(out)
    })?;
    let mut total = 0i64;
    let mut next = 0usize;
    while next < users.len() {
        // One unit: users from `next` on, until a batch of merges or enough rows read.
        let skip = &would.retired;
        let (pairs, done_to) = d.read(|_c| {
            let mut pairs: Vec<(i64, i64)> = Vec::new();
            let mut scanned = 0usize;
            let mut i = next;
            while i < users.len() && (pairs.len() as i64) < batch && scanned < SIMILAR_SCAN_ROWS {
                pgrx::check_for_interrupts!();
                let mut found = similar_pairs(&users[i].0, &users[i].1, threshold, skip, &mut scanned)?;
                if (pairs.len() + found.len()) as i64 > batch {
                    // Too many for this batch: take what fits; the user is read again next unit.
                    found.truncate((batch as usize).saturating_sub(pairs.len()));
                    pairs.extend(found);
                    return Ok((pairs, i));
                }
                pairs.extend(found);
                i += 1;
            }
            Ok((pairs, i))
        })?;
        if dry_run {
            for (id, keeper) in &pairs {
                would.retired.insert(*id);
                would.rewritten.insert(*keeper);
            }
            total += pairs.len() as i64;
            // A dry run cannot come back to a truncated user: nothing changed.
            next = done_to.max(next + 1);
        } else {
            let merged = d.unit(|c| merge(c, &t, &pairs))?;
            total += merged;
            next = if merged == 0 { done_to.max(next + 1) } else { done_to };
        }
    }
    Ok(total)
}

/// The summariser to call: `None` for the built-in one, else the quoted, schema-qualified name
/// of a function `(text, text[]) returns text`.
fn summarizer(client: &mut SpiClient<'_>) -> Result<Option<String>> {
    let name = gucs::summarizer();
    if name.is_empty() {
        return Ok(None);
    }
    let table = client
        .select(
            "SELECT n.nspname::text, p.proname::text, p.prorettype = 'text'::regtype \
               FROM pg_catalog.pg_proc p JOIN pg_catalog.pg_namespace n ON n.oid = p.pronamespace \
              WHERE p.oid = pg_catalog.to_regprocedure($1 || '(text, text[])')",
            None,
            &[name.clone().into()],
        )
        .map_err(spi("looking up the summariser"))?;
    let not_found = || {
        MemoryError::new(pgrx::PgSqlErrorCode::ERRCODE_UNDEFINED_FUNCTION, format!("the summariser {name}(text, text[]) does not exist"))
            .hint(
            "Set agent_memory.summarizer to a function (user_id text, contents text[]) returns text, or to '' for the built-in summariser.",
        )
    };
    if table.is_empty() {
        return Err(not_found());
    }
    let (schema, func, returns_text) = table.first().get_three::<String, String, bool>().map_err(spi("looking up the summariser"))?;
    if returns_text != Some(true) {
        return Err(MemoryError::new(
            pgrx::PgSqlErrorCode::ERRCODE_WRONG_OBJECT_TYPE,
            format!("the summariser {name} does not return text"),
        )
        .hint("The summariser must be a function (user_id text, contents text[]) returns text."));
    }
    match (schema, func) {
        (Some(s), Some(f)) => Ok(Some(format!("{}.{}", pgrx::spi::quote_identifier(s), pgrx::spi::quote_identifier(f)))),
        _ => Err(not_found()),
    }
}

/// One episode, as the summariser sees it.
struct Episode {
    id: i64,
    user: String,
    model: String,
    subject: Option<String>,
    content: String,
    importance: f32,
    emb: Vec<f32>,
}

/// Summarises several groups (ids oldest first) in one unit: reads and locks their episodes,
/// writes one summary per group and retires the episodes as its evidence. Returns how many
/// episodes became evidence.
fn summarize_groups(client: &mut SpiClient<'_>, t: &TableSet, groups: &[&Vec<i64>], custom: &Option<String>) -> Result<i64> {
    let ids: Vec<i64> = groups.iter().flat_map(|g| g.iter().copied()).collect();
    let mut group_of = std::collections::HashMap::with_capacity(ids.len());
    for (gi, g) in groups.iter().enumerate() {
        for id in g.iter() {
            group_of.insert(*id, gi);
        }
    }
    let mut episodes: Vec<Vec<Episode>> = (0..groups.len()).map(|_| Vec::new()).collect();
    {
        let mut table = crate::plans::write(client, t.sql(SUMMARY_SOURCES), &[ids.into()]).map_err(spi("reading episodes"))?;
        while table.next().is_some() {
            let e = spi("reading an episode");
            let (Some(id), Some(user), Some(model), Some(content)) = (
                table.get::<i64>(1).map_err(&e)?,
                table.get::<String>(2).map_err(&e)?,
                table.get::<String>(3).map_err(&e)?,
                table.get::<String>(5).map_err(&e)?,
            ) else {
                continue;
            };
            let subject: Option<String> = table.get(4).map_err(&e)?;
            let importance: f32 = table.get(6).map_err(&e)?.unwrap_or(0.0);
            let Some(emb) = crate::vector::vector_column(&table, 7)? else {
                continue;
            };
            let emb = vecmath::normalized(&emb.to_f32_vec());
            if let Some(&gi) = group_of.get(&id) {
                episodes[gi].push(Episode { id, user, model, subject, content, importance, emb });
            }
        }
    }
    let min = gucs::summarize_min_fragments();
    let episodes: Vec<Vec<Episode>> = episodes.into_iter().filter(|g| !g.is_empty() && g.len() as i64 >= min).collect();
    if episodes.is_empty() {
        return Ok(0);
    }
    // The summaries, in group order.
    let mut contents = Vec::with_capacity(episodes.len());
    let mut means = Vec::with_capacity(episodes.len());
    for g in &episodes {
        let user = &g[0].user;
        let texts: Vec<&str> = g.iter().map(|e| e.content.as_str()).collect();
        let summary = match custom {
            None => extractive_summary(&texts, summary_budget(texts.iter().map(|c| c.chars().count()).sum())),
            Some(func) => {
                let sql = format!("SELECT {func}($1, $2)");
                let owned: Vec<String> = texts.iter().map(|c| c.to_string()).collect();
                let table =
                    client.update(sql.as_str(), None, &[user.clone().into(), owned.into()]).map_err(spi("calling the summariser"))?;
                first_value::<String>(table).map_err(spi("calling the summariser"))?.unwrap_or_default()
            }
        };
        if summary.trim().is_empty() {
            return Err(MemoryError::data_exception(format!("the summariser returned no text for {} episodes of user {user}", g.len()))
                .hint("The summariser must return the summary as non-empty text."));
        }
        let vectors: Vec<&[f32]> = g.iter().map(|e| e.emb.as_slice()).collect();
        let Some(mean) = mean_direction(&vectors) else {
            return Err(MemoryError::data_exception(format!("the episodes of user {user} have embeddings that cancel out"))
                .hint("Their normalised mean is zero; summarise them by hand and give the summary an embedding."));
        };
        contents.push(summary);
        means.push(mean);
    }
    let n = episodes.len() as i64;
    let new_ids: Vec<i64> = {
        let table = crate::plans::write(client, NEXT_IDS, &[n.into()]).map_err(spi("numbering summaries"))?;
        let mut out = Vec::with_capacity(episodes.len());
        for row in table {
            out.push(row.get::<i64>(1).map_err(spi("numbering summaries"))?.unwrap_or_default());
        }
        out
    };
    let users: Vec<String> = episodes.iter().map(|g| g[0].user.clone()).collect();
    let subjects: Vec<Option<String>> = episodes.iter().map(|g| g[0].subject.clone()).collect();
    let models: Vec<String> = episodes.iter().map(|g| g[0].model.clone()).collect();
    let importance: Vec<f32> = episodes.iter().map(|g| g.iter().map(|e| e.importance).fold(0.0f32, f32::max)).collect();
    let sizes: Vec<i32> = episodes.iter().map(|g| g.len() as i32).collect();
    crate::plans::write(
        client,
        t.sql(INSERT_SUMMARIES),
        &[
            new_ids.clone().into(),
            users.into(),
            subjects.into(),
            contents.into(),
            crate::vector::new_vector_array(&means)?,
            models.into(),
            importance.into(),
            sizes.into(),
        ],
    )
    .map_err(spi("writing summaries"))?;
    let (mut evidence, mut summary_of) = (Vec::new(), Vec::new());
    for (g, sid) in episodes.iter().zip(&new_ids) {
        for e in g {
            evidence.push(e.id);
            summary_of.push(*sid);
        }
    }
    let table =
        crate::plans::write(client, t.sql(ARCHIVE_EVIDENCE), &[evidence.into(), summary_of.into()]).map_err(spi("keeping the evidence"))?;
    Ok(table.len() as i64)
}

fn summarize<D: Driver>(d: &mut D, dry_run: bool, batch: i64, would: &mut WouldChange) -> Result<i64> {
    let t = d.tables().clone();
    let after = gucs::summarize_after_minutes().min(i32::MAX as i64) as i32;
    let min = gucs::summarize_min_fragments().min(i32::MAX as i64);
    let groups = d.read(|c| ids_of(c, t.sql(SUMMARY_GROUPS), &[after.into(), min.into()], "finding old episodes"))?;
    if dry_run {
        let mut n = 0;
        for g in &groups {
            let left: Vec<i64> = g.iter().copied().filter(|id| !would.retired.contains(id)).collect();
            if !left.is_empty() && left.len() as i64 >= min {
                n += left.len() as i64;
                would.retired.extend(left);
            }
        }
        return Ok(n);
    }
    let custom = d.read(summarizer)?;
    // A very large group is summarised in parts; groups are packed into units of about a batch
    // of episodes (a summary and its evidence are always written together).
    let parts: Vec<Vec<i64>> = groups.iter().flat_map(|g| g.chunks(MAX_SUMMARY_SOURCES).map(|c| c.to_vec())).collect();
    let mut total = 0;
    let mut start = 0;
    while start < parts.len() {
        let mut end = start;
        let mut rows = 0i64;
        while end < parts.len() && (end == start || rows + parts[end].len() as i64 <= batch) {
            rows += parts[end].len() as i64;
            end += 1;
        }
        let unit: Vec<&Vec<i64>> = parts[start..end].iter().collect();
        total += d.unit(|c| summarize_groups(c, &t, &unit, &custom))?;
        start = end;
    }
    Ok(total)
}

fn archive<D: Driver>(d: &mut D, dry_run: bool, batch: i64, would: &WouldChange) -> Result<i64> {
    let t = d.tables().clone();
    let Some(after) = gucs::archive_after_minutes() else { return Ok(0) };
    let after = after.min(i32::MAX as i64) as i32;
    // One read finds the candidates; batches then archive them by id.
    let ids: Vec<i64> = d.read(|c| {
        let table = crate::plans::read(c, t.sql(ARCHIVE_CANDIDATES), &[after.into()]).map_err(spi("finding one-off memories"))?;
        let mut out = Vec::new();
        for row in table {
            if let Some(id) = row.get::<i64>(1).map_err(spi("finding one-off memories"))? {
                out.push(id);
            }
        }
        Ok(out)
    })?;
    if dry_run {
        return Ok(ids.iter().filter(|id| !would.retired.contains(id) && !would.rewritten.contains(id)).count() as i64);
    }
    let importance = gucs::archive_importance() as f32;
    let mut total = 0;
    for chunk in ids.chunks(batch as usize) {
        total += d.unit(|c| {
            let table = crate::plans::write(c, t.sql(ARCHIVE_BATCH), &[chunk.to_vec().into(), after.into(), importance.into()])
                .map_err(spi("archiving memories"))?;
            Ok(first_value::<i64>(table).map_err(spi("archiving memories"))?.unwrap_or(0))
        })?;
    }
    Ok(total)
}

/// Runs consolidation now: merges duplicates and near-duplicates, summarises old episodes
/// (keeping them as evidence) and archives one-off memories; returns the rows of each step.
/// Nothing is deleted. `dry_run => true` changes nothing and returns what would change. Fails
/// at once (55P03) while another consolidation pass runs.
#[pg_extern(volatile, parallel_unsafe)]
#[search_path(pg_catalog, pg_temp)]
fn memory_consolidate(dry_run: default!(Option<bool>, false)) -> TableIterator<'static, (name!(step, String), name!(rows, i64))> {
    let dry_run = runs::check_dry_run(dry_run).or_raise();
    let steps = runs::by_hand(Job::Consolidate, dry_run, |d| consolidate_pass(d, dry_run)).or_raise();
    TableIterator::new(steps.into_iter().map(|s| (s.name.to_string(), s.rows)))
}
