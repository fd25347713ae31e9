"""Where the repository and its study fixtures are, for tests that read files or start processes."""

from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent.parent
FIXTURES = ROOT / "fixtures"
