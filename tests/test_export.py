"""Tuned kernels outside the tool: export, a C host, autotune.convolve()."""

import json
import shutil
import sqlite3
import subprocess
from pathlib import Path

import numpy as np
import pytest
from scipy import ndimage

import autotune
from autotune import runtime
from autotune.devices import device_info
from autotune.families.conv2d import CONV2D
from autotune.families.conv2d.render import generate
from autotune.families.separable import SEPARABLE
from autotune.lookup import fastest_serving_any_data
from autotune.store import Store
from tests.conftest import ROOT, cli_json, run_cli, store_best
from tests.opencl_runner import ManifestKernel, kernel_signatures, run_kernel, run_pixels_kernel, scipy_valid


@pytest.fixture(scope="module")
def tuned_db(tmp_path_factory):
    path = tmp_path_factory.mktemp("db") / "tuned.db"
    result = run_cli(
        "search",
        "-d",
        "0",
        "-s",
        "40x24",
        "-f",
        "3,4",
        "--trials",
        "10",
        "--sampler",
        "random",
        "--db",
        f"sqlite:///{path}",
    )
    assert result.returncode == 0, result.stderr
    return path


def url(path):
    return f"sqlite:///{path}"


def test_exported_kernels_run_in_a_third_party_host(tuned_db, tmp_path):
    result = run_cli(
        "export", "-d", "0", "--out", str(tmp_path), "--format", "cl,json,header,t4", "--db", url(tuned_db)
    )
    assert result.returncode == 0, result.stderr
    best = {b["filter_width"]: b for b in cli_json("best", "--db", url(tuned_db))["kernels"]}
    rng = np.random.default_rng(11)
    for width in (3, 4):
        manifest = json.loads((tmp_path / f"convolve_f{width}.json").read_text())
        assert manifest["config"] == best[width]["config"]
        assert manifest["image_size"] == [40, 24] and manifest["time_ms"] == best[width]["time_ms"]
        source = (tmp_path / manifest["source"]).read_text()
        for shape in ((width, width), (50, 77), (131, 9 + width)):  # none of them the tuned size
            image = rng.uniform(-1, 1, shape).astype(np.float32)
            filt = rng.uniform(-1, 1, (width, width)).astype(np.float32)
            out = run_kernel(
                source,
                manifest["kernel_name"],
                manifest["build_options"],
                manifest["local_size"],
                manifest["work_per_item"],
                image,
                filt,
            )
            np.testing.assert_allclose(out, scipy_valid(image, filt), atol=2e-5)
    t4 = json.loads((tmp_path / "autotune_t4.json").read_text())
    assert t4["schema_version"] == "1.0.0" and t4["results"]
    for entry in t4["results"]:
        assert {"configuration", "times", "invalidity", "correctness"} <= set(entry)
        assert entry["configuration"]["filter_width"] in (3, 4)
    assert any(e["invalidity"] == "correct" for e in t4["results"])


def _opencl_headers() -> bool:
    return Path("/usr/include/CL/cl.h").exists() and shutil.which("gcc") is not None


@pytest.mark.skipif(
    not _opencl_headers(), reason="needs gcc, opencl-headers and ocl-icd-opencl-dev (.ci/run installs them)"
)
def test_c_host_uses_the_header(tuned_db, tmp_path):
    kernels = tmp_path / "kernels"
    assert run_cli("export", "-d", "0", "--out", str(kernels), "--db", url(tuned_db)).returncode == 0
    binary = tmp_path / "convolve_host"
    subprocess.run(
        [
            "gcc",
            "-O2",
            "-Wall",
            "-Werror",
            "-std=c11",
            f"-I{kernels}",
            "-o",
            str(binary),
            str(ROOT / "examples/c_host/convolve_host.c"),
            "-lOpenCL",
            "-lm",
        ],
        check=True,
    )
    rng = np.random.default_rng(3)
    for width, (h, w) in ((3, (61, 45)), (4, (20, 33))):
        filt = rng.uniform(-1, 1, (width, width)).astype(np.float32)
        (tmp_path / "filter.txt").write_text("\n".join(" ".join(f"{v:.9g}" for v in row) for row in filt))
        image = rng.uniform(0, 255, (h, w)).astype(np.float32)
        image.tofile(tmp_path / "image.raw")
        result = subprocess.run(
            [
                str(binary),
                "-d",
                "0",
                f"{w}x{h}:{tmp_path / 'image.raw'}",
                str(tmp_path / "filter.txt"),
                str(tmp_path / "out.raw"),
            ],
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert result.returncode == 0, result.stderr
        out_w, out_h = w - width + 1, h - width + 1
        assert result.stdout.strip() == f"{out_w}x{out_h}"
        out = np.fromfile(tmp_path / "out.raw", dtype=np.float32).reshape(out_h, out_w)
        np.testing.assert_allclose(out, scipy_valid(image, filt), rtol=1e-5, atol=1e-3)
    # a PGM image and a width that was not exported
    pgm = tmp_path / "image.pgm"
    pixels = rng.integers(0, 256, (12, 17), dtype=np.uint8)
    pgm.write_bytes(b"P5 17 12 255\n" + pixels.tobytes())
    (tmp_path / "filter.txt").write_text("1 0 0\n0 1 0\n0 0 1")
    result = subprocess.run(
        [str(binary), str(pgm), str(tmp_path / "filter.txt"), str(tmp_path / "o.raw")],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    out = np.fromfile(tmp_path / "o.raw", dtype=np.float32).reshape(10, 15)
    np.testing.assert_allclose(out, scipy_valid(pixels.astype(np.float32), np.eye(3, dtype=np.float32)))
    (tmp_path / "filter.txt").write_text(" ".join(["1"] * 25))
    result = subprocess.run(
        [str(binary), str(pgm), str(tmp_path / "filter.txt"), str(tmp_path / "o.raw")],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 1 and "no exported kernel" in result.stderr


@pytest.fixture
def literal_best_db(tuned_db, tmp_path):
    """The tuned database, as if F = 3's best had the filter compiled in."""
    path = tmp_path / "literal.db"
    shutil.copy(tuned_db, path)
    with sqlite3.connect(path) as connection:
        problem = connection.execute(
            "SELECT id FROM autotune_problems WHERE json_extract(key, '$.filter_width') = 3"
        ).fetchone()[0]
        query = "SELECT config FROM autotune_best WHERE problem_id = ?"
        config = json.loads(connection.execute(query, (problem,)).fetchone()[0])
        config |= {"filter_mode": "define", "filter_space": "literal"}
        connection.execute(
            "UPDATE autotune_best SET config = ?, time_ms = time_ms / 2 WHERE problem_id = ?",
            (json.dumps(config, sort_keys=True), problem),
        )
    return path


def test_specialised_kernel_with_non_finite_taps_builds_and_agrees(literal_best_db):
    """NaN and infinite taps compiled into the tuned kernel: it builds (PoCL's NAN macro
    is no constant initializer) and computes what the argument-reading kernel does."""
    db = url(literal_best_db)
    image = np.random.default_rng(9).uniform(0.5, 1, (20, 25)).astype(np.float32)
    for bad in (np.nan, np.inf, -np.inf):
        filt = np.full((3, 3), 0.25, dtype=np.float32)
        filt[1, 2] = bad
        specialised = autotune.convolve(image, filt, db=db, specialise=True)
        _, source = next(reversed(runtime._programs))
        assert "filter_values" in source  # the literal kernel ran
        np.testing.assert_array_equal(specialised, autotune.convolve(image, filt, db=db))
        assert not np.isfinite(specialised).any()


def test_convolve_runs_the_fastest_argument_reading_kernel_unless_told(literal_best_db, monkeypatch):
    """By default the fastest measured kernel that reads its filter argument serves
    every filter; specialise=True compiles the best for the filter given, never reusing
    another filter's."""
    monkeypatch.setattr(runtime, "_programs", type(runtime._programs)())
    monkeypatch.setattr(runtime, "KERNEL_CACHE_SIZE", 2)
    db = url(literal_best_db)
    choice = autotune.plan((30, 30), 3, db=db)
    assert choice.config["filter_space"] == "literal"
    store = Store(db)
    trials = store.trials(device_id=choice.device_id, problem_id=choice.problem_id)
    fastest = fastest_serving_any_data(trials, CONV2D)
    store.close()
    reading = generate(CONV2D.read_config(fastest.config), 3).source
    rng = np.random.default_rng(8)
    image = rng.uniform(-1, 1, (33, 47)).astype(np.float32)
    a, b, c = (rng.uniform(-1, 1, (3, 3)).astype(np.float32) for _ in range(3))

    def literal_ran(filt, **options):
        out = autotune.convolve(image, filt, db=db, **options)
        np.testing.assert_allclose(out, scipy_valid(image, filt), atol=2e-5)
        assert len(runtime._programs) <= runtime.KERNEL_CACHE_SIZE
        _, source = next(reversed(runtime._programs))  # the program used last
        return "filter_values" in source

    assert not literal_ran(a) and not literal_ran(b)
    assert list(runtime._programs) == [(0, reading)]
    assert literal_ran(a, specialise=True) and literal_ran(b, specialise=True)
    assert literal_ran(c, specialise=True)
    autotune.clear_plans()  # plans keep their programs: without them a's is compiled again,
    assert literal_ran(a, specialise=True)  # past the program cache's size


def test_export_of_a_literal_best_needs_the_filter_or_falls_back(literal_best_db, tmp_path):
    rng = np.random.default_rng(9)
    image = rng.uniform(-1, 1, (29, 64)).astype(np.float32)
    filt = rng.uniform(-1, 1, (3, 3)).astype(np.float32)

    db = url(literal_best_db)

    def exported(out, *args):
        result = run_cli("export", "-d", "0", "-f", "3", "--out", str(out), *args, "--db", db)
        assert result.returncode == 0, result.stderr
        manifest = json.loads((out / "convolve_f3.json").read_text())
        source = (out / manifest["source"]).read_text()
        launch = [manifest[k] for k in ("kernel_name", "build_options", "local_size", "work_per_item")]
        return result.stdout, manifest, lambda f: run_kernel(source, *launch, image, f)

    stdout, manifest, run = exported(tmp_path / "plain")
    assert "has the filter compiled in" in stdout
    assert manifest["config"]["filter_space"] != "literal" and not manifest["filter_compiled_in"]
    np.testing.assert_allclose(run(filt), scipy_valid(image, filt), atol=2e-5)
    np.save(tmp_path / "f.npy", filt)
    _, manifest, run = exported(tmp_path / "baked", "--filter", str(tmp_path / "f.npy"))
    assert manifest["config"]["filter_space"] == "literal" and manifest["filter_compiled_in"]
    np.testing.assert_allclose(run(np.zeros_like(filt)), scipy_valid(image, filt), atol=2e-5)


@pytest.fixture(scope="module")
def kinds_db(tmp_path_factory):
    """Kernels of other kinds: uint8 in and out with a border, uint16 with 3 channels and a
    4x2 filter, and the separable family."""
    path = tmp_path_factory.mktemp("db") / "kinds.db"
    common = ("search", "-d", "0", "-s", "32x24", "--trials", "3", "--sampler", "random", "--db", url(path))
    for kind in (
        ("-f", "3", "--dtype", "uint8", "--out-dtype", "same", "--border", "mirror"),
        ("-f", "4x2", "--dtype", "uint16", "--channels", "3", "--border", "reflect"),
        ("--family", "separable", "-f", "5"),
    ):
        result = run_cli(*common, *kind)
        assert result.returncode == 0, result.stderr
    return path


def test_manifest_arguments_are_the_kernel_signature(tuned_db, literal_best_db, kinds_db, tmp_path):
    """A host sets a kernel's arguments from its manifest: the `arguments` list is each
    kernel's parameter list as the .cl declares it, for every pixel type, filter space,
    filter compiled in or not, and the separable family."""
    exports = {
        "float32": (tuned_db, ()),
        "literal": (literal_best_db, ("-f", "3", "--filter", "box:3")),
        "uint8": (kinds_db, ("--dtype", "uint8", "--out-dtype", "same", "--border", "mirror")),
        "uint16": (kinds_db, ("--dtype", "uint16", "--channels", "3", "--border", "reflect")),
        "separable": (kinds_db, ("--family", "separable")),
    }
    arguments = {}
    for name, (db, options) in exports.items():
        out = tmp_path / name
        result = run_cli(
            "export", "-d", "0", "--out", str(out), "--format", "cl,json", *options, "--db", url(db)
        )
        assert result.returncode == 0, result.stderr
        for path in sorted(out.glob("*.json")):
            manifest = json.loads(path.read_text())
            launches = {
                launch["kernel_name"]: launch["arguments"] for launch in manifest.get("launches", [manifest])
            }
            assert kernel_signatures((out / manifest["source"]).read_text()) == launches, path.name
            arguments[f"{name}/{path.stem}"] = [a for launch in launches.values() for a in launch]
    assert {
        "float32/convolve_f3",
        "float32/convolve_f4",
        "literal/convolve_f3",
        "separable/separable_f5_r1",
        "uint16/convolve_f4x2_uint16_float32_reflect_3ch",
        "uint8/convolve_f3_uint8_uint8_mirror",
    } <= set(arguments)
    assert "__global const uchar * restrict input" in arguments["uint8/convolve_f3_uint8_uint8_mirror"]
    assert "__global uchar * restrict output" in arguments["uint8/convolve_f3_uint8_uint8_mirror"]
    assert (
        "__global const ushort * restrict input"
        in arguments["uint16/convolve_f4x2_uint16_float32_reflect_3ch"]
    )
    assert arguments["literal/convolve_f3"][1].endswith(" * restrict unused_filter")  # compiled in: ignored
    assert not any("SPACE" in a for launch in arguments.values() for a in launch)


def test_export_refuses_what_was_not_tuned(tuned_db, tmp_path):
    np.save(tmp_path / "f5.npy", np.ones((5, 5)))
    for args, message in (
        (["-f", "9"], "no tuned kernel for F=9"),
        (["--format", "pdf"], "--format"),
        (["--filter", str(tmp_path / "f5.npy")], "no tuned kernel for F=5"),
        (["-f", "3", "--filter", str(tmp_path / "f5.npy")], "no tuned kernel for F=5"),
    ):
        result = run_cli("export", "-d", "0", "--out", str(tmp_path / "x"), *args, "--db", url(tuned_db))
        assert result.returncode == 2 and message in result.stderr
        assert len(result.stderr.strip().splitlines()) == 1
        assert not (tmp_path / "x").exists()


def test_best_says_which_fallback_answered(tuned_db, tmp_path):
    def level(*args, db=tuned_db):
        (kernel,) = cli_json("best", "-d", "0", *args, "--db", url(db))["kernels"]
        return kernel

    assert level("-f", "3")["fallback"] == "exact"
    assert level("-f", "3", "-s", "40x24")["fallback"] == "exact"
    nearest = level("-f", "3", "-s", "400x300")
    assert nearest["fallback"] == "nearest_image_size" and nearest["tuned_image_size"] == [40, 24]
    default = level("-f", "7")
    assert default["fallback"] == "default" and default["config"]["filter_mode"] == "arg"
    # a tuned entry from another device of the same vendor and type
    other = tmp_path / "other.db"
    shutil.copy(tuned_db, other)
    with sqlite3.connect(other) as connection:
        connection.execute("UPDATE autotune_devices SET driver = 'another driver'")
    borrowed = level("-f", "4", db=other)
    assert borrowed["fallback"] == "same_vendor"


@pytest.mark.parametrize("width", [3, 4, 6, 1, 2, 5])  # tuned, tuned, never tuned (even and odd)
@pytest.mark.parametrize("mode", ["valid", "same"])
def test_convolve_matches_scipy(tuned_db, width, mode):
    rng = np.random.default_rng(width)
    image = rng.uniform(-1, 1, (37, 52)).astype(np.float32)
    filt = rng.uniform(-1, 1, (width, width)).astype(np.float32)
    out = autotune.convolve(image, filt, mode=mode, db=url(tuned_db))
    if mode == "valid":
        expected = scipy_valid(image, filt)
    else:
        expected = ndimage.correlate(image.astype(np.float64), filt.astype(np.float64), mode="constant")
    assert out.dtype == np.float32 and out.shape == expected.shape
    np.testing.assert_allclose(out, expected, atol=2e-5)
    flipped = autotune.convolve(image, filt, mode=mode, db=url(tuned_db), flip=True)
    convolved = ndimage.convolve(image.astype(np.float64), filt.astype(np.float64), mode="constant")
    if mode == "valid":  # where the flipped filter lies wholly inside the image
        before = (width - 1) // 2
        convolved = convolved[before : before + flipped.shape[0], before : before + flipped.shape[1]]
    np.testing.assert_allclose(flipped, convolved, atol=2e-5)


def test_convolve_without_a_database_creates_none(tmp_path):
    missing = tmp_path / "none.db"
    image = np.arange(30, dtype=np.int64).reshape(5, 6)  # ints are converted
    out = autotune.convolve(image, np.ones((2, 2)), db=url(missing))
    np.testing.assert_allclose(out, scipy_valid(image.astype(np.float32), np.ones((2, 2), np.float32)))
    assert not missing.exists()
    assert autotune.plan((5, 6), 2, db=url(missing)).level == "default"


def test_convolve_nan_passes_through():
    image = np.ones((9, 9), dtype=np.float32)
    image[4, 4] = np.nan
    out = autotune.convolve(image, np.ones((3, 3), dtype=np.float32), db="sqlite:///:memory:")
    assert np.isnan(out[2:5, 2:5]).all()
    assert np.isfinite(out).sum() == out.size - 9


@pytest.mark.parametrize(
    "image,filt,error,message",
    [
        (np.ones((3, 4, 5)), np.ones((3, 3)), ValueError, "C from 1 to 4 channels"),
        (np.ones((3, 4, 2, 2)), np.ones((3, 3)), ValueError, r"\(H, W\) or \(H, W, C\)"),
        (np.ones((0, 4)), np.ones((3, 3)), ValueError, "empty"),
        (np.ones((8, 8)), np.ones((3, 2, 1)), ValueError, "2-D"),
        (np.ones((2, 8)), np.ones((3, 3)), ValueError, "smaller"),
        (np.ones((8, 8), dtype=complex), np.ones((3, 3)), TypeError, "real numbers"),
        (np.array([["a", "b"], ["c", "d"]]), np.ones((1, 1)), TypeError, "real numbers"),
    ],
)
def test_convolve_refuses_bad_arrays(image, filt, error, message):
    with pytest.raises(error, match=message):
        autotune.convolve(image, filt, db="sqlite:///:memory:")
    with pytest.raises(ValueError, match="mode"):
        autotune.convolve(np.ones((8, 8)), np.ones((3, 3)), mode="full", db="sqlite:///:memory:")


@pytest.mark.parametrize(
    "arguments,error,message",
    [
        ({"image": np.ones((300, 300)), "filter": np.ones((256, 256))}, ValueError, "from 1 to 255"),
        ({"device": 99}, ValueError, "unknown device 99"),
        ({"device": "0"}, TypeError, "device must be an int"),
        ({"db": "not a url"}, ValueError, "not a database URL"),
        ({"db": "nosuchdialect://host/db"}, ValueError, "unsupported database URL"),
        ({"db": 5}, TypeError, "db must be a database URL"),
        ({"image": np.full((6, 6), 1e39)}, ValueError, "beyond float32's range"),
        ({"filter": np.array([[1.0, -4e38], [0.0, 1.0]])}, ValueError, "beyond float32's range"),
    ],
    ids=[
        "width-256",
        "device-99",
        "device-str",
        "db-garbage",
        "db-dialect",
        "db-int",
        "image-1e39",
        "filter-4e38",
    ],
)
def test_convolve_raises_value_and_type_errors_only(arguments, error, message):
    """The Python API reports bad arguments as ValueError or TypeError (the standard
    contract), never as the CLI's own error or SQLAlchemy's; float64 values that float32
    cannot hold are refused, not turned into inf."""
    call = {"image": np.ones((8, 8)), "filter": np.ones((3, 3)), "db": "sqlite:///:memory:", **arguments}
    with pytest.raises(error, match=message):
        autotune.convolve(call.pop("image"), call.pop("filter"), **call)
    if "image" not in arguments and "filter" not in arguments:
        with pytest.raises(error, match=message):
            autotune.plan((8, 8), 3, **{k: v for k, v in call.items() if k in ("device", "db")})
    # infinities and NaN given stay what they are
    given = np.array([[np.inf, 1.0, np.nan, 2.0]] * 3)
    out = autotune.convolve(given, np.ones((1, 1)), db="sqlite:///:memory:")
    np.testing.assert_array_equal(out, given.astype(np.float32))


def test_npy_declaring_more_data_than_it_holds_is_bad_input(tmp_path):
    """A tiny .npy whose header declares a huge shape: one line, exit 2, before anything
    tries to allocate it (was a MemoryError or OverflowError, exit 1)."""
    from numpy.lib import format as npy_format

    for name, shape in (("huge", (100_000, 100_000)), ("overflowing", (2**62, 2**62)), ("short", (3, 3))):
        with open(tmp_path / f"{name}.npy", "wb") as f:
            npy_format.write_array_header_1_0(f, {"descr": "<f4", "fortran_order": False, "shape": shape})
            f.write(bytes(32))  # 8 floats: one short of 3x3
    np.save(tmp_path / "f.npy", np.ones((3, 3), dtype=np.float32))
    np.save(tmp_path / "in.npy", np.ones((8, 8), dtype=np.float32))
    db = url(tmp_path / "none.db")
    for name in ("huge", "overflowing", "short"):
        bad = str(tmp_path / f"{name}.npy")
        literal = json.dumps({"filter_mode": "define", "filter_space": "literal"})
        for args in (
            ["convolve", bad, str(tmp_path / "out.npy"), "--filter", str(tmp_path / "f.npy"), "--db", db],
            ["convolve", str(tmp_path / "in.npy"), str(tmp_path / "out.npy"), "--filter", bad, "--db", db],
            ["render", "-f", "3", "--config", literal, "--filter", bad, "--out", str(tmp_path / "k")],
            ["export", "-d", "0", "--filter", bad, "--out", str(tmp_path / "k"), "--db", db],
        ):
            result = run_cli(*args)
            assert result.returncode == 2, (args, result.stderr)
            lines = result.stderr.strip().splitlines()
            assert len(lines) == 1 and "its header declares shape" in lines[0], (args, result.stderr)
    assert not (tmp_path / "out.npy").exists() and not (tmp_path / "k").exists()


def test_convolve_command(tuned_db, tmp_path):
    rng = np.random.default_rng(2)
    image = rng.uniform(-1, 1, (30, 41)).astype(np.float32)
    filt = rng.uniform(-1, 1, (3, 3)).astype(np.float32)
    np.save(tmp_path / "in.npy", image)
    np.save(tmp_path / "f.npy", filt)
    result = run_cli(
        "convolve",
        str(tmp_path / "in.npy"),
        str(tmp_path / "out.npy"),
        "--filter",
        str(tmp_path / "f.npy"),
        "--mode",
        "same",
        "--db",
        url(tuned_db),
    )
    assert result.returncode == 0, result.stderr
    expected = ndimage.correlate(image.astype(np.float64), filt.astype(np.float64), mode="constant")
    np.testing.assert_allclose(np.load(tmp_path / "out.npy"), expected, atol=2e-5)
    np.save(tmp_path / "cube.npy", np.ones((2, 3, 4, 2)))
    (tmp_path / "junk.npy").write_text("not numpy")
    for args, message in (
        (
            [str(tmp_path / "junk.npy"), str(tmp_path / "o.npy"), "--filter", str(tmp_path / "f.npy")],
            "not a readable",
        ),
        (
            [str(tmp_path / "cube.npy"), str(tmp_path / "o.npy"), "--filter", str(tmp_path / "f.npy")],
            "(H, W) or (H, W, C)",
        ),
        (
            [str(tmp_path / "in.npy"), str(tmp_path / "o.npy"), "--filter", str(tmp_path / "none.npy")],
            "--filter",
        ),
    ):
        bad = run_cli("convolve", *args, "--db", url(tuned_db))
        assert bad.returncode == 2 and message in bad.stderr, bad.stderr
        assert len(bad.stderr.strip().splitlines()) == 1
        assert not (tmp_path / "o.npy").exists()


def test_every_json_output_is_one_envelope(tuned_db, tmp_path):
    """Scripts read every command the same way: one envelope, one device object, `time_ms`."""
    db = url(tuned_db)
    rng = np.random.default_rng(4)
    np.save(tmp_path / "in.npy", rng.uniform(-1, 1, (20, 30)).astype(np.float32))
    np.save(tmp_path / "f.npy", rng.uniform(-1, 1, (3, 3)).astype(np.float32))
    runs = cli_json("history", "--db", db)["runs"]
    trials = cli_json("show", str(runs[0]["run_id"]), "--db", db)["trials"]
    listed = cli_json("best", "--db", db)["kernels"]
    answered = cli_json("best", "-d", "0", "-f", "3", "--db", db)["kernels"]
    exported = cli_json("export", "-d", "0", "--out", str(tmp_path / "k"), "--db", db)
    convolved = cli_json("convolve", str(tmp_path / "in.npy"), str(tmp_path / "o.npy"), "--filter",
                         str(tmp_path / "f.npy"), "--db", db)  # fmt: skip
    rendered = cli_json("render", "-f", "3", "--preset", "local", "-d", "0", "--out", str(tmp_path / "r"))
    devices = [runs[0]["device"], listed[0]["device"], answered[0]["device"]]
    devices += [exported["device"], convolved["device"], rendered["device"]]
    for device in devices:
        assert set(device) == {"index", "name", "vendor", "driver", "platform", "type"}
        assert (device["name"], device["driver"]) == (devices[-1]["name"], devices[-1]["driver"])
    assert set(listed[0]) == set(answered[0])  # the same record, from the table or the ladder
    assert answered[0]["fallback"] == "exact" and len(listed) == 2
    for record in [*listed, *answered, *exported["kernels"], *trials]:
        assert "time_ms" in record and not {"best_ms", "ms"} & set(record)
    assert convolved["shape"] == [18, 28] and (tmp_path / "o.npy").exists()
    assert sorted(Path(p).name for p in exported["written"])[:2] == ["autotune_kernels.h", "convolve_f3.cl"]


@pytest.mark.parametrize("algorithm", ["direct", "separable"])
def test_images_past_int_indexing_run_in_bands(monkeypatch, tmp_path, algorithm):
    """Kernels index with 32-bit ints, so 2^31 values or more run as bands of rows that
    overlap by F - 1. Here the limit is lowered to 1500 values so a small image takes
    several bands (the H200 run of a 46400 x 46402 image is in RELIABILITY.md)."""
    from autotune import runtime

    monkeypatch.setattr(runtime, "MAX_INDEXED", 1500)
    rng = np.random.default_rng(7)
    image = rng.uniform(-1, 1, (97, 61)).astype(np.float32)
    taps = np.exp(-((np.arange(5) - 2.0) ** 2) / 3)
    filt = np.outer(taps, taps).astype(np.float32)
    assert len(runtime._bands(image.shape, filt.shape)) > 3
    got = autotune.convolve(image, filt, algorithm=algorithm, db=f"sqlite:///{tmp_path / 'none.db'}")
    np.testing.assert_allclose(got, scipy_valid(image, filt), rtol=0, atol=1e-5)
    with pytest.raises(ValueError, match="more than one kernel can index"):
        autotune.convolve(np.zeros((8, 2000), np.float32), filt, db=f"sqlite:///{tmp_path / 'none.db'}")
    # 'same' with a border: padded on the host, then the padded image runs 'valid' in bands
    for border, scipy_mode in (("mirror", "mirror"), ("constant", "constant"), ("wrap", "wrap")):
        same = autotune.convolve(
            image,
            filt,
            mode="same",
            border=border,
            algorithm=algorithm,
            db=f"sqlite:///{tmp_path / 'none.db'}",
        )
        exact = ndimage.correlate(image.astype(np.float64), filt.astype(np.float64), mode=scipy_mode)
        assert same.shape == image.shape
        np.testing.assert_allclose(same, exact, rtol=0, atol=1e-5)
    planned = autotune.plan(
        image.shape, 5, mode="same", border="mirror", db=f"sqlite:///{tmp_path / 'none.db'}"
    )
    assert planned.problem.border == "none" and planned.problem.out_width == image.shape[1]


def _config(family, problem, **knobs):
    """A config of these knobs (defaults elsewhere) that device 0 runs for `problem`."""
    config = family.space.complete(knobs)
    assert not family.violations(config, problem, device_info(0)), family.violations(config, problem)
    return config


def test_valid_kinds_of_rows_x_f_filters_are_named_without_an_anchor(tmp_path):
    """'valid' output has no anchor: a 3 x 5 uint8 'valid' kernel is convolve_f3x5_uint8_float32_none
    (was ..._none_anchor2, from a row anchor taken as F / 2 rather than rows / 2); a 'same' one
    is named by its anchor only where that is not the centre. Each runs from its manifest."""
    db = url(tmp_path / "kinds.db")
    shapes = {"filter_width": 5, "filter_height": 3, "out_width": 21, "out_height": 13, "dtype": "uint8"}
    problems = {
        "convolve_f3x5_uint8_float32_none_3ch": CONV2D.problem({**shapes, "channels": 3}),
        "convolve_f3x5_uint8_float32_mirror": CONV2D.problem({**shapes, "border": "mirror"}),
        "convolve_f3x5_uint8_float32_mirror_anchor0y2": CONV2D.problem(
            {**shapes, "border": "mirror", "anchor": 0, "anchor_y": 2}
        ),
    }
    for problem in problems.values():
        store_best(db, CONV2D, problem, [_config(CONV2D, problem, local_x=4, local_y=4, work_x=2)])
    out = tmp_path / "kernels"
    result = run_cli("export", "-d", "0", "--format", "cl,json", "--out", str(out), "--db", db)
    assert result.returncode == 0, result.stderr
    assert sorted(p.stem for p in out.glob("*.json")) == sorted(problems)
    rng = np.random.default_rng(12)
    filt = rng.uniform(-0.25, 1, (3, 5)).astype(np.float32)
    for stem, problem in problems.items():
        kernel = ManifestKernel(out / f"{stem}.json")
        image = rng.integers(0, 256, (17, 23, problem.channels), dtype=np.uint8).squeeze()
        got = run_pixels_kernel(kernel, image, filt, np.float32, same=problem.same, manifest=kernel.manifest)
        planes = image.reshape(17, 23, -1).astype(np.float64)
        origin = (problem.anchor_row - 1, problem.anchor_column - 2) if problem.same else (0, 0)
        exact = np.stack(
            [
                ndimage.correlate(planes[..., c], filt.astype(np.float64), mode="mirror", origin=origin)
                for c in range(problem.channels)
            ],
            axis=-1,
        ).squeeze()
        if not problem.same:
            exact = exact[1:-1, 2:-2]
        np.testing.assert_allclose(got, exact, rtol=1e-5, atol=1e-3, err_msg=stem)


def test_export_takes_the_anchor_of_the_kinds_it_names(tmp_path):
    """A kind tuned with an anchor (from Python: `Tuner` takes any problem) is named on the
    command line with --anchor X,Y beside -f and --border, and its best with the filter compiled
    in is exported with --filter (before, neither could name it: 'no tuned kernel for F=3 mirror',
    and the note after a fallback pointed at a --filter that could not work)."""
    db = url(tmp_path / "anchored.db")
    problem = CONV2D.problem(
        {"filter_width": 3, "out_width": 24, "out_height": 16, "dtype": "float32", "border": "mirror"}
        | {"anchor": 0, "anchor_y": 2}
    )
    literal = _config(CONV2D, problem, filter_mode="define", filter_space="literal", local_x=8, local_y=4)
    store_best(db, CONV2D, problem, [literal, {**literal, "filter_space": "constant"}])
    separable = SEPARABLE.problem(
        {"filter_width": 5, "rank": 1, "out_width": 24, "out_height": 16, "dtype": "float32"}
        | {"border": "mirror", "anchor": 1}
    )
    store_best(db, SEPARABLE, separable, [_config(SEPARABLE, separable, cache_input=True)])
    rng = np.random.default_rng(13)
    filt = rng.uniform(-1, 1, (3, 3)).astype(np.float32)
    np.save(tmp_path / "f.npy", filt)

    def export(out: str, *options: str) -> subprocess.CompletedProcess:
        return run_cli(
            "export", "-d", "0", "--format", "cl,json", "--out", str(tmp_path / out), *options, "--db", db
        )

    result = export("baked", "--filter", str(tmp_path / "f.npy"), "--border", "mirror", "--anchor", "0,2")
    assert result.returncode == 0, result.stderr
    kernel = ManifestKernel(tmp_path / "baked" / "convolve_f3_float32_float32_mirror_anchor0y2.json")
    assert kernel.manifest["filter_compiled_in"] and kernel.config == literal
    assert (kernel.manifest["anchor"], kernel.manifest["anchor_y"]) == (0, 2)
    image = rng.uniform(-1, 1, (19, 27)).astype(np.float32)
    got = run_pixels_kernel(kernel, image, np.zeros_like(filt), np.float32, same=True)  # taps compiled in
    exact = ndimage.correlate(
        image.astype(np.float64), filt.astype(np.float64), mode="mirror", origin=(1, -1)
    )
    np.testing.assert_allclose(got, exact, atol=2e-5)

    result = export("named", "-f", "3", "--border", "mirror", "--anchor", "0,2")
    assert result.returncode == 0, result.stderr
    assert "F=3 mirror anchor=0 anchor_y=2: the best kernel" in result.stdout  # the fallback, and why
    named = json.loads((tmp_path / "named" / "convolve_f3_float32_float32_mirror_anchor0y2.json").read_text())
    assert named["config"]["filter_space"] == "constant" and not named["filter_compiled_in"]

    result = export("sep", "--family", "separable", "-f", "5", "--border", "mirror", "--anchor", "1,1")
    assert result.returncode == 0, result.stderr
    assert (
        json.loads((tmp_path / "sep" / "separable_f5_r1_float32_float32_mirror_anchor1.json").read_text())[
            "anchor"
        ]
        == 1
    )
    for options, says in (
        (("-f", "3", "--border", "mirror"), "no tuned kernel for F=3 mirror on device 0"),  # the centre's
        (("-f", "3", "--anchor", "0,2"), "--anchor is for 'same' output: give --border too"),
        (("-f", "3", "--border", "mirror", "--anchor", "0,x"), "--anchor takes X,Y"),
        (("-f", "3", "--border", "mirror", "--anchor", "3,0"), "anchor must be -1 or a tap of the filter"),
        (
            ("--family", "separable", "-f", "5", "--border", "mirror", "--anchor", "1,2"),
            "anchors its filter at one tap in x and y",
        ),
    ):
        result = export("bad", *options)
        assert result.returncode == 2 and says in result.stderr, (options, result.stderr)
        assert len(result.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "bad").exists()


def test_a_best_row_this_release_cannot_read_is_left_out_of_export(tmp_path):
    """A database shared with a later release may hold problems of a pixel type or field this
    release does not know: export leaves those rows out and writes the rest (it failed whole:
    "dtype must be one of ..., got 'bfloat16'", exit 2), and `best`, `convolve()` and `plan()`
    leave them out alike (they failed the same way)."""
    db = url(tmp_path / "shared.db")
    for width in (3, 5, 7):
        problem = CONV2D.problem(
            {"filter_width": width, "out_width": 30, "out_height": 20, "dtype": "float32"}
        )
        store_best(db, CONV2D, problem, [_config(CONV2D, problem, local_x=8, local_y=4)])
    later = {
        5: {"filter_width": 5, "out_width": 30, "out_height": 20, "dtype": "bfloat16"},
        7: {"filter_width": 7, "out_width": 30, "out_height": 20, "dtype": "float32", "dilation": 2},
    }
    with sqlite3.connect(tmp_path / "shared.db") as connection:
        for width, key in later.items():
            connection.execute(
                "UPDATE autotune_problems SET key = ? WHERE json_extract(key, '$.filter_width') = ?",
                (json.dumps(key, separators=(",", ":")), width),
            )
    connection.close()
    out = tmp_path / "kernels"
    result = run_cli("export", "-d", "0", "--out", str(out), "--db", db)
    assert result.returncode == 0, result.stderr
    assert sorted(p.name for p in out.iterdir()) == [
        "autotune_kernels.h",
        "convolve_f3.cl",
        "convolve_f3.json",
    ]
    manifest = json.loads((out / "convolve_f3.json").read_text())
    rng = np.random.default_rng(14)
    image, filt = (
        rng.uniform(-1, 1, (25, 33)).astype(np.float32),
        rng.uniform(-1, 1, (3, 3)).astype(np.float32),
    )
    launch = [manifest[k] for k in ("kernel_name", "build_options", "local_size", "work_per_item")]
    got = run_kernel((out / "convolve_f3.cl").read_text(), *launch, image, filt)
    np.testing.assert_allclose(got, scipy_valid(image, filt), atol=2e-5)
    result = run_cli("export", "-d", "0", "-f", "5", "--out", str(tmp_path / "f5"), "--db", db)
    assert result.returncode == 2 and "no tuned kernel for F=5 on device 0" in result.stderr
    # and every other reader of best rows leaves them out alike
    assert [k["filter_width"] for k in cli_json("best", "--db", db)["kernels"]] == [3]
    assert cli_json("best", "-d", "0", "-f", "5", "--db", db)["kernels"][0]["fallback"] == "default"
    for width in (3, 5, 7):
        taps = rng.uniform(-1, 1, (width, width)).astype(np.float32)
        np.testing.assert_allclose(autotune.convolve(image, taps, db=db), scipy_valid(image, taps), atol=2e-5)
        level = autotune.plan(image.shape, width, db=db).level
        assert level == ("nearest_image_size" if width == 3 else "default"), (width, level)


def test_export_without_a_width_takes_the_kinds_with_the_pixel_options_given(tmp_path):
    """`export --dtype uint8` (no -f) exports the uint8 kinds only, and so does every pixel
    option and --anchor (of either family; a rows x F kind's anchor names its taps): before,
    without -f they were ignored and every tuned kind was written. An option at its default
    (`--channels 1`) filters too; options -f would refuse are refused alike; no kind with
    them is one line, nothing written."""
    db = url(tmp_path / "kinds.db")
    base = {"out_width": 24, "out_height": 16}
    uint8_mirror = {"dtype": "uint8", "out_dtype": "uint8", "border": "mirror"}
    problems = {
        "F=3": {"filter_width": 3, "dtype": "float32"},
        "F=3 uint8->uint8 mirror": {"filter_width": 3, **uint8_mirror},
        "anchored": {"filter_width": 3, **uint8_mirror, "anchor": 0},
        "rgb": {"filter_width": 5, "dtype": "uint8", "out_dtype": "uint8", "channels": 3},
        "rows": {"filter_width": 5, "filter_height": 3, **uint8_mirror, "anchor": 4, "anchor_y": 0},
    }
    labels = {}
    for name, fields in problems.items():
        problem = CONV2D.problem({**base, **fields})
        store_best(db, CONV2D, problem, [_config(CONV2D, problem, local_x=8, local_y=4)])
        labels[name] = CONV2D.describe_kind(problem.kind())
    separable = SEPARABLE.problem(
        {**base, "filter_width": 5, "rank": 1, "dtype": "float32"} | {"border": "mirror", "anchor": 1}
    )
    store_best(db, SEPARABLE, separable, [_config(SEPARABLE, separable, cache_input=True)])
    separable_label = SEPARABLE.describe_kind(separable.kind())

    def export(*options: str) -> subprocess.CompletedProcess:
        return run_cli("export", "-d", "0", "--out", str(tmp_path / "out"), *options, "--db", db, "--json")

    def exported(*options: str) -> list[str]:
        result = export(*options)
        assert result.returncode == 0, (options, result.stderr)
        return sorted(k["problem"] for k in json.loads(result.stdout)["data"]["kernels"])

    assert exported() == sorted(labels.values())
    uint8 = ("F=3 uint8->uint8 mirror", "anchored", "rgb", "rows")
    assert exported("--dtype", "uint8") == sorted(labels[n] for n in uint8)
    assert exported("--dtype", "float32") == [labels["F=3"]]
    assert exported("--channels", "3") == [labels["rgb"]]
    assert exported("--border", "mirror", "--anchor", "0,0") == [labels["anchored"]]
    assert exported("--border", "mirror", "--anchor", "-1,-1") == [labels["F=3 uint8->uint8 mirror"]]
    assert exported("--border", "mirror", "--anchor", "4,0") == [labels["rows"]]  # the 3x5 kind's corner
    family = ("--family", "separable")
    assert exported(*family, "--channels", "1") == [separable_label]
    assert exported(*family, "--border", "mirror", "--anchor", "1,1") == [separable_label]
    mirror = ("--border", "mirror")
    for options, says in (
        (("--dtype", "uint16"), "no tuned kernel for any problem with dtype=uint16 on device 0"),
        ((*mirror, "--anchor", "0,2"), "no tuned kernel for any problem with border=mirror, anchor=0,2 "),
        ((*mirror, "--anchor", "-5,0"), "anchor must be -1 or a tap of the filter"),  # as with -f
        ((*family, "--channels", "3"), "--channels and --frames are for the conv2d family"),
        ((*family, *mirror, "--anchor", "0,1"), "anchors its filter at one tap in x and y"),
    ):
        result = export(*options)
        assert result.returncode == 2 and len(result.stderr.strip().splitlines()) == 1, result.stderr
        assert says in result.stderr, (options, result.stderr)
