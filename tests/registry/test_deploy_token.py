"""`manage.py deploy`'s admin token: --token (in `ps` for every user of the machine), --token-file / TRAWL_TOKEN_FILE,
or TRAWL_TOKEN."""

from __future__ import annotations

import pytest
from django.core.management import CommandError

from registry.management.commands.deploy import Command, _token


def options(**given) -> dict:
    parser = Command().create_parser("manage.py", "deploy")
    return {**vars(parser.parse_args([])), **given}


def test_the_token_comes_from_a_file(tmp_path, monkeypatch):
    monkeypatch.setenv("TRAWL_TOKEN", "from-env")
    (tmp_path / "token").write_text("from-file\n")

    assert _token(options(token_file=str(tmp_path / "token"))) == "from-file"


def test_else_from_trawl_token_and_the_command_line_wins(monkeypatch):
    monkeypatch.setenv("TRAWL_TOKEN", "from-env")

    assert _token(options()) == "from-env"
    assert _token(options(token="-from-argv")) == "-from-argv"


def test_trawl_token_file_is_the_files_default(tmp_path, monkeypatch):
    (tmp_path / "token").write_text("from-file")
    monkeypatch.setenv("TRAWL_TOKEN_FILE", str(tmp_path / "token"))

    assert _token(options()) == "from-file"


def test_an_unreadable_file_is_named(tmp_path):
    with pytest.raises(CommandError, match="--token-file: cannot read"):
        _token(options(token_file=str(tmp_path / "missing")))
