import copy
import json
import tomllib

import pytest

from autotune.devices import device_info
from autotune.errors import UsageError
from autotune.families.conv2d import CONV2D
from autotune.space import SearchSpace
from tests.conftest import ROOT

SEED_PRESETS = {"baseline", "unroll4", "define", "define_unroll", "constant", "float4", "local"}


def test_every_seed_kernel_is_a_preset():
    space = CONV2D.space
    assert set(space.presets) >= SEED_PRESETS
    for preset in space.presets.values():
        assert set(preset.config) == set(space.knobs)
        assert space.violations(preset.config, {"filter_width": 5}) == []


def test_design_knobs_are_declared():
    knobs = CONV2D.space.knobs
    assert set(knobs) == {
        "filter_mode",
        "filter_space",
        "unroll",
        "unroll_rows",
        "vector",
        "image_vector",
        "local_x",
        "local_y",
        "work_x",
        "work_y",
        "cache_local",
    }
    assert knobs["unroll"].values == (1, 2, 4, 8, "full")
    assert knobs["vector"].values == (1, 4)


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
