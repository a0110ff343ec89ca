"""Memory and AsyncMemory against the real server: text in, memories out."""

from __future__ import annotations

import asyncio
from datetime import datetime, timedelta

import psycopg
import pytest

import agent_memory
from agent_memory import AgentMemoryError, AsyncMemory, Memory


@pytest.fixture(scope="module")
def memory(dsn: str):
    with Memory(dsn, max_size=4) as m:
        yield m


def test_remember_supersede_negate_and_recall_by_words(memory: Memory, user: str, admin: psycopg.Connection):
    first = memory.remember(user, "Lives in Lisbon", subject="user", predicate="city", object="Lisbon")
    assert (first.action, first.previous_id, first.version) == ("ADD", None, 1)
    moved = memory.remember(user, "Lives in Porto", subject="user", predicate="city", object="Porto")
    assert moved.action == "UPDATE" and moved.previous_id == first.memory_id and moved.version == 2
    again = memory.remember(user, "Lives in Porto", subject="user", predicate="city", object="Porto")
    assert again.action == "NONE" and again.memory_id == moved.memory_id
    memory.remember(user, "Is allergic to peanuts", subject="user", predicate="allergy", object="peanuts")
    gone = memory.remember(user, "Is not allergic to peanuts", subject="user", predicate="allergy",
                           object="peanuts", negate=True)
    assert gone.action == "DELETE"
    memory.remember(user, "Keeps a sourdough starter called Bubbles", kind="episodic")

    found = memory.recall(user, "which city do I live in?", 3)
    assert found[0].content == "Lives in Porto"
    assert isinstance(found[0], agent_memory.Recalled) and found[0].similarity is not None
    assert found[0].score >= found[-1].score and found[0].path == "exact"
    assert isinstance(found[0].created_at, datetime)
    # The retired versions are never recalled, and the server embedded every text itself.
    contents = [r.content for r in memory.recall(user, "peanuts allergy city", 10)]
    assert "Lives in Lisbon" not in contents and "Is allergic to peanuts" not in contents
    assert admin.execute("SELECT count(*) FROM agent_memory.memories WHERE user_id = %s AND emb IS NULL",
                         [user]).fetchone() == (0,)
    bread = memory.recall(user, "do I bake bread?", 1, kinds=["episodic"])
    assert [r.content for r in bread] == ["Keeps a sourdough starter called Bubbles"]


def test_recall_and_context_in_time(memory: Memory, user: str, admin: psycopg.Connection):
    memory.remember(user, "Lives in Lisbon", subject="user", predicate="city", object="Lisbon")
    between = admin.execute("SELECT clock_timestamp()").fetchone()[0]
    memory.remember(user, "Lives in Porto", subject="user", predicate="city", object="Porto")
    assert [r.content for r in memory.recall(user, "which city do I live in?", 1)] == ["Lives in Porto"]
    assert [r.content for r in memory.recall(user, "which city do I live in?", 1, as_of=between)] == ["Lives in Lisbon"]
    # Only what was said since the moment: the move.
    assert [r.content for r in memory.recall(user, "which city do I live in?", 5, since=between)] == ["Lives in Porto"]
    assert memory.recall(user, "which city do I live in?", 5, until=between - timedelta(seconds=30)) == []
    rows = memory.context(user, "s1", "which city do I live in?", 200, as_of=between)
    assert [r.content for r in rows if r.channel == "long_term"] == ["Lives in Lisbon"]
    assert "Lives in Lisbon" in memory.context_text(user, "s1", "which city?", 200, as_of=between)
    with pytest.raises(AgentMemoryError) as e:
        memory.recall(user, "which city?", 5, since=between, until=between)
    assert e.value.sqlstate == "22023"


def test_context_holds_turns_and_memories_within_the_budget(memory: Memory, user: str):
    turn = memory.record_turn(user, "s1", "user", "I just adopted a greyhound called Pixel")
    assert isinstance(turn, int)
    memory.remember(user, "Has a greyhound called Pixel", source_turn_id=turn)
    memory.remember(user, "Works night shifts as a nurse")
    memory.remember(user, "Answer in short sentences", kind="procedural")
    rows = memory.context(user, "s2", "what pet do I have?", 200)
    assert sum(r.tokens for r in rows) <= 200
    channels = [r.channel for r in rows]
    assert channels[0] == "procedural"
    assert "long_term" in channels
    assert any(r.content == "Has a greyhound called Pixel" for r in rows)
    # In the session of the turn, the turn is working memory, and the fact drawn from it is not repeated.
    same = memory.context(user, "s1", "what pet do I have?", 200)
    assert [r.content for r in same if r.channel == "working"] == ["I just adopted a greyhound called Pixel"]
    assert not any(r.content == "Has a greyhound called Pixel" for r in same)
    text = memory.context_text(user, "s1", "what pet do I have?", 200)
    assert "## Standing instructions" in text and "greyhound called Pixel" in text
    tight = memory.context(user, "s2", "what pet do I have?", 12)
    assert sum(r.tokens for r in tight) <= 12


def test_forget_history_and_erase(memory: Memory, user: str, admin: psycopg.Connection):
    a = memory.remember(user, "Uses vim", subject="user", predicate="editor", object="vim")
    b = memory.remember(user, "Uses neovim", subject="user", predicate="editor", object="neovim")
    c = memory.remember(user, "Uses helix", subject="user", predicate="editor", object="helix")
    chain = memory.history(b.memory_id)
    assert [h.id for h in chain] == [a.memory_id, b.memory_id, c.memory_id]
    assert [h.active for h in chain] == [False, False, True]
    assert chain[0].retired_reason == "superseded" and chain[0].superseded_by == b.memory_id

    assert memory.forget(user, c.memory_id) is True
    assert memory.forget(user, c.memory_id) is False  # already retired
    assert memory.forget("someone-else", a.memory_id) is False  # not that user's
    assert memory.recall(user, "which editor do I use?", 5) == []
    row = admin.execute("SELECT active, retired_reason FROM agent_memory.memories WHERE id = %s",
                        [c.memory_id]).fetchone()
    assert row == (False, "deleted")

    memory.record_turn(user, "s", "user", "hello")
    receipt = memory.erase(user)
    assert (receipt.memories, receipt.turns) == (3, 1) and len(receipt.user_hash) == 64
    assert admin.execute("SELECT count(*) FROM agent_memory.memories WHERE user_id = %s", [user]).fetchone() == (0,)


def test_errors_keep_their_sqlstate_and_hint(memory: Memory, user: str):
    with pytest.raises(AgentMemoryError) as e:
        memory.recall(user, "anything", 0)
    assert e.value.sqlstate == "22023" and e.value.hint
    with pytest.raises(AgentMemoryError) as e:
        memory.recall(user, "anything", 3, model="no-such-model")
    assert e.value.sqlstate == "22023" and "no-such-model" in str(e.value)
    with pytest.raises(AgentMemoryError) as e:
        memory.remember(user, "x", metadata=["not", "an", "object"])  # type: ignore[arg-type]
    assert e.value.sqlstate == "22023"
    with pytest.raises(ValueError):
        memory.recall("", "anything")
    # The pool's connection is usable after an error.
    assert memory.recall(user, "anything", 1) == []


def test_a_writer_role_acts_for_the_user_each_call_names_and_no_other(writer_dsn: str, user: str):
    other = user + "-other"
    # One connection: the user of one call never carries over to the next.
    with Memory(writer_dsn, min_size=1, max_size=1) as w:
        w.remember(user, "Plays the cello")
        w.remember(other, "Plays the drums")
        assert [r.content for r in w.recall(user, "what instrument do I play?", 5)] == ["Plays the cello"]
        assert [r.content for r in w.recall(other, "what instrument do I play?", 5)] == ["Plays the drums"]
        with pytest.raises(AgentMemoryError) as e:
            w.erase(user)  # erasure is for admins
        assert e.value.sqlstate == "42501"
        with w.pool.connection() as conn:
            # Outside a call, the role sees no user's rows.
            assert conn.execute("SELECT count(*) FROM agent_memory.memories").fetchone() == (0,)


def test_the_async_client(dsn: str, user: str):
    async def main() -> None:
        async with AsyncMemory(dsn, max_size=4) as m:
            users = [f"{user}-{i}" for i in range(8)]
            done = await asyncio.gather(*(m.remember(u, f"Has {i} cats") for i, u in enumerate(users)))
            assert all(r.action == "ADD" for r in done)
            found = await asyncio.gather(*(m.recall(u, "how many cats?", 3) for u in users))
            assert [[r.content for r in f] for f in found] == [[f"Has {i} cats"] for i in range(8)]
            turn = await m.record_turn(users[0], "s", "user", "I have no cats")
            ctx = await m.context(users[0], "s", "cats?", 100)
            assert any(r.turn_id == turn for r in ctx)
            assert "I have no cats" in await m.context_text(users[0], "s", "cats?", 100)
            assert await m.forget(users[1], done[1].memory_id) is True
            assert [h.active for h in await m.history(done[1].memory_id)] == [False]
            with pytest.raises(AgentMemoryError) as e:
                await m.recall(users[0], "cats", 5, decay="sideways")
            assert e.value.sqlstate == "22023"
            assert (await m.erase(users[2])).memories == 1

    asyncio.run(main())
