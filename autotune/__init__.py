"""JIT code generator and autotuner for OpenCL 2D image convolution."""

__version__ = "0.1.0"
