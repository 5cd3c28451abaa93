"""Store access, private to the engine: the codec (events to bytes and back, the chain hash), the
log store (opening a URL, reading rows and pages, saving, mapping storage errors), the SQLite and
PostgreSQL recorders, the hash-chain walk and the export/import format.

Nothing here is API: ``Ledger``, ``Session`` and ``VerifyResult`` are (see docs/core-api.md). The
modules built on the API (CLI, viewer, proxy, hooks, integrations, ...) never import this package;
pyproject.toml's ``store-is-private`` contract checks it."""
