"""The tests run against a real server with the extension (the test server of ./scripts/test.sh):
AGENT_MEMORY_TEST_HOST (its socket folder) and AGENT_MEMORY_TEST_PORT name it. Each run makes the
database agent_memory_python afresh, with the extension and an application role that is a writer."""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator

import psycopg
import pytest

DB = "agent_memory_python"
WRITER = "agent_memory_python_writer"


def _dsn(dbname: str, user: str = "postgres") -> str:
    host = os.environ.get("AGENT_MEMORY_TEST_HOST")
    if not host:
        pytest.exit("set AGENT_MEMORY_TEST_HOST and AGENT_MEMORY_TEST_PORT to a server with agent_memory "
                    "(./scripts/test.sh does)", returncode=2)
    port = os.environ.get("AGENT_MEMORY_TEST_PORT", "5432")
    return f"host={host} port={port} user={user} dbname={dbname}"


@pytest.fixture(scope="session")
def dsn() -> str:
    """An admin's (the superuser's) connection string to a fresh database with the extension."""
    with psycopg.connect(_dsn("postgres"), autocommit=True) as conn:
        conn.execute(f"DROP DATABASE IF EXISTS {DB} WITH (FORCE)")
        conn.execute(f"CREATE DATABASE {DB}")
    with psycopg.connect(_dsn(DB), autocommit=True) as conn:
        conn.execute("CREATE EXTENSION agent_memory CASCADE")
        if conn.execute("SELECT 1 FROM pg_roles WHERE rolname = %s", [WRITER]).fetchone() is None:
            conn.execute(f"CREATE ROLE {WRITER} LOGIN")
        conn.execute("SELECT agent_memory.grant_access(%s, 'writer')", [WRITER])
    return _dsn(DB)


@pytest.fixture(scope="session")
def writer_dsn(dsn: str) -> str:
    """An application role with the writer level: it sees only the user its transaction names."""
    return _dsn(DB, WRITER)


@pytest.fixture
def user() -> str:
    """A user id of this test alone."""
    return f"user-{uuid.uuid4().hex[:12]}"


@pytest.fixture
def admin(dsn: str) -> Iterator[psycopg.Connection]:
    """A plain connection to check what the database holds."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        yield conn
