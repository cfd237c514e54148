#!/usr/bin/env bash
# The cluster tests spawn private nats-server processes from the machine's binary (never a
# download, never the NATS service that may run on 4222). Install Debian's package when it is
# missing and we can; otherwise say what to do.
set -euo pipefail
if [ -n "${NATS_SERVER:-}" ] && [ -x "$NATS_SERVER" ]; then exit 0; fi
if command -v nats-server >/dev/null 2>&1 || [ -x /usr/sbin/nats-server ]; then exit 0; fi
if [ "$(id -u)" = "0" ] && command -v apt-get >/dev/null 2>&1; then
  echo "installing Debian's nats-server for the cluster tests..."
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq nats-server >/dev/null
  { command -v nats-server >/dev/null 2>&1 || [ -x /usr/sbin/nats-server ]; } && exit 0
fi
echo "nats-server is not installed: run 'sudo apt-get install -y nats-server' (Debian) or set NATS_SERVER to its path" >&2
exit 1
