from django.apps import AppConfig


class JudgesConfig(AppConfig):
    name = "judges"
    verbose_name = "Judges beside people"
    default_auto_field = "django.db.models.BigAutoField"
