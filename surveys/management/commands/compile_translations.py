"""``manage.py compile_translations``: compile every locale/*/LC_MESSAGES/django.po into its .mo.

Pure Python (polib), so neither CI nor a deployment needs GNU gettext's msgfmt
(Django's compilemessages does). The .mo files are committed; a test checks
that they match their .po files.
"""

from __future__ import annotations

from pathlib import Path

import polib
from django.conf import settings
from django.core.management.base import BaseCommand, CommandError


def catalogues() -> list[Path]:
    """Every django.po of the project's locale directories."""
    return sorted(po for root in settings.LOCALE_PATHS for po in Path(root).glob("*/LC_MESSAGES/django.po"))


class Command(BaseCommand):
    help = "Compile the translations (locale/*/LC_MESSAGES/django.po) into .mo files, without GNU gettext."

    def handle(self, *args, **options) -> None:
        found = catalogues()
        if not found:
            raise CommandError(f"no django.po under {', '.join(map(str, settings.LOCALE_PATHS))}")
        for po_path in found:
            catalogue = polib.pofile(str(po_path))
            missing = [entry.msgid for entry in catalogue if not entry.translated() and not entry.obsolete]
            if missing:
                raise CommandError(f"{po_path}: {len(missing)} texts are not translated, e.g. {missing[0]!r}")
            catalogue.save_as_mofile(str(po_path.with_suffix(".mo")))
            self.stdout.write(f"{po_path.with_suffix('.mo')}: {len(catalogue)} texts")
