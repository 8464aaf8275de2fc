"""Which side of each A/A session was faster, from the run folders `ab_budget.py --keep DIR` kept.

An A/A session's two sides run the same code, so across sessions each side should be ahead about
half the time. This prints, per session, the candidate's median round median over the baseline's
(for one metric of one framework) and how many sessions had the candidate ahead: a side ahead in
nearly every session is a difference between the sides the code did not make, however rarely a
single session calls it (docs/method.md, "Forked rounds").

    python benchmarks/side_bias.py /tmp/keep/aa --framework jax --metric noop
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from harness.core.schema import InvalidResult, load_result  # noqa: E402


def round_medians(run: Path, framework: str, metric: str) -> list[float]:
    """The median of each round's samples of `metric`, in round order."""
    rounds = sorted(run.glob(f"rounds/round-*/{framework}.json"), key=lambda p: int(p.parent.name.split("-")[1]))
    out = []
    for path in rounds:
        try:
            doc = load_result(path)
        except InvalidResult:
            continue
        found = [m for m in doc["metrics"] if m["name"] == metric and m["samples"]]
        if found:
            out.append(statistics.median(found[0]["samples"]))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("folder", type=Path, help="a folder of run folders (ab_budget.py --keep DIR, then aa/)")
    parser.add_argument("--framework", default="jax")
    parser.add_argument("--metric", default="noop")
    args = parser.parse_args()
    sides: dict[str, tuple[str | None, str | None]] = {}
    for summary in sorted(args.folder.glob("*/summary.json")):
        interleaved = json.loads(summary.read_text()).get("interleaved") or {}
        sides[summary.parent.name] = (interleaved.get("side"), interleaved.get("partner"))
    ratios = []
    for name, (side, partner) in sides.items():
        if side != "candidate" or partner not in sides:
            continue
        candidate = round_medians(args.folder / name, args.framework, args.metric)
        baseline = round_medians(args.folder / str(partner), args.framework, args.metric)
        if candidate and baseline:
            ratios.append(statistics.median(candidate) / statistics.median(baseline))
    if not ratios:
        sys.exit("no A/A session with both sides' rounds in that folder")
    print("candidate / baseline, median round medians, each session: " + " ".join(f"{r:.3f}" for r in ratios))
    ahead = sum(r < 1 for r in ratios)
    print(f"candidate ahead in {ahead} of {len(ratios)} sessions, behind in {sum(r > 1 for r in ratios)}; "
          f"median ratio {statistics.median(ratios):.4f}")  # fmt: skip


if __name__ == "__main__":
    main()
