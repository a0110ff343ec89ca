"""The SQL of each client call, built once for the sync and the async client.

Each builder returns a ``Call``: one statement of the extension's SQL API, its parameters, the
user it acts for (set per transaction in ``agent_memory.user_id``, so row-level security and
recall's own checks see that user) and how its rows become the call's result.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Generic, TypeVar

from psycopg import sql
from psycopg.types.json import Jsonb

from .types import ContextItem, Erasure, HistoryEntry, Recalled, Remembered

T = TypeVar("T")

# Sets the user of the transaction (``SET LOCAL``), for row-level security and recall's checks.
SET_USER = "SELECT pg_catalog.set_config('agent_memory.user_id', %s, true)"


@dataclass(frozen=True)
class Call(Generic[T]):
    query: sql.SQL | sql.Composed
    params: Sequence[Any] | Mapping[str, Any]
    user_id: str | None
    result: Callable[[list[tuple[Any, ...]]], T]


def _named(options: Mapping[str, tuple[Any, str]]) -> tuple[list[sql.Composable], list[Any]]:
    """Named arguments (``name => %s::type``) for the options that were given (not None), so the
    server's defaults hold for the rest."""
    parts: list[sql.Composable] = []
    params: list[Any] = []
    for name, (value, pg_type) in options.items():
        if value is None:
            continue
        if pg_type == "jsonb":
            value = Jsonb(value)
        parts.append(sql.SQL("{} => %s::{}").format(sql.Identifier(name), sql.SQL(pg_type)))
        params.append(value)
    return parts, params


def _function_call(columns: str, function: str, positional: Sequence[tuple[Any, str]],
                   options: Mapping[str, tuple[Any, str]]) -> tuple[sql.Composed, list[Any]]:
    args: list[sql.Composable] = [sql.SQL("%s::{}").format(sql.SQL(t)) for _, t in positional]
    named, named_params = _named(options)
    query = sql.SQL("SELECT {} FROM agent_memory.{}({})").format(
        sql.SQL(columns), sql.Identifier(function), sql.SQL(", ").join(args + named))
    return query, [v for v, _ in positional] + named_params


def _user(user_id: str) -> str:
    if not isinstance(user_id, str) or not user_id.strip():
        raise ValueError("user_id must be a non-empty string")
    return user_id


def remember(user_id: str, text: str, *, subject: str | None = None, predicate: str | None = None,
             object: str | None = None, kind: str | None = None, importance: float | None = None,
             protected: bool | None = None, negate: bool | None = None, source: str | None = None,
             source_turn_id: int | None = None, expires_at: datetime | None = None,
             valid_until: datetime | None = None, metadata: Mapping[str, Any] | None = None,
             cardinality: str | None = None, task_id: str | None = None,
             model: str | None = None) -> Call[Remembered]:
    """Reconciles one statement (free text, or a fact keyed by subject and predicate) with the
    user's memories: ``memory_reconcile``, the server embedding the text."""
    query, params = _function_call(
        "action, memory_id, previous_id, version", "memory_reconcile",
        [(_user(user_id), "text"), (subject, "text"), (predicate, "text"), (object, "text"), (text, "text")],
        {"kind": (kind, "text"), "model": (model, "text"), "importance": (importance, "real"),
         "protected": (protected, "boolean"), "negate": (negate, "boolean"), "source": (source, "text"),
         "source_turn_id": (source_turn_id, "bigint"), "expires_at": (expires_at, "timestamptz"),
         "valid_until": (valid_until, "timestamptz"), "metadata": (metadata, "jsonb"),
         "cardinality": (cardinality, "text"), "task_id": (task_id, "text")})
    return Call(query, params, user_id, lambda rows: Remembered(*rows[0]))


RECALL_COLUMNS = ("id, content, score, similarity, kind, subject, predicate, object, importance, created_at, "
                  "path, vector_rank, keyword_rank")


def recall(user_id: str, question: str, k: int = 5, *, kinds: Sequence[str] | None = None,
           min_similarity: float | None = None, decay: str | None = None, touch: bool | None = None,
           archived: bool | None = None, task_id: str | None = None, untasked: bool | None = None,
           model: str | None = None, since: datetime | None = None, until: datetime | None = None,
           as_of: datetime | None = None) -> Call[list[Recalled]]:
    """The ``k`` best memories of the user for a question in words: ``memory_recall`` with the
    question as text (hybrid: its embedding and its words). ``since`` and ``until`` keep the
    memories said in ``since <= created_at < until``; ``as_of`` sees the facts that held then."""
    query, params = _function_call(
        RECALL_COLUMNS, "memory_recall", [(_user(user_id), "text"), (question, "text"), (k, "integer")],
        {"model": (model, "text"), "kinds": (list(kinds) if kinds is not None else None, "text[]"),
         "min_similarity": (min_similarity, "double precision"), "decay": (decay, "text"),
         "touch": (touch, "boolean"), "archived": (archived, "boolean"), "task_id": (task_id, "text"),
         "untasked": (untasked, "boolean"), **_window(since, until, as_of)})
    return Call(query, params, user_id, lambda rows: [Recalled(*r) for r in rows])


def _window(since: datetime | None, until: datetime | None, as_of: datetime | None) -> dict[str, tuple[Any, str]]:
    return {"since": (since, "timestamptz"), "until": (until, "timestamptz"), "as_of": (as_of, "timestamptz")}


def _context_options(token_budget: int, system_tokens: int | None, turns: int | None, k: int | None,
                     model: str | None, task_id: str | None, untasked: bool | None,
                     touch: bool | None, since: datetime | None, until: datetime | None,
                     as_of: datetime | None) -> dict[str, tuple[Any, str]]:
    return {"token_budget": (token_budget, "integer"), "system_tokens": (system_tokens, "integer"),
            "turns": (turns, "integer"), "k": (k, "integer"), "model": (model, "text"),
            "task_id": (task_id, "text"), "untasked": (untasked, "boolean"), "touch": (touch, "boolean"),
            **_window(since, until, as_of)}


def context(user_id: str, session_id: str, question: str, token_budget: int = 2000, *,
            system_tokens: int | None = None, turns: int | None = None, k: int | None = None,
            model: str | None = None, task_id: str | None = None, untasked: bool | None = None,
            touch: bool | None = None, since: datetime | None = None, until: datetime | None = None,
            as_of: datetime | None = None) -> Call[list[ContextItem]]:
    """The prompt's memory for a request, within a token budget: ``memory_context``."""
    query, params = _function_call(
        "position, channel, memory_id, turn_id, role, content, tokens, score, created_at", "memory_context",
        [(_user(user_id), "text"), (session_id, "text"), (question, "text")],
        _context_options(token_budget, system_tokens, turns, k, model, task_id, untasked, touch,
                         since, until, as_of))
    return Call(query, params, user_id, lambda rows: [ContextItem(*r) for r in rows])


def context_text(user_id: str, session_id: str, question: str, token_budget: int = 2000, *,
                 system_tokens: int | None = None, turns: int | None = None, k: int | None = None,
                 model: str | None = None, task_id: str | None = None, untasked: bool | None = None,
                 touch: bool | None = None, since: datetime | None = None, until: datetime | None = None,
                 as_of: datetime | None = None) -> Call[str]:
    """``context`` as one block of text for the prompt: ``memory_context_text``."""
    query, params = _function_call(
        "*", "memory_context_text", [(_user(user_id), "text"), (session_id, "text"), (question, "text")],
        _context_options(token_budget, system_tokens, turns, k, model, task_id, untasked, touch,
                         since, until, as_of))
    return Call(query, params, user_id, lambda rows: rows[0][0])


def record_turn(user_id: str, session_id: str, role: str, content: str, *, created_at: datetime | None = None,
                metadata: Mapping[str, Any] | None = None, task_id: str | None = None) -> Call[int]:
    """Records one conversation turn (``memory_record_turn``) and returns its id."""
    query, params = _function_call(
        "*", "memory_record_turn",
        [(_user(user_id), "text"), (session_id, "text"), (role, "text"), (content, "text")],
        {"created_at": (created_at, "timestamptz"), "metadata": (metadata, "jsonb"), "task_id": (task_id, "text")})
    return Call(query, params, user_id, lambda rows: rows[0][0])


# A caller-decided DELETE through reconcile, at the version the statement reads: the memory is
# retired with reason 'deleted' (kept until the purge), exactly as reconcile retires one.
FORGET = sql.SQL("""
SELECT r.action, r.memory_id
  FROM agent_memory.memories m,
       LATERAL agent_memory.memory_reconcile(m.user_id, NULL::text, NULL::text, NULL::text, m.content, m.emb,
                                             model => m.embedding_model, action => 'DELETE', target_id => m.id,
                                             expected_version => m.version) r
 WHERE m.user_id = %s AND m.id = %s AND m.active
""")


def forget(user_id: str, memory_id: int) -> Call[bool]:
    """Retires one memory of the user (reason 'deleted'); False when it is not an active memory of
    that user (or another writer changed it first)."""
    return Call(FORGET, [_user(user_id), memory_id], user_id,
                lambda rows: bool(rows) and rows[0][0] == "DELETE")


# A memory's versions: the rows it superseded (and those merged into it), back to the first, and
# the rows that superseded it, forward to the current one.
HISTORY = sql.SQL("""
WITH RECURSIVE start AS (
    SELECT m.user_id, m.id FROM agent_memory.memories m WHERE m.id = %(id)s
), back AS (
    SELECT s.user_id, s.id FROM start s
    UNION
    SELECT p.user_id, p.id FROM agent_memory.memories p JOIN back b ON p.user_id = b.user_id AND p.superseded_by = b.id
     WHERE p.retired_reason IN ('superseded', 'merged')
), fwd AS (
    SELECT s.user_id, s.id FROM start s
    UNION
    SELECT n.user_id, n.id FROM agent_memory.memories c JOIN fwd f ON c.user_id = f.user_id AND c.id = f.id
      JOIN agent_memory.memories n ON n.user_id = c.user_id AND n.id = c.superseded_by
     WHERE c.retired_reason IN ('superseded', 'merged')
)
SELECT m.id, m.kind, m.subject, m.predicate, m.object, m.content, m.active, m.retired_reason, m.created_at,
       m.retired_at, m.superseded_by, m.version
  FROM agent_memory.memories m
  JOIN (SELECT * FROM back UNION SELECT * FROM fwd) h ON h.user_id = m.user_id AND h.id = m.id
 ORDER BY m.created_at, m.id
""")


def history(memory_id: int, *, user_id: str | None = None) -> Call[list[HistoryEntry]]:
    """Every version of a memory, oldest first: what it superseded and what superseded it. A role
    that sees only the session's user passes ``user_id``."""
    return Call(HISTORY, {"id": memory_id}, user_id if user_id is None else _user(user_id),
                lambda rows: [HistoryEntry(*r) for r in rows])


def erase(user_id: str) -> Call[Erasure]:
    """Deletes every memory, turn and task of the user (``memory_erase``, admins) and returns the
    receipt."""
    query, params = _function_call("receipt_id, user_hash, erased_at, memories, turns, tasks", "memory_erase",
                                   [(_user(user_id), "text")], {})
    return Call(query, params, user_id, lambda rows: Erasure(*rows[0]))
