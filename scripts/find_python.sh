#!/usr/bin/env bash
# Print the path of a working Python >= 3.12 (the oldest such, as the pins are tested on 3.12): PATH first, then pyenv.
# A pyenv shim for a version that is not active fails when run, so every candidate is executed, not just found.
set -u
ok() { "$1" -c 'import sys, venv; sys.exit(0 if sys.version_info >= (3, 12) else 1)' >/dev/null 2>&1; }
for name in python3.12 python3.13 python3 python; do
  p=$(command -v "$name" 2>/dev/null) || continue
  if ok "$p"; then echo "$p"; exit 0; fi
done
roots=()
command -v pyenv >/dev/null 2>&1 && roots+=("$(pyenv root 2>/dev/null)")
roots+=("${PYENV_ROOT:-$HOME/.pyenv}")
for root in "${roots[@]}"; do
  [ -d "$root/versions" ] || continue
  for p in $(ls -d "$root"/versions/3.*/bin/python3 2>/dev/null | sort -V); do
    if ok "$p"; then echo "$p"; exit 0; fi
  done
done
cat >&2 <<'MSG'
No Python >= 3.12 was found (looked on PATH for python3.13, python3.12, python3, and in pyenv's versions).
Install one, for example:  pyenv install 3.12   or   apt-get install python3.12 python3.12-venv
then run `make setup` again.
MSG
exit 1
