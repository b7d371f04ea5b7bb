"""Every page of the app on the demo workspace, in headless Chromium: what each page shows once
rendered (used by ``tests/test_demo.py``), and the README's screenshots, one per page.

    PYTHONPATH=. .venv/bin/python tests/app_screenshots.py [--out docs/screenshots]

builds the demo workspace (``tqaforge demo``, no model) in a temporary directory, serves the app
on it with the launcher's command, opens every page of ``PAGE_LIST`` (Home.py) at 1400x1000,
waits for its title, its content and the end of its script run (no sleep), and saves
``OUT/app-<page>.png`` (the page file's name), reduced to a 256-colour palette so each stays small.
"""

from __future__ import annotations

import argparse
import ast
import os
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO / "tests"), str(REPO)]  # run as a script: the tests' helpers and the package

from browser import app_settled, page_text, running_app, wait_for_text, wait_until  # noqa: E402
from conftest import start_chrome  # noqa: E402
from selenium.webdriver.common.by import By  # noqa: E402

HOME = REPO / "tqaforge" / "app" / "main" / "Home.py"

#: Per page of PAGE_LIST (its file's stem): texts it shows once rendered on the demo workspace, and
#: its empty states, which must be absent.
PAGES: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    "overview": (("Pipeline funnel", "Annotation progress per kind", "Questions per subtype", "Releases"),
                 ("no release yet", "no annotation tasks yet")),
    "tables": (("of 54 tables", "rows and"), ("no tables",)),
    "taxonomy": (("taxonomy tablebench", "Seed questions ("), ("Seed questions (0)",)),
    "generate": (("Question rounds", "Probes (no model)"), ()),
    "review": (("of 56 proposed questions", "accept", "promote"), ("no proposed questions",)),
    "answers": (("answer 59 · vote · status consistent · route verify", "SCoT #0"), ("No answers yet",)),
    "variants": (("original", "perturbed", "as the model sees it"), ("No variants yet", "no variants")),
    "annotators": (("People", "one person under two identities", "Label Studio servers", "Progress"), ("no annotators yet",)),
    "annotation": (("Progress per kind", "task copies pushed, per annotator login"), ("no annotation tasks yet",)),
    "agreement": (("question_review: 7 items, 2 annotators, 14 labels", "Adjudication queue", "of 1 open items"),
                  ("No annotations yet", "no open items")),
    "releases": (("Evaluations", "demo-0.1.0 / probes_dp: 60 predictions", "demo-0.1.0 / tablebench_sample_dp: 36 predictions"),
                 ("No release yet", "no evaluation yet")),
    # The demo's two evaluations side by side (picked by default): they score other items, so no test.
    "evaluations": (("Score a predictions file", "Compare systems", "probe-rule/DP", "demo-model/DP", "No significance test"),
                    ("no evaluation yet",)),
    # The demo's two evaluations, picked by default, and the report the demo wrote on them, shown without a click.
    "health": (("Health", "2 evaluations found", "demo-0.1.0 / probes_dp", "demo-0.1.0 / tablebench_sample_dp",
                "run the health report", "the report written earlier", "health of release demo 0.1.0: UNHEALTHY",
                "[FAIL] suspect_gold: cannot be checked"),
               ("No release yet", "no evaluation of any release yet", "no health report of")),
}


def page_stems() -> list[str]:
    """The stems of Home.py's PAGE_LIST files, in the app's order (the first is the default page,
    at /). Read from the source: importing Home.py would run the app."""
    tree = ast.parse(HOME.read_text(encoding="utf-8"))
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "PAGE_LIST" for t in node.targets):
            return [Path(file).stem for file, _, _ in ast.literal_eval(node.value)]
    raise LookupError(f"no PAGE_LIST in {HOME}")


def page_path(stem: str) -> str:
    """The URL path of a page: the default (first) one is served at /, the others by their stem."""
    return "" if stem == page_stems()[0] else stem


def show_page(driver, url: str, stem: str) -> str:
    """Open page ``stem`` and wait until its texts are on it and its script has finished; returns
    its text. AssertionError when it shows one of its empty states or an exception."""
    shown, empty = PAGES[stem]
    driver.get(url + page_path(stem))
    text = wait_for_text(driver, *shown)
    wait_until(driver, app_settled, f"page /{page_path(stem)} to finish its run")
    text = page_text(driver)  # after the run: what the screenshot shows
    assert not [e for e in empty if e in text], f"page /{page_path(stem)} shows an empty state:\n{text[:3000]}"
    assert "Traceback" not in text and not driver.find_elements(By.CSS_SELECTOR, "[data-testid='stException']"), \
        f"/{page_path(stem)}:\n{text[:3000]}"
    return text


def demo_env() -> dict[str, str]:
    """No endpoint, no database URL: the demo is a SQLite workspace built without a model."""
    return {k: v for k, v in os.environ.items() if not k.startswith(("TQAFORGE_", "OPENAI_"))}


def build_demo(root: Path) -> None:
    """The demo workspace at ``root``, by the command ``make demo`` runs."""
    result = subprocess.run([sys.executable, "-m", "tqaforge", "demo", str(root), "--data", str(REPO / "data")],
                            env={**demo_env(), "PYTHONPATH": str(REPO)}, capture_output=True, text=True, timeout=600)
    if result.returncode != 0:
        raise SystemExit(f"tqaforge demo failed ({result.returncode}):\n{result.stderr[-3000:]}")


def shrink_png(path: Path) -> None:
    """Rewrite ``path`` with a 256-colour palette (text and flat colours: no visible loss, a third
    of the size)."""
    from PIL import Image

    with Image.open(path) as image:
        small = image.convert("RGB").quantize(colors=256, method=Image.Quantize.MEDIANCUT)
    small.save(path, optimize=True)


def save_screenshots(demo_root: Path, out: Path, chromium: tuple[str, str], profile: Path) -> list[Path]:
    """Serve the app on ``demo_root`` and save ``out/app-<page>.png`` for every page of PAGE_LIST."""
    out.mkdir(parents=True, exist_ok=True)
    saved = []
    with running_app({**demo_env(), "PYTHONPATH": str(REPO), "TQAFORGE_WORKSPACE": str(demo_root)}) as url:
        driver = start_chrome(chromium, profile, window="1400,1000")
        try:
            for stem in page_stems():
                show_page(driver, url, stem)
                driver.execute_script("window.scrollTo(0, 0);")
                path = out / f"app-{stem}.png"
                if not driver.save_screenshot(str(path)):
                    raise SystemExit(f"chromium saved no screenshot of /{page_path(stem)}")
                shrink_png(path)
                saved.append(path)
        finally:
            driver.quit()
    return saved


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=REPO / "docs" / "screenshots", help="where the PNGs go")
    parser.add_argument("--chromium", default="/usr/bin/chromium")
    parser.add_argument("--chromedriver", default="/usr/bin/chromedriver")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="tqaforge-shots-") as tmp:
        root = Path(tmp) / "demo-workspace"
        build_demo(root)
        for path in save_screenshots(root, args.out, (args.chromium, args.chromedriver), Path(tmp) / "profile"):
            print(f"{path.relative_to(REPO) if path.is_relative_to(REPO) else path}  {path.stat().st_size // 1024} KiB")


if __name__ == "__main__":
    main()
