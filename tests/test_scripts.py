"""Every script's ``--help`` renders: no argparse internals, no unexpanded ``%(...)``."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SCRIPTS = sorted((ROOT / "scripts").glob("*.py"))


@pytest.mark.slow
def test_every_script_help_renders() -> None:
    pytest.importorskip("torch")  # the train scripts import the trainers
    # All at once: each start is mostly import time.
    procs = {
        path.name: subprocess.Popen(
            [sys.executable, str(path), "--help"],
            cwd=ROOT,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for path in SCRIPTS
    }
    assert {"evaluate.py", "train_rs.py", "train_grpo.py"} <= set(procs)
    for name, proc in procs.items():
        stdout, stderr = proc.communicate(timeout=300)
        assert proc.returncode == 0, f"{name}: {stderr[-2000:]}"
        assert stdout.startswith("usage:"), name
        # A stray "%" in a help string makes argparse print its own internals.
        assert "option_strings" not in stdout, name
        assert "%(" not in stdout, name
        if name.startswith("train_"):
            assert "~30% slower" in stdout, name  # the help that once broke it
