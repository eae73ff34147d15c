"""The kernel-family seam: everything generic code (space, search, measuring, store,
lookup, tuning, CLI) may know about an operator.

A family is one descriptor, the way CLBlast describes each tunable kernel in one place:
its space file, its template, its problem type (key fields, seeded test data, a float64
reference, a tolerance, flops and bytes moved), and how a config renders to a launchable
`KernelVariant` and binds to buffers. Generic code never names a family's knobs or key
fields; it asks the descriptor.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import json
import math
from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any, ClassVar

import numpy as np

from autotune.errors import UsageError
from autotune.space import Config, SearchSpace


@dataclass(frozen=True)
class Launch:
    """One kernel launch of a variant: which kernel of its program, and its geometry."""

    kernel_name: str
    local_size: tuple[int, ...]
    work_per_item: tuple[int, ...]

    def global_size(self, extent: tuple[int, ...]) -> tuple[int, ...]:
        """roundup(ceil(extent[d] / work_per_item[d]), local_size[d]) for each d."""
        return launch_size(extent, self.work_per_item, self.local_size)


@functools.lru_cache(maxsize=256)
def launch_size(
    extent: tuple[int, ...], work_per_item: tuple[int, ...], local_size: tuple[int, ...]
) -> tuple[int, ...]:
    """The global size that covers `extent` outputs, `work_per_item` a work-item (kept:
    every call of a Convolver asks it for the same sizes)."""
    sizes = []
    for out, work, local in zip(extent, work_per_item, local_size, strict=True):
        items = -(-out // work)
        sizes.append(-(-items // local) * local)
    return tuple(sizes)


@dataclass(frozen=True)
class Step:
    """One launch as a host queues it on a problem: kernel, sizes, arguments."""

    kernel_name: str
    global_size: tuple[int, ...]
    local_size: tuple[int, ...]
    arguments: tuple


@dataclass(frozen=True)
class KernelVariant:
    """Source plus everything a host needs to build and launch it. Most variants are
    one launch (`kernel_name`, `local_size`, `work_per_item`); a pipeline runs the
    kernels of `later_launches` after it, in order, from the same program."""

    source: str
    kernel_name: str
    local_size: tuple[int, ...]
    work_per_item: tuple[int, ...]  # outputs per work-item along each launch dimension
    build_options: tuple[str, ...] = ()
    config: dict[str, Any] = field(default_factory=dict)
    family: str = ""
    render_key: dict[str, Any] = field(default_factory=dict)  # problem fields compiled in
    later_launches: tuple[Launch, ...] = ()

    @property
    def launches(self) -> tuple[Launch, ...]:
        """Every launch in order, the first one included."""
        return (Launch(self.kernel_name, self.local_size, self.work_per_item), *self.later_launches)

    def global_size(self, extent: tuple[int, ...]) -> tuple[int, ...]:
        """The first launch's: roundup(ceil(extent[d] / work_per_item[d]), local_size[d])."""
        return launch_size(extent, self.work_per_item, self.local_size)

    @property
    def fingerprint(self) -> str:
        """Everything that decides what runs: a stored time is this kernel's only while
        the fingerprint matches (a newer template may render the same config otherwise)."""
        what_runs = [self.source, list(self.build_options), self.kernel_name]
        what_runs += [list(self.local_size), list(self.work_per_item)]
        if self.later_launches:  # left out for one launch: fingerprints stored before stay
            what_runs.append(
                [[x.kernel_name, list(x.local_size), list(x.work_per_item)] for x in self.later_launches]
            )
        return hashlib.sha256(json.dumps(what_runs).encode()).hexdigest()

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        for name in ("local_size", "work_per_item", "build_options"):
            data[name] = list(data[name])
        data["later_launches"] = [
            {
                **launch,
                "local_size": list(launch["local_size"]),
                "work_per_item": list(launch["work_per_item"]),
            }
            for launch in data["later_launches"]
        ]
        return data

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> KernelVariant:
        return cls(
            source=data["source"],
            kernel_name=data["kernel_name"],
            local_size=tuple(data["local_size"]),
            work_per_item=tuple(data["work_per_item"]),
            build_options=tuple(data.get("build_options", ())),
            config=dict(data.get("config", {})),
            family=data.get("family", ""),
            render_key=dict(data.get("render_key", {})),
            later_launches=tuple(
                Launch(x["kernel_name"], tuple(x["local_size"]), tuple(x["work_per_item"]))
                for x in data.get("later_launches", ())
            ),
        )


@dataclass(frozen=True)
class Problem(ABC):
    """One tuning problem of a family: its key fields (frozen dataclass fields other
    than `seed`) and seeded data. Subclasses are frozen dataclasses."""

    family: ClassVar[str]
    size_fields: ClassVar[tuple[str, ...]]  # the key fields that give the data's size
    # Fields added after problems were stored: left out of the key at their default,
    # so keys stored before them still name the same problems.
    optional_fields: ClassVar[tuple[str, ...]] = ()

    def key(self) -> dict[str, Any]:
        """The fields that name the problem in the store (everything but the seed, and
        optional fields at their defaults)."""
        return dict(self._key_items)

    @functools.cached_property
    def _key_items(self) -> tuple[tuple[str, Any], ...]:
        """`key`'s items, worked out once: every rule check of a search reads them."""
        items = []
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            if f.name != "seed" and not (f.name in self.optional_fields and value == f.default):
                items.append((f.name, value))
        return tuple(items)

    @property
    def output_dtype(self) -> np.dtype:
        """What the kernel writes (float32 unless the problem says otherwise)."""
        return np.dtype(np.float32)

    @property
    def size(self) -> tuple[int, ...]:
        return tuple(getattr(self, name) for name in self.size_fields)

    def kind(self) -> dict[str, Any]:
        """The key without its size: problems of one kind can share a tuned kernel."""
        return {k: v for k, v in self.key().items() if k not in self.size_fields}

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def gflops(self, time_ms: float | None) -> float | None:
        """Arithmetic rate of a kernel that solves this problem in `time_ms`."""
        return self.flops / (time_ms * 1e-3) / 1e9 if time_ms else None

    def gbs(self, time_ms: float | None) -> float | None:
        """Rate at which it moves the bytes it must move at least."""
        return self.min_bytes / (time_ms * 1e-3) / 1e9 if time_ms else None

    @property
    @abstractmethod
    def flops(self) -> int: ...

    @property
    @abstractmethod
    def min_bytes(self) -> int:
        """Bytes a kernel must move at least (read every input once, write the output)."""

    @property
    @abstractmethod
    def launch_extent(self) -> tuple[int, ...]:
        """Outputs along each launch dimension (global size before tiling)."""

    @abstractmethod
    def inputs(self) -> dict[str, np.ndarray]:
        """Seeded input arrays by argument name (the same for every trial of a problem)."""

    @property
    @abstractmethod
    def output_shape(self) -> tuple[int, ...]: ...

    @abstractmethod
    def reference(self) -> np.ndarray:
        """The right answer in float64, from `inputs()`."""

    @abstractmethod
    def tolerance(self) -> float:
        """The largest error a correct float32 kernel can make on `inputs()`."""


class KernelFamily(ABC):
    """One operator: its space, template, problem type, rendering and adapters."""

    name: ClassVar[str]
    algorithm: ClassVar[str]  # what `plan(...).algorithm` calls kernels of this family
    # `export --format header` (the C host's header): how entries are keyed, what kernels
    # take (autotune/families/c_header.py); None: this family writes no header.
    header_layout: ClassVar[Any] = None
    space_file: ClassVar[str]  # under search_spaces/
    template: ClassVar[str]  # under templates/
    problem_type: ClassVar[type[Problem]]
    description: ClassVar[str]

    @property
    def space(self) -> SearchSpace:
        return SearchSpace.shipped(self.space_file)

    def problem(self, key: Mapping[str, Any], seed: int = 0) -> Problem:
        """A problem from its stored key; a key this family does not know is bad input."""
        names = {f.name for f in dataclasses.fields(self.problem_type)} - {"seed"}
        if not names - set(self.problem_type.optional_fields) <= set(key) <= names:
            raise UsageError(f"a {self.name} problem has the fields {sorted(names)}, got {sorted(key)}")
        return self.problem_type(**key, seed=seed)  # type: ignore[call-arg]

    def kinds(
        self,
        filter_widths: Sequence[int | tuple[int, int]],
        ranks: Sequence[int] | None = None,
        pixels: Mapping[str, Any] | None = None,
    ) -> list[dict[str, Any]]:
        """The problem kinds a command line names (`-f 3,5,3x5 --rank 1,2 --dtype uint8`);
        `pixels`: dtype, out_dtype and border where they are not the defaults (and an
        `anchor` (x, y), cv2's, where one is given)."""
        raise UsageError(f"the {self.name} family is not tuned from the command line")

    def values_of_filter(
        self, filt: np.ndarray, pixels: Mapping[str, Any] | None = None
    ) -> tuple[dict[str, Any], Any]:
        """The problem kind a user's filter is (with the pixels, border and anchor `pixels`
        names, as `kinds` takes them), and the values a kernel compiled for it takes
        (`render(..., values=)`)."""
        raise UsageError(f"the {self.name} family takes no filter")

    def value_arrays(self, values: Any) -> dict[str, np.ndarray]:
        """The kernel's input arrays for a user's values (as `values_of_filter` gives
        them), by argument name."""
        raise UsageError(f"the {self.name} family takes no filter")

    def problems_of(
        self, kinds: Sequence[Mapping[str, Any]], size: Sequence[int], seed: int = 0
    ) -> list[Problem]:
        """One problem per kind, all of one data size."""
        sizes = dict(zip(self.problem_type.size_fields, size, strict=True))
        return [self.problem({**kind, **sizes}, seed=seed) for kind in kinds]

    def violations(self, config: Config, problem: Problem, device: object | None = None) -> list[str]:
        return self.space.violations(config, problem.key(), device)

    def presets_for(self, problem: Problem, device: object) -> list[Config]:
        """The presets a search of this problem on this device measures first: those
        whose `when` holds and that are valid here (a CPU layout on a GPU costs no trial)."""
        return [
            p.config
            for p in self.space.presets_applying(problem.key(), device)
            if not self.violations(p.config, problem, device)
        ]

    def read_config(self, stored: str | Mapping[str, Any]) -> Config | None:
        """A stored config as today's space reads it (knobs added since take their
        defaults); None for one written for another space, or not a config at all."""
        try:
            config = json.loads(stored) if isinstance(stored, str) else dict(stored)
            return self.space.complete(config)
        except (UsageError, ValueError, TypeError, AttributeError):
            return None  # another space's config, or a damaged row

    @abstractmethod
    def render(self, config: Config, problem: Problem, values: Any = None) -> KernelVariant:
        """The kernel for one point of the space on this problem (pure; raises
        UsageError for a point that cannot exist). `values`: the input a kernel that
        does not serve any data is compiled for (default: the problem's seeded data)."""

    @abstractmethod
    def arguments(self, variant: KernelVariant, problem: Problem, buffers: Mapping[str, Any]) -> tuple:
        """Kernel arguments in the family's ABI order; `buffers` holds one device buffer
        per name of `problem.inputs()`, and `output` (and may hold scalars a family
        names, such as a caller's border value; the problem's own otherwise)."""

    def global_size(self, variant: KernelVariant, problem: Problem) -> tuple[int, ...]:
        return variant.global_size(problem.launch_extent)

    def steps(self, variant: KernelVariant, problem: Problem, buffers: Mapping[str, Any]) -> list[Step]:
        """The launches that solve `problem`, in order (`buffers` as for `arguments`,
        with the `scratch` buffers besides). One launch unless a family says otherwise."""
        arguments = self.arguments(variant, problem, buffers)
        return [Step(variant.kernel_name, self.global_size(variant, problem), variant.local_size, arguments)]

    def scratch(self, variant: KernelVariant, problem: Problem) -> dict[str, int]:
        """Device buffers a variant's launches pass between them on `problem`: bytes by
        name (none for one launch)."""
        return {}

    def serves_any_data(self, config: Config) -> bool:
        """False for kernels compiled for one input's values (they need that input to
        render, and are right for it alone)."""
        return True

    # Words for a kernel compiled for one input's values, used in messages.
    one_input_kernel: ClassVar[str] = "is compiled for one input's values"
    any_input_kernel: ClassVar[str] = "serves any input"
    values_option: ClassVar[str] = "--values"
    values_needed: ClassVar[str] = "the best kernel is compiled for one input's values: give them"

    def describe_kind(self, kind: Mapping[str, Any]) -> str:
        """A problem kind in one short phrase (`F=5`); unique per kind."""
        return ",".join(f"{k}={v}" for k, v in kind.items())

    def t4_fields(self, key: Mapping[str, Any]) -> dict[str, Any]:
        """Problem fields that T4 results put beside a trial's knobs."""
        return {k: v for k, v in key.items() if k not in self.problem_type.size_fields}

    def default_size(self, device: object) -> tuple[int, ...]:
        """The data size to tune and answer for when none is given."""
        raise NotImplementedError(f"the {self.name} family has no default size")

    def run_key(self, problems: list[Problem]) -> dict[str, Any]:
        """What names a search's problems in its run key (two equal keys: the same search)."""
        return {"problems": [p.key() for p in problems]}

    def warm_start_distance(self, kind: Mapping[str, Any], other: Mapping[str, Any]) -> float:
        """How far another kind's winners are from this kind's: nearer ones start first."""
        return 0.0

    def related_kind_distance(self, kind: Mapping[str, Any], other: Mapping[str, Any]) -> float | None:
        """How far another kind's tuned kernel is from a good guess for this kind (its
        configs are points of the same space); None where it is no guess at all."""
        return None

    def adapt_related(self, config: Config, problem: Problem, device: object) -> Config:
        """A config tuned for a related kind, made fit for `problem` (see
        `related_kind_distance`)."""
        return config

    def fit_warm_start(self, config: Config, problem: Problem, device: object) -> Config:
        """Another problem's winner, changed as little as the family knows how where it
        is not valid for `problem` (as it is otherwise): the search would repair it to
        whichever valid neighbour its encoding finds first."""
        return config

    def output_written_as_it_can_be(self, config: Config, problem: Problem, device: object) -> Config:
        """A config lent from a kind with integer outputs to one without (or to a device
        without SIMD lanes) writes them with the built-in conversion: `output_conversion =
        bits` is only for integer outputs, and the layout is what is worth lending."""
        if config.get("output_conversion") != "bits" or not self.violations(config, problem, device):
            return config
        builtin = {**config, "output_conversion": "builtin"}
        return config if self.violations(builtin, problem, device) else builtin

    def manifest_fields(self, variant: KernelVariant) -> dict[str, Any]:
        """What a manifest adds for this family (its ABI, how to launch)."""
        return {}

    def export_stem(self, variant: KernelVariant) -> str:
        return f"{self.name}_{variant.fingerprint[:12]}"

    def any_data_twin(self, config: Config, problem: Problem, device: object) -> Config:
        """The nearest config that serves any input, for a config that does not."""
        return config

    def fallback(self, problem: Problem, device: object) -> Config:
        """The config for a problem never tuned on a compatible device."""
        assert self.space.fallback is not None, f"{self.space_file} declares no [fallback]"
        return dict(self.space.fallback.config)


def size_distance(a: tuple[int, ...], b: tuple[int, ...]) -> float:
    """How far apart two data sizes are: |log| of the ratio of their element counts."""
    return abs(math.log(math.prod(a) / math.prod(b)))
