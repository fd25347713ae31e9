"""The database cache's table, so that ``migrate`` is all a new site needs (no ``createcachetable`` step)."""

from django.core.management import call_command
from django.db import migrations


def create_cache_table(apps, schema_editor) -> None:
    # createcachetable is idempotent and reads the table name from settings.CACHES.
    call_command("createcachetable", database=schema_editor.connection.alias, verbosity=0)


class Migration(migrations.Migration):
    dependencies: list = []
    operations = [migrations.RunPython(create_cache_table, migrations.RunPython.noop)]
