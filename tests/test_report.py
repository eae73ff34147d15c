"""`autotune report` from a database a real search on PoCL wrote, opened in a real
headless Chromium."""

import io
import json
import shutil
import sqlite3
import xml.etree.ElementTree as ElementTree
from html.parser import HTMLParser
from pathlib import Path

import pytest
from PIL import Image

from autotune.store import Store
from tests.browser import open_page
from tests.conftest import cli_json, run_cli

KINDS = ("seed-study", "roofline", "convergence", "times", "importance")
WIDTHS = ("F=3", "F=5")


def url(path: Path) -> str:
    return f"sqlite:///{path}"


@pytest.fixture(scope="module")
def tuned_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("db") / "tuned.db"
    cli_json(
        "search",
        "-d",
        "0",
        "-s",
        "40x24",
        "-f",
        "3,5",
        "--trials",
        "11",  # the 9 presets a CPU measures, then the sampler's
        "--sampler",
        "random",
        "--db",
        url(path),
    )
    return path


class _References(HTMLParser):
    """Every src and href of a page, and the tags it uses."""

    def __init__(self) -> None:
        super().__init__()
        self.images: list[str] = []
        self.links: list[str] = []
        self.tags: set[str] = set()

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.add(tag)
        for name, value in attrs:
            if name == "src" and value:
                self.images.append(value)
            elif name == "href" and value:
                self.links.append(value)


def references(page: Path) -> _References:
    parser = _References()
    parser.feed(page.read_text())
    return parser


def report(*args: str) -> tuple[int, str, str]:
    result = run_cli("report", *args)
    return result.returncode, result.stdout, result.stderr


def assert_real_png(path: Path) -> None:
    with Image.open(path) as image:
        image.verify()
    with Image.open(path) as image:
        assert image.format == "PNG" and image.width >= 300 and image.height >= 200, path
        colours = image.convert("RGB").getcolors(maxcolors=1 << 16)
        assert colours is None or len(colours) > 20, f"{path} is (nearly) one flat colour"


def assert_not_blank(screenshot: bytes) -> None:
    with Image.open(io.BytesIO(screenshot)) as image:
        grey = image.convert("L")
        inked = sum(grey.histogram()[:200])  # pixels clearly darker than the white page
        assert image.width >= 800 and inked > 0.01 * grey.width * grey.height, "the screenshot is blank"


def assert_one_line_error(code: int, stderr: str, words: str) -> None:
    assert code == 2, stderr
    lines = stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("autotune: error:") and words in lines[0], stderr
    assert "Traceback" not in stderr


def test_page_beside_an_export_opens_in_a_real_browser(tuned_db: Path, tmp_path: Path) -> None:
    out = tmp_path / "page"
    cli_json("export", "-d", "0", "--db", url(tuned_db), "--out", str(out))
    code, stdout, stderr = report("--db", url(tuned_db), "--out", str(out))
    assert code == 0, stderr
    page = out / "index.html"
    assert stdout.strip() == str(page)
    found = references(page)
    assert "script" not in found.tags and "link" not in found.tags  # nothing to fetch but the figures
    for reference in found.images + found.links:
        if not reference.startswith("#"):
            assert "://" not in reference and not reference.startswith("/"), reference
            assert (out / reference).is_file(), f"the page names {reference}, which is not there"
    assert {"convolve_f3.cl", "convolve_f3.json", "convolve_f5.cl", "convolve_f5.json"} <= set(found.links)
    figures = sorted(out.glob("*.png"))
    assert sorted(out / name for name in found.images) == figures
    for kind in KINDS:
        assert any(f.name.startswith(f"{kind}_") for f in figures), f"no {kind} figure"
    for figure in figures:
        assert_real_png(figure)
    text = page.read_text()
    assert "Roofline ceilings: measured now on device 0 of this machine" in text

    seen = open_page(page)
    assert seen.errors == []
    assert all(r.startswith("file://") for r in seen.requests), seen.requests
    assert len(seen.images) == len(found.images) and all(
        i["complete"] and i["width"] > 0 for i in seen.images
    )
    assert "Best kernels" in seen.text and all(width in seen.text for width in WIDTHS)
    assert_not_blank(seen.screenshot)


def test_browser_check_sees_a_broken_page(tmp_path: Path) -> None:
    """The browser check itself: a missing image and a script error are reported."""
    page = tmp_path / "broken.html"
    page.write_text(
        '<html><body><p>x</p><img src="missing.png"><script>undefined_call();</script></body></html>'
    )
    seen = open_page(page)
    assert any("undefined_call" in e for e in seen.errors), seen.errors
    assert any("missing.png" in e or "ERR_FILE_NOT_FOUND" in e for e in seen.errors), seen.errors
    assert [i["width"] for i in seen.images] == [0]


def test_svg_figures_and_one_figure_alone(tuned_db: Path, tmp_path: Path) -> None:
    svg = tmp_path / "svg"
    code, _, stderr = report(
        "--db", url(tuned_db), "--out", str(svg), "--figure-format", "svg", "--no-measure"
    )
    assert code == 0, stderr
    found = references(svg / "index.html")
    assert found.images and all(name.endswith(".svg") for name in found.images)
    for name in found.images:
        root = ElementTree.parse(svg / name).getroot()
        assert root.tag == "{http://www.w3.org/2000/svg}svg"
        assert len(root.findall(".//{http://www.w3.org/2000/svg}path")) > 10, name
    seen = open_page(svg / "index.html")
    assert seen.errors == [] and len(seen.images) == len(found.images)
    assert all(i["complete"] and i["width"] > 0 for i in seen.images)

    alone = tmp_path / "alone"
    code, stdout, stderr = report(
        "--db",
        url(tuned_db),
        "--out",
        str(alone),
        "--figure",
        "roofline",
        "--bandwidth",
        "40",
        "--peak-gflops",
        "90",
    )
    assert code == 0, stderr
    assert [p.name for p in alone.iterdir()] == ["roofline_dev1.png"] and stdout.strip().endswith(
        "roofline_dev1.png"
    )
    assert_real_png(alone / "roofline_dev1.png")


def test_json_for_scripts(tuned_db: Path, tmp_path: Path) -> None:
    data = cli_json(
        "report", "--db", url(tuned_db), "--out", str(tmp_path), "--format", "json", "--no-measure"
    )
    assert json.loads((tmp_path / "report.json").read_text()) == data
    assert not list(tmp_path.glob("*.png"))
    assert data["meta"]["database"] == url(tuned_db)
    (device,) = data["devices"]
    assert device["type"] == "CPU" and device["ceilings"]["source"].startswith("not measured")
    assert device["index"] == 0  # the device is on this machine: `-d 0`
    assert [row["problem"] for row in device["best"]] == list(WIDTHS)
    for row in device["best"]:
        assert (
            row["time_ms"] > 0
            and row["gflops"] > 0
            and row["intensity"] > 0
            and isinstance(row["config"], dict)
        )
        study = row["seed_study"]
        assert study["presets_ms"]["baseline"] == study["baseline_ms"]
        assert study["speedup"]["tuned"] == pytest.approx(study["baseline_ms"] / row["time_ms"])
    (run,) = data["runs"]
    assert run["status"] == "finished" and [p["problem"] for p in run["problems"]] == list(WIDTHS)
    for problem in run["problems"]:
        trials = problem["trials"]
        assert [t["trial"] for t in trials] == list(range(1, len(trials) + 1))
        assert trials[0]["origin"] == "preset" and problem["origins"]["preset"] >= 1
        bests = [t["best_ms"] for t in trials if t["best_ms"] is not None]
        assert bests == sorted(bests, reverse=True)  # best so far never rises
        assert isinstance(problem["failures"], list) and set(problem["importance"]) >= {"knobs"}

    narrowed = cli_json(
        "report", "--db", url(tuned_db), "--out", str(tmp_path), "--run", "1", "-d", "0", "--json"
    )
    assert [r["run_id"] for r in narrowed["runs"]] == [1] and len(narrowed["devices"]) == 1


def test_missing_data_said_in_words(tuned_db: Path, tmp_path: Path) -> None:
    """No naive-kernel time: no seed-study figure, a sentence instead; a failed trial
    shows under its status with its error; a device of another machine has no ceilings
    to measure."""
    edited = tmp_path / "edited.db"
    shutil.copy(tuned_db, edited)
    with sqlite3.connect(edited) as connection:
        connection.execute(
            "DELETE FROM autotune_trials WHERE origin = 'preset'"
            " AND id NOT IN (SELECT trial_id FROM autotune_best)"
        )
        connection.execute(
            "UPDATE autotune_trials SET status = 'compile_error', time_ms = NULL,"
            " error = 'error: use of undeclared identifier tile'"
            " WHERE id = (SELECT MAX(id) FROM autotune_trials WHERE origin = 'sampler')"
        )
        connection.execute("UPDATE autotune_devices SET driver = 'another machine''s driver'")
    out = tmp_path / "page"
    code, _, stderr = report("--db", url(edited), "--out", str(out))
    assert code == 0, stderr
    text = (out / "index.html").read_text()
    assert not list(out.glob("seed-study_*")) and "no measurement of the naive kernel" in text
    assert "compile_error" in text and "use of undeclared identifier tile" in text
    assert "Roofline ceilings: not available: the device is not on this machine" in text
    assert "not on this machine" in text and list(out.glob("roofline_*.png"))


def test_empty_database_gives_a_page_that_says_so(tmp_path: Path) -> None:
    empty = tmp_path / "empty.db"
    Store(url(empty)).close()
    out = tmp_path / "page"
    code, _, stderr = report("--db", url(empty), "--out", str(out))
    assert code == 0, stderr
    assert [p.name for p in out.iterdir()] == ["index.html"]
    seen = open_page(out / "index.html")
    assert seen.errors == [] and "no tuned kernels and no search runs yet" in seen.text


def test_bad_input_is_one_line(tuned_db: Path, tmp_path: Path) -> None:
    db = url(tuned_db)
    a_file = tmp_path / "a-file"
    a_file.write_text("")
    for args, words in (
        (["--run", "999"], "no run 999"),
        (["--device", "99"], "unknown device 99"),
        (["--figure", "pie-chart"], "unknown figure: 'pie-chart'"),
        (["--bandwidth", "-1"], "--bandwidth must be a positive number"),
    ):
        out = tmp_path / "out"
        assert_one_line_error(*report("--db", db, "--out", str(out), "--no-measure", *args)[::2], words)
        assert not out.exists()  # nothing written, not even the folder
    assert_one_line_error(*report("--db", db, "--out", str(a_file))[::2], "is a file, not a folder")
    assert_one_line_error(*report("--db", db, "--out", str(a_file / "sub"))[::2], "cannot create the folder")
    assert_one_line_error(
        *report("--db", url(tmp_path / "none.db"), "--out", str(tmp_path / "x"))[::2], "no database"
    )
