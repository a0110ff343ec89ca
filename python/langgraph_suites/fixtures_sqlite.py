# --- agent_memory: the fixtures of this file, rebuilt on AgentMemoryStore. ---
# Appended to langgraph-checkpoint-sqlite's tests/test_store.py by python/langgraph_suites/run.py;
# a later definition of a fixture's (or helper's) name is the one the tests use. Each test starts
# from an empty database (the store's memories truncated); the server embeds with its own model,
# so `fake_embeddings` only stands in for the argument the helpers take.
import os as _am_os

import psycopg as _am_psycopg

from agent_memory.langgraph import AgentMemoryStore as _AgentMemoryStore

_AM_DB = "am_langgraph_suite"


def _am_dsn(db: str) -> str:
    host = _am_os.environ["AGENT_MEMORY_TEST_HOST"]
    port = _am_os.environ.get("AGENT_MEMORY_TEST_PORT", "5432")
    return f"host={host} port={port} user=postgres dbname={db}"


@pytest.fixture(scope="session", autouse=True)
def _am_database() -> str:
    with _am_psycopg.connect(_am_dsn("postgres"), autocommit=True) as conn:
        conn.execute(f"DROP DATABASE IF EXISTS {_AM_DB} WITH (FORCE)")
        conn.execute(f"CREATE DATABASE {_AM_DB}")
    with _am_psycopg.connect(_am_dsn(_AM_DB), autocommit=True) as conn:
        conn.execute("CREATE EXTENSION agent_memory CASCADE")
    return _am_dsn(_AM_DB)


def _am_empty(dsn: str) -> None:
    with _am_psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("TRUNCATE agent_memory.memories")


@pytest.fixture(scope="function")
def store(_am_database: str) -> Generator[_AgentMemoryStore, None, None]:
    _am_empty(_am_database)
    with _AgentMemoryStore(_am_database) as s:
        yield s


@contextmanager
def create_vector_store(
    fake_embeddings: CharacterEmbeddings,
    text_fields: list[str] | None = None,
    distance_type: str = "cosine",
    conn_type: Literal["memory", "file"] = "memory",
) -> Generator[_AgentMemoryStore, None, None]:
    dsn = _am_dsn(_AM_DB)
    _am_empty(dsn)
    with _AgentMemoryStore(dsn, index={"fields": text_fields} if text_fields else None) as s:
        yield s
