"""64-byte vectors only where the device's compiler hands them to its built-ins intact.

pip's PoCL 3.0 builds kernels for an AMD Zen 4 as for a Zen 3 (no AVX-512) and links them
with its AVX-512 built-in library: `x_vector = 16` kernels of 8- and 16-bit pixels came
back wrong or crashed there, `x_vector = 8` of float64 pixels stopped its code generator.
The device's version string says which CPU PoCL builds for.
"""

from autotune.devices import DeviceInfo, device_info, widest_vector_bytes
from autotune.families.conv2d import CONV2D, Conv2DProblem
from autotune.families.separable import SEPARABLE, SeparableProblem
from tests.stored import device_row

PIP_POCL = "OpenCL 3.0 PoCL 3.0-rc2  Linux, Release, RELOC, LLVM 14.0.6, SLEEF, DISTRO, POCL_DEBUG"
DEBIAN_POCL = "OpenCL 3.0 PoCL 3.1+debian  Linux, None+Asserts, RELOC, SPIR, LLVM 15.0.6, SLEEF, DISTRO"


def _pocl_device(cpu: str) -> str:
    return f"OpenCL 3.0 PoCL HSTR: pthread-x86_64-unknown-linux-gnu-{cpu}"


def test_a_cpu_built_for_without_avx512_gets_32_byte_vectors_at_most():
    assert widest_vector_bytes(PIP_POCL, _pocl_device("znver3"), 16) == 32  # a Zen 4 its LLVM 14 misnames
    assert widest_vector_bytes(PIP_POCL, _pocl_device("generic"), 16) == 32
    assert widest_vector_bytes(DEBIAN_POCL, _pocl_device("skylake-avx512"), 16) == 128
    zen4 = "OpenCL 3.0 PoCL HSTR: pthread-x86_64-pc-linux-gnu-znver4"
    assert widest_vector_bytes(DEBIAN_POCL, zen4, 16) == 128
    assert widest_vector_bytes(PIP_POCL, _pocl_device("znver3"), 8) == 128  # AVX2 on both sides: it agrees
    assert widest_vector_bytes("OpenCL 3.0 CUDA 12.8.61", "OpenCL 3.0 CUDA", 1) == 128
    assert widest_vector_bytes(PIP_POCL, "OpenCL 3.0 PoCL", 16) == 128  # no CPU named: as before


def _cpu(widest_bytes: int) -> dict:
    return {
        "max_work_group_size": 4096,
        "max_work_item_sizes": [4096, 4096, 4096],
        "local_mem_size": 1 << 20,
        "max_constant_buffer_size": 1 << 20,
        "native_vector_width": 16,
        "widest_vector_bytes": widest_bytes,
    }


def test_both_families_rule_out_vectors_wider_than_the_device_takes():
    conv2d = CONV2D.space.complete({"filter_mode": "define", "x_vector": 16, "work_x": 16, "local_x": 8})
    stream = SEPARABLE.space.complete({"stream_rows": 64, "x_vector": 16, "work_x": 64, "local_x": 1})
    for space, config, problem in (
        (CONV2D.space, conv2d, {"filter_width": 5}),
        (SEPARABLE.space, stream, {"filter_width": 5, "rank": 1}),
    ):
        assert space.violations(config, problem, _cpu(128)) == []
        assert any("vector wider" in r for r in space.violations(config, problem, _cpu(32)))
        assert space.violations({**config, "x_vector": 8}, problem, _cpu(32)) == []
        doubles = {**problem, "dtype": "float64", "out_dtype": "float64"}  # double8: 64 bytes
        eight, four = {**config, "x_vector": 8}, {**config, "x_vector": 4}
        assert any("vector wider" in r for r in space.violations(eight, doubles, _cpu(32)))
        assert not any("vector wider" in r for r in space.violations(four, doubles, _cpu(32)))
        unrecorded = {k: v for k, v in _cpu(128).items() if k != "widest_vector_bytes"}  # an older row
        assert space.violations(config, problem, unrecorded) == []


def test_the_real_device_searches_and_presets_no_wider_vectors_than_it_takes():
    real = device_info(0)
    assert real.widest_vector_bytes in (32, 128)
    for family, problem in (
        (CONV2D, Conv2DProblem(9, 64, 64, "uint8", out_dtype="uint8", border="mirror", anchor=4)),
        (SEPARABLE, SeparableProblem(9, 1, 64, 64, "uint8", out_dtype="uint8", border="mirror", anchor=4)),
    ):
        widest = min(2 * real.native_vector_width, real.widest_vector_bytes // 4, 16)
        assert all(c.get("x_vector", 1) <= widest for c in family.presets_for(problem, real))
        assert max(family.space.live_values(problem.key(), real)["x_vector"]) == widest


def test_devices_stored_before_the_limit_read_as_unlimited():
    real = device_info(0)
    info = real.to_dict()
    del info["widest_vector_bytes"]
    stored = DeviceInfo.stored(device_row(real, info))
    assert stored is not None and stored.widest_vector_bytes == 128
