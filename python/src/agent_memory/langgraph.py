"""``AgentMemoryStore``: a LangGraph store (``langgraph.store.base.BaseStore``) on agent_memory.

How items map to memories:

* **User.** The label at position ``user_label`` (default 0) of an item's namespace is the user
  (``("user-07", "memories")``: user ``user-07``; with ``user_label=1``, LangMem's
  ``("memories", "user-07")``). Every operation runs with ``agent_memory.user_id`` set to it, so
  row-level security, tenancy bindings and erasure (``memory_erase``) cover the store's items.
* **Kind.** The first label of the namespace that names a kind (``semantic``, ``episodic``,
  ``procedural``) is the memory's kind; otherwise the store's ``kind`` (default ``semantic``).
* **Key.** An item is one active memory keyed by ``subject = 'langgraph:' || the namespace joined
  by '.'`` and ``predicate = 'langgraph:' || key``: the extension's unique active fact index keeps
  one active item per namespace and key, whoever writes. Its ``content`` is the text indexed for
  search (the value's ``index`` fields, as LangGraph extracts them; by default the whole value as
  JSON), which the server embeds. The value, namespace and key are kept in ``metadata.langgraph``.
  An item indexed by several texts (several fields, or a list path such as ``items[*].text``)
  keeps them there too, and a search scores it by its best text, as LangGraph does; the put
  embeds each, so a search finds them in the user's embedding cache.
* **Put** updates the memory in place (its version rises; the new content is embedded anew);
  **delete** retires it (reason ``deleted``; it stays until the forgetting pass's purge, and
  ``memory_erase`` removes it).
* **Items stay** until they are deleted or their TTL passes, as in LangGraph's stores: an item is
  a protected memory, never evicted, merged by consolidation or expired by the retention
  settings; an item put with a TTL ends at its deadline (its ``valid_until``). ``evictable=True``
  makes every item an ordinary memory, which the forgetting pass retires by the retention
  settings (kept from round to round by recall's hits) or by its TTL, whichever comes first;
  ``protected=True`` protects every item and refuses TTLs.
* **Search** with a prefix shorter than the user label (``search(())``) searches every user the
  connection's role may see, as row-level security decides (an admin: every user; an application
  role: the user its connection names, if any). **Search** with ``query`` ranks the items under the namespace prefix that match ``filter`` by the
  cosine similarity of their embedding to the server's embedding of the query (``score``), exactly:
  the candidates are filtered first, then ranked, never through an approximate index. Items put with
  ``index=False`` have no score and come after the scored ones. Without ``query``, items come in the
  order they were first written. ``filter`` takes values (equality, nested objects, lists) and the
  operators ``$eq``, ``$ne``, ``$gt``, ``$gte``, ``$lt``, ``$lte``.
* **TTLs** as LangGraph defines them (``supports_ttl = True``): ``put(..., ttl=minutes)`` or the
  store's ``ttl={"default_ttl": ..., "refresh_on_read": ...}`` set the memory's ``valid_until``
  (and ``expires_at`` in an ``evictable=True`` store); an item past it is not found at once, and
  is retired (``expired``): by the store's next put for its user once ``sweep_interval_minutes``
  (default 5) have passed since the user's last sweep, by ``sweep_ttl()`` or the thread of
  ``start_ttl_sweeper()`` (as PostgresStore's), and in an ``evictable=True`` store by the
  forgetting pass too. A get or search with ``refresh_ttl`` (the store's ``refresh_on_read`` by
  default) moves the deadline of the items it returns to now + their TTL. In an
  ``evictable=True`` store, an item put without a TTL keeps the extension's retention
  (``expires_at`` from the retention settings); a ``protected=True`` store never expires its
  items, so it refuses a TTL (``ValueError``).
* Values are kept as PostgreSQL ``jsonb``, which holds no NaN or infinite number and no NUL
  character: a put with one raises ``ValueError`` saying so (LangGraph's own PostgresStore fails
  on them too, with a database error). A filter may hold them, as in LangGraph's stores: a value
  no item can hold equals nothing (``$ne`` matches every item), an infinite bound compares as a
  number, and nothing compares with NaN.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import math
import threading
import time

from collections.abc import Iterable, Sequence
from datetime import datetime
from typing import Any

import psycopg
from psycopg import sql
from langgraph.store.base import (
    BaseStore,
    GetOp,
    Item,
    ListNamespacesOp,
    MatchCondition,
    Op,
    PutOp,
    Result,
    SearchItem,
    SearchOp,
    TTLConfig,
    validate_op_namespace,
)
from langgraph.store.base.embed import get_text_at_path, tokenize_path
from psycopg.types.json import Jsonb
from psycopg_pool import ConnectionPool

from ._calls import SET_USER
from .errors import AgentMemoryError

KINDS = ("semantic", "episodic", "procedural")
PREFIX = "langgraph:"

_LIVE = "m.active AND (m.expires_at IS NULL OR m.expires_at > now()) AND (m.valid_until IS NULL OR m.valid_until > now())"
_ITEM = "m.metadata -> 'langgraph' AS lg, m.created_at, m.id"

# The model of an indexed item: the column's default (agent_memory.default_model, which the write
# trigger embeds with agent_memory.text_model unless the server has its files).
_MODEL = "coalesce(nullif(pg_catalog.current_setting('agent_memory.default_model', true), ''), 'default')"

# An item's TTL ends it at its deadline, kept in valid_until (and in expires_at, which a protected
# memory never has). Past valid_until the forgetting pass retires an evictable item whatever its
# kind (past its expires_at alone it would move an episode to the archive and clear expires_at,
# and the item would be found again); a protected item the store's sweep retires (_SWEEP).
_DEADLINE = "CASE WHEN %(ttl)s::float8 IS NOT NULL THEN now() + pg_catalog.make_interval(secs => %(ttl)s::float8 * 60) END"

_UPDATE = f"""
UPDATE agent_memory.memories m
   SET content = %(content)s, emb = NULL, kind = %(kind)s, protected = %(protected)s,
       -- An item put with index=False is stored only (the model 'none': no embedding, never
       -- recalled); one indexed again takes the default model, which the server embeds with.
       embedding_model = CASE WHEN NOT %(indexed)s THEN 'none' WHEN m.embedding_model = 'none' THEN {_MODEL}
                              ELSE m.embedding_model END,
       expires_at = CASE WHEN %(ttl)s::float8 IS NOT NULL THEN {_DEADLINE}
                         -- An item that had a TTL and is put without one: the retention again.
                         WHEN m.metadata -> 'langgraph' ? 'ttl'
                         THEN now() + agent_memory.memory_retention(%(kind)s, m.importance, %(protected)s)
                         ELSE m.expires_at END,
       valid_until = {_DEADLINE},
       metadata = pg_catalog.jsonb_set(m.metadata, '{{langgraph}}',
                                       %(lg)s::jsonb || pg_catalog.jsonb_build_object('updated_at', now()))
 WHERE m.user_id = %(user)s AND m.subject = %(subject)s AND m.predicate = %(predicate)s AND m.active
RETURNING m.id
"""
_INSERT = f"""
INSERT INTO agent_memory.memories (user_id, kind, subject, predicate, content, embedding_model, protected, source,
                                   expires_at, valid_until, metadata)
VALUES (%(user)s, %(kind)s, %(subject)s, %(predicate)s, %(content)s, CASE WHEN %(indexed)s THEN {_MODEL} ELSE 'none' END,
        %(protected)s, 'langgraph',
        {_DEADLINE}, {_DEADLINE},
        pg_catalog.jsonb_build_object('langgraph', %(lg)s::jsonb || pg_catalog.jsonb_build_object('updated_at', now())))
"""
# The items returned by a read whose TTL is refreshed: now + their TTL (minutes, kept beside the
# value), for those put with one.
_REFRESH = """
UPDATE agent_memory.memories m
   SET expires_at = now() + pg_catalog.make_interval(secs => (m.metadata -> 'langgraph' ->> 'ttl')::float8 * 60),
       valid_until = now() + pg_catalog.make_interval(secs => (m.metadata -> 'langgraph' ->> 'ttl')::float8 * 60)
 WHERE m.user_id = %s AND m.id = ANY (%s) AND m.active AND (m.metadata -> 'langgraph' ->> 'ttl') IS NOT NULL
"""
# Items past their TTL, retired (reason 'expired'): an item of the default store is a protected
# memory, which the forgetting pass never expires, so the store retires its own, as LangGraph's
# PostgresStore sweeps its table. Found through the deadline index (memories_deadline).
_SWEEP = """
UPDATE agent_memory.memories m
   SET active = false, protected = false, retired_reason = 'expired', retired_at = now()
 WHERE m.active AND m.protected AND m.source = 'langgraph' AND m.metadata -> 'langgraph' ? 'ttl'
   AND (m.expires_at IS NOT NULL OR m.valid_until IS NOT NULL) AND least(m.expires_at, m.valid_until) <= now()
"""
_DELETE = """
UPDATE agent_memory.memories m SET active = false, retired_reason = 'deleted', retired_at = now()
 WHERE m.user_id = %(user)s AND m.subject = %(subject)s AND m.predicate = %(predicate)s AND m.active
"""


def _storable(value: Any, where: str) -> None:
    """Refuses what PostgreSQL's ``jsonb`` cannot hold, with a ValueError that says so: NaN and
    infinite numbers (JSON has none) and the NUL character in a string or a key."""
    if isinstance(value, float) and not math.isfinite(value):
        raise ValueError(f"{where} holds {value!r}: JSON has no NaN or infinite numbers, and the store keeps values as JSON "
                         "(store it as a string or as null)")
    if isinstance(value, str) and "\x00" in value:
        raise ValueError(f"{where} holds a NUL character (\\u0000), which PostgreSQL cannot store in text or JSON")
    if isinstance(value, dict):
        for k, v in value.items():
            _storable(k, f"{where} key")
            _storable(v, f"{where}.{k}")
    elif isinstance(value, (list, tuple)):
        for i, v in enumerate(value):
            _storable(v, f"{where}[{i}]")


def _subject(namespace: Sequence[str]) -> str:
    return PREFIX + ".".join(namespace)


def _like_escape(text: str) -> str:
    return text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")


def _filter_sql(value: Any, path: list[str], out: list[str], params: list[Any]) -> None:
    """SQL conditions on the stored value equivalent to LangGraph's filter matching."""
    if isinstance(value, dict) and any(k.startswith("$") for k in value):
        for op, operand in value.items():
            if op == "$eq":
                _equals(operand, path, out, params)
            elif op == "$ne":
                inner: list[str] = []
                _equals(operand, path, inner, params)
                out.append(f"NOT coalesce({inner[0]}, false)")
            elif op in ("$gt", "$gte", "$lt", "$lte"):
                cmp = {"$gt": ">", "$gte": ">=", "$lt": "<", "$lte": "<="}[op]
                bound = float(operand)
                if math.isnan(bound) or not _holdable(path):
                    # Nothing compares with NaN (as in Python); no stored key holds a NUL.
                    out.append("false")
                    continue
                out.append("(CASE WHEN pg_catalog.jsonb_typeof(m.metadata #> %s::text[]) = 'number' "
                           f"THEN (m.metadata #> %s::text[])::text::double precision END) {cmp} %s")
                params.extend([["langgraph", "value", *path], ["langgraph", "value", *path], bound])
            else:
                raise ValueError(f"unsupported filter operator: {op}")
    elif isinstance(value, dict):
        for k, v in value.items():
            _filter_sql(v, [*path, k], out, params)
    else:
        _equals(value, path, out, params)


def _holdable(value: Any) -> bool:
    """Whether a stored value could hold ``value`` (JSON has no NaN or infinity, PostgreSQL no NUL)."""
    try:
        _storable(value, "")
    except ValueError:
        return False
    return True


def _equals(value: Any, path: list[str], out: list[str], params: list[Any]) -> None:
    """The stored value at ``path`` equals ``value`` (a missing field equals None, as in LangGraph)."""
    if not _holdable(path) or not _holdable(value):
        # No stored value holds it (puts refuse it), so nothing equals it; `$ne` matches all.
        out.append("false")
    elif value is None:
        out.append("coalesce(m.metadata #> %s::text[], 'null'::jsonb) = 'null'::jsonb")
        params.append(["langgraph", "value", *path])
    else:
        out.append("(m.metadata #> %s::text[]) = %s::jsonb")
        params.extend([["langgraph", "value", *path], Jsonb(value)])


def _matches(condition: MatchCondition, namespace: tuple[str, ...]) -> bool:
    path = tuple(condition.path)
    if len(namespace) < len(path):
        return False
    pairs = zip(namespace, path) if condition.match_type == "prefix" else zip(reversed(namespace), reversed(path))
    return all(p == "*" or n == p for n, p in pairs)


class AgentMemoryStore(BaseStore):
    """A LangGraph store whose items are agent_memory memories (see the module's docstring).

    ``AgentMemoryStore(dsn)`` opens a pool of its own; ``pool=`` shares one. ``index`` is
    LangGraph's index configuration: only its ``fields`` are used (the server embeds with its text
    model, ``agent_memory.text_model``). ``evictable=True`` lets the forgetting pass retire items
    by the retention settings and the capacity (by default they stay until deleted or past their
    TTL).
    """

    supports_ttl = True

    def __init__(self, dsn: str | None = None, *, pool: ConnectionPool | None = None, user_label: int = 0,
                 kind: str = "semantic", protected: bool = False, index: dict[str, Any] | None = None,
                 max_size: int = 10, ttl: TTLConfig | None = None, evictable: bool = False):
        if pool is None:
            if dsn is None:
                raise ValueError("pass a dsn or a pool")
            pool = ConnectionPool(dsn, min_size=1, max_size=max_size, open=True)
            self._owned = True
        else:
            self._owned = False
        if kind not in KINDS:
            raise ValueError(f"kind must be one of {', '.join(KINDS)}")
        if protected and evictable:
            raise ValueError("protected=True keeps every item and evictable=True lets them go: choose one")
        self.pool = pool
        self.user_label = user_label
        self.kind = kind
        self.protected = protected
        self.evictable = evictable
        if ttl is not None and ttl.get("default_ttl") is not None and protected:
            raise ValueError("a protected store never expires its items: a default TTL needs protected=False")
        self.ttl_config = ttl
        # Each user's items past their TTL are swept by the store's next put for that user once
        # the interval (seconds) has passed since its last sweep (sweep_ttl and start_ttl_sweeper
        # sweep every user the connection's role may see; the sweeper every interval too).
        self._sweep_every = 60 * float((ttl or {}).get("sweep_interval_minutes") or 5)
        self._swept: dict[str, float] = {}
        self._sweeper: threading.Thread | None = None
        self._sweeper_stop = threading.Event()
        fields = (index or {}).get("fields") or ["$"]
        self._fields = [(f, tokenize_path(f) if f != "$" else f) for f in fields]
        self._vector_schema: str | None = None

    # --- mapping -------------------------------------------------------------------------------

    def _user_of(self, namespace: Sequence[str]) -> str:
        # The labels were checked by `batch` (LangGraph's `validate_op_namespace`: non-empty
        # strings without a period, which the stored subject joins them with).
        if len(namespace) <= self.user_label:
            raise ValueError(f"the namespace {tuple(namespace)!r} has no user label at position {self.user_label}")
        user = namespace[self.user_label]
        if not user.strip() or user == "*":
            raise ValueError(f"the namespace {tuple(namespace)!r} names no user at position {self.user_label}")
        return user

    def _kind_of(self, namespace: Sequence[str]) -> str:
        return next((label for label in namespace if label in KINDS), self.kind)

    def _text_of(self, op: PutOp) -> tuple[str, list[str]]:
        """The memory's content (the texts an item is indexed by, joined), and those texts (none
        for an item that is not indexed)."""
        assert op.value is not None
        # A memory's content is never empty (the extension refuses it): an item with no text to
        # index stands by its key, or by its namespace and key when the key is blank.
        unindexed = op.key if op.key.strip() else PREFIX + ".".join((*op.namespace, op.key))
        if op.index is False:
            return unindexed, []
        fields = self._fields if op.index is None else [(f, tokenize_path(f)) for f in op.index]
        texts: list[str] = []
        for path, tokens in fields:
            texts.extend(t for t in get_text_at_path(op.value, tokens if path != "$" else "$") if t.strip())
        if not texts:
            return unindexed, []
        return "\n".join(texts), texts

    @staticmethod
    def _item(lg: dict[str, Any], created_at: datetime, score: float | None = None,
              search: bool = False) -> Item:
        updated = datetime.fromisoformat(lg["updated_at"]) if lg.get("updated_at") else created_at
        args = dict(namespace=tuple(lg["namespace"]), key=lg["key"], value=lg["value"], created_at=created_at,
                    updated_at=updated)
        return SearchItem(**args, score=score) if search else Item(**args)

    # --- operations ----------------------------------------------------------------------------

    def _get(self, cur: psycopg.Cursor[Any], op: GetOp, user: str) -> Item | None:
        cur.execute(f"SELECT {_ITEM} FROM agent_memory.memories m WHERE m.user_id = %s AND m.subject = %s "
                    f"AND m.predicate = %s AND {_LIVE}",
                    [user, _subject(op.namespace), PREFIX + op.key])
        row = cur.fetchone()
        if row is None:
            return None
        if op.refresh_ttl:
            cur.execute(_REFRESH, [user, [row[2]]])
        return self._item(row[0], row[1])

    def _put(self, cur: psycopg.Cursor[Any], op: PutOp, user: str) -> None:
        args: dict[str, Any] = {"user": user, "subject": _subject(op.namespace),
                                "predicate": PREFIX + op.key}
        if op.value is None:
            cur.execute(_DELETE, args)
            return
        if op.ttl is not None and (not isinstance(op.ttl, (int, float)) or not math.isfinite(op.ttl) or op.ttl <= 0):
            raise ValueError(f"ttl must be a positive number of minutes, not {op.ttl!r}")
        if op.ttl is not None and self.protected:
            raise ValueError("a protected store never expires its items: a TTL needs a store made with protected=False")
        _storable(op.value, "the value")
        _storable(list(op.namespace) + [op.key], "the namespace and key")
        content, texts = self._text_of(op)
        lg: dict[str, Any] = {"namespace": list(op.namespace), "key": op.key, "value": dict(op.value),
                              "indexed": bool(texts)}
        if len(texts) > 1:
            # Scored by its best text, as LangGraph scores it: the texts are kept, and embedded
            # now, so that a search finds their embeddings in the user's cache.
            lg["texts"] = texts
        if op.ttl is not None:
            lg["ttl"] = float(op.ttl)
        # An item stays until deleted or past its TTL (a protected memory, which its valid_until
        # still ends), unless the store lets the forgetting pass have it.
        protected = self.protected or not self.evictable
        # An item with no text to index (put with index=False, or without the fields) is stored
        # only: no embedding, never recalled.
        args.update(kind=self._kind_of(op.namespace), protected=protected, content=content, lg=Jsonb(lg),
                    indexed=bool(texts),
                    ttl=None if op.ttl is None else float(op.ttl))
        cur.execute(_UPDATE, args)
        if cur.rowcount == 0:
            # A first put. Two writers racing on a new key: the unique active fact index lets one
            # insert, and the other updates the row it made.
            try:
                with cur.connection.transaction():
                    cur.execute(_INSERT, args)
            except psycopg.errors.UniqueViolation:
                cur.execute(_UPDATE, args)
        if len(texts) > 1:
            cur.execute("SELECT count(*) FROM agent_memory.memory_embed(%s::text[])", [texts])
        self._sweep_user(cur, user)

    def _sweep_user(self, cur: psycopg.Cursor[Any], user: str) -> None:
        now = time.monotonic()
        if now - self._swept.get(user, -math.inf) < self._sweep_every:
            return
        if len(self._swept) >= 100_000:
            self._swept.clear()
        self._swept[user] = now
        cur.execute(_SWEEP + " AND m.user_id = %s", [user])

    def sweep_ttl(self) -> int:
        """Retires the items past their TTL (reason ``expired``) of every user the connection's
        role may see, as PostgresStore's ``sweep_ttl`` deletes them; returns how many."""
        try:
            with self.pool.connection() as conn, conn.cursor() as cur:
                cur.execute(_SWEEP)
                return cur.rowcount
        except psycopg.Error as e:
            raise AgentMemoryError.from_psycopg(e) from e

    def start_ttl_sweeper(self, sweep_interval_minutes: int | None = None) -> concurrent.futures.Future[None]:
        """Runs ``sweep_ttl`` every ``sweep_interval_minutes`` (else the TTL configuration's, else 5)
        in a thread until ``stop_ttl_sweeper``, as PostgresStore does."""
        future: concurrent.futures.Future[None] = concurrent.futures.Future()
        if self._sweeper is not None and self._sweeper.is_alive():
            future.add_done_callback(lambda f: self._sweeper_stop.set() if f.cancelled() else None)
            return future
        self._sweeper_stop.clear()
        interval = 60 * float(sweep_interval_minutes) if sweep_interval_minutes else self._sweep_every

        def loop() -> None:
            while not self._sweeper_stop.wait(interval):
                try:
                    self.sweep_ttl()
                except Exception:  # a failed sweep is tried again at the next interval
                    pass
            future.set_result(None)

        self._sweeper = threading.Thread(target=loop, daemon=True, name="agent-memory-ttl-sweeper")
        self._sweeper.start()
        future.add_done_callback(lambda f: self._sweeper_stop.set() if f.cancelled() else None)
        return future

    def stop_ttl_sweeper(self, timeout: float | None = None) -> bool:
        """Stops the sweeper thread; False if it was still running after ``timeout`` seconds."""
        if self._sweeper is None or not self._sweeper.is_alive():
            return True
        self._sweeper_stop.set()
        self._sweeper.join(timeout)
        if self._sweeper.is_alive():
            return False
        self._sweeper = None
        return True

    def _vectors(self, cur: psycopg.Cursor[Any]) -> str:
        if self._vector_schema is None:
            cur.execute("SELECT n.nspname FROM pg_catalog.pg_extension e JOIN pg_catalog.pg_namespace n "
                        "ON n.oid = e.extnamespace WHERE e.extname = 'vector'")
            row = cur.fetchone()
            if row is None:
                raise AgentMemoryError("pgvector is not installed in this database", sqlstate="58P01")
            self._vector_schema = sql.Identifier(row[0]).as_string(cur.connection)
        return self._vector_schema

    def _search(self, cur: psycopg.Cursor[Any], op: SearchOp, user: str | None) -> list[SearchItem]:
        subject = _subject(op.namespace_prefix)
        # Without a user, every user's items the connection's role may see (row-level security
        # decides: an admin every user, an application role the user its connection names, if any).
        conditions, params = (["m.source = 'langgraph'"], []) if user is None else (["m.user_id = %s"], [user])
        if op.namespace_prefix:
            conditions.append("(m.subject = %s OR m.subject LIKE %s)")
            params += [subject, _like_escape(subject) + ".%"]
        else:
            conditions.append("m.subject LIKE %s")
            params.append(_like_escape(subject) + "%")
        conditions.append(_LIVE)
        if op.filter:
            _filter_sql(op.filter, [], conditions, params)
        where = " AND ".join(conditions)
        if op.query:
            vs = self._vectors(cur)
            cur.execute(
                f"WITH c AS MATERIALIZED (SELECT m.emb, {_ITEM} FROM agent_memory.memories m WHERE {where}), "
                f"q AS (SELECT agent_memory.memory_embed(%s::text) AS v) "
                f"SELECT c.lg, c.created_at, c.id, CASE WHEN NOT (c.lg ->> 'indexed')::boolean THEN NULL "
                # An item of several texts scores by its best one (their embeddings come from the
                # user's cache, where its put left them, or the model again).
                f"WHEN c.lg ? 'texts' THEN (SELECT max(1 - (t.embedding OPERATOR({vs}.<=>) q.v)) "
                f"FROM agent_memory.memory_embed(ARRAY(SELECT pg_catalog.jsonb_array_elements_text(c.lg -> 'texts'))) t) "
                f"WHEN c.emb IS NOT NULL THEN 1 - (c.emb OPERATOR({vs}.<=>) q.v) END AS score "
                f"FROM c, q ORDER BY score DESC NULLS LAST, c.id LIMIT %s OFFSET %s",
                [*params, op.query, op.limit, op.offset])
            rows = cur.fetchall()
            self._refresh(cur, op, user, [r[2] for r in rows])
            return [self._item(lg, created, score, search=True) for lg, created, _, score in rows]  # type: ignore[misc]
        cur.execute(f"SELECT {_ITEM} FROM agent_memory.memories m WHERE {where} "
                    "ORDER BY m.created_at, m.id LIMIT %s OFFSET %s", [*params, op.limit, op.offset])
        rows = cur.fetchall()
        self._refresh(cur, op, user, [r[2] for r in rows])
        return [self._item(lg, created, search=True) for lg, created, _ in rows]  # type: ignore[misc]

    @staticmethod
    def _refresh(cur: psycopg.Cursor[Any], op: SearchOp, user: str | None, ids: list[int]) -> None:
        if op.refresh_ttl and ids:
            if user is None:
                cur.execute(_REFRESH.replace("m.user_id = %s AND ", ""), [ids])
            else:
                cur.execute(_REFRESH, [user, ids])

    def _named_users(self, op: ListNamespacesOp) -> set[str]:
        """The users that the operation's prefix conditions name (no wildcard at the user label)."""
        return {c.path[self.user_label] for c in op.match_conditions or ()
                if c.match_type == "prefix" and len(c.path) > self.user_label and c.path[self.user_label] != "*"}

    def _list_namespaces(self, cur: psycopg.Cursor[Any], op: ListNamespacesOp) -> list[tuple[str, ...]]:
        conditions = [_LIVE, "m.subject LIKE 'langgraph:%%'"]
        params: list[Any] = []
        for user in self._named_users(op):
            conditions.append("m.user_id = %s")
            params.append(user)
        cur.execute("SELECT DISTINCT m.metadata -> 'langgraph' -> 'namespace' FROM agent_memory.memories m "
                    f"WHERE {' AND '.join(conditions)}", params)
        namespaces = {tuple(row[0]) for row in cur.fetchall()}
        namespaces = {ns for ns in namespaces if all(_matches(c, ns) for c in op.match_conditions or ())}
        if op.max_depth is not None:
            namespaces = {ns[: op.max_depth] for ns in namespaces}
        return sorted(namespaces)[op.offset : op.offset + op.limit]

    def _user_for(self, op: Op) -> str | None:
        if isinstance(op, (GetOp, PutOp)):
            return self._user_of(op.namespace)
        if isinstance(op, SearchOp):
            # A prefix shorter than the user label searches every user the connection may see.
            if len(op.namespace_prefix) <= self.user_label:
                return None
            return self._user_of(op.namespace_prefix)
        if isinstance(op, ListNamespacesOp):
            users = self._named_users(op)
            return users.pop() if len(users) == 1 else None
        raise ValueError(f"unknown operation: {type(op).__name__}")

    def batch(self, ops: Iterable[Op]) -> list[Result]:
        """Runs the operations in order, each in a transaction of its own for its user, once every
        operation's namespace labels are valid (an invalid one fails the batch before any runs)."""
        ops = list(ops)
        for op in ops:
            validate_op_namespace(op)
        results: list[Result] = []
        for op in ops:
            user = self._user_for(op)
            try:
                with self.pool.connection() as conn, conn.cursor() as cur:
                    if user is not None:
                        cur.execute(SET_USER, [user])
                    if isinstance(op, GetOp):
                        assert user is not None
                        results.append(self._get(cur, op, user))
                    elif isinstance(op, PutOp):
                        assert user is not None
                        self._put(cur, op, user)
                        results.append(None)
                    elif isinstance(op, SearchOp):
                        results.append(self._search(cur, op, user))
                    else:
                        assert isinstance(op, ListNamespacesOp)
                        results.append(self._list_namespaces(cur, op))
            except psycopg.Error as e:
                raise AgentMemoryError.from_psycopg(e) from e
        return results

    async def abatch(self, ops: Iterable[Op]) -> list[Result]:
        """``batch`` in a worker thread, so the event loop never waits on the database."""
        return await asyncio.to_thread(self.batch, list(ops))

    def close(self) -> None:
        self.stop_ttl_sweeper()
        if self._owned:
            self.pool.close()

    def __enter__(self) -> "AgentMemoryStore":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


__all__ = ["AgentMemoryStore"]

