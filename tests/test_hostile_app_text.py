"""Markdown injection in the app (issue 23, item 15): data is shown as text.

Question text, gold answers, model replies and program output, table headers, annotator names,
file and directory names, the workspace name, a model name and error messages that quote data
hold an image link to a loopback HTTP server run by the test, raw HTML, a ``javascript:`` link,
Streamlit's ``:red[...]`` directive, ``$math$``, backticks that would close a code span, a line
that would start a heading, and control characters.

* AppTest renders every page on a workspace staged in every stage plus that data: no Markdown body
  of any element (markdown, captions, alerts, headings, expander labels, widget labels, image
  captions) parses, by CommonMark (markdown-it), to an image, a link or HTML, nor holds an
  unescaped directive or math; and the data is shown (its literal text is in what renders).
* Headless Chromium loads the real app and the loopback server counts requests: none arrive, and
  no ``<img>`` points at it. Control: the same question text put raw into ``st.markdown`` by a
  page of the test's own makes Chromium fetch the image from that server.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import threading
import urllib.request
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Iterator

import pytest
from app_demo import page_runner, stage_everything
from browser import app_settled, page_text, wait_for_text, wait_until
from conftest import free_port, start_chrome, wait_for
from hypothesis import given, settings
from hypothesis import strategies as hs
from markdown_it import MarkdownIt
from sqlmodel import select
from streamlit.testing.v1 import AppTest

from tqaforge import queries
from tqaforge.annotation.adjudication import adjudicate
from tqaforge.annotation.human_import import import_human_work
from tqaforge.app.common import md
from tqaforge.labels import record_annotation
from tqaforge.printable import escape_controls
from tqaforge.schemas.records import Answer, AnswerCandidate, Question, TableRecord
from tqaforge.store import Workspace, init_workspace
from tqaforge.variants.grid import GridOptions, build_variant_grid

pytestmark = pytest.mark.hostile

APP = Path(__file__).resolve().parents[1] / "tqaforge" / "app"
SCREEN = re.compile(r"!\[[^\]]*\]\(")  # an image link as data, to find it shown literally


class CountingServer:
    """A loopback HTTP server that answers every GET with a 1x1 GIF and counts the requests."""

    GIF = bytes.fromhex("47494638396101000100800000000000ffffff21f90401000000002c00000000010001000002024401003b")

    def __init__(self) -> None:
        self.paths: list[str] = []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802 (http.server's name)
                outer.paths.append(self.path)
                self.send_response(200)
                self.send_header("Content-Type", "image/gif")
                self.send_header("Content-Length", str(len(outer.GIF)))
                self.end_headers()
                self.wfile.write(outer.GIF)

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture(scope="module")
def attacker() -> Iterator[CountingServer]:
    server = CountingServer()
    yield server
    server.close()


def hostile_texts(url: str) -> dict[str, str]:
    """Each field's hostile text; every one holds an image link to ``url`` (the attacker's server)."""
    return {
        "question": (f"How many? ![q]({url}/question.png) <img src=\"{url}/html.png\"> [click](javascript:alert(1)) "
                     f":red[red] $x^2$ **bold** `tick\n# heading \x1b[2J\u202e end"),
        "answer": f"4` ![a]({url}/answer.png) `2",
        "header": f"h![c]({url}/header.png)",
        "annotator": f"ls:eve![n]({url}/annotator.png)",
        "model": f"m![m]({url}/model.png)",
        "output": f"printed ![o]({url}/output.png)",
        "name": f"demo ![w]({url}/workspace.png)",
    }


def add_hostile(ws: Workspace, url: str) -> dict[str, str]:
    """Put hostile text (``hostile_texts``) into the store the ways it gets there: an imported
    file's header, a proposed question with its gold answer, a model's candidates, people's
    labels, variants. The ids the pages are pointed at."""
    texts = hostile_texts(url)
    source = ws.root / "hostile.csv"
    source.write_text(f"city,{texts['header']}\nrome,12\nparis,30\noslo,7\n", encoding="utf-8")
    import_human_work(ws, [source])
    with ws.session() as s:
        table = s.exec(select(TableRecord).where(TableRecord.imported_from.contains("hostile.csv"))).one()  # type: ignore[union-attr]
        question = Question(id=Question.make_id(table.id, texts["question"], "Aggregation"), table_id=table.id,
                            text=texts["question"], subtype="Aggregation", qtype="NumericalReasoning", status="proposed",
                            origin="llm")
        s.add(question)
        s.flush()  # the question's row first: the answer and the candidate refer to it
        s.add(Answer(id=Answer.make_id(question.id, "human", [texts["answer"]]), question_id=question.id, value=texts["answer"],
                     values=[texts["answer"]], status="consistent", origin="human"))
        code = f"print({texts['output']!r})"
        s.add(AnswerCandidate(
            id=AnswerCandidate.make_id(question.id, "PoT", 0, texts["model"]), question_id=question.id, method="PoT",
            raw=f"reply {texts['question']}", code=code, value=texts["answer"], values=[texts["answer"]], model=texts["model"],
            details={"execution": {"outcome": "ok", "seconds": 0.1, "stdout": texts["output"] + "\n", "stderr": ""}},
        ))
        ids = {"table": table.id, "question": question.id}
    build_variant_grid(ws, GridOptions(perturbations=("none", "shuffle_rows"), serializations=("csv",), status=None,
                                       write_prompts=False, skip_structural=False))
    with ws.session() as s:
        for who, kind in ((texts["annotator"], "extraction"), ("ls:mal", "reasoning")):
            record_annotation(s, kind="question_typing", target_type="question", target_id=ids["question"], annotator=who,
                              label={"type": kind})
    adjudicate(ws, kinds=["question_typing"])
    ids["variant"] = next(v.id for v in queries.list_variants(ws, question=ids["question"], perturbation="shuffle_rows"))
    return ids


# --- the detector --------------------------------------------------------------------------------------

PARSER = MarkdownIt("commonmark", {"html": True}).enable(["table", "strikethrough"])
# Streamlit's own Markdown: directives (:red[...], :material/icon:) and $math$, where not escaped.
STREAMLIT_SYNTAX = re.compile(r"(?<!\\):[a-z][a-z-]*\[|(?<!\\)\$")


def unsafe(body: str) -> list[str]:
    """What in ``body`` would not show as text: images, links, HTML, Streamlit directives, math."""
    found = []
    for token in PARSER.parse(body):
        for t in [token, *(token.children or [])]:
            if t.type in ("image", "link_open", "html_inline", "html_block"):
                found.append(f"{t.type}: {t.content or t.attrs}")
    found += [f"streamlit syntax {m.group(0)!r}" for m in STREAMLIT_SYNTAX.finditer(body)]
    return found


def shown(body: str) -> str:
    """The text a Markdown body shows (escapes resolved; code spans as their content)."""
    parts = []
    for token in PARSER.parse(body):
        if token.type == "paragraph_close":
            parts.append(" ")
        for t in token.children or []:
            if t.type in ("text", "code_inline", "softbreak", "hardbreak"):
                parts.append(t.content or " ")
    return "".join(parts).replace("\u00a0", " ")


def markdown_bodies(at: AppTest) -> list[tuple[str, str]]:
    """(element type, body) of every string on the page that Streamlit renders as Markdown."""
    bodies = []
    for node in at:
        kind = getattr(node, "type", "")
        if kind in ("markdown", "caption", "error", "warning", "info", "success", "title", "header", "subheader", "toast"):
            bodies.append((kind, str(node.value)))
        label = getattr(node, "label", None)
        if isinstance(label, str):
            bodies.append((f"{kind} label", label))
        if kind == "image":
            bodies += [("image caption", c) for c in node.captions]
    return bodies


def assert_text_only(at: AppTest, *, shows: bool = True) -> None:
    assert not at.exception, at.exception
    bodies = markdown_bodies(at)
    bad = [(kind, body, unsafe(body)) for kind, body in bodies if unsafe(body)]
    assert not bad, bad
    if shows:  # the data is on the page, as text
        assert any(SCREEN.search(shown(body)) for _, body in bodies), bodies


def test_the_detector_sees_what_raw_data_would_do(attacker: CountingServer) -> None:
    """Control: the hostile texts, put into Markdown as they are, parse to images, links, HTML,
    directives or math; through md() they show as written."""
    texts = hostile_texts(attacker.url)
    for name, text in texts.items():
        # The answer alone is two code spans around an image link; inside a code span of ours it breaks out (below).
        assert unsafe(f"**x** · {text}") or name == "answer", name
        assert not unsafe(f"**x** · {md(text)}"), name
        assert SCREEN.sub("", shown(md(text))) != shown(md(text))  # the image link, shown literally
    answer = texts["answer"]
    assert unsafe(f"answer: `{answer}`")  # a backtick in the answer breaks out of a naive code span
    assert not unsafe(f"answer: {md(answer, code=True)}") and shown(md(answer, code=True)).strip() == answer
    assert any(t.type == "heading_open" for t in PARSER.parse(texts["question"]))  # a line of its own starts a heading
    assert not any(t.type == "heading_open" for t in PARSER.parse(md(texts["question"])))


PIECES = [*"ab1 .-+*_`[]()!<>|&$~#:@/\\=\n\t'\"", "http://", "www.", "1. ", "- ", "---", "&amp;", "\x1b[2J", "\u202e", "\r",
          ":red[", ":material/x:", "mailto:", "[a]: ", "![", "](", "a_b", "_a", "    "]


@settings(max_examples=300, deadline=None)
@given(hs.lists(hs.sampled_from(PIECES), max_size=30).map("".join))
def test_md_shows_any_text_as_written(text: str) -> None:
    """Whatever the data, md() makes Markdown that parses to plain text (no image, link, HTML, code,
    emphasis, heading, list, table, quote, rule, directive or math), alone or after our own words,
    and shows the text itself (control characters as escapes)."""
    plain = {"paragraph_open", "paragraph_close", "inline", "text", "softbreak", "hardbreak"}
    expected = " ".join(escape_controls(text).split())
    for body in (md(text), f"**x** · {md(text)}"):
        tokens = PARSER.parse(body)
        kinds = {t.type for token in tokens for t in [token, *(token.children or [])]}
        assert kinds <= plain | {"strong_open", "strong_close"}, (text, body, kinds)
        assert not STREAMLIT_SYNTAX.search(body), body
        assert " ".join(shown(body).split()).endswith(expected), (text, body, shown(body))


# --- every page, by AppTest ----------------------------------------------------------------------------


@pytest.fixture(scope="module")
def staged(tmp_path_factory: pytest.TempPathFactory, attacker: CountingServer) -> tuple[Workspace, dict[str, str]]:
    texts = hostile_texts(attacker.url)
    ws = init_workspace(tmp_path_factory.mktemp("app-hostile") / "ws", name=texts["name"])
    stage_everything(ws)
    ids = add_hostile(ws, attacker.url)
    # A saved evaluation whose directories, plot and figures carry data.
    saved = ws.root / "evaluations" / "rel![r](r.png)" / "preds![p](p.png)"
    saved.mkdir(parents=True)
    (saved / "scores.json").write_text(json.dumps({"matched": f"![s]({attacker.url}/scores.png)", "rows": []}), encoding="utf-8")
    (saved / "plot![i](i.png).png").write_bytes(CountingServer.GIF)
    return ws, ids


@pytest.fixture
def page(staged: tuple[Workspace, dict[str, str]], monkeypatch: pytest.MonkeyPatch):
    return page_runner(staged[0].root, monkeypatch)


def test_overview_shows_the_workspace_name_as_text(page) -> None:
    assert_text_only(page("overview.py"))


def test_tables_shows_questions_answers_and_headers_as_text(staged, page) -> None:
    _, ids = staged
    at = page("tables.py")
    at.number_input[1].set_value(3).run()  # at most 3 rows: the hostile table among the first 50 listed
    # By label: the import expander's choices (header rows, numbers) come first on the page.
    next(s for s in at.selectbox if s.label == "look at a table").set_value(ids["table"]).run()
    assert_text_only(at)


def test_review_shows_the_proposed_question_as_text(page) -> None:
    assert_text_only(page("review.py"))


def test_answers_shows_candidates_code_and_output_as_text(staged, page) -> None:
    _, ids = staged
    at = page("answers.py")
    at.selectbox[0].set_value(ids["question"]).run()
    assert_text_only(at)
    assert any("printed ![o](" in t.value for t in at.text)  # the program's output, as text
    assert any("# heading" in t.value and "\\x1b[2J" in t.value and "\x1b" not in t.value for t in at.text)  # the reply


def test_variants_shows_the_question_and_changes_as_text(staged, page) -> None:
    _, ids = staged
    at = page("variants.py")
    at.selectbox[0].set_value("shuffle_rows").run()
    at.selectbox[1].set_value(ids["variant"]).run()
    assert_text_only(at)


def test_agreement_shows_annotators_and_labels_as_text(page) -> None:
    assert_text_only(page("agreement.py"))


def test_releases_shows_files_and_errors_as_text(page) -> None:
    at = page("releases.py")
    assert_text_only(at)  # the saved evaluation: directory names, figures, plot caption
    at.text_input[0].set_value("![v](http://127.0.0.1:9/version.png)")
    at.button[0].click().run()
    assert at.error, "a bad version is an error on the page"
    assert_text_only(at)


def test_generate_shows_the_model_name_as_text(staged, page, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:9/v1")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    at = page("generate.py")
    at.text_input[0].set_value(hostile_texts("http://127.0.0.1:9")["model"]).run()
    assert_text_only(at)


@pytest.mark.parametrize("name", ["taxonomy.py", "annotation.py"])
def test_the_other_pages_hold_no_markdown_from_data(page, name: str) -> None:
    assert_text_only(page(name), shows=False)


# --- the real browser ----------------------------------------------------------------------------------


@contextmanager
def streamlit(script: Path, env: dict[str, str]) -> Iterator[str]:
    """``streamlit run SCRIPT`` on a free loopback port until the block ends; its URL."""
    port = free_port()
    server = subprocess.Popen(
        [sys.executable, "-m", "streamlit", "run", str(script), "--server.address", "127.0.0.1", "--server.port", str(port),
         "--server.headless", "true", "--browser.gatherUsageStats", "false"],
        env={**os.environ, **env}, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )
    url = f"http://127.0.0.1:{port}/"

    def healthy() -> bool:
        try:
            with urllib.request.urlopen(url + "_stcore/health", timeout=2):
                return True
        except OSError:
            return False
    try:
        wait_for(healthy, 60, "streamlit to answer /_stcore/health", interval=0.2)
        yield url
    finally:
        server.terminate()
        server.wait(timeout=20)


def _images_from(driver: Any, server: CountingServer) -> int:
    return int(driver.execute_script("return document.querySelectorAll(arguments[0]).length;", f'img[src^="{server.url}"]'))


def test_chromium_fetches_nothing_from_an_image_link_in_a_question(tmp_path: Path, chromium, attacker: CountingServer) -> None:
    ws = init_workspace(tmp_path / "ws", name="browser")
    ids = add_hostile(ws, attacker.url)
    attacker.paths.clear()
    driver = start_chrome(chromium, tmp_path / "profile", window="1400,2000")
    try:
        # Control: the same question text, put raw into st.markdown by a page of the test's own,
        # makes this Chromium fetch the image from the attacker's server.
        control = tmp_path / "control.py"
        control.write_text("import streamlit as st\nst.markdown(" + repr(hostile_texts(attacker.url)["question"]) + ")\n"
                           "st.write('control page done')\n", encoding="utf-8")
        with streamlit(control, {}) as url:
            driver.get(url)
            wait_for_text(driver, "control page done")
            wait_until(driver, lambda d: "/question.png" in attacker.paths, "the control's image to be fetched", 30)
            assert _images_from(driver, attacker) >= 1
        attacker.paths.clear()

        with streamlit(APP / "main" / "Home.py", {"TQAFORGE_WORKSPACE": str(ws.root)}) as url:
            for path, rendered in (
                ("review", "promote"),  # the proposed question's buttons, under its text
                ("tables", "→"),  # the table's questions with their answers
                ("answers", "sandbox:"),  # the candidate, its code and output
            ):
                driver.get(url + path)
                wait_for_text(driver, rendered)  # words of ours, shown after the data
                # The script's run is over and every image the page has is loaded (or failed).
                wait_until(driver, app_settled, f"/{path} to finish", 30)
                assert attacker.paths == [], (path, attacker.paths)
                assert _images_from(driver, attacker) == 0, path
                body = page_text(driver)
                assert f"![q]({attacker.url}/question.png)" in body, body[:2000]  # shown as text
        assert ids["question"]
    finally:
        driver.quit()


# --- Markdown files: the agreement report and the release's dataset card ----------------------------


def test_markdown_files_show_names_and_reasons_as_written(staged, tmp_path: Path, attacker: CountingServer) -> None:
    """The same class outside the app: the agreement report (annotator names in its tables) and the
    dataset card (workspace and model names, the reason for a low agreement) are Markdown read on a
    hub or in an editor. Nothing in them parses to an image, link or HTML, and the card's YAML
    header still reads back the name."""
    import yaml

    from tqaforge.annotation.report_format import to_markdown
    from tqaforge.annotation.workflows import Settings, agreement_report
    from tqaforge.release.build import ReleaseOptions, build_release
    from tqaforge.schemas.records import LLMCall

    ws, _ = staged
    texts = hostile_texts(attacker.url)
    report = to_markdown(agreement_report(ws, settings=Settings(n_boot=0)))
    assert not unsafe(report), unsafe(report)
    assert "ls:eve![n](" in shown(report)  # the annotator, shown as written
    with ws.session() as s:
        s.add(LLMCall(id="hostile-call", model=texts["model"], messages=[{"role": "user", "content": "q"}], text="a", cost=0.0,
                      purpose="generate_questions"))
    reason = f"because ![r]({attacker.url}/reason.png)\n# not a heading"
    build_release(ws, ReleaseOptions(version="0.3.0", out=tmp_path / "card", accept_low_agreement=reason,
                                     serializations=("csv",)))
    card = (tmp_path / "card" / "README.md").read_text(encoding="utf-8")
    header, body = card.split("\n---\n", 1)
    assert yaml.safe_load(header.removeprefix("---\n"))["pretty_name"] == f"{texts['name']} 0.3.0"
    assert not unsafe(body), unsafe(body)
    assert not any(t.type == "heading_open" and t.map and "not a heading" in body.splitlines()[t.map[0]]
                   for t in PARSER.parse(body))
    assert "![m](" in shown(body) and "![r](" in shown(body) and "![w](" in shown(body)
    # Control: the old way (data put in as it is) gives the detector images to find.
    assert unsafe(f"Models: {texts['model']}") and unsafe(f"| {texts['annotator']} | 0.5 |")
