from __future__ import annotations

from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from analysis.exporting.exports import EXPORTS, ExportUnavailable, export_run, export_write, result_exports_of
from surveys.models import Study


class Command(BaseCommand):
    help = "Write CSV exports (DESIGN 3.3) of the study's latest finished analysis run."

    def add_arguments(self, parser):
        parser.add_argument("--study", required=True, help="study slug")
        parser.add_argument(
            "--what", required=True, action="append", choices=sorted(EXPORTS) + ["results"],
            # argparse %-formats help texts: a literal % in a description ("95% CI") is written %%.
            help="which export (repeat for several); 'results' writes every result table of the run. "
            + "; ".join(f"{k}: {v.description}" for k, v in EXPORTS.items()).replace("%", "%%"),
        )
        parser.add_argument("--out", required=True, help="output folder")

    def handle(self, *args, study: str, what: list[str], out: str, **options):
        target = Study.objects.filter(slug=study).first()
        if target is None:
            raise CommandError(f'no study "{study}"')
        try:
            names = [n for w in what for n in (result_exports_of(export_run(study=target)) if w == "results" else [w])]
            for name in names:
                self.stdout.write(f"wrote {export_write(study=target, what=name, out_dir=Path(out))}")
        except ExportUnavailable as exc:
            raise CommandError(str(exc)) from None
