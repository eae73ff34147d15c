"""The real CLI in a subprocess: what users see, including on bad input."""

import json

import numpy as np
import pytest

from autotune.families.conv2d import CONV2D
from autotune.families.conv2d.render import generate
from tests.conftest import cli_json, run_cli
from tests.opencl_runner import run_kernel, scipy_valid


def test_devices_json_lists_pocl_with_limits():
    devices = cli_json("devices")["devices"]
    assert [d["index"] for d in devices] == list(range(len(devices)))
    pocl = next(d for d in devices if "Portable" in d["platform"])
    assert set(pocl) == {"index", "name", "vendor", "driver", "platform", "type", "limits"}
    for key in (
        "compute_units",
        "max_work_group_size",
        "local_mem_size",
        "max_constant_buffer_size",
        "driver_version",
    ):
        assert key in pocl["limits"]
    assert pocl["type"] == "CPU"
    assert pocl["limits"]["double_precision"] is True  # PoCL reads and writes double
    table = run_cli("devices")
    assert table.returncode == 0 and "Portable" in table.stdout


def test_every_numbered_device_compiles_a_kernel():
    """Devices are numbered only if they can build a kernel (pip's PoCL on a CPU its LLVM
    does not know builds nothing, and is listed as left out instead)."""
    import pyopencl as cl

    from autotune.devices import list_devices, open_device

    data = cli_json("devices")
    assert isinstance(data["unusable"], list)
    for info in list_devices():
        _, device = open_device(info.index)
        cl.Program(cl.Context([device]), "__kernel void k(__global int *x) { x[0] = 2; }").build()


def test_a_device_that_cannot_compile_is_left_out_with_the_reason(monkeypatch):
    """Every device taken as suspect and given a kernel no compiler builds: none is numbered,
    each is listed with its compiler's error, and asking for a device says why."""
    from autotune import devices
    from autotune.errors import AutotuneError

    def fresh() -> None:
        devices._probe_build.cache_clear()
        devices._UNUSABLE.clear()

    fresh()
    monkeypatch.setattr(devices, "_suspect", lambda platform, device: True)
    monkeypatch.setattr(devices, "PROBE_KERNEL", "__kernel void probe(__global int *x) { x[0] = ; }")
    try:
        assert devices.list_devices() == []
        left_out = devices.unusable_devices()
        assert left_out and all("error:" in line and "install a newer PoCL" in line for line in left_out)
        with pytest.raises(AutotuneError, match="no usable OpenCL device: .*error:"):
            devices.open_device(0)
    finally:
        monkeypatch.undo()
        fresh()
    assert devices.list_devices(), "the real devices come back once the probe builds"


def test_a_device_row_written_before_a_limit_was_recorded_gets_it(tmp_path):
    """Rows keep the limits they were written with, and gain ones recorded since (an
    export for a device not on this machine reads its limits from the row)."""
    import json

    from autotune.devices import DeviceInfo, device_info
    from autotune.store import Store
    from autotune.store.models import Device

    info = device_info(0)
    store = Store(f"sqlite:///{tmp_path / 'rows.db'}")
    try:
        device_id = store.device_id(info)
        with store.session() as s:
            row = s.get(Device, device_id)
            older = {k: v for k, v in json.loads(row.info).items() if k != "double_precision"}
            row.info = json.dumps({**older, "local_mem_size": 1234})  # as written then
        assert store.device_id(info) == device_id
        with store.session() as s:
            row = s.get(Device, device_id)
            refreshed = json.loads(row.info)
            assert refreshed["double_precision"] is True and refreshed["local_mem_size"] == 1234
            assert DeviceInfo.stored(row).double_precision is True
    finally:
        store.close()


def test_space_json_matches_the_declaration():
    described = cli_json("space")
    space = CONV2D.space
    assert list(described["knobs"]) == list(space.knobs)
    assert set(described["presets"]) == set(space.presets)
    for name, preset in space.presets.items():  # where each applies, when not everywhere
        assert described["presets"][name].get("when", "") == preset.when
    assert "dtype in" in described["presets"]["gpu_narrow_staged"]["when"]
    assert described["constraints"] and described["points"] == space.points()
    shown = run_cli("space", env={"COLUMNS": "400"})
    assert shown.returncode == 0 and "gpu_narrow_staged" in shown.stdout and "everywhere" in shown.stdout


def test_space_markdown_is_the_knob_table():
    result = run_cli("space", "--markdown")
    assert result.returncode == 0, result.stderr
    assert result.stdout == CONV2D.space.markdown_table()
    assert run_cli("space", "--markdown", "--json").returncode != 0


def test_render_writes_what_a_host_needs(tmp_path):
    result = run_cli("render", "--filter-width", "7", "--preset", "float4", "--out", str(tmp_path), "-d", "0")
    assert result.returncode == 0, result.stderr
    manifest = json.loads((tmp_path / "convolve_f7.json").read_text())
    source = (tmp_path / manifest["source"]).read_text()
    assert source == generate(CONV2D.space.presets["float4"].config, 7).source
    for key in (
        "kernel_name",
        "build_options",
        "local_size",
        "work_per_item",
        "filter_width",
        "config",
        "device",
        "image_size",
        "time_ms",
        "gflops",
    ):
        assert key in manifest
    assert manifest["device"]["platform"].startswith("Portable")
    # A host that knows only the manifest can run it at any size.
    rng = np.random.default_rng(5)
    image = rng.uniform(-1, 1, (40, 29)).astype(np.float32)
    filt = rng.uniform(-1, 1, (7, 7)).astype(np.float32)
    out = run_kernel(
        source,
        manifest["kernel_name"],
        manifest["build_options"],
        manifest["local_size"],
        manifest["work_per_item"],
        image,
        filt,
    )
    np.testing.assert_allclose(out, scipy_valid(image, filt), atol=1e-4)


def test_render_json_names_what_it_wrote(tmp_path):
    data = cli_json("render", "-f", "5", "--preset", "local", "--out", str(tmp_path), "-d", "0")
    assert data["device"]["index"] == 0
    assert [p.rsplit("/", 1)[-1] for p in data["written"]] == ["convolve_f5.cl", "convolve_f5.json"]
    assert data["manifest"] == json.loads((tmp_path / "convolve_f5.json").read_text())


def test_render_from_config_json(tmp_path):
    config = json.dumps({"filter_mode": "define", "work_x": 4, "work_y": 2, "unroll": "full"})
    result = run_cli("render", "-f", "3", "--config", config, "--out", str(tmp_path))
    assert result.returncode == 0, result.stderr
    manifest = json.loads((tmp_path / "convolve_f3.json").read_text())
    assert manifest["work_per_item"] == [4, 2] and manifest["device"] is None


def test_study_runs_on_pocl():
    data = cli_json("study", "-d", "0", "-f", "3", "-s", "64x48", "--preset", "baseline", "--preset", "local")
    assert data["device"]["index"] == 0
    rows = data["rows"]
    assert {r["preset"] for r in rows} == {"baseline", "local"}
    assert all(r["status"] == "ok" and r["time_ms"] > 0 for r in rows)
    # Without --preset: those a search here would measure first (not the GPU layouts for
    # narrow pixels, whose `when` keeps them to GPU searches).
    everything = cli_json("study", "-d", "0", "-f", "3", "-s", "40x24")["rows"]
    applying = {n for n, p in CONV2D.space.presets.items() if not p.when}
    assert {r["preset"] for r in everything} == applying and len(everything) == len(applying)
    # The table without --preset, of two widths and a filter larger than the output (the
    # table failed on its own default: "'NoneType' object is not iterable").
    table = run_cli("study", "-d", "0", "-f", "3,9", "-s", "6x4")
    assert table.returncode == 0, table.stderr
    assert all(name in table.stdout for name in applying) and "F=9" in table.stdout


LITERAL = '{"filter_mode": "define", "filter_space": "literal"}'
BAD_INPUT = [
    (["render", "-f", "0", "--preset", "baseline", "--out", "{tmp}"], "filter width"),
    (["render", "-f", "-3", "--preset", "baseline", "--out", "{tmp}"], "filter width"),
    (["render", "-f", "abc", "--preset", "baseline", "--out", "{tmp}"], "abc"),
    (["render", "-f", "5", "--preset", "nope", "--out", "{tmp}"], "unknown preset"),
    (["render", "-f", "5", "--out", "{tmp}"], "exactly one of"),
    (["render", "-f", "5", "--config", '{"colour": 1}', "--out", "{tmp}"], "unknown knob"),
    (["render", "-f", "5", "--config", '{"unroll": 3}', "--out", "{tmp}"], "'unroll' cannot be 3"),
    (
        ["render", "-f", "5", "--config", '{"unroll": "1; } __kernel void evil("}', "--out", "{tmp}"],
        "cannot be",
    ),
    (["render", "-f", "5", "--config", "{not json", "--out", "{tmp}"], "not valid JSON"),
    (["render", "-f", "5", "--config", "[1, 2]", "--out", "{tmp}"], "JSON object"),
    (
        ["render", "-f", "5", "--config", '{"unroll": "full", "filter_mode": "arg"}', "--out", "{tmp}"],
        "unroll=full",
    ),
    (["render", "-f", "5", "--preset", "baseline", "--out", "{tmp}", "-d", "99"], "unknown device 99"),
    (
        ["render", "-f", "5", "--config", '{"local_x": 256, "local_y": 64}', "--out", "{tmp}", "-d", "0"],
        "work-group",
    ),
    (
        ["render", "-f", "5", "--config", LITERAL, "--out", "{tmp}"],
        "give them with --filter",
    ),
    (["render", "-f", "5", "--preset", "baseline", "--out", "{tmp}", "--filter", "no.npy"], "not a readable"),
    (["study", "-d", "0", "-f", "3,x", "-s", "64x64"], "comma list"),
    (["study", "-d", "0", "-f", "", "-s", "64x64"], "comma list"),
    (["study", "-d", "0", "-f", "3", "-s", "64by64"], "WIDTHxHEIGHT"),
    (["study", "-d", "0", "-f", "3", "-s", "0x64"], "image size"),
    (["study", "-d", "0", "-f", "3", "-s", "64x64", "--preset", "fast"], "unknown preset"),
    (["study", "-d", "-1", "-f", "3"], "unknown device"),
    (["frobnicate"], "No such command"),
]


@pytest.mark.parametrize("args,message", BAD_INPUT, ids=[" ".join(a[:3]) for a, _ in BAD_INPUT])
def test_bad_input_is_one_line_and_exit_2(tmp_path, args, message):
    out = tmp_path / "out"
    result = run_cli(*[a.replace("{tmp}", str(out)) for a in args])
    assert result.returncode == 2, (result.stdout, result.stderr)
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("autotune: error:") and message in lines[0]
    assert "Traceback" not in result.stderr
    assert not out.exists()  # nothing written


def test_render_to_unwritable_place_is_a_runtime_error(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("")
    result = run_cli("render", "-f", "3", "--preset", "baseline", "--out", str(blocker / "sub"))
    assert result.returncode in (1, 2)
    assert len(result.stderr.strip().splitlines()) == 1 and "Traceback" not in result.stderr


def test_text_from_the_database_is_shown_as_is_never_as_markup(tmp_path):
    """Device names and error messages come from drivers and the database: brackets in
    them are text, neither a markup error nor styling."""
    import shutil
    import sqlite3

    from tests.conftest import ROOT

    path = tmp_path / "tune.db"
    shutil.copy(ROOT / "tests" / "fixtures" / "schema_0002.db", path)
    db = f"sqlite:///{path}"
    assert run_cli("upgrade", "--db", db).returncode == 0
    name, error = "[/x] [bold red]gpu", "error: [/] unexpected [bold]token[/bold]"
    with sqlite3.connect(path) as connection:
        connection.execute("UPDATE autotune_devices SET name = ?", (name,))
        connection.execute("UPDATE autotune_trials SET error = ? WHERE run_id = 1", (error,))
    connection.close()
    for command in (["best"], ["history"], ["show", "1"]):
        result = run_cli(*command, "--db", db, env={"COLUMNS": "400"})
        assert result.returncode == 0, (command, result.stderr)
        shown = error if command[0] == "show" else name
        assert shown in result.stdout, (command, result.stdout)
    # styling would need a terminal; rendered for one, the brackets must still be there
    result = run_cli("history", "--db", db, env={"COLUMNS": "400", "FORCE_COLOR": "1", "TERM": "xterm"})
    assert result.returncode == 0 and "[bold red]gpu" in result.stdout
