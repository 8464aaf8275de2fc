"""A rerunnable mutation check of the judging code: how many single-line bugs do the tests miss?

Generates single-line mutations of the code that judges runs (harness/judge/**/*.py,
harness/core/statistics.py, harness/report/junit.py, and the verdict and flag functions of
harness/publish/flags.py and harness/publish/compare_page.py), finding the mutation points with
the ast module and applying each as a text edit of one line:

    compare  < <-> <=, > <-> >=, == <-> !=
    boolop   and <-> or
    not      `not x` -> `x`
    number   x -> 2x (0.25 -> 0.5), 0 -> 1, 1 -> 0 and 1 -> 2
    sign     a - b -> a + b, -x -> x
    sqrt     math.sqrt(x) -> (x)
    minmax   min <-> max
    return   return True <-> return False

Constants in decorators, annotations and f-strings are left alone (a cache size or a printed digit
is not a verdict). The selection is deterministic: every file gets an equal share of --limit (what
a small file cannot use goes to the others; `--spread proportional`: a share proportional to its
mutation points), and within a file the mutants are taken in the order of a hash of (--seed, the
operator, the line's text before and after): the same line keeps its place when code around it
moves, so two runs of the check (before and after a change to the tests or the code) test largely
the same mutants. The guards moved out of assessment.py (harness/judge/guards/) share its share.

The tree is copied once to a temporary folder (without .git and .venv; committed there as a git
repository of its own, since some tests name a revision). For each mutant the one file is mutated there, a fixed, fast selection of the tests that exercise the judging code runs
(`python -m pytest -x -q -p no:cacheprovider -m "not integration and not slow"`, PYTHONPATH set
to the copy so its `harness` and `suites` are imported, not an editable install's), and the file
is restored. Before any mutant the check proves the isolation (a deliberately broken copy must
fail the tests, and `harness` must import from the copy) and that the pristine copy passes. A
mutant is killed when the tests fail (or run past --timeout), survives when they pass.

    python benchmarks/mutate_judge.py --list                  # the mutants, nothing run
    python benchmarks/mutate_judge.py --out /tmp/mutants.json # about an hour on a 2-core machine
    python benchmarks/mutate_judge.py --out /tmp/mutants.json --resume  # go on after an interruption
    python benchmarks/mutate_judge.py --root /tmp/judge-before --out /tmp/mutants-before.json
    python benchmarks/mutate_judge.py --only 1a2b3c4d,5e6f7a8b --tests tests/test_judge_mutants.py

Writes every mutant (file, line, original, mutated, operator, outcome, seconds) to --out as it
goes, prints `N mutants, K killed, S survived` and the survivors. Run it with the project's
virtual environment's python (the tests need its packages).
"""

from __future__ import annotations

import argparse
import ast
import hashlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent

# (glob under the root, the functions whose bodies are mutated; None: the whole file)
TARGETS: tuple[tuple[str, tuple[str, ...] | None], ...] = (
    ("harness/judge/**/*.py", None),
    ("harness/core/statistics.py", None),
    ("harness/report/junit.py", None),
    ("harness/publish/flags.py", ("run_flags", "run_notes")),
    ("harness/publish/compare_page.py", ("_verdict_class",)),
)

# The tests that exercise the judging code, fast ones first (with -x a failing mutant stops early).
# Globs; those absent from the tree are left out. About 100 s in all on the shared 2-core development
# machine (a killed mutant stops at its first failure, typically within 20 s). Left out: tests of the
# job runtime (steady compiles, a pinned job beside a hog) and of whole runs (slow, integration).
TESTS: tuple[str, ...] = (
    "tests/test_judge_mutants.py",
    "tests/test_assessment.py",
    "tests/test_guards*.py",
    "tests/test_stats.py",
    "tests/test_statistics_*.py",
    "tests/test_shift_ratio.py",
    "tests/test_plain_ratio.py",
    "tests/test_round_gating.py",
    "tests/test_time_to_target.py",
    "tests/test_gate_agreement.py",
    "tests/test_fairness_threads.py",
    "tests/test_like_for_like.py",
    "tests/test_golden_reports.py",
    "tests/test_contention.py",
    "tests/test_mistakes.py",
    "tests/test_training_guards.py",
    "tests/test_calibration.py",
    "tests/test_ceilings_by_precision.py",
    "tests/test_sequential.py",
    "tests/test_publish.py",
    "tests/test_reports.py",
    "tests/test_one_verdict.py",
    "tests/test_ab_margin.py",
    "tests/test_noise_floor.py",
    "tests/test_verdict_gates.py",
    "tests/test_history.py",
)
MARKERS = "not integration and not slow"

# Not copied into the temporary tree: history, environments, caches.
IGNORED = (".git", ".venv", "venv", "__pycache__", "*.pyc", ".mypy_cache", ".ruff_cache", ".pytest_cache",
           "*.egg-info", "node_modules", "build", "dist")  # fmt: skip

COMPARE_SWAPS: dict[type[ast.cmpop], tuple[bytes, bytes]] = {
    ast.Lt: (b"<", b"<="),
    ast.LtE: (b"<=", b"<"),
    ast.Gt: (b">", b">="),
    ast.GtE: (b">=", b">"),
    ast.Eq: (b"==", b"!="),
    ast.NotEq: (b"!=", b"=="),
}


@dataclass
class Mutant:
    id: str  # 8 hex digits of `key`: stable while the line's text is
    file: str  # relative to the root, with /
    line: int
    operator: str
    original: str  # the line before and after, stripped
    mutated: str
    outcome: str = "not run"  # killed, survived, timeout (counted as killed), not run
    seconds: float = 0.0
    killed_by: str = ""  # the first failing test, when the output names one


@dataclass(frozen=True)
class _Edit:
    line: int  # 1-based
    start: int  # byte offsets in the line
    end: int
    replacement: bytes
    operator: str


class _Finder(ast.NodeVisitor):
    """The mutation points of one module, as edits of one line each."""

    def __init__(self, lines: list[bytes], functions: tuple[str, ...] | None) -> None:
        self.lines = lines
        self.functions = functions
        self.stack: list[str] = []
        self.edits: list[_Edit] = []

    # What is not judgment: decorators, annotations, f-strings (printed text).
    def _function(self, node: ast.FunctionDef | ast.AsyncFunctionDef) -> None:
        self.stack.append(node.name)
        for default in [*node.args.defaults, *node.args.kw_defaults]:
            if default is not None:
                self.visit(default)
        for statement in node.body:
            self.visit(statement)
        self.stack.pop()

    def visit_FunctionDef(self, node: ast.FunctionDef) -> None:
        self._function(node)

    def visit_AsyncFunctionDef(self, node: ast.AsyncFunctionDef) -> None:
        self._function(node)

    def visit_ClassDef(self, node: ast.ClassDef) -> None:
        self.stack.append(node.name)
        for statement in node.body:
            self.visit(statement)
        self.stack.pop()

    def visit_AnnAssign(self, node: ast.AnnAssign) -> None:
        if node.value is not None:
            self.visit(node.value)

    def visit_JoinedStr(self, node: ast.JoinedStr) -> None:
        return

    @property
    def _wanted(self) -> bool:
        return self.functions is None or any(name in self.functions for name in self.stack)

    def _add(self, line: int, start: int, end: int, replacement: bytes, operator: str) -> None:
        if self._wanted:
            self.edits.append(_Edit(line, start, end, replacement, operator))

    def _between(self, left: ast.expr, right: ast.expr) -> tuple[int, int, bytes] | None:
        """(line, start, the text) between two operands on one line: an operator, spaces, parentheses."""
        if left.end_lineno != right.lineno or left.end_col_offset is None:
            return None
        line = left.end_lineno
        return line, left.end_col_offset, self.lines[line - 1][left.end_col_offset : right.col_offset]

    def _swap_between(self, left: ast.expr, right: ast.expr, old: bytes, new: bytes, operator: str) -> None:
        found = self._between(left, right)
        if found is None:
            return
        line, start, text = found
        if text.strip(b" \t()") != old:
            return
        at = start + text.index(old)
        self._add(line, at, at + len(old), new, operator)

    def visit_Compare(self, node: ast.Compare) -> None:
        operands = [node.left, *node.comparators]
        for i, op in enumerate(node.ops):
            swap = COMPARE_SWAPS.get(type(op))
            if swap is not None:
                self._swap_between(operands[i], operands[i + 1], swap[0], swap[1], "compare")
        self.generic_visit(node)

    def visit_BoolOp(self, node: ast.BoolOp) -> None:
        old, new = (b"and", b"or") if isinstance(node.op, ast.And) else (b"or", b"and")
        for left, right in zip(node.values, node.values[1:], strict=False):
            self._swap_between(left, right, old, new, "boolop")
        self.generic_visit(node)

    def visit_BinOp(self, node: ast.BinOp) -> None:
        if isinstance(node.op, ast.Sub):
            self._swap_between(node.left, node.right, b"-", b"+", "sign")
        self.generic_visit(node)

    def visit_UnaryOp(self, node: ast.UnaryOp) -> None:
        word = b"not" if isinstance(node.op, ast.Not) else b"-" if isinstance(node.op, ast.USub) else None
        if word is not None and node.lineno == node.operand.lineno:
            text = self.lines[node.lineno - 1][node.col_offset : node.operand.col_offset]
            if text.startswith(word):
                self._add(node.lineno, node.col_offset, node.operand.col_offset, text[len(word) :].lstrip(b" "),
                          "not" if word == b"not" else "sign")  # fmt: skip
        self.generic_visit(node)

    def visit_Constant(self, node: ast.Constant) -> None:
        value = node.value
        if isinstance(value, bool) or not isinstance(value, (int, float)) or node.end_col_offset is None:
            return
        if node.lineno != node.end_lineno:
            return
        news: list[int | float]
        if isinstance(value, float):
            news = [value * 2 if value else 1.0]
        else:
            news = [1] if value == 0 else [0, 2] if value == 1 else [value * 2]
        for new in news:
            self._add(node.lineno, node.col_offset, node.end_col_offset, repr(new).encode(), "number")

    def visit_Call(self, node: ast.Call) -> None:
        func = node.func
        if isinstance(func, ast.Name) and func.id in ("min", "max") and func.end_col_offset is not None:
            other = b"max" if func.id == "min" else b"min"
            self._add(func.lineno, func.col_offset, func.end_col_offset, other, "minmax")
        sqrt = (isinstance(func, ast.Attribute) and func.attr == "sqrt" and isinstance(func.value, ast.Name)
                and func.value.id == "math") or (isinstance(func, ast.Name) and func.id == "sqrt")  # fmt: skip
        if sqrt and len(node.args) == 1 and not node.keywords and node.end_col_offset is not None:
            arg = node.args[0]
            if node.lineno == node.end_lineno == arg.lineno == arg.end_lineno and arg.end_col_offset is not None:
                text = self.lines[arg.lineno - 1][arg.col_offset : arg.end_col_offset]
                self._add(node.lineno, node.col_offset, node.end_col_offset, b"(" + text + b")", "sqrt")
        self.generic_visit(node)

    def visit_Return(self, node: ast.Return) -> None:
        value = node.value
        if isinstance(value, ast.Constant) and isinstance(value.value, bool) and value.end_col_offset is not None:
            other = b"False" if value.value else b"True"
            self._add(value.lineno, value.col_offset, value.end_col_offset, other, "return")
        self.generic_visit(node)


def target_files(root: Path) -> list[tuple[Path, tuple[str, ...] | None]]:
    found: dict[Path, tuple[str, ...] | None] = {}
    for pattern, functions in TARGETS:
        for path in sorted(root.glob(pattern)):
            if path.is_file() and "__pycache__" not in path.parts:
                found.setdefault(path, functions)
    return list(found.items())


def mutants_of(root: Path, path: Path, functions: tuple[str, ...] | None) -> Iterator[tuple[Mutant, bytes]]:
    """Every mutant of one file, with the file's mutated text; each parses and changes the syntax tree."""
    source = path.read_bytes()
    tree = ast.parse(source)
    original_tree = ast.dump(tree)
    lines = source.splitlines(keepends=True)
    finder = _Finder(lines, functions)
    finder.visit(tree)
    relative = path.relative_to(root).as_posix()
    seen: dict[str, int] = {}
    for edit in finder.edits:
        old = lines[edit.line - 1]
        new = old[: edit.start] + edit.replacement + old[edit.end :]
        text = b"".join([*lines[: edit.line - 1], new, *lines[edit.line :]])
        try:
            if ast.dump(ast.parse(text)) == original_tree:
                continue
        except SyntaxError:
            continue
        before, after = old.decode().strip(), new.decode().strip()
        key = f"{edit.operator}|{before}|{after}"
        seen[key] = seen.get(key, 0) + 1
        digest = hashlib.sha256(f"{key}|{seen[key]}".encode()).hexdigest()[:8]
        yield Mutant(digest, relative, edit.line, edit.operator, before, after), text


def stratum(file: str) -> str:
    """The part of the code a file's mutants are sampled for: the file, except that the guards moved out
    of assessment.py (harness/judge/guards/) stay in its stratum, so the figure survives the move."""
    return "harness/judge/assessment.py" if file.startswith("harness/judge/guards/") else file


def select(per_file: dict[str, list[Mutant]], limit: int, seed: int, spread: str = "equal") -> list[Mutant]:
    """`limit` mutants: each stratum (a file, `stratum`) gets an equal share (`spread` "equal") or one
    proportional to its mutation points ("proportional"), at least one each while the limit allows,
    taken within the stratum in the order of a seeded hash of the mutants' ids (their text)."""

    def rank(m: Mutant) -> str:
        return hashlib.sha256(f"{seed}|{m.id}".encode()).hexdigest()

    pools: dict[str, list[Mutant]] = {}
    for file, found in per_file.items():
        pools.setdefault(stratum(file), []).extend(found)
    names = sorted(name for name, pool in pools.items() if pool)
    size = {name: len(pools[name]) for name in names}
    total = sum(size.values())
    if limit >= total:
        quota = dict(size)
    else:
        weight = {name: size[name] if spread == "proportional" else 1 for name in names}
        exact = {name: limit * weight[name] / sum(weight.values()) for name in names}
        quota = {name: min(size[name], max(1, int(exact[name]))) for name in names}
        while sum(quota.values()) > limit:  # the floor of one a stratum overshot: take back from the largest
            quota[max(names, key=lambda name: (quota[name], name))] -= 1
        by_remainder = sorted(names, key=lambda name: (-(exact[name] - int(exact[name])), name))
        while sum(quota.values()) < limit:
            open_ = [name for name in by_remainder if quota[name] < size[name]]
            for name in open_[: limit - sum(quota.values())]:
                quota[name] += 1
    chosen = [m for name in names for m in sorted(pools[name], key=rank)[: quota[name]]]
    return sorted(chosen, key=lambda m: (m.file, m.line, m.operator, m.mutated))


def test_selection(root: Path, patterns: Sequence[str]) -> list[str]:
    found: list[str] = []
    for pattern in patterns:
        for path in sorted(root.glob(pattern)):
            name = path.relative_to(root).as_posix()
            if path.is_file() and name not in found:
                found.append(name)
    return found


def copy_tree(root: Path, into: Path) -> Path:
    """The tree without its history and environments, as a git repository of one commit: some tests
    name a revision (`harness ab HEAD`), and a copy made by `git archive` has none."""
    tree = into / "tree"
    shutil.copytree(root, tree, symlinks=True, ignore=shutil.ignore_patterns(*IGNORED))
    git = ["git", "-C", str(tree), "-c", "user.name=mutate_judge", "-c", "user.email=mutate_judge@localhost",
           "-c", "commit.gpgsign=false"]  # fmt: skip
    for args in (["init", "-q"], ["add", "-A"], ["commit", "-q", "--no-verify", "-m", "the tree under test"]):
        subprocess.run([*git, *args], check=True, capture_output=True)
    return tree


def environment(tree: Path) -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(tree)  # the copy's harness and suites, before any editable install's finder
    env["PYTHONDONTWRITEBYTECODE"] = "1"  # a mutant of the same size and second must never meet a stale .pyc
    env.pop("PYTEST_ADDOPTS", None)
    return env


def run_tests(python: str, tree: Path, tests: list[str], timeout: float) -> tuple[str, float, str]:
    """(passed, failed or timeout; seconds; the output's tail) of the test selection in `tree`."""
    command = [python, "-m", "pytest", "-x", "-q", "-p", "no:cacheprovider", "-m", MARKERS, *tests]
    started = time.monotonic()
    proc = subprocess.Popen(command, cwd=tree, env=environment(tree), stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, start_new_session=True)  # fmt: skip
    try:
        output, _ = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)  # the pytest we started and whatever it started
        output, _ = proc.communicate()
        return "timeout", time.monotonic() - started, output[-4000:]
    outcome = "passed" if proc.returncode == 0 else "failed"
    return outcome, time.monotonic() - started, output[-4000:]


def first_failure(output: str) -> str:
    for line in output.splitlines():
        if line.startswith(("FAILED ", "ERROR ")):
            return line.split(" - ")[0]
    return ""


def check_isolation(python: str, tree: Path, tests: list[str], timeout: float) -> None:
    """`harness` and `suites` import from the copy, and a copy broken there fails the tests."""
    probe = "import harness, suites, harness.judge.compare as c; print(harness.__file__); print(c.__file__)"
    proc = subprocess.run([python, "-c", probe], cwd=tempfile.gettempdir(), env=environment(tree),
                          capture_output=True, text=True, timeout=120)  # fmt: skip
    places = proc.stdout.split()
    if proc.returncode != 0 or not places or not all(Path(p).resolve().is_relative_to(tree.resolve()) for p in places):
        raise SystemExit(f"the copy's harness is not the one imported: {proc.stdout}{proc.stderr}")
    broken = tree / "harness" / "__init__.py"  # every test of harness code imports it
    text = broken.read_bytes()
    broken.write_bytes(text + b"\nraise RuntimeError('mutate_judge: the isolation probe')\n")
    try:
        outcome, _, output = run_tests(python, tree, tests, timeout)
    finally:
        broken.write_bytes(text)
    if outcome != "failed":
        raise SystemExit(
            f"a deliberately broken copy passed the tests ({outcome}): they do not import the copy\n{output}"
        )


def git_head(root: Path) -> str | None:
    proc = subprocess.run(["git", "-C", str(root), "rev-parse", "HEAD"], capture_output=True, text=True)
    return proc.stdout.strip() if proc.returncode == 0 else None


def summary_line(mutants: list[Mutant]) -> str:
    ran = [m for m in mutants if m.outcome != "not run"]
    killed = sum(1 for m in ran if m.outcome in ("killed", "timeout"))
    return f"{len(ran)} mutants, {killed} killed, {len(ran) - killed} survived"


def write(out: Path, header: dict[str, Any], mutants: list[Mutant]) -> None:
    doc = {**header, "summary": summary_line(mutants), "mutants": [asdict(m) for m in mutants]}
    out.write_text(json.dumps(doc, indent=2) + "\n")


def resume(out: Path, header: dict[str, Any], chosen: list[Mutant]) -> None:
    """Take the outcomes of an interrupted check of the same tree and tests from `out`."""
    try:
        before = json.loads(out.read_text())
    except (OSError, ValueError):
        return
    if any(before.get(k) != header[k] for k in ("root", "tests")):
        raise SystemExit(f"{out} is a check of another tree or test selection: give another --out")
    done = {m["id"]: m for m in before.get("mutants", []) if m.get("outcome") not in (None, "not run")}
    for m in chosen:
        if m.id in done:
            m.outcome, m.seconds, m.killed_by = done[m.id]["outcome"], done[m.id]["seconds"], done[m.id]["killed_by"]
    print(f"resumed: {sum(1 for m in chosen if m.outcome != 'not run')} of {len(chosen)} mutants already run")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--root", type=Path, default=REPO, help="the source tree to mutate (default: this repository)")
    parser.add_argument("--limit", type=int, default=80, help="how many mutants (default 80)")
    parser.add_argument("--seed", type=int, default=56, help="the selection's seed (default 56)")
    parser.add_argument("--spread", choices=("equal", "proportional"), default="equal",
                        help="each file's share of --limit: equal (default) or proportional to its mutation points")  # fmt: skip
    parser.add_argument("--list", action="store_true", help="print the selected mutants and run nothing")
    parser.add_argument("--only", default="", help="comma-separated mutant ids: run these (ignores --limit)")
    parser.add_argument(
        "--tests", nargs="+", default=list(TESTS), help="test files or globs (default: the judging tests)"
    )
    parser.add_argument("--timeout", type=float, default=None,
                        help="seconds a mutant's tests may run (default: 3 x the pristine run + 60); past it: killed")  # fmt: skip
    parser.add_argument("--out", type=Path, default=Path(tempfile.gettempdir()) / "mutants-judge.json")
    parser.add_argument("--python", default=sys.executable, help="the interpreter that runs the tests")
    parser.add_argument("--resume", action="store_true",
                        help="keep the outcomes --out already holds for these mutants and tests; run the rest")  # fmt: skip
    args = parser.parse_args(argv)
    root = args.root.resolve()

    per_file: dict[str, list[Mutant]] = {}
    texts: dict[str, bytes] = {}
    for path, functions in target_files(root):
        found = list(mutants_of(root, path, functions))
        per_file[path.relative_to(root).as_posix()] = [m for m, _ in found]
        texts.update({m.id: text for m, text in found})
    points = sum(len(found) for found in per_file.values())
    if args.only:
        wanted = {i.strip() for i in args.only.split(",") if i.strip()}
        chosen = [m for found in per_file.values() for m in found if m.id in wanted]
        missing = wanted - {m.id for m in chosen}
        if missing:
            raise SystemExit(f"no mutant with id {', '.join(sorted(missing))} in {root}")
    else:
        chosen = select(per_file, args.limit, args.seed, args.spread)
    if args.list:
        for m in chosen:
            print(f"{m.id} {m.file}:{m.line} {m.operator}: {m.original}  ->  {m.mutated}")
        print(f"{len(chosen)} of {points} mutation points in {sum(1 for found in per_file.values() if found)} files")
        return 0

    tests = test_selection(root, args.tests)
    if not tests:
        raise SystemExit(f"none of the tests {' '.join(args.tests)} is in {root}")
    header: dict[str, Any] = {
        "root": str(root),
        "commit": git_head(root),
        "seed": args.seed,
        "limit": args.limit,
        "spread": args.spread,
        "points": {f: len(found) for f, found in per_file.items()},
        "tests": tests,
        "command": f"python -m pytest -x -q -p no:cacheprovider -m {MARKERS!r} " + " ".join(tests),
    }
    if args.resume:
        resume(args.out, header, chosen)
    with tempfile.TemporaryDirectory(prefix="mutate-judge-") as scratch:
        tree = copy_tree(root, Path(scratch))
        print(f"{len(chosen)} mutants of {points} points; tests: {' '.join(tests)}", flush=True)
        outcome, seconds, output = run_tests(args.python, tree, tests, args.timeout or 3600)
        if outcome != "passed":
            raise SystemExit(f"the unmutated tree fails its tests ({outcome}); fix that first:\n{output}")
        timeout = args.timeout or 3 * seconds + 60
        print(f"unmutated: passed in {seconds:.0f} s; a mutant may take {timeout:.0f} s", flush=True)
        check_isolation(args.python, tree, tests, timeout)
        header.update(baseline_seconds=round(seconds, 1), timeout_s=round(timeout, 1))
        for i, m in enumerate(chosen, 1):
            if m.outcome != "not run":  # --resume: run before
                continue
            target = tree / m.file
            pristine = target.read_bytes()
            target.write_bytes(texts[m.id])
            try:
                outcome, seconds, output = run_tests(args.python, tree, tests, timeout)
            finally:
                target.write_bytes(pristine)
            m.outcome = {"passed": "survived", "failed": "killed"}.get(outcome, outcome)
            m.seconds = round(seconds, 1)
            m.killed_by = first_failure(output) if outcome == "failed" else ""
            print(f"[{i}/{len(chosen)}] {m.outcome:8s} {m.seconds:6.1f} s  {m.id} {m.file}:{m.line} {m.operator}: "
                  f"{m.original}  ->  {m.mutated}", flush=True)  # fmt: skip
            write(args.out, header, chosen)
    write(args.out, header, chosen)
    survivors = [m for m in chosen if m.outcome == "survived"]
    print(f"\n{summary_line(chosen)} (written to {args.out})")
    for m in survivors:
        print(f"  survived {m.id} {m.file}:{m.line} {m.operator}: {m.original}  ->  {m.mutated}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
