#!/usr/bin/env bash
# Makes sure the real parts the tests use are on this machine: PostgreSQL's
# server binaries, PgBouncer and python3-httpx (installed from Debian's
# packages when missing), moto and cfn-lint (part of the machine image; pip cannot reach
# PyPI here, so a missing one is reported, not installed), and what the
# browser test uses (Chromium, node, playwright-core). Prints what it uses.
set -euo pipefail

have_pg() {
  command -v initdb >/dev/null 2>&1 && return 0
  ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1
}

if ! have_pg; then
  echo "ensure-tools: PostgreSQL server binaries missing; installing from Debian's packages" >&2
  if [ "$(id -u)" -eq 0 ]; then SUDO=""; else SUDO="sudo"; fi
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq postgresql >/dev/null
  # Debian starts a cluster of its own on install; the tests start theirs.
  $SUDO service postgresql stop >/dev/null 2>&1 || true
fi
have_pg || { echo "ensure-tools: no initdb after install" >&2; exit 1; }

# The pooler tests (TestPooler*: the service through a transaction
# pooler, internal/testkit/pgbouncertest): Debian's pgbouncer, run by the
# tests themselves on loopback ports.
have_pgbouncer() { command -v pgbouncer >/dev/null 2>&1 || [ -x /usr/sbin/pgbouncer ]; }
if ! have_pgbouncer; then
  echo "ensure-tools: pgbouncer missing; installing from Debian's packages" >&2
  if [ "$(id -u)" -eq 0 ]; then SUDO=""; else SUDO="sudo"; fi
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq pgbouncer >/dev/null
  # Debian's package may start a pgbouncer of its own; the tests start theirs.
  $SUDO service pgbouncer stop >/dev/null 2>&1 || true
fi
have_pgbouncer || { echo "ensure-tools: no pgbouncer after install" >&2; exit 1; }
pgbouncer_bin=$(command -v pgbouncer || echo /usr/sbin/pgbouncer)

# The content test that fetches as the platform's workspace runtime does
# (Python httpx, internal/httpapi TestHTTPXRuntimeGetsTheBytes): Debian's
# python3-httpx, for /usr/bin/python3.
have_httpx() { /usr/bin/python3 -c 'import httpx' >/dev/null 2>&1; }
if ! have_httpx; then
  echo "ensure-tools: python3-httpx missing; installing from Debian's packages" >&2
  if [ "$(id -u)" -eq 0 ]; then SUDO=""; else SUDO="sudo"; fi
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq python3-httpx >/dev/null
fi
have_httpx || { echo "ensure-tools: /usr/bin/python3 cannot import httpx after install" >&2; exit 1; }

missing=0
for tool in moto_server cfn-lint; do
  if ! command -v "$tool" >/dev/null 2>&1; then
    echo "ensure-tools: $tool is not on PATH (pip install 'moto[server]' cfn-lint)" >&2
    missing=1
  fi
done
[ "$missing" -eq 0 ] || exit 1

# The browser client's test (clients/js/browsertest): Debian's Chromium
# (never a browser build downloaded by Playwright), node and npm, and
# playwright-core as package-lock.json pins it. A failed install is
# reported, not fatal: that test then says what is missing, and fails
# under CI=true.
if [ ! -x /usr/bin/chromium ] || ! command -v node >/dev/null 2>&1 || ! command -v npm >/dev/null 2>&1; then
  echo "ensure-tools: chromium or node missing; installing from Debian's packages" >&2
  if [ "$(id -u)" -eq 0 ]; then SUDO=""; else SUDO="sudo"; fi
  pkgs="chromium"
  command -v node >/dev/null 2>&1 || pkgs="$pkgs nodejs"
  command -v npm >/dev/null 2>&1 || pkgs="$pkgs npm"
  { $SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq $pkgs >/dev/null; } ||
    echo "ensure-tools: could not install $pkgs; the browser test will say so" >&2
fi
js="$(cd "$(dirname "$0")/.." && pwd)/clients/js"
if [ ! -f "$js/node_modules/playwright-core/package.json" ] && command -v npm >/dev/null 2>&1; then
  echo "ensure-tools: npm ci in $js (playwright-core, no browser download)" >&2
  (cd "$js" && PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD=1 npm ci --no-audit --no-fund --loglevel=error >/dev/null) ||
    echo "ensure-tools: npm ci in $js failed; the browser test will say so" >&2
fi
browser="no browser"
[ -x /usr/bin/chromium ] && browser="$(/usr/bin/chromium --version 2>/dev/null | awk '{print $1, $2}')"

pg=$(command -v initdb || ls /usr/lib/postgresql/*/bin/initdb | tail -1)
echo "ensure-tools: postgres $("$pg" --version | awk '{print $3}'), pgbouncer $("$pgbouncer_bin" --version | awk 'NR==1 {print $2}'), httpx $(/usr/bin/python3 -c 'import httpx; print(httpx.__version__)'), $(cfn-lint --version), moto_server at $(command -v moto_server), $browser, node $(node --version 2>/dev/null || echo missing)"
