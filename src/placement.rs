//! Where a user's rows are: the one answer to "which relations hold this user's rows here".
//!
//! Recall's direct scans (`scan`), its packs and the hits it records read the relations this
//! module returns, never the tables looked up by name themselves. On one server they are the
//! extension's tables. Sharded by user (Citus, scale-out step 2), a node holds each user's rows
//! in shards of their own beside an empty distributed table: this is the one place that will
//! tell the two apart, so that nothing else needs to know.
#![allow(unsafe_code)]

use std::ffi::CStr;

use pgrx::pg_sys;
use pgrx::PgSqlErrorCode;

use crate::error::{MemoryError, Result};

/// The relations that hold one user's memories.
#[derive(Clone, Copy, Debug)]
pub struct Placement {
    /// `memories`.
    pub memories: pg_sys::Oid,
    /// `memories_user_model_active`: the user's active memories of a model, in id order.
    pub active_index: pg_sys::Oid,
}

/// `memory_packs` with its primary key, and `memory_pack_stale` with its index.
#[derive(Clone, Copy, Debug)]
pub struct Packs {
    pub packs: pg_sys::Oid,
    pub packs_pkey: pg_sys::Oid,
    pub stale: pg_sys::Oid,
    pub stale_index: pg_sys::Oid,
}

/// The error of a schema that is not the library's.
pub fn missing(what: &str) -> MemoryError {
    MemoryError::new(PgSqlErrorCode::ERRCODE_UNDEFINED_OBJECT, format!("agent_memory's {what} was not found"))
        .hint("The schema of this database is not the library's: run ALTER EXTENSION agent_memory UPDATE (never DROP EXTENSION, which deletes every memory).")
}

fn namespace() -> Result<pg_sys::Oid> {
    // SAFETY: a syscache lookup; missing_ok = true returns InvalidOid.
    let namespace = unsafe { pg_sys::get_namespace_oid(c"agent_memory".as_ptr(), true) };
    if namespace == pg_sys::Oid::INVALID {
        return Err(missing("schema"));
    }
    Ok(namespace)
}

/// A relation of the extension's schema by name; InvalidOid when there is none.
fn relation(namespace: pg_sys::Oid, name: &CStr) -> pg_sys::Oid {
    // SAFETY: a syscache lookup by name; returns InvalidOid when there is none.
    unsafe { pg_sys::get_relname_relid(name.as_ptr(), namespace) }
}

fn required(namespace: pg_sys::Oid, name: &CStr, what: &str) -> Result<pg_sys::Oid> {
    match relation(namespace, name) {
        oid if oid == pg_sys::Oid::INVALID => Err(missing(what)),
        oid => Ok(oid),
    }
}

/// The relations that hold `user`'s memories on this server. On one server every user's rows
/// are in the extension's tables.
pub fn of_user(_user: &str) -> Result<Placement> {
    let namespace = namespace()?;
    Ok(Placement {
        memories: required(namespace, c"memories", "table memories")?,
        active_index: required(namespace, c"memories_user_model_active", "index memories_user_model_active")?,
    })
}

/// The pack tables that hold `user`'s packs on this server, when the schema has them (looked up
/// only by the calls that read packs: the row scans need not pay for it).
pub fn packs_of_user(_user: &str) -> Result<Option<Packs>> {
    let namespace = namespace()?;
    let oids = [c"memory_packs", c"memory_packs_pkey", c"memory_pack_stale", c"memory_pack_stale_user"].map(|n| relation(namespace, n));
    Ok((!oids.contains(&pg_sys::Oid::INVALID)).then_some(Packs {
        packs: oids[0],
        packs_pkey: oids[1],
        stale: oids[2],
        stale_index: oids[3],
    }))
}

/// The table whose memories recall's hits name (`api::hits` folds them into its rows).
pub fn memories_table() -> Result<pg_sys::Oid> {
    required(namespace()?, c"memories", "table memories")
}

/// The per-user tables a maintenance pass runs its statements on: on one server the extension's
/// own; on a Citus node (scale-out step 3), the shards of one colocation group that the node
/// holds. A pass's statements name the extension's tables; [`TableSet::sql`] names this set's.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct TableSet {
    /// The tables' names in the extension's schema (a shard's is its table's name and the
    /// shard's id), in the order of `agent_memory_core::tables::PER_USER`; `None` for the
    /// extension's tables.
    names: Option<[String; 7]>,
}

thread_local! {
    /// The statements renamed so far, kept for the life of the backend: a statement's text is
    /// the key of its kept plan (`crate::plans`), so each is made once per set.
    static RENAMED: std::cell::RefCell<std::collections::HashMap<(usize, [String; 7]), &'static str>> =
        std::cell::RefCell::new(std::collections::HashMap::new());
}

impl TableSet {
    /// The extension's own tables.
    pub fn base() -> TableSet {
        TableSet { names: None }
    }

    /// Tables of the extension's schema named `names` (in the order of
    /// `agent_memory_core::tables::PER_USER`), such as one node's shards of a colocation group.
    pub fn named(names: [String; 7]) -> TableSet {
        TableSet { names: Some(names) }
    }

    /// `sql`, a statement over the extension's tables, over this set's instead.
    pub fn sql(&self, sql: &'static str) -> &'static str {
        let Some(names) = &self.names else {
            return sql;
        };
        let key = (sql.as_ptr() as usize, names.clone());
        if let Some(s) = RENAMED.with_borrow(|r| r.get(&key).copied()) {
            return s;
        }
        // Leaked once per statement and set; the sets of a node are few.
        let qualified = names.clone().map(|n| format!("agent_memory.\"{}\"", n.replace('"', "\"\"")));
        let renamed: &'static str = Box::leak(agent_memory_core::tables::rename(sql, &qualified).into_boxed_str());
        RENAMED.with_borrow_mut(|r| r.insert(key, renamed));
        renamed
    }

    /// The table of memories of this set (the table recall's hits name).
    pub fn memories_table(&self) -> Result<pg_sys::Oid> {
        match &self.names {
            None => memories_table(),
            Some(names) => {
                let name = std::ffi::CString::new(names[0].as_str()).map_err(|_| missing("table of memories"))?;
                required(namespace()?, &name, &format!("table {}", names[0]))
            }
        }
    }
}

/// The sets of tables this server's maintenance passes (forgetting, consolidation, packing,
/// embedding, the hit fold) run on: on one server, the extension's tables.
pub fn local_table_sets() -> Result<Vec<TableSet>> {
    namespace()?;
    Ok(vec![TableSet::base()])
}
