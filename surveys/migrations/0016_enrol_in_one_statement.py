"""Entry with allocation on PostgreSQL in three round trips (surveys.enrolment_pg): the function that checks,
enrols, allocates and returns the newcomer's blocks, in one call."""

from django.db import migrations

# Kept here as written when this migration was made; surveys/enrolment_pg.py calls it by name.
# SQLSTATEs of its refusals (class "HV", this project's own): HV001 the study is closed or the person
# withdrew, HV002 every block has its r judgements.
CREATE = """
CREATE OR REPLACE FUNCTION surveys_participant_enrol(p_row jsonb, p_k integer, p_r integer, p_candidates integer,
                                                     p_now timestamptz)
RETURNS jsonb LANGUAGE plpgsql AS $$
DECLARE
    v_study bigint := (p_row->>'study_id')::bigint;
    v_participant bigint;
    v_chosen bigint[];
BEGIN
    IF EXISTS (SELECT 1 FROM surveys_withdrawal
               WHERE study_id = v_study AND pseudonym = p_row->>'pseudonym') THEN
        RAISE EXCEPTION 'withdrew' USING ERRCODE = 'HV001';
    END IF;
    -- Lapsed holds give their blocks back first: the caller does that (rarely needed) on its general path.
    -- From the lapsed participants (the hold-lapse index; normally none) to their held blocks, never the
    -- other way round: a plan that started from the assignments would grow with every entrant.
    IF EXISTS (SELECT 1 FROM surveys_participant p
               WHERE p.study_id = v_study AND p.status = 'in_progress' AND p.hold_expires_at <= p_now
                 AND EXISTS (SELECT 1 FROM surveys_blockassignment a
                             WHERE a.participant_id = p.id AND a.state = 'held')) THEN
        RETURN jsonb_build_object('lapsed', true);
    END IF;
    -- Every column from the caller (the model's own defaults filled in), the id from its identity.
    -- (In FROM, so that the record, and nextval, are computed once, not once per column.)
    INSERT INTO surveys_participant
    SELECT r.* FROM jsonb_populate_record(NULL::surveys_participant, p_row || jsonb_build_object(
        'id', nextval(pg_get_serial_sequence('surveys_participant', 'id')))) AS r
    ON CONFLICT DO NOTHING
    RETURNING id INTO v_participant;
    IF v_participant IS NULL THEN  -- the same person's other tab or retry enrolled first
        RETURN jsonb_build_object('existing', true);
    END IF;
    v_chosen := surveys_blocks_allocate(v_study, v_participant, p_k, p_r, p_candidates);
    IF v_chosen IS NULL THEN
        RAISE EXCEPTION 'closed' USING ERRCODE = 'HV001';
    ELSIF cardinality(v_chosen) = 0 THEN
        RAISE EXCEPTION 'full' USING ERRCODE = 'HV002';
    END IF;
    -- The blocks' items, and how often each was shown first, are read by the caller after the commit: not
    -- while the lock is held.
    RETURN jsonb_build_object('participant', v_participant, 'blocks', to_jsonb(v_chosen));
END
$$;
"""
DROP = "DROP FUNCTION IF EXISTS surveys_participant_enrol(jsonb, integer, integer, integer, timestamptz);"


def create_function(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(CREATE)


def drop_function(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(DROP)


class Migration(migrations.Migration):

    dependencies = [
        ("surveys", "0015_study_team"),
    ]

    operations = [
        migrations.RunPython(create_function, drop_function),
    ]
