# `make test` is the one command that runs every test; .ci/run calls it.
# `make run` serves the embedded store on 127.0.0.1:8080.

GO ?= go

FUZZTIME ?= 10s
# package:target for every fuzz target; each runs for FUZZTIME in `make test`.
FUZZ_TARGETS = .:FuzzCanonicalEmail .:FuzzProfileValueUTF8 .:FuzzParseProfileJSON \
	./internal/directory:FuzzDecodeCursor

.PHONY: test run build lint fuzz

test: lint
	$(GO) test -race -count=1 -timeout 15m ./...
	$(MAKE) --no-print-directory fuzz

fuzz:
	@for t in $(FUZZ_TARGETS); do \
		pkg=$${t%%:*}; name=$${t#*:}; \
		echo "fuzz $$name ($$pkg) for $(FUZZTIME)"; \
		$(GO) test -run '^$$' -fuzz "^$$name\$$" -fuzztime $(FUZZTIME) $$pkg || exit 1; \
	done

lint:
	@unformatted="$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go'))"; \
	if [ -n "$$unformatted" ]; then echo "gofmt would change:"; echo "$$unformatted"; exit 1; fi
	$(GO) vet ./...

run:
	$(GO) run ./cmd/partmap serve

build:
	$(GO) build -o partmap ./cmd/partmap
