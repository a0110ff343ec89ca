"""Errors of the agent_memory client: every database error keeps its SQLSTATE and hint."""

from __future__ import annotations

import psycopg


class AgentMemoryError(Exception):
    """An error the database raised, with its SQLSTATE (``sqlstate``), ``hint`` and ``detail``.

    The psycopg exception it came from is its ``__cause__``. Common SQLSTATEs of the extension:
    ``22023`` (a bad argument: an unknown model, a keyword-only recall without words), ``42501``
    (the role may not act for this user), ``58P01`` (the model's files are not installed),
    ``54000`` (an input past a limit), ``55000`` (a retired memory, or the extension needs
    ``ALTER EXTENSION agent_memory UPDATE``), ``P0002`` (no such memory).
    """

    def __init__(self, message: str, sqlstate: str | None = None, hint: str | None = None, detail: str | None = None):
        super().__init__(message)
        self.message = message
        self.sqlstate = sqlstate
        self.hint = hint
        self.detail = detail

    @classmethod
    def from_psycopg(cls, error: psycopg.Error) -> "AgentMemoryError":
        diag = error.diag
        message = diag.message_primary or str(error).strip()
        return cls(message, sqlstate=error.sqlstate, hint=diag.message_hint, detail=diag.message_detail)

    def __str__(self) -> str:
        text = f"[{self.sqlstate}] {self.message}" if self.sqlstate else self.message
        if self.detail:
            text += f"\nDETAIL: {self.detail}"
        if self.hint:
            text += f"\nHINT: {self.hint}"
        return text
