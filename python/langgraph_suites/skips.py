"""The tests of LangGraph's own store suites that do not apply to AgentMemoryStore, each with the
reason, by suite and by test name (a parametrized test by its name before "[")."""

EMBEDDED_BY_THE_SERVER = ("the server embeds with its own model (all-MiniLM-L6-v2), not the test's character "
                          "embeddings, so the exact scores this test expects differ")

OWN_SWEEPER = ("uses PostgresStore's TTL sweeper and its omit_expired option, and writes its table: this store never "
               "returns an item past its TTL, and the forgetting pass retires it")

SKIPS: dict[str, dict[str, str]] = {
    "sqlite": {
        "test_scores": EMBEDDED_BY_THE_SERVER,
        "test_vector_store_initialization": "inspects SqliteStore's own attributes (embeddings, index_config) "
                                            "and its SQLite tables",
        "test_sql_injection_vulnerability": "SqliteStore refuses filter keys it cannot quote; here a key is a "
                                            "bound parameter, never SQL text, so no key is refused (as in "
                                            "InMemoryStore and PostgresStore)",
        "test_filter_keys_with_hyphens_and_digits": "reads a dotted filter key as a nested path, which is "
                                                    "SqliteStore's own: InMemoryStore and PostgresStore (and "
                                                    "this store) read it as one key",
        "TestSqliteStore": "tests SqliteStore itself, made in the test body",
        "test_nonnull_migrations": "tests SqliteStore's own migrations",
        "test_escape_glob_literal": "tests SqliteStore's own SQL helpers",
        "test_namespace_match_pattern": "tests SqliteStore's own SQL helpers",
        "test_list_namespaces_prefix_uses_indexable_condition": "tests SqliteStore's own SQL",
    },
    "postgres": {
        "test_scores": EMBEDDED_BY_THE_SERVER,
        "test_vector_store_initialization": "inspects PostgresStore's own attributes (embeddings, index_config) "
                                            "and its tables",
        "test_omit_expired_filters_read_paths": OWN_SWEEPER,
        "test_omit_expired_disabled_preserves_expired_rows": OWN_SWEEPER,
        "test_omit_expired_refresh_ttl_only_refreshes_live_rows": OWN_SWEEPER,
        "test_omit_expired_search_pagination": OWN_SWEEPER,
        "test_nonnull_migrations": "tests PostgresStore's own migrations",
        "test_escape_like_literal": "tests PostgresStore's own SQL helpers",
        "test_namespace_match_pattern": "tests PostgresStore's own SQL helpers",
    },
}
