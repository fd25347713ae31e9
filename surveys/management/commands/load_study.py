from django.core.management.base import BaseCommand, CommandError, CommandParser

from surveys.definition import DefinitionError, parse_definition, read_definition_file
from surveys.launch import study_launch
from surveys.loader import StudyLocked, study_load


class Command(BaseCommand):
    help = (
        "Validate a study definition file (JSON or YAML) and create or update the study. A new study starts as "
        "a draft: preview it from its researcher page, then launch it there (or pass --open)."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("file", nargs="+", help="definition file(s), e.g. fixtures/tide.json")
        parser.add_argument("--open", action="store_true",
                            help="launch the study at once: open it to participants (a draft is launched)")

    def handle(self, *args, **options) -> None:
        for path in options["file"]:
            try:
                result = study_load(definition=parse_definition(read_definition_file(path)), as_draft=True,
                                    via="manage.py load_study")
            except DefinitionError as exc:
                lines = "\n".join(f"  {p}" for p in exc.problems)
                raise CommandError(f"{path}: {len(exc.problems)} problem(s); nothing was written\n{lines}") from None
            except StudyLocked as exc:
                raise CommandError(f"{path}: {exc}") from None
            study = result.study
            if options["open"]:
                study_launch(study=study)
            verb = "created" if result.created else ("updated" if result.content_changed else "unchanged (settings refreshed)")
            state = "a draft (launch it from its page, or load it with --open)" if study.is_draft else (
                "open" if study.is_open else "closed")
            self.stdout.write(
                f'study "{study.slug}" {verb}: {study.blocks.count()} blocks, {study.items.count()} items; {state}'
            )
