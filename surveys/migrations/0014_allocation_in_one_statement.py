"""Entry with allocation in one round trip (surveys.allocation): the study's widest scenario, and on
PostgreSQL the function that locks the study and chooses, counts and holds a newcomer's blocks."""

import django.db.models.deletion
from django.db import migrations, models
from django.db.models import Count, Max

# Kept here as written when this migration was made; surveys/allocation.py calls it by name.
CREATE = """
CREATE OR REPLACE FUNCTION surveys_blocks_allocate(p_study bigint, p_participant bigint, p_k integer,
                                                   p_r integer, p_candidates integer)
RETURNS bigint[] LANGUAGE plpgsql AS $$
DECLARE
    v_open boolean;
    v_chosen bigint[];
BEGIN
    -- The commit releases the lock without waiting for the disk: the participant's pages are written next
    -- by a transaction that commits normally, and its flush writes this one's log first.
    PERFORM set_config('synchronous_commit', 'off', true);
    SELECT is_open INTO v_open FROM surveys_study WHERE id = p_study FOR NO KEY UPDATE;
    IF v_open IS NOT TRUE THEN
        RETURN NULL;
    END IF;
    -- A new statement takes a new snapshot (READ COMMITTED): it sees every allocation committed before
    -- the lock was granted.
    WITH candidates AS (
        SELECT block_id, allocated, shuffle, scenario_id
        FROM surveys_blocktally
        WHERE study_id = p_study AND allocated < p_r
        ORDER BY allocated, shuffle
        LIMIT p_candidates
    ), ranked AS (
        SELECT block_id, allocated, shuffle,
               row_number() OVER (PARTITION BY scenario_id ORDER BY allocated, shuffle) AS nth,
               count(*) OVER (PARTITION BY scenario_id, allocated) AS left_at_count
        FROM candidates
    ), picked AS (
        SELECT block_id FROM ranked ORDER BY allocated, nth, left_at_count DESC, shuffle LIMIT p_k
    ), counted AS (
        UPDATE surveys_blocktally t SET allocated = t.allocated + 1, shuffle = random()
        FROM picked WHERE t.block_id = picked.block_id
        RETURNING t.block_id
    ), held AS (
        INSERT INTO surveys_blockassignment (study_id, participant_id, block_id, state)
        SELECT p_study, p_participant, block_id, 'held' FROM counted
        RETURNING block_id
    )
    SELECT coalesce(array_agg(block_id ORDER BY block_id), '{}') INTO v_chosen FROM held;
    RETURN v_chosen;
END
$$;
"""
DROP = "DROP FUNCTION IF EXISTS surveys_blocks_allocate(bigint, bigint, integer, integer, integer);"


def create_function(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(CREATE)


def drop_function(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(DROP)


def widest_scenarios(apps, schema_editor):
    Study = apps.get_model("surveys", "Study")
    Block = apps.get_model("surveys", "Block")
    for study_id in Study.objects.values_list("pk", flat=True):
        widest = (Block.objects.filter(study_id=study_id).values("scenario_id").annotate(n=Count("pk"))
                  .aggregate(m=Max("n"))["m"])
        Study.objects.filter(pk=study_id).update(scenario_blocks_max=widest or 1)
    BlockTally = apps.get_model("surveys", "BlockTally")
    for block_id, scenario_id in Block.objects.filter(tally__isnull=False).values_list("pk", "scenario_id"):
        BlockTally.objects.filter(block_id=block_id).update(scenario_id=scenario_id)


class Migration(migrations.Migration):

    dependencies = [
        ("surveys", "0013_withdrawal_retention"),
    ]

    operations = [
        migrations.AddField(
            model_name="study",
            name="scenario_blocks_max",
            field=models.PositiveIntegerField(default=1),
        ),
        migrations.AddField(
            model_name="blocktally",
            name="scenario",
            field=models.ForeignKey(db_index=False, null=True, on_delete=django.db.models.deletion.CASCADE,
                                    related_name="+", to="surveys.scenario"),
        ),
        migrations.RunPython(widest_scenarios, migrations.RunPython.noop),
        migrations.RunPython(create_function, drop_function),
    ]
