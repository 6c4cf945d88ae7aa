"""Studio settings: environment over studio.toml over defaults, and one ConfigError naming the setting and where
it was read (the variable, or the file) for everything that is wrong."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from protocol.errors import ConfigError
from services.settings import DEFAULT_CONFIG_FILE, ENV_PREFIX, IceServer, Settings, load_settings


@pytest.fixture(autouse=True)
def _clean(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """No OMNI_STUDIO_ variable of the caller's shell, and a working folder without a studio.toml."""
    for name in list(os.environ):
        if name.upper().startswith(ENV_PREFIX):
            monkeypatch.delenv(name)
    monkeypatch.chdir(tmp_path)


def _toml(folder: Path, text: str | bytes, name: str = DEFAULT_CONFIG_FILE) -> Path:
    path = folder / name
    path.write_bytes(text.encode() if isinstance(text, str) else text)
    return path


def _error(**kwargs) -> str:
    with pytest.raises(ConfigError) as err:
        load_settings(**kwargs)
    return str(err.value)


def test_defaults_without_environment_or_file() -> None:
    s = load_settings(environ={})
    assert s == Settings() and s.backend == "offline" and s.model_fields_set == set()
    assert s.data_dir == Path(".studio-data") and s.ice_servers == [] and s.connect_timeout_s == 10.0


def test_environment_over_toml_over_defaults(tmp_path: Path) -> None:
    _toml(tmp_path, 'region = "us-west-2"\nconnect_timeout_s = 3\nbackend = "server"\n'
                    'server_url = "http://gpu-box:8091/"\n')
    s = load_settings(environ={"OMNI_STUDIO_REGION": "eu-west-1", "OMNI_STUDIO_DATA_DIR": "/srv/studio",
                               "OMNI_STUDIO_REQUEST_TIMEOUT_S": "30", "OMNI_STUDIO_PROFILE": ""})
    assert s.region == "eu-west-1"  # the environment wins
    assert s.connect_timeout_s == 3.0 and s.backend == "server" and s.server_url == "http://gpu-box:8091"  # the file
    assert s.data_dir == Path("/srv/studio") and s.request_timeout_s == 30.0  # typed from strings
    assert s.profile is None and s.prefix == "omni-studio"  # empty variable: unset; never set: the default
    assert s.model_fields_set == {"region", "connect_timeout_s", "backend", "server_url", "data_dir",
                                  "request_timeout_s"}


def test_os_environ_is_read_when_no_environment_is_given(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OMNI_STUDIO_BACKEND", "sagemaker")
    assert load_settings().backend == "sagemaker"
    assert Settings().backend == "offline"  # Settings(...) alone: its arguments over the defaults, no environment


def test_the_file_named_by_omni_studio_config_is_read_instead_of_studio_toml(tmp_path: Path) -> None:
    _toml(tmp_path, 'region = "from-default-file"\n')
    named = _toml(tmp_path, 'region = "from-named-file"\n', "elsewhere.toml")
    assert load_settings(environ={"OMNI_STUDIO_CONFIG": str(named)}).region == "from-named-file"
    assert load_settings(environ={}).region == "from-default-file"
    assert load_settings(environ={}, config_file=named).region == "from-named-file"
    assert load_settings(environ={"OMNI_STUDIO_CONFIG": ""}).region == "us-east-1"  # set empty: no file at all


def test_ice_servers_from_environment_json_and_from_toml(tmp_path: Path) -> None:
    env = {"OMNI_STUDIO_ICE_SERVERS": '[{"urls": "stun:stun.example.org:3478"}, '
                                      '{"urls": ["turn:t.example.org:3478"], "username": "u", "credential": "c"}]'}
    s = load_settings(environ=env)
    assert s.ice_servers == [IceServer(urls="stun:stun.example.org:3478"),
                             IceServer(urls=["turn:t.example.org:3478"], username="u", credential="c")]
    _toml(tmp_path, '[[ice_servers]]\nurls = "stun:from-file:3478"\n')
    assert load_settings(environ={}).ice_servers == [IceServer(urls="stun:from-file:3478")]
    assert load_settings(environ=env).ice_servers[0].urls == "stun:stun.example.org:3478"  # environment wins


def test_with_overrides_validates_and_keeps_unset_fields_default() -> None:
    base = load_settings(environ={"OMNI_STUDIO_REGION": "eu-west-1"})
    s = base.with_overrides(backend="server", server_url="http://h:1/", profile=None)
    assert (s.backend, s.server_url, s.region, s.profile) == ("server", "http://h:1", "eu-west-1", None)
    assert s.model_fields_set == {"backend", "server_url", "region"}
    with pytest.raises(ConfigError, match="server_url.*http:// or https://"):
        base.with_overrides(server_url="gpu-box:8091")


# ---------------------------------------------------------------------------------------------------------
# The server's former names (backend "omni", omni_url, OMNI_STUDIO_OMNI_URL): still read, as today's.
def test_a_studio_toml_written_with_the_former_names_still_reads(tmp_path: Path) -> None:
    _toml(tmp_path, 'backend = "omni"\nomni_url = "http://gpu-box:8091/"\n')
    s = load_settings(environ={})
    assert (s.backend, s.server_url) == ("server", "http://gpu-box:8091")
    assert s.model_fields_set == {"backend", "server_url"}


def test_an_environment_with_the_former_names_still_reads() -> None:
    s = load_settings(environ={"OMNI_STUDIO_BACKEND": "omni", "OMNI_STUDIO_OMNI_URL": "http://h:1/"})
    assert (s.backend, s.server_url) == ("server", "http://h:1")
    text = _error(environ={"OMNI_STUDIO_OMNI_URL": "gpu-box:8091"})  # a bad value is named as it was written
    assert "OMNI_STUDIO_OMNI_URL (environment variable)" in text and "http://" in text


def test_both_names_in_one_place_must_agree_and_the_environment_still_wins(tmp_path: Path) -> None:
    text = _error(environ={"OMNI_STUDIO_OMNI_URL": "http://a:1", "OMNI_STUDIO_SERVER_URL": "http://b:1"})
    assert "OMNI_STUDIO_OMNI_URL and OMNI_STUDIO_SERVER_URL (environment variables) differ" in text
    assert "keep OMNI_STUDIO_SERVER_URL only" in text
    env = {"OMNI_STUDIO_OMNI_URL": "http://a:1/", "OMNI_STUDIO_SERVER_URL": "http://a:1"}  # the same server
    assert load_settings(environ=env).server_url == "http://a:1"
    path = _toml(tmp_path, 'omni_url = "http://a:1"\nserver_url = "http://b:1"\n')
    text = _error(environ={})
    assert f"omni_url and server_url in {path} differ" in text
    _toml(tmp_path, 'omni_url = "http://from-file:1"\n')  # an old file, a new variable: the usual precedence
    assert load_settings(environ={"OMNI_STUDIO_SERVER_URL": "http://from-env:1"}).server_url == "http://from-env:1"
    assert load_settings(environ={"OMNI_STUDIO_OMNI_URL": "http://old-env:1"}).server_url == "http://old-env:1"


def test_former_names_in_code_and_overrides_read_as_todays() -> None:
    s = Settings(backend="omni", omni_url="http://h:1")
    assert (s.backend, s.server_url) == ("server", "http://h:1")
    assert s.with_overrides(omni_url="http://other:2").server_url == "http://other:2"  # an override, not a clash
    with pytest.raises(ConfigError, match="omni_url and server_url"):
        Settings(omni_url="http://a:1", server_url="http://b:1")


# ---------------------------------------------------------------------------------------------------------
# Bad settings: one message naming the setting and where it was read.
def test_a_bad_environment_value_names_the_variable() -> None:
    text = _error(environ={"OMNI_STUDIO_BACKEND": "bogus"})
    assert "OMNI_STUDIO_BACKEND (environment variable)" in text and "'bogus'" in text
    assert "'offline', 'server' or 'sagemaker'" in text
    text = _error(environ={"OMNI_STUDIO_CONNECT_TIMEOUT_S": "-1"})
    assert "OMNI_STUDIO_CONNECT_TIMEOUT_S (environment variable)" in text and "greater than 0" in text
    text = _error(environ={"OMNI_STUDIO_SERVER_URL": "gpu-box:8091"})
    assert "OMNI_STUDIO_SERVER_URL (environment variable)" in text and "http://" in text


def test_ice_servers_that_are_not_json_name_the_variable() -> None:
    text = _error(environ={"OMNI_STUDIO_ICE_SERVERS": "stun:stun.example.org:3478"})
    assert "OMNI_STUDIO_ICE_SERVERS" in text and "must be JSON" in text and '[{"urls": ' in text
    text = _error(environ={"OMNI_STUDIO_ICE_SERVERS": '[{"url": "stun:x:3478"}]'})  # JSON, but no urls
    assert "OMNI_STUDIO_ICE_SERVERS[0].urls (environment variable)" in text


def test_a_bad_file_value_names_the_key_and_the_file(tmp_path: Path) -> None:
    path = _toml(tmp_path, 'backend = "bogus"\nbackand = "omni"\n')
    text = _error(environ={})
    assert f"backend in {path}" in text and "'bogus'" in text
    assert f"backand in {path}: not a studio setting" in text  # a misspelt key is not silently ignored
    text = _error(environ={"OMNI_STUDIO_BACKEND": "also-bogus"})  # each problem where it was read
    assert "OMNI_STUDIO_BACKEND (environment variable)" in text and "'also-bogus'" in text


def test_malformed_toml_names_the_file(tmp_path: Path) -> None:
    path = _toml(tmp_path, 'backend = "omni\n')
    text = _error(environ={})
    assert f"settings file {path} is not valid TOML" in text


def test_toml_that_is_not_utf8_names_the_file(tmp_path: Path) -> None:
    path = _toml(tmp_path, 'region = "caf\xe9"\n'.encode("latin-1"))
    text = _error(environ={})
    assert f"settings file {path} is not UTF-8" in text
    named = _toml(tmp_path, b"\xff\xfe" + 'region = "x"\n'.encode("utf-16-le"), "utf16.toml")
    assert f"settings file {named} is not UTF-8" in _error(environ={"OMNI_STUDIO_CONFIG": str(named)})


def test_omni_studio_config_naming_a_missing_file_or_a_folder_is_an_error(tmp_path: Path) -> None:
    _toml(tmp_path, 'region = "not-this-one"\n')  # not read instead
    missing = tmp_path / "typo.toml"
    text = _error(environ={"OMNI_STUDIO_CONFIG": str(missing)})
    assert f"OMNI_STUDIO_CONFIG names {missing}, which does not exist" in text
    folder = tmp_path / "conf"
    folder.mkdir()
    text = _error(environ={"OMNI_STUDIO_CONFIG": str(folder)})
    assert f"OMNI_STUDIO_CONFIG names {folder}, which is a folder" in text
    assert "does not exist" in _error(environ={}, config_file=missing)
    assert "is a folder" in _error(environ={}, config_file=folder)


def test_no_default_studio_toml_is_fine_and_a_folder_of_that_name_is_not_read(tmp_path: Path) -> None:
    assert load_settings(environ={}).backend == "offline"
    (tmp_path / DEFAULT_CONFIG_FILE).mkdir()
    assert load_settings(environ={}).backend == "offline"


def test_the_database_url_is_empty_for_sqlite_in_the_data_dir_or_a_postgresql_url(tmp_path: Path) -> None:
    assert load_settings(environ={}).database_url == ""
    url = "postgresql://studio:secret@db.example:5432/omni"
    assert load_settings(environ={"OMNI_STUDIO_DATABASE_URL": url}).database_url == url
    assert load_settings(environ={"OMNI_STUDIO_DATABASE_URL": "postgresql://me@/omni?host=/run/pg"}).database_url
    assert load_settings(config_file=_toml(tmp_path, f'database_url = "{url}"')).database_url == url


@pytest.mark.parametrize(("url", "says"), [
    ("mysql://me@db/omni", "PostgreSQL (postgresql://…) or SQLite (sqlite:///path), not mysql://"),
    ("postgresql://me@db:5432/", "the URL names no database"),
    ("db.example:5432/omni", "not a database URL"),
])
def test_a_bad_database_url_names_the_setting(url: str, says: str) -> None:
    message = _error(environ={"OMNI_STUDIO_DATABASE_URL": url})
    assert message.startswith("invalid studio setting: OMNI_STUDIO_DATABASE_URL (environment variable): ")
    assert says in message
