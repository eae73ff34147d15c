"""JIT code generator and autotuner for OpenCL 2D image convolution."""

__version__ = "0.1.0"

from autotune.convolver import Convolver  # noqa: E402
from autotune.plans import clear_plans, plan_cache_info  # noqa: E402
from autotune.runtime import convolve, plan  # noqa: E402

__all__ = ["Convolver", "clear_plans", "convolve", "plan", "plan_cache_info", "__version__"]
