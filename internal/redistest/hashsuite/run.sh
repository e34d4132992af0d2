#!/usr/bin/env bash
# Runs Redis's own hash tests, tests/unit/type/hash.tcl and
# tests/unit/type/hash-field-expire.tcl of a redis/redis checkout, with
# Redis's own runner (tests/test_helper.tcl, external-server mode), against
# a partmap binary's Redis port, or against a redis-server for reference,
# and prints per test: passed, failed (with the error and its cause) or
# skipped (and why), then totals.
#
#   internal/redistest/hashsuite/run.sh REDIS_CHECKOUT BINARY [UNIT...] [-- RUNNER_ARGS...]
#
# BINARY is a partmap binary (go build -o /tmp/partmap ./cmd/partmap) or a
# redis-server. UNITs default to unit/type/hash and
# unit/type/hash-field-expire. RUNNER_ARGS go to test_helper.tcl (such as
# --only NAME). Needs tclsh (apt-get install tcl). The server runs on a
# private port with a temporary data directory and is stopped at the end.
#
# Environment: HASHSUITE_OUT, a directory for results.tcl, report.md and
# the logs (default: a temporary one, named at the end); HASHSUITE_SEED,
# the seed of the tests' random values (default 1).
#
# The tests are run unchanged; harness.tcl adapts the runner as its header
# says. Each failure gets a cause: an excused feature (DEBUG, OBJECT,
# DUMP/RESTORE, replication, AOF, several databases, binary values), or a
# missing command, an error reply or an assertion. Not part of make test: it
# needs a redis/redis checkout (docs/REDIS-TESTS.md).
set -euo pipefail

usage() { sed -n '9,11p' "$0" >&2; exit 2; }
[ $# -ge 2 ] || usage
here=$(cd "$(dirname "$0")" && pwd)
src=$(cd "$1" && pwd)
bin=$2
shift 2
units=()
while [ $# -gt 0 ] && [ "$1" != "--" ]; do units+=("$1"); shift; done
[ $# -gt 0 ] && shift
[ ${#units[@]} -gt 0 ] || units=(unit/type/hash unit/type/hash-field-expire)
[ -f "$src/tests/test_helper.tcl" ] || { echo "$src is not a redis/redis checkout" >&2; exit 2; }
command -v tclsh >/dev/null || { echo "tclsh is missing: apt-get install -y tcl" >&2; exit 2; }

out=${HASHSUITE_OUT:-$(mktemp -d /tmp/hashsuite.XXXXXX)}
mkdir -p "$out"
data=$(mktemp -d /tmp/hashsuite-data.XXXXXX)
: >"$out/results.tcl"
pid=
cleanup() {
	if [ -n "$pid" ]; then kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; fi
	rm -rf "$data"
}
trap cleanup EXIT
trap 'exit 130' INT # so that EXIT's trap stops the server
trap 'exit 143' TERM

# wait_log FILE REGEX: the first match of REGEX's group in FILE, within 20 s.
wait_log() {
	for _ in $(seq 200); do
		if m=$(sed -nE "s#.*$2.*#\1#p" "$1" | head -1) && [ -n "$m" ]; then echo "$m"; return; fi
		sleep 0.1
	done
	echo "the server did not start; its log:" >&2; cat "$1" >&2; exit 1
}

if "$bin" --version 2>/dev/null | grep -q '^Redis server'; then
	target="$("$bin" --version | cut -d' ' -f1-3)"
	for _ in $(seq 50); do
		port=$((20000 + RANDOM % 20000))
		(echo >/dev/tcp/127.0.0.1/$port) 2>/dev/null || break
	done
	"$bin" --port "$port" --bind 127.0.0.1 --save '' --appendonly no --dir "$data" \
		--enable-debug-command yes >"$out/server.log" 2>&1 &
	pid=$!
	wait_log "$out/server.log" '(Ready to accept connections)' >/dev/null
else
	target="partmap $(cd "$(dirname "$bin")" && pwd)/$(basename "$bin")"
	"$bin" serve --addr 127.0.0.1:0 --resp-addr 127.0.0.1:0 --data "$data" >"$out/server.log" 2>&1 &
	pid=$!
	port=$(wait_log "$out/server.log" 'serving the Redis protocol" addr=127\.0\.0\.1:([0-9]+)')
	http=$(wait_log "$out/server.log" 'msg=serving addr=(http://[0-9.:]+)')
	"$bin" start --server "$http" >/dev/null
fi

# The runner sources tests/NAME.tcl for --single NAME: name harness.tcl so.
rel=$(realpath --relative-to="$src/tests" "$here/harness.tcl")
for unit in "${units[@]}"; do
	log=$out/$(basename "$unit").log
	echo "== $unit against $target on port $port; log in $log" >&2
	(cd "$src" && TERM=dumb HASHSUITE_UNIT=$unit HASHSUITE_RESULTS=$out/results.tcl HASHSUITE_SEED=${HASHSUITE_SEED:-1} \
		tclsh tests/test_helper.tcl --host 127.0.0.1 --port "$port" --singledb --ignore-encoding \
		--ignore-digest --durable --clients 1 --timeout 600 --single "${rel%.tcl}" "$@") \
		>"$log" 2>&1 || true # it exits 1 when a test fails
	if grep -aq 'Executing test client\|TIMEOUT' "$log"; then
		echo "   the runner stopped before the end of $unit: see $log" >&2
	fi
done

commit=$(cat "$src/COMMIT" 2>/dev/null || git -C "$src" rev-parse HEAD 2>/dev/null || echo unknown)
tclsh "$here/report.tcl" "$out/results.tcl" "$target" "redis/redis $commit" | tee "$out/report.md"
echo "results in $out" >&2
