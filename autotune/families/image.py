"""What every family that filters an image in 'valid' mode shares: the input is the
output grown by F - 1 each way, one output per launch point, float32 rounding."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

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


def shrink_work_group(
    config: dict[str, Any], still_refused: Callable[[dict[str, Any]], bool]
) -> dict[str, Any]:
    """Halve the larger of `local_x` and `local_y` while the device refuses the config:
    how a fallback of an image family fits a small device."""
    while still_refused(config) and (config["local_x"] > 1 or config["local_y"] > 1):
        knob = "local_x" if config["local_x"] >= config["local_y"] else "local_y"
        config[knob] = int(config[knob]) // 2
    return config
