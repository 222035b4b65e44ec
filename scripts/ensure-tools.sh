#!/usr/bin/env bash
# Makes sure the real parts the tests use are on this machine: PostgreSQL's
# server binaries, PgBouncer, python3-httpx, clamd (clamav-daemon), Chromium,
# node and npm (Debian packages),
# moto and cfn-lint (pip), and playwright-core (npm ci in clients/js, never
# a browser download). Prints what it uses.
#
# It installs the missing Debian packages, saying first which and why, so
# that make test works on a fresh machine (CI's included); INSTALL=0
# declines: a missing package then stops it with the one apt-get line to
# run. moto and cfn-lint are reported, not installed (pip cannot reach
# PyPI on every machine).
#
# PYTHON and CHROMIUM name the binaries it checks (default /usr/bin/python3
# and /usr/bin/chromium: the ones the tests run).
set -euo pipefail

PYTHON="${PYTHON:-/usr/bin/python3}"
CHROMIUM="${CHROMIUM:-/usr/bin/chromium}"

have_pg() {
  command -v initdb >/dev/null 2>&1 && return 0
  ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1
}
# The pooler tests (TestPooler*: the service through a transaction
# pooler, internal/testkit/pgbouncertest): Debian's pgbouncer, run by the
# tests themselves on loopback ports.
have_pgbouncer() { command -v pgbouncer >/dev/null 2>&1 || [ -x /usr/sbin/pgbouncer ]; }
# The content test that fetches as the platform's workspace runtime does
# (Python httpx, internal/httpapi TestHTTPXRuntimeGetsTheBytes).
have_httpx() { "$PYTHON" -c 'import httpx' >/dev/null 2>&1; }
# Malware scanning's tests and make run MALWARE_SCAN=clamav
# (internal/scanresult): Debian's clamav-daemon, whose clamd the tests
# start themselves with the repository's signatures (no download).
have_clamd() { command -v clamd >/dev/null 2>&1 || [ -x /usr/sbin/clamd ]; }

# The Debian packages missing, in one list.
pkgs=""
have_pg || pkgs="$pkgs postgresql"
have_pgbouncer || pkgs="$pkgs pgbouncer"
have_httpx || pkgs="$pkgs python3-httpx"
have_clamd || pkgs="$pkgs clamav-daemon"
# The browser client's test (clients/js/browsertest): Debian's Chromium,
# node and npm.
[ -x "$CHROMIUM" ] || pkgs="$pkgs chromium"
command -v node >/dev/null 2>&1 || pkgs="$pkgs nodejs"
command -v npm >/dev/null 2>&1 || pkgs="$pkgs npm"
pkgs="${pkgs# }"

if [ -n "$pkgs" ]; then
  if [ "${INSTALL:-1}" = 0 ]; then
    echo "ensure-tools: missing Debian packages: $pkgs. Install them with:" >&2
    echo "  sudo apt-get install -y $pkgs" >&2
    echo "or let make do it: make tools (or make test without INSTALL=0)" >&2
    exit 1
  fi
  echo "ensure-tools: the tests run on Debian packages this machine lacks; installing them now: $pkgs (INSTALL=0 declines)" >&2
  if [ "$(id -u)" -eq 0 ]; then SUDO=""; else SUDO="sudo"; fi
  $SUDO apt-get update -qq
  # A failed install is told by the checks below.
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq $pkgs >/dev/null ||
    echo "ensure-tools: apt-get install $pkgs failed" >&2
  # Debian starts a cluster of its own on install; the tests start theirs.
  case " $pkgs " in *" postgresql "*) $SUDO service postgresql stop >/dev/null 2>&1 || true ;; esac
  # Debian's package may start a pgbouncer of its own; the tests start theirs.
  case " $pkgs " in *" pgbouncer "*) $SUDO service pgbouncer stop >/dev/null 2>&1 || true ;; esac
  # Debian's clamav-daemon may start its clamd and freshclam (a download); the tests start their clamd.
  case " $pkgs " in *" clamav-daemon "*)
    $SUDO service clamav-daemon stop >/dev/null 2>&1 || true
    $SUDO service clamav-freshclam stop >/dev/null 2>&1 || true ;;
  esac
fi
have_pg || { echo "ensure-tools: no initdb (Debian package postgresql)" >&2; exit 1; }
have_pgbouncer || { echo "ensure-tools: no pgbouncer (Debian package pgbouncer)" >&2; exit 1; }
pgbouncer_bin=$(command -v pgbouncer || echo /usr/sbin/pgbouncer)
have_httpx || { echo "ensure-tools: $PYTHON cannot import httpx (Debian package python3-httpx)" >&2; exit 1; }
have_clamd || { echo "ensure-tools: no clamd (Debian package clamav-daemon)" >&2; exit 1; }
# Without Chromium or node the browser test says what is missing (and
# fails under CI=true): not fatal here.
[ -x "$CHROMIUM" ] || echo "ensure-tools: no $CHROMIUM; the browser test will say so" >&2

missing=0
for tool in moto_server cfn-lint; do
  if ! command -v "$tool" >/dev/null 2>&1; then
    echo "ensure-tools: $tool is not on PATH (pip install 'moto[server]' cfn-lint)" >&2
    missing=1
  fi
done
[ "$missing" -eq 0 ] || exit 1

# playwright-core, typescript and @types/node as package-lock.json pins them: the
# project's own dependencies, like the Go modules, not system packages.
js="$(cd "$(dirname "$0")/.." && pwd)/clients/js"
if { [ ! -f "$js/node_modules/playwright-core/package.json" ] || [ ! -f "$js/node_modules/typescript/package.json" ] ||
  [ ! -f "$js/node_modules/@types/node/package.json" ]; } && command -v npm >/dev/null 2>&1; then
  echo "ensure-tools: npm ci in $js (playwright-core, no browser download; typescript)" >&2
  (cd "$js" && PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD=1 npm ci --no-audit --no-fund --loglevel=error >/dev/null) ||
    echo "ensure-tools: npm ci in $js failed; the browser test will say so" >&2
fi
browser="no browser"
[ -x "$CHROMIUM" ] && browser="$("$CHROMIUM" --version 2>/dev/null | awk '{print $1, $2}')"

pg=$(command -v initdb || ls /usr/lib/postgresql/*/bin/initdb | tail -1)
echo "ensure-tools: postgres $("$pg" --version | awk '{print $3}'), pgbouncer $("$pgbouncer_bin" --version | awk 'NR==1 {print $2}'), httpx $("$PYTHON" -c 'import httpx; print(httpx.__version__)'), $(cfn-lint --version), moto_server at $(command -v moto_server), $browser, node $(node --version 2>/dev/null || echo missing)"
