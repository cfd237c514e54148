#!/usr/bin/env bash
# The browser tests drive Debian's Chromium through playwright-core (never a downloaded
# browser). Install it when it is missing and we can; otherwise say what to do.
set -euo pipefail
if command -v chromium >/dev/null 2>&1; then exit 0; fi
if [ "$(id -u)" = "0" ] && command -v apt-get >/dev/null 2>&1; then
  echo "installing Debian's chromium for the browser tests..."
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null
  command -v chromium >/dev/null 2>&1 && exit 0
fi
echo "chromium is not installed: run 'sudo apt-get install -y chromium' (Debian) or set CHROMIUM_PATH" >&2
exit 1
