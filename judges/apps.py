from django.apps import AppConfig


class JudgesConfig(AppConfig):
    name = "judges"
    verbose_name = "Judges beside people"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        # Analysis reads judges' answers and takes their uploads through what this app registers with it
        # (analysis never imports judges).
        from analysis.imports.importers import ImportKind, import_kind_register
        from analysis.judge_source import JudgeSource, judge_source_register
        from judges import selectors
        from judges.forms import JudgementsImportForm
        from judges.importers import judgements_import
        from judges.models import JudgeAnswer

        judge_source_register(JudgeSource(
            has_answers=lambda study_id: JudgeAnswer.objects.filter(judge__study_id=study_id).exists(),
            ratings_frame=selectors.judge_ratings_frame,
            pairwise_frame=selectors.judge_pairwise_frame,
        ))
        import_kind_register(ImportKind(
            "judgements", JudgementsImportForm,
            lambda study, cleaned: judgements_import(study=study, file=cleaned["judgements"]),
        ))
