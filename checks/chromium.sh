#!/usr/bin/env bash
# Headless Chromium for tests/test_report.py (the report page is opened in a real
# browser): installs Debian's package if it is missing. Needs root.
set -euo pipefail
if ! command -v chromium >/dev/null && ! command -v chromium-browser >/dev/null; then
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null
fi
echo "chromium: $( (chromium --version || chromium-browser --version) 2>/dev/null | head -1)"
