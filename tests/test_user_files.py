"""Files the user names are read as regular files with a byte cap (services/files.py): /dev/zero, a FIFO, a
folder or an oversized file give a message naming the file (and the limit), never an endless read or a hang.

The commands run as real subprocesses with a memory cap and a timeout, so a regression fails here instead of
filling the machine's memory or hanging the suite.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from protocol.errors import InvalidInput
from services.files import read_user_file
from tests.conftest import free_port
from tests.test_speech_cli import recording
from tests.cli_support import run_cli

ROOT = Path(__file__).resolve().parent.parent
MEMORY_CAP = 2 * 1024**3  # address space of the command: an endless read fails with MemoryError well before this hurts
# Runs `python -m services ARGS` with the memory cap set first.
_CAPPED = ("import resource, runpy, sys; resource.setrlimit(resource.RLIMIT_AS, ({cap}, {cap})); "
           "sys.argv = ['services', *sys.argv[1:]]; runpy.run_module('services', run_name='__main__', alter_sys=True)")


def services_cli(*args: str, data_dir: Path, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "OMNI_STUDIO_DATA_DIR": str(data_dir), "PYTHONUNBUFFERED": "1"}
    return run_cli([sys.executable, "-c", _CAPPED.format(cap=MEMORY_CAP), *args], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL)


@pytest.fixture
def fifo(tmp_path: Path) -> Path:
    path = tmp_path / "pipe"
    os.mkfifo(path)  # nobody ever writes to it: opening it for reading would wait forever
    return path


# ---- the helper --------------------------------------------------------------------------------------------
@pytest.mark.timeout(30)
def test_only_regular_files_under_the_limit_are_read(tmp_path: Path, fifo: Path) -> None:
    small = tmp_path / "small.txt"
    small.write_bytes(b"x" * 100)
    assert read_user_file(small, what="--thing", limit=100) == b"x" * 100
    big = tmp_path / "big.txt"
    big.write_bytes(b"x" * 101)
    cases = [
        (big, "cannot read --thing {p}: it is 101 bytes, over the limit of 100 bytes; give a smaller file"),
        (Path("/dev/zero"), "cannot read --thing /dev/zero: it is a character device, not a regular file"),
        (fifo, "cannot read --thing {p}: it is a FIFO (named pipe), not a regular file"),
        (tmp_path, "cannot read --thing {p}: it is a folder, not a regular file"),
        (tmp_path / "missing", "cannot read --thing {p} (No such file or directory)"),
    ]
    for path, message in cases:
        with pytest.raises(InvalidInput) as exc:
            read_user_file(path, what="--thing", limit=100)
        assert str(exc.value).startswith(message.format(p=path)), str(exc.value)


# ---- the commands ------------------------------------------------------------------------------------------
def write_spec(tmp_path: Path, prompts_file: Path) -> Path:
    spec = tmp_path / "spec.toml"
    spec.write_text(f'name = "n"\nmodality = "voice"\nprompts_file = "{prompts_file}"\n'
                    '[[variants]]\nlabel = "a"\n[[variants]]\nlabel = "b"\n', encoding="utf-8")
    return spec


@pytest.mark.timeout(240)
def test_eval_prompts_file_that_is_dev_zero_or_a_fifo_is_refused(tmp_path: Path, fifo: Path) -> None:
    closed = f"http://127.0.0.1:{free_port()}"
    for special, kind in ((Path("/dev/zero"), "a character device"), (fifo, "a FIFO (named pipe)")):
        spec = write_spec(tmp_path, special)
        p = services_cli("eval", "run", str(spec), "--url", closed, data_dir=tmp_path / "data")
        assert p.returncode == 1, p.stderr
        assert f"cannot read prompts_file {special}: it is {kind}, not a regular file" in p.stderr, p.stderr
        assert "Traceback" not in p.stderr


@pytest.mark.timeout(240)
def test_voices_add_audio_that_is_dev_zero_a_fifo_or_too_large_is_refused(tmp_path: Path, fifo: Path) -> None:
    from protocol.limits import REFERENCE_AUDIO_FILE_MAX_BYTES

    closed = f"http://127.0.0.1:{free_port()}"
    huge = tmp_path / "huge.wav"
    with open(huge, "wb") as f:
        f.truncate(REFERENCE_AUDIO_FILE_MAX_BYTES + 1)  # sparse: no disk used
    limit = f"{REFERENCE_AUDIO_FILE_MAX_BYTES / (1024 * 1024):g} MiB"
    cases = [
        (Path("/dev/zero"), "it is a character device, not a regular file; give a recording file"),
        (fifo, "it is a FIFO (named pipe), not a regular file; give a recording file"),
        (huge, f"over the limit of {limit}; give a smaller file"),
    ]
    for audio, message in cases:
        p = services_cli("voices", "add", "--url", closed, "--name", "anna", "--audio", str(audio),
                         "--consent", "c-1", data_dir=tmp_path / "data")
        assert p.returncode == 1, p.stderr
        assert f"cannot read --audio {audio}: " in p.stderr and message in p.stderr, p.stderr
        assert "reach" not in p.stderr  # refused before any backend is asked
    ok = recording(tmp_path / "ok.wav")
    p = services_cli("voices", "add", "--url", closed, "--name", "anna", "--audio", str(ok), "--consent", "c-1",
                     data_dir=tmp_path / "data")
    assert p.returncode == 1 and "cannot read --audio" not in p.stderr, p.stderr  # a real file gets as far as the server


# ---- prompts the clients refuse before sending ---------------------------------------------------------------
def test_clients_refuse_prompts_over_the_limit_naming_it(tmp_path: Path) -> None:
    from protocol.limits import PROMPT_MAX_CHARS
    from services.eval.spec import load_spec
    from services.images import EditReference, ImageEditRequest, ImageRequest
    from services.videos import VideoRequest

    long = "x" * (PROMPT_MAX_CHARS + 1)
    limit = f"is {PROMPT_MAX_CHARS + 1:,} characters long; at most {PROMPT_MAX_CHARS:,} are accepted"
    ref = (EditReference(b"not decoded here"),)
    cases = [
        (lambda: ImageRequest(long).validated(), "the prompt"),
        (lambda: ImageRequest("ok", negative_prompt=long).validated(), "the negative prompt"),
        (lambda: ImageEditRequest(long, ref).validated(check_references=False), "the prompt"),
        (lambda: VideoRequest(long).validated(check_reference=False), "the motion prompt"),
    ]
    for make, name in cases:
        with pytest.raises(InvalidInput) as exc:
            make()
        assert str(exc.value).startswith(f"{name} {limit}"), str(exc.value)
    prompts = tmp_path / "prompts.txt"
    prompts.write_text(f"a short one\n{long}\n", encoding="utf-8")
    spec = tmp_path / "image.toml"
    spec.write_text(f'name = "n"\nmodality = "image"\nprompts_file = "{prompts}"\n'
                    '[[variants]]\nlabel = "a"\n[[variants]]\nlabel = "b"\n', encoding="utf-8")
    with pytest.raises(InvalidInput, match=f"^prompt 2 {limit}"):
        load_spec(spec)
