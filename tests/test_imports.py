"""The import graph of ``uirl_gym`` and ``uirl_agents`` (read with ``ast``, nothing
imported): no circles, no module imports another's private names, and every module
loads when it is imported first.

Every import counts, at the top of a module or inside a function, type-only ones too:
an import put in a function to dodge a circle at load time is still a circle in the
design (issue 23: ``push.py`` and ``trainers/common.py``, ``grpo.py`` and ``ppo.py``;
issue 34: MiniWoB++'s ``__init__.py`` and its ``task.py``/``score.py``, the Kubernetes
runtime's config and its pods).
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("uirl_gym", "uirl_agents")
AGENTS = "uirl_agents"


def module_names() -> dict[str, Path]:
    """``uirl_gym.x.y`` -> its file, for every module of both packages."""
    modules = {}
    for path in sorted(p for package in PACKAGES for p in (ROOT / package).rglob("*.py")):
        parts = list(path.relative_to(ROOT).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        modules[".".join(parts)] = path
    return modules


def _resolve(node: ast.ImportFrom, module: str, is_package: bool) -> str:
    if not node.level:
        return node.module or ""
    base = module.split(".")
    base = base[: len(base) - node.level + (1 if is_package else 0)]
    return ".".join(base + ([node.module] if node.module else []))


def imports(module: str, path: Path) -> Iterator[tuple[str, str | None, int]]:
    """``(imported module, imported name or None, line)`` for every import in ``path``."""
    is_package = path.name == "__init__.py"
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield alias.name, None, node.lineno
        elif isinstance(node, ast.ImportFrom):
            source = _resolve(node, module, is_package)
            for alias in node.names:
                yield source, alias.name, node.lineno


def import_graph() -> dict[str, set[str]]:
    """Module -> the packages' modules it imports (``from pkg import sub`` names the
    submodule when there is one)."""
    modules = module_names()
    graph: dict[str, set[str]] = {m: set() for m in modules}
    for module, path in modules.items():
        for source, name, _ in imports(module, path):
            target = f"{source}.{name}" if f"{source}.{name}" in modules else source
            if target in modules and target != module:
                graph[module].add(target)
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """One circle per strongly connected component of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in sorted(graph[node]):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def test_the_packages_have_no_import_cycles() -> None:
    graph = import_graph()
    assert len(graph) > 100 and {
        "uirl_agents.trainers.algorithms.grpo",
        "uirl_gym.tasks.miniwob",
    } <= set(graph)
    found = cycles(graph)
    details = [
        f"{' <-> '.join(c)}: "
        + "; ".join(f"{a} -> {b}" for a in c for b in sorted(graph[a]) if b in c)
        for c in found
    ]
    assert not found, "import circles:\n" + "\n".join(details)


def _private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


def test_no_module_imports_another_modules_private_names() -> None:
    """Neither ``from uirl_gym.x import _name`` nor ``x._name`` on a module of ours."""
    modules = module_names()
    offences = []
    for module, path in modules.items():
        aliases = set()  # local names bound to a module of the package
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                aliases |= {a.asname for a in node.names if a.asname and a.name in modules}
            elif isinstance(node, ast.ImportFrom):
                source = _resolve(node, module, path.name == "__init__.py")
                for alias in node.names:
                    if f"{source}.{alias.name}" in modules:
                        aliases.add(alias.asname or alias.name)
                    elif source.startswith(PACKAGES) and _private(alias.name):
                        offences.append(f"{path.relative_to(ROOT)}:{node.lineno}: {alias.name}")
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if (
                isinstance(node, ast.Attribute)
                and isinstance(node.value, ast.Name)
                and node.value.id in aliases
                and _private(node.attr)
            ):
                offences.append(
                    f"{path.relative_to(ROOT)}:{node.lineno}: {node.value.id}.{node.attr}"
                )
    assert not offences, "private names used across modules:\n" + "\n".join(offences)


def test_the_loop_and_what_the_algorithms_share_import_no_algorithm() -> None:
    """``loop.py`` runs every algorithm and ``forward.py`` sits below them (issue 23):
    neither reaches ``expert_iteration``, ``grpo`` or ``ppo``, even through another module."""
    graph = import_graph()
    algorithms = {
        f"{AGENTS}.trainers.algorithms.{name}" for name in ("expert_iteration", "grpo", "ppo")
    }
    for module in ("loop", "forward", "update", "algorithms.sft", "run"):
        reached, todo = set(), [f"{AGENTS}.trainers.{module}"]
        while todo:
            for nxt in graph[todo.pop()] - reached:
                reached.add(nxt)
                todo.append(nxt)
        assert not reached & algorithms, f"trainers.{module} reaches {reached & algorithms}"


def test_the_environment_never_imports_the_agents() -> None:
    """``uirl_gym`` installs and runs without the ML stack (docs/architecture.md)."""
    graph = import_graph()
    offences = [
        f"{module} -> {target}"
        for module, targets in graph.items()
        if module.startswith("uirl_gym")
        for target in targets
        if target.startswith(AGENTS)
    ]
    assert not offences, offences


# Run in a fresh interpreter: imports ``MODULES`` one by one, each after every module of
# the packages has been dropped from sys.modules, so that each loads first (third-party
# libraries stay loaded: only ours matter). Our modules are compiled once and the code
# reused (with PYTHONDONTWRITEBYTECODE no .pyc is kept, and each module is loaded ~100
# times): the check is the loading, not the compiler.
IMPORT_EACH_FIRST = """
import importlib, importlib.machinery as machinery, sys, warnings
warnings.simplefilter("ignore")
compiled, compile_source = {}, machinery.SourceFileLoader.source_to_code
def source_to_code(self, data, path, *, _optimize=-1):
    key = (path, bytes(data))
    if key not in compiled:
        compiled[key] = compile_source(self, data, path, _optimize=_optimize)
    return compiled[key]
machinery.SourceFileLoader.source_to_code = source_to_code
for name in MODULES:
    for loaded in [m for m in sys.modules if m.startswith(PACKAGES)]:
        del sys.modules[loaded]
    importlib.import_module(name)
"""


def test_every_module_imports_first_in_a_fresh_interpreter() -> None:
    """The check anyone can run (issues 23 and 34): each module of both packages,
    imported with nothing of either package loaded before it, loads. One interpreter per
    package, both at once."""
    import os
    import subprocess
    import sys

    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    procs = []
    for package in PACKAGES:
        modules = sorted(m for m in module_names() if m.split(".")[0] == package)
        code = f"MODULES, PACKAGES = {modules!r}, {PACKAGES!r}\n" + IMPORT_EACH_FIRST
        procs.append(
            subprocess.Popen(
                [sys.executable, "-c", code],
                env=env,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.PIPE,
                text=True,
            )
        )
    try:
        for package, proc in zip(PACKAGES, procs, strict=True):
            _, stderr = proc.communicate(timeout=300)
            assert proc.returncode == 0, f"{package}: {stderr[-3000:]}"
    finally:
        for proc in procs:
            proc.kill()
            proc.wait()


# Old import paths that docs, scripts or users named (issue 40 moved them): each still
# imports for one release, warns with the new path and hands out the new module's objects.
MOVED = {
    "uirl_agents.models": ("uirl_agents.loading.pretrained", "load_model_and_processor"),
    "uirl_agents.trajectories": ("uirl_agents.episodes.trajectories", "Episode"),
    "uirl_agents.rollout": ("uirl_agents.episodes.rollout", "collect_episodes"),
    "uirl_agents.view": ("uirl_agents.episodes.viewer", "write_viewer"),
    "uirl_agents.agents": ("uirl_agents.evaluation.agents", "parse_agent"),
    "uirl_agents.evaluate": ("uirl_agents.evaluation.benchmark", "run_agent"),
    "uirl_agents.leaderboard": ("uirl_agents.evaluation.leaderboard", "write_leaderboard"),
    "uirl_agents.cost": ("uirl_agents.policies.usage", "normalize_usage"),
    "uirl_agents.trainers.rs": (
        "uirl_agents.trainers.algorithms.expert_iteration",
        "ExpertIteration",
    ),
    "uirl_agents.trainers.grpo": ("uirl_agents.trainers.algorithms.grpo", "GRPO"),
    "uirl_agents.trainers.ppo": ("uirl_agents.trainers.algorithms.ppo", "PPO"),
    "uirl_agents.trainers.scoring": ("uirl_agents.trainers.forward", "completion_logprobs"),
}


def test_an_old_import_path_warns_with_the_new_one_and_re_exports() -> None:
    import importlib
    import sys
    import warnings

    for old, (new, name) in MOVED.items():
        sys.modules.pop(old, None)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            module = importlib.import_module(old)
        messages = [str(w.message) for w in caught if w.category is DeprecationWarning]
        assert any(old in m and new in m for m in messages), (old, messages)
        assert getattr(module, name) is getattr(importlib.import_module(new), name), old
    assert (
        importlib.import_module("uirl_agents.cost").find_price
        is importlib.import_module("uirl_agents.evaluation.cost").find_price
    )
