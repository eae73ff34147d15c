"""Every setting of the `gp` sampler in one object, passed to `Search`, the tuner and
the replay engine (never set module-wide); `parse` reads the `key=value,...` form bench
scripts and replay variants use."""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any

from autotune.errors import UsageError


@dataclass(frozen=True)
class SearchOptions:
    """Settings of the `gp` sampler, passed to `Search`; the defaults are those of
    `autotune search`. `SearchOptions.parse("global_step=ei,genetic_every=4")` reads
    them from text (bench scripts)."""

    startup_trials: int = 10  # random start points before the model
    # Start points spread out (0: off): each is, of this many random draws, the one most
    # knobs apart from every point measured or in flight (warm starts included). 32 was
    # chosen among 8 and 32 on seeds 72000-72099 and judged on 73000-73099 and 74000-74029
    # (BENCHMARKS.md, "Start points spread out"); `start_spread=0` gives the draws of before.
    start_spread: int = 32
    pow2_share: float = 0.5  # start points: share of mixed knobs drawn from their powers of two
    # The surrogate sees at most this many points, the fastest first. 100 keeps a proposal
    # under 0.07 s (median) at 1000 measured points, where 300 took 0.3-0.4 s (BENCHMARKS.md).
    model_points: int = 100
    # Once the surrogate's set is full (`model_points`), a model's fit starts from its
    # previous one and sweeps once (`surrogate.WarmStart`): "choice", the two models that
    # choose whether the step uses value offsets (`choose_offsets`); "all", the step's own
    # model too; "off": every fit from the defaults. The three fits of a proposal are most of
    # its cost at 1000 measured points: "choice" cut the median proposal there by about 15%,
    # "all" by 30%. On fresh seeds 118000-118019 at 150 and 200 evaluations "choice" was level
    # with "off" (4 searches better, 6 worse of 220 at 200) and "all" a little behind (6 and
    # 11; BENCHMARKS.md, "Warm fits"). Searches of 100 evaluations or fewer never fill the
    # set, so they are the same whatever this says.
    warm_fits: str = "choice"
    # "mean" (lowest predicted time), "ei" (expected improvement) or "sample" (lowest time
    # in one random draw of the model: Thompson sampling, `surrogate.ranking`).
    global_step: str = "mean"
    # From this many evaluations on (0: never), the global steps take "sample" whatever
    # `global_step` says: a draw finds second basins' ways out in long searches (at 100
    # evaluations) and costs short ones (at 50), BENCHMARKS.md.
    sample_after: int = 0
    # How the local step orders the best point's neighbours: "ei" (expected improvement)
    # or "mean" (the lowest predicted time). "mean" measured, not made the default: ahead on
    # the MI250X and W7800, behind on point-in-polygon, GEMM and the A4000 (BENCHMARKS.md,
    # "Local steps that leave out neighbours predicted far slower").
    local_step: str = "ei"
    # The local step leaves out neighbours the model predicts slower than this many times
    # the best time (0: none left out); with none left, the turn is the global step's.
    # Measured, not made the default: 3 was best of 1.5-4 on seeds 93000-93049 and lost the
    # A4000 to its 1.24x basin on 94000-94099 (BENCHMARKS.md, the same section).
    local_reach: float = 0.0
    switches_first: bool = True  # the local step tries the best point's switch moves first
    # ... but only a move whose value no point measured or in flight within this many knobs
    # of the best point has (0: every move, at every new best point), ...
    switch_scope: int = 3
    # ... counting, with "same", only points whose other switches match the best point's ("any":
    # every point). With "any", scope 3 lifts the worst quartile at 50 evaluations and leaves a
    # quarter of convolution A4000's searches in its 1.24x basin at 100 (a use_shmem flip seen
    # under the other read_only says nothing there); with "same" it lifts the worst median and
    # quartile at 50 and keeps the tail at 100 (BENCHMARKS.md, "Switch moves first only where
    # their value is not known near the best point").
    switch_context: str = "same"
    # Two two-valued knobs flipped at once are switch moves too ("on"): a basin whose single
    # flips are all slow is left through both at once (convolution A4000: use_shmem=0 alone is
    # 22x with read_only=1, both flipped reach the optimum's side). "after": pairs only once no
    # single flip of the best point is unknown; "off": single flips alone (BENCHMARKS.md, "Two
    # switches flipped at once").
    switch_pairs: str = "on"
    genetic_every: int = 0  # every Nth step after the start is a genetic one (0: never; BENCHMARKS.md)
    genetic_pool: int = 20  # parents come from this many best points
    # Knobs whose values are exactly 0, 1, ..., k-1 (k >= 3) name choices (a method, a
    # variant), not sizes. "ordinal": treated like any numeric knob (their 1 and 2 count
    # as powers of two). "categorical": no power-of-two treatment, every value in the start
    # points, every other value a switch move of the local step, one-hot in the model.
    enumerations: str = "ordinal"
    # Stalls: after `stall_after` evaluations (0: never) in which the best time did not
    # improve by `stall_gain` (relative), the global steps explore until it does:
    # "ei" (expected improvement over the whole space), "random" (a random start point) or
    # "far" (the lowest predicted time among points three knobs or more from the best) or
    # "sample" (the fastest point of one draw of the model, as `global_step = sample`).
    # 12 and "ei" were chosen on held-out landscapes (BENCHMARKS.md).
    stall_after: int = 12
    stall_gain: float = 0.01
    stall_step: str = "ei"
    # Measured and not made the default (BENCHMARKS.md, "Where `gp` stops short"): where a
    # stalled search's local steps look, around the best point ("best") or around the best
    # point measured since the stall began ("explored", a second basin); and how many knobs
    # from its centre the local step reaches once the search stalls or the one-knob
    # neighbours are spent (1: one-knob neighbours only).
    stall_centre: str = "best"
    local_radius: int = 1
    # The model also sees, for each pair of size knobs (positive numbers, more than one
    # value), the log2 ratio of their values: where rules tie sizes together (a tile and the
    # work-group that divides it) the time may follow the ratio more than either size.
    ratio_features: bool = False
    # Measured and not made the default (BENCHMARKS.md, "Two `gp` settings for the misses
    # at 50 evaluations"): local steps around several basins (1: around the best point
    # only), and a spent best point's local turns given to the global step. The centres are
    # the best point and, in turn, the best measured point three knobs or more from every
    # centre before it (a jump no one- or two-knob step makes). A centre is spent once
    # `basin_patience` of its one-knob neighbours are measured (none beat it) or none is
    # left; the local step goes around the first centre not spent, else around the best
    # point. A new best in a basin is a fresh centre. With `local_centres > 1` the centre
    # replaces the one `stall_centre` picks.
    local_centres: int = 1
    basin_patience: int = 4
    # Budget to the step that pays (0: off): once this many of the best point's one-knob
    # neighbours are measured (none beat it), its local turns go to the global step until
    # a new best point comes (whose neighbours are tried afresh). It counts the best
    # point's neighbours only: with `local_centres` too, a spent best point also ends the
    # other basins' local turns, and it skips `local_radius`'s wider step.
    local_patience: int = 0
    # The local step also takes the one-knob and diagonal neighbours of every measured point
    # within this fraction of the best time (0: the best point's only). Two points 0.1% apart
    # are one point to a timer, and the way out of a trap may start at the other: on GEMM
    # RTX 3060 the trap at 1.078 (MDIMC = 32) has no better point one or two knobs away, while
    # its neighbour at 1.079 (MDIMC = 16) has a diagonal move (NDIMB down, VWN up) to 1.057.
    # Measured, not made the default (BENCHMARKS.md, "Local steps from points tied with the
    # best"): 0.01 once stalled lifts GEMM RTX 3060 at 50 on three seed sets and costs other
    # landscapes as much on fresh seeds; at 100 the worst quartile is better.
    local_ties: float = 0.0
    # When `local_ties` applies: "always", or "stalled" (once the search stalls, `stall_after`,
    # or the best point's own neighbours are spent).
    ties_when: str = "always"
    # Failed points (no time: the kernel did not compile or run). "worst": told to the
    # model as the worst time seen, one GP for both. "kernel": the time model sees the
    # points that ran only, and a kernel-weighted share of the nearby points that ran
    # (`surrogate.KernelSuccess`) gives each candidate its chance to run: expected
    # improvement is weighted by it, and candidates more likely to fail than to run are
    # skipped while others are left (a failure's worst time is a cliff the smooth time
    # model cannot fit, which bends it). "model": the same with a GP on the labels.
    # "quantile": told as the `failure_quantile` quantile of the log times that ran (a
    # lower cliff than the worst). All three measured, none made the default
    # (bench/results/gp_failure_model.md).
    failures: str = "worst"
    failure_quantile: float = 0.9
    # What the time model fits: "log" (log times) or "ranks" (each measured time's rank as a
    # standard normal quantile, `surrogate.normal_scores`): a model of the order alone, which
    # a few points many times slower than the rest cannot flatten near the best. With
    # "ranks", `local_reach` (a limit in log time) has no meaning.
    targets: str = "log"
    # Measured and not made the default (bench/results/gp_study_2026-12-04.md). A trust
    # region after TuRBO, in knobs (0: off): the global step, while the search is not
    # stalled, takes only points within this many knobs of the best point (spaces too large
    # to list also get every point up to three knobs away as candidates). Two gains in a
    # row (a new best by `stall_gain`) widen it by a knob, `trust_failures` evaluations in a
    # row without one narrow it by a knob; narrowed below one knob, the global step takes
    # the whole space until the next gain, which starts the region afresh.
    trust_region: int = 0
    trust_failures: int = 3
    # `ratio_features` for the pairs of size knobs the rules tie together only: a pair is
    # tied when, among the valid points of random draws, a pair of its values never occurs
    # where their shares predict several (CLBlast's GEMM: a tile and the work-group size or
    # vector width that divides it). Ignored with `ratio_features`, which has every pair.
    tied_ratios: bool = False
    # The time model's targets pulled toward the fastest measured one-knob neighbour of each
    # point: log t - envelope * (log t - log min(t, neighbours' times)). 0: plain log times;
    # 1: each point as fast as its fastest neighbour (a model of the lower envelope). 0.5 was
    # measured on 40, 50 and 100 fresh seeds and not made the default (BENCHMARKS.md): ahead
    # on most landscapes, behind on the W7800 and GEMM RTX 3090.
    envelope: float = 0.0
    # Diagonal moves of the local step: for each pair of knobs the rules tie (`tied_ratios`'
    # pairs: a tile and the work-group or vector width that divides it), the four points one
    # value up or down in both at once. A corner such as 32x1 beside a best 64x2 is no
    # one-knob neighbour, and when 32x2 and 64x1 are slower no one-knob path leads there.
    # "always": beside the one-knob neighbours in each local step (switch moves still
    # first); "stalled": only once the search stalls or the one-knob neighbours are spent;
    # "off": one-knob moves only. "always" was chosen among the three on seeds 80000-80049
    # and judged on 81000-81099 (BENCHMARKS.md, "Diagonal moves").
    diagonal_moves: str = "always"
    # Where a diagonal move lands on an invalid point, the same move with a third knob the
    # rules tie to either of its knobs moved too: "switches", two-valued ones flipped
    # (W7800: 16x4 -> 32x2 blocks is invalid with use_padding=1, which is tied to the block
    # width); "tied", any such knob one value up or down (GEMM: MWG and MDIMC up together
    # is invalid with VWN = 8, valid with VWN = 4); "off": the invalid move is dropped.
    # Neither kept: "switches" gained nothing on fresh seeds, "tied" cost GEMM (BENCHMARKS.md).
    diagonal_repair: str = "off"
    # Reshape moves of the local step: the best point with one numeric knob's value doubled
    # and another's halved (a 4x2 tile to 2x4, a 256x1 work-group to 128x2), whether or not
    # the rules tie the two. A shape keeps its size (outputs a work-item, work-items a group)
    # and changes its aspect, which is no one-knob move and, where the values are not
    # neighbours in the knob's list, no diagonal one (convolution MI250X: a 4x2 tile at 1.482,
    # 2x4 at 1.015, 3x2 and 4x4 at 50x and 15x). "on": beside the other neighbours, in the
    # model's order; "first": with the switch moves, tried before the rest where unknown
    # (`switch_scope`); "off". "first" was shaped on seeds 119000-119019 and judged on
    # 120000-122019 (BENCHMARKS.md, "Reshape moves"): the sum of P(<= 5%) at 50 over the
    # eleven landscapes up on all three fresh sets, convolution MI250X's by 0.25-0.40 each
    # time, convolution A4000's down by 0 to 0.20; the default since then.
    reshape_moves: str = "first"
    # With `reshape_moves=first`: once this many reshape moves in a row (each from the best
    # point of its time) brought no new best by `stall_gain`, they wait for the model's order
    # like the other neighbours until one pays again (0: always first). Aimed at convolution
    # W7800's searches that end one knob from the optimum (128x2 work-groups at 1.051, 32x2 at
    # 1.000) while each new best point's reshape moves go first. 8 gained on the seeds it was
    # shaped on (130000-130019: 4 searches within 5% at 50 that the default missed, none the
    # other way) and lost on fresh ones (131000-131019: 0 against 5, three on GEMM RTX 3090);
    # not the default (BENCHMARKS.md, "Reshape moves that wait").
    reshape_patience: int = 0
    # One-knob moves of the best point that break a rule, retried with a two-valued knob the
    # rules tie to the moved knob flipped (dedispersion MI250X: tile_size_x 2 -> 1 is invalid
    # with tile_stride_x = 1, and both moved at once leave a trap at 1.35 for 1.02). Where the
    # move is one value, the repaired point is a diagonal move too, which the model ranks low
    # once it has seen the switch's flip alone slow (2.96 there). "on": beside the other
    # neighbours, in the model's order; "first": with the switch moves, tried before the rest
    # where unknown (`switch_scope`); "off". "first" was shaped on seeds 123000-123019 and
    # judged on 124000-125019 (BENCHMARKS.md, "Repaired moves"): dedispersion MI250X's P(<= 5%)
    # at 50 0.85 -> 1.00 and 0.75 -> 1.00, convolution A4000's +0.05 and +0.10, W7800's -0.05
    # and 0, the rest level (no tied switch in their spaces); the default since then.
    neighbour_repair: str = "first"
    # The model adds to its smooth kernel an offset per value of each knob of three values
    # or more (a kernel on shared values, its weight fitted), so one value (a block size of
    # 32 among 16..256) may be faster than the values beside it without bending the whole
    # axis. Alone (without `choose_offsets`) it lifts the W7800's searches (P(<= 5%) at 50
    # 0.40 -> 0.63 on 100 fresh seeds) and costs three other landscapes (BENCHMARKS.md).
    value_offsets: bool = True
    # With `value_offsets`: each step uses the model with offsets only where it ordered the
    # latest points that ran better than the plain model (both fitted to the points before).
    # Judged on 100 fresh seeds at 50 evaluations against the plain model: mean P(<= 5%)
    # 0.65 -> 0.68, lowest 0.37 -> 0.43, none lower by more than 0.03; at 100 level
    # (BENCHMARKS.md). The default since then; `value_offsets=false` gives the plain model.
    choose_offsets: bool = True

    def __post_init__(self) -> None:
        if self.global_step not in ("mean", "ei", "sample"):
            raise UsageError(f"global_step must be mean, ei or sample, not {self.global_step!r}")
        if self.local_step not in ("mean", "ei"):
            raise UsageError(f"local_step must be mean or ei, not {self.local_step!r}")
        if self.stall_step not in ("ei", "random", "far", "sample"):
            raise UsageError(f"stall_step must be ei, random, far or sample, not {self.stall_step!r}")
        if self.diagonal_moves not in ("off", "stalled", "always"):
            raise UsageError(f"diagonal_moves must be off, stalled or always, not {self.diagonal_moves!r}")
        if self.reshape_moves not in ("off", "on", "first"):
            raise UsageError(f"reshape_moves must be off, on or first, not {self.reshape_moves!r}")
        if self.neighbour_repair not in ("off", "on", "first"):
            raise UsageError(f"neighbour_repair must be off, on or first, not {self.neighbour_repair!r}")
        if self.diagonal_repair not in ("off", "switches", "tied"):
            raise UsageError(f"diagonal_repair must be off, switches or tied, not {self.diagonal_repair!r}")
        if self.stall_centre not in ("best", "explored"):
            raise UsageError(f"stall_centre must be best or explored, not {self.stall_centre!r}")
        if self.enumerations not in ("ordinal", "categorical"):
            raise UsageError(f"enumerations must be ordinal or categorical, not {self.enumerations!r}")
        if self.failures not in ("worst", "model", "kernel", "quantile"):
            raise UsageError(f"failures must be worst, model, kernel or quantile, not {self.failures!r}")
        if self.targets not in ("log", "ranks"):
            raise UsageError(f"targets must be log or ranks, not {self.targets!r}")
        if not 0.0 <= self.failure_quantile <= 1.0:
            raise UsageError("failure_quantile must be between 0 and 1")
        if self.local_radius < 1:
            raise UsageError("local_radius must be >= 1")
        if self.local_centres < 1 or self.basin_patience < 1 or self.local_patience < 0:
            raise UsageError("local_centres and basin_patience must be >= 1, local_patience >= 0")
        if self.ties_when not in ("always", "stalled"):
            raise UsageError(f"ties_when must be always or stalled, not {self.ties_when!r}")
        if not 0.0 <= self.local_ties < 1.0:
            raise UsageError("local_ties must be >= 0 and < 1")
        if not 0.0 <= self.envelope <= 1.0:
            raise UsageError("envelope must be between 0 and 1")
        if self.local_reach < 0.0:
            raise UsageError("local_reach must be >= 0")
        if self.trust_region < 0 or self.trust_failures < 1:
            raise UsageError("trust_region must be >= 0, trust_failures >= 1")
        if self.start_spread < 0:
            raise UsageError("start_spread must be >= 0")
        if self.warm_fits not in ("off", "choice", "all"):
            raise UsageError(f"warm_fits must be off, choice or all, not {self.warm_fits!r}")
        if self.switch_pairs not in ("off", "on", "after"):
            raise UsageError(f"switch_pairs must be off, on or after, not {self.switch_pairs!r}")
        if self.switch_context not in ("any", "same"):
            raise UsageError(f"switch_context must be any or same, not {self.switch_context!r}")
        if self.sample_after < 0 or self.switch_scope < 0 or self.reshape_patience < 0:
            raise UsageError("sample_after, switch_scope and reshape_patience must be >= 0")
        if self.startup_trials < 1 or self.model_points < 2 or self.genetic_pool < 2:
            raise UsageError("startup_trials must be >= 1, model_points and genetic_pool >= 2")

    @classmethod
    def parse(cls, text: str) -> SearchOptions:
        """`key=value` pairs separated by commas; unnamed settings keep their defaults."""
        settings: dict[str, Any] = {}
        kinds = {f.name: f.type for f in fields(cls)}
        for item in filter(None, (part.strip() for part in text.split(","))):
            key, sep, value = item.partition("=")
            key = key.strip()
            if not sep or key not in kinds:
                raise UsageError(f"bad gp setting {item!r} (settings: {', '.join(kinds)})")
            kind = kinds[key]
            try:
                if kind == "bool":
                    if value.strip().lower() not in ("1", "0", "true", "false", "on", "off"):
                        raise ValueError(value)
                    settings[key] = value.strip().lower() in ("1", "true", "on")
                else:
                    settings[key] = {"int": int, "float": float, "str": str}[kind](value.strip())
            except ValueError:
                raise UsageError(f"bad value for gp setting {key}: {value!r}") from None
        return cls(**settings)

    def describe(self) -> str:
        """The settings that differ from the defaults, as `parse` reads them."""
        default = SearchOptions()
        changed = [
            f"{f.name}={getattr(self, f.name)}"
            for f in fields(self)
            if getattr(self, f.name) != getattr(default, f.name)
        ]
        return ",".join(changed)
