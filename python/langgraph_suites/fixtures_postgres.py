# --- agent_memory: the fixtures of this file, rebuilt on AgentMemoryStore. ---
# Appended to langgraph-checkpoint-postgres's tests/test_store.py by python/langgraph_suites/run.py;
# a later definition of a fixture's (or helper's) name is the one the tests use, and a fixture of
# the module comes before one of the suite's conftest of the same name (which would connect to
# the suite's own server). Each test starts from an empty database; the stores keep the TTL
# settings of the suite's own fixtures; the server embeds with its own model, so
# `fake_embeddings` only stands in for the argument the helpers take.
import contextlib as _am_contextlib

import psycopg as _am_psycopg

from agent_memory.langgraph import AgentMemoryStore as _AgentMemoryStore
from tests import _am_common


@pytest.fixture(scope="session")
def _am_database() -> str:
    return _am_common.fresh_database()


@pytest.fixture(scope="function")
def conn(_am_database: str):
    with _am_psycopg.connect(_am_database, autocommit=True) as c:
        yield c


@pytest.fixture(scope="function", autouse=True)
def clear_test_db(_am_database: str) -> None:
    _am_common.empty()


@pytest.fixture(scope="function")
def store(_am_database: str):
    ttl_config = {"default_ttl": TTL_MINUTES, "refresh_on_read": True}
    with _AgentMemoryStore(_am_database, ttl=ttl_config) as s:
        yield s


@_am_contextlib.contextmanager
def _create_vector_store(
    vector_type: str,
    distance_type: str,
    fake_embeddings: Embeddings,
    text_fields: list[str] | None = None,
    enable_ttl: bool = True,
):
    _am_common.empty()
    with _AgentMemoryStore(_am_common.dsn(), index={"fields": text_fields} if text_fields else None,
                           ttl={"default_ttl": 2, "refresh_on_read": True} if enable_ttl else None) as s:
        yield s
