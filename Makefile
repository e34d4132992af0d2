# `make test` is the one command that runs every test; .ci/run calls it.
# `make run` serves the embedded store on 127.0.0.1:8080.

GO ?= go

# package:target:executions for every fuzz target; `make test` runs each
# for about a second on a 2-core machine, beside the tests: a smoke test
# of each target, whose corpus is committed (and runs in go test itself).
# Counts, not durations: with -fuzztime=10s Go 1.26's fuzz coordinator can
# fail a healthy target with "context deadline exceeded" as the time runs
# out (go.dev/issue/75804, fixed in Go 1.27). `make fuzz FUZZTIME=60s`
# still runs every target for a duration.
FUZZ_TARGETS = .:FuzzCanonicalEmail:20000x .:FuzzProfileValueUTF8:20000x \
	.:FuzzParseProfileJSON:30000x .:FuzzParseRecordJSON:20000x .:FuzzParseOperationJSON:10000x .:FuzzFlatObjectSyntax:30000x \
	./internal/directory:FuzzDecodeCursor:6000x .:FuzzAddFloat:20000x \
	./internal/record:FuzzDecode:60000x ./internal/record:FuzzDecodeEvent:60000x \
	./resp:FuzzCommands:6000x ./internal/search:FuzzParse:10000x ./internal/search:FuzzTerms:5000x
FUZZTIME ?=

# Every package but the Redis store's, the slowest first: go test starts
# packages in the order named, two at a time on a 2-core machine. The
# Redis store's tests, the longest package, run beside them as one more
# process (below), and its cluster tests after them. The run is CPU-bound:
# more processes at once made it no shorter, and with the Redis cluster
# suites as a fourth, tests whose locks and resizes wait a bounded time
# failed.
SLOW_PACKAGES = ./http/ ./cmd/partmap/ ./pebble/ ./postgres/
TEST_PACKAGES = $(SLOW_PACKAGES) $(filter-out $(SLOW_PACKAGES) ./redis/,$(shell $(GO) list -f '{{.Dir}}' ./... | sed 's|^$(CURDIR)|.|; s|$$|/|'))

# The Redis store's tests on a Redis Cluster (TestCluster...) run without
# the race detector, once the other packages' tests are done; the rest of
# its tests run with it, beside those. They repeat on a cluster the suites
# that run with -race on one redis-server, through the same code of
# partmap's, to show the same semantics where the keys of one operation
# must share a slot; the race detector doubled their CPU (182 against 91
# CPU-s, in a run of about 1,000), and the run was over ten minutes. After
# the Redis store's -race tests, as they were until 2026-12-06, they were
# the last 105 s of a run, on one core of two. The HTTP conformance suite
# over Redis (TestConformanceOnRedis) joins them: it runs the HTTP code
# that TestConformance runs with -race on Pebble, and the Redis store's
# that its own tests run with -race; with it, it took 50 CPU-s, without
# it 33.
CLUSTER_TESTS = ^TestCluster
# The cluster tests run as two processes, each with a cluster of its own:
# as one process they used one core of the two for 134 s while the other
# idled (2026-12-06). The first takes the tests below and starts once the
# other packages' tests are done, about 100 s before the Redis store's
# -race tests end; the second, every other TestCluster test (so that a new
# one runs in one of them), and the HTTP suite over Redis start once those
# end. The first holds about three quarters of the cluster tests' time, so
# that both finish at about the same time. No more than three test
# processes run at once.
CLUSTER_TESTS_A = ^TestCluster(Resize|Conformance|TxCrash|DeleteAll|SweepsUnderLoad|TxCrashUntouched|Expiry|SearchIndexConformance|FeedConformance)$$
HTTP_NORACE_TESTS = ^TestConformanceOnRedis$$
TEST_FLAGS = -count=1 $(LDFLAGS) -timeout 15m -artifacts -outputdir $(CURDIR)/artifacts

.PHONY: test run build lint fuzz deps console-screenshot

# -ldflags=-w: test binaries without DWARF. Linking twenty race-built
# binaries with it took 20 s of the run's wall time (48 s → 29 s for
# `go test -race -run '^$$' ./...`); race reports and panics still name
# files and lines, from the runtime's own tables.
LDFLAGS = -ldflags=-w

# Tests keep screenshots and other artifacts (t.ArtifactDir) under
# artifacts/_artifacts/, which is not committed. Go 1.26 names each test's
# directory at random instead of PACKAGE/TEST (go.dev/issue/77763); the
# console test logs where its screenshot went.
#
# The fuzz stage runs beside the tests, at the lowest priority: they leave
# about a sixth of the two cores idle (waiting on fsyncs, Redis and
# sleeps), more than its 70 s of CPU, where after them it took 40 s of
# the run. Its output (artifacts/fuzz.log) is printed once both are done.
test: deps lint
	@mkdir -p artifacts
	@nice -n 19 $(MAKE) --no-print-directory fuzz >artifacts/fuzz.log 2>&1 & fuzz=$$!; \
	echo "$(GO) test -race $(TEST_FLAGS) ..., the Redis store's beside them (artifacts/redis.log), then its cluster tests (artifacts/cluster-*.log) and HTTP's over Redis without -race, and make fuzz"; \
	$(GO) test -race $(TEST_FLAGS) -skip '$(CLUSTER_TESTS)' ./redis/ >artifacts/redis.log 2>&1 & redis=$$!; \
	$(GO) test -race $(TEST_FLAGS) -skip '$(HTTP_NORACE_TESTS)' $(TEST_PACKAGES); tested=$$?; \
	$(GO) test $(TEST_FLAGS) -run '$(CLUSTER_TESTS_A)' ./redis/ >artifacts/cluster-a.log 2>&1 & clusterA=$$!; \
	wait $$redis; redised=$$?; \
	$(GO) test $(TEST_FLAGS) -run '$(CLUSTER_TESTS)' -skip '$(CLUSTER_TESTS_A)' ./redis/ >artifacts/cluster-b.log 2>&1 & clusterB=$$!; \
	$(GO) test $(TEST_FLAGS) -run '$(HTTP_NORACE_TESTS)' ./http/ || tested=1; \
	wait $$clusterA || tested=1; wait $$clusterB || tested=1; \
	cat artifacts/redis.log artifacts/cluster-a.log artifacts/cluster-b.log; \
	wait $$fuzz; fuzzed=$$?; \
	cat artifacts/fuzz.log; \
	[ $$redised -eq 0 ] || echo "the Redis store's tests failed (artifacts/redis.log)"; \
	[ $$fuzzed -eq 0 ] || echo "make fuzz failed (artifacts/fuzz.log)"; \
	[ $$tested -eq 0 ] && [ $$redised -eq 0 ] && [ $$fuzzed -eq 0 ]

# Each package's fuzzing binary is built once (go test -c -fuzz) and runs
# each of its targets from the package's directory, where its corpus is:
# eleven builds of instrumented binaries cost more than the fuzzing did.
fuzz:
	@mkdir -p artifacts/fuzz; built=; \
	for t in $(FUZZ_TARGETS); do \
		pkg=$${t%%:*}; rest=$${t#*:}; name=$${rest%%:*}; budget=$${rest#*:}; \
		[ -n "$(FUZZTIME)" ] && budget=$(FUZZTIME); \
		bin=$(CURDIR)/artifacts/fuzz/$$(echo "$$pkg" | tr './' '__').test; \
		case " $$built " in *" $$pkg "*) ;; *) \
			$(GO) test -c $(LDFLAGS) -fuzz . -o $$bin $$pkg || exit 1; built="$$built $$pkg";; \
		esac; \
		echo "fuzz $$name ($$pkg) for $$budget"; \
		(cd $$pkg && $$bin -test.run '^$$' -test.fuzz "^$$name\$$" -test.fuzztime $$budget \
			-test.fuzzcachedir "$$($(GO) env GOCACHE)/fuzz/$$($(GO) list -f '{{.ImportPath}}' .)") || exit 1; \
	done

# The Redis store's tests start their own redis-server (the Redis
# protocol's tests drive redis-cli too, and compare FT.SEARCH with the
# RediSearch module's), the PostgreSQL
# projection's their own postgres (internal/pgtest), and the console's test
# drives a headless chromium: all are Debian's packages.
deps:
	@missing=; \
	command -v redis-server >/dev/null 2>&1 || missing="$$missing redis-server"; \
	command -v redis-cli >/dev/null 2>&1 || missing="$$missing redis-tools"; \
	[ -e /usr/lib/redis/modules/redisearch.so ] || missing="$$missing redis-redisearch"; \
	command -v chromium >/dev/null 2>&1 || missing="$$missing chromium"; \
	ls /usr/lib/postgresql/*/bin/postgres >/dev/null 2>&1 || missing="$$missing postgresql"; \
	[ -z "$$missing" ] || { \
		echo "installing$$missing"; \
		SUDO=; [ "$$(id -u)" = 0 ] || SUDO=sudo; \
		$$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq $$missing; }

# vet with -race reads the export data of the race-built packages that the
# tests build anyway. On a machine with an empty build cache, plain vet
# cost 79 CPU-s beyond the plain builds that the cluster tests, the
# partmap binary and the fuzz stage need anyway, and vet -race 57
# (2026-12-06).
lint:
	@unformatted="$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go'))"; \
	if [ -n "$$unformatted" ]; then echo "gofmt would change:"; echo "$$unformatted"; exit 1; fi
	$(GO) vet -race ./...

run:
	$(GO) run ./cmd/partmap serve

build:
	$(GO) build -o partmap ./cmd/partmap

# The README's picture of the console, taken by the console's own test.
console-screenshot: deps
	PARTMAP_CONSOLE_SCREENSHOT=$(CURDIR)/docs/console.png $(GO) test -count=1 -run '^TestConsole$$' ./http/
