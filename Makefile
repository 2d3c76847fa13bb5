# brownout — dimmer, not dark. `make help` lists the targets.

GO        ?= go
PKGS      := ./...
FUZZTIME  ?= 10s
BENCHTIME ?= 1s
BIN       := bin

.PHONY: help build test e2e bench fuzz lint demo soak soak-shop clean

help: ## list the targets
	@grep -E '^[a-z0-9-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-8s %s\n", $$1, $$2}'

build: ## build the commands into bin/
	$(GO) build -o $(BIN)/ ./cmd/...

# Timing-sensitive and single-threaded tests skip under -race; they run on
# their own without it: on real HTTP one package at a time (the test app's
# orderings, the shop's sale, the fleet; the dial in a headless chromium),
# and the lab's packages whole (virtual time: their figures do not depend
# on the machine) in parallel. internal/race's test fails when a test
# skips under -race and no step here runs it.
NORACE := ./testapp ./shop/... ./e2e
LAB    := ./dimmer ./sim ./internal/gate ./cmd/brownout-lab
# Heap bounds under hostile input (TestHeap…, and the hostile clients'
# floods against brownoutd and the shop) and allocation counts skip under
# -race, whose allocations blur the figures; they run here without it,
# with the largest state a follower must take (~20 MB of JSON, whose
# encoding the race detector only slows). (The hostile clients' attacks
# run in the race step, under the same bounds.)
HEAP   := ./signals/fleet ./shed ./signals ./api ./provider
HOSTILE := ./cmd/brownoutd ./cmd/shop-demo
# Packages tested at once under -race. Many of them wait on real servers
# (PostgreSQL, Prometheus, Redis, sockets) for much of their run: with
# go test's default of one per core, a two-core machine left a third of
# its CPU idle; four at once keep both busy (there the step took 235 s
# instead of 304 s).
RACE_P ?= 4
SOAK   ?= 15m
SOAK_SHOP ?= 20m
SOAK_SHOP_TIMEOUT ?= 90m
DIAL   ?= 127.0.0.1:8090

test: ## vet, every test with the race detector, then the lab and real-HTTP tests without it
	$(GO) vet $(PKGS)
	$(GO) vet -tags brownout_procpin ./signals
	$(GO) test -race -count=1 -p $(RACE_P) $(PKGS)
	$(GO) test -race -count=1 -tags brownout_procpin ./signals
	$(GO) test -p 1 -count=1 -run 'RealHTTP|SaleOrdering|Fleet|Dashboard' $(NORACE)
	$(GO) test -p 1 -count=1 -run '^TestHeap|Allocs$$|^TestWrittenEventsAreNotKept$$|^TestRemoteAcceptsTheLargestValidState$$' $(HEAP)
	$(GO) test -p 1 -count=1 -run '^TestHostileClients$$/^floods$$' $(HOSTILE)
	$(GO) test -count=1 $(LAB)
	$(GO) test -count=1 -run '^TestDial|^TestServiceTicks' ./cmd/brownoutd

e2e: ## the real-HTTP harness on its defaults (brownout-lab real), one stack after another
	@for s in none shed failsafe brownout; do $(GO) run ./cmd/brownout-lab real --quiet --stack $$s || exit 1; done

bench: ## run the benchmarks (BENCHTIME=1s); anchors run beside ours
	$(GO) test -run '^$$' -bench . -benchmem -benchtime $(BENCHTIME) $(PKGS)

fuzz: ## run every fuzz target for FUZZTIME (default 10s) each
	@set -e; for pkg in $$($(GO) list $(PKGS)); do \
	  for f in $$($(GO) test -list '^Fuzz' $$pkg | grep '^Fuzz' || true); do \
	    echo "== $$pkg $$f"; $(GO) test $$pkg -run '^$$' -fuzz "^$$f$$" -fuzztime $(FUZZTIME) -fuzzminimizetime 2s; \
	  done; \
	done

lint: ## gofmt check, go vet and staticcheck (pinned)
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	$(GO) vet $(PKGS)
	$(GO) run honnef.co/go/tools/cmd/staticcheck@v0.8.2 $(PKGS)

demo: ## the 11.11 sale: unprotected, shedding only, brownout (a fresh shop each); the dial follows the brownout run at DIAL (127.0.0.1:8090)/dial/
	@$(GO) run ./cmd/shop-demo sale --compare --quiet --dial $(DIAL)

soak: ## the dial live in headless chromium for SOAK (default 15m) at one update a second; its heap must stay flat
	BROWNOUT_SOAK=$(SOAK) $(GO) test -count=1 -run '^TestDialSoak$$' -timeout 30m -v ./cmd/brownoutd

soak-shop: ## the sale's traffic at 2× the shop's all-off capacity for SOAK_SHOP (default 20m), on SQLite then PostgreSQL, dependencies in their own process: heap and goroutines must hold from minute 5, every order on one live charge, every SMS delivered once, nothing queued
	SOAK_SHOP=$(SOAK_SHOP) $(GO) test -count=1 -run '^TestShopSoak$$' -timeout $(SOAK_SHOP_TIMEOUT) -v ./cmd/shop-demo

clean: ## remove build output and test caches
	rm -rf $(BIN)
	$(GO) clean -testcache
