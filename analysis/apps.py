from django.apps import AppConfig


class AnalysisConfig(AppConfig):
    name = "analysis"
    verbose_name = "Analysis"

    def ready(self) -> None:
        # Register the Celery tasks in every process (web, commands, shells), not only in
        # workers: analysis.running.runs sends them by their registered name. And the system checks.
        from analysis import checks, tasks  # noqa: F401
