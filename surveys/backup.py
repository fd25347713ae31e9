"""Backups of one study: ``manage.py dump_study SLUG FILE`` and ``manage.py restore_study FILE``.

The file is JSON lines, written and read a row at a time (a large study never sits in memory):

- a header: ``format``, ``format_version``, the study's slug, and the latest migration of each app whose
  rows it holds (the schema the rows were written under);
- one line per row, as Django's "python" serializer gives it (model, pk, fields), the models in the
  order their foreign keys need; timestamps keep their microseconds (Django's JSON encoder would cut them
  to milliseconds, and the exports print them); users are named by username (they are not in the file);
- a last line with the SHA-256 of every line before it.

``study_restore`` reads the file twice: first only to check it (checksum, format and schema versions,
every line parses), then to write it in one transaction, so a damaged file, a file from a newer schema or a
clash with rows already there writes nothing. Rows keep their primary keys, so that every export of the
restored study (whose order follows the ids) is byte for byte that of the original; the restore therefore
refuses a database where the study's slug or any of its ids are taken (restore into a fresh database, or
after the study was deleted). Backends differ (SQLite to PostgreSQL works): PostgreSQL's id sequences are
moved past the restored ids afterwards.

Not in the file: user accounts (owners are re-attached by username when the account exists), the rate-limit
counters, the embedding cache (recomputed), the counts PostgreSQL keeps from the placements (rebuilt as they
are restored) and other apps' rows.
"""

from __future__ import annotations

import datetime as dt
import decimal
import hashlib
import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from django.apps import apps
from django.contrib.auth import get_user_model
from django.core import serializers
from django.core.management.color import no_style
from django.db import IntegrityError, connection, models, transaction
from django.db.migrations.loader import MigrationLoader

from web.signals import announce_action

FORMAT = "hev-study-dump"
FORMAT_VERSION = 1
# Every model holding a study's rows, parents before children; with the filter that selects the study's
# rows (a lookup path to the study's id). tests/test_backup.py checks no model of these apps is forgotten.
STUDY_MODELS: list[tuple[str, str]] = [
    ("surveys.Study", "pk"),
    ("surveys.System", "study_id"),
    ("surveys.Condition", "study_id"),
    ("surveys.Scenario", "study_id"),
    ("surveys.Dimension", "study_id"),
    ("surveys.Block", "study_id"),
    ("surveys.Item", "study_id"),
    ("surveys.AttentionCheck", "study_id"),
    ("surveys.FreeTextQuestion", "study_id"),
    ("surveys.DemographicQuestion", "study_id"),
    ("surveys.StudyMembership", "study_id"),
    ("surveys.Participant", "study_id"),
    ("surveys.RaterLink", "study_id"),
    ("surveys.ConsentDecline", "study_id"),
    ("surveys.TurnAway", "study_id"),
    ("surveys.Withdrawal", "study_id"),
    ("surveys.BlockVisit", "participant__study_id"),
    ("surveys.ItemPlacement", "visit__participant__study_id"),
    ("surveys.Rating", "placement__visit__participant__study_id"),
    ("surveys.FreeTextAnswer", "participant__study_id"),
    ("surveys.TypedAnswer", "participant__study_id"),
    ("surveys.Draft", "participant__study_id"),
    ("surveys.BlockTally", "study_id"),
    ("surveys.PairTally", "block__study_id"),
    ("surveys.BlockAssignment", "study_id"),
    ("analysis.GoldScore", "item__study_id"),
    ("analysis.AnalysisRun", "study_id"),
    ("analysis.ParticipantResult", "run__study_id"),
    ("analysis.ResultTable", "run__study_id"),
    ("analysis.MetricsRun", "study_id"),
    ("analysis.MetricsTable", "run__study_id"),
    ("prolific.PanelStudy", "study_id"),
    ("prolific.PanelSubmission", "panel_study__study_id"),
    ("prolific.BonusPayment", "panel_study__study_id"),
    ("prolific.BonusLine", "panel_study__study_id"),
    ("judges.Judge", "study_id"),
    ("judges.JudgeRun", "judge__study_id"),
    ("judges.JudgeCall", "run__judge__study_id"),
    ("judges.JudgeAnswer", "judge__study_id"),
]
# Models of those apps that hold no study's rows.
NOT_PER_STUDY = {"analysis.EmbeddingCache"}
# Models whose rows the database derives from others in the file, and rebuilds as those are restored.
DERIVED = {"surveys.FirstShownTally"}
BATCH = 2000


class RestoreRefused(Exception):
    """The file cannot be restored here; nothing was written."""


@dataclass
class RestoreResult:
    slug: str
    rows: dict[str, int] = field(default_factory=dict)
    owners_missing: list[str] = field(default_factory=list)


def _encode(value: Any) -> Any:
    if isinstance(value, dt.datetime | dt.date | dt.time):
        return value.isoformat()  # with microseconds, unlike DjangoJSONEncoder
    if isinstance(value, decimal.Decimal | dt.timedelta):
        return str(value)
    raise TypeError(f"cannot write {type(value).__name__} to a study dump")


def _line(payload: dict) -> bytes:
    return (json.dumps(payload, default=_encode, ensure_ascii=False) + "\n").encode()


def schema_versions() -> dict[str, str]:
    """The latest migration applied, per app whose rows a dump holds."""
    applied = MigrationLoader(connection, ignore_no_migrations=True).applied_migrations
    labels = sorted({label.split(".")[0] for label, _ in STUDY_MODELS})
    return {app: max((name for a, name in applied if a == app), default="") for app in labels}


def _user_fields(model: type[models.Model]) -> tuple[list[str], list[str]]:
    """The model's foreign keys and many-to-many fields to user accounts (written as usernames)."""
    user = get_user_model()
    fks = [f.name for f in model._meta.fields if f.is_relation and f.related_model is user]
    m2m = [f.name for f in model._meta.many_to_many if f.related_model is user]
    return fks, m2m


def _rows(study_id: int) -> Iterator[dict]:
    usernames = dict(get_user_model().objects.values_list("pk", "username"))
    for label, path in STUDY_MODELS:
        model = apps.get_model(label)
        fks, m2m = _user_fields(model)
        rows = model.objects.filter(**{path: study_id}).order_by("pk")
        if m2m:
            rows = rows.prefetch_related(*m2m)
        batch: list[models.Model] = []
        for obj in rows.iterator(chunk_size=BATCH):
            batch.append(obj)
            if len(batch) == BATCH:
                yield from _serialized(batch, fks, m2m, usernames)
                batch = []
        yield from _serialized(batch, fks, m2m, usernames)


def _serialized(objs: list, fks: list[str], m2m: list[str], usernames: dict[int, str]) -> Iterator[dict]:
    for row in serializers.serialize("python", objs):
        for name in fks:
            row["fields"][name] = usernames.get(row["fields"][name])
        for name in m2m:
            row["fields"][name] = sorted(usernames[pk] for pk in row["fields"][name])
        yield row


def study_dump(*, slug: str, out: IO[bytes], actor: Any = None) -> int:
    """Write the study's rows to ``out``; the number of rows. Raises ``LookupError`` for an unknown slug."""
    study = apps.get_model("surveys.Study").objects.filter(slug=slug).first()
    if study is None:
        raise LookupError(f'no study "{slug}"')
    digest = hashlib.sha256()
    n = 0
    # One snapshot of the study: rows written while the dump runs do not half-appear in it (PostgreSQL).
    outermost = not connection.in_atomic_block
    with transaction.atomic():
        if connection.vendor == "postgresql" and outermost:  # must be the transaction's first statement
            with connection.cursor() as cursor:
                cursor.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
        header = {"format": FORMAT, "format_version": FORMAT_VERSION, "study": slug, "schema": schema_versions()}
        for payload in (header, *_rows(study.pk)):
            line = _line(payload)
            digest.update(line)
            out.write(line)
            n += 1
    out.write(_line({"checksum": digest.hexdigest(), "lines": n}))
    announce_action(actor=actor, study=study, action="study.dump", object=slug, detail=f"{n - 1} rows")
    return n - 1


# ----------------------------------------------------------------------------- restore


def _check(path: Path) -> dict:
    """The header of a sound file; ``RestoreRefused`` for a damaged one or one this code cannot read."""
    digest = hashlib.sha256()
    header, last, n = None, None, 0
    try:
        with path.open("rb") as source:
            for raw in source:
                if last is not None:
                    digest.update(last)
                    n += 1
                last = raw
                payload = json.loads(raw)
                if header is None:
                    header = payload
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise RestoreRefused(f"{path}: not a readable study dump ({exc.__class__.__name__}: {exc})") from None
    if not isinstance(header, dict) or header.get("format") != FORMAT:
        raise RestoreRefused(f"{path}: not a study dump (its first line names no {FORMAT!r} format)")
    if not isinstance(header.get("format_version"), int) or header["format_version"] > FORMAT_VERSION:
        raise RestoreRefused(f"{path}: written in dump format {header.get('format_version')!r}, newer than this "
                             f"version reads ({FORMAT_VERSION}); restore it with the version that wrote it")
    trailer = json.loads(last) if last is not None else {}
    if not isinstance(trailer, dict) or trailer.get("checksum") != digest.hexdigest() or trailer.get("lines") != n:
        raise RestoreRefused(f"{path}: the file is damaged or cut short (its checksum does not match)")
    _check_schema(header.get("schema") or {})
    return header


def _check_schema(schema: dict) -> None:
    loader = MigrationLoader(connection, ignore_no_migrations=True)
    for app, name in sorted(schema.items()):
        if not name:
            continue
        if (app, name) not in loader.graph.nodes:
            raise RestoreRefused(f"the file comes from a newer schema ({app} migration {name} is unknown here); "
                                 "restore it with the version that wrote it")
        if (app, name) not in loader.applied_migrations:
            raise RestoreRefused(f"this database is behind the file ({app} migration {name} is not applied): "
                                 "run manage.py migrate first")


def _objects(path: Path) -> Iterator[dict]:
    with path.open("rb") as source:
        next(source)  # the header
        for raw in source:
            payload = json.loads(raw)
            if "checksum" in payload:
                return
            yield payload


def study_restore(*, path: str | Path, actor: Any = None) -> RestoreResult:
    """Restore a file of ``study_dump`` in one transaction; ``RestoreRefused`` (nothing written) when it
    cannot be restored here."""
    path = Path(path)
    header = _check(path)
    result = RestoreResult(slug=header["study"])
    study_model = apps.get_model("surveys.Study")
    users = dict(get_user_model().objects.values_list("username", "pk"))
    touched: set[type[models.Model]] = set()
    with transaction.atomic():
        if study_model.objects.filter(slug=result.slug).exists():
            raise RestoreRefused(f'a study "{result.slug}" exists already: delete it first, or restore into '
                                 "another database")
        pending: list[dict] = []
        for payload in _objects(path):
            if pending and payload["model"] != pending[0]["model"]:
                _write(pending, users, result, touched)
                pending = []
            pending.append(payload)
            if len(pending) == BATCH:
                _write(pending, users, result, touched)
                pending = []
        _write(pending, users, result, touched)
        try:
            # Foreign keys are checked at commit (deferred); checked here, a broken one refuses the file.
            connection.check_constraints(table_names=[model._meta.db_table for model in touched])
        except IntegrityError as exc:
            raise RestoreRefused(f"the file's rows do not fit together: {exc}") from None
        _reset_sequences(touched)
        study = study_model.objects.get(slug=result.slug)
        announce_action(actor=actor, study=study, action="study.restore", object=result.slug,
                        detail=f"{sum(result.rows.values())} rows")
    return result


def _write(batch: list[dict], users: dict[str, int], result: RestoreResult, touched: set) -> None:
    if not batch:
        return
    label = batch[0]["model"]
    try:
        model = apps.get_model(label)
    except (LookupError, ValueError):
        raise RestoreRefused(f"the file holds rows of an unknown model {label!r}") from None
    if model._meta.label not in {name for name, _ in STUDY_MODELS}:
        raise RestoreRefused(f"the file holds rows of {label}, which a study dump never holds")
    fks, m2m = _user_fields(model)
    pks = [row["pk"] for row in batch]
    if model.objects.filter(pk__in=pks).exists():
        raise RestoreRefused(f"ids of {model._meta.label} rows in the file are taken in this database: restore "
                             "into a fresh database (or one without this study)")
    owners: dict[int, list[int]] = {}
    required_fks = {f.name for f in model._meta.fields if f.name in fks and not f.null}
    kept = []
    for row in batch:
        missing = [row["fields"][name] for name in required_fks if row["fields"][name] not in users]
        if missing:  # a team member whose account is not here: the row cannot exist without it
            result.owners_missing += [u for u in missing if u is not None]
            continue
        kept.append(row)
        for name in fks:
            row["fields"][name] = users.get(row["fields"][name])  # an unknown account: no one
        for name in m2m:
            wanted = row["fields"].pop(name)
            result.owners_missing += [u for u in wanted if u not in users]
            owners[row["pk"]] = [users[u] for u in wanted if u in users]
    batch = kept
    try:
        objects = list(serializers.deserialize("python", batch))
    except serializers.base.DeserializationError as exc:
        raise RestoreRefused(f"a row of {label} cannot be read: {exc}") from None
    if _has_automatic_times(model):
        for obj in objects:
            obj.save()  # raw: created_at / updated_at keep the file's values
    else:
        model.objects.bulk_create([obj.object for obj in objects], batch_size=BATCH)
    for pk, user_ids in owners.items():
        for name in m2m:
            getattr(model.objects.get(pk=pk), name).set(user_ids)
    result.rows[model._meta.label] = result.rows.get(model._meta.label, 0) + len(objects)
    touched.add(model)


def _has_automatic_times(model: type[models.Model]) -> bool:
    return any(getattr(f, "auto_now", False) or getattr(f, "auto_now_add", False) for f in model._meta.fields)


def _reset_sequences(touched: set) -> None:
    """PostgreSQL's id sequences past the restored ids (SQLite needs nothing)."""
    statements = connection.ops.sequence_reset_sql(no_style(), sorted(touched, key=lambda m: m._meta.label))
    if statements:
        with connection.cursor() as cursor:
            for sql in statements:
                cursor.execute(sql)
