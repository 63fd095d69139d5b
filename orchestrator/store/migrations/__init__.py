"""PostgreSQL schema migrations (architecture §9): ``NNNN_name.sql`` files, applied in order at
start by :func:`orchestrator.store.postgres_schema.migrate`, each once (``schema_migrations``
keeps the versions applied). A new migration is a new file with the next number; an applied
file is never edited."""
