"""The inference contract: the mode parameters every model suite shares, and the statistics of
latency and throughput that the job records and the host prints (standard library only).

Inference is judged by its tail and its curve, not a mean: single requests at batch 1 are timed
one by one (each synchronised), and each process reports their p50, p90, p99 and max beside the
cold first request; then a sweep of batch sizes gives samples/s at each and the batch where the
curve saturates.

Percentiles interpolate linearly between order statistics (numpy's default, as `stats.quartiles`),
so a p50 is the metric's median. Their intervals are distribution-free order statistics:
[x_(l), x_(u)] holds the true q-quantile with probability P(l <= B <= u - 1), B ~ Binomial(n, q)
(the count of requests below it), exactly, whatever the latency distribution's shape. A bootstrap
of p99 from a few hundred requests resamples the same handful of tail values and claims a 95 % it
does not have; the order statistics say what they cover instead: the max bounds p99 above only
with probability 1 - 0.99**n (87 % at n = 200), so `requests` defaults to 300 (299 is the fewest
whose p99 interval can reach 95 %).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from suites.contract.spec import CheckSpec, Param, ParamValue

MODES = ("train", "infer")
GENERATE = "generate"  # gpt only: greedy decoding with a KV cache
PERCENTILES: tuple[tuple[str, float], ...] = (("p50", 0.50), ("p90", 0.90), ("p99", 0.99))
LEVEL = 0.95
# The smallest n whose p99 interval can reach 95 %: 1 - 0.99**n >= 0.95 (the max as its upper end).
REQUESTS = 300
# A sweep's batch sizes grow by this factor from 1 up to `max_batch` (1, 8, 64, 512): a decade-ish
# step shows where the curve bends without timing every size.
SWEEP_FACTOR = 8
# The batch where throughput saturates: the smallest one reaching this share of the best measured.
SATURATION_SHARE = 0.9
# A smoke run's inference sizes (a suite's smoke dict adds them): a few requests and a short sweep.
INFERENCE_SMOKE = {"requests": 30, "max_batch": 8}
GENERATE_STEPS = 4  # decode steps whose logits the generate_logits check holds (of the first sequence)
GENERATE_LOGITS = 32  # and how many of each step's logits
LATENCY = "latency (batch 1)"
MAX_REQUESTS = 10_000  # a metric holds at most this many samples (harness/core/result_types.py MAX_SAMPLES)
MAX_SWEEP = 24  # batch sizes in a sweep: 8**24 is past any batch a device holds  # the time metric of single requests; its percentiles are derived from it


def mode_params(modes: Sequence[str] = MODES, max_batch: int = 512) -> tuple[Param, ...]:
    """The parameters of inference a model suite adds to its own: `mode`, `requests`, `max_batch`."""
    described = {
        "train": "train: the suite's training loop (the default)",
        "infer": "infer: evaluation mode, no gradients; latency of single requests at batch 1 (p50/p90/p99/max, "
        "the cold first request apart) and throughput against batch size",
        GENERATE: "generate: greedy decoding with a KV cache from a fixed prompt batch: time to first token, "
        "decode tokens/s and per-token latency percentiles",
    }
    return (
        Param("mode", "str", "train", "; ".join(described[m] for m in modes), choices=tuple(modes)),
        Param(
            "requests",
            "int",
            REQUESTS,
            "infer/generate: timed single requests (decode steps) after the cold one; 300 is the fewest whose p99 "
            "has a 95 % interval",
            min=5,
            max=MAX_REQUESTS,
        ),
        Param(
            "max_batch",
            "int",
            max_batch,
            f"infer: the throughput sweep's largest batch (1, {SWEEP_FACTOR}, {SWEEP_FACTOR**2}, ... up to it; "
            "a batch the device has no memory for ends the sweep there)",
            min=1,
            max=1 << 20,
        ),
    )


def inferring(params: Mapping[str, Any]) -> bool:
    return bool(params.get("mode", "train") != "train")


# The checks an inference job reports instead of the training loop's (and only then): the gate holds
# them across frameworks like any other, and a training job never to them.
INFER_CHECKS = ("infer_outputs",)
GENERATE_CHECKS = ("generated_tokens", "generate_logits", "kv_cache_error")
INFERENCE_CHECKS = (*INFER_CHECKS, *GENERATE_CHECKS)


def infer_checks(*, rtol: float, atol: float) -> tuple[CheckSpec, ...]:
    """`infer_outputs`: the model's evaluation-mode outputs on the first shared inputs, float32 (the
    tolerance is the suite's: what its initial outputs agree to, measured)."""
    return (
        CheckSpec(
            "infer_outputs",
            "mode=infer: evaluation-mode outputs of the shared weights on the first shared inputs (float32, "
            "no gradients)",
            rtol=rtol,
            atol=atol,
            required=False,
        ),
    )


def generate_checks(*, logits_rtol: float, logits_atol: float, cache_limit: float) -> tuple[CheckSpec, ...]:
    """A language model's generation checks: the greedy tokens equal across frameworks, the first steps'
    cached logits within the suite's logits tolerance, and each framework's cached logits against its own
    uncached forward pass over the same tokens (`cache_limit`: the largest difference, relative to the
    largest logit, that float32 in another summation order explains)."""
    return (
        CheckSpec(
            "generated_tokens",
            "mode=generate: the greedy tokens from the shared prompts and weights (float32)",
            rtol=0.0,
            required=False,
        ),
        CheckSpec(
            "generate_logits",
            "mode=generate: the first decode steps' logits from the KV cache, first sequence (float32)",
            rtol=logits_rtol,
            atol=logits_atol,
            required=False,
        ),
        CheckSpec(
            "kv_cache_error",
            "mode=generate: max |cached logits - the uncached forward pass's| / max |logits| over the generation",
            limit=cache_limit,
            required=False,
        ),
    )


def checks_of(params: Mapping[str, Any]) -> tuple[str, ...]:
    """The names of the inference checks a job of these params reports (none when it trains)."""
    mode = params.get("mode", "train")
    return INFER_CHECKS if mode == "infer" else GENERATE_CHECKS if mode == GENERATE else ()


def sweep(max_batch: int) -> list[int]:
    """The batch sizes of the throughput sweep: powers of SWEEP_FACTOR, and `max_batch` itself."""
    sizes, size = [], 1
    while size < max_batch:
        sizes.append(size)
        size *= SWEEP_FACTOR
    return [*sizes, max_batch]


def percentile(samples: Sequence[float], q: float) -> float:
    """The q-quantile, linear between order statistics (numpy's default)."""
    data = sorted(samples)
    if not data or not 0.0 <= q <= 1.0:
        raise ValueError(f"percentile {q} of {len(data)} samples")
    pos = q * (len(data) - 1)
    lo = math.floor(pos)
    hi = min(lo + 1, len(data) - 1)
    return data[lo] + (data[hi] - data[lo]) * (pos - lo)


def _binomial_cdf(n: int, q: float) -> list[float]:
    """P(B <= k) for k = 0..n, B ~ Binomial(n, q), from log-space terms (n in the millions is fine)."""
    if q <= 0.0 or q >= 1.0:
        return [1.0] * (n + 1) if q <= 0.0 else [0.0] * n + [1.0]
    log_q, log_p = math.log(q), math.log1p(-q)
    head = math.lgamma(n + 1)
    total, cdf = 0.0, []
    for k in range(n + 1):
        total += math.exp(head - math.lgamma(k + 1) - math.lgamma(n - k + 1) + k * log_q + (n - k) * log_p)
        cdf.append(min(total, 1.0))
    return cdf


def quantile_interval(samples: Sequence[float], q: float, level: float = LEVEL) -> tuple[float, float, float]:
    """(low, high, coverage): order statistics [x_(l), x_(u)] around the q-quantile and the probability
    they really hold it. Each tail may leave out (1 - level) / 2; a tail the sample cannot make that
    small (p99's upper end is at best the max, which misses with probability 0.99**n) takes what it
    must and the other tail gets the rest of 1 - level, so the coverage reaches `level` wherever the
    sample size allows it at all, and says so where it does not."""
    data = sorted(samples)
    n = len(data)
    if n == 0:
        raise ValueError("no samples")
    if n == 1:
        return data[0], data[0], 0.0
    cdf = _binomial_cdf(n, q)
    alpha = 1.0 - level

    def below(k: int) -> float:  # P(B <= k - 1): the quantile lies below x_(k)
        return cdf[k - 1] if k >= 1 else 0.0

    def above(k: int) -> float:  # P(B >= k): the quantile lies at or above x_(k)
        return 1.0 - cdf[k - 1]

    def upper(budget: float) -> int:  # the smallest rank whose upper tail is within budget (at most the max)
        return next((k for k in range(2, n + 1) if above(k) <= budget), n)

    def lower(budget: float, high: int) -> int:  # the largest rank under `high` whose lower tail is within budget
        return max((k for k in range(1, high) if below(k) <= budget), default=1)

    high = upper(alpha / 2)
    low = lower(alpha / 2, high)
    # One tail the sample cannot make small enough: the other gives up what it can so that the two
    # together leave out 1 - level, where that is reachable at all (else each keeps its half).
    if alpha / 2 < above(high) <= alpha:
        low = lower(alpha - above(high), high)
    elif alpha / 2 < below(low) <= alpha:
        high = max(upper(alpha - below(low)), low + 1)
    coverage = cdf[high - 1] - below(low)
    return data[low - 1], data[high - 1], max(0.0, min(1.0, coverage))


def saturation(points: Sequence[tuple[int, float]], share: float = SATURATION_SHARE) -> int | None:
    """The smallest batch whose throughput reaches `share` of the best in the sweep (batch, samples/s);
    None for an empty sweep."""
    if not points:
        return None
    best = max(rate for _, rate in points)
    return min(batch for batch, rate in points if rate >= share * best)


def mode_problem(values: dict[str, ParamValue]) -> str | None:
    """Inference runs on one device: a data-parallel inference job is refused before it runs."""
    devices = values.get("devices", 0)
    if inferring(values) and isinstance(devices, int) and devices >= 1:
        return f"mode={values['mode']} runs on one device: leave out devices={devices} (data-parallel is training only)"
    return None
