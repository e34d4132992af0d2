# `make test` is the one command that runs every test; .ci/run calls it.
# `make run` serves the embedded store on 127.0.0.1:8080.

GO ?= go

.PHONY: test run build lint

test: lint
	$(GO) test -race -count=1 -timeout 15m ./...

lint:
	@unformatted="$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go'))"; \
	if [ -n "$$unformatted" ]; then echo "gofmt would change:"; echo "$$unformatted"; exit 1; fi
	$(GO) vet ./...

run:
	$(GO) run ./cmd/partmap serve

build:
	$(GO) build -o partmap ./cmd/partmap
