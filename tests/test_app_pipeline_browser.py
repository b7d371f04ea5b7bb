"""The whole pipeline from the app alone, in headless Chromium (issue 29, first "Must show"): no
CLI call and no library call does a step; the library is read only to assert what each step left
in the store or on disk.

Setup (library, as ``tqaforge init`` would): a fresh SQLite workspace, the person "researcher"
(the Review and Agreement pages' default name) registered, two Label Studio accounts (ana, ben)
signed up on the run's shared Label Studio, and the workspace's ``label-studio`` directory linked
to that server's (so the app sees a running server of its own without a 40-90 s start). The app is
started with ``running_app`` and the endpoint variables pointing at the loopback scripted server.

Then, clicks only: Tables (upload a CSV with decimal commas) -> Generate (a question round) ->
Review (the table beside each question; accept) -> Generate's answer tab (answer, vote, route) ->
Annotation (push answer_verification to ana and ben) -> the two annotators label through Label
Studio's API with their own tokens (they disagree once) -> Annotation (pull) -> Agreement (apply the
rules: a button added for this test, then decide the disagreement queued) -> Releases (build, verify every file) -> Evaluations (score two predictions
files written from the release's rows, compare them)."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from browser import click_button, click_element, running_app, type_keys, wait_for_text, wait_until
from conftest import start_chrome, wait_for
from labelstudio_helpers import annotate, choice, new_email, signup, text
from openai_server import OpenAIServer
from sqlmodel import select
from test_answers import method_of, say
from test_generation import model_reply

from tqaforge.annotation.adjudication import adjudication_queue
from tqaforge.people import register
from tqaforge.schemas.enums import QuestionStatus
from tqaforge.schemas.records import Adjudication, Annotation, LabelStudioTaskCopy, Question, TableRecord
from tqaforge.store import init_workspace

MESSY = Path(__file__).resolve().parent / "data" / "realworld" / "german_decimal_comma.csv"
ANSWER = "3"
MODEL = "pipeline-model"


def scripted(body: dict[str, Any]) -> str:
    """Generation and its verification as test_generation scripts them; every answering agent says 3."""
    prompt = body["messages"][0]["content"]
    if prompt.startswith("You are a careful table analyst"):
        return say(method_of(prompt), ANSWER)
    return model_reply(body)


def _body(driver) -> str:
    from selenium.webdriver.common.by import By

    return str(driver.find_element(By.TAG_NAME, "body").text)


def _pick(driver, label: str, option: str, timeout: float = 60) -> None:
    """Choose ``option`` in the selectbox labelled ``label``: type it in its combobox, click the option."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys

    box = f'[data-testid="stSelectbox"] input[role="combobox"][aria-label="{label}"]'
    click_element(driver, By.CSS_SELECTOR, box, f"the selectbox {label!r}", timeout, center=True)
    type_keys(driver, By.CSS_SELECTOR, box, f"the selectbox {label!r}", [(Keys.CONTROL, "a"), (option,)], timeout)
    click_element(driver, By.XPATH, f"//*[@role='option'][normalize-space()='{option}']", f"the option {option!r}", timeout)
    wait_until(driver, lambda d: d.find_element(By.CSS_SELECTOR, box).get_attribute("value") == option,
               f"{option!r} chosen in {label!r}", timeout)


def _type(driver, label: str, value: str, enter: bool = True, timeout: float = 60) -> None:
    """Type ``value`` in the text input whose label starts with ``label`` (no quote in it). Enter
    commits it to Streamlit; in a form, Enter would submit the form: there the caller passes
    ``enter=False`` and clicks the form's button (which sends every field of it)."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys

    where = f"//div[@data-testid='stTextInput'][.//label[starts-with(normalize-space(), '{label}')]]//input"
    type_keys(driver, By.XPATH, where, f"the text input {label!r}",
              [(Keys.CONTROL, "a"), (Keys.DELETE,), (value, *((Keys.ENTER,) if enter else ()))], timeout)


def _tab(driver, name: str, timeout: float = 60) -> None:
    from selenium.webdriver.common.by import By

    where = f"//*[@role='tab'][contains(., '{name}')]"
    tab = wait_until(driver, lambda d: next(iter(d.find_elements(By.XPATH, where)), None), f"the tab {name!r}", timeout)
    driver.execute_script("arguments[0].click();", tab)
    wait_until(driver, lambda d: d.find_element(By.XPATH, where).get_attribute("aria-selected") == "true",
               f"the tab {name!r} selected", timeout)


def _upload(driver, path: Path, nth: int = 0, timeout: float = 60) -> None:
    from selenium.webdriver.common.by import By

    def sent(d: Any) -> bool:  # inside the wait: an uploader re-rendered under the test is found again
        inputs = d.find_elements(By.CSS_SELECTOR, "input[type=file]")
        if len(inputs) <= nth:
            return False
        inputs[nth].send_keys(str(path))
        return True
    wait_until(driver, sent, "the file uploader", timeout)
    # The uploader lists the file once it holds it (its name shortened in the middle: not waited on).
    wait_until(driver, lambda d: d.find_elements(By.CSS_SELECTOR, '[data-testid="stFileChip"]')
               and not d.find_elements(By.CSS_SELECTOR, '[data-testid="stFileChipIconSpinner"]'), "the uploaded file's chip", timeout)


def test_the_whole_pipeline_from_the_app_alone(label_studio, tmp_path: Path, chromium) -> None:
    # 1. Setup (library, as `tqaforge init` would; see the module's docstring).
    ws = init_workspace(tmp_path / "ws", name="e2e")
    register(ws, "researcher")
    ana, ben = new_email("e2e-ana"), new_email("e2e-ben")
    tokens = {who: signup(label_studio.url, label_studio.token, who)[1] for who in (ana, ben)}
    # The run's shared server as this workspace's own (status reads its pid file and login there).
    (ws.root / "label-studio").symlink_to(label_studio.root / "label-studio")

    with OpenAIServer(scripted) as llm:
        env = {**os.environ, "TQAFORGE_WORKSPACE": str(ws.root), "OPENAI_BASE_URL": llm.url,
               "OPENAI_API_KEY": "sk-test", "TQAFORGE_LLM_MODEL": MODEL}
        env.pop("TQAFORGE_DATABASE_URL", None)
        with running_app(env) as url:
            driver = start_chrome(chromium, tmp_path / "profile", window="1400,2000")
            try:
                _drive(driver, url, ws, tmp_path, label_studio.url, tokens)
            except Exception:
                print("the page when the test failed:\n" + _body(driver))  # pytest shows it with the failure
                raise
            finally:
                driver.quit()


def _drive(driver, url: str, ws, tmp_path: Path, ls_url: str, tokens: dict[str, str]) -> None:
    from selenium.webdriver.common.by import By

    ana, ben = sorted(tokens)

    # 2. Tables: upload the CSV with decimal commas; the summary names the new table.
    driver.get(url + "tables")
    wait_for_text(driver, "Import files")
    click_element(driver, By.XPATH, "//summary[.//p[starts-with(normalize-space(), 'Import files')]]", "Import files")
    _upload(driver, MESSY)
    click_button(driver, "import")
    wait_for(lambda: _tables(ws), 120, "the uploaded table to reach the store")
    (table,) = _tables(ws)
    wait_for_text(driver, table.id[:12])
    assert table.n_rows == 3 and table.numeric_share > 0.5, table  # 1.234,5 read as a number, not as text

    # 3. Generate: one question round on it.
    driver.get(url + "generate")
    wait_for_text(driver, "generate questions", MODEL)
    click_button(driver, "generate questions")
    wait_for(lambda: len(_questions(ws, QuestionStatus.PROPOSED)) >= 2, 120, "proposed questions")
    wait_for_text(driver, "cost $", timeout=120)  # the round's summary
    proposed = _questions(ws, QuestionStatus.PROPOSED)
    assert {q.table_id for q in proposed} == {table.id}

    # 4. Review: the table is shown beside the question; accept two.
    driver.get(url + "review")
    wait_for_text(driver, "proposed questions", f"table {table.id[:12]}: showing 3 of 3 rows and 4 of 4 columns")
    # Each question's card holds its table as a data grid (drawn on a canvas: its cells are in the
    # grid's accessible copy, read through textContent, not in the visible text).
    wait_until(driver, lambda d: len(d.find_elements(By.CSS_SELECTOR, '[data-testid="stDataFrame"]')) >= len(proposed),
               "a table beside each proposed question", 60)
    wait_until(driver, lambda d: "Kirschen" in d.execute_script("return document.body.textContent"), "a cell of the table", 60)
    for n in range(2):
        click_button(driver, "accept")
        wait_for(lambda n=n: len(_questions(ws, QuestionStatus.ACCEPTED)) == n + 1, 60, "the decision to reach the store")
        wait_for_text(driver, f"of {len(proposed) - n - 1} proposed questions")
    accepted = _questions(ws, QuestionStatus.ACCEPTED)
    assert len(accepted) == 2

    # 5. Answers: every agent answers the accepted questions; votes route them to people.
    driver.get(url + "generate")
    wait_for_text(driver, "Answer annotation")
    _tab(driver, "Answer annotation")
    click_button(driver, "answer, vote and route")
    wait_for_text(driver, "2 questions voted", "to people for verification: 2", timeout=120)
    assert _answers(ws) >= 2

    # 6. Annotation: push answer verification to ana and ben; they label in Label Studio; pull.
    driver.get(url + "annotation")
    wait_for_text(driver, "Label Studio runs at", "Push and pull")
    _pick(driver, "kind", "answer_verification")
    _type(driver, "annotators (Label Studio logins", f"{ana},{ben}", enter=False)
    click_button(driver, "push to Label Studio")
    wait_for(lambda: len(_copies(ws)) == 4, 120, "four task copies (2 questions x 2 annotators)")
    copies = _copies(ws)
    assert {c.annotator for c in copies} == {ana, ben}
    disputed = sorted(c.task_id for c in copies)[0]
    for c in copies:
        if c.annotator == ben and c.task_id == disputed:  # ben disagrees on one item
            result = [choice("decision", "answer", "incorrect"), text("corrected_answer", "answer", "4")]
        else:
            result = [choice("decision", "answer", "correct")]
        annotate(ls_url, tokens[c.annotator], c.ls_task_id, result)
    click_button(driver, "pull every label")
    wait_for(lambda: _labels(ws) == 4, 120, "the four labels to be pulled")

    # 7. Agreement: the rules decide the unanimous item and queue the disagreement; a person decides it.
    driver.get(url + "agreement")
    wait_for_text(driver, "Adjudication queue")
    assert adjudication_queue(ws).total == 0  # nothing queued before the rules run (the button below does it)
    click_button(driver, "apply the rules to new labels")
    wait_for_text(driver, "answer_verification: 1 unanimous, 0 by rule, 1 open", disputed[:12], timeout=120)
    assert adjudication_queue(ws).total == 1
    click_button(driver, "decide")
    wait_for(lambda: adjudication_queue(ws).total == 0, 60, "the decision to reach the store")
    with ws.session() as s:
        decided = s.exec(select(Adjudication).where(Adjudication.task_id == disputed)).one()
    assert decided.decided_by == "researcher", decided

    # 8. Releases: build, then verify every file.
    driver.get(url + "releases")
    wait_for_text(driver, "build the release")
    # Two items, one disagreement: agreement is below any threshold, so the build needs a reason.
    _type(driver, "accept agreement below the threshold", "two items in an end-to-end test", enter=False)
    click_button(driver, "build the release")
    body = wait_for_text(driver, "verify every file", timeout=120)
    release = ws.root / "releases"
    manifests = list(release.glob("*/manifest.json"))
    assert len(manifests) == 1, body
    click_button(driver, "verify every file")
    wait_for_text(driver, "files match the manifest")

    # 9. Evaluations: two predictions files from the release's rows, scored, then compared.
    rows = [json.loads(line) for line in (manifests[0].parent / "data" / "base.jsonl").read_text().splitlines()]
    good, bad = tmp_path / "system-good.jsonl", tmp_path / "system-bad.jsonl"
    assert len(rows) == 2, rows  # the two accepted questions, with the gold the people settled
    for path, right in ((good, True), (bad, False)):
        path.write_text("".join(json.dumps({"id": r["id"], "model_name": path.stem, "instruction_type": "DP",
                                            "prediction": f"Final Answer: {r['answer_text'] if right else 'no idea'}"}) + "\n"
                                for r in rows))
    driver.get(url + "evaluations")
    for predictions in (good, bad):
        wait_for_text(driver, "Score a predictions file")
        _type(driver, "or its path on this machine", str(predictions))
        click_button(driver, "score")
        wait_for(lambda stem=predictions.stem: stem in _scored(ws), 120, f"{predictions.name} scored")
    scored = _scored(ws)
    assert scored == {"system-good": [100.0], "system-bad": [0.0]}, scored  # each file scored against the gold
    driver.get(url + "evaluations")
    body = wait_for_text(driver, "Compare systems", "system-good", "system-bad")
    # Both picked by default and set side by side: the paired test's table, or why there is none.
    wait_until(driver, lambda d: any(t in _body(d) for t in ("Paired comparisons of 2 systems", "No significance test")),
               "the comparison of the two systems", 120)

    # Control: the same Verify button sees a changed file (so its "match" above is a check).
    with (manifests[0].parent / "data" / "base.jsonl").open("a", encoding="utf-8") as changed:
        changed.write("\n")
    driver.get(url + "releases")
    click_button(driver, "verify every file")
    wait_for_text(driver, "does NOT match its manifest", "changed: data/base.jsonl")


def _scored(ws) -> dict[str, list[float]]:
    """The saved evaluations of the workspace, by predictions file name: their overall scores (normalised)."""
    from tqaforge.evaluate.harness import saved_evaluations

    return {saved.predictions: [row["normalised"] for row in saved.summary_rows() if row["level"] == "overall"]
            for saved in saved_evaluations(ws.root / "evaluations")}


def _tables(ws) -> list[TableRecord]:
    with ws.session() as s:
        return list(s.exec(select(TableRecord)).all())


def _questions(ws, status: QuestionStatus) -> list[Question]:
    with ws.session() as s:
        return list(s.exec(select(Question).where(Question.status == status.value)).all())


def _answers(ws) -> int:
    from tqaforge.schemas.records import Answer

    with ws.session() as s:
        return len(s.exec(select(Answer)).all())


def _copies(ws) -> list[LabelStudioTaskCopy]:
    with ws.session() as s:
        return list(s.exec(select(LabelStudioTaskCopy).where(LabelStudioTaskCopy.kind == "answer_verification")).all())


def _labels(ws) -> int:
    with ws.session() as s:
        return len(s.exec(select(Annotation).where(Annotation.source == "labelstudio")).all())
