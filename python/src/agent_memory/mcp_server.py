"""``agent-memory-mcp``: an MCP server (stdio) with the tools remember, recall, context and forget.

Its database is named by the environment variable ``AGENT_MEMORY_DSN`` (a libpq connection string
or URI), and the user whose memory it serves by ``AGENT_MEMORY_USER``, or else by the connection's
own ``agent_memory.user_id`` (for example ``options=-c agent_memory.user_id=user-07`` in the DSN,
or a role's default). The user is bound when the server starts: no tool takes a user id, so
nothing the model writes (a prompt injection included) can reach another user's memory. Each tool
is one call of the extension's SQL API; errors reach the client with their SQLSTATE and hint.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError

from .client import AsyncMemory
from .errors import AgentMemoryError

server = MCPServer("agent-memory", instructions=(
    "Long-term memory of the users you talk with. Call recall (or context, for a prompt within a token budget) "
    "before answering; call remember with each new fact, preference or event the user tells; forget a memory "
    "by its id when the user asks."))

_memory: AsyncMemory | None = None
_user: str | None = None


async def _client() -> AsyncMemory:
    global _memory, _user
    if _memory is None:
        dsn = os.environ.get("AGENT_MEMORY_DSN")
        if not dsn:
            raise RuntimeError("set AGENT_MEMORY_DSN to the database's connection string")
        memory = AsyncMemory(dsn, min_size=1, max_size=4)
        await memory.open()
        user = os.environ.get("AGENT_MEMORY_USER", "").strip() or await memory.session_user()
        if not user:
            await memory.close()
            # (A ValueError reaches the client as the tool's error, with this text.)
            raise ValueError("set AGENT_MEMORY_USER to the user this server serves (or agent_memory.user_id in the "
                             "connection's options)")
        _memory, _user = memory, user
    return _memory


def _bound_user() -> str:
    assert _user is not None
    return _user


@contextmanager
def _reported() -> Iterator[None]:
    """The database's error (SQLSTATE, message, hint) and a bad argument reach the client as the
    tool's error, not as a bare failure."""
    try:
        yield
    except (AgentMemoryError, ValueError) as e:
        raise ToolError(str(e)) from e


@server.tool()
async def remember(text: str, subject: str | None = None, predicate: str | None = None,
                   object: str | None = None, kind: str = "semantic", negate: bool = False) -> dict[str, Any]:
    """Remember a statement about the user: free text, or a fact keyed by subject and predicate (a new
    object supersedes the old; negate retires it). Returns the action (ADD, UPDATE, DELETE, NONE) and the
    memory's id."""
    with _reported():
        r = await (await _client()).remember(_bound_user(), text, subject=subject, predicate=predicate, object=object,
                                             kind=kind, negate=negate or None)
    return {"action": r.action, "memory_id": r.memory_id, "previous_id": r.previous_id, "version": r.version}


@server.tool()
async def recall(question: str, k: int = 5) -> list[dict[str, Any]]:
    """The k memories of the user that best answer a question in words, best first."""
    with _reported():
        rows = await (await _client()).recall(_bound_user(), question, k)
    return [{"id": r.id, "content": r.content, "score": r.score, "kind": r.kind,
             "created_at": r.created_at.isoformat() if r.created_at else None} for r in rows]


@server.tool()
async def context(session_id: str, question: str, token_budget: int = 2000) -> str:
    """What the prompt should hold about the user for a request, within a token budget: standing
    instructions, the session's recent turns and the best long-term memories, as text."""
    with _reported():
        return await (await _client()).context_text(_bound_user(), session_id, question, token_budget)


@server.tool()
async def forget(memory_id: int) -> dict[str, Any]:
    """Forget one memory of the user by its id (it is retired, not shown again)."""
    with _reported():
        return {"forgotten": await (await _client()).forget(_bound_user(), memory_id)}


def main() -> None:
    server.run("stdio")


if __name__ == "__main__":
    main()
