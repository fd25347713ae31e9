from django.apps import AppConfig


class ProlificConfig(AppConfig):
    name = "prolific"
    verbose_name = "Prolific round trip"

    def ready(self) -> None:
        # Its copies of panel ids follow the study's retention (surveys.retention sends, this listens).
        from prolific import receivers  # noqa: F401
