import copy
import json
import time
import tomllib
from types import SimpleNamespace

import jinja2
import jinja2.meta as jinja2_meta
import pytest

from autotune.devices import DeviceInfo, device_info
from autotune.errors import UsageError
from autotune.families import get_family
from autotune.families.conv2d import CONV2D
from autotune.search import Search
from autotune.space import SearchSpace
from tests.conftest import GPU_LIMITS, ROOT
from tests.stored import device_row

SEED_PRESETS = {"baseline", "unroll4", "define", "define_unroll", "constant", "float4", "local"}


def test_every_seed_kernel_is_a_preset():
    space = CONV2D.space
    assert set(space.presets) >= SEED_PRESETS
    for preset in space.presets.values():
        assert set(preset.config) == set(space.knobs)
        integer_out = preset.config["output_conversion"] == "bits"  # for 8- and 16-bit outputs only
        problem = {"filter_width": 5, "out_dtype": "uint8" if integer_out else "float32"}
        if preset.config["work_x"] % 3 == 0 or preset.config["channel_items"]:  # interleaved channels only
            problem["channels"] = 3
        if preset.config["border_groups"]:  # edge work-groups: 'same' output only
            problem["border"] = "mirror"
        assert space.violations(preset.config, problem) == []


@pytest.mark.parametrize("family_name", ["conv2d", "separable"])
def test_every_knob_is_documented_and_reaches_the_template(family_name):
    """Follows from the space file: each knob says what it does, has a default among
    its values, and is a variable of the family's template (or of one it includes)
    under its own name."""
    family = get_family(family_name)
    space = family.space
    variables: set[str] = set()
    files, seen = [family.template], set()
    while files:
        name = files.pop()
        if name not in seen:
            seen.add(name)
            parsed = jinja2.Environment().parse((ROOT / "templates" / name).read_text())
            variables |= jinja2_meta.find_undeclared_variables(parsed)
            files += [n for n in jinja2_meta.find_referenced_templates(parsed) if n]
    assert space.knobs
    for name, knob in space.knobs.items():
        assert knob.help.strip(), f"knob {name!r} has no help text in {family.space_file}"
        assert "\n" not in knob.help, f"knob {name!r}: keep its help text on one line"
        assert knob.accepts(knob.default), f"knob {name!r}: default {knob.default!r} is not one of its values"
        assert name in variables, f"knob {name!r} is not a variable of templates/{family.template}"
    for preset in space.presets.values():
        integer_out = preset.config.get("output_conversion") == "bits"  # for 8- and 16-bit outputs only
        problem = {"filter_width": 5, "rank": 1, "out_dtype": "uint8" if integer_out else "float32"}
        if preset.config.get("border_groups"):  # edge work-groups: 'same' output only
            problem["border"] = "mirror"
        if preset.config.get("work_x", 1) % 3 == 0 or preset.config.get(
            "channel_items"
        ):  # interleaved channels
            problem["channels"] = 3
        if preset.config.get("paired_terms"):  # pairs of rank terms: rank 2 and more
            problem["rank"] = 2
        if preset.config.get("fast_fir", "none") != "none":  # outputs in pairs: wide filters
            problem["filter_width"] = 25
        assert space.violations(preset.config, problem) == [], preset.name


def test_complete_fills_defaults_and_checks_types():
    space = CONV2D.space
    config = space.complete({"unroll": 4})
    assert config["unroll"] == 4 and config["local_x"] == space.knobs["local_x"].default
    with pytest.raises(UsageError, match="unknown knob 'colour'"):
        space.complete({"colour": 1})
    with pytest.raises(UsageError, match="'unroll' cannot be 3"):
        space.complete({"unroll": 3})
    with pytest.raises(UsageError, match='cannot be "4"'):
        space.complete({"unroll": "4"})
    with pytest.raises(UsageError, match="cannot be true"):
        space.complete({"vector": True})  # bool is not an int here
    with pytest.raises(UsageError):
        space.complete({"unroll": "1; } __kernel void evil("})


def test_knob_rules():
    space = CONV2D.space
    full_arg = space.complete({"unroll": "full", "filter_mode": "arg"})
    assert any("unroll=full" in r for r in space.violations(full_arg, {"filter_width": 5}))
    local_arg = space.complete({"cache_local": True, "filter_mode": "arg"})
    assert any("cache_local" in r for r in space.violations(local_arg, {"filter_width": 5}))


def test_device_rules():
    space = CONV2D.space
    device = {
        "max_work_group_size": 256,
        "max_work_item_sizes": [256, 256, 64],
        "local_mem_size": 4096,
        "max_constant_buffer_size": 1024,
    }
    big_group = space.complete({"local_x": 32, "local_y": 16})
    assert space.violations(big_group, {"filter_width": 3}) == []  # device rules need a device
    assert any("work-group size" in r for r in space.violations(big_group, {"filter_width": 3}, device))
    assert any("__constant" in r for r in space.violations(space.complete({}), {"filter_width": 17}, device))
    tile = space.complete(
        {"cache_local": True, "local_x": 16, "local_y": 16, "work_x": 4, "filter_space": "global"}
    )
    assert any("local memory" in r for r in space.violations(tile, {"filter_width": 9}, device))
    # Explicit vectors only where the device has SIMD lanes to fill; a device recorded
    # before its vector width was (or a GPU, which reports 1) has none.
    vectors = space.complete({"x_vector": 16, "work_x": 32, "local_x": 4, "local_y": 4})
    assert any("native float vector" in r for r in space.violations(vectors, {"filter_width": 3}, device))
    assert space.violations(vectors, {"filter_width": 3}, device | {"native_vector_width": 8}) == []
    # The real device answers too.
    real = device_info(0)
    assert space.violations(space.presets["baseline"].config, {"filter_width": 3}, real) == []


def test_space_from_other_declaration():
    space = SearchSpace.from_dict(
        {
            "knobs": {"a": {"values": [1, 2, 3]}, "b": {"values": ["x", "y"], "default": "y"}},
            "constraints": [{"rule": "a != 2 or b == 'x'", "reason": "a=2 needs b=x"}],
        }
    )
    assert space.points() == 6
    assert space.complete({}) == {"a": 1, "b": "y"}
    assert space.violations({"a": 2, "b": "y"}, {"filter_width": 1}) == ["a=2 needs b=x"]


def test_every_broken_rule_is_named_in_file_order_and_device_rules_wait_for_a_device():
    """The rules are checked in one evaluation: each still counts on its own (a rule with
    a comment, or over several lines, ends where it ends), in the order the file gives."""
    space = SearchSpace.from_dict(
        {
            "knobs": {"a": {"values": [1, 2, 3]}, "b": {"values": [1, 4]}},
            "constraints": [
                {"rule": "a < 3  # three is too many", "reason": "a below 3"},
                {"rule": "a * b <= device.max_work_group_size", "reason": "group fits"},
                {"rule": "(b == 1\n or a == 1)", "reason": "b=4 needs a=1"},
                {"rule": "a <= filter_width", "reason": "a at most F"},
            ],
        }
    )
    small = {"max_work_group_size": 8}
    broken = ["a below 3", "b=4 needs a=1", "a at most F"]
    assert space.violations({"a": 3, "b": 4}, {"filter_width": 2}) == broken
    assert space.violations({"a": 3, "b": 4}, {"filter_width": 2}, small) == [
        "a below 3",
        "group fits",
        "b=4 needs a=1",
        "a at most F",
    ]
    assert space.violations({"a": 1, "b": 4}, {"filter_width": 1}, small) == []
    assert space.violations({"a": 2, "b": 1}, {"filter_width": 1}, small) == ["a at most F"]


def test_a_problems_key_is_its_own_copy():
    problem = CONV2D.problem({"filter_width": 5, "out_width": 64, "out_height": 32, "dtype": "float32"})
    key = problem.key()
    key["filter_width"] = 7
    assert problem.key() == {"filter_width": 5, "out_width": 64, "out_height": 32, "dtype": "float32"}


def test_a_preset_is_measured_first_only_where_its_when_holds():
    space = SearchSpace.from_dict(
        {
            "knobs": {"a": {"values": [1, 2]}},
            "presets": {
                "bytes": {"when": "dtype == 'uint8' and device.native_vector_width == 1", "a": 2},
                "plain": {"a": 1},
            },
            "problem_defaults": {"dtype": "float32"},
        }
    )
    bytes_, plain = space.presets["bytes"], space.presets["plain"]
    gpu, cpu = {"native_vector_width": 1}, {"native_vector_width": 8}
    assert space.applies(bytes_, {"dtype": "uint8"}, gpu)
    assert not space.applies(bytes_, {"dtype": "uint8"}, cpu)
    assert not space.applies(bytes_, {}, gpu)  # the problem default, float32
    for problem in ({}, {"dtype": "uint8"}):
        assert space.applies(plain, problem, gpu) and space.applies(plain, problem, cpu)
    assert space.describe()["presets"]["bytes"]["when"] == bytes_.when
    assert "when" not in space.describe()["presets"]["plain"]
    # Naming `device`, it holds when no device is known, as device rules are skipped then.
    assert space.applies(bytes_, {"dtype": "uint8"}, None) and space.applies(bytes_, {}, None)
    for when, says in (("dtype ==", "is not an expression"), (3, "must be an expression in a string")):
        with pytest.raises(UsageError, match=f"preset 'bad': `when` {says}"):
            SearchSpace.from_dict({"knobs": {"a": {"values": [1]}}, "presets": {"bad": {"when": when}}})


def test_gpu_presets_for_narrow_pixels_are_measured_by_gpu_searches_of_those_kinds_only():
    from autotune.families.conv2d import Conv2DProblem

    gpu = GPU_LIMITS
    presets = CONV2D.space.presets.items()
    narrow = {name for name, p in presets if "dtype" in p.when and "channels" not in p.when}
    assert narrow == {"gpu_narrow_bytes", "gpu_narrow_bytes_edges", "gpu_narrow_staged"}
    configs = {name: CONV2D.space.presets[name].config for name in narrow}
    for dtype in ("uint8", "uint16", "int16"):
        for border, not_for in (("none", "gpu_narrow_bytes_edges"), ("mirror", "gpu_narrow_bytes")):
            problem = Conv2DProblem(9, 512, 512, dtype, out_dtype=dtype, border=border, channels=3)
            chosen = CONV2D.presets_for(problem, gpu)
            assert [n for n in sorted(narrow) if configs[n] in chosen] == sorted(narrow - {not_for})
            assert not any(c in CONV2D.presets_for(problem, device_info(0)) for c in configs.values())  # PoCL
    for dtype in ("float32", "float16"):
        chosen = CONV2D.presets_for(Conv2DProblem(9, 512, 512, dtype), gpu)
        assert not any(c in chosen for c in configs.values()), dtype
        assert CONV2D.space.presets["baseline"].config in chosen


def test_gpu_presets_for_one_channel_of_bytes_by_filter_width():
    """uint8, one channel, F <= 5: 8x8 tiles of uchar4 reads ('same': with edge work-groups,
    4 adjacent outputs an edge work-item); not for wider filters, other pixel types, RGB or PoCL."""
    from autotune.families.conv2d import Conv2DProblem

    square = CONV2D.space.presets["gpu_gray_bytes_8x8"].config
    edges = CONV2D.space.presets["gpu_gray_bytes_8x8_edges"].config
    for filter_width in (1, 3, 5, 7, 9):
        for dtype, border, channels in (("uint8", "none", 1), ("uint8", "mirror", 1), ("uint16", "none", 1),
                                        ("uint8", "none", 3), ("float32", "none", 1)):  # fmt: skip
            problem = Conv2DProblem(
                filter_width, 512, 512, dtype, out_dtype=dtype, border=border, channels=channels
            )
            chosen = [c for c in (square, edges) if c in CONV2D.presets_for(problem, GPU_LIMITS)]
            ours = dtype == "uint8" and channels == 1 and filter_width <= 5
            assert chosen == ([square] if border == "none" else [edges]) * ours, (filter_width, dtype, border)
            assert not any(c in CONV2D.presets_for(problem, device_info(0)) for c in (square, edges))  # PoCL


def test_gpu_presets_for_three_channels_by_filter_width():
    """RGB uint8: whole-pixel rows of 4 pixels for narrow filters, work-items of one
    channel for mid-width ones ('same' output: both with edge work-groups, the second from
    F = 5 to 11), a staged tile of 4 whole pixels for wide ones (measured at F = 3, 5, 9, 11,
    13, 17 and 25; uint16 ran slower with the first and last)."""
    from autotune.families.conv2d import Conv2DProblem

    presets = CONV2D.space.presets
    rows, items = presets["gpu_rgb_pixel_rows"].config, presets["gpu_rgb_channel_items"].config
    staged = presets["gpu_rgb_pixels_staged"].config
    rows_edges = presets["gpu_rgb_pixel_rows_edges"].config
    items_edges = presets["gpu_rgb_channel_items_edges"].config
    ours = (rows, items, rows_edges, items_edges, staged)
    valid = {3: [rows], 5: [rows], 7: [items], 9: [items], 11: [items], 13: [items], 15: [], 17: [staged]}
    # 'same': edge work-groups, whole-pixel rows to F = 4, work-items of one channel F = 5-11
    same = {3: [rows_edges], 5: [items_edges], 7: [items_edges], 9: [items_edges], 11: [items_edges]}
    for filter_width, expected in (*valid.items(), (25, [staged])):
        for dtype, border in (("uint8", "none"), ("uint8", "mirror"), ("uint16", "none")):
            problem = Conv2DProblem(filter_width, 512, 512, dtype, out_dtype=dtype, border=border, channels=3)
            chosen = CONV2D.presets_for(problem, GPU_LIMITS)
            wanted = expected if dtype == "uint8" else []  # RGB uint16 ran slower with them
            if border != "none":
                wanted = same.get(filter_width, [c for c in expected if c is staged])
            assert [c for c in ours if c in chosen] == wanted, (filter_width, dtype, border)
            assert not any(c in CONV2D.presets_for(problem, device_info(0)) for c in ours)  # PoCL
    rgba = Conv2DProblem(3, 512, 512, "uint8", out_dtype="uint8", channels=4)
    for problem in (rgba, Conv2DProblem(9, 512, 512), Conv2DProblem(17, 512, 512)):
        chosen = CONV2D.presets_for(problem, GPU_LIMITS)
        assert not any(c in chosen for c in ours)


def test_work_x_of_whole_pixels_is_for_three_channels_only():
    space = CONV2D.space
    base = space.complete({"filter_mode": "define"})
    for work_x in (3, 6, 12, 24):
        assert space.violations({**base, "work_x": work_x}, {"filter_width": 5, "channels": 3}) == []
        for channels in (1, 2, 4):
            reasons = space.violations({**base, "work_x": work_x}, {"filter_width": 5, "channels": channels})
            assert reasons and "three interleaved channels" in reasons[0], (work_x, channels)
    # Above 8 values a work-item only in whole pixels: 16 values (5 1/3 pixels) stay out.
    rgb = {"filter_width": 5, "channels": 3}
    assert space.violations({**base, "work_x": 16}, rgb)
    assert space.violations({**base, "work_x": 12, "image_vector": 4}, rgb) == []
    assert space.violations({**base, "work_x": 6, "image_vector": 4}, rgb)


def test_fingerprint_follows_knobs_and_rules_not_help_text():
    data = tomllib.loads((ROOT / "search_spaces" / "conv2d.toml").read_text())
    base = SearchSpace.from_dict(data).fingerprint
    assert base == CONV2D.space.fingerprint
    reworded = copy.deepcopy(data)
    reworded["knobs"]["unroll"]["help"] = "another wording"
    assert SearchSpace.from_dict(reworded).fingerprint == base
    widened = copy.deepcopy(data)
    widened["knobs"]["work_x"]["values"].append(16)
    assert SearchSpace.from_dict(widened).fingerprint != base
    ruled = copy.deepcopy(data)
    ruled["constraints"].append({"rule": "work_x <= 4", "reason": "a new rule"})
    assert SearchSpace.from_dict(ruled).fingerprint != base


def test_stored_configs_are_read_with_newer_knobs_at_their_defaults():
    older = {"filter_mode": "define", "work_x": 4}  # written before most knobs existed
    assert CONV2D.read_config(json.dumps(older)) == CONV2D.space.complete(older)
    assert CONV2D.read_config(older)["image_vector"] == 1
    assert CONV2D.read_config(json.dumps({"block_size_x": 32})) is None  # another space's


def _tiny_space() -> SearchSpace:
    return SearchSpace.from_dict(
        {
            "knobs": {
                "a": {"values": [1, 2, 3]},
                "b": {"values": ["x", "y"], "default": "y"},
                "c": {"values": ["p", "q", "r"]},
                "d": {"values": [1, 2, 4, 8], "default": 4},
                "e": {"values": [False, True]},
            },
            "constraints": [
                {"rule": "a != 2 or b == 'x'", "reason": "a=2 needs b=x"},
                {
                    "rule": "a != 3 or c == 'r' or (b == 'x' and d == 1)",
                    "reason": "a=3 needs c=r, or b=x and d=1",
                },
                {"rule": "d != 8 or a == 1", "reason": "d=8 needs a=1"},
                {"rule": "d <= n", "reason": "d is at most the problem's n"},
                {"rule": "not e", "reason": "e is never on"},
                {"rule": "a <= device.top", "reason": "a is at most the device's top"},
            ],
        }
    )


def test_with_value_changes_the_fewest_knobs():
    space = _tiny_space()
    problem = {"n": 8}
    # Already valid: only the asked knob differs from the (completed) base.
    assert space.with_value({}, "a", 1, problem) == {"a": 1, "b": "y", "c": "p", "d": 4, "e": False}
    # One knob must follow; the base's other knobs stay.
    assert space.with_value({}, "a", 2, problem) == {"a": 2, "b": "x", "c": "p", "d": 4, "e": False}
    assert space.with_value({"c": "q"}, "a", 2, problem)["c"] == "q"
    # One change (c, declared after b) beats two (b and d).
    assert space.with_value({}, "a", 3, problem) == {"a": 3, "b": "y", "c": "r", "d": 4, "e": False}
    # Two changes where needed; a changed knob tries its default (4) before 1 and 2.
    assert space.with_value({"d": 8}, "a", 2, problem) == {"a": 2, "b": "x", "c": "p", "d": 4, "e": False}
    # Rules over the problem's fields.
    assert space.with_value({"d": 8}, "a", 1, {"n": 4})["d"] == 4
    assert space.with_value({"d": 2}, "a", 1, {"n": 1}) == {"a": 1, "b": "y", "c": "p", "d": 1, "e": False}


def test_with_value_none_when_no_valid_config_has_it():
    space = _tiny_space()
    assert space.with_value({}, "e", True, {"n": 8}) is None
    assert space.with_value({}, "d", 8, {"n": 4}) is None
    # Device rules count only when a device is given.
    assert space.with_value({}, "a", 3, {"n": 8}, {"top": 2}) is None
    assert space.with_value({}, "a", 3, {"n": 8}, {"top": 3})["a"] == 3
    with pytest.raises(UsageError, match="unknown knob 'z'"):
        space.with_value({}, "z", 1, {"n": 8})
    with pytest.raises(UsageError, match="'e' cannot be 1"):
        space.with_value({}, "e", 1, {"n": 8})  # 1 is not True


def test_with_value_on_the_kernel_space():
    space = CONV2D.space
    problem = {"filter_width": 5}
    base = space.complete({"filter_mode": "define", "work_x": 2, "image_vector": 2})
    # unroll_rows=false is only valid with unroll=full: the search finds that alone.
    assert space.with_value(base, "unroll_rows", False, problem) == {
        **base,
        "unroll_rows": False,
        "unroll": "full",
    }
    assert space.with_value(base, "image_vector", 4, problem) == {**base, "image_vector": 4, "work_x": 4}
    assert space.with_value(base, "vector", 4, problem) == {**base, "vector": 4, "image_vector": 1}
    assert space.with_value(base, "filter_mode", "arg", problem) == {**base, "filter_mode": "arg"}
    # 'same' output of 8-bit pixels: every knob value has a valid config
    same = {**problem, "border": "mirror", "dtype": "uint8", "out_dtype": "uint8"}
    for name, knob in space.knobs.items():
        for value in knob.values:
            whole_pixels = name == "work_x" and value % 3 == 0  # tiles of whole pixels of three channels
            kind = {**same, "channels": 3} if whole_pixels else same
            if name == "channel_items" and value:  # work-items of one channel: 'valid' output here
                kind = {**problem, "channels": 3}
            config = space.with_value(base, name, value, kind)
            assert config is not None, f"no valid config has {name}={value}"
            assert config[name] == value and space.violations(config, kind) == []
    # 'valid' output: border_groups breaks a rule that names the border alone, so no config
    # has it, and with_value says so at once (without a pass over the whole space).
    reasons = space.violations({**base, "border_groups": True}, problem)
    assert reasons == ["border_groups is for 'same' output (a border)"]
    started = time.perf_counter()
    assert space.with_value(base, "border_groups", True, problem) is None
    assert space.with_value(base, "channel_items", True, problem) is None
    assert space.with_value(base, "edge_outputs_per_item", 4, problem) is None
    assert space.with_value(base, "adjacent_edge_outputs", True, problem) is None
    assert space.with_value(base, "work_x", 12, problem) is None
    assert time.perf_counter() - started < 1.0


def test_live_values_are_what_rules_of_one_knob_allow_for_the_problem():
    space = SearchSpace.from_dict(
        {
            "knobs": {
                "a": {"values": [1, 2, 3]},
                "flag": {"values": [False, True]},
                "b": {"values": [1, 2]},
                "wide": {"values": [1, 4, 8]},
            },
            "problem_defaults": {"channels": 1},
            "constraints": [
                {"rule": "not flag or channels > 1"},  # one knob and the problem: decides alone
                {"rule": "a != 3 or b == 2"},  # two knobs: decides nothing alone
                {"rule": "wide <= device.lanes"},  # one knob and the device: with a device only
            ],
        }
    )
    live = space.live_values({"channels": 1})
    assert live == {"a": (1, 2, 3), "flag": (False,), "b": (1, 2), "wide": (1, 4, 8)}
    assert space.live_values({"channels": 3})["flag"] == (False, True)
    assert space.live_values({"channels": 3}, {"lanes": 4})["wide"] == (1, 4)
    # The kernel space: what a one-channel float32 'valid' problem on a GPU leaves out.
    gpu = CONV2D.space.live_values({"filter_width": 9}, GPU_LIMITS)
    assert gpu["border_groups"] == (False,) and gpu["channel_items"] == (False,)
    assert gpu["edge_outputs_per_item"] == (1,) and gpu["adjacent_edge_outputs"] == (False,)
    assert gpu["output_conversion"] == ("builtin",) and gpu["x_vector"] == (1,)
    assert gpu["work_x"] == (1, 2, 4, 8, 16, 32, 64)
    rgb = CONV2D.space.live_values({"filter_width": 9, "channels": 3, "border": "mirror"}, GPU_LIMITS)
    assert rgb["border_groups"] == (False, True) and rgb["channel_items"] == (False, True)
    assert rgb["edge_outputs_per_item"] == (1, 2, 4, 8, 16) and rgb["adjacent_edge_outputs"] == (False, True)
    assert 12 in rgb["work_x"]
    gray = CONV2D.space.live_values({"filter_width": 9, "border": "mirror"}, GPU_LIMITS)
    assert gray["channel_items"] == (False,)


def test_a_search_models_only_the_values_the_problem_can_take():
    space = CONV2D.space
    problem = {"filter_width": 9}
    live = space.live_values(problem, GPU_LIMITS)
    search = Search(
        space, "gp", 1, valid=lambda c: not space.violations(c, problem, GPU_LIMITS), live_values=live
    )
    for _ in range(12):
        trial, config = search.ask()
        search.tell(trial, 1.0 + config["work_y"])
    gp = search.gp
    assert gp is not None
    modelled = dict(zip(gp.names, gp.values, strict=True))
    assert modelled["channel_items"] == [False] and modelled["border_groups"] == [False]
    assert modelled["work_x"] == [1, 2, 4, 8, 16, 32, 64]


@pytest.mark.parametrize(
    "family_name,marker", [("conv2d", "knobs"), ("separable", "separable-knobs")], ids=["conv2d", "separable"]
)
def test_readme_knob_tables_are_generated_from_the_space_files(family_name, marker):
    family = get_family(family_name)
    readme = (ROOT / "README.md").read_text()
    begin, end = f"<!-- {marker}:begin -->\n", f"<!-- {marker}:end -->"
    assert readme.count(begin) == 1 and readme.count(end) == 1, "README.md lost its knob table markers"
    block = readme.split(begin)[1].split(end)[0]
    assert block == family.space.markdown_table(), (
        f"README.md's knob table differs from search_spaces/{family.space_file}: replace the lines between "
        f"{begin.strip()} and {end} with the output of "
        f"`python -m autotune space --family {family_name} --markdown`"
    )


def test_markdown_table_escapes_pipes_and_spells_values_as_the_file_does():
    space = SearchSpace.from_dict(
        {"knobs": {"k": {"values": [True, False], "help": "a | b"}, "m": {"values": ["s", 2]}}}
    )
    assert space.markdown_table().splitlines() == [
        "| knob | values | default | effect |",
        "|---|---|---|---|",
        "| `k` | true, false | true | a \\| b |",
        "| `m` | s, 2 | s |  |",
    ]


def test_devices_stored_before_their_vector_width_read_as_one_lane():
    real = device_info(0)
    info = real.to_dict()
    del info["native_vector_width"]
    row = device_row(real, info)
    stored = DeviceInfo.stored(row)
    assert stored is not None and stored.native_vector_width == 1
    assert stored.local_mem_size == real.local_mem_size
    del info["local_mem_size"]  # a limit every row has: missing means a damaged row
    assert DeviceInfo.stored(SimpleNamespace(**{**vars(row), "info": json.dumps(info)})) is None
    assert real.native_vector_width >= 1
