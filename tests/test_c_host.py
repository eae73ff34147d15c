"""The example C host (examples/c_host) built against an exported header of kernels of
several kinds: 8- and 16-bit pixels, colour, borders, rows x F filters and edge
work-groups, each run on PoCL and checked against cv2 and SciPy."""

import json
import subprocess
from pathlib import Path

import cv2
import numpy as np
import pytest

from autotune.families.conv2d import CONV2D
from tests.conftest import ROOT, run_cli
from tests.test_pixels import assert_matches, filter_of, image_of, make_best_use_edge_groups, scipy_reference

COMPILE = ("gcc", "-O2", "-Wall", "-Wextra", "-Werror", "-std=c11")


@pytest.fixture(scope="module")
def kinds_db(tmp_path_factory) -> str:
    """Real searches of an RGB uint8 'same' kind (mirror) and a 16-bit one with a 3 x 5
    filter and a constant border, each best then given edge work-groups (the RGB one with
    work-items of one channel's pixels, whose edge rows count the box in blocks of every
    channel: `tile_values` 12, not `work_x`; and 2 outputs an edge work-item)."""
    path = tmp_path_factory.mktemp("db") / "kinds.db"
    db = f"sqlite:///{path}"
    common = ("-d", "0", "-s", "40x24", "--trials", "4", "--sampler", "random", "--db", db)
    for extra in (
        ("-f", "3", "--dtype", "uint8", "--out-dtype", "same", "--border", "mirror", "--channels", "3"),
        ("-f", "3x5", "--dtype", "uint16", "--border", "constant"),
        # raw images of other pixel types (-t), and a batch (-n)
        ("-f", "5", "--dtype", "int16", "--out-dtype", "same", "--border", "reflect", "--frames", "3"),
        ("-f", "3", "--dtype", "float16", "--channels", "2"),
    ):
        result = run_cli("search", *common, *extra)
        assert result.returncode == 0, result.stderr
    one_channel_items = {"channel_items": True, "work_x": 4, "image_vector": 1, "vector": 1, "x_vector": 1}
    one_channel_items["edge_outputs_per_item"] = 2
    make_best_use_edge_groups(db, "mirror", one_channel_items)
    make_best_use_edge_groups(db, "constant")
    return db


@pytest.fixture(scope="module")
def exported(kinds_db, tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("kernels")
    result = run_cli("export", "-d", "0", "--format", "cl,json,header", "--out", str(out), "--db", kinds_db)
    assert result.returncode == 0, result.stderr
    return out


@pytest.fixture(scope="module")
def host(exported, tmp_path_factory) -> Path:
    binary = tmp_path_factory.mktemp("host") / "convolve_host"
    source = ROOT / "examples/c_host/convolve_host.c"
    subprocess.run([*COMPILE, f"-I{exported}", "-o", str(binary), str(source), "-lOpenCL", "-lm"], check=True)
    return binary


@pytest.fixture(scope="module")
def run_host(host, autotune_pocl_env):
    """Run the host on the PoCL device autotune tuned on."""

    def run(*args) -> subprocess.CompletedProcess:
        command = [str(host), "-d", "0", *map(str, args)]
        return subprocess.run(command, capture_output=True, text=True, timeout=120, env=autotune_pocl_env)

    return run


def _write_filter(path: Path, filt: np.ndarray) -> Path:
    path.write_text("\n".join(" ".join(f"{v:.9g}" for v in row) for row in filt) + "\n")
    return path


def _pnm(path: Path, pixels: np.ndarray, maxval: int | None = None) -> Path:
    """A binary PGM (2-D) or PPM (3 channels), 16-bit values big-endian."""
    height, width = pixels.shape[:2]
    magic = "P6" if pixels.ndim == 3 else "P5"
    maxval = maxval or (255 if pixels.dtype == np.uint8 else 65535)
    path.write_bytes(
        f"{magic}\n# autotune test\n{width} {height}\n{maxval}\n".encode()
        + pixels.astype(">u" + str(pixels.itemsize)).tobytes()
    )
    return path


def _read_pnm(path: Path, channels: int) -> np.ndarray:
    magic, size, maxval, data = path.read_bytes().split(b"\n", 3)
    width, height = map(int, size.split())
    wide = int(maxval) > 255
    shape = (height, width, channels) if channels > 1 else (height, width)
    return (
        np.frombuffer(data, dtype=">u2" if wide else np.uint8)
        .reshape(shape)
        .astype(np.uint16 if wide else np.uint8)
    )


def test_the_header_holds_every_kind_with_its_edge_groups(exported):
    header = (exported / "autotune_kernels.h").read_text()
    assert "autotune_find_kernel_of(const char *platform" in header
    assert "autotune_launch_size(const autotune_kernel *k" in header
    manifests = [json.loads(p.read_text()) for p in exported.glob("*.json")]
    assert {(m["dtype"], m["border"], m["channels"]) for m in manifests} == {
        ("uint8", "mirror", 3),
        ("uint16", "constant", 1),
        ("int16", "reflect", 1),
        ("float16", "none", 2),
    }
    assert all("border_groups" in m for m in manifests if m["border"] in ("mirror", "constant"))
    rgb = next(m for m in manifests if m["channels"] == 3)
    assert rgb["config"]["channel_items"] and rgb["tile_values"] == 3 * rgb["work_per_item"][0]
    assert rgb["edge_outputs_per_item"] == 2
    # a tuned entry and a default one per kind
    assert header.count('"uint16",') == 2 and header.count('"mirror",') == 2


def test_the_c_host_runs_colour_8_bit_kernels_with_edge_groups(run_host, tmp_path):
    rng = np.random.default_rng(4)
    filt = filter_of(3, rng, "uint8")
    flt = _write_filter(tmp_path / "filter.txt", filt)
    for height, width in ((23, 37), (3, 5), (1, 1), (40, 24)):
        image = image_of("uint8", (height, width, 3), rng)
        result = run_host(
            "-b", "mirror", "-o", "same", _pnm(tmp_path / "in.ppm", image), flt, tmp_path / "out.ppm"
        )
        assert result.returncode == 0, result.stderr
        assert result.stdout.strip() == f"{width}x{height}x3" and result.stderr.rstrip().endswith(
            ": kernel tuned on it"
        )
        got = _read_pnm(tmp_path / "out.ppm", 3)
        theirs = cv2.filter2D(image, -1, filt, borderType=cv2.BORDER_REFLECT_101)
        assert got.dtype == np.uint8 and np.abs(got.astype(int) - theirs.astype(int)).max() <= 1
        exact = np.stack([scipy_reference(image[..., c], filt, "mirror") for c in range(3)], axis=-1)
        assert_matches(got, exact, image, filt, f"{width}x{height} RGB mirror")


def test_the_c_host_runs_16_bit_kernels_of_rows_x_f_filters_with_a_border_value(run_host, tmp_path):
    rng = np.random.default_rng(5)
    filt = rng.uniform(-1, 1, (3, 5)).astype(np.float32)
    flt = _write_filter(tmp_path / "filter.txt", filt)
    for height, width in ((29, 31), (2, 3), (24, 40)):
        image = image_of("uint16", (height, width), rng)
        result = run_host(
            "-b", "constant", "-v", "7.5", _pnm(tmp_path / "in.pgm", image), flt, tmp_path / "o.raw"
        )
        assert result.returncode == 0, result.stderr
        assert result.stdout.strip() == f"{width}x{height}"
        assert result.stderr.rstrip().endswith(": kernel tuned on it")
        got = np.fromfile(tmp_path / "o.raw", dtype=np.float32).reshape(height, width)
        exact = scipy_reference(image, filt, "constant", value=7.5)
        assert_matches(got, exact, image, filt, f"{width}x{height} uint16 constant 7.5")


def test_the_c_host_reads_raw_images_of_any_pixel_type_and_batches(run_host, tmp_path):
    """`-t` names a raw image's pixel type and `-n` its frames, one after another in the
    file and in the output (a kernel exported with --frames: one launch)."""
    rng = np.random.default_rng(8)
    filt = filter_of(5, rng, "int16")
    flt = _write_filter(tmp_path / "filter.txt", filt)
    for frames, height, width in ((3, 11, 17), (3, 1, 2), (1, 6, 5)):
        image = image_of("int16", (frames, height, width), rng)
        image.tofile(tmp_path / "in.raw")
        args = (
            "-t",
            "int16",
            "-n",
            frames,
            "-b",
            "reflect",
            "-o",
            "same",
            f"{width}x{height}:{tmp_path / 'in.raw'}",
        )
        result = run_host(*args, flt, tmp_path / "o.raw")
        if frames == 1:  # only the batch kind was exported
            assert result.returncode == 1 and "no exported kernel" in result.stderr, result.stderr
            continue
        assert result.returncode == 0, result.stderr
        assert result.stdout.strip() == f"{width}x{height}, {frames} frames"
        got = np.fromfile(tmp_path / "o.raw", dtype=np.int16).reshape(frames, height, width)
        for frame in range(frames):
            exact = scipy_reference(image[frame], filt, "reflect")
            assert_matches(got[frame], exact, image[frame], filt, f"int16 frame {frame} of {width}x{height}")
    half = rng.uniform(-2, 2, (9, 13, 2)).astype(np.float16)
    half[0, 0, 0], half[4, 5, 1] = np.float16(6.0e-8), np.float16(-65504)  # a subnormal, the lowest half
    half.tofile(tmp_path / "half.raw")
    box = rng.uniform(0, 1, (3, 3)).astype(np.float32)
    flt = _write_filter(tmp_path / "box.txt", box)
    result = run_host("-t", "float16", f"13x9x2:{tmp_path / 'half.raw'}", flt, tmp_path / "o.raw")
    assert result.returncode == 0, result.stderr
    got = np.fromfile(tmp_path / "o.raw", dtype=np.float32).reshape(7, 11, 2)
    for channel in range(2):
        exact = scipy_reference(half[..., channel], box, "constant")[1:-1, 1:-1]
        np.testing.assert_allclose(got[..., channel], exact, rtol=1e-5, atol=1e-2)
    for args, says in (
        (("-t", "int8", f"13x9x2:{tmp_path / 'half.raw'}"), "-t takes uint8"),
        (("-n", "0", f"13x9x2:{tmp_path / 'half.raw'}"), "-n takes a count of frames"),
        (("-t", "float64", f"13x9x2:{tmp_path / 'half.raw'}"), "cannot read the raw image"),  # too short
        (("-n", "2", _pnm(tmp_path / "in.pgm", image_of("uint8", (9, 13), rng))), "describe a raw image"),
    ):
        result = run_host(*args, flt, tmp_path / "o.raw")
        assert result.returncode == 1 and says in result.stderr, (args, result.stderr)


def test_the_c_host_takes_a_filter_size_and_keeps_maxval(run_host, tmp_path):
    rng = np.random.default_rng(7)
    filt = rng.uniform(-1, 1, (3, 5)).astype(np.float32)
    (tmp_path / "flat.txt").write_text(" ".join(f"{v:.9g}" for v in filt.ravel()) + "\n")  # one line
    image = image_of("uint16", (9, 14), rng)
    pgm = _pnm(tmp_path / "in.pgm", image)
    result = run_host("-b", "constant", pgm, tmp_path / "flat.txt", tmp_path / "o.raw")
    assert result.returncode == 1 and "F*F numbers" in result.stderr  # 15 numbers: not F x F
    result = run_host("-f", "3x5", "-b", "constant", pgm, tmp_path / "flat.txt", tmp_path / "o.raw")
    assert result.returncode == 0, result.stderr
    got = np.fromfile(tmp_path / "o.raw", dtype=np.float32).reshape(9, 14)
    assert_matches(got, scipy_reference(image, filt, "constant"), image, filt, "-f 3x5")
    result = run_host("-f", "5x3", "-b", "constant", pgm, tmp_path / "flat.txt", tmp_path / "o.raw")
    assert result.returncode == 1 and "no exported kernel for a 5x3 filter" in result.stderr
    # an 8-bit image of maxval 200 comes back with maxval 200, values clamped to it
    colour = rng.integers(0, 201, (11, 13, 3)).astype(np.uint8)
    box = np.full((3, 3), 1 / 9, np.float32)
    box[1, 1] += 0.5  # sums past 1: some outputs go past 200
    flt = _write_filter(tmp_path / "box.txt", box)
    out = tmp_path / "out.ppm"
    result = run_host("-b", "mirror", "-o", "same", _pnm(tmp_path / "in.ppm", colour, 200), flt, out)
    assert result.returncode == 0, result.stderr
    assert out.read_bytes().split(b"\n")[2] == b"200"
    theirs = cv2.filter2D(colour, -1, box, borderType=cv2.BORDER_REFLECT_101).astype(int)
    got = _read_pnm(out, 3).astype(int)
    assert np.abs(got - np.minimum(theirs, 200)).max() <= 1 and (theirs > 200).any()


def test_the_c_host_names_a_kind_it_was_not_given(run_host, tmp_path):
    rng = np.random.default_rng(6)
    image = _pnm(tmp_path / "in.ppm", image_of("uint8", (9, 11, 3), rng))
    flt = _write_filter(tmp_path / "filter.txt", filter_of(3, rng, "uint8"))
    for options, words in (
        (("-b", "wrap", "-o", "same"), "border wrap"),  # no kernel of that border
        (("-b", "mirror", "-o", "same", "-a", "0,0"), "(anchor 0,0)"),  # nor of that anchor
        (("-b", "mirror"), "uint8->float32"),  # nor of float32 output
    ):
        result = run_host(*options, image, flt, tmp_path / "o.raw")
        assert result.returncode == 1 and "no exported kernel" in result.stderr and words in result.stderr
    result = run_host("-b", "mirror", "-a", "3,0", image, flt, tmp_path / "o.raw")
    assert result.returncode == 1 and "must name a column and a row of the filter" in result.stderr
    result = run_host("-v", "2", image, flt, tmp_path / "o.raw")
    assert result.returncode == 1 and "need a border (-b)" in result.stderr


def test_the_header_launch_size_is_the_hosts(exported, tmp_path):
    """`autotune_launch_size` in C gives the global size autotune launches with, edge rows
    included, for every tuned entry and many output sizes."""
    program = tmp_path / "sizes.c"
    program.write_text(
        '#include <stdio.h>\n#include "autotune_kernels.h"\n'
        "int main(void) {\n"
        "    static const int sizes[][2] = {{1, 1}, {2, 3}, {5, 1}, {17, 9}, {40, 24}, {64, 64}, {131, 7}};\n"
        "    for (int i = 0; i < autotune_kernel_count; ++i)\n"
        "        for (int s = 0; s < 7; ++s) {\n"
        "            const autotune_kernel *k = &autotune_kernels[i];\n"
        "            size_t g[3];\n"
        "            autotune_launch_size(k, sizes[s][0], sizes[s][1], 1, g);\n"
        '            printf("%d %s %d %d %zu %zu\\n", k->device, k->dtype,\n'
        "                   sizes[s][0], sizes[s][1], g[0], g[1]);\n"
        "        }\n"
        "    return 0;\n}\n"
    )
    binary = tmp_path / "sizes"
    subprocess.run([*COMPILE, f"-I{exported}", "-o", str(binary), str(program)], check=True)
    lines = subprocess.run([str(binary)], capture_output=True, text=True, check=True).stdout.splitlines()
    launches = {}
    for line in lines:
        device, dtype, *numbers = line.split()
        if device == "0":
            width, height, *launch = map(int, numbers)
            launches[dtype, width, height] = tuple(launch)
    assert len(launches) == 4 * 7
    grouped = 0
    for manifest_path in exported.glob("*.json"):
        manifest = json.loads(manifest_path.read_text())
        kind = CONV2D.kind(
            manifest["filter_width"],
            manifest["dtype"],
            manifest["out_dtype"],
            manifest["border"],
            manifest["channels"],
            filter_height=manifest["filter_height"],
            frames=3 if manifest.get("batch") else 1,  # the batch kind's (launch x and y do not depend on it)
        )
        variant = CONV2D.render(
            manifest["config"], CONV2D.problem(kind | {"out_width": 40, "out_height": 24})
        )
        for (dtype, width, height), launch in launches.items():
            if dtype != manifest["dtype"]:
                continue
            problem = CONV2D.problem(kind | {"out_width": width, "out_height": height})
            assert launch == CONV2D.global_size(variant, problem)[:2], (manifest_path.name, width, height)
            grouped += launch[1] > variant.global_size(problem.launch_extent)[1]
    assert grouped > 0  # edge rows were added
