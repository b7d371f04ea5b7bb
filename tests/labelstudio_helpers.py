"""Helpers of the Label Studio sync tests: real users with their own tokens, and a small workspace."""

from __future__ import annotations

import re
import uuid
from pathlib import Path
from typing import Any

import httpx
from sqlmodel import select

from tqaforge.ingest import import_paths
from tqaforge.schemas.enums import AnswerMethod, AnswerRoute, AnswerStatus, Origin, QuestionStatus
from tqaforge.schemas.records import Answer, AnswerCandidate, Question, TableRecord
from tqaforge.store import Workspace

REPO = Path(__file__).resolve().parents[1]
SAMPLE = REPO / "data" / "sample" / "tablebench_sample.jsonl"


def signup(url: str, admin_token: str, email: str, password: str = "tqaforge-test-pw-1") -> tuple[int, str]:
    """Make a Label Studio user who belongs to the admin's organisation, as a person would: sign
    up through the organisation's invite link. Returns (user id, the user's own API token)."""
    admin = httpx.Client(base_url=url, headers={"Authorization": f"Token {admin_token}"})
    invite = admin.get("/api/invite").raise_for_status().json()["token"]
    with httpx.Client(base_url=url, follow_redirects=False) as browser:
        page = browser.get(f"/user/signup/?token={invite}")
        found = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page.text)
        csrf = found.group(1) if found else browser.cookies.get("csrftoken")
        reply = browser.post(
            f"/user/signup/?token={invite}", data={"email": email, "password": password, "csrfmiddlewaretoken": csrf},
            headers={"Referer": f"{url}/user/signup/"},
        )
        assert reply.status_code == 302, reply.text[:300]
        token = browser.get("/api/current-user/token").raise_for_status().json()["token"]
        me = browser.get("/api/current-user/whoami").raise_for_status().json()
    return int(me["id"]), token


def new_email(who: str) -> str:
    """A fresh e-mail per test: the Label Studio server is shared by the whole session."""
    return f"{who}-{uuid.uuid4().hex[:8]}@example.org"


def annotate(url: str, token: str, ls_task_id: int, result: list[dict[str, Any]], lead_time: float = 7.5) -> dict[str, Any]:
    """Submit an annotation as the user whose token this is."""
    with httpx.Client(base_url=url, headers={"Authorization": f"Token {token}"}) as user:
        return user.post(f"/api/tasks/{ls_task_id}/annotations/", json={"result": result, "lead_time": lead_time}).raise_for_status().json()


def choice(name: str, to: str, value: str) -> dict[str, Any]:
    return {"from_name": name, "to_name": to, "type": "choices", "value": {"choices": [value]}}


def text(name: str, to: str, value: str) -> dict[str, Any]:
    return {"from_name": name, "to_name": to, "type": "textarea", "value": {"text": [value]}}


def build_workspace(ws: Workspace, proposed: int = 3) -> dict[str, list[str]]:
    """Import the TableBench sample, add ``proposed`` proposed questions and one voted answer routed
    to verification (with its DP/TCoT/PoT candidates). {"questions": [...], "answers": [...]}."""
    assert not import_paths(ws, [SAMPLE]).failed
    with ws.session() as s:
        tables = s.exec(select(TableRecord).order_by(TableRecord.id)).all()
        questions = []
        for i in range(proposed):
            table = tables[i % len(tables)]
            text_ = f"What is the value in the first row of column {table.header[0]!r}? (#{i})"
            q = Question(
                id=Question.make_id(table.id, text_, "Aggregation"), table_id=table.id, text=text_, qtype="NumericalReasoning",
                subtype="Aggregation", status=QuestionStatus.PROPOSED, origin=Origin.LLM,
            )
            s.add(q)
            questions.append(q.id)
        gold = s.exec(select(Question).where(Question.status != QuestionStatus.PROPOSED.value).order_by(Question.id)).first()
        assert gold is not None
        candidates = []
        for method, code in ((AnswerMethod.TCOT, None), (AnswerMethod.SCOT, None), (AnswerMethod.POT, "print('Final Answer: 42')")):
            c = AnswerCandidate(
                id=AnswerCandidate.make_id(gold.id, method.value, 0, "test-model"), question_id=gold.id, method=method,
                raw=f"<script>alert(1)</script> {method.value} thinks... Final Answer: 42", code=code, value="42", values=["42"],
                details={"execution": {"outcome": "ok", "stdout": "Final Answer: 42\n", "stderr": ""}} if code else None,
                model="test-model",
            )
            s.add(c)
            candidates.append(c.id)
        answer = Answer(
            id=Answer.make_id(gold.id, "llm", ["42"]), question_id=gold.id, value="42", values=["42"],
            status=AnswerStatus.CONSISTENT, origin=Origin.LLM, method="vote", route=AnswerRoute.VERIFY,
            votes={"rule": "unanimous", "candidates": [{"id": cid} for cid in candidates], "groups": [candidates]},
        )
        s.add(answer)
    return {"questions": questions, "answers": [answer.id]}


def login(url: str, email: str, password: str) -> str:
    """Log in through Label Studio's login form as a person would; the user's own API token."""
    with httpx.Client(base_url=url, follow_redirects=False) as browser:
        page = browser.get("/user/login/")
        found = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page.text)
        csrf = found.group(1) if found else browser.cookies.get("csrftoken")
        reply = browser.post("/user/login/", data={"email": email, "password": password, "csrfmiddlewaretoken": csrf},
                             headers={"Referer": f"{url}/user/login/"})
        assert reply.status_code == 302, f"login of {email} refused: {reply.status_code} {reply.text[:300]}"
        return str(browser.get("/api/current-user/token").raise_for_status().json()["token"])


# --- annotators' own servers (tests/test_labelstudio_servers.py, tests/test_hostile_labelstudio_servers.py) ---


def own_login(root: Path, email: str) -> Any:
    """The login tqaforge keeps for ``email``'s own server (url, username, password, token)."""
    from tqaforge.annotation.labelstudio import manage
    from tqaforge.annotation.labelstudio.annotator_servers import select_servers

    credentials = manage.read_credentials(select_servers(root, [email])[0])
    assert credentials is not None
    return credentials


def browser_session(url: str, email: str, password: str) -> httpx.Client:
    """A client logged in through the login form, as a browser is: it holds the session cookie."""
    browser = httpx.Client(base_url=url, follow_redirects=False)
    page = browser.get("/user/login/")
    found = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page.text)
    csrf = found.group(1) if found else browser.cookies.get("csrftoken")
    reply = browser.post("/user/login/", data={"email": email, "password": password, "csrfmiddlewaretoken": csrf},
                         headers={"Referer": f"{url}/user/login/"})
    assert reply.status_code == 302, f"login of {email} refused: {reply.status_code}"
    return browser


def flip_all(url: str, token: str, project_id: int) -> int:
    """Give every task of the project a label of the token's user, or change the one it has (accept
    <-> reject): one new revision per task. Returns how many."""
    with httpx.Client(base_url=url, headers={"Authorization": f"Token {token}"}) as user:
        tasks = user.get("/api/tasks/", params={"project": project_id, "fields": "all", "page_size": 1000}).raise_for_status().json()
        tasks = tasks["tasks"] if isinstance(tasks, dict) else tasks
        for task in tasks:
            annotations = task.get("annotations") or []
            if not annotations:
                annotate(url, token, task["id"], [choice("decision", "question", "accept"), choice("subtype_right", "category", "yes")])
                continue
            now = annotations[-1]["result"][0]["value"]["choices"][0]
            flipped = "reject" if now == "accept" else "accept"
            user.patch(f"/api/annotations/{annotations[-1]['id']}/", json={
                "result": [choice("decision", "question", flipped), choice("subtype_right", "category", "yes")]}).raise_for_status()
    return len(tasks)


def project_of(url: str, token: str, title: str) -> int | None:
    """The id of the project titled ``title`` on the server, as the token's user lists them."""
    with httpx.Client(base_url=url, headers={"Authorization": f"Token {token}"}) as user:
        projects = user.get("/api/projects/", params={"page_size": 100}).raise_for_status().json()
    found = [p["id"] for p in projects.get("results", projects) if p.get("title") == title]
    return min(found) if found else None


def add_proposed_question(ws: Workspace, text_: str) -> str:
    """One more proposed question on the first table (a new item waiting for review)."""
    with ws.session() as s:
        table = s.exec(select(TableRecord).order_by(TableRecord.id)).first()
        assert table is not None
        q = Question(id=Question.make_id(table.id, text_, "Aggregation"), table_id=table.id, text=text_,
                     qtype="NumericalReasoning", subtype="Aggregation", status=QuestionStatus.PROPOSED, origin=Origin.LLM)
        s.add(q)
        return q.id


def open_servers_workspace(root: Path) -> Workspace:
    """The annotator servers' workspace, with the sample and 3 proposed questions (made once)."""
    from tqaforge.store import open_workspace

    ws = open_workspace(root)
    with ws.session() as s:
        empty = s.exec(select(Question)).first() is None
    if empty:
        build_workspace(ws, proposed=3)
    return ws
