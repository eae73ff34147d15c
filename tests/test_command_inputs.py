"""Commands given input they cannot use: one line, a non-zero exit, and nothing written,
created or replaced; and the files a command writes never replace what is not a file."""

import json
import os
import shutil

import numpy as np
import pytest

from autotune.files import write_file
from tests.conftest import cli_json, run_cli


def one_line_error(result, code: int = 2) -> str:
    assert result.returncode == code, (result.stdout, result.stderr)
    lines = result.stderr.rstrip("\n").splitlines()  # no blank line before it
    assert len(lines) == 1 and lines[0].startswith("autotune: error:"), result.stderr
    return lines[0]


@pytest.fixture
def image(tmp_path):
    path = tmp_path / "img.npy"
    np.save(path, np.random.default_rng(0).random((20, 24), dtype=np.float32))
    return path


def test_output_through_a_link_replaces_the_file_it_names_and_keeps_the_link(tmp_path, image):
    target, link = tmp_path / "real.npy", tmp_path / "link.npy"
    target.write_bytes(b"old")
    link.symlink_to(target)
    result = run_cli("convolve", str(image), str(link), "--filter", "box:3")
    assert result.returncode == 0, result.stderr
    assert link.is_symlink() and os.readlink(link) == str(target)
    assert np.load(target).shape == (18, 22)


def test_output_onto_a_pipe_is_refused_and_the_pipe_stays(tmp_path, image):
    pipe = tmp_path / "pipe"
    os.mkfifo(pipe)
    line = one_line_error(run_cli("convolve", str(image), str(pipe), "--filter", "box:3"))
    assert "exists and is not a file" in line
    assert pipe.is_fifo()
    # and every file the tool writes (exports, reports) refuses one the same way
    with pytest.raises(OSError, match="not a regular file"):
        write_file(pipe, "text")
    assert pipe.is_fifo()


def test_a_failed_call_into_a_new_folder_leaves_no_folder(tmp_path, image):
    bad = tmp_path / "bad.npy"
    bad.write_text("x")
    one_line_error(
        run_cli("convolve", str(image), str(bad), str(tmp_path / "new" / "deeper"), "--filter", "box:3")
    )
    assert not (tmp_path / "new").exists()
    out = tmp_path / "out.npy"
    one_line_error(run_cli("convolve", str(image), str(bad), str(out), "--filter", "box:3"))
    # so the next call with one input writes the file OUT names, not a file in a folder
    result = run_cli("convolve", str(image), str(out), "--filter", "box:3")
    assert result.returncode == 0, result.stderr
    assert out.is_file()


BAD_CONVOLVE = [
    (["{img}", ""], "an empty path"),
    (["{img}", "{img2}", "{file}"], "is a file: with several inputs OUT is a folder"),
    (["{batch}", "{tmp}/o.png", "--batch", "--out-dtype", "same"], "write them to .npy"),
    (["{img}", "{tmp}/o.npy", "--border", "mirror"], "--border applies to --mode same"),
    (["{jpg}", "{tmp}/o.npy"], "not a .npy file; images are read from PNG and TIFF"),
]


@pytest.mark.parametrize("args,message", BAD_CONVOLVE, ids=[m for _, m in BAD_CONVOLVE])
def test_convolve_refuses_in_one_line_and_writes_nothing(tmp_path, image, args, message):
    (tmp_path / "img2.npy").write_bytes(image.read_bytes())
    np.save(tmp_path / "batch.npy", np.zeros((2, 10, 12, 3), np.uint8))
    (tmp_path / "afile").write_text("keep")
    (tmp_path / "photo.jpg").write_bytes(b"\xff\xd8\xff\xe0")
    before = sorted(p.name for p in tmp_path.iterdir())
    names = {"img": image, "img2": tmp_path / "img2.npy", "file": tmp_path / "afile"}
    names |= {"batch": tmp_path / "batch.npy", "tmp": tmp_path, "jpg": tmp_path / "photo.jpg"}
    filled = [a.format(**{k: str(v) for k, v in names.items()}) for a in args]
    line = one_line_error(run_cli("convolve", *filled, "--filter", "box:3"))
    assert message in line
    assert sorted(p.name for p in tmp_path.iterdir()) == before
    assert (tmp_path / "afile").read_text() == "keep" and np.load(image).shape == (20, 24)


BAD_SEARCH = [
    (["--sampler", "grid"], "more than a grid search can list"),
    (["-s", "65536x65536"], "GiB"),
    (["--seed", "-1"], "--seed"),
    (["--seed", "99999999999999999999999"], "--seed"),
    (["--trials", "99999999999999", "--time-budget", "3"], "--trials must be at most"),
    (["--family", "separable", "--rank", "5"], "has rank 1 to 3, not 5"),
]


@pytest.mark.parametrize("args,message", BAD_SEARCH, ids=[" ".join(a) for a, _ in BAD_SEARCH])
def test_search_refuses_before_it_creates_a_database(tmp_path, args, message):
    path = tmp_path / "new.db"
    result = run_cli(
        "search", "-d", "0", "-f", "3", "-s", "64x64", "--trials", "2", *args, "--db", f"sqlite:///{path}"
    )
    assert message in one_line_error(result)
    assert list(tmp_path.iterdir()) == []


def test_study_takes_rows_x_f_sizes_and_refuses_a_negative_seed():
    data = cli_json("study", "-d", "0", "-f", "3x5", "-s", "64x64", "--preset", "baseline")
    (row,) = data["rows"]
    assert row["filter_height"] == 3 and row["filter_width"] == 5 and row["status"] == "ok"
    assert "--seed" in one_line_error(run_cli("study", "-d", "0", "-f", "3", "-s", "64x64", "--seed", "-1"))


@pytest.fixture(scope="module")
def tuned(tmp_path_factory):
    path = tmp_path_factory.mktemp("tuned") / "tune.db"
    cli_json("search", "-d", "0", "-f", "3", "-s", "64x64", "--trials", "2", "--db", f"sqlite:///{path}")
    return path


def test_best_lists_by_the_problem_options_and_refuses_bad_ones(tuned):
    url = f"sqlite:///{tuned}"
    assert len(cli_json("best", "--db", url)["kernels"]) == 1
    assert len(cli_json("best", "-s", "64x64", "--db", url)["kernels"]) == 1
    assert cli_json("best", "-s", "9x9", "--db", url)["kernels"] == []
    assert cli_json("best", "--dtype", "uint16", "--channels", "3", "--db", url)["kernels"] == []
    assert "rank" in one_line_error(run_cli("best", "--family", "separable", "--rank", "0", "--db", url))
    assert "--rank is for --family separable" in one_line_error(
        run_cli("best", "-f", "3", "--rank", "2", "--db", url)
    )


def test_best_with_a_pixel_option_at_its_default_lists_those_problems_only(tuned, tmp_path):
    path = tmp_path / "two.db"
    shutil.copy(tuned, path)
    url = f"sqlite:///{path}"
    cli_json("search", "-d", "0", "-f", "3", "-s", "64x64", "--trials", "2", "--dtype", "uint8", "--db", url)
    assert len(cli_json("best", "--db", url)["kernels"]) == 2
    assert len(cli_json("best", "--border", "none", "--db", url)["kernels"]) == 2
    (float_kernel,) = cli_json("best", "--dtype", "float32", "--db", url)["kernels"]
    (byte_kernel,) = cli_json("best", "--dtype", "uint8", "--db", url)["kernels"]
    assert float_kernel["dtype"] == "float32" and byte_kernel["dtype"] == "uint8"


def test_out_of_range_numbers_are_usage_errors(tuned, tmp_path):
    url = f"sqlite:///{tuned}"
    assert "RUN_ID" in one_line_error(run_cli("show", "99999999999999999999999", "--db", url))
    out = tmp_path / "report"
    result = run_cli("report", "--no-measure", "--out", str(out), "--bandwidth", "inf", "--db", url)
    assert "--bandwidth must be a positive number" in one_line_error(result)
    assert not out.exists()


def test_a_uri_named_database_that_is_missing_is_not_created(tmp_path, tuned):
    missing = tmp_path / "missing.db"
    for command in (["history"], ["best"], ["show", "1"]):
        result = run_cli(*command, "--db", f"sqlite:///file:{missing}?uri=true")
        assert "no database at" in one_line_error(result)
        assert not missing.exists()
    history = cli_json("history", "--db", f"sqlite:///file:{tuned}?uri=true")
    assert len(history["runs"]) == 1
    assert json.loads(json.dumps(history))["runs"][0]["status"] == "finished"
