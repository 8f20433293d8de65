from __future__ import annotations

from django.apps import AppConfig
from django.db.backends.signals import connection_created


class MemoryConfig(AppConfig):
    name = "memory"
    verbose_name = "Memory"

    def ready(self) -> None:
        # The evidence layer imports nothing from the engine; the engine hands it
        # the check that a receipt's records really were purged.
        from aetnaweb import purges
        from audit.receipts import register_purge_check
        from audit.verification import register_subject_check
        from memory.selectors import content_failures, receipt_purge_failures

        register_purge_check(receipt_purge_failures)
        # Stores of copies (the API's kept answers) ask before keeping one made
        # while a purge ran (aetnaweb.purges; the engine imports no such store).
        from memory.services.forgetting import names_in_answer, purged_in_answer

        purges.check_answers_with(purged_in_answer)
        # ... and index each kept answer by the IDs it names, so a purge finds it directly.
        purges.name_answers_with(names_in_answer)
        # Each record must still hold the content its creation event binds.
        register_subject_check(content_failures)

        from memory.services.holds import refuse_held_purge

        # A legal hold refuses every purge under it, inside the purge's transaction.
        purges.listen(refuse_held_purge)

        from memory import vectors

        # Every new SQLite connection gets sqlite-vec (the vector index).
        connection_created.connect(vectors.load_sqlite_extension, dispatch_uid="memory-sqlite-vec")
