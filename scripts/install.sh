#!/usr/bin/env bash
# Install uirl with every extra, and a Chromium if none can be found.
# Browser order (same as the session server's): $UIRL_CHROMIUM, Playwright's own
# browser, a chromium/chrome on PATH; else Debian's `chromium` (apt-get, as root), else
# Playwright's download.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}

"$PYTHON" -m pip install --upgrade pip >/dev/null
"$PYTHON" -m pip install -e ".[train,k8s,dev]"

if "$PYTHON" -c "from uirl_gym.server.browser import find_browser; print(find_browser())" 2>/dev/null; then
  exit 0
fi
if command -v apt-get >/dev/null && [ "$(id -u)" = 0 ]; then
  echo "No Chromium found: installing Debian's chromium" >&2
  apt-get update -q
  DEBIAN_FRONTEND=noninteractive apt-get install -y -q chromium fonts-dejavu-core
else
  echo "No Chromium found: installing Playwright's" >&2
  "$PYTHON" -m playwright install --with-deps chromium
fi
"$PYTHON" -c "from uirl_gym.server.browser import find_browser; print('browser:', find_browser())"
