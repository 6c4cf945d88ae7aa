"""What every `python -m services` command shares: the backend options and how they become settings, text
arguments that must be UTF-8 (`check_utf8_args`, `read_text`), and the output file (`check_out` before any
backend starts, `save_output` after: a failed write still keeps the result in a fallback file).
"""

from __future__ import annotations

import argparse
import os
import secrets
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

from protocol.errors import InvalidInput
from services.backend import Backend, create_backend
from services.kinds import BACKEND_NAMES, backend_name
from services.settings import Settings, load_settings
from services.targets import target_backend


class ArgumentError(InvalidInput):
    """A command-line argument the command cannot use at all (not UTF-8): exit code 2, like argparse's own."""

    exit_code = 2


def common_options() -> argparse.ArgumentParser:
    common = argparse.ArgumentParser(add_help=False)
    g = common.add_argument_group("backend")
    g.add_argument("--backend", type=backend_name, choices=BACKEND_NAMES,
                   help="default: from settings (offline); omni, the server's former name, is taken as server")
    g.add_argument("--url", help="vLLM-Omni server URL for --backend server, e.g. http://gpu-box:8091")
    g.add_argument("--region", help="AWS region for --backend sagemaker")
    g.add_argument("--profile", help="AWS profile for --backend sagemaker")
    g.add_argument("--state-file", type=Path,
                   help="infra state file naming the SageMaker endpoints (default: .vllm_omni_media_state.json)")
    common.add_argument("--json", action="store_true", help="print one JSON object with the figures")
    return common


def settings_from_args(args: argparse.Namespace) -> Settings:
    overrides = {"backend": target_backend(args.backend, url=args.url), "server_url": args.url,
                 "region": args.region, "profile": args.profile, "state_file": args.state_file}
    return load_settings().with_overrides(**overrides)


def backend_from_args(args: argparse.Namespace) -> Backend:
    return create_backend(settings_from_args(args))


# ---- text arguments ---------------------------------------------------------------------------------------
def _not_utf8(what: str, raw: bytes, start: int) -> ArgumentError:
    lo, hi = max(0, start - 24), start + 24
    shown = raw[lo:hi].decode("utf-8", "backslashreplace")
    shown = ("…" if lo else "") + shown.replace("\n", "\\n") + ("…" if hi < len(raw) else "")
    return ArgumentError(f"{what} is not valid UTF-8 (byte 0x{raw[start]:02x} at position {start}): \"{shown}\"; "
                         "give it as UTF-8 text")


def check_utf8(option: str, value: str) -> None:
    """Refuse an argument that is not UTF-8: Python decodes argv with surrogateescape, so each byte that is
    not UTF-8 arrives as a lone surrogate U+DC80..U+DCFF."""
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as exc:
        raw = value.encode("utf-8", "surrogateescape" if 0xDC80 <= ord(value[exc.start]) <= 0xDCFF else "surrogatepass")
        try:
            raw.decode("utf-8")
        except UnicodeDecodeError as bad:
            raise _not_utf8(option, raw, bad.start) from None
        raise ArgumentError(f"{option} is not valid UTF-8 (a lone surrogate at character {exc.start})") from None


def check_utf8_args(args: argparse.Namespace) -> None:
    """Every text option (the text, prompts, voice, URL, ...) must be UTF-8: it goes over the wire as JSON.
    Paths (`--out`, `--image`, ...) are not checked: a file name need not be UTF-8."""
    for dest, value in vars(args).items():
        if isinstance(value, str):
            check_utf8("--" + dest.replace("_", "-"), value)


def read_text(value: str, option: str) -> str:
    """The argument itself, or with "-" all of stdin, decoded strictly as UTF-8 (a leading BOM dropped)."""
    if value != "-":
        return value
    if sys.stdin is None:
        raise InvalidInput(f"{option} - reads the text from stdin, but there is no stdin")
    raw = sys.stdin.buffer.read()
    try:
        return raw.decode("utf-8").removeprefix("\ufeff")
    except UnicodeDecodeError as exc:
        raise _not_utf8(f"{option} - (stdin)", raw, exc.start) from None


# ---- the output file --------------------------------------------------------------------------------------
def _out_problem(path: Path) -> str | None:
    """Why `path` cannot be written, when that can be known without writing (else None)."""
    try:
        if path.is_dir():
            return "it is a directory"
        parent = path.parent
        if not parent.exists():
            return f"there is no folder {parent}"
        if not parent.is_dir():
            return f"{parent} is not a folder"
        if path.exists():
            if not os.access(path, os.W_OK):
                return "permission denied"
        elif not os.access(parent, os.W_OK | os.X_OK):
            return f"the folder {parent} is not writable"
    except OSError as exc:
        return exc.strerror or str(exc)
    return None


def check_out(*paths: Path, option: str = "--out") -> None:
    """Refuse output files that cannot be written, before any backend starts (nothing is made for nothing)."""
    for path in paths:
        if (problem := _out_problem(path)) is not None:
            raise InvalidInput(f"cannot write {path} ({problem}); pick another {option}")


@dataclass(frozen=True)
class Saved:
    """Where a result went: `path` (None if nowhere), and `problem` when that is not the file asked for."""

    path: str | None
    problem: str | None = None


def _fallback(path: Path, data: bytes, suffix: str) -> Path | None:
    """`data` in a new file next to the user (the current directory), else in the temp dir; None if neither.
    The name is new (never overwrites anything) and the file gets the usual permissions (the umask's)."""
    for folder in (Path.cwd(), Path(tempfile.gettempdir())):
        for _ in range(3):
            name = folder / f"{path.stem or 'output'}-{secrets.token_hex(3)}{path.suffix or suffix}"
            try:
                f = open(name, "xb")  # noqa: SIM115 (closed below; removed if the write fails)
            except FileExistsError:
                continue
            except OSError:
                break
            try:
                with f:
                    f.write(data)
                return name.absolute()
            except OSError:
                name.unlink(missing_ok=True)
                break
    return None


def save_output(path: Path, data: bytes, *, suffix: str, option: str = "--out") -> Saved:
    """Write `data` to `path`; if that fails (a full disk, /dev/full, ...), keep it in a fallback file and say where."""
    try:
        path.write_bytes(data)
        return Saved(str(path))
    except OSError as exc:
        reason = exc.strerror or str(exc)
    fallback = _fallback(path, data, suffix)
    if fallback is None:
        return Saved(None, f"cannot write {path} ({reason}), nor a fallback file in {Path.cwd()} or "
                           f"{tempfile.gettempdir()}; free some space or pick another {option}")
    return Saved(str(fallback), f"cannot write {path} ({reason}); saved it to {fallback} instead — "
                                f"pick another {option} next time")
