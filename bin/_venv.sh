# Sourced by bin/run and bin/test: make .venv and install a requirements file
# into it, skipping pip when the file has not changed since the last install.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
PYTHON_BIN=${PYTHON_BIN:-$(command -v python3.11 || command -v python3)}
ensure_venv() {
  local reqs=$1 stamp
  [ -x .venv/bin/python ] || "$PYTHON_BIN" -m venv .venv
  stamp=".venv/.installed-$(basename "$reqs")-$(cat "$reqs" requirements.txt | sha256sum | cut -c1-16)"
  if [ ! -f "$stamp" ]; then
    .venv/bin/python -m pip install --quiet --disable-pip-version-check -r "$reqs"
    touch "$stamp"
  fi
}
