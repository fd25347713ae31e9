from pathlib import Path

from django.core.management.base import BaseCommand, CommandError, CommandParser

from surveys.definition import parse_definition
from surveys.outputs import OutputsProblems, definition_from_outputs, definition_text
from surveys.study_creation import StudyExists, study_create_draft


class Command(BaseCommand):
    help = ("Build a study definition from model outputs (CSV, JSONL or Parquet, one row per response) and a "
            "template (a definition without scenarios and blocks); write it, and load it as a draft with --load.")

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--outputs", required=True, help="outputs file: .csv, .jsonl or .parquet")
        parser.add_argument("--template", required=True, help="template: .yaml, .yml or .json")
        parser.add_argument("--out", help="definition file to write (.json, or .yaml/.yml); default: standard output")
        parser.add_argument("--load", action="store_true", help="also create the study, closed to participants")

    def handle(self, *args, **options) -> None:
        outputs, template = Path(options["outputs"]), Path(options["template"])
        try:
            definition = definition_from_outputs(str(outputs), _read(outputs), str(template), _read(template))
        except OutputsProblems as exc:
            lines = "\n".join(f"  {p}" for p in exc.problems)
            raise CommandError(f"{len(exc.problems)} problem(s); nothing was written\n{lines}") from None
        out = options["out"]
        if out and not Path(out).parent.is_dir():
            raise CommandError(f"{out}: no such folder; nothing was written")
        text = definition_text(definition, as_yaml=bool(out) and Path(out).suffix.lower() in {".yaml", ".yml"})
        study = None
        if options["load"]:
            try:
                study = study_create_draft(definition=parse_definition(definition))
            except StudyExists as exc:
                raise CommandError(f"{exc}; nothing was written") from None
        if out:
            Path(out).write_text(text, encoding="utf-8")
            self.stderr.write(f"wrote {out}: {len(definition['blocks'])} blocks, "
                              f"{sum(len(b['responses']) for b in definition['blocks'])} responses")
        else:
            self.stdout.write(text, ending="")
        if study is not None:
            self.stderr.write(f'study "{study.slug}" created as a draft (closed to participants): '
                              f"{study.blocks.count()} blocks, {study.items.count()} items")


def _read(path: Path) -> bytes:
    try:
        return path.read_bytes()
    except OSError as exc:
        raise CommandError(f"{path}: cannot read the file ({exc.strerror})") from None
