# --- agent_memory: the fixtures of this file, rebuilt on AgentMemoryStore. ---
# Appended to langgraph-checkpoint-sqlite's tests/test_store.py by python/langgraph_suites/run.py;
# a later definition of a fixture's (or helper's) name is the one the tests use. Each test starts
# from an empty database; the server embeds with its own model, so `fake_embeddings` only stands
# in for the argument the helpers take.
from agent_memory.langgraph import AgentMemoryStore as _AgentMemoryStore
from tests import _am_common


@pytest.fixture(scope="session", autouse=True)
def _am_database() -> str:
    return _am_common.fresh_database()


@pytest.fixture(scope="function")
def store(_am_database: str) -> Generator[_AgentMemoryStore, None, None]:
    _am_common.empty()
    with _AgentMemoryStore(_am_database) as s:
        yield s


@contextmanager
def create_vector_store(
    fake_embeddings: CharacterEmbeddings,
    text_fields: list[str] | None = None,
    distance_type: str = "cosine",
    conn_type: Literal["memory", "file"] = "memory",
) -> Generator[_AgentMemoryStore, None, None]:
    _am_common.empty()
    with _AgentMemoryStore(_am_common.dsn(), index={"fields": text_fields} if text_fields else None) as s:
        yield s
