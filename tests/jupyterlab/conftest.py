"""A real JupyterLab on loopback and Debian's Chromium driven by Playwright, over a fresh
copy of the notebooks, as a user who has just cloned the repository would open them.

The copy is what ``papermill -f experiments/tiny/<notebook>.yaml`` would run: each
notebook's tiny parameters (plus any a test adds) injected after its parameters cell,
in a folder laid out like a checkout (``notebooks/``, ``figures/``, nothing else), so
``../runs`` and ``../figures`` start out missing as they do in a fresh clone. The
server runs with its own settings, workspaces and runtime folders; its notebooks are
not windowed, so every cell is in the page. On a failure, the page is saved as a
screenshot under ``out/jupyterlab/`` (the path is printed in the report), and
``WORKBENCH_SCREENSHOTS=<folder>`` keeps one of each test's checkpoints too.
"""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import psutil
import pytest

CHROMIUM = Path("/usr/bin/chromium")
if not CHROMIUM.exists():
    pytest.skip(f"no Chromium at {CHROMIUM} (scripts/install.sh installs Debian's chromium)",
                allow_module_level=True)
sync_api = pytest.importorskip("playwright.sync_api", reason="playwright is not installed")

from papermill.iorw import load_notebook_node  # noqa: E402
from papermill.parameterize import parameterize_notebook  # noqa: E402

from workbench.reproduce import notebook_parameters, notebook_paths  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
FAILURES = ROOT / "out" / "jupyterlab"
TOKEN = "workbench-browser-test"
SERVER_START_S = 60
CELL_RUN_S = 240  # the slowest tiny notebook here runs in well under a minute
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update",
                 "--disable-sync"]
SETTINGS = {  # no windowing (every cell in the DOM), no news or update pop-ups
    "@jupyterlab/notebook-extension/tracker.jupyterlab-settings":
        {"windowingMode": "none", "autoStartDefaultKernel": True},
    "@jupyterlab/apputils-extension/notification.jupyterlab-settings":
        {"fetchNews": "false", "checkForUpdates": False},
}


def fresh_copy(root: Path, parameters: dict[str, dict]) -> Path:
    """``root`` laid out like a fresh clone: ``notebooks/`` with each named notebook's
    tiny parameters and ``parameters[name]`` injected, and ``figures/``."""
    (root / "notebooks").mkdir(parents=True)
    (root / "figures").mkdir()
    for path in notebook_paths([f"{name}.ipynb" for name in parameters]):
        values = notebook_parameters(path, "tiny") | parameters[path.stem]
        values = {k: v for k, v in values.items() if k not in ("output_dir", "figures_dir")}
        nb = parameterize_notebook(load_notebook_node(str(path)), values)
        (root / "notebooks" / path.name).write_text(json.dumps(nb, indent=1))
    return root


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Lab:
    """A JupyterLab server (a subprocess) serving ``root``."""

    def __init__(self, root: Path, home: Path) -> None:
        self.root, self.port = root, free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        for name, values in SETTINGS.items():
            target = home / "settings" / name
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(json.dumps(values))
        env = os.environ | {"JUPYTERLAB_SETTINGS_DIR": str(home / "settings"),
                            "JUPYTERLAB_WORKSPACES_DIR": str(home / "workspaces"),
                            "JUPYTER_RUNTIME_DIR": str(home / "runtime"),
                            "JUPYTER_CONFIG_DIR": str(home / "config"),
                            "JUPYTER_DATA_DIR": str(home / "data"),
                            "IPYTHONDIR": str(home / "ipython")}
        self.log = (home / "server.log").open("w")
        self.process = subprocess.Popen(
            [sys.executable, "-m", "jupyterlab", "--no-browser", "--allow-root",
             "--ip=127.0.0.1", f"--port={self.port}", f"--IdentityProvider.token={TOKEN}",
             f"--ServerApp.root_dir={root}", "--LabApp.news_url=None",
             "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate"],
            cwd=root, env=env, stdout=self.log, stderr=subprocess.STDOUT)
        self._wait_ready(home / "server.log")

    def _wait_ready(self, log: Path) -> None:
        deadline = time.monotonic() + SERVER_START_S
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"jupyter lab exited ({self.process.returncode}):\n"
                                   + log.read_text()[-3000:])
            try:
                self.api("status")
                return
            except OSError:
                time.sleep(0.3)
        raise RuntimeError(f"jupyter lab did not answer within {SERVER_START_S} s:\n"
                           + log.read_text()[-3000:])

    def api(self, path: str) -> object:
        with urllib.request.urlopen(f"{self.url}/api/{path}?token={TOKEN}", timeout=5) as r:
            return json.loads(r.read())

    def sessions(self, notebook: str) -> list[dict]:
        """The server's kernel sessions of ``notebook`` (its file name)."""
        return [s for s in self.api("sessions")
                if s["path"].endswith(notebook) and s.get("kernel")]

    def kernel_process(self, notebook: str) -> psutil.Process:
        """The kernel process of the open notebook ``notebook`` (its file name)."""
        sessions = self.sessions(notebook)
        assert sessions, f"no kernel session for {notebook}"
        kernel_id = sessions[0]["kernel"]["id"]
        for proc in psutil.Process(self.process.pid).children(recursive=True):
            try:
                if any(f"kernel-{kernel_id}.json" in part for part in proc.cmdline()):
                    return proc
            except psutil.Error:
                continue
        raise AssertionError(f"no process of kernel {kernel_id}")

    def close(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(timeout=10)
        for proc in psutil.Process().children(recursive=True):  # stray kernels
            if proc.pid != os.getpid():
                try:
                    if "ipykernel" in " ".join(proc.cmdline()):
                        proc.kill()
                except psutil.Error:
                    pass
        self.log.close()


class Notebook:
    """One notebook open in a browser tab of the lab, driven as a user would."""

    def __init__(self, lab: Lab, page, name: str) -> None:
        self.lab, self.page, self.name = lab, page, name
        self.file = lab.root / "notebooks" / name

    def open(self) -> "Notebook":
        workspace = Path(self.name).stem  # a workspace of its own: no other notebook restored
        self.page.goto(f"{self.lab.url}/lab/workspaces/{workspace}/tree/notebooks/{self.name}"
                       f"?reset&token={TOKEN}")
        self.page.wait_for_selector(".jp-Notebook .jp-Cell", timeout=SERVER_START_S * 1000)
        deadline = time.monotonic() + SERVER_START_S
        while not self.lab.sessions(self.name):  # the kernel starts; say yes if asked which
            select = self.page.locator(".jp-Dialog button", has_text="Select")
            if select.count():
                select.first.click()
            assert time.monotonic() < deadline, f"no kernel started for {self.name}"
            time.sleep(0.3)
        self.wait_idle(SERVER_START_S)
        return self

    def menu(self, top: str, item: str) -> None:
        """Click ``top`` in the menu bar, then ``item`` in its menu."""
        self.page.locator(".lm-MenuBar-item", has_text=re.compile(f"^{top}$")).click()
        self.page.locator(".lm-Menu-item:visible", has_text=item).first.click()

    def wait_idle(self, timeout_s: float = CELL_RUN_S) -> None:
        """Until the kernel is idle and no cell is queued or running."""
        self.page.wait_for_function(
            """() => {
                const status = document.querySelector('.jp-Notebook-ExecutionIndicator');
                const prompts = [...document.querySelectorAll('.jp-Notebook .jp-InputPrompt')];
                return status && status.dataset.status === 'idle'
                    && !prompts.some(p => p.textContent.includes('*'));
            }""", timeout=timeout_s * 1000)

    def run_all(self) -> dict:
        """Run > Run All Cells, wait until it is done, save, and return the saved notebook;
        a cell that raised fails the test with its error."""
        self.menu("Run", "Run All Cells")
        self.page.wait_for_function(
            "() => [...document.querySelectorAll('.jp-Notebook .jp-InputPrompt')]"
            ".some(p => /\\[[*\\d]+\\]/.test(p.textContent))", timeout=30_000)
        self.wait_idle()
        return self.save()

    def save(self) -> dict:
        before = self.file.stat().st_mtime_ns
        self.menu("File", "Save Notebook")
        deadline = time.monotonic() + 30
        while self.file.stat().st_mtime_ns == before and time.monotonic() < deadline:
            time.sleep(0.2)
        saved = self._read_saved(deadline)
        errors = [(k, o) for k, c in enumerate(saved["cells"]) for o in c.get("outputs", [])
                  if o.get("output_type") == "error"]
        assert not errors, (f"{self.name}: cell {errors[0][0]} raised "
                            f"{errors[0][1]['ename']}: {errors[0][1]['evalue']}")
        unrun = [k for k, c in enumerate(saved["cells"])
                 if c["cell_type"] == "code" and c.get("execution_count") is None]
        assert not unrun, f"{self.name}: cells {unrun} did not run"
        return saved

    def _read_saved(self, deadline: float) -> dict:
        """The saved notebook once the server has finished writing it: the file's mtime
        moves when the server truncates it, before the JSON is in (a fresh clone's CI run
        read it empty once)."""
        while True:
            text = self.file.read_text()
            try:
                return json.loads(text)
            except json.JSONDecodeError:
                if time.monotonic() >= deadline:
                    raise AssertionError(f"{self.name}: saved file is not JSON after 30 s "
                                         f"({len(text)} characters)") from None
                time.sleep(0.2)

    def screenshot(self, label: str) -> Path | None:
        folder = os.environ.get("WORKBENCH_SCREENSHOTS")
        if not folder:
            return None
        path = Path(folder) / f"{Path(self.name).stem}-{label}.png"
        path.parent.mkdir(parents=True, exist_ok=True)
        self.page.screenshot(path=str(path))
        return path


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    if report.when == "call":
        item.failed_call = report.failed


@pytest.fixture(scope="module")
def lab(tmp_path_factory, request):
    """A JupyterLab over a fresh copy of the notebooks the module names in its
    ``NOTEBOOKS`` (name -> parameters added to the tiny ones)."""
    root = fresh_copy(tmp_path_factory.mktemp("clone"), request.module.NOTEBOOKS)
    server = Lab(root, tmp_path_factory.mktemp("lab-home"))
    yield server
    server.close()


@pytest.fixture(scope="module")
def browser():
    with sync_api.sync_playwright() as p:
        chromium = p.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        yield chromium.new_context(viewport={"width": 1400, "height": 1000})
        chromium.close()


@pytest.fixture
def notebook(lab, browser, request):
    """Opens a notebook of the lab in a new tab: ``notebook("06_x.ipynb")``. A failed test
    leaves a screenshot of each of its tabs in out/jupyterlab/."""
    opened: list[Notebook] = []

    def open_notebook(name: str) -> Notebook:
        opened.append(Notebook(lab, browser.new_page(), name).open())
        return opened[-1]

    yield open_notebook
    for nb in opened:
        if getattr(request.node, "failed_call", False):
            FAILURES.mkdir(parents=True, exist_ok=True)
            shot = FAILURES / f"{request.node.name}-{Path(nb.name).stem}.png"
            nb.page.screenshot(path=str(shot), full_page=True)
            print(f"screenshot of the failure: {shot}")
        nb.page.close()


def _pool_processes(kernel: psutil.Process) -> list[psutil.Process]:
    found = []
    for server in kernel.children():
        try:
            if "forkserver" in " ".join(server.cmdline()):
                found += [p for p in server.children() if p.is_running()
                          and p.status() != psutil.STATUS_ZOMBIE]
        except psutil.Error:
            continue
    return found


@pytest.fixture
def pool_processes():
    """``pool_processes(kernel)``: the live pool processes of a kernel (the children of
    its multiprocessing fork server)."""
    return _pool_processes
