"""`make studio`: check where the studio would listen, then run `streamlit run serve.py` (app.py behind its storage health check) with the same flags.

    python scripts/studio.py [--check] [streamlit run flags...]     e.g. --server.address 0.0.0.0 --server.port 8501

The server address and the secrets files are read as `streamlit run` reads them — its own flag parser
(flags, then STREAMLIT_* variables), then .streamlit/config.toml — and handed to services.signin.bind_problem:
listening beyond loopback without sign-in, or with an incomplete [auth] table, exits 2 with the message
saying how to configure sign-in (docs/team.md, "Sign-in"). Otherwise this process becomes
`python -m streamlit run serve.py <the same flags>` (with --check: exits 0 instead). app.py checks the same
again, for whoever runs streamlit directly.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from protocol.errors import StudioError  # noqa: E402
from services import signin  # noqa: E402

EXIT_REFUSED = 2


def streamlit_view(args: list[str]) -> tuple[str | None, list[str]]:
    """(server.address, secrets.files) as `streamlit run app.py <args>` would see them. click.UsageError for
    a flag streamlit does not know."""
    from streamlit import config
    from streamlit.web import bootstrap, cli

    ctx = cli.main_run.make_context("run", ["app.py", *args])
    options = {k: v for k, v in ctx.params.items() if k not in ("target", "args")}
    config._main_script_path = str(ROOT / "app.py")  # the script's own .streamlit/ is read too, as `run` does
    bootstrap.load_config_options(options)
    return config.get_option("server.address"), list(config.get_option("secrets.files") or [])


def check(args: list[str]) -> str | None:
    """The reason not to start, or None."""
    address, files = streamlit_view(args)
    problem = signin.bind_problem(address, files)
    if problem:
        return problem
    config = signin.sign_in(files)
    if config is None:
        print(f"studio: no sign-in; listening on {signin.describe_address(address)} only", file=sys.stderr)
        return None
    print(f"studio: sign-in on ({', '.join(config.providers)}; secrets from {', '.join(config.files)})",
          file=sys.stderr)
    try:
        from services.settings import load_settings

        if load_settings().access.empty:
            print("studio: warning: the access policy names nobody, so nobody who signs in gets in: add [access] "
                  "to studio.toml (docs/team.md)", file=sys.stderr)
    except StudioError:
        pass  # a bad setting: the studio's pages name it
    return None


def quiet_banner(args: list[str], address: str | None) -> list[str]:
    """Listening on every interface, headless, Streamlit's start-up banner looks the machine's public address up
    on the internet (an HTTP request to a checkip service). The studio sends nothing beyond what its users ask
    for: on every interface the banner is off, unless the flags or the environment set it themselves, and the
    launcher says where it listens."""
    if address not in (None, "", "0.0.0.0", "::"):  # noqa: S104 — one address: no lookup
        return args
    if any(a.startswith("--logger.hideWelcomeMessage") for a in args) or \
            "STREAMLIT_LOGGER_HIDE_WELCOME_MESSAGE" in os.environ:
        return args
    print("studio: listening on every interface; open it at the address your users reach (sign-in's "
          "redirect_uri names it)", file=sys.stderr)
    return [*args, "--logger.hideWelcomeMessage", "true"]


def shared_storage_problem() -> str | None:
    """A team studio's replica (a `database_url` or a `media_url` set) starts only on storage that answers: the
    history opened (and migrated to this version: replicas starting at once migrate once) and the media store
    probed; else one line naming which and why (the process exits 2, and its orchestrator retries it). A one-machine
    studio (SQLite and the data folder) is not held up: its pages name a problem there."""
    from services.settings import load_settings
    from services.storage_health import storage_problem

    try:
        settings = load_settings()
    except StudioError:
        return None  # a bad setting: the studio's pages name it
    if not (settings.database_url or settings.media_url):
        return None
    from services.history import History

    try:
        history = History.of(settings)  # migrates a database this version has not seen yet
    except StudioError as exc:
        return f"studio: will not start: {exc}"
    try:
        problem = storage_problem(settings, history)  # the same history: opened once
    finally:
        history.close()
    return None if problem is None else f"studio: will not start: {problem}"


def main(argv: list[str] | None = None) -> int:
    import click

    args = list(sys.argv[1:] if argv is None else argv)
    check_only = "--check" in args
    args = [a for a in args if a != "--check"]
    os.chdir(ROOT)
    try:
        problem = check(args)
    except click.ClickException as exc:
        print(f"studio: {exc.format_message()} (flags are streamlit run's: --server.address 127.0.0.1 ...)",
              file=sys.stderr)
        return EXIT_REFUSED
    if problem or (problem := shared_storage_problem()):
        print(problem, file=sys.stderr)
        return EXIT_REFUSED
    address = streamlit_view(args)[0]
    args = quiet_banner(args, address)
    from streamlit import config

    print(f"studio: serving on {address or '0.0.0.0'}:{config.get_option('server.port')}", file=sys.stderr)
    command = [sys.executable, "-m", "streamlit", "run", "serve.py", *args]  # app.py behind its storage check
    if check_only:
        print(f"studio: would run {' '.join(command[1:])}", file=sys.stderr)
        return 0
    os.execv(sys.executable, command)
    return 0  # unreachable: execv replaces this process


if __name__ == "__main__":
    sys.exit(main())
