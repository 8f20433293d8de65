"""SQLite: turn on FTS5 secure-delete for the full-text index and rewrite it.

Without it, a DELETE from an FTS5 table leaves the row's words in the index
segment rows (``memory_record_fts_data``) until a later merge, so a forgotten
record's words stayed in the database file. With it (SQLite 3.44+, see
aetnaweb/sqlite.py) a delete removes them at once. The option is stored in
the table's config, so it holds for every connection from now on.

Words deleted before this migration may still sit in old segments: an
``optimize`` merges every segment into one, dropping them, and the pages it
frees are zeroed because every connection runs ``PRAGMA secure_delete=ON``
(settings). PostgreSQL is unchanged (see docs/operators.md on VACUUM).
"""

from django.db import migrations

SECURE_DELETE = "INSERT INTO memory_record_fts(memory_record_fts, rank) VALUES('secure-delete', 1)"
OPTIMIZE = "INSERT INTO memory_record_fts(memory_record_fts) VALUES('optimize')"
SECURE_DELETE_OFF = (
    "INSERT INTO memory_record_fts(memory_record_fts, rank) VALUES('secure-delete', 0)"
)


def forward(apps, schema_editor):
    if schema_editor.connection.vendor != "sqlite":
        return
    from aetnaweb.sqlite import MINIMUM_VERSION, supports_secure_delete

    if not supports_secure_delete():
        raise RuntimeError(
            "memory: FTS5 secure-delete needs SQLite "
            f"{'.'.join(map(str, MINIMUM_VERSION))} or newer; install the project's "
            "dependencies (pysqlite3) with `make setup`"
        )
    with schema_editor.connection.cursor() as cursor:
        # secure_delete for this connection too, in case it predates the setting.
        cursor.execute("PRAGMA secure_delete=ON")
    schema_editor.execute(SECURE_DELETE)
    schema_editor.execute(OPTIMIZE)


def backward(apps, schema_editor):
    if schema_editor.connection.vendor != "sqlite":
        return
    schema_editor.execute(SECURE_DELETE_OFF)


class Migration(migrations.Migration):
    dependencies = [("memory", "0004_record_scope_id")]

    operations = [migrations.RunPython(forward, backward)]
