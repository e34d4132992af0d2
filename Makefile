# `make test` is the one command that runs every test; .ci/run calls it.
# `make run` serves the embedded store on 127.0.0.1:8080.

GO ?= go

# package:target:executions for every fuzz target; `make test` runs each
# for 1 to 3 s on a 2-core machine, beside the tests: a smoke test of each
# target, whose corpus is committed (and runs in go test itself). The
# counts were halved on 2026-12-06 (about 40 of the run's 1,280 CPU-s) to
# shorten the suite, which is CPU-bound. `make fuzz FUZZTIME=60s` runs every target
# for a duration, on the corpus it has gathered in the build cache; `make
# test`'s smoke starts from the committed corpus alone (FUZZCACHE), so
# that its cost does not grow with every run on the same machine.
# Counts, not durations: with -fuzztime=10s Go 1.26's fuzz coordinator can
# fail a healthy target with "context deadline exceeded" as the time runs
# out (go.dev/issue/75804, fixed in Go 1.27).
FUZZ_TARGETS = .:FuzzCanonicalEmail:10000x .:FuzzProfileValueUTF8:10000x \
	.:FuzzParseProfileJSON:15000x .:FuzzParseRecordJSON:10000x .:FuzzParseOperationJSON:5000x .:FuzzFlatObjectSyntax:15000x \
	./internal/directory:FuzzDecodeCursor:3000x .:FuzzAddFloat:10000x \
	./internal/record:FuzzDecode:30000x ./internal/record:FuzzDecodeEvent:30000x \
	./resp:FuzzCommands:3000x ./internal/search:FuzzParse:5000x ./internal/search:FuzzTerms:2500x
FUZZTIME ?=
FUZZCACHE ?=

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
# the race detector. They repeat on a cluster the suites that run with
# -race on one redis-server, through the same code of partmap's, to show
# the same semantics where the keys of one operation must share a slot;
# the race detector doubled their CPU (182 against 91 CPU-s, in a run of
# about 1,000), and the run was over ten minutes. The HTTP conformance
# suite over Redis (TestConformanceOnRedis) runs without it too: it runs
# the HTTP code that TestConformance runs with -race on Pebble, and the
# Redis store's that its own tests run with -race; with it, it took 50
# CPU-s, without it 33.
#
# These run as jobs of a queue, in processes of their own (each Redis
# store test process starts its own cluster, which costs 0.5 CPU-s), taken
# by two lanes: one once the Redis store's -race tests end, the other once
# the other packages' tests end, whichever comes first. Fixed splits of
# them left one core of the two idle for up to 90 s at the end of a run:
# which of the two stages ends first changes from run to run. At most
# three test processes run at once, as in the stages before them: with a
# fourth, tests that wait a bounded time for locks failed. Each shard is
# about 30 s of one core (2026-12-06); the jobs are taken longest first,
# and a TestCluster test in no shard runs in the last job, so that a new
# one cannot be skipped.
CLUSTER_SHARDS = Expiry|SweepsUnderLoad|BackstopAtStart|Model \
	Resize|DeleteAll|IdleCommands \
	Conformance|TxCrash|TxCrashUntouched \
	SearchIndexConformance|FeedConformance|SearchModel
HTTP_NORACE_TESTS = ^TestConformanceOnRedis$$
# The Redis store's model-based and sequential semantic suites run on one
# redis-server without -race too, as a job of the queue: the race detector
# doubled their CPU (70 against 36 s of wall time in the Redis store's
# -race process, the run's longest, 2026-12-06), and their code runs
# under -race in the concurrent suites (linearizability, resizes under
# writers, sweeps under load, the feed's concurrent writers).
REDIS_NORACE_TESTS = TestModel|TestExpiryModel|TestSearchModel|TestExpiry|TestDeleteAll|TestSearchIndexConformance
space := $(subst ,, )
# -vet=off: lint runs go vet with every analyzer on every package before
# the tests, a superset of the few that go test runs on each package it
# tests (9 CPU-s of a race build's 150 on a fresh clone, 2026-12-06).
TEST_FLAGS = -count=1 -vet=off $(LDFLAGS) -timeout 15m -artifacts -outputdir $(CURDIR)/artifacts

.PHONY: test run build lint fuzz deps console-screenshot

# partmap's own packages compile without DWARF for the tests, vet and the
# fuzz stage, and for the binaries the tests build with go build (which
# read GOFLAGS too): a fresh clone compiles all of them, in three
# variants (race, plain and fuzz-instrumented), and DWARF cost 17 CPU-s of
# the race build's 150 (2026-12-06). Race reports and panics name files
# and lines from the runtime's own tables. Other modules' packages keep
# their flags, so that the build cache's copies of them still serve.
test lint fuzz: export GOFLAGS += -gcflags=github.com/partmap/partmap/...=-dwarf=false

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
# The fuzz stage runs beside the tests, at the lowest priority, in the
# time they leave the cores idle (waiting on fsyncs, Redis and sleeps):
# after them it took 40 s of the run. Its 90 to 120 CPU-s, builds
# included, end before the tests do (2026-12-06). Its output
# (artifacts/fuzz.log) is printed once both are done.
test: deps lint
	@mkdir -p artifacts; q=artifacts/jobs; rm -rf $$q; mkdir -p $$q/queue $$q/taken; \
	echo "$(GO) test $(TEST_FLAGS) -run '$(HTTP_NORACE_TESTS)' ./http/" >$$q/queue/1-http-on-redis; \
	echo "$(GO) test $(TEST_FLAGS) -run '^($(REDIS_NORACE_TESTS))\$$' ./redis/" >$$q/queue/6-redis-norace; \
	n=1; for shard in $(foreach s,$(CLUSTER_SHARDS),'$(s)'); do n=$$((n+1)); \
		echo "$(GO) test $(TEST_FLAGS) -run '^TestCluster($$shard)\$$' ./redis/" >$$q/queue/$$n-cluster; done; \
	echo "$(GO) test $(TEST_FLAGS) -run '^TestCluster' -skip '^TestCluster($(subst $(space),|,$(strip $(CLUSTER_SHARDS))))\$$' ./redis/" >$$q/queue/9-cluster-rest; \
	lane() { for job in $$(ls $$q/queue); do \
		mv $$q/queue/$$job $$q/taken/ 2>/dev/null || continue; \
		sh $$q/taken/$$job >$$q/taken/$$job.log 2>&1; echo $$? >$$q/taken/$$job.rc; done; }; \
	rm -rf artifacts/fuzzcache; nice -n 19 $(MAKE) --no-print-directory fuzz FUZZCACHE=$(CURDIR)/artifacts/fuzzcache >artifacts/fuzz.log 2>&1 & fuzz=$$!; \
	echo "$(GO) test -race $(TEST_FLAGS) ..., the Redis store's beside them (artifacts/redis.log), then its cluster tests and HTTP's over Redis without -race ($$q), and make fuzz"; \
	( $(GO) test -race $(TEST_FLAGS) -skip '^TestCluster|^($(REDIS_NORACE_TESTS))$$' ./redis/ >artifacts/redis.log 2>&1; echo $$? >$$q/redis.rc; lane ) & redis=$$!; \
	$(GO) test -race $(TEST_FLAGS) -skip '$(HTTP_NORACE_TESTS)' $(TEST_PACKAGES); tested=$$?; \
	lane; wait $$redis; \
	cat artifacts/redis.log; redised=$$(cat $$q/redis.rc); \
	for job in $$(ls $$q/taken | grep -v '\.'); do cat $$q/taken/$$job.log; \
		[ "$$(cat $$q/taken/$$job.rc)" = 0 ] || { echo "failed: $$(cat $$q/taken/$$job) ($$q/taken/$$job.log)"; tested=1; }; done; \
	[ -z "$$(ls $$q/queue)" ] || { echo "never run: $$(ls $$q/queue)"; tested=1; }; \
	wait $$fuzz; fuzzed=$$?; \
	cat artifacts/fuzz.log; \
	[ $$redised -eq 0 ] || echo "the Redis store's tests failed (artifacts/redis.log)"; \
	[ $$fuzzed -eq 0 ] || echo "make fuzz failed (artifacts/fuzz.log)"; \
	[ $$tested -eq 0 ] && [ $$redised -eq 0 ] && [ $$fuzzed -eq 0 ]

# Each package's fuzzing binary is built once (go test -c -fuzz) and runs
# each of its targets from the package's directory, where its corpus is:
# eleven builds of instrumented binaries cost more than the fuzzing did.
# The tag fuzzsmoke leaves out two test files that import the stores
# (group_test.go, internal/directory/feed_test.go): with them, the root's
# and internal/directory's fuzzing binaries compiled the stores' packages
# again as test variants, 19 of the builds' 61 CPU-s on a fresh clone
# (2026-12-06).
fuzz:
	@mkdir -p artifacts/fuzz; built=; cache=$(FUZZCACHE); \
	for t in $(FUZZ_TARGETS); do \
		pkg=$${t%%:*}; rest=$${t#*:}; name=$${rest%%:*}; budget=$${rest#*:}; \
		[ -n "$(FUZZTIME)" ] && budget=$(FUZZTIME); \
		bin=$(CURDIR)/artifacts/fuzz/$$(echo "$$pkg" | tr './' '__').test; \
		case " $$built " in *" $$pkg "*) ;; *) \
			$(GO) test -c $(LDFLAGS) -tags fuzzsmoke -fuzz . -o $$bin $$pkg || exit 1; built="$$built $$pkg";; \
		esac; \
		echo "fuzz $$name ($$pkg) for $$budget"; \
		(cd $$pkg && $$bin -test.run '^$$' -test.fuzz "^$$name\$$" -test.fuzztime $$budget \
			-test.fuzzcachedir "$${cache:-$$($(GO) env GOCACHE)/fuzz}/$$($(GO) list -f '{{.ImportPath}}' .)") || exit 1; \
	done

# The Redis store's tests start their own redis-server (the Redis
# protocol's tests drive redis-cli too, and compare FT.SEARCH with the
# RediSearch module's), the PostgreSQL
# projection's their own postgres (internal/pgtest), the console's test
# drives a headless chromium, and the README's HTTP walk runs its curl
# commands (http/readme_walk_test.go): all are Debian's packages.
deps:
	@missing=; \
	command -v redis-server >/dev/null 2>&1 || missing="$$missing redis-server"; \
	command -v redis-cli >/dev/null 2>&1 || missing="$$missing redis-tools"; \
	[ -e /usr/lib/redis/modules/redisearch.so ] || missing="$$missing redis-redisearch"; \
	command -v chromium >/dev/null 2>&1 || missing="$$missing chromium"; \
	command -v curl >/dev/null 2>&1 || missing="$$missing curl"; \
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
