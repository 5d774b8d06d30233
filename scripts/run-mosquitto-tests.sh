#!/bin/sh
# Runs Mosquitto's own broker tests (test/broker of the eclipse/mosquitto repository, core
# groups 01-05, 07, 10-13) against a broker binary and prints PASS/FAIL per test and a total.
# They are Mosquitto's tests, not ours: `make mosquitto-tests` runs them, `make test` does not.
#
#   scripts/run-mosquitto-tests.sh [BROKER_BINARY...]     (default: build/arbor and
#                                                          /usr/sbin/mosquitto)
# Environment:
#   MOSQ_REPO    bare git directory of eclipse/mosquitto
#                (default /work/.mirror/eclipse+mosquitto/repo)
#   MOSQ_TAG     tag to check out (default v2.0.11, the version arbor replaces)
#   MOSQ_GROUPS  test groups (default "01 02 03 04 05 07 10 11 12 13")
#   MOSQ_ONLY    run only tests whose name contains this string
#   MOSQ_PORT    first TCP port to use (default 21883)
#   MOSQ_TIMEOUT seconds a test may take (default 60)
#   MOSQ_KEEP    keep the checkout in this directory (default: a temporary one, removed)
#   MOSQ_VERBOSE print the output of a failing test
# The tests start the broker as ../../src/mosquitto from test/broker, so that path is made a
# symbolic link to the binary under test. Exit status: 0 when every test passed for every
# binary, 1 otherwise.
set -u

repo=${MOSQ_REPO:-/work/.mirror/eclipse+mosquitto/repo}
tag=${MOSQ_TAG:-v2.0.11}
groups=${MOSQ_GROUPS:-"01 02 03 04 05 07 10 11 12 13"}
only=${MOSQ_ONLY:-}
port=${MOSQ_PORT:-21883}
limit=${MOSQ_TIMEOUT:-60}
here=$(cd "$(dirname "$0")/.." && pwd)

if [ $# -eq 0 ]; then
    set -- "$here/build/arbor" /usr/sbin/mosquitto
fi
if [ ! -d "$repo" ]; then
    echo "run-mosquitto-tests: no Mosquitto repository at $repo (set MOSQ_REPO)" >&2
    exit 2
fi

if [ -n "${MOSQ_KEEP:-}" ]; then
    top=$MOSQ_KEEP
    mkdir -p "$top"
else
    top=$(mktemp -d /tmp/arbor-mosq-tests.XXXXXX)
    trap 'rm -rf "$top"' EXIT INT TERM
fi
if [ ! -f "$top/test/broker/Makefile" ]; then
    git --git-dir="$repo" archive "$tag" test | tar -x -C "$top" || {
        echo "run-mosquitto-tests: cannot check out $tag of $repo" >&2
        exit 2
    }
fi
mkdir -p "$top/src"
# Started as root, a broker drops its privileges (Mosquitto to mosquitto, arbor to its user)
# and must still write its persistence files next to the tests.
if [ "$(id -u)" = 0 ]; then
    chmod 755 "$top" "$top/test"
    chmod 1777 "$top/test/broker"
fi

# The tests of each group, in the order of test/broker/Makefile (its list, not the folder's:
# the folder also holds helpers and tests Mosquitto does not run).
tests=$(for g in $groups; do
    awk -v g="$g" '$0 ~ "^" g " :" { on = 1; next }
                   /^[0-9]+ :/ { on = 0 }
                   on && /^\t\.\/.*\.py$/ { sub(/^\t\.\//, ""); print }' \
        "$top/test/broker/Makefile"
done)

status=0
for broker in "$@"; do
    if [ ! -x "$broker" ]; then
        echo "run-mosquitto-tests: $broker is not an executable" >&2
        status=1
        continue
    fi
    ln -sf "$(cd "$(dirname "$broker")" && pwd)/$(basename "$broker")" "$top/src/mosquitto"
    echo "== $broker ($tag test/broker, groups $groups)"
    passed=0
    failed=0
    for t in $tests; do
        case "$t" in *"$only"*) ;; *) continue ;; esac
        # A few tests take two ports (get_port(2)); the others one.
        ports=$port
        if grep -q 'get_port(2)' "$top/test/broker/$t" 2>/dev/null; then
            ports="$port $((port + 1))"
        fi
        if [ ! -f "$top/test/broker/$t" ]; then
            echo "SKIP $t (listed in the Makefile, not in $tag)"
            continue
        fi
        # shellcheck disable=SC2086
        if (cd "$top/test/broker" && timeout -k 5 "$limit" python3 "./$t" $ports \
                >"$top/last.log" 2>&1); then
            echo "PASS $t"
            passed=$((passed + 1))
        else
            echo "FAIL $t"
            if [ -n "${MOSQ_VERBOSE:-}" ]; then sed 's/^/    /' "$top/last.log"; fi
            failed=$((failed + 1))
            status=1
        fi
    done
    echo "== $broker: $passed passed, $failed failed"
done
rm -f "$top/src/mosquitto"
exit $status
