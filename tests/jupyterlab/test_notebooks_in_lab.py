"""Notebooks 01, 06 and 15 opened in JupyterLab in Chromium from a fresh copy, run with
Run All Cells, then used as a user would: 06's sliders moved and its probe run, its pool
closed; 15's annotator answered twice. What is checked is what the page shows, the files
the notebook writes and the processes the kernel holds."""

from __future__ import annotations

import json
import re
import time

import psutil

from workbench.runtime.resources import memory_held

# name -> parameters added to the notebook's tiny ones (tests/jupyterlab/conftest.py)
NOTEBOOKS = {"01_quickstart": {},
             "06_concurrency_search": {"max_replicas": 2},
             "15_human_annotation": {}}
PROBE_S = 180  # one probe of the tiny plan, pool start included, on a loaded 2-core machine
GONE_S = 30  # processes asked to stop exit within this


def output_text(cell) -> str:
    return "".join("".join(o.get("text", "")) + "".join(o.get("data", {}).get("text/plain", ""))
                   for o in cell.get("outputs", []))


def test_quickstart_runs_in_lab_and_a_rerun_has_nothing_to_do(notebook, lab):
    nb = notebook("01_quickstart.ipynb")
    saved = nb.run_all()
    page = nb.page
    texts = "".join(output_text(c) for c in saved["cells"])
    assert "UserWarning" not in texts, "MetaWorld's gain warning is filtered at its source"
    config = page.locator(".jp-OutputArea-output", has_text="EvalConfig").first
    assert config.locator("details summary").inner_text().startswith("all ")
    result = page.locator(".jp-OutputArea-output", has_text="EvalRun").first
    assert result.locator("table").count() == 1, "the run shows its summary table"
    assert (lab.root / "runs" / "quickstart" / "report.html").is_file()
    result.locator("a", has_text="report").click()  # JupyterLab opens it in a tab of its own
    page.locator(".lm-TabBar-tab", has_text="report.html").wait_for(timeout=20_000)
    report = page.frame_locator(".jp-HTMLViewer iframe")
    assert report.locator("h1").inner_text(timeout=20_000) == "Run report"
    assert report.locator("#summary tr[data-task='ALL']").count() == 1
    assert report.locator("#success-chart svg").count() == 1
    page.locator(".lm-TabBar-tab", has_text=nb.name).click()  # back to the notebook
    assert page.locator(".jp-OutputArea-output img").count() >= 1, "a frame strip shows"
    nb.screenshot("ran")

    saved = nb.run_all()  # again: every episode is recorded, nothing runs
    texts = "".join(output_text(c) for c in saved["cells"])
    assert "already recorded" in texts and "nothing to run" in texts
    assert "0/0" not in texts
    assert page.locator(".jp-OutputArea-output", has_text="nothing ran in this call").count() == 1


# -- 06: the probe panel runs what its sliders show ---------------------------------------


def slider(panel, name: str):
    return panel.locator(".widget-slider", has=panel.page.locator(
        "label.widget-label", has_text=re.compile(f"^{re.escape(name)}$")))


def move_slider(panel, name: str, value: float) -> None:
    """Focus the slider's handle and press the arrow keys until it shows ``value``."""
    handle = slider(panel, name).locator(".noUi-handle")
    handle.focus()
    for _ in range(100):
        now = float(handle.get_attribute("aria-valuenow"))
        if now == value:
            return
        handle.press("ArrowRight" if now < value else "ArrowLeft")
    raise AssertionError(f"slider {name} did not reach {value} (at {now})")


def type_readout(panel, name: str, value: str) -> None:
    """Type ``value`` into the slider's number readout, as a user does for a fine value."""
    readout = slider(panel, name).locator(".widget-readout")
    readout.click()
    readout.press("Control+a")
    readout.type(value)
    readout.press("Enter")


def button(panel, text: str):
    return panel.locator("button", has_text=re.compile(f"^{re.escape(text)}$"))


def kernel_has(panel, label: str) -> None:
    """Wait until the panel's next-probe line, written by the kernel, shows ``label``: a
    slider's value reaches the kernel after the page shows it, and a click sent before it
    arrives would probe the value before."""
    line = panel.locator(".widget-label", has_text="next probe:")
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        if line.inner_text() == f"next probe: {label}":
            return
        time.sleep(0.2)
    raise AssertionError(f"the kernel did not get the sliders' {label}: {line.inner_text()}")


def run_probe(panel) -> str:
    """Click Run probe, wait for it to finish; the status line it leaves."""
    status = panel.locator(".widget-hbox:has(button:text-is('Run probe')) div.widget-label")
    before = status.inner_text()
    button(panel, "Run probe").click()
    deadline = time.monotonic() + PROBE_S
    while time.monotonic() < deadline:
        text = status.inner_text()
        if text != before and not text.startswith("probing") and \
                button(panel, "Run probe").is_enabled():
            return text
        time.sleep(0.5)
    raise AssertionError(f"the probe did not finish within {PROBE_S} s: {status.inner_text()}")


def ask_kernel(nb, code: str) -> str:
    """Add a cell at the end of the notebook, type ``code``, run it; its text output."""
    page = nb.page
    page.locator(".jp-Cell").last.click()
    page.keyboard.press("Escape")
    page.keyboard.press("b")
    page.keyboard.press("Enter")
    page.keyboard.type(code)
    page.keyboard.press("Control+Enter")  # run it in place: it stays the last cell
    nb.wait_idle(60)
    out = page.locator(".jp-CodeCell").last.locator(".jp-OutputArea-output")
    return out.inner_text()


def last_probe(nb) -> dict:
    text = ask_kernel(nb, 'print(__import__("json").dumps({k: panel.session.rows[-1][k] for k in '
                          '("workers", "replicas", "max_batch", "wait_ms", "episodes")}))')
    return json.loads(text.strip().splitlines()[-1])


def wait_gone(processes, what: str) -> None:
    deadline = time.monotonic() + GONE_S
    while time.monotonic() < deadline:
        alive = [p for p in processes if p.is_running() and p.status() != psutil.STATUS_ZOMBIE]
        if not alive:
            return
        time.sleep(0.3)
    raise AssertionError(f"{len(alive)} pool processes still alive {GONE_S} s after {what}")


def test_probe_panel_runs_the_sliders_configuration(notebook, lab, pool_processes):
    nb = notebook("06_concurrency_search.ipynb")
    nb.run_all()
    page = nb.page
    panel = page.locator(".jp-Cell:has(button:text-is('Run probe')) .widget-vbox").first
    panel.scroll_into_view_if_needed()
    kernel = lab.kernel_process(nb.name)
    assert pool_processes(kernel) == [], "the search closed its own pool"
    plan = 4  # tiny: reach-v3 x 4 episodes

    move_slider(panel, "workers", 1)
    move_slider(panel, "replicas", 1)
    move_slider(panel, "max batch", 1)
    type_readout(panel, "wait (ms)", "2.5")
    kernel_has(panel, "1w/1r b1, wait 2.5 ms")
    run_probe(panel)
    probe = last_probe(nb)
    assert probe == {"workers": 1, "replicas": 1, "max_batch": 1, "wait_ms": 2.5,
                     "episodes": plan}, f"the sliders showed 1w/1r b1, 2.5 ms; it ran {probe}"

    move_slider(panel, "workers", 2)
    move_slider(panel, "replicas", 2)
    move_slider(panel, "max batch", 3)
    kernel_has(panel, "2w/2r b3, wait 2.5 ms")
    status = run_probe(panel)
    assert "2w/2r b3" in status and f"{plan} episodes" in status, status
    probe = last_probe(nb)
    assert probe == {"workers": 2, "replicas": 2, "max_batch": 3, "wait_ms": 2.5,
                     "episodes": plan}, f"the sliders showed 2w/2r b3, 2.5 ms; it ran {probe}"
    rows = panel.locator("table.probe-table tbody tr")
    shown = [rows.nth(k).locator("td").all_inner_texts() for k in range(rows.count())]
    assert [r[1] for r in shown][-2:] == ["manual", "manual"]
    assert [r[2] for r in shown][-2:] == ["1w/1r b1", "2w/2r b3"]
    assert all(r[7] == str(plan) for r in shown[-2:]), "each probe ran the whole plan"
    nb.screenshot("after-sliders")

    held = pool_processes(kernel)
    assert len(held) == 4, "the warm pool: 2 workers and 2 replicas"
    memory = panel.locator(".widget-label", has_text="warm pool").inner_text()
    assert "2 workers, 2 replicas" in memory, memory
    shown_gib = float(re.search(r"([\d.]+) GiB", memory).group(1))
    measured_gib = memory_held([p.pid for p in held]) / 2**30
    assert 0.5 * measured_gib < shown_gib < 1.5 * measured_gib, (memory, measured_gib)

    button(panel, "Close pool").click()
    wait_gone(held, "Close pool")
    page.wait_for_function("() => document.body.innerText.includes('no pool running')",
                           timeout=10_000)
    assert button(panel, "Close pool").is_disabled()

    run_probe(panel)  # a pool again, then the kernel shut down from the menu
    held = pool_processes(kernel)
    assert len(held) == 4
    nb.menu("Kernel", "Shut Down Kernel")
    wait_gone(held + [kernel], "the kernel's shutdown")


# -- 15: the annotator saves from a fresh clone --------------------------------------------


def test_annotator_saves_from_a_fresh_clone(notebook, lab):
    nb = notebook("15_human_annotation.ipynb")
    nb.run_all()
    page = nb.page
    answers = lab.root / "runs" / "annotation" / "annotations" / "your-name.jsonl"
    panel = page.locator(".jp-Cell:has(button:text-is('invalid')) .widget-vbox").first
    panel.scroll_into_view_if_needed()
    counter = panel.locator(".widget-label", has_text="answered")
    total = int(re.search(r"/ (\d+) answered", counter.inner_text()).group(1))
    assert counter.inner_text() == f"0 / {total} answered"
    assert total > 2

    for k, choice in enumerate(["A", "B"], start=1):
        videos = panel.locator("video")
        assert videos.count() == 2, "both rollouts of the pair have a video"
        page.wait_for_function("els => els.every(v => v.readyState >= 1 && v.videoWidth > 0)",
                               arg=videos.element_handles(), timeout=20_000)
        button(panel, choice).click()
        try:
            page.wait_for_function(
                f"() => document.body.innerText.includes('{k} / {total} answered')",
                timeout=20_000)
        except Exception:
            status = panel.locator(".widget-label").last.inner_text()
            raise AssertionError(f"after clicking {choice} the counter shows "
                                 f"{counter.inner_text()!r}; the panel says {status!r}") from None
    nb.screenshot("after-two-clicks")
    rows = [json.loads(line) for line in answers.read_text().splitlines()]
    assert [r["choice"] for r in rows] == ["A", "B"]
    assert [r["annotator"] for r in rows] == ["your-name"] * 2
    assert rows[0]["pair_id"] != rows[1]["pair_id"], "the next pair came after an answer"
