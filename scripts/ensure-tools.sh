#!/usr/bin/env bash
# Makes sure the real parts the tests use are on this machine: PostgreSQL's
# server binaries (installed from Debian's packages when missing), moto and
# cfn-lint (part of the machine image; pip cannot reach PyPI here, so a
# missing one is reported, not installed). Prints what it uses.
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

missing=0
for tool in moto_server cfn-lint; do
  if ! command -v "$tool" >/dev/null 2>&1; then
    echo "ensure-tools: $tool is not on PATH (pip install 'moto[server]' cfn-lint)" >&2
    missing=1
  fi
done
[ "$missing" -eq 0 ] || exit 1

pg=$(command -v initdb || ls /usr/lib/postgresql/*/bin/initdb | tail -1)
echo "ensure-tools: postgres $("$pg" --version | awk '{print $3}'), $(cfn-lint --version), moto_server at $(command -v moto_server)"
