"""Launch geometry of 'same' kernels with `border_groups`: the rows of work-groups that
come before the tiles and compute every output the interior tiles leave.

The kernel works the same numbers out from its arguments (templates/conv2d.cl.j2, the
`border_groups` block); a host that launches an exported kernel adds these rows too.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class InteriorBox:
    """The outputs interior tiles cover (their inputs inside the image), in values along
    x (pixels x channels) and rows: x in [x0, x0 + width), y in [y0, y0 + height)."""

    x0: int
    y0: int
    width: int
    height: int

    def edge_outputs(self, row_values: int, rows: int) -> int:
        """Outputs of a `row_values` x `rows` output outside the box."""
        return (rows - self.height) * row_values + self.height * (row_values - self.width)


def tile_values(config: Mapping[str, Any], channels: int) -> int:
    """Values along x the interior box is counted in: a work-item's `work_x`, or with
    `channel_items` a block of `work_x` pixels of every channel (one work-item each)."""
    return int(config["work_x"]) * (channels if config.get("channel_items") else 1)


@functools.lru_cache(maxsize=256)
def interior_box(
    row_values: int,
    rows: int,
    work: tuple[int, int],
    filter_shape: tuple[int, int],
    anchor: tuple[int, int],
    channels: int = 1,
) -> InteriorBox:
    """The box of whole tiles (`work` = tile_values, work_y outputs) whose inputs lie
    inside the image. `filter_shape`: (rows, width) of taps; `anchor`: (column, row) of
    the tap over each output pixel. Kept: every call of a Convolver asks for the same one."""
    work_x, work_y = work
    filter_rows, filter_width = filter_shape
    anchor_x, anchor_y = anchor
    x0 = min(-(-anchor_x * channels // work_x) * work_x, row_values)
    y0 = min(-(-anchor_y // work_y) * work_y, rows)
    x1 = max(row_values - (filter_width - 1 - anchor_x) * channels, 0) // work_x * work_x
    y1 = max(rows - (filter_rows - 1 - anchor_y), 0) // work_y * work_y
    return InteriorBox(x0, y0, max(x1 - x0, 0), max(y1 - y0, 0))


def edge_rows(edge_outputs: int, global_x: int, local_y: int, per_item: int = 1) -> int:
    """Work-item rows (whole work-groups) that hold `edge_outputs`, `per_item` a work-item."""
    per_group_row = global_x * local_y * per_item
    return -(-edge_outputs // per_group_row) * local_y
