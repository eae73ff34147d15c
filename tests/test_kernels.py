"""Generated kernels agree with scipy on awkward sizes, for every knob value and preset.

Kernels run through tests/opencl_runner.py (plain pyopencl, the manifest's launch
rule), and are compared with scipy.ndimage, not with our own reference.
"""

import dataclasses

import numpy as np
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from autotune.devices import device_info
from autotune.errors import UsageError
from autotune.families.conv2d import CONV2D
from autotune.families.conv2d.render import generate, literal_filter
from autotune.families.rendering import float_literal
from tests.opencl_runner import run_kernel, scipy_valid

SPACE = CONV2D.space
DEVICE = device_info(0)
FULL_VECTORS = dataclasses.replace(DEVICE, widest_vector_bytes=128)  # device 0 with every vector width
AWKWARD_SIZES = [(1, 1), (2, 3), (3, 2), (7, 13), (13, 7), (17, 31), (31, 17), (67, 5), (5, 67), (37, 23)]


def check(config: dict, filter_width: int, out_size: tuple[int, int], seed: int = 0) -> None:
    rng = np.random.default_rng(seed)
    out_w, out_h = out_size
    image = rng.uniform(-1, 1, (out_h + filter_width - 1, out_w + filter_width - 1)).astype(np.float32)
    filt = rng.uniform(-1, 1, (filter_width, filter_width)).astype(np.float32)
    variant = generate(config, filter_width, taps=filt)
    # A kernel with the filter compiled in gets zeros as its argument: it must not read it.
    argument = np.zeros_like(filt) if literal_filter(variant.config) else filt
    got = run_kernel(
        variant.source,
        variant.kernel_name,
        variant.build_options,
        variant.local_size,
        variant.work_per_item,
        image,
        argument,
    )
    expected = scipy_valid(image, filt)
    assert got.shape == expected.shape
    assert np.all(np.isfinite(got)), f"unwritten outputs for {config}, F={filter_width}, {out_size}"
    tol = (filter_width**2 + 1) * np.finfo(np.float32).eps * np.abs(filt).sum() * np.abs(image).max()
    error = np.abs(got - expected).max()
    assert error <= tol, f"max error {error} > {tol} for {config}, F={filter_width}, {out_size}"


# Presets of one channel's float32 'valid' output (those for integer outputs, edge
# work-groups, tiles of whole RGB pixels and work-items of one channel: tests/test_pixels.py).
FLOAT_PRESETS = sorted(
    n
    for n, p in SPACE.presets.items()
    if p.config["output_conversion"] == "builtin"
    and not p.config["border_groups"]
    and p.config["work_x"] % 3
    and not p.config["channel_items"]
)


@pytest.mark.parametrize("preset", FLOAT_PRESETS)
@pytest.mark.parametrize(
    "filter_width,out_size",
    [
        (1, (1, 1)),
        (2, (13, 7)),
        (3, (37, 23)),
        (4, (5, 67)),
        (7, (17, 31)),
        (17, (2, 3)),
    ],
)
def test_presets_match_scipy(preset, filter_width, out_size):
    check(SPACE.presets[preset].config, filter_width, out_size)


KNOB_BASE = {"filter_mode": "define", "local_x": 8, "local_y": 4, "work_x": 2, "work_y": 2}
SAME_ONLY = ("border_groups", "edge_outputs_per_item", "adjacent_edge_outputs")  # edge work-groups' knobs


def _knob_cases():
    """Every value of every knob, each in the valid config nearest to one base (the
    space finds what a value needs; a value no valid config can take fails its test)."""
    base = KNOB_BASE
    for name, knob in SPACE.knobs.items():
        if name in SAME_ONLY:  # 'same' output only: tests/test_pixels.py
            continue
        if name == "output_conversion":  # integer outputs only: tests/test_pixels.py, bit_conversion
            continue
        for value in knob.values:
            if (
                name == "work_x" and value % 3 == 0 or name == "channel_items" and value
            ):  # tests/test_pixels.py
                continue
            config = SPACE.with_value(base, name, value, {"filter_width": 5}, DEVICE)
            yield pytest.param(name, value, config, id=f"{name}={value}")


@pytest.mark.parametrize("name,value,config", list(_knob_cases()))
def test_every_knob_value_matches_scipy(name, value, config):
    if config is None and name == "x_vector":  # a vector device 0 does not take: that rule only
        wider = SPACE.with_value(KNOB_BASE, name, value, {"filter_width": 5}, FULL_VECTORS)
        assert wider is not None, f"no valid config on any CPU has {name}={value}"
        reasons = SPACE.violations(wider, {"filter_width": 5}, DEVICE)
        assert reasons and all("vector wider" in r for r in reasons), reasons
        return
    assert config is not None, f"no valid config on this device has {name}={value}"
    assert config[name] == value
    assert SPACE.violations(config, {"filter_width": 5}, DEVICE) == []
    check(config, 5, (37, 23))
    check(config, 6, (11, 9), seed=1)
    check(config, 5, (36, 24), seed=2)  # pitches that are multiples of 4: the vector paths


@pytest.mark.parametrize("cache_local", [False, True])
@pytest.mark.parametrize("unroll", ["full", 4, 2, 1])
@pytest.mark.parametrize("image_vector,work_x", [(2, 2), (2, 4), (4, 4), (4, 8)])
@pytest.mark.parametrize("work_y", [2, 1])
def test_image_vectors_match_scipy_on_every_alignment(cache_local, unroll, image_vector, work_x, work_y):
    """Vector image reads take the aligned path only where the row pitch allows; other
    pitches, tile pitches and loop remainders must fall back to narrower reads. A pitch
    of 2 mod 4 (42 here) alternates aligned and 8-byte-offset rows: with work_y=1 the
    row parity is only known at run time."""
    config = SPACE.complete(
        {
            "filter_mode": "define",
            "image_vector": image_vector,
            "unroll": unroll,
            "cache_local": cache_local,
            "local_x": 4,
            "local_y": 4,
            "work_x": work_x,
            "work_y": work_y,
        }
    )
    # Input pitches 40, 42, 37, 44 and 12; output pitches 36, 38, 33, 41 and 10.
    cases = ((5, (36, 24)), (5, (38, 24)), (5, (33, 7)), (4, (41, 9)), (3, (10, 9)))
    for filter_width, out_size in cases:
        check(config, filter_width, out_size, seed=filter_width)


@pytest.mark.parametrize("filter_width,out_size", [(7, (38, 24)), (9, (33, 17)), (11, (36, 9))])
def test_literal_filter_in_the_fastest_shapes(filter_width, out_size):
    """The H200's mid-width winners with the taps compiled in: every row unrolled, float4
    reads on odd pitches, outputs past the tile's edge."""
    config = {"filter_mode": "define", "filter_space": "literal", "unroll": "full", "image_vector": 4}
    config |= {"local_x": 4, "local_y": 2, "work_x": 4, "work_y": 8}
    check(config, filter_width, out_size, seed=filter_width)


def test_literal_filter_needs_its_values_and_keeps_them_exactly():
    config = {"filter_mode": "define", "filter_space": "literal"}
    with pytest.raises(UsageError, match="give the filter"):
        generate(config, 3)
    with pytest.raises(UsageError, match="3x3 filter"):
        generate(config, 3, taps=np.ones((2, 2)))
    values = np.random.default_rng(0).standard_normal(2000).astype(np.float32) * np.float32(1e-3)
    values = np.concatenate([values, np.array([0.0, -0.0, 1e-45, -3.4e38, 2**-126], dtype=np.float32)])
    for value in values:
        text = float_literal(float(value))
        assert text.endswith("f") and np.float32(float.fromhex(text[:-1])) == value
        assert np.signbit(float.fromhex(text[:-1])) == np.signbit(value)
    assert [float_literal(v) for v in (float("nan"), float("inf"), float("-inf"))] == [
        "(0.0f / 0.0f)",
        "(1.0f / 0.0f)",
        "(-1.0f / 0.0f)",
    ]
    taps = np.array([[np.nan, 1], [np.inf, -0.0]], dtype=np.float32)
    source = generate(config, 2, taps=taps).source
    assert "(0.0f / 0.0f), 0x1p+0f,\n    (1.0f / 0.0f), -0x0p+0f\n};" in source
    assert generate(config, 2, taps=taps).fingerprint != generate(config, 2, taps=taps * 2).fingerprint


@st.composite
def points(draw):
    # 'valid' output: border_groups stays at its default (its sample is in tests/test_pixels.py)
    knobs = [(name, knob) for name, knob in SPACE.knobs.items() if name != "border_groups"]
    config = {name: draw(st.sampled_from(knob.values)) for name, knob in knobs} | {"border_groups": False}
    filter_width = draw(st.integers(1, 17))
    out_size = draw(
        st.one_of(
            st.sampled_from(AWKWARD_SIZES),
            st.tuples(st.integers(1, 70), st.integers(1, 70)),
        )
    )
    return config, filter_width, out_size


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.filter_too_much])
@given(points(), st.integers(0, 2**16))
def test_random_points_match_scipy(point, seed):
    config, filter_width, out_size = point
    assume(not SPACE.violations(config, {"filter_width": filter_width}, DEVICE))
    check(config, filter_width, out_size, seed)


def test_generate_is_pure():
    config = SPACE.presets["float4"].config
    a, b = generate(config, 9), generate(dict(config), 9)
    assert a == b
    assert a.source.count("__kernel") == 1


def test_global_size_covers_output_in_whole_groups():
    variant = generate({"local_x": 16, "local_y": 4, "work_x": 4, "work_y": 2}, 3)
    assert variant.global_size((1, 1)) == (16, 4)
    assert variant.global_size((64, 8)) == (16, 4)
    assert variant.global_size((65, 9)) == (32, 8)


@pytest.mark.parametrize(
    "taps",
    [
        [[np.nan, 1, 0], [0, 1, 0], [0, 0, 1]],
        [[0.5, 1, 0], [0, np.inf, 0], [0, 0, -1]],
        [[np.inf, 1, 0], [0, 1, 0], [0, 0, -np.inf]],
        [[-np.nan, 1, 0], [0, 1, 0], [0, 0, 1]],
    ],
    ids=["nan", "inf", "inf-inf", "negative-nan"],
)
def test_non_finite_taps_compiled_in_build_and_run(tmp_path, taps):
    """`render --filter` with NaN or infinite taps writes a kernel that builds (on PoCL,
    whose NAN macro is no constant) and computes what the kernel reading the same taps
    from its argument computes."""
    import json

    from tests.conftest import run_cli

    taps = np.array(taps, dtype=np.float32)
    np.save(tmp_path / "f.npy", taps)
    config = {"filter_mode": "define", "filter_space": "literal", "unroll": "full"}
    result = run_cli(
        "render", "-f", "3", "--config", json.dumps(config), "--filter", str(tmp_path / "f.npy"),
        "--out", str(tmp_path),
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    manifest = json.loads((tmp_path / "convolve_f3.json").read_text())
    image = np.random.default_rng(5).uniform(0.5, 1, (11, 13)).astype(np.float32)
    image[::2] *= -1
    run = (
        manifest["kernel_name"],
        manifest["build_options"],
        manifest["local_size"],
        manifest["work_per_item"],
    )
    compiled_in = run_kernel((tmp_path / "convolve_f3.cl").read_text(), *run, image, np.zeros_like(taps))
    reading = generate({**config, "filter_space": "constant"}, 3)
    from_argument = run_kernel(reading.source, *run, image, taps)
    assert not np.isfinite(compiled_in).any()
    np.testing.assert_array_equal(compiled_in, from_argument)
    # scipy.ndimage drops NaN weights; the float64 sum itself does not
    windows = np.lib.stride_tricks.sliding_window_view(image.astype(np.float64), (3, 3))
    with np.errstate(invalid="ignore"):
        expected = np.einsum("ijkl,kl->ij", windows, taps.astype(np.float64))
    np.testing.assert_array_equal(compiled_in, expected.astype(np.float32))
