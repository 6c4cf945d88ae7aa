"""Sign-in's configuration and the loopback rule (services/signin.py), and the launcher `make studio` runs
(scripts/studio.py): it exits 2 naming how to configure sign-in when asked to listen beyond loopback without
it, and otherwise becomes `streamlit run serve.py` (app.py behind its storage check) with the same flags.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import httpx
import pytest

from offline.launch import free_port, spawn, wait_http_ok
from protocol.errors import ConfigError
from services import signin
from tests.cli_support import run_cli

ROOT = Path(__file__).resolve().parent.parent
LAUNCHER = ROOT / "scripts" / "studio.py"
WHOLE = """[auth]
redirect_uri = "http://127.0.0.1:{port}/oauth2callback"
cookie_secret = "0123456789abcdef0123456789abcdef"
client_id = "omni-studio"
client_secret = "s3cret"
server_metadata_url = "http://127.0.0.1:9/.well-known/openid-configuration"
"""


def _write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def test_no_auth_table_is_sign_in_off(tmp_path: Path) -> None:
    other = _write(tmp_path / "secrets.toml", 'api_key = "x"\n')
    assert signin.sign_in([str(tmp_path / "absent.toml"), str(other)]) is None
    assert signin.sign_in([]) is None


def test_a_whole_auth_table_for_the_default_and_a_named_provider(tmp_path: Path) -> None:
    config = signin.sign_in([str(_write(tmp_path / "s.toml", WHOLE))])
    assert config is not None and config.providers == ("default",)
    assert config.redirect_uri == "http://127.0.0.1:{port}/oauth2callback"  # Streamlit fills {port} itself
    named = WHOLE.split("client_id")[0] + (
        '[auth.okta]\nclient_id = "a"\nclient_secret = "b"\n'
        'server_metadata_url = "https://okta.example.com/.well-known/openid-configuration"\n')
    assert signin.sign_in([str(_write(tmp_path / "n.toml", named))]).providers == ("okta",)


@pytest.mark.parametrize(("change", "named"), [
    (lambda t: t.replace('client_secret = "s3cret"\n', ""), "[auth] has no client_secret"),
    (lambda t: t.replace('cookie_secret = "0123456789abcdef0123456789abcdef"\n', ""), "[auth] has no cookie_secret"),
    (lambda t: t.replace("/oauth2callback", "/callback"), "must be the studio's own address ending in /oauth2callback"),
    (lambda t: t.replace("0123456789abcdef0123456789abcdef", "short"), "cookie_secret is 5 bytes"),
    (lambda t: t.split("client_id")[0], "[auth] names no provider"),
    (lambda t: t.split("client_id")[0] + '[auth.my_idp]\nclient_id = "a"\n',
     "[auth.my_idp] has no client_secret; [auth.my_idp] has no server_metadata_url; [auth.my_idp]: a provider's "
     "name may not contain '_'"),
])
def test_an_incomplete_auth_table_names_what_is_missing_and_where(tmp_path: Path, change, named: str) -> None:
    path = _write(tmp_path / "secrets.toml", change(WHOLE))
    with pytest.raises(ConfigError) as caught:
        signin.sign_in([str(path)])
    assert named in str(caught.value) and str(path) in str(caught.value), caught.value
    # a broken table stops the studio anywhere, loopback too: nobody could sign in
    assert named in signin.bind_problem("127.0.0.1", [str(path)])


def test_secrets_are_read_as_streamlit_reads_them(tmp_path: Path) -> None:
    """A later file's [auth] replaces an earlier one whole; a folder holds Kubernetes-style secrets; a file
    that is not TOML is named."""
    first = _write(tmp_path / "home" / "secrets.toml", WHOLE)
    second = _write(tmp_path / "project" / "secrets.toml", '[auth]\nredirect_uri = "x"\n')
    with pytest.raises(ConfigError, match="has no cookie_secret"):
        signin.sign_in([str(first), str(second)])
    folder = tmp_path / "k8s"
    for key, value in {"redirect_uri": "http://s.example.com/oauth2callback", "cookie_secret": "c" * 32,
                       "client_id": "a", "client_secret": "b", "server_metadata_url": "https://idp/x"}.items():
        _write(folder / "auth" / key, value + "\n")
    assert signin.sign_in([str(folder)]).providers == ("default",)
    bad = _write(tmp_path / "bad.toml", "[auth\n")
    with pytest.raises(ConfigError, match=f"secrets file {bad} is not valid TOML"):
        signin.sign_in([str(bad)])


@pytest.mark.parametrize(("address", "loopback"), [
    ("127.0.0.1", True), ("127.0.0.2", True), ("::1", True), ("[::1]", True), ("localhost", True),
    ("0.0.0.0", False), ("::", False), ("192.168.1.20", False), ("studio.example.com", False),
    ("unix:///run/studio.sock", False), (None, False), ("", False),
])
def test_only_loopback_is_loopback(address: str | None, loopback: bool) -> None:
    assert signin.is_loopback(address) is loopback


def test_beyond_loopback_without_sign_in_is_refused_saying_how_to_configure_it(tmp_path: Path) -> None:
    files = [str(tmp_path / "secrets.toml")]
    for address in ("0.0.0.0", "192.168.1.20", None):
        problem = signin.bind_problem(address, files)
        assert problem is not None
        assert f"will not listen on {signin.describe_address(address)} without sign-in" in problem
        for needed in ("[auth]", "redirect_uri", "cookie_secret", "client_id", "client_secret", "server_metadata_url",
                       ".streamlit/secrets.toml", "[access]", 'docs/team.md, "Sign-in"', "HOST=127.0.0.1", files[0]):
            assert needed in problem, needed
    assert signin.bind_problem("127.0.0.1", files) is None
    _write(tmp_path / "secrets.toml", WHOLE)
    assert signin.bind_problem("0.0.0.0", files) is None


# ---------------------------------------------------------------------------------------------------------
# The launcher
def _launcher_env(home: Path) -> dict[str, str]:
    """No ~/.streamlit of this machine's user, no STREAMLIT_* settings of the caller."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("STREAMLIT_")}
    return {**env, "HOME": str(home)}


def test_the_launcher_refuses_0_0_0_0_without_sign_in(tmp_path: Path) -> None:
    proc = run_cli([sys.executable, str(LAUNCHER), "--server.address", "0.0.0.0", "--server.port",
                           str(free_port()), "--server.headless", "true"],
                          env=_launcher_env(tmp_path), capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2, proc.stderr
    assert "will not listen on 0.0.0.0 without sign-in" in proc.stderr
    assert "[auth]" in proc.stderr and "HOST=127.0.0.1" in proc.stderr
    assert str(tmp_path / ".streamlit" / "secrets.toml") in proc.stderr  # it looked where Streamlit looks


def test_a_replica_whose_shared_storage_does_not_answer_does_not_start(tmp_path: Path, pg_cluster) -> None:
    """A team studio's replica on a database that is down exits 2 naming it (not its password); on one that answers
    it starts, the database migrated first; a one-machine studio is not held up by its (default) storage."""
    env = {**_launcher_env(tmp_path), "OMNI_STUDIO_CONFIG": "", "OMNI_STUDIO_DATA_DIR": str(tmp_path / "data")}
    down = run_cli([sys.executable, str(LAUNCHER), "--check"], capture_output=True, text=True, timeout=60,
                   env={**env, "OMNI_STUDIO_DATABASE_URL": "postgresql://studio:hunter2@127.0.0.1:9/history"})
    assert down.returncode == 2, down.stderr
    said = down.stderr.splitlines()[-1]  # after the launcher's line about sign-in
    assert said.startswith("studio: will not start: cannot open the history at "
                           "postgresql+psycopg://studio:***@127.0.0.1:9/history"), down.stderr
    assert "hunter2" not in down.stderr and "OMNI_STUDIO_DATABASE_URL" in said
    (tmp_path / "not-a-folder").write_text("a file where the media folder should be")
    media = run_cli([sys.executable, str(LAUNCHER), "--check"], capture_output=True, text=True, timeout=60,
                    env={**env, "OMNI_STUDIO_MEDIA_URL": str(tmp_path / "not-a-folder")})
    assert media.returncode == 2 and "cannot use the media folder" in media.stderr, media.stderr
    name = pg_cluster.database("template1")  # an empty database: the launcher migrates it
    try:
        up = run_cli([sys.executable, str(LAUNCHER), "--check"], capture_output=True, text=True, timeout=60,
                     env={**env, "OMNI_STUDIO_DATABASE_URL": pg_cluster.url(name)})
        assert up.returncode == 0 and "would run -m streamlit run serve.py" in up.stderr, up.stderr
        from services.history import History
        from services.history.migrate import head, revision

        migrated = History(tmp_path / "reader", database_url=pg_cluster.url(name), migrate=False)
        assert revision(migrated) == head()
        migrated.close()
    finally:
        pg_cluster.drop(name)
    alone = run_cli([sys.executable, str(LAUNCHER), "--check"], capture_output=True, text=True, timeout=60, env=env)
    assert alone.returncode == 0, alone.stderr


def test_the_launcher_reads_the_address_and_secrets_as_streamlit_does(tmp_path: Path) -> None:
    """The variable STREAMLIT_SERVER_ADDRESS counts like the flag; --secrets.files with a whole [auth] lets
    0.0.0.0 pass (--check: nothing is started); an unknown flag is named."""
    env = _launcher_env(tmp_path)
    refused = run_cli([sys.executable, str(LAUNCHER), "--check"],
                             env={**env, "STREAMLIT_SERVER_ADDRESS": "0.0.0.0"}, capture_output=True, text=True,
                             timeout=60)
    assert refused.returncode == 2 and "will not listen on 0.0.0.0" in refused.stderr, refused.stderr
    secrets = _write(tmp_path / "team" / "secrets.toml", WHOLE)
    passed = run_cli([sys.executable, str(LAUNCHER), "--check", "--server.address", "0.0.0.0",
                             "--secrets.files", str(secrets)], env=env, capture_output=True, text=True, timeout=60)
    assert passed.returncode == 0, passed.stderr
    assert f"sign-in on (default; secrets from {secrets})" in passed.stderr
    # On every interface Streamlit's banner would look the public address up on the internet: it is off.
    assert passed.stderr.rstrip().endswith("--logger.hideWelcomeMessage true"), passed.stderr
    local = run_cli([sys.executable, str(LAUNCHER), "--check", "--server.address", "127.0.0.1"], env=env,
                           capture_output=True, text=True, timeout=60)
    assert local.returncode == 0 and "hideWelcomeMessage" not in local.stderr, local.stderr
    broken = _write(tmp_path / "broken" / "secrets.toml", WHOLE.replace('client_id = "omni-studio"\n', ""))
    incomplete = run_cli([sys.executable, str(LAUNCHER), "--check", "--secrets.files", str(broken)], env=env,
                                capture_output=True, text=True, timeout=60)
    assert incomplete.returncode == 2 and "[auth] has no client_id" in incomplete.stderr, incomplete.stderr
    typo = run_cli([sys.executable, str(LAUNCHER), "--server.adress", "0.0.0.0"], env=env,
                          capture_output=True, text=True, timeout=60)
    assert typo.returncode == 2 and "--server.adress" in typo.stderr, typo.stderr


def test_the_launcher_runs_the_studio_with_the_same_flags(tmp_path: Path) -> None:
    port = free_port()
    log = tmp_path / "studio.log"
    env = {**_launcher_env(tmp_path), "OMNI_STUDIO_DATA_DIR": str(tmp_path / "data"), "OMNI_STUDIO_CONFIG": ""}
    with open(log, "wb") as out:
        proc = spawn(str(LAUNCHER), ["--server.address", "127.0.0.1", "--server.port", str(port),
                                     "--server.headless", "true", "--browser.gatherUsageStats", "false"],
                     name="the studio launcher", env=env, stdout=out)
        try:
            wait_http_ok(f"http://127.0.0.1:{port}/_stcore/health", proc, timeout=60, what="the studio",
                         log_tail=lambda: log.read_text(errors="replace")[-2000:])
            with httpx.Client(trust_env=False) as http:
                assert "<title>Streamlit</title>" in http.get(f"http://127.0.0.1:{port}/").text
        finally:
            proc.terminate()
            proc.wait(15)
    assert "no sign-in; listening on 127.0.0.1 only" in log.read_text()
