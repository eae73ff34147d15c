"""A Convolver is `convolve()` set up once: the same answers from NumPy arrays and from
device arrays, clear errors for arrays it cannot take, and its kernel fixed when built."""

import numpy as np
import pyopencl as cl
import pyopencl.array as cl_array
import pytest
from scipy import signal

import autotune
from autotune.call_arguments import same_padding
from tests.conftest import cli_json

RNG = np.random.default_rng(11)
IMAGE = RNG.uniform(-1, 1, (45, 62)).astype(np.float32)
FULL_RANK = RNG.uniform(-1, 1, (5, 5)).astype(np.float32)
RANK_ONE = np.outer(np.hanning(7) + 0.1, np.hanning(7) + 0.1).astype(np.float32)
RANK_TWO = (RANK_ONE - 0.5 * np.outer(np.hanning(7) ** 2, np.linspace(-1, 1, 7))).astype(np.float32)
FILTERS = [("direct", FULL_RANK), ("separable", RANK_ONE), ("separable", RANK_TWO)]


@pytest.fixture
def db(tmp_path):
    return f"sqlite:///{tmp_path / 'none.db'}"


@pytest.mark.parametrize("algorithm,filt", FILTERS, ids=["direct", "rank1", "rank2"])
@pytest.mark.parametrize("mode,flip", [("valid", False), ("same", False), ("same", True), ("valid", True)])
def test_host_calls_answer_as_convolve_does(db, algorithm, filt, mode, flip):
    convolver = autotune.Convolver(IMAGE.shape, filt, mode=mode, flip=flip, algorithm=algorithm, db=db)
    expected = autotune.convolve(IMAGE, filt, mode=mode, flip=flip, algorithm=algorithm, db=db)
    assert convolver.plan.algorithm == algorithm
    taps = filt[::-1, ::-1] if flip else filt
    padded = np.pad(IMAGE, same_padding(filt.shape, flip))
    reference = signal.correlate2d(
        (padded if mode == "same" else IMAGE).astype(np.float64), taps.astype(np.float64), "valid"
    )
    np.testing.assert_allclose(expected, reference, rtol=0, atol=1e-5)
    for _ in range(2):  # buffers reused
        np.testing.assert_array_equal(convolver(IMAGE), expected)
    out = np.empty_like(expected)
    assert convolver(IMAGE, out=out) is out
    np.testing.assert_array_equal(out, expected)


@pytest.mark.parametrize("algorithm,filt", FILTERS, ids=["direct", "rank1", "rank2"])
def test_device_arrays_in_and_out_chain_on_the_queue(db, algorithm, filt):
    convolver = autotune.Convolver(IMAGE.shape, filt, algorithm=algorithm, db=db)
    expected = convolver(IMAGE)
    images = [cl_array.to_device(convolver.queue, IMAGE * k) for k in (1.0, 2.0, -1.0)]
    outs = [convolver(image, wait=False) for image in images]  # queued, not waited for
    for k, out in zip((1.0, 2.0, -1.0), outs, strict=True):
        assert isinstance(out, cl_array.Array) and out.shape == expected.shape
        np.testing.assert_allclose(out.get(), expected * k, rtol=0, atol=1e-5)
    reused = outs[0]
    assert convolver(images[1], out=reused) is reused
    np.testing.assert_allclose(reused.get(), expected * 2, rtol=0, atol=1e-5)


@pytest.mark.parametrize("algorithm,filt", FILTERS[:2], ids=["direct", "rank1"])
def test_arguments_kept_set_follow_every_calls_arrays(db, algorithm, filt):
    """A Convolver sets only the kernel arguments that changed since its last launch: calls
    that switch images and outputs in any order, host calls between, and a second Convolver
    of the same kernel interleaved each get their own arrays' results."""
    first = autotune.Convolver(IMAGE.shape, filt, algorithm=algorithm, db=db)
    second = autotune.Convolver(IMAGE.shape, filt, algorithm=algorithm, db=db)
    expected = first(IMAGE)
    images = {k: cl_array.to_device(first.queue, IMAGE * k) for k in (1.0, 3.0)}
    outs = [cl_array.empty(first.queue, expected.shape, np.float32) for _ in range(2)]
    steps = [(first, 1.0, 0), (first, 1.0, 0), (first, 3.0, 0), (second, 1.0, 1), (first, 3.0, 1)]
    steps += [(first, 1.0, 1), ("host", 3.0, None), (first, 1.0, 0), (second, 3.0, 0)]
    for convolver, k, o in steps:
        if convolver == "host":
            np.testing.assert_allclose(first(IMAGE * k), expected * k, rtol=0, atol=1e-5)
            continue
        convolver(images[k], out=outs[o])
        np.testing.assert_allclose(outs[o].get(), expected * k, rtol=0, atol=1e-5)


def test_arrays_it_cannot_take_are_clear_errors(db):
    convolver = autotune.Convolver(IMAGE.shape, FULL_RANK, db=db)
    queue = convolver.queue
    with pytest.raises(ValueError, match="images of shape"):
        convolver(IMAGE[:40])
    with pytest.raises(ValueError, match="out must be a float32 NumPy array of shape"):
        convolver(IMAGE, out=np.empty((3, 3), np.float32))
    with pytest.raises(ValueError, match="out must be a float32 NumPy array"):
        convolver(IMAGE, out=np.empty(convolver.output_shape, np.float64))
    device_image = cl_array.to_device(queue, IMAGE)
    with pytest.raises(TypeError, match="float32"):
        convolver(cl_array.to_device(queue, IMAGE.astype(np.float64)))
    with pytest.raises(ValueError, match="must have shape"):
        convolver(device_image, out=cl_array.empty(queue, (2, 2), np.float32))
    with pytest.raises(TypeError, match="pyopencl Array"):
        convolver(device_image, out=np.empty(convolver.output_shape, np.float32))
    with pytest.raises(ValueError, match="C-contiguous"):
        wide = cl_array.to_device(queue, np.zeros((45, 124), np.float32))
        convolver(wide[:, ::2])
    other = cl.CommandQueue(cl.Context([queue.device]))
    with pytest.raises(ValueError, match="another OpenCL context"):
        convolver(cl_array.to_device(other, IMAGE))
    same = autotune.Convolver(IMAGE.shape, RANK_ONE, mode="same", algorithm="separable", db=db)
    on_device = same(cl_array.to_device(same.queue, IMAGE)).get()  # the border is read on the device
    np.testing.assert_array_equal(on_device, same(IMAGE))
    uint8 = autotune.Convolver(IMAGE.shape, FULL_RANK, dtype=np.uint8, db=db)
    with pytest.raises(TypeError, match="must be a uint8 array"):
        uint8(cl_array.to_device(uint8.queue, IMAGE))
    with pytest.raises(ValueError, match="image_shape"):
        autotune.Convolver((45,), FULL_RANK, db=db)
    with pytest.raises(ValueError, match="smaller than"):
        autotune.Convolver((3, 3), FULL_RANK, db=db)
    # 'same' output as large as the image: its own buffer as out would be read while written
    in_place = autotune.Convolver(IMAGE.shape, FULL_RANK, mode="same", border="mirror", db=db)
    shared = cl_array.to_device(in_place.queue, IMAGE)
    with pytest.raises(ValueError, match="image's own buffer"):
        in_place(shared, out=shared)
    for value in (None, "x", [1], True):
        with pytest.raises(TypeError, match="border_value must be a number"):
            autotune.Convolver(IMAGE.shape, FULL_RANK, mode="same", border_value=value, db=db)


def test_images_of_another_type_are_taken_only_where_no_value_changes(db):
    """A uint8 Convolver given 300.0 would have stored 44 (wrapped); a float32 one given
    uint8 pixels filters them as convolve() does."""
    box = np.full((3, 3), 1 / 9, np.float32)
    uint8 = autotune.Convolver(
        (20, 20), box, dtype=np.uint8, out_dtype="same", mode="same", border="mirror", db=db
    )
    for image in (np.full((20, 20), 300.0, np.float32), np.full((20, 20), 256, np.uint16)):
        with pytest.raises(TypeError, match="filters uint8 images"):
            uint8(image)
    assert uint8(np.full((20, 20), 200, np.uint8))[5, 5] == 200
    pixels = RNG.integers(0, 256, IMAGE.shape).astype(np.uint8)
    float32 = autotune.Convolver(IMAGE.shape, FULL_RANK, db=db)
    np.testing.assert_allclose(
        float32(pixels), autotune.convolve(pixels, FULL_RANK, db=db), rtol=0, atol=1e-3
    )


def test_its_kernel_is_fixed_when_built(tmp_path):
    """A Convolver keeps the kernel it was built with; one built after the database
    gained a tuned kernel uses that one."""
    db = f"sqlite:///{tmp_path / 'tuned.db'}"
    image = RNG.uniform(-1, 1, (28, 44)).astype(np.float32)  # a 40x24 'valid' output for F=5
    before = autotune.Convolver(image.shape, FULL_RANK, db=db)
    assert before.plan.level == "default"
    cli_json("search", "-d", "0", "-f", "5", "-s", "40x24", "--trials", "4", "--db", db)
    after = autotune.Convolver(image.shape, FULL_RANK, db=db)
    assert after.plan.level == "exact" and before.plan.level == "default"
    np.testing.assert_allclose(after(image), before(image), rtol=0, atol=1e-5)


@pytest.mark.parametrize("channels", [1, 3])
def test_real_images_on_the_host_and_on_the_device(db, channels):
    """uint8 (colour) frames, 'same' output with cv2's default border, uint8 out: the
    host path, the device path and cv2.filter2D agree."""
    cv2 = pytest.importorskip("cv2")
    shape = (37, 50, channels) if channels > 1 else (37, 50)
    frame = RNG.integers(0, 256, shape).astype(np.uint8)
    blur = (RANK_ONE / RANK_ONE.sum()).astype(np.float32)
    options = {"mode": "same", "border": "mirror", "dtype": np.uint8, "out_dtype": "same", "db": db}
    convolver = autotune.Convolver(shape, blur, **options)
    assert convolver.plan.algorithm == "direct" and convolver.plan.problem.border == "mirror"
    on_host = convolver(frame)
    on_device = convolver(cl_array.to_device(convolver.queue, frame)).get()
    theirs = cv2.filter2D(frame, -1, blur).reshape(shape)
    assert on_host.dtype == on_device.dtype == np.uint8 and on_host.shape == shape
    assert np.array_equal(on_host, on_device)
    assert np.abs(on_host.astype(int) - theirs.astype(int)).max() <= 1
    del options["dtype"]  # convolve() takes it from the image
    assert np.array_equal(on_host, autotune.convolve(frame, blur, **options))
