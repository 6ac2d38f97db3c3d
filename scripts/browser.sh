#!/usr/bin/env bash
# Headless Chromium for the dashboard's browser tests and `just screenshots`: Debian's
# chromium + chromium-driver, installed with apt when missing (idempotent; quick when present).
set -euo pipefail

if command -v chromium >/dev/null && command -v chromedriver >/dev/null; then
  exit 0
fi
as_root() {
  if ((EUID == 0)); then "$@"; else sudo "$@"; fi
}
echo "browser: installing chromium chromium-driver (apt)"
as_root apt-get update -qq
as_root env DEBIAN_FRONTEND=noninteractive \
  apt-get install -y -qq --no-install-recommends chromium chromium-driver
echo "browser: $(chromium --version 2>/dev/null)"
