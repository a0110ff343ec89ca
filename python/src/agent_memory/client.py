"""``Memory`` and ``AsyncMemory``: the extension's SQL API as Python calls, over a connection pool.

Each call is one statement of the extension (``memory_reconcile``, ``memory_recall``, ...) in a
transaction of its own, after ``set_config('agent_memory.user_id', user, true)`` names the user the
transaction acts for, so a pooled connection never carries a user from one call to the next. Every
guarantee (exact recall, versions, tenancy, the token budget) stays in the database.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, Concatenate, ParamSpec, TypeVar

import psycopg
from psycopg_pool import AsyncConnectionPool, ConnectionPool

from . import _calls
from ._calls import SET_USER, Call
from .errors import AgentMemoryError

P = ParamSpec("P")
T = TypeVar("T")


def _sync(build: Callable[P, Call[T]]) -> Callable[Concatenate["Memory", P], T]:
    def method(self: "Memory", /, *args: P.args, **kwargs: P.kwargs) -> T:
        return self.run(build(*args, **kwargs))

    method.__name__ = build.__name__
    method.__doc__ = build.__doc__
    return method


def _async(build: Callable[P, Call[T]]) -> Callable[Concatenate["AsyncMemory", P], Awaitable[T]]:
    async def method(self: "AsyncMemory", /, *args: P.args, **kwargs: P.kwargs) -> T:
        return await self.run(build(*args, **kwargs))

    method.__name__ = build.__name__
    method.__doc__ = build.__doc__
    return method


class Memory:
    """A synchronous client: ``Memory(dsn)`` opens a pool (``min_size``, ``max_size``); pass
    ``pool=`` to share one of your own. Use it as a context manager, or call ``close()``."""

    def __init__(self, dsn: str | None = None, *, pool: ConnectionPool | None = None, min_size: int = 1,
                 max_size: int = 10, **pool_kwargs: Any):
        if pool is None:
            if dsn is None:
                raise ValueError("pass a dsn or a pool")
            pool = ConnectionPool(dsn, min_size=min_size, max_size=max_size, open=True, **pool_kwargs)
            self._owned = True
        else:
            self._owned = False
        self.pool = pool

    def run(self, call: Call[T]) -> T:
        """Runs one call in a transaction of its own (the user set for it)."""
        try:
            with self.pool.connection() as conn, conn.cursor() as cur:
                if call.user_id is not None:
                    cur.execute(SET_USER, [call.user_id])
                cur.execute(call.query, call.params)
                rows = cur.fetchall() if cur.description else []
                return call.result(rows)
        except psycopg.Error as e:
            raise AgentMemoryError.from_psycopg(e) from e

    remember = _sync(_calls.remember)
    recall = _sync(_calls.recall)
    context = _sync(_calls.context)
    context_text = _sync(_calls.context_text)
    record_turn = _sync(_calls.record_turn)
    forget = _sync(_calls.forget)
    history = _sync(_calls.history)
    erase = _sync(_calls.erase)

    def close(self) -> None:
        if self._owned:
            self.pool.close()

    def __enter__(self) -> "Memory":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class AsyncMemory:
    """The asynchronous client (asyncio): ``async with AsyncMemory(dsn) as memory: ...``; or
    ``await memory.open()`` first and ``await memory.close()`` after."""

    def __init__(self, dsn: str | None = None, *, pool: AsyncConnectionPool | None = None, min_size: int = 1,
                 max_size: int = 10, **pool_kwargs: Any):
        if pool is None:
            if dsn is None:
                raise ValueError("pass a dsn or a pool")
            pool = AsyncConnectionPool(dsn, min_size=min_size, max_size=max_size, open=False, **pool_kwargs)
            self._owned = True
        else:
            self._owned = False
        self.pool = pool

    async def open(self) -> None:
        if self._owned:
            await self.pool.open()

    async def run(self, call: Call[T]) -> T:
        """Runs one call in a transaction of its own (the user set for it)."""
        try:
            async with self.pool.connection() as conn, conn.cursor() as cur:
                if call.user_id is not None:
                    await cur.execute(SET_USER, [call.user_id])
                await cur.execute(call.query, call.params)
                rows = await cur.fetchall() if cur.description else []
                return call.result(rows)
        except psycopg.Error as e:
            raise AgentMemoryError.from_psycopg(e) from e

    async def session_user(self) -> str | None:
        """The user the connection's own settings name (``agent_memory.user_id``), if any."""
        try:
            async with self.pool.connection() as conn, conn.cursor() as cur:
                await cur.execute("SELECT nullif(btrim(current_setting('agent_memory.user_id', true)), '')")
                row = await cur.fetchone()
                return row[0] if row else None
        except psycopg.Error as e:
            raise AgentMemoryError.from_psycopg(e) from e

    remember = _async(_calls.remember)
    recall = _async(_calls.recall)
    context = _async(_calls.context)
    context_text = _async(_calls.context_text)
    record_turn = _async(_calls.record_turn)
    forget = _async(_calls.forget)
    history = _async(_calls.history)
    erase = _async(_calls.erase)

    async def close(self) -> None:
        if self._owned:
            await self.pool.close()

    async def __aenter__(self) -> "AsyncMemory":
        await self.open()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()
