#!/usr/bin/env bash
# Install uirl with every extra, and a Chromium if none can be found.
#
#   bash scripts/install.sh         torch, then uirl[train,datasets,k8s,dev,quant,openenv,miniwob], then a browser
#   bash scripts/install.sh torch   torch only
#
# torch: the version CI tests is pinned here, in TORCH_SPEC, and nowhere else (.ci/run
# calls this script). A torch already installed that satisfies the project's range
# (pyproject.toml, extra `train`) is kept. Otherwise, on a machine without an NVIDIA GPU
# the CPU build comes from PyTorch's CPU wheel index (~0.2 GB download instead of ~3 GB of
# CUDA libraries); if that index cannot be reached within INDEX_TIMEOUT_S seconds, the
# default index is used instead, and the script says so. It ends by printing what torch
# is installed (version, CUDA or CPU) and how big it is.
#
# Browser order (same as the session server's): $UIRL_CHROMIUM, a headless shell
# (chromium-headless-shell on PATH, Playwright's download), Playwright's downloaded
# Chromium, a chromium/chrome on PATH; else Debian's `chromium-headless-shell` and
# `chromium` (apt-get, as root), else Playwright's downloads of both (Playwright is not
# a dependency of uirl: only its browser downloader is used, installed for that).
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}
TORCH_SPEC=${TORCH_SPEC:-torch==2.13.0}
TORCH_CPU_INDEX=${TORCH_CPU_INDEX:-https://download.pytorch.org/whl/cpu}
INDEX_TIMEOUT_S=${INDEX_TIMEOUT_S:-10}

# Exit 0 when the installed torch satisfies the project's range.
torch_in_range() {
  "$PYTHON" - <<'EOF'
import importlib.metadata as md
import sys
import tomllib

try:
    from packaging.requirements import Requirement
except ImportError:  # a bare venv: pip's own copy
    from pip._vendor.packaging.requirements import Requirement

with open("pyproject.toml", "rb") as f:
    train = tomllib.load(f)["project"]["optional-dependencies"]["train"]
(req,) = [Requirement(r) for r in train if Requirement(r).name == "torch"]
try:
    version = md.version("torch")
except md.PackageNotFoundError:
    sys.exit(1)
sys.exit(0 if req.specifier.contains(version, prereleases=True) else 1)
EOF
}

has_nvidia_gpu() {
  { command -v nvidia-smi >/dev/null && nvidia-smi -L >/dev/null 2>&1; } ||
    [ -n "$(ls -A /proc/driver/nvidia/gpus 2>/dev/null)" ]
}

# The outer timeout also bounds a DNS lookup that hangs, which urlopen's does not.
cpu_index_reachable() {
  timeout "$((INDEX_TIMEOUT_S + 2))" "$PYTHON" -c '
import sys, urllib.request
urllib.request.urlopen(sys.argv[1].rstrip("/") + "/torch/", timeout=float(sys.argv[2])).read(1)
' "$TORCH_CPU_INDEX" "$INDEX_TIMEOUT_S" >/dev/null 2>&1
}

install_torch() {
  if torch_in_range; then
    echo "torch: keeping the installed $("$PYTHON" -c 'import importlib.metadata as m; print(m.version("torch"))') (within the project's range)"
  elif has_nvidia_gpu; then
    echo "torch: NVIDIA GPU found: installing $TORCH_SPEC from the default index (CUDA build)"
    "$PYTHON" -m pip install "$TORCH_SPEC"
  elif cpu_index_reachable; then
    echo "torch: no NVIDIA GPU: installing $TORCH_SPEC, CPU build, from $TORCH_CPU_INDEX"
    "$PYTHON" -m pip install --index-url "$TORCH_CPU_INDEX" "$TORCH_SPEC"
  else
    echo "torch: no NVIDIA GPU, but PyTorch's CPU index ($TORCH_CPU_INDEX) did not answer" \
      "within ${INDEX_TIMEOUT_S}s: installing $TORCH_SPEC from the default index instead" \
      "(on Linux that can be the CUDA build, ~3 GB more)" >&2
    "$PYTHON" -m pip install "$TORCH_SPEC"
  fi
}

install_browser() {
  if "$PYTHON" -c "from uirl_gym.session.browser.chromium import find_browser; print('browser:', find_browser())" 2>/dev/null; then
    # A full Chromium only: sessions on the headless shell take half the memory
    # (docs/benchmarks.md). Best effort: the browser found already works.
    if ! "$PYTHON" -c "import sys; from uirl_gym.session.browser.chromium import find_browser; sys.exit('headless' not in find_browser())" \
        && command -v apt-get >/dev/null && [ "$(id -u)" = 0 ]; then
      echo "Installing Debian's chromium-headless-shell next to the browser found" >&2
      { apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q \
          chromium-headless-shell; } \
        || echo "chromium-headless-shell could not be installed; sessions use the browser found" >&2
      "$PYTHON" -c "from uirl_gym.session.browser.chromium import find_browser; print('browser:', find_browser())"
    fi
    return
  fi
  if command -v apt-get >/dev/null && [ "$(id -u)" = 0 ]; then
    # The headless shell is what sessions run (no top-chrome WebUI renderer); the full
    # chromium is for --headed debugging.
    echo "No Chromium found: installing Debian's chromium-headless-shell and chromium" >&2
    apt-get update -q
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q chromium-headless-shell chromium \
      fonts-dejavu-core
  else
    echo "No Chromium found: downloading Playwright's (apt-get as root would install Debian's)" >&2
    "$PYTHON" -c "import playwright" 2>/dev/null || "$PYTHON" -m pip install playwright
    "$PYTHON" -m playwright install --with-deps chromium-headless-shell chromium
  fi
  "$PYTHON" -c "from uirl_gym.session.browser.chromium import find_browser; print('browser:', find_browser())"
}

# What torch is installed, which build, and the disk it takes.
report() {
  "$PYTHON" - "$(has_nvidia_gpu && echo yes || echo no)" <<'EOF'
import importlib.metadata as md
import os
import sys
import sysconfig

import torch


def size_gb(paths):
    return sum(os.path.getsize(p) for p in paths if os.path.isfile(p)) / 1e9


def dist_files(dist):
    return [str(f.locate()) for f in dist.files or []]


build = f"CUDA {torch.version.cuda}" if torch.version.cuda else "CPU"
nvidia = [d for d in md.distributions() if (d.metadata["Name"] or "").lower().startswith("nvidia-")]
site = sysconfig.get_paths()["purelib"]
site_files = [os.path.join(root, f) for root, _, files in os.walk(site) for f in files]
print(f"torch {torch.__version__} ({build} build), {size_gb(dist_files(md.distribution('torch'))):.2f} GB")
print(f"NVIDIA libraries: {len(nvidia)} packages, {size_gb(p for d in nvidia for p in dist_files(d)):.2f} GB")
print(f"site-packages: {size_gb(site_files):.2f} GB ({site})")
if torch.version.cuda and sys.argv[1] == "no":
    print(
        "note: a CUDA build on a machine without an NVIDIA GPU; for the CPU build: "
        "pip uninstall -y torch $(pip list --format=freeze | grep -i '^nvidia-' | cut -d= -f1) "
        "&& bash scripts/install.sh"
    )
EOF
}

"$PYTHON" -m pip install --upgrade pip >/dev/null
install_torch
if [ "${1:-all}" != torch ]; then
  # The torch just installed satisfies the range, so pip keeps it.
  # quant (bitsandbytes): a 43 MB wheel, 125 MB installed, with its CPU backend too.
  # openenv: the OpenEnv server and client (uirl_gym.openenv), with gradio and fastmcp.
  "$PYTHON" -m pip install -e ".[train,datasets,k8s,dev,quant,openenv,miniwob]"
  # browsergym-core, for the BrowserGym contract's tests (tests/test_browsergym.py) only:
  # uirl never imports it. --no-deps: its pin (playwright==1.44) would downgrade
  # playwright and greenlet; what it needs beyond uirl's dependencies is listed here.
  "$PYTHON" -m pip install --no-deps browsergym-core==0.14.3 beautifulsoup4 soupsieve "lxml<6"
  install_browser
fi
report
