#!/bin/sh
# Install the system programs the test suite needs beyond Python packages:
#   chromium + chromedriver  (tests/report/test_report_browser.py opens the HTML report in them)
#   postgresql               (server binaries for the service tests)
#   gcc + python3-dev        (pip builds numdiff's compiled metric sums, numdiff/comparators/_sums.c;
#                             without them numdiff computes the same sums with numpy, and under
#                             CI=true tests/comparators/test_native_sums.py fails)
# Idempotent: silent and quick when everything is already there. Installs only when run as root
# (Debian/Ubuntu apt-get); otherwise prints what to install and exits 0, and the tests that need
# the programs skip (or fail under CI=true).
set -eu

have_chromium() { command -v chromium >/dev/null 2>&1 || command -v chromium-browser >/dev/null 2>&1; }
have_chromedriver() { command -v chromedriver >/dev/null 2>&1; }
have_postgres() {
    command -v initdb >/dev/null 2>&1 && return 0
    for d in /usr/lib/postgresql/*/bin; do
        [ -x "$d/initdb" ] && return 0
    done
    return 1
}

# the compiler setuptools will call: Python's configured CC (gcc on Debian), else cc
have_cc() {
    compiler=$(python3 -c 'import sysconfig; print((sysconfig.get_config_var("CC") or "").split()[0])' 2>/dev/null) \
        || compiler=""
    [ -n "$compiler" ] || compiler=cc
    command -v "$compiler" >/dev/null 2>&1
}
have_python_headers() {
    python3 -c 'import os, sys, sysconfig; sys.exit(not os.path.exists(os.path.join(sysconfig.get_paths()["include"], "Python.h")))' \
        >/dev/null 2>&1
}

missing=""
have_cc || missing="$missing gcc"
have_python_headers || missing="$missing python3-dev"
have_chromium || missing="$missing chromium"
have_chromedriver || missing="$missing chromium-driver"
have_postgres || missing="$missing postgresql"
[ -z "$missing" ] && exit 0

if [ "$(id -u)" != "0" ]; then
    echo "note: not root, so not installing:$missing (run 'sudo apt-get install -y$missing';" \
         "the tests that need them skip until then)" >&2
    exit 0
fi
if ! command -v apt-get >/dev/null 2>&1; then
    echo "note: no apt-get on this machine; install$missing by hand (the tests that need them skip until then)" >&2
    exit 0
fi
echo "installing test system packages:$missing" >&2
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq >/dev/null
# shellcheck disable=SC2086
apt-get install -y -qq --no-install-recommends $missing >/dev/null
