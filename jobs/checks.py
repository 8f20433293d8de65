"""A start-up check: export files must never sit where static files are served from."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from django.conf import settings
from django.core.checks import Error, register


def _inside(path: Path, folder: Path) -> bool:
    return path == folder or folder in path.parents


@register()
def export_dir_is_not_public(app_configs: Any = None, **kwargs: Any) -> list[Error]:
    """``AETNAWEB_EXPORT_DIR`` inside a static folder would publish audit rows to anyone."""
    export_dir = Path(settings.AETNAWEB_EXPORT_DIR).resolve()
    public = [Path(settings.STATIC_ROOT)] if settings.STATIC_ROOT else []
    public += [
        Path(entry if isinstance(entry, str | Path) else entry[1])
        for entry in settings.STATICFILES_DIRS
    ]
    for folder in public:
        folder = folder.resolve()
        if _inside(export_dir, folder) or _inside(folder, export_dir):
            return [
                Error(
                    f"AETNAWEB_EXPORT_DIR ({export_dir}) overlaps the static folder {folder}: "
                    "export files would be served to anyone",
                    hint="Point AETNAWEB_EXPORT_DIR at a private folder (default <data>/exports).",
                    id="jobs.E001",
                )
            ]
    return []
