"""The host side's layers, kept: imports run down, never up (docs/extending.md, "The layers").

A lower layer that imports a higher one drags the higher one's reasons to change into every
module below it (the formatting rules once lived in the report layer and 21 lower modules
imported them). The graph is read from the source with `ast`, so a lazy import inside a function
counts as much as one at the top.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
HARNESS = ROOT / "harness"

# Bottom to top: the folders of harness/, each a layer (docs/extending.md, "The layers"). A module
# belongs to the layer of its folder; the package face (harness/__init__.py) is the ground.
FOLDERS: tuple[tuple[str, ...], ...] = (
    ("text",),
    ("core",),
    ("store",),
    ("judge",),
    ("backends",),
    ("execute",),
    ("report", "publish"),
    ("cli",),
)
LAYERS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("face", ("harness",)),
    *(("/".join(names), tuple(f"harness.{name}" for name in names)) for names in FOLDERS),
)
# Imports from a lower layer into a higher one that are accepted, each with its reason.
# The issue that set the rule allows at most three.
ALLOWED_UPWARD: dict[tuple[str, str], str] = {}
# Who may import the renderers: the CLI, the renderers themselves, and `bisect`, which renders its
# own answer.
MAY_IMPORT_RENDERERS = ("harness.cli", "harness.report", "harness.publish")


def module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def harness_modules() -> dict[str, Path]:
    return {module_name(p): p for p in sorted(HARNESS.rglob("*.py"))}


def imports_of(name: str, path: Path, known: set[str]) -> set[str]:
    """The harness modules `name` imports (relative imports resolved; `from pkg import mod` is the module)."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        targets: list[str] = []
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                module = ".".join(base + ([node.module] if node.module else []))
            else:
                module = node.module or ""
            targets = [f"{module}.{a.name}" if f"{module}.{a.name}" in known else module for a in node.names]
        found.update(t for t in targets if t in known and t != name)
    return found


def graph() -> dict[str, set[str]]:
    modules = harness_modules()
    known = set(modules)
    return {name: imports_of(name, path, known) for name, path in modules.items()}


def layer_of(module: str) -> int:
    best: tuple[int, int] | None = None
    for index, (_, prefixes) in enumerate(LAYERS):
        for prefix in prefixes:
            if (module == prefix or module.startswith(prefix + ".")) and (best is None or len(prefix) > best[1]):
                best = (index, len(prefix))
    if best is None:
        raise AssertionError(f"{module} is in no layer: move it into one of harness/'s layer folders")
    return best[0]


def upward_imports() -> set[tuple[str, str]]:
    return {(m, d) for m, deps in graph().items() for d in deps if layer_of(d) > layer_of(m)}


def test_every_module_has_a_layer() -> None:
    for module in harness_modules():
        layer_of(module)


def test_the_top_level_holds_only_the_layer_folders_and_the_face() -> None:
    folders = {name for names in FOLDERS for name in names}
    top = {p.name for p in HARNESS.iterdir() if p.name != "__pycache__"}
    assert top == folders | {"__init__.py"}, sorted(top ^ (folders | {"__init__.py"}))


def test_imports_run_down() -> None:
    upward = upward_imports()
    assert len(ALLOWED_UPWARD) <= 3
    unexplained = sorted(upward - ALLOWED_UPWARD.keys())
    assert not unexplained, f"imports from a lower layer into a higher one: {unexplained}"


def test_text_rules_import_nothing_of_the_harness() -> None:
    for module, deps in graph().items():
        if module.startswith("harness.text"):
            assert all(d.startswith("harness.text") for d in deps), (module, deps)


def test_only_the_cli_and_renderers_import_renderers() -> None:
    for module, deps in graph().items():
        if module.startswith(MAY_IMPORT_RENDERERS):
            continue
        bad = sorted(d for d in deps if d.startswith(("harness.report", "harness.publish")))
        assert not bad, f"{module} imports the rendering layer: {bad}"


def package_of(module: str) -> str:
    parts = module.split(".")
    return ".".join(parts[:2])


def test_no_two_packages_import_each_other() -> None:
    edges = {(package_of(m), package_of(d)) for m, deps in graph().items() for d in deps}
    both_ways = sorted((a, b) for a, b in edges if a < b and (b, a) in edges)
    assert not both_ways, f"packages that import each other: {both_ways}"


@pytest.mark.parametrize("planted", ["harness.judge.assessment", "harness.store.plan"])
def test_a_planted_upward_import_is_caught(planted: str, tmp_path: Path) -> None:
    # The rule's own check: a lower module importing the renderer must be found.
    source = tmp_path / "mod.py"
    source.write_text("from harness.report.table import render\n", encoding="utf-8")
    deps = imports_of(planted, source, set(harness_modules()))
    assert "harness.report.table" in deps
    assert layer_of("harness.report.table") > layer_of(planted)


# The renderers format what the judging layer decided; they never decide. From harness.judge they
# may import its result types (classes) and its words (UPPER_CASE constants), never a function or
# a whole module through which a function could be called.
RENDERERS = ("harness.report", "harness.publish")


def _types_and_words(module: str) -> set[str]:
    tree = ast.parse(harness_modules()[module].read_text(encoding="utf-8"))
    names: set[str] = set()
    for node in tree.body:
        if isinstance(node, ast.ClassDef):
            names.add(node.name)
        targets = (
            node.targets if isinstance(node, ast.Assign) else [node.target] if isinstance(node, ast.AnnAssign) else []
        )
        names.update(t.id for t in targets if isinstance(t, ast.Name) and t.id.isupper())
    return names


def judging_calls(path: Path) -> list[str]:
    """What a renderer imports from the judging layer beyond its types and words."""
    known = set(harness_modules())
    bad = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            bad += [a.name for a in node.names if a.name.startswith("harness.judge")]
        elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith("harness.judge"):
            module = node.module or ""
            allowed = _types_and_words(module) if module in known and module != "harness.judge" else set()
            bad += [f"{module}.{a.name}" for a in node.names if a.name not in allowed]
    return bad


def test_renderers_import_only_the_judging_layers_types_and_words() -> None:
    for module, path in harness_modules().items():
        if module.startswith(RENDERERS):
            assert not judging_calls(path), f"{module} judges: {judging_calls(path)}; ask the Assessment instead"


@pytest.mark.parametrize(
    "line",
    [
        "from harness.judge.assessment import assess\n",
        "from harness.judge import assessment\n",
        "import harness.judge.compare\n",
        "from harness.judge.compare import compare_runs, Comparison\n",
    ],
)
def test_a_renderer_that_judges_is_caught(line: str, tmp_path: Path) -> None:
    source = tmp_path / "page.py"
    source.write_text(line, encoding="utf-8")
    assert judging_calls(source) and all("Comparison" not in name for name in judging_calls(source))


DOC = ROOT / "docs" / "extending.md"


def documented_layers() -> list[str]:
    """The numbered entries of docs/extending.md's "The layers", one string each."""
    section = DOC.read_text(encoding="utf-8").split("## The layers\n", 1)[1].split("\n## ", 1)[0]
    entries: list[str] = []
    for line in section.splitlines():
        if line[:1].isdigit():
            entries.append(line)
        elif line.startswith("   ") and entries:
            entries[-1] += " " + line.strip()
    return entries


def test_the_documented_layers_are_the_folders_and_name_every_module() -> None:
    entries = documented_layers()
    assert len(entries) == len(FOLDERS), "docs/extending.md lists another number of layers than FOLDERS"
    for entry, names in zip(entries, FOLDERS, strict=True):
        for name in names:
            assert f"`harness/{name}/`" in entry, f"layer {names} is not where docs/extending.md puts it"
            for item in sorted((HARNESS / name).iterdir()):
                if item.name in ("__init__.py", "__pycache__"):
                    continue
                shown = item.name if item.is_file() else item.name + "/"
                assert f"`{shown}`" in entry, f"docs/extending.md does not name harness/{name}/{shown} in its layer"


# The host–job contract (suites/contract/): the host reads suites/ only through it, it never
# reaches into the job-only runtime or a suite's implementation, and a suite's spec (which the
# host imports through the registry) imports only the contract.
SUITES = ROOT / "suites"


def suites_imports(path: Path) -> set[str]:
    """Every `suites.*` module a source file imports, at any depth (a lazy import counts)."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names if a.name.split(".")[0] == "suites")
        elif isinstance(node, ast.ImportFrom) and not node.level and (node.module or "").split(".")[0] == "suites":
            module = node.module or ""
            found.update(f"{module}.{a.name}" if module == "suites" else module for a in node.names)
    return found


def outside_the_contract(path: Path) -> list[str]:
    return sorted(m for m in suites_imports(path) if m != "suites.contract" and not m.startswith("suites.contract."))


def test_the_host_reads_suites_only_through_the_contract() -> None:
    for module, path in harness_modules().items():
        assert not outside_the_contract(path), f"{module} imports {outside_the_contract(path)}: use suites.contract"


def test_the_contract_and_every_suite_spec_import_only_the_contract() -> None:
    for path in [*sorted((SUITES / "contract").glob("*.py")), *sorted(SUITES.glob("*/spec.py"))]:
        bad = [m for m in outside_the_contract(path) if not m.startswith(f"suites.{path.parent.name}.")]
        if path.parent.name == "contract":
            bad = outside_the_contract(path)
        assert not bad, f"{path.relative_to(ROOT)} imports {bad}: the host reads it, keep job-only code out"


@pytest.mark.parametrize(
    "line",
    ["from suites.runtime.context import Context\n", "import suites.runtime.nvml\n", "from suites import runtime\n"],
)
def test_a_reach_past_the_contract_is_caught(line: str, tmp_path: Path) -> None:
    source = tmp_path / "mod.py"
    source.write_text(f"def lazily():\n    {line}", encoding="utf-8")
    assert outside_the_contract(source)
    assert not outside_the_contract(_written(tmp_path, "from suites.contract.spec import SuiteSpec\n"))


def _written(folder: Path, text: str) -> Path:
    path = folder / "ok.py"
    path.write_text(text, encoding="utf-8")
    return path


def test_the_whole_host_and_every_spec_load_no_job_only_module() -> None:
    # The static rules above, checked by what really loads: every host module, then every suite's spec.
    code = (
        "import importlib, pkgutil, sys, harness\n"
        "for m in pkgutil.walk_packages(harness.__path__, 'harness.'):\n"
        "    if not m.name.endswith('__main__'):\n"
        "        importlib.import_module(m.name)\n"
        "from suites.contract.registry import all_suites\n"
        "all_suites()\n"
        "print(' '.join(sorted(m for m in sys.modules if m.startswith('suites.runtime'))))\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "", f"the host loaded job-only modules: {proc.stdout.strip()}"


def test_the_documented_contract_names_every_module_of_it() -> None:
    paragraph = DOC.read_text(encoding="utf-8").split("**The host–job contract**", 1)[1].split("\n\n", 1)[0]
    for path in sorted((SUITES / "contract").glob("*.py")):
        if path.name != "__init__.py":
            assert f"`{path.name}`" in paragraph, f"docs/extending.md's contract paragraph does not name {path.name}"


# The top floor is thin (issue 61): a command parses its options, calls execute/, and prints what the
# renderers make of what comes back. It never reaches past execute/ into store, judge or backends.
CLI_MAY_IMPORT = ("harness.cli", "harness.execute", "harness.report", "harness.publish", "harness.text", "harness.core")


def cli_reaches_past_execute(found: dict[str, set[str]]) -> list[tuple[str, str]]:
    return sorted(
        (module, dep)
        for module, deps in found.items()
        if module.startswith("harness.cli")
        for dep in deps
        if dep != "harness" and not dep.startswith(CLI_MAY_IMPORT)
    )


def test_the_cli_imports_only_execute_the_renderers_text_and_core() -> None:
    assert not cli_reaches_past_execute(graph())


def test_a_cli_module_that_reaches_into_the_store_is_caught(tmp_path: Path) -> None:
    source = tmp_path / "cmd.py"
    source.write_text("def f():\n    from harness.store.plan import make_plan\n", encoding="utf-8")
    deps = imports_of("harness.cli.cmd", source, set(harness_modules()))
    assert cli_reaches_past_execute({"harness.cli.cmd": deps}) == [("harness.cli.cmd", "harness.store.plan")]


# A Typer function is its option declarations and a short body: parse, call execute/, print.
MAX_COMMAND_BODY = 25


def command_bodies(path: Path) -> dict[str, int]:
    """name -> lines of body (its docstring left out) of each Typer function in `path`: one decorated
    with `plans(...)` or an app's `.command(...)`, or taking a `typer.Option`/`typer.Argument`."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    found = {}
    for node in ast.walk(tree):
        if not isinstance(node, ast.FunctionDef):
            continue
        decorated = any("plans" in ast.unparse(d) or ".command" in ast.unparse(d) for d in node.decorator_list)
        annotations = [a.annotation for a in (*node.args.args, *node.args.kwonlyargs) if a.annotation is not None]
        typed = any("typer." in ast.unparse(a) or "Option" in ast.unparse(a) for a in annotations)
        if not (decorated or typed):
            continue
        body = (
            node.body[1:]
            if isinstance(node.body[0], ast.Expr) and isinstance(node.body[0].value, ast.Constant)
            else node.body
        )
        found[node.name] = (node.end_lineno or 0) - body[0].lineno + 1 if body else 0
    return found


def test_no_typer_function_is_longer_than_its_options_and_a_short_body() -> None:
    long = {
        f"{path.name}:{name}": lines
        for path in sorted((HARNESS / "cli").glob("*.py"))
        for name, lines in command_bodies(path).items()
        if lines > MAX_COMMAND_BODY
    }
    assert not long, f"Typer functions whose body is over {MAX_COMMAND_BODY} lines (move the work to execute/): {long}"


def test_a_long_command_is_caught(tmp_path: Path) -> None:
    source = tmp_path / "cmd.py"
    body = "".join(f"    x{i} = {i}\n" for i in range(MAX_COMMAND_BODY + 1))
    source.write_text(f'def run(suite: Annotated[str, typer.Option("--suite")]) -> None:\n    """Doc."""\n{body}')
    assert command_bodies(source) == {"run": MAX_COMMAND_BODY + 1}
