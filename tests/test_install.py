"""scripts/install.sh: one torch pin, the CPU build without a GPU, a fallback that cannot
hang, and a report of what was installed."""

from __future__ import annotations

import os
import re
import socket
import subprocess
import sys
import tomllib
from collections.abc import Iterator
from pathlib import Path

import pytest
from packaging.requirements import Requirement

ROOT = Path(__file__).resolve().parents[1]
INSTALL = ROOT / "scripts" / "install.sh"


def torch_spec() -> Requirement:
    match = re.search(r"^TORCH_SPEC=\$\{TORCH_SPEC:-(.+)\}$", INSTALL.read_text(), re.M)
    assert match, "install.sh must set TORCH_SPEC"
    return Requirement(match[1])


def test_one_torch_pin_within_the_project_range() -> None:
    pin = torch_spec()
    (version,) = [s.version for s in pin.specifier if s.operator == "=="]
    train = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"][
        "optional-dependencies"
    ]["train"]
    (project,) = [Requirement(r) for r in train if Requirement(r).name == "torch"]
    assert project.specifier.contains(version), (version, str(project.specifier))
    ci = (ROOT / ".ci" / "run").read_text()
    assert "scripts/install.sh" in ci and "torch==" not in ci  # CI takes install.sh's pin
    assert "torchvision" not in INSTALL.read_text() + ci


def test_the_browser_lookup_of_install_sh_imports_what_exists() -> None:
    """install.sh asks uirl which browser a session would launch, with errors silenced
    (none found is not an error there): an import that no longer exists would make it
    install a browser on every run. Issue 34 moved ``find_browser`` out of the removed
    Playwright backend."""
    import importlib

    imports = set(re.findall(r"from (uirl_gym[\w.]*) import (\w+)", INSTALL.read_text()))
    assert ("uirl_gym.session.browser.chromium", "find_browser") in imports
    for module, name in sorted(imports):
        assert hasattr(importlib.import_module(module), name), f"{module}.{name}"


@pytest.fixture
def silent_index() -> Iterator[str]:
    """A URL whose server takes the connection and never answers (a dead proxy)."""
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen(8)  # never accepted: the kernel completes the handshake, no reply
        yield f"http://127.0.0.1:{server.getsockname()[1]}/whl/cpu"


def run_install(python: Path, env: dict[str, str]) -> str:
    done = subprocess.run(
        ["bash", str(INSTALL), "torch"],
        env={**os.environ, "PYTHON": str(python), **env},
        capture_output=True,
        text=True,
        timeout=600,
    )
    output = done.stdout + done.stderr
    assert done.returncode == 0, output[-3000:]
    return output


def make_venv(path: Path, *flags: str) -> Path:
    subprocess.run([sys.executable, "-m", "venv", *flags, str(path)], check=True, timeout=300)
    return path / "bin" / "python"


@pytest.mark.slow
def test_no_gpu_no_cpu_index_falls_back_then_keeps(tmp_path: Path, silent_index: str) -> None:
    """A fresh venv on a machine without a GPU whose CPU index does not answer: the
    default index is used, and says so (here it serves a CPU wheel from disk); a second
    run keeps that torch. Both print what is installed."""
    if Path("/proc/driver/nvidia/gpus").exists():
        pytest.skip("an NVIDIA GPU is present: install.sh takes the CUDA build")
    python = make_venv(tmp_path / "venv")
    # PATH without nvidia-smi: the machine has no GPU whatever is installed.
    env = {"TORCH_CPU_INDEX": silent_index, "INDEX_TIMEOUT_S": "2", "PATH": "/usr/bin:/bin"}
    output = run_install(python, env)
    assert f"CPU index ({silent_index}) did not answer within 2s" in output
    assert f"installing {torch_spec()} from the default index instead" in output
    version, cuda = subprocess.run(
        [str(python), "-c", "import torch; print(torch.__version__, torch.version.cuda)"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    assert torch_spec().specifier.contains(version.split("+")[0])
    build = "CPU" if cuda == "None" else f"CUDA {cuda}"
    report = rf"torch {re.escape(version)} \({build} build\), \d+\.\d\d GB"
    assert re.search(report, output), output[-2000:]
    assert re.search(r"NVIDIA libraries: \d+ packages, \d+\.\d\d GB", output)
    assert "site-packages: " in output

    output = run_install(python, env)
    assert f"torch: keeping the installed {version} (within the project's range)" in output
    assert "did not answer" not in output  # no probe when nothing is to be installed
    assert re.search(report, output)
