"""SQLite: index each word under its scope's prefix (see memory/search.py).

The scope restriction moves inside the index, so a query reads only the
postings of its words in the visible scopes. The table is rebuilt from the
active records; PostgreSQL is unchanged.
"""

from django.db import migrations

CREATE = (
    "CREATE VIRTUAL TABLE memory_record_fts USING fts5("
    "terms, record_id UNINDEXED, tokenize='porter unicode61')"
)
CREATE_V1 = (
    "CREATE VIRTUAL TABLE memory_record_fts USING fts5("
    "content, scope_key, record_id UNINDEXED, tokenize='porter unicode61')"
)
RANK_V1 = "INSERT INTO memory_record_fts(memory_record_fts, rank) VALUES('rank', 'bm25(1.0, 0.0)')"
# FTS5 keeps a deleted row's words in its index segments unless secure-delete
# is on (SQLite 3.44+, aetnaweb/sqlite.py); a forget must leave none behind.
SECURE_DELETE = "INSERT INTO memory_record_fts(memory_record_fts, rank) VALUES('secure-delete', 1)"
CHUNK = 5000


def _active_rows(connection):
    with connection.cursor() as cursor:
        last = 0
        while True:
            cursor.execute(
                "SELECT id, record_id, scope, content FROM memory_record "
                "WHERE status = 'active' AND id > %s ORDER BY id LIMIT %s",
                [last, CHUNK],
            )
            rows = cursor.fetchall()
            if not rows:
                return
            yield rows
            last = rows[-1][0]


def forward(apps, schema_editor):
    connection = schema_editor.connection
    if connection.vendor != "sqlite":
        return
    from memory.search import scoped_terms

    schema_editor.execute("DROP TABLE IF EXISTS memory_record_fts")
    schema_editor.execute(CREATE)
    schema_editor.execute(SECURE_DELETE)
    for rows in _active_rows(connection):
        with connection.cursor() as cursor:
            cursor.executemany(
                "INSERT INTO memory_record_fts(rowid, terms, record_id) VALUES (%s, %s, %s)",
                [
                    (pk, scoped_terms(scope, content), record_id)
                    for pk, record_id, scope, content in rows
                ],
            )


def backward(apps, schema_editor):
    connection = schema_editor.connection
    if connection.vendor != "sqlite":
        return
    import hashlib

    schema_editor.execute("DROP TABLE IF EXISTS memory_record_fts")
    schema_editor.execute(CREATE_V1)
    schema_editor.execute(RANK_V1)
    schema_editor.execute(SECURE_DELETE)
    for rows in _active_rows(connection):
        with connection.cursor() as cursor:
            cursor.executemany(
                "INSERT INTO memory_record_fts(rowid, content, scope_key, record_id) "
                "VALUES (%s, %s, %s, %s)",
                [
                    (
                        pk,
                        content,
                        str(int(hashlib.sha256(scope.encode()).hexdigest()[:15], 16)),
                        record_id,
                    )
                    for pk, record_id, scope, content in rows
                ],
            )


class Migration(migrations.Migration):
    dependencies = [("memory", "0002_fulltext_index")]

    operations = [migrations.RunPython(forward, backward)]
