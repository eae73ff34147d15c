"""What every family that filters an image in 'valid' mode shares: the input is the
output grown by F - 1 each way, one output per launch point, float32 rounding."""

from __future__ import annotations

import numpy as np

FLOAT32_EPS = float(np.finfo(np.float32).eps)
LAUNCH = "global[d] = roundup(ceil(out[d] / work_per_item[d]), local_size[d]), d = x, y"


class ValidImage:
    """What a 'valid' filtering of an image by an F x F filter has in any family: the
    input is the output grown by F - 1 each way; one output per launch point."""

    filter_width: int
    out_width: int
    out_height: int

    @property
    def in_width(self) -> int:
        return self.out_width + self.filter_width - 1

    @property
    def in_height(self) -> int:
        return self.out_height + self.filter_width - 1

    @property
    def min_bytes(self) -> int:
        return 4 * (self.in_width * self.in_height + self.out_width * self.out_height)

    @property
    def launch_extent(self) -> tuple[int, int]:
        return (self.out_width, self.out_height)

    @property
    def output_shape(self) -> tuple[int, int]:
        return (self.out_height, self.out_width)
