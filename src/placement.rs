//! Where a user's rows are: the one answer to "which relations hold this user's rows here".
//!
//! Recall's direct scans (`scan`), its packs and the hits it records read the relations this
//! module returns, never the tables looked up by name themselves. On one server they are the
//! extension's tables. On a node of a Citus cluster where `agent_memory.distribute()` has run,
//! the extension's per-user tables are empty shells and each user's rows are in the shards of
//! the node that holds the user: this module finds them (in `pg_dist_shard` and
//! `pg_dist_placement`, never by "a relation of that name exists": a shard moved away leaves its
//! relation behind until Citus drops it), and refuses a call whose user this node does not hold
//! (0F000), so that a call Citus did not delegate never answers from an empty shell. It is the
//! one place that tells a Citus node from one server; [`crate::delegation`] asks it which calls
//! Citus delegates.
//!
//! What it found is kept per backend and forgotten when PostgreSQL invalidates the relation
//! cache of the extension's tables of memories or packs, or of Citus's `pg_dist_object`: Citus
//! does so whenever it distributes a table, moves or drops a shard, or distributes a function.
#![allow(unsafe_code)]

use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::ffi::CStr;

use pgrx::pg_sys;
use pgrx::spi::Spi;
use pgrx::PgSqlErrorCode;

use crate::error::{spi, MemoryError, Result};

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

/// The relations that hold `user`'s memories on this server: the extension's tables on one
/// server, the user's shards on a Citus node that holds the user; an error (0F000) on a Citus
/// node that does not.
pub fn of_user(user: &str) -> Result<Placement> {
    if let Some(shards) = shards_of_user(user)? {
        return Ok(shards.placement);
    }
    let namespace = namespace()?;
    Ok(Placement {
        memories: required(namespace, c"memories", "table memories")?,
        active_index: required(namespace, c"memories_user_model_active", "index memories_user_model_active")?,
    })
}

/// The pack tables that hold `user`'s packs on this server, when the schema has them (looked up
/// only by the calls that read packs: the row scans need not pay for it).
pub fn packs_of_user(user: &str) -> Result<Option<Packs>> {
    if let Some(shards) = shards_of_user(user)? {
        return Ok(Some(shards.packs));
    }
    let namespace = namespace()?;
    let oids = [c"memory_packs", c"memory_packs_pkey", c"memory_pack_stale", c"memory_pack_stale_user"].map(|n| relation(namespace, n));
    Ok((!oids.contains(&pg_sys::Oid::INVALID)).then_some(Packs {
        packs: oids[0],
        packs_pkey: oids[1],
        stale: oids[2],
        stale_index: oids[3],
    }))
}

/// Whether this node's per-user tables are distributed by Citus (`agent_memory.distribute()`
/// has run in this database).
pub fn distributed() -> Result<bool> {
    ensure()
}

/// Before a call writes `user`'s rows: on a Citus node, takes Citus's shard metadata lock of
/// the user's shards in share mode until the end of the transaction (as Citus's own writers
/// do: a shard move's switch waits for the write to commit, so that the move carries it, and the
/// write waits for a switch in progress) and then checks that this node still holds them; a
/// write that comes after the switch fails with 0F000 (a retry goes to the new node), never
/// lands in the shard left behind. Nothing on one server.
pub fn hold_user(client: &mut pgrx::spi::SpiClient<'_>, user: &str) -> Result<()> {
    let Some(shards) = shards_of_user(user)? else {
        return Ok(());
    };
    if shards.tables.hold(client)? {
        return Ok(());
    }
    STATE.with_borrow_mut(|s| {
        if let Some(s) = s.as_mut() {
            s.users.remove(user);
        }
    });
    Err(not_here(user))
}

/// The per-user tables that hold `user`'s rows here: the extension's on one server, the user's
/// shards on a Citus node (an error, 0F000, on a node that does not hold the user).
pub fn tables_of_user(user: &str) -> Result<TableSet> {
    Ok(shards_of_user(user)?.map(|s| s.tables).unwrap_or_default())
}

/// `sql`, a statement of a call of `user`'s over the extension's tables, over the tables that
/// hold `user`'s rows here: unchanged on one server; on a Citus node, over the user's shards,
/// which PostgreSQL plans as it plans the extension's tables on one server.
pub fn sql_for(user: &str, sql: &'static str) -> Result<&'static str> {
    Ok(tables_of_user(user)?.sql(sql))
}

/// The argument Citus delegates a call of `function` by (its position among the arguments),
/// when `function` is one of agent_memory's and `distribute()` has distributed it.
pub fn delegated_argument(function: pg_sys::Oid) -> Result<Option<usize>> {
    if !ensure()? {
        return Ok(None);
    }
    if let Some(known) = STATE.with_borrow(|s| s.as_ref().and_then(|s| s.functions.as_ref().map(|f| f.get(&function).copied()))) {
        return Ok(known);
    }
    let functions = Spi::connect(|client| {
        let rows = client
            .select(
                "SELECT o.objid, o.distribution_argument_index
                   FROM pg_catalog.pg_dist_object o
                   JOIN pg_catalog.pg_proc p ON p.oid OPERATOR(pg_catalog.=) o.objid
                  WHERE o.classid OPERATOR(pg_catalog.=) 'pg_catalog.pg_proc'::pg_catalog.regclass
                    AND o.distribution_argument_index IS NOT NULL
                    AND p.pronamespace OPERATOR(pg_catalog.=) 'agent_memory'::pg_catalog.regnamespace",
                None,
                &[],
            )
            .map_err(spi("reading agent_memory's distributed functions"))?;
        let mut out = HashMap::new();
        for row in rows {
            let oid = row.get::<pg_sys::Oid>(1).map_err(spi("reading a distributed function"))?;
            let index = row.get::<i32>(2).map_err(spi("reading a distributed function"))?;
            if let (Some(oid), Some(index)) = (oid, index) {
                out.insert(oid, index as usize);
            }
        }
        Ok::<_, MemoryError>(out)
    })?;
    let index = functions.get(&function).copied();
    STATE.with_borrow_mut(|s| {
        if let Some(s) = s.as_mut() {
            s.functions = Some(functions);
        }
    });
    Ok(index)
}

/// The error of a call whose user this node does not hold.
pub fn not_here(user: &str) -> MemoryError {
    MemoryError::new(
        PgSqlErrorCode::ERRCODE_LOCATOR_EXCEPTION,
        format!("this node of the Citus cluster does not hold user {user:?}'s memories"),
    )
    .detail("agent_memory's tables are distributed by user: a call runs on the node that holds its user only when Citus delegates it there, and Citus did not delegate this one.")
    .hint(HINT)
}

/// The error of a call whose user is a column of another relation of its statement, or a
/// subquery: Citus would not delegate it (and Citus 13.2.2 crashes planning the first).
pub fn not_delegated(call: &str) -> MemoryError {
    MemoryError::new(
        PgSqlErrorCode::ERRCODE_LOCATOR_EXCEPTION,
        format!("{call} takes its user from a column or a subquery, which the Citus cluster cannot send to the node that holds the user"),
    )
    .hint(HINT)
}

const HINT: &str = "Call it as a statement of its own with the user as a constant or a parameter, such as SELECT * FROM agent_memory.memory_recall('user-1', ...); not inside a subquery, a join, a CTE or another function. A shard moved at that moment: try again.";

/// On the coordinator of a Citus cluster whose tables are distributed, runs `sql` (a query of
/// one value) on every worker, each in a transaction of its own, and returns each worker's
/// answer; elsewhere, nothing. A worker that fails fails the call, naming it.
pub fn on_each_worker(sql: &str) -> Result<Vec<String>> {
    if !distributed()? {
        return Ok(Vec::new());
    }
    Spi::connect(|client| {
        let group = client
            .select("SELECT g.groupid FROM pg_catalog.pg_dist_local_group g", Some(1), &[])
            .map_err(spi("reading this node's group"))?
            .first()
            .get_one::<i32>()
            .map_err(spi("reading this node's group"))?;
        if group != Some(0) {
            return Ok(Vec::new());
        }
        let rows = client
            .select("SELECT w.nodename, w.nodeport, w.success, w.result FROM pg_catalog.run_command_on_workers($1) w", None, &[sql.into()])
            .map_err(spi("running the call on the workers"))?;
        let mut out = Vec::new();
        for row in rows {
            let e = spi("reading a worker's answer");
            let node =
                format!("{}:{}", row.get::<String>(1).map_err(&e)?.unwrap_or_default(), row.get::<i32>(2).map_err(&e)?.unwrap_or_default());
            let result = row.get::<String>(4).map_err(&e)?.unwrap_or_default();
            if row.get::<bool>(3).map_err(&e)? != Some(true) {
                return Err(MemoryError::new(
                    PgSqlErrorCode::ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE,
                    format!("worker {node} failed: {result}"),
                )
                .hint("The other workers' part is done (each in its own transaction); fix the worker and call this again."));
            }
            out.push(result);
        }
        Ok(out)
    })
}

/// The error of a pass's unit whose shards moved to another node (their new node's passes
/// take them over).
fn moved() -> MemoryError {
    MemoryError::new(PgSqlErrorCode::ERRCODE_LOCATOR_EXCEPTION, "a shard this pass runs on moved to another node of the Citus cluster")
        .hint("Nothing is lost: the pass stopped before writing it, and the node that holds it now runs its passes. Run the pass again here for the rest.")
}

/// A user's shards on this node.
#[derive(Clone, Debug)]
struct Shards {
    placement: Placement,
    packs: Packs,
    /// The shards' names, in the order of `agent_memory_core::tables::PER_USER`.
    tables: TableSet,
}

/// What this backend knows of how its node holds the per-user tables.
#[derive(Debug, Default)]
struct State {
    /// The tables are distributed (a Citus node after `distribute()`).
    distributed: bool,
    /// agent_memory's distributed functions and the position of the argument each is delegated by.
    functions: Option<HashMap<pg_sys::Oid, usize>>,
    /// Users this node holds, with their shards.
    users: HashMap<String, Shards>,
}

/// The most users whose shards a backend keeps.
const KEPT_USERS: usize = 10_000;

thread_local! {
    static STATE: RefCell<Option<State>> = const { RefCell::new(None) };
    /// The relations whose invalidation makes the state stale: the tables of memories and
    /// packs, and Citus's `pg_dist_object`.
    static WATCHED: Cell<[pg_sys::Oid; 3]> = const { Cell::new([pg_sys::Oid::INVALID; 3]) };
    /// Set by the callback: the state is to be found again.
    static STALE: Cell<bool> = const { Cell::new(true) };
}

/// Forgets what was found when one of the relations it depends on changes (a relation cache
/// callback, registered in `_PG_init`).
#[pgrx::pg_guard]
unsafe extern "C-unwind" fn invalidated(_arg: pg_sys::Datum, relid: pg_sys::Oid) {
    if relid == pg_sys::Oid::INVALID || WATCHED.get().contains(&relid) {
        STALE.set(true);
    }
}

/// Registers the relation cache callback. Called once from `_PG_init`.
pub fn init() {
    // SAFETY: registers a callback PostgreSQL calls on relation cache invalidations; the
    // callback only marks a backend-local cache stale.
    unsafe { pg_sys::CacheRegisterRelcacheCallback(Some(invalidated), pg_sys::Datum::from(0)) };
}

/// Whether the per-user tables are distributed here, found once and kept until invalidated.
fn ensure() -> Result<bool> {
    if !STALE.get() {
        if let Some(d) = STATE.with_borrow(|s| s.as_ref().map(|s| s.distributed)) {
            return Ok(d);
        }
    }
    STALE.set(false);
    let namespace = namespace()?;
    let memories = relation(namespace, c"memories");
    // SAFETY: syscache lookups; InvalidOid when there is none.
    let citus = unsafe { pg_sys::get_extension_oid(c"citus".as_ptr(), true) } != pg_sys::Oid::INVALID;
    let dist_object = if citus {
        // SAFETY: as above.
        unsafe { pg_sys::get_relname_relid(c"pg_dist_object".as_ptr(), pg_sys::Oid::from(pg_sys::PG_CATALOG_NAMESPACE)) }
    } else {
        pg_sys::Oid::INVALID
    };
    WATCHED.set([memories, relation(namespace, c"memory_packs"), dist_object]);
    let distributed = citus
        && memories != pg_sys::Oid::INVALID
        && Spi::get_one_with_args::<bool>(
            "SELECT EXISTS (SELECT FROM pg_catalog.pg_dist_partition p WHERE p.logicalrelid OPERATOR(pg_catalog.=) $1)",
            &[memories.into()],
        )
        .map_err(spi("reading Citus's pg_dist_partition"))?
        .unwrap_or(false);
    STATE.with_borrow_mut(|s| *s = Some(State { distributed, functions: None, users: HashMap::new() }));
    Ok(distributed)
}

/// `user`'s shards on this node when this node is a Citus node (`None` on one server); an
/// error when it does not hold them.
fn shards_of_user(user: &str) -> Result<Option<Shards>> {
    if !ensure()? {
        return Ok(None);
    }
    if let Some(shards) = STATE.with_borrow(|s| s.as_ref().and_then(|s| s.users.get(user).cloned())) {
        return Ok(Some(shards));
    }
    // The shard of each per-user table that holds the user, when this node holds all of them
    // (a colocated group moves whole).
    const FIND: &str = "
        WITH s AS (SELECT t.i, t.name,
                          pg_catalog.get_shard_id_for_distribution_column(pg_catalog.format('agent_memory.%I', t.name)::pg_catalog.regclass, $1::text) AS shardid
                     FROM pg_catalog.unnest($2::text[]) WITH ORDINALITY AS t(name, i))
        SELECT s.name, s.shardid FROM s
         WHERE EXISTS (SELECT FROM pg_catalog.pg_dist_placement p
                        WHERE p.shardid OPERATOR(pg_catalog.=) s.shardid AND p.shardstate OPERATOR(pg_catalog.=) 1
                          AND p.groupid OPERATOR(pg_catalog.=) (SELECT g.groupid FROM pg_catalog.pg_dist_local_group g))
         ORDER BY s.i";
    let tables: Vec<String> = agent_memory_core::tables::PER_USER.iter().map(|t| t.to_string()).collect();
    let found: Vec<String> = Spi::connect_mut(|client| {
        // Citus finds a shard only for a role that may read its table: read with the extension
        // owner's rights (a writer may not read the pack tables).
        let owner = crate::locks::extension_owner(client)?;
        let rows = crate::pg::with_rights_of(owner, || client.select(FIND, None, &[user.into(), tables.clone().into()]))
            .map_err(spi("finding the user's shards on this node"))?;
        let mut names = Vec::with_capacity(7);
        for row in rows {
            let name = row.get::<String>(1).map_err(spi("reading the user's shards"))?.unwrap_or_default();
            let shard = row.get::<i64>(2).map_err(spi("reading the user's shards"))?.unwrap_or_default();
            names.push(format!("{name}_{shard}"));
        }
        Ok::<_, MemoryError>(names)
    })?;
    let Ok(names) = <[String; 7]>::try_from(found) else {
        return Err(not_here(user));
    };
    let namespace = namespace()?;
    let oid = |name: &str, what: &str| -> Result<pg_sys::Oid> {
        let c = std::ffi::CString::new(name).map_err(|_| missing(what))?;
        required(namespace, &c, what)
    };
    let shard_of = |table: &str| -> &str {
        let i = agent_memory_core::tables::PER_USER.iter().position(|t| *t == table).unwrap_or(0);
        &names[i][table.len()..]
    };
    let shards = Shards {
        placement: Placement {
            memories: oid(&format!("memories{}", shard_of("memories")), "the user's shard of memories")?,
            active_index: oid(
                &format!("memories_user_model_active{}", shard_of("memories")),
                "the user's shard of memories_user_model_active",
            )?,
        },
        packs: Packs {
            packs: oid(&format!("memory_packs{}", shard_of("memory_packs")), "the user's shard of memory_packs")?,
            packs_pkey: oid(&format!("memory_packs_pkey{}", shard_of("memory_packs")), "the user's shard of memory_packs_pkey")?,
            stale: oid(&format!("memory_pack_stale{}", shard_of("memory_pack_stale")), "the user's shard of memory_pack_stale")?,
            stale_index: oid(
                &format!("memory_pack_stale_user{}", shard_of("memory_pack_stale")),
                "the user's shard of memory_pack_stale_user",
            )?,
        },
        tables: TableSet::named(names.clone()),
    };
    STATE.with_borrow_mut(|s| {
        if let Some(s) = s.as_mut() {
            if s.users.len() >= KEPT_USERS {
                s.users.clear();
            }
            s.users.insert(user.to_string(), shards.clone());
        }
    });
    Ok(Some(shards))
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
        let renamed: &'static str = Box::leak(self.sql_owned(sql).into_boxed_str());
        RENAMED.with_borrow_mut(|r| r.insert(key, renamed));
        renamed
    }

    /// `sql`, a statement made at run time over the extension's tables, over this set's instead.
    pub fn sql_owned(&self, sql: &str) -> String {
        match &self.names {
            None => sql.to_string(),
            Some(names) => {
                let qualified = names.clone().map(|n| format!("agent_memory.\"{}\"", n.replace('"', "\"\"")));
                agent_memory_core::tables::rename(sql, &qualified)
            }
        }
    }

    /// [`TableSet::hold`], failing (0F000) when a shard of the set moved away: a unit of a pass
    /// starts with it.
    pub fn hold_or_moved(&self, client: &mut pgrx::spi::SpiClient<'_>) -> Result<()> {
        if self.hold(client)? {
            Ok(())
        } else {
            Err(moved())
        }
    }

    /// Whether this is the extension's own tables (one server).
    pub fn is_base(&self) -> bool {
        self.names.is_none()
    }

    /// A name of this set's own for a piece of the node's bookkeeping (`maintenance_state`),
    /// such as when its hit counts were last halved.
    pub fn own_name(&self, name: &str) -> String {
        match &self.names {
            None => name.to_string(),
            Some(names) => format!("{name}:{}", names[0]),
        }
    }

    /// For a set of shards (a Citus node), takes Citus's shard metadata lock in share mode
    /// until the end of the transaction (a shard move's switch waits for it, and it for the
    /// switch) and says whether this node still holds every shard of the set: a unit of a pass
    /// writes the shards only then, so that a write is never made to a shard that moved away.
    /// Always true for the extension's tables.
    pub fn hold(&self, client: &mut pgrx::spi::SpiClient<'_>) -> Result<bool> {
        let Some(names) = &self.names else {
            return Ok(true);
        };
        let ids: Vec<i64> = names.iter().filter_map(|n| n.rsplit('_').next().and_then(|id| id.parse().ok())).collect();
        let owner = crate::locks::extension_owner(client)?;
        // ShareLock (5): what Citus's own writers take before they read the placements.
        crate::pg::with_rights_of(owner, || {
            client.select("SELECT pg_catalog.lock_shard_metadata(5, $1::bigint[])", None, &[ids.clone().into()])
        })
        .map_err(spi("locking the shards' placement"))?;
        let held = client
            .select(
                "SELECT pg_catalog.count(*) FROM pg_catalog.pg_dist_placement p
                  WHERE p.shardid OPERATOR(pg_catalog.=) ANY ($1::bigint[]) AND p.shardstate OPERATOR(pg_catalog.=) 1
                    AND p.groupid OPERATOR(pg_catalog.=) (SELECT g.groupid FROM pg_catalog.pg_dist_local_group g)",
                None,
                &[ids.clone().into()],
            )
            .map_err(spi("reading the shards' placement"))?
            .first()
            .get_one::<i64>()
            .map_err(spi("reading the shards' placement"))?
            .unwrap_or(0);
        Ok(held == ids.len() as i64)
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
///
/// On a Citus node, one set per colocated group of shards the node holds whole (the
/// extension's tables there are empty shells): each pass runs over the node's users, and each
/// user is on one node.
pub fn local_table_sets() -> Result<Vec<TableSet>> {
    namespace()?;
    if !distributed()? {
        return Ok(vec![TableSet::base()]);
    }
    // The shards of every per-user table on this node, grouped by their hash range (a
    // colocated group shares it), in the order of `PER_USER`.
    const LOCAL_GROUPS: &str = "
        WITH t AS (SELECT t.name, t.i, pg_catalog.format('agent_memory.%I', t.name)::pg_catalog.regclass AS rel
                     FROM pg_catalog.unnest($1::text[]) WITH ORDINALITY AS t(name, i))
        SELECT pg_catalog.array_agg(t.name OPERATOR(pg_catalog.||) '_' OPERATOR(pg_catalog.||) d.shardid ORDER BY t.i)
          FROM t JOIN pg_catalog.pg_dist_shard d ON d.logicalrelid OPERATOR(pg_catalog.=) t.rel
         WHERE EXISTS (SELECT FROM pg_catalog.pg_dist_placement p
                        WHERE p.shardid OPERATOR(pg_catalog.=) d.shardid AND p.shardstate OPERATOR(pg_catalog.=) 1
                          AND p.groupid OPERATOR(pg_catalog.=) (SELECT g.groupid FROM pg_catalog.pg_dist_local_group g))
         GROUP BY d.shardminvalue
        HAVING pg_catalog.count(*) OPERATOR(pg_catalog.=) 7
         ORDER BY d.shardminvalue::bigint";
    let tables: Vec<String> = agent_memory_core::tables::PER_USER.iter().map(|t| t.to_string()).collect();
    Spi::connect(|client| {
        let rows = client.select(LOCAL_GROUPS, None, &[tables.into()]).map_err(spi("finding this node's shards"))?;
        let mut sets = Vec::new();
        for row in rows {
            let names: Vec<String> = row.get::<Vec<String>>(1).map_err(spi("reading this node's shards"))?.unwrap_or_default();
            if let Ok(names) = <[String; 7]>::try_from(names) {
                sets.push(TableSet::named(names));
            }
        }
        Ok(sets)
    })
}
