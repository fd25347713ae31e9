"""Studies, what participants are shown, and the platform's own answers (attention checks, demographics).

A study's content (scenarios, blocks, items, dimensions, checks, questions) is
written only by ``surveys.loader``. A participant's assignment (the randomized
order of blocks and of the responses inside each block) is drawn once and
stored as ``BlockVisit`` and ``ItemPlacement`` rows. Where the question types
keep their answers is theirs to declare (``surveys.models`` gathers them): some
are columns the types add to those two models, others models of their own.
"""

from __future__ import annotations

import secrets

from django.conf import settings
from django.db import models
from django.db.models import F, Q

from . import limits


def new_pseudonym_key() -> str:
    return secrets.token_hex(32)


class Study(models.Model):
    class RecruitmentMode(models.TextChoices):
        PANEL = "panel", "Panel link with the panel's id"
        OPEN = "open", "Open anonymous link"
        INVITED = "invited", "Invited raters' personal links"

    slug = models.SlugField(max_length=limits.SLUG, unique=True)
    title = models.CharField(max_length=limits.TITLE, help_text="for researchers only: it may name the systems compared")
    participant_title = models.CharField(max_length=limits.TITLE, blank=True, default="", db_default="",
                                         help_text="the title participants see, in the study's language (may be empty)")
    description = models.TextField(blank=True)
    is_demo_content = models.BooleanField(default=False)
    consent_text = models.TextField()
    instructions_text = models.TextField()
    question_text = models.TextField(blank=True)
    construct = models.CharField(max_length=limits.CONSTRUCT, default="preferred",
                                 help_text='what participants judge, as an adjective ("helpful", "clear")')
    ranking_enabled = models.BooleanField(default=False)
    best_worst_enabled = models.BooleanField(default=False)
    pairwise_enabled = models.BooleanField(default=False, db_default=False,
                                           help_text="two responses per block; which is better")
    letter_labels = models.BooleanField(default=False, help_text="responses shown as A, B, C ... by display position")
    language = models.CharField(max_length=limits.LANGUAGE, default="en",
                                help_text='the language of the participant pages, a code of settings.LANGUAGES ("zh-hans")')
    # A study starts as a draft (launched_at empty, closed): its researchers preview it, then launch it
    # (surveys.launch), which opens it. Closing a launched study later (is_open False) keeps launched_at.
    is_open = models.BooleanField(default=False)
    launched_at = models.DateTimeField(null=True, blank=True)
    # When a launched study was last closed (empty while open or a draft): retention counts from it
    # (surveys.retention). Kept by save(); the retention task stamps a study closed by an update().
    closed_at = models.DateTimeField(null=True, blank=True)
    # When the retention task replaced the panel identifiers with pseudonyms (identifiers.csv says so).
    identifiers_removed_at = models.DateTimeField(null=True, blank=True)
    owners = models.ManyToManyField(settings.AUTH_USER_MODEL, blank=True, related_name="owned_studies")

    recruitment_mode = models.CharField(max_length=10, choices=RecruitmentMode.choices, default=RecruitmentMode.PANEL)
    # Recruitment: which URL parameters carry the panel's identifiers (empty outside panel studies).
    id_param = models.CharField(max_length=limits.PANEL_PARAM, default="PROLIFIC_PID")
    study_param = models.CharField(max_length=limits.PANEL_PARAM, default="STUDY_ID")
    session_param = models.CharField(max_length=limits.PANEL_PARAM, default="SESSION_ID")
    id_pattern = models.CharField(max_length=limits.ID_PATTERN, default=r"^[0-9a-f]{24}$")
    completion_code = models.CharField(max_length=limits.COMPLETION_CODE)
    completion_url = models.CharField(
        max_length=limits.COMPLETION_URL, default="https://app.prolific.com/submissions/complete?cc={code}"
    )
    target_completions = models.PositiveIntegerField(null=True, blank=True)
    # Allocation (surveys.allocation): each participant judges k blocks until each block has r judgements;
    # both empty: everyone judges every block.
    blocks_per_participant = models.PositiveIntegerField(null=True, blank=True)
    judgements_per_block = models.PositiveIntegerField(null=True, blank=True)
    # The most blocks any one scenario has (set with the counters at load): entry looks at k x this many of
    # the least-allocated blocks, enough to find k of different prompts whenever the numbers allow.
    scenario_blocks_max = models.PositiveIntegerField(default=1)
    # Held places (surveys.places): how long a participant in progress keeps a place.
    estimated_minutes = models.PositiveIntegerField(null=True, blank=True)
    hold_minutes = models.PositiveIntegerField(null=True, blank=True)

    # Quality rules (DESIGN 3.2); a run copies the values it used.
    duration_min_minutes = models.FloatField(default=10)
    duration_max_minutes = models.FloatField(default=75)
    fast_block_seconds = models.FloatField(default=10)
    fast_share_max = models.FloatField(default=0.25)
    straightline_sd_max = models.FloatField(default=0.6)
    straightline_mae_min = models.FloatField(default=0.9)
    attention_failures_allowed = models.PositiveIntegerField(default=0)

    pseudonym_key = models.CharField(max_length=64, default=new_pseudonym_key, editable=False)
    definition = models.JSONField(default=dict, editable=False)
    # Bumped by every load or reload (surveys.loader): each process keeps the study's dimensions and
    # questions (surveys.study_content) for as long as the version it read them at is current.
    content_version = models.PositiveIntegerField(default=1, db_default=1, editable=False)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        verbose_name_plural = "studies"
        constraints = [
            models.CheckConstraint(
                condition=Q(duration_min_minutes__gte=0) & Q(duration_max_minutes__gt=F("duration_min_minutes")),
                name="study_duration_window_valid",
            ),
            models.CheckConstraint(
                condition=Q(fast_share_max__gte=0) & Q(fast_share_max__lte=1), name="study_fast_share_is_fraction"
            ),
            models.CheckConstraint(condition=Q(fast_block_seconds__gte=0), name="study_fast_seconds_nonnegative"),
            models.CheckConstraint(condition=Q(straightline_sd_max__gte=0), name="study_sd_threshold_nonnegative"),
            models.CheckConstraint(condition=Q(straightline_mae_min__gte=0), name="study_mae_threshold_nonnegative"),
            models.CheckConstraint(condition=Q(recruitment_mode__in=["panel", "open", "invited"]), name="study_recruitment_mode_known"),
            # Panel finishers are paid on the code; open studies show none.
            models.CheckConstraint(
                condition=~Q(recruitment_mode="panel") | ~Q(completion_code=""), name="study_panel_has_completion_code"
            ),
            models.CheckConstraint(
                condition=Q(target_completions__isnull=True) | Q(target_completions__gt=0),
                name="study_target_positive",
            ),
            # Only a launched study takes participants: a draft is never open.
            models.CheckConstraint(condition=Q(launched_at__isnull=False) | Q(is_open=False),
                                   name="study_draft_not_open"),
            models.CheckConstraint(
                condition=(Q(estimated_minutes__isnull=True) | Q(estimated_minutes__gt=0))
                & (Q(hold_minutes__isnull=True) | Q(hold_minutes__gt=0)),
                name="study_hold_times_positive",
            ),
            models.CheckConstraint(
                condition=(Q(blocks_per_participant__isnull=True) & Q(judgements_per_block__isnull=True))
                # isnull spelled out: a check whose value is NULL passes.
                | (Q(blocks_per_participant__isnull=False, blocks_per_participant__gt=0)
                   & Q(judgements_per_block__isnull=False, judgements_per_block__gt=0)),
                name="study_allocation_complete",
            ),
        ]

    def __str__(self) -> str:
        return self.slug

    def save(self, *args, **kwargs) -> None:
        # Closing is is_open going False (admin, shell); the time is needed for retention.
        if self.is_open or self.launched_at is None:
            self.closed_at = None
        elif self.closed_at is None:
            from django.utils import timezone

            self.closed_at = timezone.now()
        if kwargs.get("update_fields") is not None and "is_open" in kwargs["update_fields"]:
            kwargs["update_fields"] = {*kwargs["update_fields"], "closed_at"}
        super().save(*args, **kwargs)

    @property
    def is_draft(self) -> bool:
        return self.launched_at is None

    @property
    def allocates(self) -> bool:
        """Does each participant judge only some blocks (surveys.allocation)?"""
        return self.blocks_per_participant is not None

    @property
    def quality_thresholds(self) -> dict[str, float]:
        return {name: getattr(self, name) for name in QUALITY_FIELDS}


QUALITY_FIELDS = (
    "duration_min_minutes",
    "duration_max_minutes",
    "fast_block_seconds",
    "fast_share_max",
    "straightline_sd_max",
    "straightline_mae_min",
    "attention_failures_allowed",
)


class System(models.Model):
    study = models.ForeignKey(Study, on_delete=models.CASCADE, related_name="systems")
    name = models.CharField(max_length=limits.SYSTEM_NAME)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["study", "name"], name="system_unique_name")]

    def __str__(self) -> str:
        return self.name


class Condition(models.Model):
    study = models.ForeignKey(Study, on_delete=models.CASCADE, related_name="conditions")
    name = models.CharField(max_length=limits.CONDITION_NAME)
    is_reference = models.BooleanField(default=False)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["study", "name"], name="condition_unique_name")]

    def __str__(self) -> str:
        return self.name


class Scenario(models.Model):
    study = models.ForeignKey(Study, on_delete=models.CASCADE, related_name="scenarios")
    key = models.CharField(max_length=limits.KEY)
    label = models.CharField(max_length=limits.SCENARIO_LABEL, blank=True)
    user_input = models.TextField()
    # The conversation before user_input, oldest first: [{"role": "user" | "assistant", "text": ...}]
    # (surveys.definition.TurnDef checks each turn).
    context = models.JSONField(default=list, blank=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["study", "key"], name="scenario_unique_key")]

    def __str__(self) -> str:
        return self.key


class Dimension(models.Model):
    """A rating scale, e.g. perceived empathy 1-5 with a label per point."""

    study = models.ForeignKey(Study, on_delete=models.CASCADE, related_name="dimensions")
    key = models.CharField(max_length=limits.KEY)
    label = models.CharField(max_length=limits.DIMENSION_LABEL)
    scale_min = models.SmallIntegerField()
    scale_max = models.SmallIntegerField()
    point_labels = models.JSONField(default=dict)
    order = models.PositiveSmallIntegerField(default=0)

    class Meta:
        ordering = ["order", "id"]
        constraints = [
            models.UniqueConstraint(fields=["study", "key"], name="dimension_unique_key"),
            models.CheckConstraint(condition=Q(scale_max__gt=F("scale_min")), name="dimension_scale_ordered"),
        ]

    def __str__(self) -> str:
        return self.key

    @property
    def points(self) -> list[int]:
        return list(range(self.scale_min, self.scale_max + 1))


class Block(models.Model):
    study = models.ForeignKey(Study, on_delete=models.CASCADE, related_name="blocks")
    key = models.CharField(max_length=limits.KEY)
    scenario = models.ForeignKey(Scenario, on_delete=models.PROTECT, related_name="blocks")
    order = models.PositiveIntegerField(default=0)
    set_number = models.PositiveSmallIntegerField(null=True, blank=True)

    class Meta:
        ordering = ["order", "id"]
        constraints = [models.UniqueConstraint(fields=["study", "key"], name="block_unique_key")]

    def __str__(self) -> str:
        return self.key


class Item(models.Model):
    """One response text shown inside a block."""

    study = models.ForeignKey(Study, on_delete=models.CASCADE, related_name="items")
    block = models.ForeignKey(Block, on_delete=models.CASCADE, related_name="items")
    key = models.CharField(max_length=limits.ITEM_KEY)
    option = models.PositiveSmallIntegerField()
    source_label = models.CharField(max_length=limits.SOURCE_LABEL, blank=True)
    text = models.TextField()
    system = models.ForeignKey(System, on_delete=models.PROTECT, related_name="items")
    condition = models.ForeignKey(Condition, on_delete=models.PROTECT, related_name="items")

    class Meta:
        ordering = ["block", "option"]
        constraints = [
            models.UniqueConstraint(fields=["study", "key"], name="item_unique_key"),
            models.UniqueConstraint(fields=["block", "option"], name="item_unique_option_in_block"),
            models.CheckConstraint(condition=Q(option__gte=1), name="item_option_positive"),
            models.CheckConstraint(condition=~Q(text=""), name="item_text_not_empty"),
        ]

    def __str__(self) -> str:
        return self.key


class AttentionCheck(models.Model):
    """An instructed check: the text tells the reader which scale point to pick."""

    study = models.ForeignKey(Study, on_delete=models.CASCADE, related_name="attention_checks")
    key = models.CharField(max_length=limits.KEY)
    text = models.TextField()
    expected_value = models.SmallIntegerField()

    class Meta:
        constraints = [models.UniqueConstraint(fields=["study", "key"], name="attention_check_unique_key")]

    def __str__(self) -> str:
        return self.key


class DemographicQuestion(models.Model):
    """One demographic question of a study (its key is the answer's column in participants.csv)."""

    class Kind(models.TextChoices):
        CHOICE = "choice", "Choice"
        NUMBER = "number", "Number"
        US_STATE = "us_state", "US state"
        TEXT = "text", "Short text"

    study = models.ForeignKey(Study, on_delete=models.CASCADE, related_name="demographic_questions")
    key = models.CharField(max_length=limits.DEMOGRAPHIC_KEY)
    prompt = models.CharField(max_length=limits.DEMOGRAPHIC_PROMPT)
    kind = models.CharField(max_length=10, choices=Kind.choices, default=Kind.CHOICE)
    choices = models.JSONField(default=list)
    min_value = models.FloatField(null=True, blank=True)
    max_value = models.FloatField(null=True, blank=True)
    integer = models.BooleanField(default=True)
    max_length = models.PositiveIntegerField(default=200)
    synonyms = models.JSONField(default=dict, blank=True)
    order = models.PositiveSmallIntegerField(default=0)

    class Meta:
        ordering = ["order", "id"]
        constraints = [
            models.UniqueConstraint(fields=["study", "key"], name="demographic_unique_key"),
            models.CheckConstraint(condition=Q(kind__in=("choice", "number", "us_state", "text")),
                                   name="demographic_known_kind"),
            models.CheckConstraint(
                condition=~Q(kind="number") | (Q(min_value__isnull=False) & Q(max_value__gt=F("min_value"))),
                name="demographic_number_has_range",
            ),
        ]


class Participant(models.Model):
    class Status(models.TextChoices):
        IN_PROGRESS = "in_progress", "In progress"
        COMPLETED = "completed", "Completed"
        EXITED = "exited", "Exited early"

    class Source(models.TextChoices):
        LIVE = "live", "Survey"
        IMPORT = "import", "Imported"

    # The unique constraints below lead with this column, so their index serves
    # lookups and cascades; a separate one would only slow every insert.
    study = models.ForeignKey(Study, on_delete=models.CASCADE, related_name="participants", db_index=False)
    external_id = models.CharField(max_length=limits.EXTERNAL_ID)
    pseudonym = models.CharField(max_length=64)
    panel_study_id = models.CharField(max_length=limits.PANEL_VALUE, blank=True)
    panel_session_id = models.CharField(max_length=limits.PANEL_VALUE, blank=True)
    source = models.CharField(max_length=10, choices=Source.choices, default=Source.LIVE)
    is_preview = models.BooleanField(default=False)
    status = models.CharField(max_length=20, choices=Status.choices, default=Status.IN_PROGRESS)
    seed = models.BigIntegerField(default=0)
    consented_at = models.DateTimeField(null=True, blank=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    last_seen_at = models.DateTimeField(null=True, blank=True)
    instructions_seen = models.BooleanField(default=False)
    blocks_assigned = models.PositiveIntegerField(default=0)
    demographics_done = models.BooleanField(default=False)
    completion_code = models.CharField(max_length=limits.COMPLETION_CODE, blank=True)
    # While in progress, the participant holds a place until then (surveys.places); empty: holds none
    # (previews, imports).
    hold_expires_at = models.DateTimeField(null=True, blank=True)

    # Answers to the study's demographic questions, by question key (each a string;
    # "" or absent: not answered). Any key a definition declares fits without a migration.
    demographics = models.JSONField(default=dict, blank=True)
    # Imported studies carry only the outcome of their checks.
    imported_attention_passed = models.BooleanField(null=True, blank=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["study", "external_id"], name="participant_unique_external_id"),
            models.UniqueConstraint(fields=["study", "pseudonym"], name="participant_unique_pseudonym"),
            models.CheckConstraint(
                condition=Q(finished_at__isnull=True) | Q(started_at__isnull=True) | Q(finished_at__gte=F("started_at")),
                name="participant_finish_after_start",
            ),
            # The code a finisher is given is the study's: none outside panel studies (Study's constraint).
            models.CheckConstraint(
                condition=~Q(status="completed") | Q(finished_at__isnull=False), name="participant_completed_has_finish"
            ),
            models.CheckConstraint(condition=~Q(external_id=""), name="participant_external_id_set"),
        ]
        indexes = [
            models.Index(fields=["study", "status"]),
            # Holds that lapsed: found by a range scan at each entry of a study that allocates blocks.
            models.Index(fields=["study", "status", "hold_expires_at"], name="participant_hold_lapse"),
        ]

    def __str__(self) -> str:
        return self.pseudonym


class RaterLink(models.Model):
    """An invited rater's personal link (surveys.rater_links). Only a hash of its token is
    stored; the rater takes part as the participant whose external id is ``external_id``."""

    study = models.ForeignKey(Study, on_delete=models.CASCADE, related_name="rater_links")
    name = models.CharField(max_length=limits.RATER_NAME)
    token_hash = models.CharField(max_length=64, unique=True)
    external_id = models.CharField(max_length=limits.EXTERNAL_ID)
    created_at = models.DateTimeField(auto_now_add=True)
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL,
                                   related_name="+")
    revoked_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["study", "created_at", "id"]
        constraints = [
            models.UniqueConstraint(fields=["study", "external_id"], name="rater_link_unique_external_id"),
            # A name stands for one rater at a time: a second link for "Ann" would be ambiguous
            # on the researchers' page (revoke the old one first).
            models.UniqueConstraint(fields=["study", "name"], condition=Q(revoked_at__isnull=True),
                                    name="rater_link_unique_active_name"),
            models.CheckConstraint(condition=~Q(name=""), name="rater_link_name_set"),
        ]

    def __str__(self) -> str:
        return self.name


class ConsentDecline(models.Model):
    """Declining records nothing about the person: one counter per study and day."""

    study = models.ForeignKey(Study, on_delete=models.CASCADE, related_name="declines")
    day = models.DateField()
    count = models.PositiveIntegerField(default=0)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["study", "day"], name="decline_unique_day")]


class TurnAway(models.Model):
    """Newcomers refused because the study was full (counts only)."""

    study = models.ForeignKey(Study, on_delete=models.CASCADE, related_name="turn_aways")
    day = models.DateField()
    count = models.PositiveIntegerField(default=0)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["study", "day"], name="turn_away_unique_day")]


class BlockVisit(models.Model):
    """One page of a participant's sequence: a block or an attention check."""

    # The unique constraints below lead with this column, so their index serves
    # lookups and cascades; a separate one would only slow every insert.
    participant = models.ForeignKey(Participant, on_delete=models.CASCADE, related_name="visits", db_index=False)
    sequence = models.PositiveIntegerField()
    block = models.ForeignKey(Block, on_delete=models.PROTECT, null=True, blank=True, related_name="visits")
    # Indexed only where set (Meta.indexes): most pages are blocks, and the entry writes 20 of them at once.
    attention_check = models.ForeignKey(
        AttentionCheck, on_delete=models.PROTECT, null=True, blank=True, related_name="visits", db_index=False
    )
    shown_at = models.DateTimeField(null=True, blank=True)
    submitted_at = models.DateTimeField(null=True, blank=True)
    attention_value = models.SmallIntegerField(null=True, blank=True)
    attention_passed = models.BooleanField(null=True, blank=True)
    # pairwise's preference: its unit's column (surveys.questions.pairwise)

    class Meta:
        ordering = ["participant", "sequence"]
        indexes = [models.Index(fields=["attention_check"], condition=Q(attention_check__isnull=False),
                                name="visit_by_attention_check")]
        constraints = [
            models.UniqueConstraint(fields=["participant", "sequence"], name="visit_unique_sequence"),
            models.UniqueConstraint(
                fields=["participant", "block"], condition=Q(block__isnull=False), name="visit_block_once"
            ),
            models.CheckConstraint(
                condition=(Q(block__isnull=False) & Q(attention_check__isnull=True))
                | (Q(block__isnull=True) & Q(attention_check__isnull=False)),
                name="visit_is_block_xor_check",
            ),
            models.CheckConstraint(condition=Q(sequence__gte=1), name="visit_sequence_positive"),
            models.CheckConstraint(
                condition=Q(submitted_at__isnull=True) | Q(shown_at__isnull=False),
                name="visit_submitted_after_shown",
            ),
        ]


class ItemPlacement(models.Model):
    """Where an item was displayed to a participant; the per-response answers of ranking (rank) and best-worst
    (choice) are columns their units add (``surveys.questions``)."""

    # The unique constraints below lead with this column, so their index serves
    # lookups and cascades; a separate one would only slow every insert.
    visit = models.ForeignKey(BlockVisit, on_delete=models.CASCADE, related_name="placements", db_index=False)
    item = models.ForeignKey(Item, on_delete=models.PROTECT, related_name="placements")
    position = models.PositiveSmallIntegerField()

    class Meta:
        ordering = ["visit", "position"]
        constraints = [
            models.UniqueConstraint(fields=["visit", "position"], name="placement_unique_position"),
            models.UniqueConstraint(fields=["visit", "item"], name="placement_unique_item"),
            models.CheckConstraint(condition=Q(position__gte=1), name="placement_position_positive"),
        ]


class TypedAnswer(models.Model):
    """An answer of a question type that keeps no model of its own (``surveys.questions``): one row per
    (visit, type, item), its value JSON in the type's own shape. ``item`` tells apart the answers of one
    page (a placement's id, say); "" for a type that answers once per page."""

    participant = models.ForeignKey(Participant, on_delete=models.CASCADE, related_name="typed_answers")
    visit = models.ForeignKey(BlockVisit, on_delete=models.CASCADE, related_name="typed_answers")
    type_key = models.CharField(max_length=40)
    item = models.CharField(max_length=80, blank=True, default="")
    value = models.JSONField()

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["visit", "type_key", "item"], name="typed_answer_once"),
            models.CheckConstraint(condition=~Q(type_key=""), name="typed_answer_names_its_type"),
        ]
        indexes = [models.Index(fields=["type_key", "participant"], name="typed_answer_by_type")]


class Draft(models.Model):
    """What a participant has entered on their current page but not yet submitted.

    Kept so that a reload, a return through the study link or another device
    finds the page as it was left. A draft is never an answer: nothing that reads
    answers (frames, exports, quality rules, progress, completion) reads this
    table, and submitting the page deletes it. ``fields`` maps the page's form
    field names to the values entered, as the page would post them.
    """

    participant = models.ForeignKey(Participant, on_delete=models.CASCADE, related_name="drafts")
    # The block or check page; empty for the final questions (about the person, end of study).
    # The unique constraint's index serves lookups and cascades.
    visit = models.ForeignKey(
        BlockVisit, on_delete=models.CASCADE, null=True, blank=True, related_name="drafts", db_index=False
    )
    fields = models.JSONField(default=dict)
    saved_at = models.DateTimeField()

    class Meta:
        constraints = [
            # One draft per page: the latest state of the page replaces the one before.
            models.UniqueConstraint(fields=["visit"], name="draft_once_per_visit"),
            models.UniqueConstraint(
                fields=["participant"], condition=Q(visit__isnull=True), name="draft_once_for_final_questions"
            ),
        ]


class BlockTally(models.Model):
    """How many participants a block is allocated to now (surveys.allocation): held, completed, not released.

    Kept as a counter, updated under the study's lock, so that entry reads and writes a constant number of
    rows whatever the number of participants."""

    block = models.OneToOneField(Block, on_delete=models.CASCADE, primary_key=True, related_name="tally")
    study = models.ForeignKey(Study, on_delete=models.CASCADE, related_name="block_tallies", db_index=False)
    # The block's scenario, copied here so that entry reads the least-allocated blocks from one index scan
    # without a join (surveys.allocation gives a participant blocks of different prompts).
    scenario = models.ForeignKey(Scenario, on_delete=models.CASCADE, related_name="+", db_index=False, null=True)
    allocated = models.PositiveIntegerField(default=0)
    # A random key, drawn again each time the block is allocated: the order of the blocks that share a count,
    # so the lowest k come from one index scan and are a uniformly random choice among the ties.
    shuffle = models.FloatField(default=0)

    class Meta:
        indexes = [models.Index(fields=["study", "allocated", "shuffle"], name="tally_next_blocks")]


class FirstShownTally(models.Model):
    """How many participants (not previews) were shown an item first on its block's page: the counts that
    ``surveys.sequence.rotations`` balances, kept so that entry reads one row per item instead of counting
    placements.

    Kept by PostgreSQL itself (migration 0018: triggers on the placements, whatever writes or deletes them),
    and read only by the PostgreSQL entry path (``surveys.enrolment_pg``); the general path, and SQLite, count
    the placements. Derived, so not in a study's backup: restoring the placements rebuilds it."""

    item = models.OneToOneField(Item, on_delete=models.CASCADE, primary_key=True, related_name="+")
    # Positive: a count the triggers would take below zero is a fault, raised rather than kept.
    shown_first = models.PositiveIntegerField(default=0)


class PairTally(models.Model):
    """How often a pair of a block's responses was allocated (pairwise studies whose blocks hold three or more)."""

    block = models.ForeignKey(Block, on_delete=models.CASCADE, related_name="pair_tallies")
    first = models.ForeignKey(Item, on_delete=models.CASCADE, related_name="+")
    second = models.ForeignKey(Item, on_delete=models.CASCADE, related_name="+")
    allocated = models.PositiveIntegerField(default=0)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["block", "first", "second"], name="pair_tally_unique_pair"),
            models.CheckConstraint(condition=Q(first__lt=F("second")), name="pair_tally_ordered"),
        ]


class BlockAssignment(models.Model):
    """A block allocated to a participant, held like a place (surveys.allocation).

    ``held`` while the participant is in progress with a live hold, ``completed`` once they finished,
    ``released`` when they returned, timed out, left or were excluded by the quality rules: the block then
    goes back to the pool for a later participant."""

    class State(models.TextChoices):
        HELD = "held", "Held"
        COMPLETED = "completed", "Completed"
        RELEASED = "released", "Released"

    study = models.ForeignKey(Study, on_delete=models.CASCADE, related_name="block_assignments", db_index=False)
    participant = models.ForeignKey(Participant, on_delete=models.CASCADE, related_name="block_assignments",
                                    db_index=False)
    block = models.ForeignKey(Block, on_delete=models.CASCADE, related_name="assignments")
    state = models.CharField(max_length=10, choices=State.choices, default=State.HELD)

    class Meta:
        indexes = [models.Index(fields=["study", "state"])]
        constraints = [
            models.UniqueConstraint(fields=["participant", "block"], name="assignment_block_once"),
            models.CheckConstraint(condition=Q(state__in=["held", "completed", "released"]),
                                   name="assignment_state_known"),
        ]


class Withdrawal(models.Model):
    """The tombstone of a participant who withdrew (surveys.withdrawal): their row and every answer are gone;
    this keeps only the pseudonym, when and how, so counts stay right and the same panel id is not enrolled
    again (its pseudonym is recomputed at entry). No panel id is kept."""

    class Channel(models.TextChoices):
        PARTICIPANT = "participant", "The participant, on the study's pages"
        RESEARCHER = "researcher", "A researcher, on the study's page"
        COMMAND = "command", "A researcher, with manage.py delete_participant"

    study = models.ForeignKey(Study, on_delete=models.CASCADE, related_name="withdrawals", db_index=False)
    pseudonym = models.CharField(max_length=64)
    withdrawn_at = models.DateTimeField()
    channel = models.CharField(max_length=12, choices=Channel.choices)
    # What they had done: a finisher who withdrew leaves the completions and places counts.
    status_before = models.CharField(max_length=20, choices=Participant.Status.choices)

    class Meta:
        ordering = ["study", "withdrawn_at", "id"]
        constraints = [
            # Withdrawing twice (a double click, two tabs) leaves one tombstone.
            models.UniqueConstraint(fields=["study", "pseudonym"], name="withdrawal_unique_pseudonym"),
            models.CheckConstraint(condition=Q(channel__in=["participant", "researcher", "command"]),
                                   name="withdrawal_channel_known"),
        ]

    def __str__(self) -> str:
        return self.pseudonym


class StudyMembership(models.Model):
    """A researcher invited to a study's team with one role (surveys.permissions says what each may do).

    Owners are ``Study.owners``, not rows here: every existing study and command that
    creates one already names its owners there, so one place holds the owner role."""

    class Role(models.TextChoices):
        ANALYST = "analyst", "Analyst: dashboard, results, exports and API, no identifiers"
        VIEWER = "viewer", "Viewer: dashboard and results only"
        RATER_COORDINATOR = "rater_coordinator", "Rater coordinator: the invited-raters page only"

    study = models.ForeignKey(Study, on_delete=models.CASCADE, related_name="memberships")
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="study_memberships")
    role = models.CharField(max_length=20, choices=Role.choices)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            # One role per person and study: two rows would make "which role applies" ambiguous.
            models.UniqueConstraint(fields=["study", "user"], name="membership_one_role_per_study"),
            models.CheckConstraint(condition=Q(role__in=["analyst", "viewer", "rater_coordinator"]),
                                   name="membership_role_known"),
        ]

    def __str__(self) -> str:
        return f"{self.user} {self.role} of {self.study}"
