"""AgentMemoryStore against LangGraph itself: a compiled StateGraph that uses it, and the same
operations on LangGraph's InMemoryStore (given the server's own embeddings) returning the same."""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from typing import TypedDict

import psycopg
import pytest
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, START, StateGraph
from langgraph.runtime import Runtime
from langgraph.store.base import InvalidNamespaceError, PutOp, SearchOp
from langgraph.store.memory import InMemoryStore

from agent_memory import Memory
from agent_memory.errors import AgentMemoryError
from agent_memory.langgraph import AgentMemoryStore


@pytest.fixture(scope="module")
def store(dsn: str):
    with AgentMemoryStore(dsn) as s:
        yield s


def server_embeddings(dsn: str):
    def embed(texts: list[str]) -> list[list[float]]:
        with psycopg.connect(dsn) as conn:
            rows = conn.execute("SELECT embedding::text FROM agent_memory.memory_embed(%s::text[]) ORDER BY ordinal",
                                [texts]).fetchall()
        return [[float(x) for x in r[0][1:-1].split(",")] for r in rows]
    return embed


def test_the_same_operations_return_what_the_in_memory_store_returns(dsn: str, store: AgentMemoryStore, user: str):
    reference = InMemoryStore(index={"dims": 384, "embed": server_embeddings(dsn)})
    puts = [
        ((user, "prefs"), "editor", {"text": "Prefers neovim for editing code", "n": 3, "tags": ["dev"]}),
        ((user, "prefs"), "food", {"text": "Loves spicy ramen", "n": 5, "tags": ["food"]}),
        ((user, "prefs", "pets"), "dog", {"text": "Has a dog named Rex", "n": 7, "owner": {"since": 2019}}),
        ((user, "episodic"), "trip", {"text": "Went hiking in the Alps in June", "n": 1, "tags": ["travel"]}),
        ((user, "notes"), "raw", {"text": "not for search", "n": 2, "tags": []}, False),
        ((user, "prefs"), "editor", {"text": "Prefers helix for editing code", "n": 4, "tags": ["dev"]}),
        ((user, "prefs"), "drink", {"text": "Drinks green tea every morning", "n": 6, "tags": ["food"]}),
    ]
    for s in (store, reference):
        for p in puts:
            s.put(p[0], p[1], p[2], index=p[3] if len(p) > 3 else None)
        s.delete((user, "prefs"), "food")

    def same(ours, theirs):
        assert [(i.namespace, i.key, i.value) for i in ours] == [(i.namespace, i.key, i.value) for i in theirs]

    assert store.get((user, "prefs"), "editor").value == reference.get((user, "prefs"), "editor").value
    assert store.get((user, "prefs"), "food") is None and reference.get((user, "prefs"), "food") is None
    assert store.get((user, "nowhere"), "editor") is None
    for query in ("which editor do I use?", "what do I drink?", "pets", "mountains"):
        ours = store.search((user,), query=query, limit=10)
        theirs = reference.search((user,), query=query, limit=10)
        same(ours, theirs)
        for a, b in zip(ours, theirs):
            assert (a.score is None) == (b.score is None)
            if a.score is not None:
                assert abs(a.score - b.score) < 1e-5
        same(store.search((user,), query=query, limit=2, offset=1),
             reference.search((user,), query=query, limit=2, offset=1))
    for prefix in ((user,), (user, "prefs"), (user, "prefs", "pets"), (user, "pre")):
        assert sorted(i.key for i in store.search(prefix, limit=50)) == sorted(
            i.key for i in reference.search(prefix, limit=50))
    for flt in ({"n": {"$gte": 4}}, {"n": {"$lt": 4, "$ne": 1}}, {"tags": ["food"]}, {"owner": {"since": 2019}},
                {"n": 6}, {"text": "Loves spicy ramen"}, {"owner": None}, {"owner": {"$ne": None}},
                {"n": {"$eq": 3}}, {"tags": {"$ne": ["dev"]}}, {"owner": {"since": {"$gt": 2000}}}):
        assert sorted(i.key for i in store.search((user,), filter=flt)) == sorted(
            i.key for i in reference.search((user,), filter=flt)), flt
    same(store.search((user,), query="editing code", filter={"tags": ["dev"]}),
         reference.search((user,), query="editing code", filter={"tags": ["dev"]}))
    for kwargs in ({"prefix": (user,)}, {"prefix": (user,), "max_depth": 2}, {"prefix": (user, "prefs")},
                   {"prefix": (user,), "suffix": ("pets",)}, {"prefix": (user, "*", "pets")},
                   {"prefix": (user,), "limit": 2, "offset": 1}):
        assert store.list_namespaces(**kwargs) == reference.list_namespaces(**kwargs), kwargs


def test_items_are_memories_of_the_namespaces_user(dsn: str, store: AgentMemoryStore, user: str,
                                                   admin: psycopg.Connection, writer_dsn: str):
    store.put((user, "episodic", "trips"), "lisbon", {"text": "Visited Lisbon in May"})
    store.put((user, "facts"), "city", {"text": "Lives in Porto"})
    rows = admin.execute("SELECT kind, subject, predicate, emb IS NOT NULL, version FROM agent_memory.memories "
                         "WHERE user_id = %s AND active ORDER BY id", [user]).fetchall()
    assert rows == [("episodic", f"langgraph:{user}.episodic.trips", "langgraph:lisbon", True, 1),
                    ("semantic", f"langgraph:{user}.facts", "langgraph:city", True, 1)]
    store.put((user, "facts"), "city", {"text": "Lives in Braga"})
    # A put of the same key updates the memory in place: one row, its version up, its content embedded anew.
    rows = admin.execute("SELECT id, content, version, emb IS NOT NULL FROM agent_memory.memories "
                         "WHERE user_id = %s AND predicate = 'langgraph:city'", [user]).fetchall()
    assert len(rows) == 1 and "Lives in Braga" in rows[0][1] and rows[0][2:] == (2, True)
    assert admin.execute("SELECT agent_memory.memory_embed(%s) <=> emb < 1e-6 FROM agent_memory.memories "
                         "WHERE id = %s", [rows[0][1], rows[0][0]]).fetchone() == (True,)
    # Recall by words finds the store's items; another user's namespace never does.
    with Memory(dsn) as m:
        assert m.recall(user, "where do I live?", 1)[0].content.find("Braga") >= 0
    other = user + "-b"
    with AgentMemoryStore(writer_dsn) as w:
        assert w.get((user, "facts"), "city").value == {"text": "Lives in Braga"}
        assert w.search((other,), query="where do I live?") == []
        w.put((other, "facts"), "city", {"text": "Lives in Faro"})
        assert [i.value["text"] for i in w.search((other,), query="where do I live?")] == ["Lives in Faro"]
        assert [i.value["text"] for i in w.search((user,), query="where do I live?", filter={"text": {"$ne": "x"}},
                                                  limit=1)] == ["Lives in Braga"]
    # The erasure takes the user's items with it.
    with Memory(dsn) as m:
        assert m.erase(user).memories == 2
    assert store.get((user, "facts"), "city") is None


def test_a_deleted_key_put_again_is_a_new_item_and_bad_namespaces_are_refused(store: AgentMemoryStore, user: str,
                                                                               admin: psycopg.Connection):
    store.put((user, "k"), "a", {"text": "first"})
    store.delete((user, "k"), "a")
    assert store.get((user, "k"), "a") is None
    store.put((user, "k"), "a", {"text": "second"})
    assert store.get((user, "k"), "a").value == {"text": "second"}
    rows = admin.execute("SELECT active, retired_reason FROM agent_memory.memories WHERE user_id = %s ORDER BY id",
                         [user]).fetchall()
    assert rows == [(False, "deleted"), (True, None)]
    for bad in ((user, "a.b"), (user, "")):
        with pytest.raises(InvalidNamespaceError):
            store.batch([PutOp(bad, "k", {"text": "x"})])
    with pytest.raises(ValueError):
        store.batch([PutOp((), "k", {"text": "x"})])


def test_a_value_is_bounded_like_any_metadata(store: AgentMemoryStore, user: str, admin: psycopg.Connection):
    # agent_memory.max_metadata_bytes (64 kB by default) holds for the store's values too (0.12.0).
    with pytest.raises(AgentMemoryError) as e:
        store.put((user, "big"), "a", {"text": "a note", "blob": "x" * 200_000})
    assert e.value.sqlstate == "54000" and "max_metadata_bytes" in str(e.value)
    assert store.get((user, "big"), "a") is None
    store.put((user, "big"), "b", {"text": "a note", "blob": "x" * 1_000})
    assert store.get((user, "big"), "b") is not None


def test_blank_keys_and_texts_are_items_too(store: AgentMemoryStore, user: str):
    store.put((user, "blank"), "", {"text": ""})
    store.put((user, "blank"), " ", {"text": "   "}, index=False)
    assert store.get((user, "blank"), "").value == {"text": ""}
    assert store.get((user, "blank"), " ").value == {"text": "   "}
    assert {i.key for i in store.search((user, "blank"))} == {"", " "}


def test_what_jsonb_cannot_hold_is_a_clear_value_error(store: AgentMemoryStore, user: str):
    for value in ({"x": float("nan")}, {"x": [1.0, float("inf")]}, {"x": "a\x00b"}, {"a\x00": 1}):
        with pytest.raises(ValueError, match="NaN|NUL"):
            store.put((user, "odd"), "k", value)
    assert store.get((user, "odd"), "k") is None
    # A filter may hold them: what no item can hold equals nothing, infinities bound numbers.
    store.put((user, "odd"), "n", {"x": 5, "s": "ab"})
    found = lambda f: [i.key for i in store.search((user, "odd"), filter=f)]  # noqa: E731
    assert found({"s": "a\x00b"}) == [] and found({"s": {"$ne": "a\x00b"}}) == ["n"]
    assert found({"x": {"$lt": float("inf")}}) == ["n"] and found({"x": {"$gt": float("-inf")}}) == ["n"]
    assert found({"x": {"$gt": float("inf")}}) == [] and found({"x": {"$lt": float("nan")}}) == []
    assert found({"a\x00": 1}) == [] and found({"x": float("nan")}) == []


def test_ttls_expire_items_and_reads_refresh_them(dsn: str, store: AgentMemoryStore, user: str,
                                                 admin: psycopg.Connection):
    assert store.supports_ttl
    ns = (user, "ttl")
    store.put(ns, "short", {"text": "gone soon"}, ttl=1 / 60)   # one second
    store.put(ns, "kept", {"text": "no ttl"})
    assert store.get(ns, "short") is not None
    time.sleep(1.5)
    assert store.get(ns, "short") is None
    assert [i.key for i in store.search(ns)] == ["kept"]
    # The store's sweep retires it as expired.
    assert store.sweep_ttl() >= 1
    reason = admin.execute("SELECT retired_reason FROM agent_memory.memories WHERE user_id = %s "
                           "AND predicate = 'langgraph:short'", [user]).fetchone()
    assert reason == ("expired",)
    # A read refreshes an item's TTL; a read with refresh_ttl=False does not.
    store.put(ns, "read", {"text": "read often"}, ttl=2 / 60)
    for _ in range(3):
        time.sleep(1)
        assert store.get(ns, "read") is not None
    assert [i.key for i in store.search(ns, query="read often") if i.key == "read"] == ["read"]
    time.sleep(1)
    assert store.get(ns, "read", refresh_ttl=False) is not None
    time.sleep(1.5)
    assert store.get(ns, "read") is None
    # A store-level default, and the refusals.
    with AgentMemoryStore(dsn, ttl={"default_ttl": 1 / 60, "refresh_on_read": False}) as s:
        s.put(ns, "default", {"text": "default ttl"})
        assert s.get(ns, "default") is not None
        time.sleep(1.5)
        assert s.get(ns, "default") is None
    for bad in (0, -1.0, float("nan")):
        with pytest.raises(ValueError):
            store.put(ns, "bad", {"text": "x"}, ttl=bad)
    with AgentMemoryStore(dsn, protected=True) as p:
        with pytest.raises(ValueError, match="protected"):
            p.put(ns, "p", {"text": "x"}, ttl=5)
    with pytest.raises(ValueError, match="protected"):
        AgentMemoryStore(dsn, protected=True, ttl={"default_ttl": 5})


def test_a_search_without_a_user_label_searches_every_user_the_role_may_see(dsn: str, writer_dsn: str, user: str):
    other = user + "-other"
    with AgentMemoryStore(dsn) as s:  # a superuser sees every user
        s.put((user, "notes"), "a", {"text": "likes green tea in the morning"})
        s.put((other, "notes"), "b", {"text": "likes strong black coffee"})
        mine = {user, other}
        found = {(i.namespace[0], i.key) for i in s.search((), limit=1000) if i.namespace[0] in mine}
        assert found == {(user, "a"), (other, "b")}
        ranked = [i for i in s.search((), query="green tea", limit=1000) if i.namespace[0] in mine]
        assert [(i.namespace[0], i.key) for i in ranked] == [(user, "a"), (other, "b")]
        assert ranked[0].score is not None and ranked[0].score > ranked[1].score
    # An application role sees the user its connection names, and no other.
    with AgentMemoryStore(writer_dsn + f" options='-c agent_memory.user_id={user}'") as w:
        assert {(i.namespace[0], i.key) for i in w.search((), limit=1000)} == {(user, "a")}
        assert [i.key for i in w.search((), query="coffee", limit=1000)] == ["a"]
    with AgentMemoryStore(writer_dsn) as w:
        assert w.search(()) == []
    # A writer of another tenant (bound to its users) sees none of these, whatever user it names.
    with psycopg.connect(dsn, autocommit=True) as su:
        su.execute("DO $$ BEGIN IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'am_py_tenant') "
                   "THEN CREATE ROLE am_py_tenant LOGIN; END IF; END $$")
        su.execute("SELECT agent_memory.grant_access('am_py_tenant', 'writer')")
        su.execute("SELECT agent_memory.bind_role('am_py_tenant', 'tenant-z-%')")
    tenant_dsn = dsn.replace("user=postgres", "user=am_py_tenant")
    for named in ("tenant-z-1", user):
        with AgentMemoryStore(tenant_dsn + f" options='-c agent_memory.user_id={named}'") as t:
            assert not {i.namespace[0] for i in t.search((), limit=1000)} & mine
            assert not {i.namespace[0] for i in t.search((), query="green tea", limit=1000)} & mine


def test_concurrent_first_puts_of_one_key_leave_one_item(store: AgentMemoryStore, user: str, admin: psycopg.Connection):
    barrier = threading.Barrier(8)
    errors: list[BaseException] = []

    def put(i: int) -> None:
        try:
            barrier.wait()
            store.put((user, "race"), "k", {"text": f"value {i}", "i": i})
        except BaseException as e:  # noqa: BLE001
            errors.append(e)

    threads = [threading.Thread(target=put, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert admin.execute("SELECT count(*) FROM agent_memory.memories WHERE user_id = %s AND active",
                         [user]).fetchone() == (1,)
    assert store.get((user, "race"), "k").value["i"] in range(8)


def test_a_user_label_elsewhere_in_the_namespace(dsn: str, user: str, admin: psycopg.Connection):
    with AgentMemoryStore(dsn, user_label=1) as s:
        s.put(("memories", user), "m1", {"content": "Prefers window seats"})
        assert [i.key for i in s.search(("memories", user), query="seat on a plane")] == ["m1"]
        # A prefix shorter than the user label searches every user the connection may see.
        assert user in {i.namespace[1] for i in s.search(("memories",), query="window seat", limit=1000)}
    assert admin.execute("SELECT count(*) FROM agent_memory.memories WHERE user_id = %s", [user]).fetchone() == (1,)


class State(TypedDict):
    message: str
    recalled: list[str]


@dataclass
class Context:
    user_id: str


def test_a_state_graph_remembers_across_two_threads_of_a_user(store: AgentMemoryStore, user: str):
    def remember_and_recall(state: State, runtime: Runtime[Context]) -> dict:
        namespace = (runtime.context.user_id, "memories")
        found = runtime.store.search(namespace, query=state["message"], limit=3)
        if state["message"].startswith("remember:"):
            text = state["message"].removeprefix("remember:").strip()
            runtime.store.put(namespace, f"m{len(runtime.store.search(namespace, limit=100))}", {"text": text})
        return {"recalled": [i.value["text"] for i in found]}

    builder = StateGraph(State, context_schema=Context)
    builder.add_node("memory", remember_and_recall)
    builder.add_edge(START, "memory")
    builder.add_edge("memory", END)
    graph = builder.compile(checkpointer=InMemorySaver(), store=store)

    ctx = Context(user_id=user)
    graph.invoke({"message": "remember: my favourite colour is teal", "recalled": []},
                 {"configurable": {"thread_id": "thread-1"}}, context=ctx)
    graph.invoke({"message": "remember: I was born in Porto", "recalled": []},
                 {"configurable": {"thread_id": "thread-1"}}, context=ctx)
    # Another thread of the same user finds what the first one stored.
    out = graph.invoke({"message": "what colour do I like?", "recalled": []},
                       {"configurable": {"thread_id": "thread-2"}}, context=ctx)
    assert out["recalled"][0] == "my favourite colour is teal"
    assert set(out["recalled"]) == {"my favourite colour is teal", "I was born in Porto"}
    # Another user's thread finds nothing.
    out = graph.invoke({"message": "what colour do I like?", "recalled": []},
                       {"configurable": {"thread_id": "thread-3"}}, context=Context(user_id=user + "-x"))
    assert out["recalled"] == []


def test_items_stay_until_deleted_and_an_evictable_store_lets_them_go(dsn: str, store: AgentMemoryStore, user: str,
                                                                    admin: psycopg.Connection):
    kept, loose = (user, "kept"), (user, "loose")
    for i in range(6):
        store.put(kept, f"k{i}", {"text": f"the garden's bed number {i} grows tomatoes"})
    with AgentMemoryStore(dsn, evictable=True) as s:
        for i in range(6):
            s.put(loose, f"k{i}", {"text": f"the kitchen's shelf number {i} holds spices"})
    flags = admin.execute("SELECT metadata #>> '{langgraph,namespace,1}', bool_and(protected), bool_or(protected) "
                          "FROM agent_memory.memories WHERE user_id = %s AND active GROUP BY 1 ORDER BY 1",
                          [user]).fetchall()
    assert flags == [("kept", True, True), ("loose", False, False)]
    # Far above the capacity: eviction takes every item it may, and none of the default store's.
    admin.execute("SET agent_memory.capacity = 3")
    admin.execute("SELECT * FROM agent_memory.memory_forget()")
    admin.execute("RESET agent_memory.capacity")
    assert all(store.get(kept, f"k{i}") is not None for i in range(6))
    assert all(store.get(loose, f"k{i}") is None for i in range(6))
    # Items with a TTL stay until it passes: eviction does not take them before.
    for i in range(3):
        store.put(kept, f"t{i}", {"text": f"the attic's box number {i} holds letters"}, ttl=10)
    admin.execute("SET agent_memory.capacity = 3")
    admin.execute("SELECT * FROM agent_memory.memory_forget()")
    admin.execute("RESET agent_memory.capacity")
    assert all(store.get(kept, f"t{i}") is not None for i in range(3))
    # A TTL still ends an item of the default store, and the forgetting pass retires it then.
    store.put(kept, "brief", {"text": "a note for one second"}, ttl=1 / 60)
    time.sleep(1.5)
    assert store.get(kept, "brief") is None
    # The forgetting pass leaves a protected memory; the store's sweep retires it.
    admin.execute("SELECT * FROM agent_memory.memory_forget()")
    assert admin.execute("SELECT active FROM agent_memory.memories WHERE user_id = %s "
                         "AND predicate = 'langgraph:brief'", [user]).fetchone() == (True,)
    assert store.sweep_ttl() >= 1
    assert admin.execute("SELECT active, retired_reason FROM agent_memory.memories WHERE user_id = %s "
                         "AND predicate = 'langgraph:brief'", [user]).fetchone() == (False, "expired")
    assert all(store.get(kept, f"t{i}") is not None for i in range(3))
    # The next put for a user sweeps that user's items once the interval has passed, and the
    # sweeper thread sweeps every user.
    with AgentMemoryStore(dsn, ttl={"sweep_interval_minutes": 1 / 60}) as s:
        s.put(kept, "brief2", {"text": "another note for one second"}, ttl=1 / 60)
        time.sleep(1.5)
        s.put(kept, "other", {"text": "a put that sweeps"})
        assert admin.execute("SELECT active FROM agent_memory.memories WHERE user_id = %s "
                             "AND predicate = 'langgraph:brief2'", [user]).fetchone() == (False,)
        s.put(kept, "brief3", {"text": "a third note for one second"}, ttl=1 / 60)
        s.start_ttl_sweeper()
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and admin.execute(
                "SELECT active FROM agent_memory.memories WHERE user_id = %s AND predicate = 'langgraph:brief3' "
                "AND retired_at IS NULL", [user]).fetchone() is not None:
            time.sleep(0.5)
        assert s.stop_ttl_sweeper(timeout=10)
        assert admin.execute("SELECT active, retired_reason FROM agent_memory.memories WHERE user_id = %s "
                             "AND predicate = 'langgraph:brief3'", [user]).fetchone() == (False, "expired")
    # Putting it again without a TTL makes it stay again.
    store.put(kept, "brief", {"text": "a note that stays"})
    assert admin.execute("SELECT protected, expires_at FROM agent_memory.memories WHERE user_id = %s "
                         "AND predicate = 'langgraph:brief' AND active", [user]).fetchone() == (True, None)
    with pytest.raises(ValueError, match="choose one"):
        AgentMemoryStore(dsn, protected=True, evictable=True)
    # In an evictable store, an item put again without its TTL takes the retention again.
    with AgentMemoryStore(dsn, evictable=True) as s:
        s.put(loose, "t", {"text": "a short note"}, ttl=1)
        s.put(loose, "t", {"text": "a short note, kept"})
        left = admin.execute("SELECT expires_at - now() > interval '1 day' FROM agent_memory.memories "
                             "WHERE user_id = %s AND predicate = 'langgraph:t' AND active", [user]).fetchone()
        assert left == (True,)


def test_several_indexed_texts_score_by_the_best_as_in_the_in_memory_store(dsn: str, user: str):
    """Several fields, a list path and a per-put index: scores and order equal InMemoryStore's
    given the server's embeddings (LangGraph embeds each text and scores an item by its best)."""
    fields = ["title", "notes[*].text", "tag"]
    reference = InMemoryStore(index={"dims": 384, "embed": server_embeddings(dsn), "fields": fields})
    ns = (user, "multi")
    puts = [
        ("a", {"title": "xxx", "notes": [{"text": "zzz"}, {"text": "a trip to Lisbon"}], "tag": "travel"}, None),
        ("b", {"title": "uuu", "notes": [{"text": "vvv"}], "tag": "xxx"}, None),
        ("c", {"title": "quarterly budget review", "notes": [], "tag": "work"}, None),
        ("d", {"title": "ignored", "body": "xxx exactly", "extra": "garden"}, ["body", "extra"]),
    ]
    with AgentMemoryStore(dsn, index={"fields": fields}) as ours:
        for s in (ours, reference):
            for key, value, index in puts:
                s.put(ns, key, value, index=index)
        for query in ("xxx", "zzz", "vvv", "a trip to Lisbon", "garden", "budget"):
            mine = ours.search(ns, query=query, limit=10)
            theirs = reference.search(ns, query=query, limit=10)
            assert [i.key for i in mine] == [i.key for i in theirs], query
            for m, t in zip(mine, theirs):
                assert m.score is not None and t.score is not None
                assert abs(m.score - t.score) < 1e-5, (query, m.key, m.score, t.score)
        # "xxx" is a whole text of a (its title) and of b (its tag): each scores 1, as one text.
        assert [round(i.score or 0, 4) for i in ours.search(ns, query="xxx", limit=2)] == [1.0, 1.0]
        # A later put with one text scores by the memory's own embedding again.
        ours.put(ns, "a", {"title": "a single title"})
        assert ours.search(ns, query="zzz", limit=10)[-1].key in {"a", "c"}


def test_an_item_put_with_index_false_has_no_embedding_and_no_recall_finds_it(store: AgentMemoryStore, user: str,
                                                                              admin: psycopg.Connection):
    ns = (user, "notes")
    store.put(ns, "plain", {"text": "the quartz lamp stands in the hallway"}, index=False)
    store.put(ns, "found", {"text": "the quartz lamp is broken"})
    store.put(ns, "nofield", {"other": "quartz lamp"}, index=["text"])
    rows = {r[0]: r[1:] for r in admin.execute("SELECT predicate, emb IS NULL, embedding_model FROM agent_memory.memories "
                                                "WHERE user_id = %s AND active", [user]).fetchall()}
    assert rows["langgraph:plain"] == (True, "none") and rows["langgraph:nofield"] == (True, "none")
    assert rows["langgraph:found"] == (False, "all-MiniLM-L6-v2")
    # Not by the store's search (no score, after the scored one), nor by recall of any channel.
    assert [(i.key, i.score is None) for i in store.search(ns, query="quartz lamp")][0] == ("found", False)
    assert {i.key for i in store.search(ns, query="quartz lamp") if i.score is None} == {"plain", "nofield"}
    for call in ("SELECT m.id FROM agent_memory.memory_recall(%s, 'quartz lamp hallway', 10) m",
                 "SELECT m.id FROM agent_memory.memory_recall(%s, NULL::vector, 10, query_text => 'quartz lamp hallway') m"):
        ids = {r[0] for r in admin.execute(call, [user]).fetchall()}
        contents = {r[0] for r in admin.execute("SELECT predicate FROM agent_memory.memories WHERE id = ANY (%s)",
                                                [list(ids)]).fetchall()}
        assert contents == {"langgraph:found"}, call
    # The worker's queue and the packs pass it by; a get still finds it.
    assert store.get(ns, "plain").value == {"text": "the quartz lamp stands in the hallway"}
    # Indexed again: embedded and found; unindexed again: its embedding goes.
    store.put(ns, "plain", {"text": "the quartz lamp stands in the hallway"})
    assert admin.execute("SELECT embedding_model, emb IS NOT NULL FROM agent_memory.memories WHERE user_id = %s "
                         "AND predicate = 'langgraph:plain' AND active", [user]).fetchone() == ("all-MiniLM-L6-v2", True)
    assert any(i.key == "plain" and i.score is not None for i in store.search(ns, query="quartz lamp"))
    store.put(ns, "plain", {"text": "the quartz lamp stands in the hallway"}, index=False)
    assert admin.execute("SELECT embedding_model, emb IS NULL FROM agent_memory.memories WHERE user_id = %s "
                         "AND predicate = 'langgraph:plain' AND active", [user]).fetchone() == ("none", True)
    # The extension refuses an embedding for it, and "none" as a call's model.
    with pytest.raises(psycopg.errors.InvalidParameterValue):
        admin.execute("UPDATE agent_memory.memories SET emb = agent_memory.memory_embed('x') WHERE user_id = %s "
                      "AND predicate = 'langgraph:plain' AND active", [user])
    for call in ("SELECT * FROM agent_memory.memory_recall(%s, 'quartz', 5, model => 'none')",
                 "SELECT agent_memory.memory_embed('quartz', model => 'none') WHERE %s::text IS NOT NULL"):
        with pytest.raises(psycopg.errors.InvalidParameterValue, match="none"):
            admin.execute(call, [user])


def test_an_episode_past_its_ttl_stays_gone_after_the_forgetting_pass(dsn: str, store: AgentMemoryStore, user: str,
                                                                      admin: psycopg.Connection):
    # The forgetting pass moves an episode past its retention to the archive; an item past its
    # TTL must not come back from there.
    ns = (user, "episodic", "log")
    store.put(ns, "e", {"text": "an episode with a short ttl"}, ttl=1 / 60)
    time.sleep(1.5)
    assert store.get(ns, "e") is None
    admin.execute("SELECT * FROM agent_memory.memory_forget()")
    assert store.get(ns, "e") is None and store.search(ns) == []
    store.sweep_ttl()
    assert admin.execute("SELECT active, retired_reason FROM agent_memory.memories WHERE user_id = %s "
                         "AND predicate = 'langgraph:e'", [user]).fetchone() == (False, "expired")
    # In an evictable store the forgetting pass retires it (past its valid_until), not archives it.
    with AgentMemoryStore(dsn, evictable=True) as s:
        s.put(ns, "f", {"text": "an evictable episode with a short ttl"}, ttl=1 / 60)
        time.sleep(1.5)
        admin.execute("SELECT * FROM agent_memory.memory_forget()")
        assert s.get(ns, "f") is None and s.search(ns) == []
    assert admin.execute("SELECT active, retired_reason FROM agent_memory.memories WHERE user_id = %s "
                         "AND predicate = 'langgraph:f'", [user]).fetchone() == (False, "expired")


def test_consolidation_merges_no_items_of_two_namespaces(store: AgentMemoryStore, user: str, admin: psycopg.Connection):
    # The same key under two namespaces, with near-identical texts: two items, which consolidation
    # must not merge into one (merging compares facts of one subject).
    store.put((user, "home"), "plant", {"text": "the fern needs water every Monday"})
    store.put((user, "office"), "plant", {"text": "the fern needs water every Monday."})
    admin.execute("SELECT * FROM agent_memory.memory_consolidate()")
    assert store.get((user, "home"), "plant") is not None and store.get((user, "office"), "plant") is not None
