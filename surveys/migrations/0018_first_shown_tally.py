"""How often each item was shown first (surveys.models.FirstShownTally), kept by PostgreSQL from the
placements: the PostgreSQL entry path reads one row per item instead of counting placements under every
earlier participant (surveys.enrolment_pg)."""

import django.db.models.deletion
from django.db import migrations, models

# Statement-level triggers with transition tables: one upsert per statement, whatever writes the placements
# (the entry paths, a restore, a test) or deletes them (an entry undone, a withdrawal, a study deleted).
# Counters are locked in item order, as every writer takes them, so that two writers never wait on each other
# the other way round. A participant's placements are deleted before their visits and before them (Django's
# collector deletes the dependent rows first), so the joins still find whether they were a preview.
# Kept here as written when this migration was made.
FIRSTS = """
    SELECT placed.item_id, count(*)::integer AS n
    FROM {rows} AS placed
    JOIN surveys_blockvisit visit ON visit.id = placed.visit_id
    JOIN surveys_participant participant ON participant.id = visit.participant_id
    WHERE placed.position = 1 AND NOT participant.is_preview
    GROUP BY placed.item_id"""
ADD = """
    INSERT INTO surveys_firstshowntally AS tally (item_id, shown_first)
    SELECT item_id, n FROM ({firsts}) AS firsts ORDER BY item_id
    ON CONFLICT (item_id) DO UPDATE SET shown_first = tally.shown_first + EXCLUDED.shown_first;"""
SUBTRACT = """
    PERFORM 1 FROM surveys_firstshowntally
    WHERE item_id IN (SELECT item_id FROM removed WHERE position = 1) ORDER BY item_id FOR UPDATE;
    UPDATE surveys_firstshowntally AS tally SET shown_first = tally.shown_first - firsts.n
    FROM ({firsts}) AS firsts WHERE tally.item_id = firsts.item_id;"""
# A placement is never moved (written once at entry; an answer updates its rank or choice only), so the
# counts need no update trigger, which would run on every answer: moving one is refused instead.
UNMOVED = """
    RAISE EXCEPTION 'a placement is not moved to another visit, item or position (delete it and write another)'
        USING ERRCODE = 'integrity_constraint_violation';"""


def _function(name: str, body: str) -> str:
    return f"""
CREATE OR REPLACE FUNCTION {name}() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
{body}
    RETURN NULL;
END
$$;"""


CREATE = "\n".join([
    _function("surveys_first_shown_added", ADD.format(firsts=FIRSTS.format(rows="added"))),
    _function("surveys_first_shown_removed", SUBTRACT.format(firsts=FIRSTS.format(rows="removed"))),
    _function("surveys_placement_unmoved", UNMOVED),
    """
CREATE TRIGGER first_shown_added AFTER INSERT ON surveys_itemplacement
    REFERENCING NEW TABLE AS added FOR EACH STATEMENT EXECUTE FUNCTION surveys_first_shown_added();
CREATE TRIGGER first_shown_removed AFTER DELETE ON surveys_itemplacement
    REFERENCING OLD TABLE AS removed FOR EACH STATEMENT EXECUTE FUNCTION surveys_first_shown_removed();
CREATE TRIGGER placement_unmoved BEFORE UPDATE OF visit_id, item_id, position ON surveys_itemplacement
    FOR EACH ROW WHEN (OLD.visit_id <> NEW.visit_id OR OLD.item_id <> NEW.item_id OR OLD.position <> NEW.position)
    EXECUTE FUNCTION surveys_placement_unmoved();
-- Also when a session skips the foreign-key triggers (session_replication_role = replica: the responses
-- import, analysis.imports.import_writer): the counts must follow every placement written.
ALTER TABLE surveys_itemplacement ENABLE ALWAYS TRIGGER first_shown_added;
ALTER TABLE surveys_itemplacement ENABLE ALWAYS TRIGGER first_shown_removed;
ALTER TABLE surveys_itemplacement ENABLE ALWAYS TRIGGER placement_unmoved;
""",
    # The placements written before this migration.
    "INSERT INTO surveys_firstshowntally (item_id, shown_first) SELECT item_id, n FROM ({firsts}) AS firsts;".format(
        firsts=FIRSTS.format(rows="surveys_itemplacement")),
])
DROP = """
DROP TRIGGER IF EXISTS first_shown_added ON surveys_itemplacement;
DROP TRIGGER IF EXISTS first_shown_removed ON surveys_itemplacement;
DROP TRIGGER IF EXISTS placement_unmoved ON surveys_itemplacement;
DROP FUNCTION IF EXISTS surveys_first_shown_added();
DROP FUNCTION IF EXISTS surveys_first_shown_removed();
DROP FUNCTION IF EXISTS surveys_placement_unmoved();
"""


def create_triggers(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(CREATE)


def drop_triggers(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(DROP)


class Migration(migrations.Migration):

    dependencies = [
        ("surveys", "0017_typed_answers"),
    ]

    operations = [
        migrations.CreateModel(
            name="FirstShownTally",
            fields=[
                ("item", models.OneToOneField(on_delete=django.db.models.deletion.CASCADE, primary_key=True,
                                              related_name="+", serialize=False, to="surveys.item")),
                ("shown_first", models.PositiveIntegerField(default=0)),
            ],
        ),
        migrations.RunPython(create_triggers, drop_triggers),
    ]
