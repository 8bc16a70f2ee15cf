"""The web service of docs/services.md (``examples/service/``): its tests pass as a user's project runs
them, it serves right under gunicorn's ``--preload`` with several workers, and the page shows its code as
it is in the files."""

from __future__ import annotations

import concurrent.futures
import importlib.util
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from helpers import clean_environment, gunicorn_serving

from wrapper.sandbox import Sandbox

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "examples" / "service"
PAGE = ROOT / "docs" / "services.md"
USER_PLUGINS = ["-p", "asyncio", "-p", "pytest_httpx", "-p", "completion_clients"]  # as the docs' tests


@pytest.mark.serial  # its tests wait out a 0.3 s deadline and give a caller's leaving 1 s
def test_the_service_tests_pass_as_a_user_runs_them(tmp_path: Path) -> None:
    """``pytest`` beside ``app.py`` in a directory of its own: no configuration, the plugins a user has."""
    for name in ("app.py", "test_app.py"):
        shutil.copy(EXAMPLE / name, tmp_path / name)
    command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *USER_PLUGINS, "test_app.py"]
    env = clean_environment(PYTEST_DISABLE_PLUGIN_AUTOLOAD="1")
    done = subprocess.run(command, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    assert re.search(r"\b\d+ passed\b", done.stdout), done.stdout
    assert not re.search(r"\b(failed|skipped|error|xfailed)\b", done.stdout), done.stdout


@pytest.fixture
def gunicorn(sandbox: Sandbox, tmp_path: Path) -> Iterator[str]:
    """The service under gunicorn (``--preload``, 2 uvicorn workers) on a free port, its clients on
    ``sandbox``; the URL it serves at."""
    env = clean_environment(
        SGP_API_KEY="key",
        SGP_CLIENT_BASE_URL=sandbox.scale_base_url,
        GRADIENT_ACCESS_TOKEN="token",
        GRADIENT_WORKSPACE_ID="workspace",
        GRADIENT_API_URL=sandbox.gradient_base_url,
    )
    log = tmp_path / "gunicorn.log"
    with gunicorn_serving(
        EXAMPLE, env, log, workers=2, ready="Booting worker", options=("--preload",)
    ) as url:
        yield url


def test_under_gunicorn_preload_every_worker_answers_its_own_requests(
    gunicorn: str, sandbox: Sandbox
) -> None:
    """With ``--preload`` the app is imported before the fork and each worker builds its clients in its
    lifespan: 60 requests, 12 at a time, over both workers get 60 answers, each to its own request."""
    bodies = [
        {"prompt": f"Alice {i}", "api": ("scale", "gradient")[i % 2], "max_tokens": 4} for i in range(60)
    ]
    with (
        httpx.Client(base_url=gunicorn, timeout=30) as caller,
        concurrent.futures.ThreadPoolExecutor(12) as pool,
    ):
        answers = list(pool.map(lambda body: caller.post("/complete", json=body), bodies))
    assert [answer.status_code for answer in answers] == [200] * 60
    request_ids = {answer.json()["request_id"] for answer in answers}
    assert len(request_ids) == 60  # none answered twice, none crossed
    assert sandbox.stats().requests == 60


def _titled_blocks(page: str) -> Iterator[tuple[str, str]]:
    """Each ``python title="examples/..."`` block of ``page``: the file it names, and its text."""
    for match in re.finditer(
        r'^```python title="(examples/[^"]+)"\n(.*?)^```$', page, re.MULTILINE | re.DOTALL
    ):
        yield match[1], match[2]


def test_the_pages_show_the_code_as_it_is_in_the_files() -> None:
    """Each excerpt of a file of ``examples/`` on the pages (a ``python title="examples/..."`` block) is a
    part of that file, word for word; docs/services.md shows the app and its tests so."""
    pages = [ROOT / "README.md", *sorted((ROOT / "docs").glob("**/*.md"))]
    for page in pages:
        for name, text in _titled_blocks(page.read_text(encoding="utf-8")):
            assert text in (ROOT / name).read_text(encoding="utf-8"), (
                f"{page.name}: an excerpt of {name} differs"
            )
    shown = {name for name, _ in _titled_blocks(PAGE.read_text(encoding="utf-8"))}
    assert shown == {"examples/service/app.py", "examples/service/test_app.py"}


def test_the_pages_table_of_statuses_is_the_apps() -> None:
    """The table of errors to statuses on docs/services.md lists the app's ``STATUSES``, in its order."""
    spec = importlib.util.spec_from_file_location("service_app", EXAMPLE / "app.py")
    assert spec is not None
    assert spec.loader is not None
    app = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(app)
    section = PAGE.read_text(encoding="utf-8").split("## Errors to HTTP statuses", 1)[1].split("\n## ", 1)[0]
    rows = re.findall(r"^\| `(\w+)` \| (\d{3}) \|", section, re.MULTILINE)
    assert rows == [(kind.__name__, str(status)) for kind, status in app.STATUSES]
