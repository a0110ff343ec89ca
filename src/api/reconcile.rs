//! `memory_reconcile(user_id, subject, predicate, object, content, emb, ...)` and
//! `memory_reconcile_batch(user_id, facts jsonb, ...)`: turning candidate facts into ADD /
//! UPDATE / DELETE / NONE, server-side.
//!
//! Every call takes a transaction-scoped advisory lock on the user, so reconciliations of one
//! user run one at a time (other users are not held up), and the partial unique index
//! `memories_one_active_fact` guarantees one active row per (user, subject, predicate) even
//! against writes that bypass this function. The decision itself is
//! `agent_memory_core::reconcile::decide`.

use agent_memory_core::reconcile::{decide, most_similar, Action, Decision, Match, MatchKind};
use agent_memory_core::vecmath;
use pgrx::datum::{JsonB, TimestampWithTimeZone};
use pgrx::prelude::*;
use pgrx::spi::SpiClient;
use pgrx::PgSqlErrorCode;
use serde::Deserialize;

use crate::api::policy::check_kind;
use crate::api::recall::{check_user, resolve_model};
use crate::error::{first_value, spi, MemoryError, OrRaise, Result};
use crate::gucs;
use crate::vector::{new_vector_datum, vector_type_oid, HalfVec, IntoVectorDatum, Vector, VectorDatum};

/// One candidate fact, from the single-fact call or one element of a batch.
#[derive(Debug, Default, Deserialize)]
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

/// What one fact did: the contract's four columns.
#[derive(Debug, Clone, Copy)]
pub struct Outcome {
    pub action: Action,
    pub memory_id: Option<i64>,
    pub previous_id: Option<i64>,
    pub version: Option<i32>,
}

/// A memory of the user held in memory during one call, for the similarity fallback.
struct Known {
    id: i64,
    version: i32,
    episodic: bool,
    object: Option<String>,
    unit: Vec<f32>,
}

const LOCK_USER: &str = "SELECT pg_catalog.pg_advisory_xact_lock(pg_catalog.hashtextextended('agent_memory.user:' || $1, 0))";
const MODEL_DIMS: &str = "SELECT dimensions FROM agent_memory.embedding_models WHERE name = $1";
const BY_KEY: &str = "SELECT id, version, object FROM agent_memory.memories \
     WHERE user_id = $1 AND subject = $2 AND predicate = $3 AND active FOR UPDATE";
const BY_CONTENT: &str = "SELECT id, version, object FROM agent_memory.memories \
     WHERE user_id = $1 AND md5(content) = md5($2) AND content = $2 AND active \
       AND embedding_model = $3 AND kind = $4 ORDER BY id DESC LIMIT 1";
const LOAD_KNOWN: &str = "SELECT id, version, emb, kind = 'episodic', object FROM agent_memory.memories \
     WHERE user_id = $1 AND embedding_model = $2 AND active ORDER BY id";
const TARGET: &str = "SELECT id, version, active, user_id, object FROM agent_memory.memories WHERE id = $1 FOR UPDATE";
const NEXT_ID: &str = "SELECT nextval(pg_catalog.pg_get_serial_sequence('agent_memory.memories', 'id'))";
const INSERT: &str = "INSERT INTO agent_memory.memories \
     (id, user_id, kind, subject, predicate, object, content, emb, embedding_model, importance, protected, \
      source, source_turn_id, expires_at, valid_until, metadata, version) \
     VALUES (coalesce($1, nextval(pg_catalog.pg_get_serial_sequence('agent_memory.memories', 'id'))), \
             $2, $3, $4, $5, $6, $7, $8, $9, $10, coalesce($11, false), $12, $13, \
             $14::timestamptz, $15::timestamptz, coalesce($16, '{}'::jsonb), $17) \
     RETURNING id, version";
const RETIRE: &str = "UPDATE agent_memory.memories \
        SET active = false, retired_reason = $3, retired_at = now(), superseded_by = $4 \
      WHERE id = $1 AND version = $2 AND active RETURNING version";
const REINFORCE: &str = "UPDATE agent_memory.memories m \
        SET importance = least(1, m.importance + 0.1), hit_count = m.hit_count + 1, last_hit_at = now(), \
            expires_at = CASE WHEN m.protected THEN NULL ELSE \
                (SELECT CASE WHEN r IS NULL THEN NULL ELSE greatest(m.expires_at, now() + r) END \
                   FROM agent_memory.memory_retention(m.kind, least(1, m.importance + 0.1)::real, m.protected) r) END \
      WHERE m.id = $1 AND m.version = $2 AND m.active RETURNING m.version";

/// Reconciles the facts of one user, one at a time, in order.
pub struct Reconciler<'a, 'c> {
    client: &'a mut SpiClient<'c>,
    user: String,
    model: String,
    vector_oid: pg_sys::Oid,
    dims: Option<usize>,
    known: Option<Vec<Known>>,
    reconcile_similarity: f64,
    merge_similarity: f64,
}

fn conflict(what: &str) -> MemoryError {
    MemoryError::new(PgSqlErrorCode::ERRCODE_T_R_SERIALIZATION_FAILURE, format!("{what} changed while it was reconciled"))
        .hint("Retry the call.")
}

fn text_arg(s: &Option<String>) -> pgrx::datum::DatumWithOid<'static> {
    s.clone().into()
}

impl<'a, 'c> Reconciler<'a, 'c> {
    /// Locks the user and reads the model's dimension.
    pub fn new(client: &'a mut SpiClient<'c>, user: &str, model: &str) -> Result<Self> {
        client.update(LOCK_USER, None, &[user.into()]).map_err(spi("locking the user"))?;
        let dims = first_value::<i32>(client.select(MODEL_DIMS, None, &[model.into()]).map_err(spi("reading the model's dimension"))?)
            .map_err(spi("reading the model's dimension"))?
            .map(|d| d as usize);
        Ok(Reconciler {
            client,
            user: user.to_string(),
            model: model.to_string(),
            vector_oid: vector_type_oid()?,
            dims,
            known: None,
            reconcile_similarity: gucs::reconcile_similarity(),
            merge_similarity: gucs::merge_similarity(),
        })
    }

    /// Checks an embedding against the model and returns it at unit length.
    fn unit(&mut self, emb: &[f32]) -> Result<Vec<f32>> {
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
            MemoryError::invalid_parameter(format!("emb: {p}")).hint("Pass the embedding of the fact's content: a non-zero vector of finite numbers.")
        })?;
        Ok(vecmath::normalized(emb))
    }

    /// The user's active memories of this model, loaded on first use.
    fn known(&mut self) -> Result<&mut Vec<Known>> {
        if self.known.is_none() {
            let mut v = Vec::new();
            let mut table = self
                .client
                .select(LOAD_KNOWN, None, &[self.user.clone().into(), self.model.clone().into()])
                .map_err(spi("reading the user's memories"))?;
            while table.next().is_some() {
                let id: i64 = table.get(1).map_err(spi("reading id"))?.unwrap_or_default();
                let version: i32 = table.get(2).map_err(spi("reading version"))?.unwrap_or(1);
                let Some(raw) = table.get_datum_by_ordinal(3).map_err(spi("reading emb"))? else { continue };
                // SAFETY: column 3 is `memories.emb`, of type `vector`.
                let emb = unsafe { VectorDatum::from_datum(raw, crate::vector::Element::F32) }?;
                let unit = vecmath::normalized(&emb.to_f32_vec());
                let episodic: bool = table.get(4).map_err(spi("reading kind"))?.unwrap_or(false);
                let object: Option<String> = table.get(5).map_err(spi("reading object"))?;
                v.push(Known { id, version, episodic, object, unit });
            }
            self.known = Some(v);
        }
        Ok(self.known.as_mut().expect("loaded above"))
    }

    fn forget_known(&mut self, id: i64) {
        if let Some(k) = self.known.as_mut() {
            k.retain(|m| m.id != id);
        }
    }

    fn learn_known(&mut self, id: i64, version: i32, episodic: bool, object: Option<String>, unit: Vec<f32>) {
        if let Some(k) = self.known.as_mut() {
            k.push(Known { id, version, episodic, object, unit });
        }
    }

    fn set_known_version(&mut self, id: i64, version: i32) {
        if let Some(m) = self.known.as_mut().and_then(|k| k.iter_mut().find(|m| m.id == id)) {
            m.version = version;
        }
    }

    /// The most similar active memory of the same kind at or above `threshold`.
    fn similar(&mut self, unit: &[f32], episodic: bool, threshold: f64) -> Result<Option<Match>> {
        let known = self.known()?;
        let same_kind: Vec<&Known> = known.iter().filter(|m| m.episodic == episodic).collect();
        let best = most_similar(same_kind.iter().map(|m| vecmath::dot(unit, &m.unit)), threshold);
        Ok(best.map(|(i, s)| Match {
            id: same_kind[i].id,
            version: same_kind[i].version,
            object: same_kind[i].object.clone(),
            by: MatchKind::Similarity(s),
        }))
    }

    fn one_match(&mut self, sql: &str, args: &[pgrx::datum::DatumWithOid], by: MatchKind) -> Result<Option<Match>> {
        let table = self.client.update(sql, None, args).map_err(spi("finding the same fact"))?;
        let mut found = None;
        for row in table {
            found = Some(Match {
                id: row.get(1).map_err(spi("reading id"))?.unwrap_or_default(),
                version: row.get(2).map_err(spi("reading version"))?.unwrap_or(1),
                object: row.get(3).map_err(spi("reading object"))?,
                by,
            });
        }
        Ok(found)
    }

    /// Inserts the fact as a new memory; returns (id, version).
    fn insert(&mut self, fact: &Fact, kind: &str, unit: &[f32], id: Option<i64>, version: Option<i32>) -> Result<(i64, i32)> {
        let content = fact.content.clone().ok_or_else(|| {
            MemoryError::null_value("content must not be NULL").hint("Pass the memory as text, as it is given to the model.")
        })?;
        // SAFETY: the datum is a fresh `vector`, passed with pgvector's type OID.
        let emb = unsafe { pgrx::datum::DatumWithOid::new(new_vector_datum(unit), self.vector_oid) };
        let args = [
            id.into(),
            self.user.clone().into(),
            kind.to_string().into(),
            text_arg(&fact.subject),
            text_arg(&fact.predicate),
            text_arg(&fact.object),
            content.into(),
            emb,
            self.model.clone().into(),
            fact.importance.into(),
            fact.protected.into(),
            text_arg(&fact.source),
            fact.source_turn_id.into(),
            text_arg(&fact.expires_at),
            text_arg(&fact.valid_until),
            fact.metadata.clone().map(JsonB).into(),
            version.into(),
        ];
        let row = self.client.update(INSERT, None, &args).map_err(|e| insert_error(e, fact))?.first();
        let id: i64 = row.get(1).map_err(spi("reading the new id"))?.unwrap_or_default();
        let version: i32 = row.get(2).map_err(spi("reading the new version"))?.unwrap_or(1);
        if self.dims.is_none() {
            self.dims = Some(unit.len());
        }
        self.learn_known(id, version, kind == "episodic", fact.object.clone(), unit.to_vec());
        Ok((id, version))
    }

    /// Retires a memory; returns its new version.
    fn retire(&mut self, old: &Match, reason: &str, superseded_by: Option<i64>) -> Result<i32> {
        let table = self
            .client
            .update(RETIRE, None, &[old.id.into(), old.version.into(), reason.into(), superseded_by.into()])
            .map_err(spi("retiring a memory"))?;
        let version = first_value::<i32>(table).map_err(spi("retiring a memory"))?;
        self.forget_known(old.id);
        version.ok_or_else(|| conflict(&format!("memory {}", old.id)))
    }

    /// Raises a memory's importance by 0.1 and counts a hit; returns its new version.
    fn reinforce(&mut self, old: &Match) -> Result<i32> {
        let table = self
            .client
            .update(REINFORCE, None, &[old.id.into(), old.version.into()])
            .map_err(spi("reinforcing a memory"))?;
        let version = first_value::<i32>(table).map_err(spi("reinforcing a memory"))?;
        let version = version.ok_or_else(|| conflict(&format!("memory {}", old.id)))?;
        self.set_known_version(old.id, version);
        Ok(version)
    }

    /// Supersedes `old` with a new memory holding the fact; returns (new id, new version).
    fn supersede(&mut self, fact: &Fact, kind: &str, unit: &[f32], old: &Match) -> Result<(i64, i32)> {
        let new_id: i64 = self
            .client
            .update(NEXT_ID, None, &[])
            .map_err(spi("allocating an id"))?
            .first()
            .get_one::<i64>()
            .map_err(spi("allocating an id"))?
            .unwrap_or_default();
        self.retire(old, "superseded", Some(new_id))?;
        self.insert(fact, kind, unit, Some(new_id), Some(old.version + 1))
    }

    /// Reconciles one fact.
    pub fn reconcile(&mut self, fact: &Fact) -> Result<Outcome> {
        let structured = check_key(fact)?;
        let kind = fact.kind.clone().unwrap_or_else(|| "semantic".to_string());
        let episodic = check_kind(&kind)?;
        if let Some(i) = fact.importance {
            if !(0.0..=1.0).contains(&i) {
                return Err(MemoryError::invalid_parameter(format!("importance must be between 0 and 1, not {i}"))
                    .hint("Leave importance NULL to have it derived from the content."));
            }
        }
        let unit = match &fact.emb {
            Some(e) => Some(self.unit(e)?),
            None => None,
        };
        if let Some(action) = &fact.action {
            let action = action.parse::<Action>().map_err(|e| {
                MemoryError::invalid_parameter(e.to_string()).hint("Use one of ADD, UPDATE, DELETE, NONE, or leave action NULL to let reconcile decide.")
            })?;
            return self.apply_decided(fact, action, &kind, unit.as_deref(), structured);
        }
        if fact.target_id.is_some() || fact.expected_version.is_some() {
            return Err(MemoryError::invalid_parameter("target_id and expected_version need an action")
                .hint("Pass action => 'UPDATE', 'DELETE' or 'NONE' with them, or leave all three out."));
        }

        // Find "the same fact".
        let mut found = None;
        if structured {
            let args = [self.user.clone().into(), text_arg(&fact.subject), text_arg(&fact.predicate)];
            found = self.one_match(BY_KEY, &args, MatchKind::Key)?;
        } else if let Some(content) = &fact.content {
            let args = [self.user.clone().into(), content.clone().into(), self.model.clone().into(), kind.clone().into()];
            found = self.one_match(BY_CONTENT, &args, MatchKind::ContentHash)?;
        }
        if found.is_none() {
            if let Some(u) = &unit {
                let threshold = if structured { self.reconcile_similarity } else { self.merge_similarity };
                found = self.similar(u, episodic, threshold)?;
            }
        }

        let need_emb = || {
            MemoryError::null_value("emb must not be NULL when the fact is new or changed")
                .hint("Pass the embedding of the fact's content.")
        };
        match decide(structured, fact.object.as_deref(), fact.negate, found) {
            Decision::Add => {
                let u = unit.ok_or_else(need_emb)?;
                let (id, version) = self.insert(fact, &kind, &u, None, None)?;
                Ok(Outcome { action: Action::Add, memory_id: Some(id), previous_id: None, version: Some(version) })
            }
            Decision::Update { old } => {
                let u = unit.ok_or_else(need_emb)?;
                let (id, version) = self.supersede(fact, &kind, &u, &old)?;
                Ok(Outcome { action: Action::Update, memory_id: Some(id), previous_id: Some(old.id), version: Some(version) })
            }
            Decision::Delete { old } => {
                let version = self.retire(&old, "deleted", None)?;
                Ok(Outcome { action: Action::Delete, memory_id: Some(old.id), previous_id: None, version: Some(version) })
            }
            Decision::Reinforce { old } => {
                let version = self.reinforce(&old)?;
                Ok(Outcome { action: Action::None, memory_id: Some(old.id), previous_id: None, version: Some(version) })
            }
            Decision::Unchanged { old } => Ok(Outcome {
                action: Action::None,
                memory_id: old.as_ref().map(|m| m.id),
                previous_id: None,
                version: old.map(|m| m.version),
            }),
        }
    }

    /// Applies an action the caller decided, as a conditional update of `target_id` at
    /// `expected_version`. A stale version changes nothing and returns NONE with a NULL version.
    fn apply_decided(&mut self, fact: &Fact, action: Action, kind: &str, unit: Option<&[f32]>, structured: bool) -> Result<Outcome> {
        let need_emb = || MemoryError::null_value(format!("emb must not be NULL for {action}")).hint("Pass the embedding of the fact's content.");
        if action == Action::Add {
            let u = unit.ok_or_else(need_emb)?;
            if structured {
                let args = [self.user.clone().into(), text_arg(&fact.subject), text_arg(&fact.predicate)];
                if let Some(m) = self.one_match(BY_KEY, &args, MatchKind::Key)? {
                    return Err(MemoryError::new(
                        PgSqlErrorCode::ERRCODE_UNIQUE_VIOLATION,
                        format!("the user already has an active fact for this subject and predicate: memory {}", m.id),
                    )
                    .hint(format!("Pass action => 'UPDATE', target_id => {}, expected_version => {}.", m.id, m.version)));
                }
            }
            let (id, version) = self.insert(fact, kind, u, None, None)?;
            return Ok(Outcome { action, memory_id: Some(id), previous_id: None, version: Some(version) });
        }
        let target = fact.target_id.ok_or_else(|| {
            MemoryError::null_value(format!("target_id must not be NULL for {action}")).hint("Pass the id of the memory the action applies to.")
        })?;
        let row = self.client.update(TARGET, None, &[target.into()]).map_err(spi("reading the target memory"))?;
        let mut current: Option<(i32, bool, String, Option<String>)> = None;
        for r in row {
            current = Some((
                r.get(2).map_err(spi("reading version"))?.unwrap_or(1),
                r.get(3).map_err(spi("reading active"))?.unwrap_or(false),
                r.get(4).map_err(spi("reading user_id"))?.unwrap_or_default(),
                r.get(5).map_err(spi("reading object"))?,
            ));
        }
        let (version, active, _owner, object) = match current {
            Some(c) if c.2 == self.user => c,
            _ => {
                return Err(MemoryError::new(
                    PgSqlErrorCode::ERRCODE_NO_DATA_FOUND,
                    format!("memory {target} of user \"{}\" does not exist", self.user),
                )
                .hint("Pass the id of one of this user's memories."))
            }
        };
        if action == Action::None {
            return Ok(Outcome { action, memory_id: Some(target), previous_id: None, version: Some(version) });
        }
        let expected = fact.expected_version.ok_or_else(|| {
            MemoryError::null_value(format!("expected_version must not be NULL for {action}"))
                .hint("Pass the version the decision was based on, so that a concurrent change is detected.")
        })?;
        if !active || version != expected {
            return Ok(Outcome { action: Action::None, memory_id: Some(target), previous_id: None, version: None });
        }
        let old = Match { id: target, version, object, by: MatchKind::Key };
        if action == Action::Delete {
            let v = self.retire(&old, "deleted", None)?;
            return Ok(Outcome { action, memory_id: Some(target), previous_id: None, version: Some(v) });
        }
        let u = unit.ok_or_else(need_emb)?;
        let (id, v) = self.supersede(fact, kind, u, &old)?;
        Ok(Outcome { action, memory_id: Some(id), previous_id: Some(target), version: Some(v) })
    }
}

/// Checks the key parts of a fact; returns whether it is structured.
fn check_key(fact: &Fact) -> Result<bool> {
    let blank = |s: &Option<String>| s.as_deref().is_some_and(|s| s.trim().is_empty());
    if blank(&fact.subject) || blank(&fact.predicate) {
        return Err(MemoryError::invalid_parameter("subject and predicate must not be empty")
            .hint("Pass NULL for both to write free text."));
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
                return Err(MemoryError::null_value("content must not be NULL")
                    .hint("Pass the memory as text, as it is given to the model."));
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

/// Names the constraint a failed insert broke in terms of the call.
fn insert_error(e: pgrx::spi::SpiError, _fact: &Fact) -> MemoryError {
    spi("writing the memory")(e)
}

/// The facts of a call, reconciled in order; returns one outcome per fact.
pub fn reconcile_all(user_id: Option<&str>, model: Option<&str>, facts: &[Fact]) -> Result<Vec<Outcome>> {
    let user = check_user(user_id)?.to_string();
    let model = resolve_model(model)?;
    Spi::connect_mut(|client| {
        let mut r = Reconciler::new(client, &user, &model)?;
        facts.iter().map(|f| r.reconcile(f)).collect()
    })
}

fn optional_time(t: Option<TimestampWithTimeZone>) -> Option<String> {
    t.map(|t| t.to_string())
}

/// Defines one SQL overload of `memory_reconcile` for an embedding type.
macro_rules! memory_reconcile_for {
    ($(#[$doc:meta])* $rust_name:ident, $emb:ty) => {
        $(#[$doc])*
        #[allow(clippy::too_many_arguments)]
        #[pg_extern(volatile, parallel_unsafe, name = "memory_reconcile")]
        fn $rust_name(
            user_id: Option<&str>,
            subject: Option<String>,
            predicate: Option<String>,
            object: Option<String>,
            content: Option<String>,
            emb: Option<$emb>,
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
    /// changes nothing and returns NONE with a NULL version.
    memory_reconcile,
    Vector
);

memory_reconcile_for!(
    /// `memory_reconcile` with a `halfvec` embedding.
    memory_reconcile_halfvec,
    HalfVec
);

memory_reconcile_for!(
    /// `memory_reconcile` with an embedding in pgvector's text syntax (`'[0.1, 0.2, ...]'`).
    memory_reconcile_text,
    &str
);

/// Reconciles many facts of one user in one call, in order: a JSON array of objects with the
/// keys subject, predicate, object, content, emb (an array of numbers), kind, importance,
/// protected, negate, source, source_turn_id, expires_at, valid_until, metadata, action,
/// target_id, expected_version. Returns one row per fact, in input order, numbered from 1.
#[pg_extern(volatile, parallel_unsafe)]
fn memory_reconcile_batch(
    user_id: Option<&str>,
    facts: Option<JsonB>,
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
    let facts = facts
        .ok_or_else(|| MemoryError::null_value("facts must not be NULL").hint("Pass a JSON array of fact objects."))
        .or_raise();
    let facts: Vec<Fact> = serde_json::from_value(facts.0)
        .map_err(|e| {
            MemoryError::new(PgSqlErrorCode::ERRCODE_INVALID_TEXT_REPRESENTATION, format!("facts: {e}"))
                .hint("Pass a JSON array of objects such as {\"subject\": \"user\", \"predicate\": \"editor\", \"object\": \"neovim\", \"content\": \"Prefers neovim\", \"emb\": [0.1, 0.2]}.")
        })
        .or_raise();
    let out = reconcile_all(user_id, model, &facts).or_raise();
    TableIterator::new(
        out.into_iter()
            .enumerate()
            .map(|(i, o)| (i as i32 + 1, o.action.name().to_string(), o.memory_id, o.previous_id, o.version)),
    )
}
