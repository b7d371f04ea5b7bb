"""The local Label Studio server: a real one, started and stopped by a fixture."""

from __future__ import annotations

from pathlib import Path

import pytest
from label_studio_sdk import LabelStudio

from conftest import free_port
from tqaforge.annotation.labelstudio.server import LabelStudioError, LabelStudioSettings, start_server


def test_preset_account_token_works_and_data_persist(label_studio) -> None:
    client = LabelStudio(base_url=label_studio.url, api_key=label_studio.token)
    project = client.projects.create(
        title="smoke", label_config='<View><Text name="t" value="$text"/><Choices name="c" toName="t"><Choice value="a"/></Choices></View>'
    )
    titles = [p.title for p in client.projects.list()]
    assert "smoke" in titles
    client.projects.delete(id=project.id)


def test_wrong_token_is_refused(label_studio) -> None:
    client = LabelStudio(base_url=label_studio.url, api_key="0" * 40)
    with pytest.raises(Exception) as info:
        list(client.projects.list())
    assert "401" in str(info.value)


def test_a_second_server_on_the_same_port_is_refused(label_studio, tmp_path: Path) -> None:
    with pytest.raises(LabelStudioError, match="already answers"):
        start_server(LabelStudioSettings(data_dir=tmp_path, port=label_studio.settings.port))


def test_missing_installation_says_how_to_install(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(LabelStudioError) as info:
        start_server(LabelStudioSettings(data_dir=tmp_path / "d", venv=tmp_path / "nowhere", port=free_port()))
    assert "make labelstudio" in (info.value.hint or "")
