"""What the suites' fixtures share (copied beside their tests as ``tests/_am_common.py``): the test
server's connection string, a database of the suites' own with the extension, and emptying it."""

import os

import psycopg

DB = "am_langgraph_suite"


def dsn(db: str = DB) -> str:
    host = os.environ["AGENT_MEMORY_TEST_HOST"]
    port = os.environ.get("AGENT_MEMORY_TEST_PORT", "5432")
    return f"host={host} port={port} user=postgres dbname={db}"


def fresh_database() -> str:
    """The suites' database, made anew with the extension; its connection string."""
    with psycopg.connect(dsn("postgres"), autocommit=True) as c:
        c.execute(f"DROP DATABASE IF EXISTS {DB} WITH (FORCE)")
        c.execute(f"CREATE DATABASE {DB}")
    with psycopg.connect(dsn(), autocommit=True) as c:
        c.execute("CREATE EXTENSION agent_memory CASCADE")
    return dsn()


def empty() -> None:
    """No item left: every memory of the suites' database gone."""
    with psycopg.connect(dsn(), autocommit=True) as c:
        c.execute("TRUNCATE agent_memory.memories")
