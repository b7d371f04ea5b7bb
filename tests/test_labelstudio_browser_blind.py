"""Blind by isolation, in real browsers: ana and ben, each in their own headless Chromium logged
in to their own Label Studio server (the run's two annotator servers, conftest's
``annotator_servers``), review the same three proposed questions and disagree on one.

- Nothing ana's browser shows (every screen she visits: login, each task, after each submit)
  holds ben's decision or his name, though ben labelled first; the control: ben's own screen of
  the disputed item shows his decision and his name, so the checks can see one.
- ``labelstudio pull`` records two people (registered beforehand with ``annotators new NAME
  --email E``, as the README walkthrough does), not four identities (two names + two accounts).
- The agreement report's Cohen's kappa for question_review is the one worked out by hand below.
- ana's and ben's screens of the disputed item, side by side, are the README's screenshot
  (``docs/screenshots/labelstudio-blind-side-by-side.png`` with ``TQAFORGE_SAVE_SCREENSHOTS=1``).

The servers are shared with tests/test_labelstudio_servers.py and the hostile ones; this test
works in a workspace of its own (fresh items, its own store, so the report counts only its six
decisions), reaching the same servers with their logins, and removes the tasks it sent there.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import httpx
from browser import click_element, wait_until
from labelstudio_helpers import add_proposed_question, build_workspace, own_login, project_of
from PIL import Image, ImageDraw
from selenium.webdriver.common.by import By
from selenium.webdriver.remote.webdriver import WebDriver
from sqlmodel import select
from test_labelstudio_browser import (
    SAVE_ENV,
    SCREENSHOTS,
    annotations_of,
    browser,
    click_choice,
    login,
    open_task,
    panel_shows,
    screenshot,
    task_page,
    wait,
)
from test_labelstudio_servers import _run

from tqaforge.annotation.labelstudio import manage
from tqaforge.annotation.labelstudio.annotator_servers import select_servers
from tqaforge.annotation.labelstudio.sync import readable_title
from tqaforge.ids import labelstudio_annotator
from tqaforge.schemas.records import Annotation, Annotator, LabelStudioTaskCopy
from tqaforge.store import Workspace

KIND = "question_review"
#: The decisions, per item (in the order of the items' ids): they agree on two, differ on one.
ANA = ("accept", "accept", "reject")
BEN = ("accept", "reject", "reject")
DISPUTED = 1


def _hand_kappa(a: tuple[str, ...], b: tuple[str, ...]) -> float:
    """Cohen's kappa of two raters, written out: (po - pe) / (1 - pe)."""
    n = len(a)
    po = sum(x == y for x, y in zip(a, b)) / n
    pe = sum((a.count(c) / n) * (b.count(c) / n) for c in set(a) | set(b))
    return (po - pe) / (1 - pe)


def _traces(who: str) -> tuple[str, str]:
    """What of a login a screen may show: the whole address, and its start (Label Studio shortens
    a long one to ``ben-5491...le.org`` on the annotation's tab)."""
    return who.lower(), who.lower()[:8]


def _join_servers(ws: Workspace, servers_root: Path, who: str, name: str) -> None:
    """Register ``who`` as the person ``name`` (README: ``annotators new``), give them a server in
    this workspace (``annotators add``), and point it at their running server (its login)."""
    code, output = _run(ws.root, "annotators", "new", name, "--email", who)
    assert code == 0, output
    code, output = _run(ws.root, "annotators", "add", who, "--name", name.title())
    assert code == 0, output
    ours, theirs = select_servers(ws.root, [who])[0], select_servers(servers_root, [who])[0]
    shutil.copyfile(manage.credentials_path(theirs), manage.credentials_path(ours))


def _screen_text(driver: WebDriver) -> str:
    """All a screen holds: its DOM (attributes too, such as an avatar's alt) and, inside the
    table's frame, the frame's DOM. Read again when a frame is re-rendered mid-read (a stale
    frame is "not yet" to the wait), so what comes back is one whole screen."""
    def whole(d: WebDriver) -> str:
        parts = [d.page_source]
        for frame in d.find_elements(By.CSS_SELECTOR, "iframe"):
            d.switch_to.frame(frame)
            try:
                parts.append(d.page_source)
            finally:
                d.switch_to.default_content()
        return "\n".join(parts).lower()
    return wait_until(driver, whole, "the screen's text")


def _label(driver: WebDriver, url: str, token: str, copy: LabelStudioTaskCopy, decision: str, first: bool,
           password: str, who: str) -> str:
    """Open the copy's task (logging in first on the first one), click the decision and "yes",
    submit; what the screen held when the task opened, before the clicks."""
    if first:
        login(driver, url, who, then=task_page(copy.ls_project_id, copy.ls_task_id), password=password)
    open_task(driver, None if first else url, copy.ls_project_id, copy.ls_task_id)
    panel_shows(driver, set(), authors=[])  # a fresh copy: nobody's label on it
    opened = _screen_text(driver)
    click_choice(driver, decision)
    click_choice(driver, "yes")
    click_element(driver, By.CSS_SELECTOR, "[data-testid=bottombar-submit-button]", "Submit")
    wait(driver).until(lambda _: annotations_of(url, token, copy.ls_task_id))
    return opened


def _side_by_side(left: Path, right: Path, out: Path, captions: tuple[str, str]) -> Path:
    """The two screenshots next to each other, each captioned, scaled to half size."""
    with Image.open(left) as a, Image.open(right) as b:
        gap, top = 16, 36
        canvas = Image.new("RGB", (a.width + b.width + gap, max(a.height, b.height) + top), "white")
        canvas.paste(a.convert("RGB"), (0, top))
        canvas.paste(b.convert("RGB"), (a.width + gap, top))
        draw = ImageDraw.Draw(canvas)
        for x, caption in ((8, captions[0]), (a.width + gap + 8, captions[1])):
            draw.text((x, 8), caption, fill="black", font_size=22)
        canvas = canvas.resize((canvas.width // 2, canvas.height // 2), Image.Resampling.LANCZOS)
    canvas.save(out, optimize=True)
    if os.environ.get(SAVE_ENV) == "1":
        shutil.copyfile(out, SCREENSHOTS / out.name)
    return out


def _remove_our_tasks(ws: Workspace, servers_root: Path, who: str, project_before: int | None) -> None:
    """Leave the shared server as the other tests expect it: without this workspace's tasks (and
    without the project when this test made it)."""
    login_ = own_login(servers_root, who)
    with ws.session() as s:
        ours = s.exec(select(LabelStudioTaskCopy).where(LabelStudioTaskCopy.annotator == who)).all()
    with httpx.Client(base_url=login_.url, headers={"Authorization": f"Token {login_.token}"}, timeout=30) as me:
        if project_before is None:
            for project in {c.ls_project_id for c in ours}:
                me.delete(f"/api/projects/{project}/")
        else:
            for copy in ours:
                me.delete(f"/api/tasks/{copy.ls_task_id}/")


def test_ana_and_ben_label_the_same_items_blind_and_the_report_counts_two_people(
    annotator_servers, sqlite_workspace: Workspace, chromium, tmp_path: Path,
) -> None:
    ws, servers_root = sqlite_workspace, annotator_servers.root
    ana, ben = annotator_servers.ana, annotator_servers.ben
    ana_login, ben_login = own_login(servers_root, ana), own_login(servers_root, ben)
    assert ana_login.url != ben_login.url  # two servers (127.0.0.2 and 127.0.0.3)
    build_workspace(ws, proposed=0)
    for i in range(3):  # fresh items: whatever other tests sent to these servers, these are new
        add_proposed_question(ws, f"Which route has the most airlines? (blind test, item {i})")
    for who, name in ((ana, "ana"), (ben, "ben")):
        _join_servers(ws, servers_root, who, name)
    before = {who: project_of(login_.url, login_.token, readable_title(KIND)) for who, login_ in ((ana, ana_login), (ben, ben_login))}
    try:
        code, output = _run(ws.root, "labelstudio", "push", KIND, "-a", ana, "-a", ben, "--json")
        assert code == 0 and json.loads(output)["copies_created"] == 6, output
        with ws.session() as s:
            held = s.exec(select(LabelStudioTaskCopy).where(LabelStudioTaskCopy.kind == KIND)).all()
        order = sorted({c.task_id for c in held})
        assert len(order) == 3
        by_task = {(c.annotator, c.task_id): c for c in held}
        ana_copies = [by_task[(ana, t)] for t in order]
        ben_copies = [by_task[(ben, t)] for t in order]

        # ben first, so that his labels exist while ana works.
        with browser(chromium, tmp_path / "ben") as b:
            for i, (copy, decision) in enumerate(zip(ben_copies, BEN)):
                _label(b, ben_login.url, ben_login.token, copy, decision, i == 0, ben_login.password, ben)
            # The control: ben's own screen of the disputed item shows his decision and his name.
            disputed = ben_copies[DISPUTED]
            open_task(b, ben_login.url, disputed.ls_project_id, disputed.ls_task_id)
            panel_shows(b, {BEN[DISPUTED], "yes"}, authors=[ben.lower()])
            assert all(trace in _screen_text(b) for trace in _traces(ben))
            ben_shot = screenshot(b, tmp_path, "labelstudio-blind-ben", keep=False)

        ana_screens: list[str] = []
        with browser(chromium, tmp_path / "ana") as a:
            for i, (copy, decision) in enumerate(zip(ana_copies, ANA)):
                ana_screens.append(_label(a, ana_login.url, ana_login.token, copy, decision, i == 0, ana_login.password, ana))
                ana_screens.append(_screen_text(a))  # and once submitted
            a.get(f"{ana_login.url}/projects/")  # her projects page
            wait(a).until(lambda d: d.find_elements(By.CSS_SELECTOR, f"a[href='/projects/{ana_copies[0].ls_project_id}/data']"))
            ana_screens.append(_screen_text(a))
            for copy, decision in zip(ana_copies, ANA):  # each item again, as she left it
                open_task(a, ana_login.url, copy.ls_project_id, copy.ls_task_id)
                panel_shows(a, {decision, "yes"}, authors=[ana.lower()])  # her label only
                ana_screens.append(_screen_text(a))
                if copy is ana_copies[DISPUTED]:
                    ana_shot = screenshot(a, tmp_path, "labelstudio-blind-ana", keep=False)
        # Ben's name (his login; the person's name and the server's display name) is on none of
        # ana's screens; ben's decision on the disputed item was checked on hers (not chosen).
        for seen in ana_screens:
            assert ana.lower() in seen  # the check reads the screens: her own name is there
            for trace in (*_traces(ben), "ben okafor"):
                assert trace not in seen, trace
        joined = _side_by_side(ana_shot, ben_shot, tmp_path / "labelstudio-blind-side-by-side.png",
                               (f"ana's screen, {ana_login.url}", f"ben's screen, {ben_login.url}"))
        assert joined.stat().st_size > 20_000

        code, output = _run(ws.root, "labelstudio", "pull", "--json")
        assert code == 0, output
        assert json.loads(output)["recorded"] == 6, output
    finally:
        for who in (ana, ben):
            _remove_our_tasks(ws, servers_root, who, before[who])

    # Two people, not four: the labels keep their accounts' author strings (two ``ls:`` pseudonyms,
    # neither "ana" nor "ben": without the registry they would be two more raters), and count as
    # the two people registered with those e-mails.
    with ws.session() as s:
        labels = s.exec(select(Annotation).where(Annotation.kind == KIND)).all()
        people = {p.id: p.name for p in s.exec(select(Annotator)).all()}
    assert sorted(a.annotator for a in labels) == sorted([labelstudio_annotator(ana)] * 3 + [labelstudio_annotator(ben)] * 3)
    assert sorted(people[a.annotator_id] for a in labels if a.annotator_id) == ["ana"] * 3 + ["ben"] * 3
    code, output = _run(ws.root, "annotators", "people", "--json")
    assert code == 0, output
    listed = json.loads(output)["annotators"]
    assert sorted((p["name"], p["labels"], p["email"]) for p in listed) == [("ana", 3, True), ("ben", 3, True)], listed

    code, output = _run(ws.root, "agreement", "report", "--kind", KIND, "--format", "json", "--n-boot", "0", "--no-store")
    assert code == 0, output
    report = json.loads(output)["kinds"][KIND]
    assert report["raters"] == ["ana", "ben"] and report["n_items"] == 3
    # By hand: they agree on 2 of 3 items, po = 2/3; ana accepts 2/3 and rejects 1/3, ben the
    # other way round, so chance agreement pe = 2/3 * 1/3 + 1/3 * 2/3 = 4/9;
    # kappa = (2/3 - 4/9) / (1 - 4/9) = (2/9) / (5/9) = 0.4.
    by_hand = _hand_kappa(ANA, BEN)
    assert abs(by_hand - 0.4) < 1e-12
    [pair] = report["pairwise"]["cohen_kappa"]["pairs"]
    assert pair["raters"] == ["ana", "ben"] and pair["n_items"] == 3 and abs(pair["value"] - by_hand) < 1e-9, pair
