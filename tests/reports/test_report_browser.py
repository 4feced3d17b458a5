"""The report and an interaction-history page of a real small evaluation, opened in a real
headless Chromium (Debian's, with JavaScript off): the tables render, the counts and
intervals are right, the links resolve, the page is not blank."""

import math
import urllib.parse
from pathlib import Path

import numpy as np
import pytest

CHROMIUM = Path("/usr/bin/chromium")
if not CHROMIUM.exists():
    pytest.skip(f"no Chromium at {CHROMIUM} (scripts/install.sh installs Debian's chromium)",
                allow_module_level=True)
sync_api = pytest.importorskip("playwright.sync_api", reason="playwright is not installed")

import workbench  # noqa: E402
from workbench.records import load_results  # noqa: E402
from workbench.reports import write_report  # noqa: E402

Z95 = 1.959963984540054
MIN_PIXEL_STD = 5.0  # a white page has 0; a page of text and tables has tens
RUN = {"benchmark": "metaworld", "suite": "MT1:reach-v3", "image_size": 32, "progress": False,
       "interactions": True}


def wilson_text(k: int, n: int) -> str:
    p = k / n
    centre = (2 * n * p + Z95**2) / (2 * (n + Z95**2))
    half = Z95 * math.sqrt(Z95**2 + 4 * n * p * (1 - p)) / (2 * (n + Z95**2))
    return f"{centre - half:.2f} to {centre + half:.2f}"


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    """Two expert episodes (the first with a video) and one zero-policy episode cut at 20
    steps, in one records file; the report written from it as `workbench report` does."""
    out = tmp_path_factory.mktemp("eval")
    workbench.run(RUN | {"policy": "expert", "episodes": 2, "video": 1, "output_dir": str(out)})
    workbench.run(RUN | {"policy": "zero", "max_steps": 20, "output_dir": str(out)})
    results = load_results(out / "records.sqlite")
    _, page = write_report(results, out / "report")
    return page, results


@pytest.fixture(scope="module")
def chromium():
    with sync_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=str(CHROMIUM), args=["--no-sandbox"])
        yield browser
        browser.close()


@pytest.fixture(scope="module")
def browser(chromium):
    """Pages open with JavaScript off: a report needs none."""
    return chromium.new_context(java_script_enabled=False, viewport={"width": 1400, "height": 1000})


@pytest.fixture(scope="module")
def player(chromium):
    """A context with JavaScript on, to ask a <video> element whether it plays."""
    return chromium.new_context(viewport={"width": 1400, "height": 1000})


def video_duration(player, path: Path) -> float:
    """Seconds of the report's first video, as Chromium decodes it (waits for its metadata)."""
    page = player.new_page()
    page.goto(path.as_uri())
    video = page.locator("figure.video video").first
    video.evaluate("v => v.load()")
    page.wait_for_function("() => document.querySelector('figure.video video').readyState >= 1",
                           timeout=20_000)
    duration = video.evaluate("v => v.duration")
    page.close()
    return duration


def open_page(context, path: Path):
    page = context.new_page()
    requests: list[str] = []
    page.on("request", lambda request: requests.append(request.url))
    page.goto(path.as_uri())
    return page, requests


def shown(locator) -> None:
    assert locator.is_visible()
    box = locator.bounding_box()
    assert box is not None and box["width"] > 0 and box["height"] > 0


def cell(row, name: str) -> str:
    return row.locator(f"td.{name}").inner_text().strip()


def linked_file(link) -> Path:
    """The file a link's (relative) href resolves to in the browser."""
    url = urllib.parse.urlparse(link.evaluate("a => a.href"))
    assert url.scheme == "file"
    return Path(urllib.parse.unquote(url.path))


def test_report_tables_render_with_counts_intervals_and_links(report, browser, tmp_path):
    html_path, results = report
    page, requests = open_page(browser, html_path)
    expert = page.locator("#summary tr[data-task='reach-v3'][data-policy='expert']")
    zero = page.locator("#summary tr[data-task='reach-v3'][data-policy='zero']")
    for row in (expert, zero):
        shown(row)
    assert [cell(expert, k) for k in ("scored", "successes", "task_failures", "infra_errors")] \
        == ["2", "2", "0", "0"]
    assert cell(expert, "interval") == wilson_text(2, 2) == "0.34 to 1.00"
    assert [cell(zero, k) for k in ("scored", "successes", "task_failures")] == ["1", "0", "1"]
    assert cell(zero, "interval") == wilson_text(0, 1) == "0.00 to 0.79"
    assert page.locator("#summary tr[data-task='ALL']").count() == 2  # one per policy

    usage = page.locator("#usage tr[data-task='ALL'][data-policy='zero']")
    shown(usage)
    assert cell(usage, "controls") == cell(usage, "policy_calls") == "20"

    episodes = page.locator("#episodes tr[data-episode]")
    assert episodes.count() == len(results) == 3
    for i in range(3):
        shown(episodes.nth(i))
    videos = page.locator("#episodes a.video")
    assert videos.count() == 1
    video = linked_file(videos.first)
    recorded = Path(results["video_path"].dropna().iloc[0])
    assert html_path.parent.resolve() in video.resolve().parents, "a copy inside the report"
    assert video.read_bytes() == recorded.read_bytes() and video.stat().st_size > 0
    assert page.locator("#episodes a.history").count() == 3

    shot = tmp_path / "report.png"
    page.screenshot(path=str(shot), full_page=True)
    from PIL import Image

    assert np.asarray(Image.open(shot).convert("L"), dtype=float).std() > MIN_PIXEL_STD
    assert requests == [html_path.as_uri()]  # no external resources


def test_interaction_history_page_renders_one_block_per_call(report, browser):
    html_path, results = report
    page, _ = open_page(browser, html_path)
    row = page.locator("#episodes tr[data-episode]").filter(has_text="ZeroPolicy")
    history, requests = open_page(browser, linked_file(row.locator("a.history")))
    note = history.locator("p.pixels")
    shown(note)
    assert note.inner_text().startswith("Pixels are not included")
    counters = history.locator("#counters tr").nth(1)
    shown(counters)
    calls = int(cell(counters, "policy_calls"))
    (zero,) = results.loc[results["policy"] == "zero", "policy_calls"]
    assert calls == zero == 20
    blocks = history.locator("section.call")
    assert blocks.count() == calls
    for i in (0, calls - 1):
        shown(blocks.nth(i))
    assert blocks.nth(calls - 1).locator("h3").inner_text() == f"call {calls - 1} at step 19"
    assert history.locator("p.checks").inner_text() == "The counters agree with the calls below."
    assert cell(history.locator("#termination tr").nth(1), "reason") == "step_limit"
    assert len(requests) == 1


# -- a report that stands alone: its folder copied, or one self-contained file ----------


@pytest.fixture(scope="module")
def recorded(tmp_path_factory):
    """Records of two policies, the expert's first episode filmed, written by the CLI's
    own road (``workbench eval`` writes report_from_records into the output folder)."""
    out = tmp_path_factory.mktemp("records")
    workbench.run(RUN | {"policy": "expert", "episodes": 2, "video": 1, "output_dir": str(out)})
    workbench.run(RUN | {"policy": "zero", "max_steps": 20, "seed": 3, "output_dir": str(out)})
    return out / "records.sqlite"


def local_targets(page) -> list[str]:
    """Every href and src of the page."""
    return page.evaluate("() => [...document.querySelectorAll('[href],[src]')]"
                         ".map(e => e.getAttribute('href') || e.getAttribute('src'))")


def check_standalone_content(page, records):
    """What a shared report must say on its own: configuration, provenance, chart."""
    import subprocess

    config = page.locator("#config")
    shown(config)
    runs = records["run_id"].unique().tolist()
    assert page.locator("#config tr[data-key='image_size'] td.value").all_inner_texts() == \
        ["32", "32"]
    assert page.locator("#config tr[data-key='seed'] td.value").all_inner_texts() == ["0", "3"]
    assert page.locator("#config tr[data-key='pool.workers']").count() == 1
    provenance = page.locator("#provenance")
    shown(provenance)
    head = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True,
                          cwd=Path(workbench.__file__).parent).stdout.strip()
    commit_row = provenance.locator("tr[data-key='commit'] td")
    assert commit_row.all_inner_texts()[1:] == [head] * (len(runs) + 1)
    version = provenance.locator("tr[data-key='workbench_version'] td")
    assert version.all_inner_texts()[1:] == [workbench.__version__] * (len(runs) + 1)
    assert page.locator("#method tr[data-key='source_hash']").count() == 1
    assert "not recorded" not in page.locator("#method").inner_text()
    chart = page.locator("#success-chart svg")
    shown(chart)
    assert chart.locator("text", has_text="success rate").count() >= 1
    poster = page.locator("#episodes a.video img.poster")
    assert poster.count() == 1
    assert poster.evaluate("img => img.complete && img.naturalWidth") > 0


def test_a_report_folder_works_when_copied_elsewhere(recorded, browser, player, tmp_path):
    import shutil

    from workbench.reports import report_from_records

    _, html_path = report_from_records(recorded, out_dir=tmp_path / "made")
    copy = shutil.copytree(html_path.parent, tmp_path / "elsewhere" / "report")
    shutil.rmtree(html_path.parent)  # the original is gone: only the copy can answer
    page, requests = open_page(browser, copy / "report.html")
    check_standalone_content(page, load_results(recorded))
    targets = [t for t in local_targets(page) if not t.startswith(("data:", "#"))]
    assert len(targets) >= 4, targets  # a video link, a player and three history links
    for target in targets:
        assert not urllib.parse.urlparse(target).scheme, f"{target} leaves the folder"
        resolved = (copy / urllib.parse.unquote(target)).resolve()
        assert copy.resolve() in resolved.parents and resolved.is_file(), target
    assert page.locator("figure.video video").count() == 1
    assert video_duration(player, copy / "report.html") > 0
    assert all(r.startswith(copy.resolve().as_uri()) for r in requests if not
               r.startswith("data:"))


def test_a_self_contained_report_is_one_file_that_carries_everything(recorded, browser, player,
                                                                     tmp_path):
    from workbench.cli import main

    assert main(["report", str(recorded), "--out", str(tmp_path / "one"),
                 "--self-contained"]) == 0
    alone = tmp_path / "shared" / "report.html"
    alone.parent.mkdir()
    (tmp_path / "one" / "report.html").rename(alone)
    assert sorted(p.name for p in alone.parent.iterdir()) == ["report.html"]
    page, requests = open_page(browser, alone)
    check_standalone_content(page, load_results(recorded))
    targets = local_targets(page)
    assert all(t.startswith(("data:", "#")) for t in targets), targets
    assert [r for r in requests if not r.startswith("data:")] == [alone.as_uri()]
    video = page.locator("figure.video video")
    assert video.get_attribute("src").startswith("data:video/mp4;base64,")
    assert video_duration(player, alone) > 0
    histories = page.locator("section.history")
    assert histories.count() == 3
    row = page.locator("#episodes tr[data-episode]").filter(has_text="ZeroPolicy")
    anchor = row.locator("a.history").get_attribute("href")
    section = page.locator(f"section.history{anchor}")
    assert section.locator("h3").first.inner_text() == "Interaction history"
    assert section.locator("section.call").count() == 20
