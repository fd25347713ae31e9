#!/usr/bin/env bash
# Compare every export file of a run before and after a change (bench/export_snapshot.py).
#
#   bench/compare_exports.sh BASE_REV         # snapshot BASE_REV (a temporary git worktree) and this checkout
#   bench/compare_exports.sh SNAPSHOT_DIR     # snapshot this checkout and compare with a saved snapshot
#
# The same export_snapshot.py (this checkout's) runs on both sides: it is copied into the
# temporary worktree. DATABASE_URL, if set, names a PostgreSQL database that the script
# drops and creates again for each side; without it each side uses a temporary SQLite file.
# Exit status: 0 when every file is identical, 1 when diff -r finds a difference.
# The snapshots stay in the folder printed at the end (delete it when done).
set -euo pipefail

if [ $# -ne 1 ]; then
  sed -n '2,11p' "$0" | sed 's/^# \{0,1\}//'
  exit 2
fi
here=$(cd "$(dirname "$0")/.." && pwd)
python=${HEV_PYTHON:-$here/.venv/bin/python}
work=$(mktemp -d "${TMPDIR:-/tmp}/compare-exports.XXXXXX")

if [ -d "$1" ]; then
  before=$(cd "$1" && pwd)
else
  base=$work/base-checkout
  git -C "$here" worktree add --quiet --detach "$base" "$1"
  trap 'git -C "$here" worktree remove --force "$base"' EXIT
  cp "$here/bench/export_snapshot.py" "$base/bench/export_snapshot.py"
  before=$work/before
  echo "snapshot of $1 -> $before"
  "$python" "$base/bench/export_snapshot.py" "$before" > "$work/before.log" 2>&1 || { cat "$work/before.log"; exit 2; }
fi
after=$work/after
echo "snapshot of this checkout ($(git -C "$here" rev-parse --short HEAD), with uncommitted changes) -> $after"
"$python" "$here/bench/export_snapshot.py" "$after" > "$work/after.log" 2>&1 || { cat "$work/after.log"; exit 2; }

echo "diff -r $before $after"
status=0
diff -r "$before" "$after" || status=$?
[ "$status" -eq 0 ] && echo "every export file is identical"
echo "snapshots kept in $work"
exit "$status"
