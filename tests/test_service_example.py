"""The web service of docs/services.md (``examples/service/``): its tests pass as a user's project runs
them, it serves right under gunicorn's ``--preload`` with several workers, and the page shows its code as
it is in the files."""

from __future__ import annotations

import concurrent.futures
import importlib.util
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from helpers import ENV_VARS

from wrapper.sandbox import Sandbox

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "examples" / "service"
PAGE = ROOT / "docs" / "services.md"
USER_PLUGINS = ["-p", "asyncio", "-p", "pytest_httpx", "-p", "completion_clients"]  # as the docs' tests


def _environment(**env: str) -> dict[str, str]:
    """This process's environment without the clients' settings (nor pytest's), plus ``env``."""
    clean = {k: v for k, v in os.environ.items() if k not in ENV_VARS and not k.startswith("PYTEST_")}
    return clean | env


@pytest.mark.serial  # its tests wait out a 0.3 s deadline and give a caller's leaving 1 s
def test_the_service_tests_pass_as_a_user_runs_them(tmp_path: Path) -> None:
    """``pytest`` beside ``app.py`` in a directory of its own: no configuration, the plugins a user has."""
    for name in ("app.py", "test_app.py"):
        shutil.copy(EXAMPLE / name, tmp_path / name)
    command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *USER_PLUGINS, "test_app.py"]
    env = _environment(PYTEST_DISABLE_PLUGIN_AUTOLOAD="1")
    done = subprocess.run(command, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    assert re.search(r"\b\d+ passed\b", done.stdout), done.stdout
    assert not re.search(r"\b(failed|skipped|error|xfailed)\b", done.stdout), done.stdout


@pytest.fixture
def gunicorn(sandbox: Sandbox, tmp_path: Path) -> Iterator[str]:
    """The service under gunicorn (``--preload``, 2 uvicorn workers) on a free port, its clients on
    ``sandbox``; the URL it serves at."""
    env = _environment(
        SGP_API_KEY="key",
        SGP_CLIENT_BASE_URL=sandbox.scale_base_url,
        GRADIENT_ACCESS_TOKEN="token",
        GRADIENT_WORKSPACE_ID="workspace",
        GRADIENT_API_URL=sandbox.gradient_base_url,
    )
    log = tmp_path / "gunicorn.log"
    command = [
        sys.executable, "-m", "gunicorn", "app:app", "--preload", "--workers", "2",
        "--worker-class", "uvicorn_worker.UvicornWorker", "--bind", "127.0.0.1:0",
        "--chdir", str(EXAMPLE), "--error-logfile", str(log), "--graceful-timeout", "5",
    ]  # fmt: skip
    server = subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        started = time.monotonic()
        while not (log.exists() and log.read_text().count("Booting worker") == 2):
            assert server.poll() is None, log.read_text() if log.exists() else "gunicorn exited"
            assert time.monotonic() - started < 60, log.read_text() if log.exists() else "no log"
            time.sleep(0.05)
        listening = re.search(r"Listening at: (http://\S+)", log.read_text())
        assert listening, log.read_text()
        yield listening[1]
    finally:
        server.send_signal(signal.SIGTERM)
        server.wait(timeout=30)


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
