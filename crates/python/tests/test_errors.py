"""Exceptions carry the problem document's code, status and detail."""

from __future__ import annotations

from pathlib import Path

import pytest

import switchboard
from conftest import Server, closed_port_url


def test_a_bad_token_raises_api_error_unauthorized(server: Server, names, tmp_path: Path) -> None:
    name = next(names)
    server.create_agent(name)
    agent = switchboard.Agent(server=server.url, token="sb_not_a_token", state=tmp_path, name=name)
    with pytest.raises(switchboard.ApiError) as raised:
        agent.run(lambda event: None)
    assert (raised.value.status, raised.value.code, raised.value.kind) == (401, "unauthorized", "api")
    assert "sb_not_a_token" not in str(raised.value), "the token never appears in errors"
    agent.close()


def test_run_needs_a_name(tmp_path: Path) -> None:
    with switchboard.Agent(server=closed_port_url(), token="t", state=tmp_path) as agent:
        with pytest.raises(ValueError, match="name"):
            agent.run(lambda event: None)


def test_an_unusable_server_url_is_an_api_error(tmp_path: Path) -> None:
    with pytest.raises(switchboard.ApiError) as raised:
        switchboard.Agent(server="not a url", token="t", state=tmp_path)
    assert raised.value.kind == "invalid_url"
    assert raised.value.code is None


def test_the_exception_tree() -> None:
    assert issubclass(switchboard.DeliveryRefused, switchboard.ApiError)
    for name in ("ApiError", "PrivacyRefused", "OutboxFull", "MessageTooLarge",
                 "FlushTimeout", "LocalStateError"):
        assert issubclass(getattr(switchboard, name), switchboard.SwitchboardError)
    assert issubclass(switchboard.PrivacyRefused, ValueError)
    assert issubclass(switchboard.FlushTimeout, TimeoutError)
    assert issubclass(switchboard.LocalStateError, OSError)
