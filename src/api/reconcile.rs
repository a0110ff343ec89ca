//! `memory_reconcile(user_id, subject, predicate, object, content, emb, ...)` and
//! `memory_reconcile_batch(user_id, facts jsonb, ...)`: turning candidate facts into ADD /
//! UPDATE / DELETE / NONE, server-side.
//!
//! Every call takes a transaction-scoped advisory lock on the user, so reconciliations of one
//! user run one at a time (other users are not held up), and the partial unique index
//! `memories_one_active_fact` guarantees one active row per (user, subject, predicate) even
//! against writes that bypass this function. The decision itself is
//! `agent_memory_core::reconcile::decide`.

use std::collections::HashMap;

use agent_memory_core::polarity::{negated_value, relate, Relation};
use agent_memory_core::reconcile::{decide, most_similar, Action, Decision, Match, MatchKind};
use agent_memory_core::vecmath;
use pgrx::datum::{JsonB, TimestampWithTimeZone};
use pgrx::prelude::*;
use pgrx::spi::SpiClient;
use pgrx::PgSqlErrorCode;
use serde::Deserialize;

use crate::api::policy::check_kind;
use crate::error::{first_value, spi, MemoryError, OrRaise, Result};
use crate::gucs;
use crate::recall::{check_user, resolve_model};
use crate::vector::{new_vector_array, HalfVec, IntoVectorDatum, Vector};

/// One candidate fact, from the single-fact call or one element of a batch.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Fact {
    pub subject: Option<String>,
    pub predicate: Option<String>,
    pub object: Option<String>,
    pub content: Option<String>,
    /// The embedding of `content`, any length as long as it matches the model.
    pub emb: Option<Vec<f32>>,
    pub kind: Option<String>,
    pub importance: Option<f32>,
    pub protected: Option<bool>,
    #[serde(default)]
    pub negate: bool,
    /// `one` or `many`: records the predicate's cardinality in `agent_memory.predicates`.
    pub cardinality: Option<String>,
    /// The task the memory belongs to (`agent_memory.tasks`).
    pub task_id: Option<String>,
    pub source: Option<String>,
    pub source_turn_id: Option<i64>,
    /// Text in any form `timestamptz` accepts.
    pub expires_at: Option<String>,
    pub valid_until: Option<String>,
    pub metadata: Option<serde_json::Value>,
    /// A decision already taken by the caller: ADD, UPDATE, DELETE or NONE.
    pub action: Option<String>,
    pub target_id: Option<i64>,
    pub expected_version: Option<i32>,
}

impl Fact {
    /// Refuses a NUL character in any string of the fact, as `jsonb` does: PostgreSQL's text
    /// cannot hold one, and a string with one would not equal the same text without it.
    pub fn check_text(&self) -> Result<()> {
        let texts = [
            ("subject", &self.subject),
            ("predicate", &self.predicate),
            ("object", &self.object),
            ("content", &self.content),
            ("kind", &self.kind),
            ("source", &self.source),
            ("expires_at", &self.expires_at),
            ("valid_until", &self.valid_until),
            ("action", &self.action),
            ("cardinality", &self.cardinality),
            ("task_id", &self.task_id),
        ];
        for (name, text) in texts {
            if text.as_deref().is_some_and(|t| t.contains('\0')) {
                return Err(nul_in(name));
            }
        }
        if self.metadata.as_ref().is_some_and(json_has_nul) {
            return Err(nul_in("metadata"));
        }
        if let Some(m) = self.metadata.as_ref().filter(|m| !m.is_object()) {
            return Err(MemoryError::metadata_not_object(m));
        }
        gucs::check_sizes(self.content.as_deref(), self.metadata.as_ref().map(|m| m.to_string().len()))
    }
}

fn nul_in(field: &str) -> MemoryError {
    MemoryError::new(PgSqlErrorCode::ERRCODE_UNTRANSLATABLE_CHARACTER, format!("{field}: unsupported Unicode escape sequence"))
        .detail("\\u0000 cannot be converted to text.")
        .hint("Remove the NUL characters (\\u0000) from the fact's strings.")
}

fn json_has_nul(v: &serde_json::Value) -> bool {
    match v {
        serde_json::Value::String(s) => s.contains('\0'),
        serde_json::Value::Array(a) => a.iter().any(json_has_nul),
        serde_json::Value::Object(o) => o.iter().any(|(k, v)| k.contains('\0') || json_has_nul(v)),
        _ => false,
    }
}

/// What one fact did: the contract's four columns.
#[derive(Debug, Clone, Copy)]
pub struct Outcome {
    pub action: Action,
    pub memory_id: Option<i64>,
    pub previous_id: Option<i64>,
    pub version: Option<i32>,
}

/// A row a decision refers to: one that exists, or one this call will insert (by index).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum Slot {
    Existing(i64),
    New(usize),
}

/// The key of a fact: (subject, predicate, value) where the value (the object without case or
/// surrounding blanks) is part of the key only for a many-valued predicate.
type Key = (String, String, Option<String>);

/// What the call knows of a row while it decides.
struct RowState {
    version: i32,
    active: bool,
    key: Option<Key>,
    content: Option<(String, bool)>,
    object: Option<String>,
}

/// A row to insert, in its final state.
struct NewRow {
    fact_index: usize,
    kind: String,
    unit: Vec<f32>,
    content: String,
    predicate: Option<String>,
    /// The caller's importance; NULL lets the write trigger apply the importance rule.
    importance: Option<f32>,
    /// The importance this row starts from when a later fact reinforces it.
    base_importance: f32,
    version: i32,
    active: bool,
    retired_reason: Option<&'static str>,
    superseded_by: Option<Slot>,
}

/// Where an outcome's version comes from once the writes are done.
#[derive(Clone, Copy, Debug)]
enum VersionOf {
    Fixed(i32),
    Existing(i64),
    Null,
}

struct Pending {
    action: Action,
    memory: Option<Slot>,
    previous: Option<Slot>,
    version: VersionOf,
}

/// Each name's canonical predicate, and whether that is many-valued.
const LOAD_PREDICATES: &str = "SELECT n.name, coalesce(p.alias_of, n.name), coalesce(c.cardinality = 'many', false) \
       FROM unnest($1::text[]) AS n(name) \
       LEFT JOIN agent_memory.predicates p ON p.predicate = n.name \
       LEFT JOIN agent_memory.predicates c ON c.predicate = coalesce(p.alias_of, n.name)";
/// The position (from 1) of the first text that is not a `timestamptz`, NULL when all are.
const FIRST_BAD_TIME: &str = "SELECT agent_memory.first_bad_time($1::text[])";
/// A predicate's canonical name (its own, or the one it is an alias of) and that one's
/// cardinality, NULL when nobody declared it.
const PREDICATE_NOW: &str = "SELECT n.name, c.cardinality \
       FROM (SELECT coalesce((SELECT p.alias_of FROM agent_memory.predicates p WHERE p.predicate = $1), $1) AS name) n \
       LEFT JOIN agent_memory.predicates c ON c.predicate = n.name";
/// Adds a predicate nobody declared yet, recording the user whose call declared it (erased with
/// the user when nothing else needs it). A writer may add predicates, never change one.
const ADD_PREDICATE: &str = "WITH n AS (INSERT INTO agent_memory.predicates (predicate, cardinality) VALUES ($1, $2) \
                                 ON CONFLICT (predicate) DO NOTHING RETURNING predicate) \
     INSERT INTO agent_memory.predicate_declarations (user_id, predicate) SELECT $3, n.predicate FROM n \
     ON CONFLICT (user_id, predicate) DO NOTHING";
/// An admin's change of a predicate's cardinality.
const CHANGE_CARDINALITY: &str = "UPDATE agent_memory.predicates SET cardinality = $2 WHERE predicate = $1";
const LOAD_KEYS: &str = "SELECT m.id, m.version, m.subject, m.predicate, m.object, m.kind = 'episodic', m.object_key \
       FROM agent_memory.memories m \
      WHERE m.user_id = $1 AND m.active AND m.subject IS NOT NULL AND m.predicate IS NOT NULL \
        AND (m.subject, m.predicate) IN (SELECT * FROM unnest($2::text[], $3::text[])) \
      ORDER BY m.id FOR UPDATE";
const LOAD_CONTENT: &str = "SELECT m.id, m.version, m.content, m.kind = 'episodic', m.object \
       FROM agent_memory.memories m \
      WHERE m.user_id = $1 AND m.active AND m.embedding_model = $2 \
        AND md5(m.content) IN (SELECT md5(c) FROM unnest($3::text[]) c) AND m.content = ANY ($3::text[]) \
      ORDER BY m.id FOR UPDATE";
const LOAD_TARGETS: &str = "SELECT id, version, active, user_id = $2, subject, predicate, object, kind = 'episodic', object_key \
       FROM agent_memory.memories WHERE user_id = $2 AND id = ANY ($1) ORDER BY id FOR UPDATE";
const LOAD_KNOWN: &str = "SELECT id, version, emb, kind = 'episodic', object, subject, predicate, object_key, content \
       FROM agent_memory.memories WHERE user_id = $1 AND embedding_model = $2 AND active ORDER BY id";
const NEXT_IDS: &str = "SELECT nextval(pg_catalog.pg_get_serial_sequence('agent_memory.memories', 'id')) \
       FROM generate_series(1, $1)";
const RETIRE_MANY: &str = "UPDATE agent_memory.memories m \
        SET active = false, retired_reason = r.reason, retired_at = now(), superseded_by = r.superseded_by \
       FROM unnest($1::bigint[], $2::integer[], $3::text[], $4::bigint[]) AS r(id, version, reason, superseded_by) \
      WHERE m.user_id = $5 AND m.id = r.id AND m.version = r.version AND m.active \
  RETURNING m.id, m.version";
const REINFORCE_MANY: &str = "UPDATE agent_memory.memories m \
        SET importance = least(1, m.importance + 0.1 * r.n), hit_count = m.hit_count + r.n, last_hit_at = now(), \
            expires_at = CASE WHEN m.protected THEN NULL WHEN r.expires_at IS NOT NULL THEN r.expires_at::timestamptz ELSE \
                (SELECT CASE WHEN x IS NULL THEN NULL ELSE greatest(m.expires_at, now() + x) END \
                   FROM agent_memory.memory_retention(m.kind, least(1, m.importance + 0.1 * r.n)::real, m.protected) x) END, \
            valid_until = coalesce(r.valid_until::timestamptz, m.valid_until) \
       FROM unnest($1::bigint[], $2::integer[], $3::integer[], $4::text[], $5::text[]) AS r(id, version, n, expires_at, valid_until) \
      WHERE m.user_id = $6 AND m.id = r.id AND m.version = r.version AND m.active \
  RETURNING m.id, m.version";
const INSERT_MANY: &str = "INSERT INTO agent_memory.memories \
       (id, user_id, kind, subject, predicate, object, content, emb, embedding_model, importance, protected, \
        source, source_turn_id, expires_at, valid_until, metadata, version, active, retired_reason, retired_at, superseded_by, task_id) \
     SELECT r.id, $1, r.kind, r.subject, r.predicate, r.object, r.content, r.emb, $2, r.importance, \
            coalesce(r.protected, false), r.source, r.source_turn_id, r.expires_at::timestamptz, \
            r.valid_until::timestamptz, coalesce(r.metadata, '{}'::jsonb), r.version, r.active, r.retired_reason, \
            CASE WHEN r.active THEN NULL ELSE now() END, r.superseded_by, r.task_id \
       FROM unnest($3::bigint[], $4::text[], $5::text[], $6::text[], $7::text[], $8::text[], $9, $10::real[], \
                   $11::boolean[], $12::text[], $13::bigint[], $14::text[], $15::text[], $16::jsonb[], \
                   $17::integer[], $18::boolean[], $19::text[], $20::bigint[], $21::text[]) \
            AS r(id, kind, subject, predicate, object, content, emb, importance, protected, source, source_turn_id, \
                 expires_at, valid_until, metadata, version, active, retired_reason, superseded_by, task_id)";

/// How many of a call's own earlier facts the similarity fallback compares a fact with (besides
/// every memory the user had before the call): the most recent ones. Comparing with all of
/// them would make a batch's cost grow with the square of its length.
pub const BATCH_SIMILARITY_WINDOW: usize = 512;

/// The memories the similarity fallback compares a fact with: every active memory of the user
/// and model from before the call, and the call's most recent new rows.
struct Known {
    existing: Vec<KnownRow>,
    recent: std::collections::VecDeque<KnownRow>,
}

/// A memory the similarity fallback may match.
struct KnownRow {
    slot: Slot,
    episodic: bool,
    unit: Vec<f32>,
    content: String,
    /// The (canonical) predicate of a structured fact; `None` for free text.
    predicate: Option<String>,
}

impl Known {
    fn push_new(&mut self, entry: KnownRow) {
        if self.recent.len() == BATCH_SIMILARITY_WINDOW {
            self.recent.pop_front();
        }
        self.recent.push_back(entry);
    }

    fn remove(&mut self, slot: Slot) {
        self.existing.retain(|m| m.slot != slot);
        self.recent.retain(|m| m.slot != slot);
    }
}

/// Reconciles the facts of one user: reads what the facts need in a few queries, decides every
/// fact in order against an in-memory view (which includes the rows earlier facts created), then
/// writes everything in at most three statements.
pub struct Reconciler<'a, 'c> {
    client: &'a mut SpiClient<'c>,
    user: String,
    model: String,
    dims: Option<usize>,
    reconcile_similarity: f64,
    merge_similarity: f64,
    rows: HashMap<Slot, RowState>,
    by_key: HashMap<Key, Slot>,
    /// Other active rows of a single-valued key than the one `by_key` holds: rows written while
    /// the predicate was many-valued. The next fact of the key retires them.
    strays: HashMap<Key, Vec<Slot>>,
    /// The many-valued predicates among the call's (canonical names).
    many: std::collections::HashSet<String>,
    by_content: HashMap<(String, bool), Slot>,
    known: Option<Known>,
    new_rows: Vec<NewRow>,
    retire: Vec<(i64, i32, &'static str, Option<Slot>)>,
    /// Reinforced rows: (version read, times, the caller's expires_at and valid_until).
    reinforce: HashMap<i64, (i32, i32, Option<String>, Option<String>)>,
}

/// A reinforced row as written: id, version read, times reinforced, the caller's `expires_at`
/// and `valid_until`.
type Reinforced = (i64, i32, i32, Option<String>, Option<String>);

fn conflict() -> MemoryError {
    MemoryError::new(PgSqlErrorCode::ERRCODE_T_R_SERIALIZATION_FAILURE, "a memory changed while it was reconciled")
        .detail("Another session updated a memory this call decided on.")
        .hint("Retry the call.")
}

impl<'a, 'c> Reconciler<'a, 'c> {
    /// Locks the user and reads the model's dimension.
    pub fn new(client: &'a mut SpiClient<'c>, user: &str, model: &str) -> Result<Self> {
        crate::locks::user(client, user)?;
        let dims = crate::catalog::model_dims(client, model)?;
        Ok(Reconciler {
            client,
            user: user.to_string(),
            model: model.to_string(),
            dims,
            reconcile_similarity: gucs::reconcile_similarity(),
            merge_similarity: gucs::merge_similarity(),
            rows: HashMap::new(),
            by_key: HashMap::new(),
            strays: HashMap::new(),
            many: std::collections::HashSet::new(),
            by_content: HashMap::new(),
            known: None,
            new_rows: Vec::new(),
            retire: Vec::new(),
            reinforce: HashMap::new(),
        })
    }

    /// Checks an embedding against the model and returns it at unit length.
    fn unit(&mut self, emb: &[f32]) -> Result<Vec<f32>> {
        crate::vector::check_dims(emb.len(), "emb")?;
        if let Some(d) = self.dims {
            if d != emb.len() {
                return Err(MemoryError::data_exception(format!(
                    "embedding model \"{}\" has {d} dimensions, but this embedding has {}",
                    self.model,
                    emb.len()
                ))
                .hint("Pass model => the name of the model that made this embedding; one model has one dimension."));
            }
        }
        vecmath::validate(emb).map_err(|p| {
            MemoryError::invalid_parameter(format!("emb: {p}"))
                .hint("Pass the embedding of the fact's content: a non-zero vector of finite numbers.")
        })?;
        let unit = vecmath::normalized(emb);
        if self.dims.is_none() {
            self.dims = Some(unit.len());
        }
        Ok(unit)
    }

    fn remember(&mut self, slot: Slot, state: RowState) {
        if !state.active {
            return;
        }
        if let Some(k) = &state.key {
            match self.by_key.get(k) {
                Some(&held) if held != slot => self.strays.entry(k.clone()).or_default().push(slot),
                Some(_) => {}
                None => {
                    self.by_key.insert(k.clone(), slot);
                }
            }
        }
        if let Some(c) = &state.content {
            self.by_content.entry(c.clone()).or_insert(slot);
        }
        self.rows.entry(slot).or_insert(state);
    }

    /// The key of a structured fact (its predicate already canonical): the value is part of it
    /// for a many-valued predicate.
    fn key_of(&self, subject: &str, predicate: &str, object: Option<&str>) -> Key {
        let value = if self.many.contains(predicate) { object.map(|o| o.trim().to_lowercase()) } else { None };
        (subject.to_string(), predicate.to_string(), value)
    }

    /// The key of a stored fact: its value is part of it only while its predicate is
    /// many-valued, so the rows of a predicate made single-valued since share one key.
    fn row_key(&self, subject: String, predicate: String, object_key: Option<String>) -> Key {
        let value = if self.many.contains(&predicate) { object_key } else { None };
        (subject, predicate, value)
    }

    /// Retires the other active rows of a single-valued key once a fact of it is decided: one
    /// active value per key, whatever the predicate's cardinality was when they were written.
    fn retire_strays(&mut self, fact: &Fact, pending: &Pending) {
        let (Some(subject), Some(predicate)) = (&fact.subject, &fact.predicate) else { return };
        if self.many.contains(predicate) {
            return;
        }
        let key = self.key_of(subject, predicate, fact.object.as_deref());
        let Some(strays) = self.strays.remove(&key) else { return };
        let (reason, by) = match pending.action {
            Action::Delete => ("deleted", None),
            _ => ("superseded", pending.memory),
        };
        for s in strays {
            if Some(s) != pending.memory && self.rows.get(&s).is_some_and(|r| r.active) {
                self.retire_slot(s, reason, by);
            }
        }
    }

    /// Records a caller's cardinality for a predicate (for an alias, for its canonical name): a
    /// new predicate is added; an existing one of another cardinality is changed only by a role
    /// that sees every user (an admin), since the registry is shared by every tenant.
    fn record_cardinality(&mut self, predicate: &str, cardinality: &str) -> Result<()> {
        let e = spi("reading the predicate");
        let (name, now): (Option<String>, Option<String>) =
            crate::plans::read(self.client, PREDICATE_NOW, &[predicate.into()]).map_err(&e)?.first().get_two().map_err(&e)?;
        let name = name.unwrap_or_else(|| predicate.to_string());
        match now.as_deref() {
            Some(c) if c == cardinality => Ok(()),
            None => {
                crate::plans::write(
                    self.client,
                    crate::placement::sql_for(&self.user, ADD_PREDICATE)?,
                    &[name.into(), cardinality.into(), self.user.clone().into()],
                )
                .map_err(spi("recording the predicate"))?;
                Ok(())
            }
            Some(c) => {
                if !crate::recall::sees_every_user(self.client)? {
                    return Err(MemoryError::new(
                        PgSqlErrorCode::ERRCODE_INSUFFICIENT_PRIVILEGE,
                        format!("predicate \"{name}\" has cardinality '{c}', and only an admin may change it to '{cardinality}'"),
                    )
                    .detail(
                        "The predicates are shared by every user and tenant: a change of one changes how everyone's facts are reconciled.",
                    )
                    .hint(format!(
                        "Reconcile without cardinality to use \"{name}\" as it is, or ask an agent_memory admin to change it."
                    )));
                }
                crate::plans::write(self.client, CHANGE_CARDINALITY, &[name.into(), cardinality.into()])
                    .map_err(spi("changing the predicate's cardinality"))?;
                Ok(())
            }
        }
    }

    /// Reads the predicates of the call (recording a caller's cardinality first), and rewrites
    /// each fact's predicate to its canonical name.
    fn predicates(&mut self, facts: &mut [Fact]) -> Result<()> {
        for f in facts.iter() {
            if let (Some(c), Some(p)) = (&f.cardinality, &f.predicate) {
                if c != "one" && c != "many" {
                    return Err(MemoryError::invalid_parameter(format!("cardinality must be 'one' or 'many', not \"{c}\""))
                        .hint("'one': a new object supersedes the old (editor, city); 'many': each object is a fact of its own (likes, children)."));
                }
                self.record_cardinality(p, c)?;
            } else if f.cardinality.is_some() {
                return Err(MemoryError::invalid_parameter("cardinality needs a predicate")
                    .hint("Pass cardinality with a structured fact (subject, predicate, object)."));
            }
        }
        let names: Vec<Option<String>> = facts.iter().filter_map(|f| f.predicate.clone()).map(Some).collect();
        if names.is_empty() {
            return Ok(());
        }
        let mut canonical: HashMap<String, String> = HashMap::new();
        let table = crate::plans::read(self.client, LOAD_PREDICATES, &[names.into()]).map_err(spi("reading the predicates"))?;
        for r in table {
            let e = spi("reading the predicates");
            let (Some(name), Some(canon), Some(many)) =
                (r.get::<String>(1).map_err(&e)?, r.get::<String>(2).map_err(&e)?, r.get::<bool>(3).map_err(&e)?)
            else {
                continue;
            };
            if many {
                self.many.insert(canon.clone());
            }
            canonical.insert(name, canon);
        }
        for f in facts.iter_mut() {
            if let Some(p) = &f.predicate {
                if let Some(c) = canonical.get(p) {
                    f.predicate = Some(c.clone());
                }
            }
        }
        Ok(())
    }

    /// Reads the active facts with the batch's keys, the active memories with the batch's free
    /// texts, and the targets of caller-decided actions.
    fn load(&mut self, facts: &[Fact]) -> Result<()> {
        let keyed: Vec<&Fact> = facts.iter().filter(|f| f.subject.is_some() && f.predicate.is_some()).collect();
        if !keyed.is_empty() {
            let subjects: Vec<Option<String>> = keyed.iter().map(|f| f.subject.clone()).collect();
            let predicates: Vec<Option<String>> = keyed.iter().map(|f| f.predicate.clone()).collect();
            let table = crate::plans::write(
                self.client,
                crate::placement::sql_for(&self.user, LOAD_KEYS)?,
                &[self.user.clone().into(), subjects.into(), predicates.into()],
            )
            .map_err(spi("reading the user's facts"))?;
            for r in table {
                let id: i64 = r.get(1).map_err(spi("reading id"))?.ok_or_else(|| MemoryError::not_null_column("id"))?;
                let subject: String = r.get(3).map_err(spi("reading subject"))?.ok_or_else(|| MemoryError::not_null_column("subject"))?;
                let predicate: String =
                    r.get(4).map_err(spi("reading predicate"))?.ok_or_else(|| MemoryError::not_null_column("predicate"))?;
                let state = RowState {
                    version: r.get(2).map_err(spi("reading version"))?.ok_or_else(|| MemoryError::not_null_column("version"))?,
                    active: true,
                    key: Some(self.row_key(subject, predicate, r.get::<String>(7).map_err(spi("reading object_key"))?)),
                    content: None,
                    object: r.get(5).map_err(spi("reading object"))?,
                };
                self.remember(Slot::Existing(id), state);
            }
        }
        let texts: Vec<Option<String>> =
            facts.iter().filter(|f| f.subject.is_none() && f.predicate.is_none()).filter_map(|f| f.content.clone()).map(Some).collect();
        if !texts.is_empty() {
            let table = crate::plans::write(
                self.client,
                crate::placement::sql_for(&self.user, LOAD_CONTENT)?,
                &[self.user.clone().into(), self.model.clone().into(), texts.into()],
            )
            .map_err(spi("reading the user's memories"))?;
            for r in table {
                let id: i64 = r.get(1).map_err(spi("reading id"))?.ok_or_else(|| MemoryError::not_null_column("id"))?;
                let episodic: bool = r.get(4).map_err(spi("reading kind"))?.unwrap_or(false);
                let content: String = r.get(3).map_err(spi("reading content"))?.ok_or_else(|| MemoryError::not_null_column("content"))?;
                let state = RowState {
                    version: r.get(2).map_err(spi("reading version"))?.ok_or_else(|| MemoryError::not_null_column("version"))?,
                    active: true,
                    key: None,
                    content: Some((content, episodic)),
                    object: r.get(5).map_err(spi("reading object"))?,
                };
                self.remember(Slot::Existing(id), state);
            }
        }
        let targets: Vec<i64> = facts.iter().filter_map(|f| f.target_id).collect();
        if !targets.is_empty() {
            let table = crate::plans::write(
                self.client,
                crate::placement::sql_for(&self.user, LOAD_TARGETS)?,
                &[targets.into(), self.user.clone().into()],
            )
            .map_err(spi("reading the target memories"))?;
            for r in table {
                let id: i64 = r.get(1).map_err(spi("reading id"))?.ok_or_else(|| MemoryError::not_null_column("id"))?;
                if !r.get::<bool>(4).map_err(spi("reading user_id"))?.unwrap_or(false) {
                    continue; // another user's memory: reported as not found
                }
                let subject: Option<String> = r.get(5).map_err(spi("reading subject"))?;
                let predicate: Option<String> = r.get(6).map_err(spi("reading predicate"))?;
                let object_key: Option<String> = r.get(9).map_err(spi("reading object_key"))?;
                let state = RowState {
                    version: r.get(2).map_err(spi("reading version"))?.ok_or_else(|| MemoryError::not_null_column("version"))?,
                    active: r.get(3).map_err(spi("reading active"))?.ok_or_else(|| MemoryError::not_null_column("active"))?,
                    key: subject.zip(predicate).map(|(s, p)| self.row_key(s, p, object_key)),
                    content: None,
                    object: r.get(7).map_err(spi("reading object"))?,
                };
                if state.active {
                    self.remember(Slot::Existing(id), state);
                } else {
                    self.rows.entry(Slot::Existing(id)).or_insert(state);
                }
            }
        }
        Ok(())
    }

    /// The user's active memories of this model with their unit embeddings, loaded on first use.
    fn known(&mut self) -> Result<&mut Known> {
        if self.known.is_none() {
            let mut existing = Vec::new();
            let mut table = crate::plans::read(
                self.client,
                crate::placement::sql_for(&self.user, LOAD_KNOWN)?,
                &[self.user.clone().into(), self.model.clone().into()],
            )
            .map_err(spi("reading the user's memories"))?;
            let mut found = Vec::new();
            while table.next().is_some() {
                pgrx::check_for_interrupts!();
                let id: i64 = table.get(1).map_err(spi("reading id"))?.ok_or_else(|| MemoryError::not_null_column("id"))?;
                let version: i32 = table.get(2).map_err(spi("reading version"))?.ok_or_else(|| MemoryError::not_null_column("version"))?;
                // A memory not yet embedded (agent_memory.embed_async) is matched by its key only.
                let unit = crate::vector::vector_column(&table, 3)?.map(|e| e.with_f32(&mut Vec::new(), vecmath::normalized));
                let episodic: bool = table.get(4).map_err(spi("reading kind"))?.unwrap_or(false);
                let object: Option<String> = table.get(5).map_err(spi("reading object"))?;
                let subject: Option<String> = table.get(6).map_err(spi("reading subject"))?;
                let predicate: Option<String> = table.get(7).map_err(spi("reading predicate"))?;
                let object_key: Option<String> = table.get(8).map_err(spi("reading object_key"))?;
                let content: String =
                    table.get(9).map_err(spi("reading content"))?.ok_or_else(|| MemoryError::not_null_column("content"))?;
                let key = subject.zip(predicate.clone()).map(|(s, p)| self.row_key(s, p, object_key));
                found.push((id, RowState { version, active: true, key, content: None, object }));
                if let Some(unit) = unit {
                    existing.push(KnownRow { slot: Slot::Existing(id), episodic, unit, content, predicate });
                }
            }
            // Rows this call already retired are no candidates.
            existing.retain(|k| self.rows.get(&k.slot).is_none_or(|r| r.active));
            for (id, state) in found {
                self.rows.entry(Slot::Existing(id)).or_insert(state);
            }
            let mut known = Known { existing, recent: std::collections::VecDeque::new() };
            for (i, n) in self.new_rows.iter().enumerate().filter(|(_, n)| n.active) {
                known.push_new(KnownRow {
                    slot: Slot::New(i),
                    episodic: n.kind == "episodic",
                    unit: n.unit.clone(),
                    content: n.content.clone(),
                    predicate: n.predicate.clone(),
                });
            }
            self.known = Some(known);
        }
        Ok(self.known.as_mut().expect("loaded above"))
    }

    fn as_match(&self, slot: Slot, by: MatchKind) -> Option<(Slot, Match)> {
        let r = self.rows.get(&slot)?;
        let id = match slot {
            Slot::Existing(id) => id,
            Slot::New(i) => -(i as i64) - 1,
        };
        Some((slot, Match { id, version: r.version, object: r.object.clone(), by }))
    }

    /// The similarity fallback of a structured fact: the most similar active memory of the same
    /// kind at or above `threshold` that is free text or a fact of the same predicate (never one
    /// of another predicate: different predicates are different facts). A many-valued
    /// predicate's values are told apart by their key, so only free text is a candidate.
    fn similar_fact(&mut self, unit: &[f32], episodic: bool, predicate: &str, threshold: f64) -> Result<Option<(Slot, Match)>> {
        let many = self.many.contains(predicate);
        let known = self.known()?;
        let candidates: Vec<&KnownRow> = known
            .existing
            .iter()
            .chain(known.recent.iter())
            .filter(|m| m.episodic == episodic && (m.predicate.is_none() || (!many && m.predicate.as_deref() == Some(predicate))))
            .collect();
        let mut checked = 0usize;
        let best = most_similar(
            candidates.iter().map(|m| {
                checked += 1;
                if checked.is_multiple_of(4096) {
                    pgrx::check_for_interrupts!();
                }
                vecmath::dot(unit, &m.unit)
            }),
            threshold,
        );
        let found = best.map(|(i, s)| (candidates[i].slot, s));
        Ok(found.and_then(|(slot, s)| self.as_match(slot, MatchKind::Similarity(s))))
    }

    /// The similarity fallback of free text: the most similar active memory of the same kind that
    /// says the same thing (the same polarity, and a cosine of at least the merge threshold, or a
    /// little less with nearly the same words) or contradicts it (the opposite polarity about the
    /// same words: `agent_memory_core::polarity`).
    fn similar_text(&mut self, unit: &[f32], episodic: bool, content: &str) -> Result<Option<(Slot, Match)>> {
        let merge = self.merge_similarity;
        let floor = agent_memory_core::polarity::CONTRADICTION_COSINE.min(merge - 0.07);
        let known = self.known()?;
        let mut best: Option<(Slot, f64, Relation)> = None;
        let mut checked = 0usize;
        for m in known.existing.iter().chain(known.recent.iter()).filter(|m| m.episodic == episodic) {
            checked += 1;
            if checked.is_multiple_of(4096) {
                pgrx::check_for_interrupts!();
            }
            let cosine = vecmath::dot(unit, &m.unit);
            if cosine < floor || best.is_some_and(|(_, b, _)| cosine < b) {
                continue;
            }
            match relate(&m.content, content, cosine, merge) {
                Relation::Unrelated => {}
                r => best = Some((m.slot, cosine, r)),
            }
        }
        Ok(best.and_then(|(slot, cosine, r)| {
            let by = if r == Relation::Contradiction { MatchKind::Contradiction(cosine) } else { MatchKind::Similarity(cosine) };
            self.as_match(slot, by)
        }))
    }

    /// Records a new row for `fact`; returns its slot.
    fn add(&mut self, fact_index: usize, fact: &Fact, kind: &str, unit: Vec<f32>, version: i32) -> Slot {
        let slot = Slot::New(self.new_rows.len());
        let episodic = kind == "episodic";
        let structured = fact.subject.is_some() && fact.predicate.is_some();
        let key = match (&fact.subject, &fact.predicate) {
            (Some(s), Some(p)) => Some(self.key_of(s, p, fact.object.as_deref())),
            _ => None,
        };
        let state = RowState {
            version,
            active: true,
            key,
            content: if structured { None } else { fact.content.clone().map(|c| (c, episodic)) },
            object: fact.object.clone(),
        };
        let content = fact.content.clone().unwrap_or_default();
        if let Some(k) = self.known.as_mut().filter(|_| !unit.is_empty()) {
            k.push_new(KnownRow { slot, episodic, unit: unit.clone(), content: content.clone(), predicate: fact.predicate.clone() });
        }
        self.new_rows.push(NewRow {
            fact_index,
            kind: kind.to_string(),
            unit,
            content,
            predicate: fact.predicate.clone(),
            importance: fact.importance,
            base_importance: fact
                .importance
                .unwrap_or_else(|| gucs::importance_rule().importance_of(episodic, fact.content.as_deref().unwrap_or_default()) as f32),
            version,
            active: true,
            retired_reason: None,
            superseded_by: None,
        });
        self.remember(slot, state);
        slot
    }

    /// Retires a row; returns where its version will come from.
    fn retire_slot(&mut self, slot: Slot, reason: &'static str, superseded_by: Option<Slot>) -> VersionOf {
        let Some(state) = self.rows.get_mut(&slot) else { return VersionOf::Null };
        state.active = false;
        state.version += 1;
        let (key, content, version) = (state.key.clone(), state.content.clone(), state.version);
        if let Some(k) = key {
            if self.by_key.get(&k) == Some(&slot) {
                self.by_key.remove(&k);
            }
        }
        if let Some(c) = content {
            if self.by_content.get(&c) == Some(&slot) {
                self.by_content.remove(&c);
            }
        }
        if let Some(k) = self.known.as_mut() {
            k.remove(slot);
        }
        match slot {
            Slot::Existing(id) => {
                self.reinforce.remove(&id);
                self.retire.push((id, version - 1, reason, superseded_by));
                VersionOf::Existing(id)
            }
            Slot::New(i) => {
                let row = &mut self.new_rows[i];
                row.active = false;
                row.retired_reason = Some(reason);
                row.superseded_by = superseded_by;
                row.version = version;
                VersionOf::Fixed(version)
            }
        }
    }

    /// Reinforces a row; a restatement applies the caller's `expires_at` and `valid_until`.
    fn reinforce_slot(&mut self, slot: Slot, fact: &Fact) -> VersionOf {
        match slot {
            Slot::Existing(id) => {
                let version = self.rows.get(&slot).map(|r| r.version).unwrap_or(1);
                let entry = self.reinforce.entry(id).or_insert((version, 0, None, None));
                entry.1 += 1;
                if fact.expires_at.is_some() {
                    entry.2 = fact.expires_at.clone();
                }
                if fact.valid_until.is_some() {
                    entry.3 = fact.valid_until.clone();
                }
                VersionOf::Existing(id)
            }
            Slot::New(i) => {
                let row = &mut self.new_rows[i];
                row.base_importance = (row.base_importance + 0.1).min(1.0);
                row.importance = Some(row.base_importance);
                VersionOf::Fixed(row.version)
            }
        }
    }

    fn version_now(&self, slot: Slot) -> VersionOf {
        match slot {
            Slot::Existing(id) if !self.reinforce.contains_key(&id) => {
                VersionOf::Fixed(self.rows.get(&slot).map(|r| r.version).unwrap_or(1))
            }
            Slot::Existing(id) => VersionOf::Existing(id),
            Slot::New(i) => VersionOf::Fixed(self.new_rows[i].version),
        }
    }

    /// Decides one fact against the in-memory view.
    fn decide_one(&mut self, index: usize, fact: &Fact) -> Result<Pending> {
        pgrx::check_for_interrupts!();
        fact.check_text()?;
        let structured = check_key(fact)?;
        let kind = fact.kind.clone().unwrap_or_else(|| "semantic".to_string());
        let episodic = check_kind(&kind)?;
        if let Some(i) = fact.importance {
            if !(0.0..=1.0).contains(&i) {
                return Err(MemoryError::invalid_parameter(format!("importance must be between 0 and 1, not {i}"))
                    .hint("Leave importance NULL to have it derived from the content."));
            }
        }
        // An empty emb: the background worker embeds the content (agent_memory.embed_async), and
        // this fact is matched by its key and exact content only.
        let unit = match &fact.emb {
            Some(e) if e.is_empty() => Some(Vec::new()),
            Some(e) => Some(self.unit(e)?),
            None => None,
        };
        let similar = unit.as_ref().filter(|u| !u.is_empty());
        if let Some(action) = &fact.action {
            let action = action.parse::<Action>().map_err(|e| {
                MemoryError::invalid_parameter(e.to_string())
                    .hint("Use one of ADD, UPDATE, DELETE, NONE, or leave action NULL to let reconcile decide.")
            })?;
            return self.decided(index, fact, action, &kind, unit, structured);
        }
        if fact.target_id.is_some() || fact.expected_version.is_some() {
            return Err(MemoryError::invalid_parameter("target_id and expected_version need an action")
                .hint("Pass action => 'UPDATE', 'DELETE' or 'NONE' with them, or leave all three out."));
        }

        let mut found = None;
        if structured {
            let (subject, predicate) = (fact.subject.clone().unwrap_or_default(), fact.predicate.clone().unwrap_or_default());
            let key = self.key_of(&subject, &predicate, fact.object.as_deref());
            if let Some(&slot) = self.by_key.get(&key) {
                found = self.as_match(slot, MatchKind::Key);
            }
            // A many-valued predicate's negated value ("not peanuts") supersedes that value.
            if found.is_none() && !fact.negate && self.many.contains(&predicate) {
                if let Some(value) = fact.object.as_deref().and_then(negated_value) {
                    let negated = self.key_of(&subject, &predicate, Some(&value));
                    if let Some(&slot) = self.by_key.get(&negated) {
                        found = self.as_match(slot, MatchKind::Key);
                    }
                }
            }
            if found.is_none() {
                if let Some(u) = similar {
                    found = self.similar_fact(u, episodic, &predicate, self.reconcile_similarity)?;
                }
            }
        } else if let Some(content) = &fact.content {
            if let Some(&slot) = self.by_content.get(&(content.clone(), episodic)) {
                found = self.as_match(slot, MatchKind::ContentHash);
            }
            if found.is_none() {
                if let Some(u) = similar {
                    found = self.similar_text(u, episodic, content)?;
                }
            }
        }
        let (slot, m) = match found {
            Some((s, m)) => (Some(s), Some(m)),
            None => (None, None),
        };
        let need_emb = || {
            MemoryError::null_value("emb must not be NULL when the fact is new or changed")
                .hint("Pass the embedding of the fact's content.")
        };
        let need_content =
            || MemoryError::null_value("content must not be NULL").hint("Pass the memory as text, as it is given to the model.");
        let pending = match decide(structured, fact.object.as_deref(), fact.negate, m) {
            Decision::Add => {
                let u = unit.ok_or_else(need_emb)?;
                fact.content.as_ref().ok_or_else(need_content)?;
                let new = self.add(index, fact, &kind, u, 1);
                Pending { action: Action::Add, memory: Some(new), previous: None, version: VersionOf::Fixed(1) }
            }
            Decision::Update { old } => {
                let u = unit.ok_or_else(need_emb)?;
                fact.content.as_ref().ok_or_else(need_content)?;
                let old_slot = slot.expect("a match has a slot");
                let version = old.version + 1;
                let new_slot = Slot::New(self.new_rows.len());
                self.retire_slot(old_slot, "superseded", Some(new_slot));
                let new = self.add(index, fact, &kind, u, version);
                Pending { action: Action::Update, memory: Some(new), previous: Some(old_slot), version: VersionOf::Fixed(version) }
            }
            Decision::Delete { .. } => {
                let old_slot = slot.expect("a match has a slot");
                let version = self.retire_slot(old_slot, "deleted", None);
                Pending { action: Action::Delete, memory: Some(old_slot), previous: None, version }
            }
            Decision::Reinforce { .. } => {
                let old_slot = slot.expect("a match has a slot");
                let version = self.reinforce_slot(old_slot, fact);
                Pending { action: Action::None, memory: Some(old_slot), previous: None, version }
            }
            Decision::Unchanged { old } => match (slot, old) {
                (Some(s), Some(_)) => Pending { action: Action::None, memory: Some(s), previous: None, version: self.version_now(s) },
                _ => Pending { action: Action::None, memory: None, previous: None, version: VersionOf::Null },
            },
        };
        if structured {
            self.retire_strays(fact, &pending);
        }
        Ok(pending)
    }

    /// Applies an action the caller decided, as a conditional update of `target_id` at
    /// `expected_version`. A stale version changes nothing and returns NONE with a NULL version.
    fn decided(
        &mut self,
        index: usize,
        fact: &Fact,
        action: Action,
        kind: &str,
        unit: Option<Vec<f32>>,
        structured: bool,
    ) -> Result<Pending> {
        let need_emb =
            || MemoryError::null_value(format!("emb must not be NULL for {action}")).hint("Pass the embedding of the fact's content.");
        let need_content =
            || MemoryError::null_value("content must not be NULL").hint("Pass the memory as text, as it is given to the model.");
        if action == Action::Add {
            let u = unit.ok_or_else(need_emb)?;
            fact.content.as_ref().ok_or_else(need_content)?;
            if structured {
                let key = self.key_of(
                    fact.subject.as_deref().unwrap_or_default(),
                    fact.predicate.as_deref().unwrap_or_default(),
                    fact.object.as_deref(),
                );
                if let Some(&slot) = self.by_key.get(&key) {
                    let (what, version) = match slot {
                        Slot::Existing(id) => (format!("memory {id}"), self.rows.get(&slot).map(|r| r.version).unwrap_or(1)),
                        Slot::New(i) => (format!("fact {} of this call", self.new_rows[i].fact_index + 1), self.new_rows[i].version),
                    };
                    return Err(MemoryError::new(
                        PgSqlErrorCode::ERRCODE_UNIQUE_VIOLATION,
                        format!("the user already has an active fact for this subject and predicate: {what}"),
                    )
                    .hint(match slot {
                        Slot::Existing(id) => format!("Pass action => 'UPDATE', target_id => {id}, expected_version => {version}."),
                        Slot::New(_) => "Pass action => 'UPDATE' for the later fact, or leave action NULL.".to_string(),
                    }));
                }
            }
            let new = self.add(index, fact, kind, u, 1);
            return Ok(Pending { action, memory: Some(new), previous: None, version: VersionOf::Fixed(1) });
        }
        let target = fact.target_id.ok_or_else(|| {
            MemoryError::null_value(format!("target_id must not be NULL for {action}"))
                .hint("Pass the id of the memory the action applies to.")
        })?;
        let slot = Slot::Existing(target);
        let Some(state) = self.rows.get(&slot) else {
            return Err(MemoryError::new(
                PgSqlErrorCode::ERRCODE_NO_DATA_FOUND,
                format!("memory {target} of user \"{}\" does not exist", self.user),
            )
            .hint("Pass the id of one of this user's memories."));
        };
        let (version, active) = (state.version, state.active);
        if action == Action::None {
            return Ok(Pending { action, memory: Some(slot), previous: None, version: self.version_now(slot) });
        }
        let expected = fact.expected_version.ok_or_else(|| {
            MemoryError::null_value(format!("expected_version must not be NULL for {action}"))
                .hint("Pass the version the decision was based on, so that a concurrent change is detected.")
        })?;
        if !active || version != expected || self.reinforce.contains_key(&target) {
            return Ok(Pending { action: Action::None, memory: Some(slot), previous: None, version: VersionOf::Null });
        }
        if action == Action::Delete {
            let v = self.retire_slot(slot, "deleted", None);
            return Ok(Pending { action, memory: Some(slot), previous: None, version: v });
        }
        let u = unit.ok_or_else(need_emb)?;
        fact.content.as_ref().ok_or_else(need_content)?;
        let new_slot = Slot::New(self.new_rows.len());
        self.retire_slot(slot, "superseded", Some(new_slot));
        let new = self.add(index, fact, kind, u, version + 1);
        Ok(Pending { action, memory: Some(new), previous: Some(slot), version: VersionOf::Fixed(version + 1) })
    }

    /// Writes every decision: retirements, reinforcements, then the new rows.
    fn write(&mut self, facts: &[Fact]) -> Result<(Vec<i64>, HashMap<i64, i32>)> {
        let n_new = self.new_rows.len() as i64;
        let ids: Vec<i64> = if n_new == 0 {
            Vec::new()
        } else {
            crate::plans::write(self.client, NEXT_IDS, &[n_new.into()])
                .map_err(spi("allocating ids"))?
                .map(|r| r.get::<i64>(1).ok().flatten().unwrap_or_default())
                .collect()
        };
        let id_of = |slot: Option<Slot>| -> Option<i64> {
            match slot? {
                Slot::Existing(id) => Some(id),
                Slot::New(i) => ids.get(i).copied(),
            }
        };
        let mut versions: HashMap<i64, i32> = HashMap::new();
        if !self.retire.is_empty() {
            let args = [
                self.retire.iter().map(|r| r.0).collect::<Vec<i64>>().into(),
                self.retire.iter().map(|r| r.1).collect::<Vec<i32>>().into(),
                self.retire.iter().map(|r| Some(r.2.to_string())).collect::<Vec<Option<String>>>().into(),
                self.retire.iter().map(|r| id_of(r.3)).collect::<Vec<Option<i64>>>().into(),
                self.user.clone().into(),
            ];
            let table = crate::plans::write(self.client, crate::placement::sql_for(&self.user, RETIRE_MANY)?, &args)
                .map_err(spi("retiring memories"))?;
            for r in table {
                versions.insert(
                    r.get(1).map_err(spi("reading id"))?.unwrap_or_default(),
                    r.get(2).map_err(spi("reading version"))?.unwrap_or(1),
                );
            }
            if versions.len() != self.retire.len() {
                return Err(conflict());
            }
        }
        if !self.reinforce.is_empty() {
            let items: Vec<Reinforced> = self.reinforce.iter().map(|(id, (v, n, e, u))| (*id, *v, *n, e.clone(), u.clone())).collect();
            let args = [
                items.iter().map(|r| r.0).collect::<Vec<i64>>().into(),
                items.iter().map(|r| r.1).collect::<Vec<i32>>().into(),
                items.iter().map(|r| r.2).collect::<Vec<i32>>().into(),
                items.iter().map(|r| r.3.clone()).collect::<Vec<Option<String>>>().into(),
                items.iter().map(|r| r.4.clone()).collect::<Vec<Option<String>>>().into(),
                self.user.clone().into(),
            ];
            let table = crate::plans::write(self.client, crate::placement::sql_for(&self.user, REINFORCE_MANY)?, &args)
                .map_err(spi("reinforcing memories"))?;
            let mut n = 0;
            for r in table {
                versions.insert(
                    r.get(1).map_err(spi("reading id"))?.unwrap_or_default(),
                    r.get(2).map_err(spi("reading version"))?.unwrap_or(1),
                );
                n += 1;
            }
            if n != items.len() {
                return Err(conflict());
            }
        }
        if !self.new_rows.is_empty() {
            let rows = &self.new_rows;
            let f = |r: &NewRow| &facts[r.fact_index];
            let args = [
                self.user.clone().into(),
                self.model.clone().into(),
                ids.clone().into(),
                rows.iter().map(|r| Some(r.kind.clone())).collect::<Vec<Option<String>>>().into(),
                rows.iter().map(|r| f(r).subject.clone()).collect::<Vec<Option<String>>>().into(),
                rows.iter().map(|r| f(r).predicate.clone()).collect::<Vec<Option<String>>>().into(),
                rows.iter().map(|r| f(r).object.clone()).collect::<Vec<Option<String>>>().into(),
                rows.iter().map(|r| f(r).content.clone()).collect::<Vec<Option<String>>>().into(),
                new_vector_array(&rows.iter().map(|r| r.unit.clone()).collect::<Vec<_>>())?,
                rows.iter().map(|r| r.importance).collect::<Vec<Option<f32>>>().into(),
                rows.iter().map(|r| f(r).protected).collect::<Vec<Option<bool>>>().into(),
                rows.iter().map(|r| f(r).source.clone()).collect::<Vec<Option<String>>>().into(),
                rows.iter().map(|r| f(r).source_turn_id).collect::<Vec<Option<i64>>>().into(),
                rows.iter().map(|r| f(r).expires_at.clone()).collect::<Vec<Option<String>>>().into(),
                rows.iter().map(|r| f(r).valid_until.clone()).collect::<Vec<Option<String>>>().into(),
                rows.iter().map(|r| f(r).metadata.clone().map(JsonB)).collect::<Vec<Option<JsonB>>>().into(),
                rows.iter().map(|r| r.version).collect::<Vec<i32>>().into(),
                rows.iter().map(|r| r.active).collect::<Vec<bool>>().into(),
                rows.iter().map(|r| r.retired_reason.map(str::to_string)).collect::<Vec<Option<String>>>().into(),
                rows.iter().map(|r| id_of(r.superseded_by)).collect::<Vec<Option<i64>>>().into(),
                rows.iter().map(|r| f(r).task_id.clone()).collect::<Vec<Option<String>>>().into(),
            ];
            crate::plans::write(self.client, crate::placement::sql_for(&self.user, INSERT_MANY)?, &args)
                .map_err(spi("writing the memories"))?;
        }
        Ok((ids, versions))
    }

    /// Checks every fact's `expires_at` and `valid_until` before anything is decided, whatever
    /// the fact turns out to be (a restatement applies them too, a duplicate of the call ignores
    /// them): a bad time fails the call, naming the fact.
    fn check_times(&mut self, facts: &[Fact]) -> Result<()> {
        let times: Vec<(usize, &'static str, &String)> = facts
            .iter()
            .enumerate()
            .flat_map(|(i, f)| [(i, "expires_at", &f.expires_at), (i, "valid_until", &f.valid_until)])
            .filter_map(|(i, name, t)| t.as_ref().map(|t| (i, name, t)))
            .collect();
        if times.is_empty() {
            return Ok(());
        }
        let texts: Vec<Option<String>> = times.iter().map(|t| Some(t.2.clone())).collect();
        let bad: Option<i32> =
            first_value(crate::plans::read(self.client, FIRST_BAD_TIME, &[texts.into()]).map_err(spi("checking the facts' times"))?)
                .map_err(spi("checking the facts' times"))?;
        match bad.and_then(|b| times.get((b as usize).wrapping_sub(1))) {
            None => Ok(()),
            Some((i, name, text)) => Err(MemoryError::new(
                PgSqlErrorCode::ERRCODE_INVALID_DATETIME_FORMAT,
                format!("fact {}: {name} is not a time: \"{text}\"", i + 1),
            )
            .hint("Pass a time as timestamptz reads it, such as '2027-01-31 12:00+00', 'tomorrow' or 'infinity'; leave it out for the default.")),
        }
    }

    /// Reconciles `facts` in order; returns one outcome per fact.
    pub fn reconcile(&mut self, facts: &[Fact]) -> Result<Vec<Outcome>> {
        self.check_times(facts)?;
        let mut owned: Vec<Fact> = facts.to_vec();
        self.predicates(&mut owned)?;
        let facts = &owned[..];
        self.load(facts)?;
        let pending: Vec<Pending> = facts.iter().enumerate().map(|(i, f)| self.decide_one(i, f)).collect::<Result<_>>()?;
        let (ids, versions) = self.write(facts)?;
        let id_of = |slot: Option<Slot>| -> Option<i64> {
            match slot? {
                Slot::Existing(id) => Some(id),
                Slot::New(i) => ids.get(i).copied(),
            }
        };
        Ok(pending
            .into_iter()
            .map(|p| Outcome {
                action: p.action,
                memory_id: id_of(p.memory),
                previous_id: id_of(p.previous),
                version: match p.version {
                    VersionOf::Fixed(v) => Some(v),
                    VersionOf::Existing(id) => versions.get(&id).copied().or_else(|| self.rows.get(&Slot::Existing(id)).map(|r| r.version)),
                    VersionOf::Null => None,
                },
            })
            .collect())
    }
}

/// Checks the key parts of a fact; returns whether it is structured.
fn check_key(fact: &Fact) -> Result<bool> {
    let blank = |s: &Option<String>| s.as_deref().is_some_and(|s| s.trim().is_empty());
    if blank(&fact.subject) || blank(&fact.predicate) {
        return Err(
            MemoryError::invalid_parameter("subject and predicate must not be empty").hint("Pass NULL for both to write free text.")
        );
    }
    match (&fact.subject, &fact.predicate) {
        (Some(_), Some(_)) => {
            if fact.object.is_none() && !fact.negate && fact.action.is_none() {
                return Err(MemoryError::null_value("object must not be NULL for a fact with a subject and a predicate")
                    .hint("Pass the fact's value as object, or negate => true to say the fact no longer holds."));
            }
            Ok(true)
        }
        (None, None) => {
            if fact.content.is_none() && !fact.negate {
                return Err(
                    MemoryError::null_value("content must not be NULL").hint("Pass the memory as text, as it is given to the model.")
                );
            }
            Ok(false)
        }
        (s, _) => Err(MemoryError::null_value(format!(
            "{} must not be NULL when {} is given",
            if s.is_some() { "predicate" } else { "subject" },
            if s.is_some() { "subject" } else { "predicate" }
        ))
        .hint("A fact's key is (subject, predicate): pass both, or neither for free text.")),
    }
}

/// Whether the server embeds a fact's content: it has content and no `emb`, and may be written
/// (a fact that only negates, or a DELETE or NONE the caller decided, needs no embedding).
fn needs_embedding(f: &Fact) -> bool {
    let decided_without = f.action.as_deref().is_some_and(|a| a.eq_ignore_ascii_case("delete") || a.eq_ignore_ascii_case("none"));
    f.emb.is_none() && f.content.is_some() && !f.negate && !decided_without
}

/// The model of a call: the one it names; else, when its facts come as text only (no `emb`),
/// `agent_memory.text_model`; else `agent_memory.default_model`.
fn call_model(model: Option<&str>, facts: &[Fact]) -> Result<String> {
    if model.is_none() && facts.iter().any(needs_embedding) && facts.iter().all(|f| f.emb.is_none()) {
        return crate::embedder::text_model(None);
    }
    resolve_model(model)
}

/// The facts of a call, reconciled in order; returns one outcome per fact. A fact given as text
/// (content without `emb`) is embedded by the server with the call's model first.
pub fn reconcile_all(user_id: Option<&str>, model: Option<&str>, facts: &[Fact]) -> Result<Vec<Outcome>> {
    let user = check_user(user_id)?.to_string();
    let model = call_model(model, facts)?;
    // An empty emb below marks a fact the worker embeds later: one the caller passed is refused.
    for f in facts {
        if let Some(e) = f.emb.as_ref().filter(|e| e.is_empty()) {
            crate::vector::check_dims(e.len(), "emb")?;
        }
    }
    Spi::connect_mut(|client| {
        crate::version::require_current_schema(client)?;
        let texts: Vec<(usize, &str)> = facts
            .iter()
            .enumerate()
            .filter(|(_, f)| needs_embedding(f))
            .filter_map(|(i, f)| f.content.as_deref().map(|c| (i, c)))
            .collect();
        let mut embedded;
        let facts = if texts.is_empty() {
            facts
        } else {
            // Under agent_memory.embed_async the rows are written without an embedding (an empty
            // one here), for the background worker; a model without files is refused now.
            let vectors = if gucs::embed_async() && crate::embedder::has_files(client, &model)? {
                vec![Vec::new(); texts.len()]
            } else {
                crate::embedder::embed(client, &model, &texts.iter().map(|t| t.1).collect::<Vec<_>>(), crate::embedder::Scope::User(&user))?
            };
            embedded = facts.to_vec();
            for ((i, _), v) in texts.iter().zip(vectors) {
                embedded[*i].emb = Some(v);
            }
            &embedded[..]
        };
        let mut r = Reconciler::new(client, &user, &model)?;
        r.reconcile(facts)
    })
}

fn optional_time(t: Option<TimestampWithTimeZone>) -> Option<String> {
    t.map(|t| t.to_string())
}

/// Defines one SQL overload of `memory_reconcile` for an embedding type.
macro_rules! memory_reconcile_for {
    ($(#[$doc:meta])* $rust_name:ident, [$($emb:tt)*]) => {
        $(#[$doc])*
        #[allow(clippy::too_many_arguments)]
        #[pg_extern(volatile, parallel_unsafe, name = "memory_reconcile")]
        #[search_path(pg_catalog, pg_temp)]
        fn $rust_name(
            user_id: Option<&str>,
            subject: Option<String>,
            predicate: Option<String>,
            object: Option<String>,
            content: Option<String>,
            emb: $($emb)*,
            kind: default!(Option<String>, "'semantic'"),
            model: default!(Option<&str>, "NULL"),
            importance: default!(Option<f32>, "NULL"),
            protected: default!(Option<bool>, false),
            negate: default!(Option<bool>, false),
            source: default!(Option<String>, "NULL"),
            source_turn_id: default!(Option<i64>, "NULL"),
            expires_at: default!(Option<TimestampWithTimeZone>, "NULL"),
            valid_until: default!(Option<TimestampWithTimeZone>, "NULL"),
            metadata: default!(Option<JsonB>, "NULL"),
            action: default!(Option<String>, "NULL"),
            target_id: default!(Option<i64>, "NULL"),
            expected_version: default!(Option<i32>, "NULL"),
            cardinality: default!(Option<String>, "NULL"),
            task_id: default!(Option<String>, "NULL"),
        ) -> TableIterator<
            'static,
            (name!(action, String), name!(memory_id, Option<i64>), name!(previous_id, Option<i64>), name!(version, Option<i32>)),
        > {
            let emb = emb.map(|e| e.into_vector_datum().or_raise().to_f32_vec());
            let fact = Fact {
                subject,
                predicate,
                object,
                content,
                emb,
                kind,
                importance,
                protected,
                negate: negate.unwrap_or(false),
                source,
                source_turn_id,
                expires_at: optional_time(expires_at),
                valid_until: optional_time(valid_until),
                metadata: metadata.map(|j| j.0),
                action,
                target_id,
                expected_version,
                cardinality,
                task_id,
            };
            let out = reconcile_all(user_id, model, std::slice::from_ref(&fact)).or_raise();
            TableIterator::new(out.into_iter().map(|o| (o.action.name().to_string(), o.memory_id, o.previous_id, o.version)))
        }
    };
}

memory_reconcile_for!(
    /// Reconciles one candidate fact with the user's memories and returns what it did: ADD (a new
    /// memory), UPDATE (a new memory superseding `previous_id`), DELETE (`memory_id` retired, with
    /// `negate => true`), or NONE (an existing memory reinforced, or nothing to do). A caller that
    /// already decided passes `action`, `target_id` and `expected_version`; a stale version then
    /// changes nothing and returns NONE with a NULL version. Without `emb` (the fifth argument
    /// last: `memory_reconcile('user-07', 'user', 'editor', 'neovim', 'Prefers neovim')`), the
    /// server embeds `content` with `model`, else `agent_memory.text_model` (all-MiniLM-L6-v2).
    reconcile_vector,
    [default!(Option<Vector>, "NULL")]
);

memory_reconcile_for!(
    /// `memory_reconcile` with a `halfvec` embedding.
    reconcile_halfvec,
    [Option<HalfVec>]
);

memory_reconcile_for!(
    /// `memory_reconcile` with an embedding in pgvector's text syntax (`'[0.1, 0.2, ...]'`).
    reconcile_text,
    [Option<&str>]
);

/// Parses a batch of facts from JSON text.
fn parse_facts(text: &str) -> Result<Vec<Fact>> {
    serde_json::from_str(text).map_err(bad_facts)
}

fn bad_facts(e: serde_json::Error) -> MemoryError {
    if e.to_string().starts_with("recursion limit exceeded") {
        return MemoryError::new(PgSqlErrorCode::ERRCODE_STATEMENT_TOO_COMPLEX, "facts: the JSON is nested too deeply")
            .detail("A batch's JSON may nest at most 128 levels (the array, the fact, and its metadata).")
            .hint("Flatten the facts' metadata.");
    }
    MemoryError::new(PgSqlErrorCode::ERRCODE_INVALID_TEXT_REPRESENTATION, format!("facts: {e}")).hint(
        "Pass a JSON array of objects such as {\"subject\": \"user\", \"predicate\": \"editor\", \"object\": \"neovim\", \"content\": \"Prefers neovim\", \"emb\": [0.1, 0.2]}.",
    )
}

fn facts_null() -> MemoryError {
    MemoryError::null_value("facts must not be NULL").hint("Pass a JSON array of fact objects.")
}

type BatchRow = (i32, String, Option<i64>, Option<i64>, Option<i32>);

fn batch_rows(user_id: Option<&str>, model: Option<&str>, facts: Result<Vec<Fact>>) -> Vec<BatchRow> {
    let facts = facts.or_raise();
    let max = gucs::max_batch_facts();
    if facts.len() > max {
        MemoryError::new(
            PgSqlErrorCode::ERRCODE_PROGRAM_LIMIT_EXCEEDED,
            format!("the batch has {} facts, more than the limit of {max}", facts.len()),
        )
        .hint("Split the batch, or ask an administrator to raise agent_memory.max_batch_facts.")
        .raise();
    }
    reconcile_all(user_id, model, &facts)
        .or_raise()
        .into_iter()
        .enumerate()
        .map(|(i, o)| (i as i32 + 1, o.action.name().to_string(), o.memory_id, o.previous_id, o.version))
        .collect()
}

/// Defines one SQL overload of `memory_reconcile_batch` for a type of JSON input.
macro_rules! memory_reconcile_batch_for {
    ($(#[$doc:meta])* $rust_name:ident, $facts:ty, $parse:expr) => {
        $(#[$doc])*
        #[pg_extern(volatile, parallel_unsafe, name = "memory_reconcile_batch")]
        #[search_path(pg_catalog, pg_temp)]
        fn $rust_name(
            user_id: Option<&str>,
            facts: Option<$facts>,
            model: default!(Option<&str>, "NULL"),
        ) -> TableIterator<
            'static,
            (
                name!(ordinal, i32),
                name!(action, String),
                name!(memory_id, Option<i64>),
                name!(previous_id, Option<i64>),
                name!(version, Option<i32>),
            ),
        > {
            let parse: fn($facts) -> Result<Vec<Fact>> = $parse;
            let facts = facts.ok_or_else(facts_null).and_then(parse);
            TableIterator::new(batch_rows(user_id, model, facts))
        }
    };
}

memory_reconcile_batch_for!(
    /// Reconciles many facts of one user in one call, in order: a JSON array of objects with the
    /// keys subject, predicate, object, content, emb (an array of numbers), kind, importance,
    /// protected, negate, source, source_turn_id, expires_at, valid_until, metadata, action,
    /// target_id, expected_version. Returns one row per fact, in input order, numbered from 1.
    /// All facts are decided first, then written in at most three statements.
    memory_reconcile_batch,
    crate::json::JsonbText,
    |j| parse_facts(&j.0)
);

memory_reconcile_batch_for!(
    /// `memory_reconcile_batch` for `json` input: parsed once, the fastest form for large batches.
    memory_reconcile_batch_json,
    crate::json::JsonText,
    |j| parse_facts(&j.0)
);

memory_reconcile_batch_for!(
    /// `memory_reconcile_batch` for JSON given as text (an untyped literal or parameter).
    memory_reconcile_batch_text,
    &str,
    |t| parse_facts(t)
);
