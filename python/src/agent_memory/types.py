"""What the client's calls return: one frozen dataclass per kind of row."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime


@dataclass(frozen=True)
class Remembered:
    """What ``remember`` did: ``action`` is ADD, UPDATE (``previous_id`` superseded), DELETE or NONE."""

    action: str
    memory_id: int | None
    previous_id: int | None
    version: int | None


@dataclass(frozen=True)
class Recalled:
    """One memory recall returned, best first (``score`` is recall's ranking score)."""

    id: int
    content: str
    score: float
    similarity: float | None
    kind: str
    subject: str | None
    predicate: str | None
    object: str | None
    importance: float
    created_at: datetime | None
    path: str
    vector_rank: int | None
    keyword_rank: int | None


@dataclass(frozen=True)
class ContextItem:
    """One row of the prompt's memory, in prompt order: ``channel`` is procedural, working or long_term."""

    position: int
    channel: str
    memory_id: int | None
    turn_id: int | None
    role: str | None
    content: str
    tokens: int
    score: float | None
    created_at: datetime | None


@dataclass(frozen=True)
class HistoryEntry:
    """One version of a memory (or a memory merged into it), oldest first."""

    id: int
    kind: str
    subject: str | None
    predicate: str | None
    object: str | None
    content: str
    active: bool
    retired_reason: str | None
    created_at: datetime
    retired_at: datetime | None
    superseded_by: int | None
    version: int


@dataclass(frozen=True)
class Erasure:
    """The receipt of an erasure: a keyed hash of the user id and the rows deleted, no content."""

    receipt_id: int
    user_hash: str
    erased_at: datetime
    memories: int
    turns: int
    tasks: int
