"""Every command of the README walkthrough runs, as written, on a fresh workspace.

The first ``bash`` block under "## Walkthrough" is run as one bash script (``set -e``) in a
scratch directory that holds the shipped ``data/`` and ``.venv`` as the README's checkout would.
The ids in it are the real content-hash ids of the shipped demo data, so they must resolve. Two
things are changed: the ``export OPENAI_BASE_URL=...`` line is pointed at a loopback
OpenAI-compatible server with scripted replies (no model can be reached here), and
``tqaforge labelstudio start`` becomes the run's Label Studio (see the test).
"""

from __future__ import annotations

import json
import os
import re
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
from openai_server import OpenAIServer
from test_answers import method_of, say
from test_generation import model_reply

REPO = Path(__file__).resolve().parents[1]
README = REPO / "README.md"
README_ENDPOINT = "http://127.0.0.1:8000/v1"
README_LS_START = "tqaforge labelstudio start "


def walkthrough_script() -> str:
    """The first ```bash block after the "## Walkthrough" heading."""
    text = README.read_text(encoding="utf-8")
    section = text.split("\n## Walkthrough", 1)[1]
    match = re.search(r"```bash\n(.*?)```", section, re.S)
    assert match, "README: no ```bash block under ## Walkthrough"
    return match.group(1)


def scripted_model(body: dict) -> str:
    """Question generation and verification as tests/test_generation scripts them; question
    typing answers "reasoning, count" (a valid reply for any question); the answering agents
    all say 3, each in its method's form (PoT as a program that prints it)."""
    prompt = body["messages"][0]["content"]
    if prompt.startswith("You sort the questions"):
        return json.dumps({"operations": ["count"], "type": "reasoning"})
    if prompt.startswith("You are a careful table analyst"):
        return say(method_of(prompt), "3")
    return model_reply(body)


def test_every_walkthrough_command_runs(tmp_path: Path) -> None:
    """New user: the README walkthrough named ids and files that did not exist. Every line runs as
    written, `labelstudio start` included: ana's and ben's own servers start (in parallel), the
    pushes go to each one's server, and they are stopped at the end."""
    script = walkthrough_script()
    assert README_ENDPOINT in script, "the walkthrough should show where the endpoint is set"
    assert README_LS_START in script
    (tmp_path / "data").symlink_to(REPO / "data")
    (tmp_path / ".venv").symlink_to(Path(sys.prefix))
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TQAFORGE_", "OPENAI_"))}
    env.update(COLUMNS="120", PATH=f"{Path(sys.executable).parent}:{env.get('PATH', '')}")
    try:
        with OpenAIServer(scripted_model) as server:
            body = script.replace(README_ENDPOINT, server.url)
            result = subprocess.run(
                ["bash", "-c", "set -euo pipefail -x\n" + body], cwd=tmp_path, env=env,
                capture_output=True, text=True, timeout=900,
            )
            assert result.returncode == 0, f"walkthrough failed:\n{result.stderr[-4000:]}\n{result.stdout[-3000:]}"
            assert server.total_paid > 0, "the generation commands reached the endpoint"
    finally:
        if (tmp_path / "mybench").exists():
            subprocess.run([sys.executable, "-m", "tqaforge", "--workspace", str(tmp_path / "mybench"), "labelstudio", "stop"],
                           env=env, capture_output=True, timeout=120)
    assert "Traceback" not in result.stderr
    assert (tmp_path / "mybench" / "tqaforge.db").exists()
    # Issue 27: the walkthrough begins with a path that needs no model (the run's environment has no
    # OPENAI_* variable until the export line): probes, review, variants, a release, and the shipped
    # probe predictions scored on it, 10 of the 12 probes right.
    model_free = script.split("export OPENAI_BASE_URL", 1)[0]
    for step in ("generate probes", "questions review", "variants build", "release build", "evaluate --release"):
        assert f"tqaforge {step}" in model_free, step
    assert re.search(r"probe-rule/DP - base\n(?:.*\n)*?\s+Overall\s+12 EM\s+83\.33", result.stdout), result.stdout[-3000:]
    assert re.search(r"ana@lab\.org \(Ana Lopez\) gets a Label Studio server of their own: http://127\.0\.0\.\d+:\d+",
                     result.stdout), result.stdout[-3000:]
    assert re.search(r"question_review: \d+ items pending, 2 annotators each; [1-9]\d* task copies imported", result.stdout), \
        result.stdout[-3000:]
    assert re.search(r"ana@lab\.org.*question_review", result.stdout), result.stdout[-3000:]
    assert "no annotators yet" not in result.stdout
    # Issue 25: the walkthrough's `--model gpt-4o-mini --max-cost ...` once ran uncounted ("cost
    # $0.0000"): the model had no price. genai-prices knows it, so every call is charged at
    # OpenAI's price and the budget holds something.
    with sqlite3.connect(tmp_path / "mybench" / "tqaforge.db") as db:
        calls = db.execute("SELECT model, price_input, price_output, price_source, cost FROM llm_calls").fetchall()
    assert calls and {c[:3] for c in calls} == {("gpt-4o-mini", 0.15, 0.6)}, calls[:3]
    assert all(c[3].startswith("genai-prices ") and c[3].endswith(": openai gpt-4o-mini") and c[4] > 0 for c in calls)


@pytest.mark.parametrize("line", [ln for ln in walkthrough_script().splitlines() if ln.startswith("tqaforge ")])
def test_walkthrough_commands_exist(line: str) -> None:
    """Each `tqaforge ...` line names a real command (its --help works), so a renamed command
    is caught with the line that names it."""
    words = line.split("#", 1)[0].split()
    path = []
    for w in words[1:]:
        if w.startswith("-") or not re.fullmatch(r"[a-z]+", w):
            break
        path.append(w)
    result = subprocess.run([sys.executable, "-m", "tqaforge", *path[:2], "--help"], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
