"""The full-text index over active records, one per database vendor.

SQLite: an FTS5 table (porter stemming over unicode61) whose rowid is the
record's integer id; ``scope_key`` holds one numeric token per scope so a
query can restrict candidates to the visible scopes inside the index.
PostgreSQL: a side table with an ``english`` tsvector (GIN) and the scope.
The services keep either one in step in the same transaction as every
insert, supersession and tombstone. Each index row also carries the public
``record_id``: a candidate is used only when it names the same record as the
row it joins (so an index row can never vouch for a different record), and
no foreign key ties the side table to ``memory_record`` (Django's flush
truncates model tables only).
"""

from django.db import migrations

SQLITE_FORWARD = [
    "CREATE VIRTUAL TABLE memory_record_fts USING fts5("
    "content, scope_key, record_id UNINDEXED, tokenize='porter unicode61')",
    # rank = bm25 over the content only: the scope token never adds relevance.
    "INSERT INTO memory_record_fts(memory_record_fts, rank) VALUES('rank', 'bm25(1.0, 0.0)')",
]
SQLITE_BACKWARD = ["DROP TABLE IF EXISTS memory_record_fts"]

POSTGRES_FORWARD = [
    "CREATE TABLE memory_record_fts ("
    " record_pk bigint PRIMARY KEY,"
    " record_id varchar(40) NOT NULL,"
    " scope varchar(200) NOT NULL,"
    " document tsvector NOT NULL)",
    "CREATE INDEX memory_record_fts_document ON memory_record_fts USING gin (document)",
    "CREATE INDEX memory_record_fts_scope ON memory_record_fts (scope)",
]
POSTGRES_BACKWARD = ["DROP TABLE IF EXISTS memory_record_fts"]


def _run(statements_by_vendor):
    def apply(apps, schema_editor):
        statements = statements_by_vendor.get(schema_editor.connection.vendor)
        if statements is None:
            raise RuntimeError(
                f"memory: no full-text index for database vendor {schema_editor.connection.vendor!r}"
            )
        for statement in statements:
            schema_editor.execute(statement)

    return apply


class Migration(migrations.Migration):
    dependencies = [("memory", "0001_initial")]

    operations = [
        migrations.RunPython(
            _run({"sqlite": SQLITE_FORWARD, "postgresql": POSTGRES_FORWARD}),
            _run({"sqlite": SQLITE_BACKWARD, "postgresql": POSTGRES_BACKWARD}),
        )
    ]
