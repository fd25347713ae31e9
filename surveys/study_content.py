"""What a study asks on every page, read once per process and version instead of once per request.

A block page needs the study's dimensions and its per-block written questions; the final page its
demographic and end-of-study questions; a newcomer's sequence its attention checks. They change only when the study is loaded again
(``surveys.loader`` bumps ``Study.content_version`` then), so each process keeps them keyed by the
study's row identity and that version, and reads them again as soon as a request's study row shows
a newer version: a reload done by another process is seen by the next request here.

The key also holds the study's random ``pseudonym_key``: a deleted study's id can be given again
(SQLite reuses the highest id), and the new study must not get the old one's questions.

The rows are shared between requests and threads: callers read them and never change them.
"""

from __future__ import annotations

from dataclasses import dataclass

from django.db.models.signals import post_delete, post_save

from .models import AttentionCheck, DemographicQuestion, Dimension, FreeTextQuestion, Study


@dataclass(frozen=True)
class StudyContent:
    dimensions: tuple[Dimension, ...]
    block_questions: tuple[FreeTextQuestion, ...]  # written questions asked on every block
    end_questions: tuple[FreeTextQuestion, ...]  # written questions of the final page
    demographic_questions: tuple[DemographicQuestion, ...]
    attention_check_ids: tuple[int, ...]  # in id order, as a newcomer's sequence takes them


_Key = tuple[int, str, int]
_cache: dict[int, tuple[_Key, StudyContent]] = {}


def _key(study: Study) -> _Key:
    return (study.pk, study.pseudonym_key, study.content_version)


def study_content_get(*, study: Study) -> StudyContent:
    """The study's dimensions and questions as of ``study.content_version`` (read from the database
    the first time this process sees that version)."""
    key = _key(study)
    hit = _cache.get(study.pk)
    if hit is not None and hit[0] == key:
        return hit[1]
    texts = list(FreeTextQuestion.objects.filter(study_id=study.pk))
    content = StudyContent(
        dimensions=tuple(Dimension.objects.filter(study_id=study.pk)),
        block_questions=tuple(q for q in texts if q.per_block),
        end_questions=tuple(q for q in texts if not q.per_block),
        demographic_questions=tuple(DemographicQuestion.objects.filter(study_id=study.pk)),
        attention_check_ids=tuple(AttentionCheck.objects.filter(study_id=study.pk).order_by("pk")
                                  .values_list("pk", flat=True)),
    )
    # One entry per study, replaced whole: a plain dict assignment, safe between threads.
    _cache[study.pk] = (key, content)
    return content


def study_content_forget(*, study_id: int) -> None:
    """Drop this process's copy (a row changed here; other processes go by the version)."""
    _cache.pop(study_id, None)


def _forget_on_change(sender, instance, **kwargs) -> None:
    # Rows are written by the loader (which also bumps the version) and by tests and scripts that
    # edit them directly; in this process, both are seen at once.
    study_content_forget(study_id=instance.study_id)


for _model in (Dimension, FreeTextQuestion, DemographicQuestion, AttentionCheck):
    post_save.connect(_forget_on_change, sender=_model, dispatch_uid=f"study_content_{_model.__name__}_save")
    post_delete.connect(_forget_on_change, sender=_model, dispatch_uid=f"study_content_{_model.__name__}_delete")
