package testapp

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/failsafe-go/failsafe-go/adaptivelimiter"
	"github.com/failsafe-go/failsafe-go/failsafehttp"
	"github.com/open-feature/go-sdk/openfeature"

	"github.com/brownout/brownout"
	"github.com/brownout/brownout/dimmer"
	"github.com/brownout/brownout/provider"
	"github.com/brownout/brownout/shed"
	"github.com/brownout/brownout/signals"
)

// Embedded is the README's embedded stack around app (serve, below), with
// the package defaults — what a new user gets: the same options and calls,
// returning the handler (and the Brownout, which the harness closes)
// instead of serving it. TestReadmeSnippet keeps serve and the README's
// snippet equal, and Embedded's calls serve's.
func Embedded(ctx context.Context, app http.Handler) (http.Handler, *brownout.Brownout, error) {
	// README:calls
	b, err := brownout.New(brownout.Options{
		Features: []brownout.Feature{{Name: "recommendations"}, {Name: "reviews", Rank: 1}},
		// Believe the callers' X-Priority: only where they are your own services.
		TrustPriority: true,
	})
	// README:calls-end
	if err != nil {
		return nil, nil, err
	}
	go b.Run(ctx) // the control loop, until ctx ends
	if err := b.RegisterProvider(); err != nil {
		return nil, nil, err
	}
	return b.Middleware(app), b, nil
}

// serve is the README's snippet under "Protect a handler", verbatim
// between the markers (TestReadmeSnippet): compiled here, so that the
// README's code builds against the package as it is.
//
// README:embedded
func serve(ctx context.Context, addr string, app http.Handler) error {
	b, err := brownout.New(brownout.Options{
		Features: []brownout.Feature{{Name: "recommendations"}, {Name: "reviews", Rank: 1}},
		// Believe the callers' X-Priority: only where they are your own services.
		TrustPriority: true,
	})
	if err != nil {
		return err
	}
	defer b.Close()
	go b.Run(ctx) // the control loop, until ctx ends
	if err := b.RegisterProvider(); err != nil {
		return err
	}
	// app asks the flags per user (b.Client(), or openfeature.NewClient("")).
	return http.ListenAndServe(addr, b.Middleware(app))
}

// README:end

var _ = serve // (the README's; the harness runs Embedded)

// Stack is the protection in front of the app.
type Stack string

const (
	// Unprotected: the app alone, every part on.
	Unprotected Stack = "none"
	// ShedOnly: the embedded stack with the controller frozen at full
	// brightness — shedding alone.
	ShedOnly Stack = "shed"
	// Brownout: the embedded stack.
	Brownout Stack = "brownout"
	// Failsafe: failsafe-go's adaptive limiter as HTTP middleware, queueing
	// on, with our controller dimming behind it (the peer we compare with).
	Failsafe Stack = "failsafe"
)

// Stacks lists the stacks, weakest first.
func Stacks() []Stack { return []Stack{Unprotected, ShedOnly, Failsafe, Brownout} }

// ParseStack parses a stack name.
func ParseStack(s string) (Stack, error) {
	for _, k := range Stacks() {
		if string(k) == s {
			return k, nil
		}
	}
	return "", fmt.Errorf("testapp: unknown stack %q (known: none, shed, failsafe, brownout)", s)
}

// Protected is an app behind a stack.
type Protected struct {
	Handler http.Handler
	App     *App
	// Controller and Shedder are nil where the stack has none.
	Controller *dimmer.Controller
	Shedder    *shed.Shedder
	// Limiter is failsafe-go's, for the Failsafe stack.
	Limiter adaptivelimiter.AdaptiveLimiter[*http.Response]
}

// Build puts cfg's app behind stack. The app asks OpenFeature for its
// optional parts per user (X-User-ID) wherever a controller runs.
func Build(ctx context.Context, cfg Config, stack Stack) (*Protected, error) {
	if stack != Unprotected {
		flags := openfeature.NewClient("testapp")
		cfg.Flag = func(ctx context.Context, part, user string) bool {
			on, _ := flags.BooleanValue(ctx, part, true, openfeature.NewEvaluationContext(user, nil))
			return on
		}
	}
	app := New(cfg)
	switch stack {
	case Unprotected:
		return &Protected{Handler: app, App: app}, nil
	case ShedOnly, Brownout:
		h, b, err := Embedded(ctx, app)
		if err != nil {
			return nil, err
		}
		if stack == ShedOnly {
			b.Controller().Freeze("shedding alone: the control run")
		}
		if err := setPriors(b.Controller(), cfg.Priors); err != nil {
			return nil, err
		}
		return &Protected{Handler: h, App: app, Controller: b.Controller(), Shedder: b.Shedder()}, nil
	case Failsafe:
		// The same controller, fed by signals.Middleware around failsafe's
		// handler, so that its refusals (429) count in reject.ratio.
		rec := signals.NewRecorder(signals.Config{Latency: signals.WindowConfig{Slices: 5}})
		ctl, err := dimmer.New(dimmer.Config{
			Targets: []dimmer.Target{
				{Signal: signals.LatencyP99, Target: 0.3},
				{Signal: signals.RejectRatio, Target: 0.01, DimOnly: true},
			},
			Features: []dimmer.Feature{{Name: "recommendations"}, {Name: "reviews", Rank: 1}},
		})
		if err != nil {
			return nil, err
		}
		if err := setPriors(ctl, cfg.Priors); err != nil {
			return nil, err
		}
		go ctl.Run(ctx, dimmer.Local(rec))
		p, err := provider.New(ctl, provider.Options{})
		if err != nil {
			return nil, err
		}
		if err := openfeature.SetProviderAndWait(p); err != nil {
			return nil, err
		}
		lim := adaptivelimiter.NewBuilder[*http.Response]().WithQueueing(2, 3).WithMaxWaitTime(time.Second).Build()
		inner := failsafehttp.NewHandler(app, lim)
		refused := func(status int, _ http.Header) (signals.Reason, bool) {
			return signals.ReasonConcurrency, status == http.StatusTooManyRequests || status == http.StatusServiceUnavailable
		}
		h := signals.Middleware(rec, signals.MiddlewareConfig{Refused: refused, TrustPriority: true})(inner)
		return &Protected{Handler: h, App: app, Controller: ctl, Limiter: lim}, nil
	}
	return nil, fmt.Errorf("testapp: unknown stack %q", stack)
}

// setPriors sets ctl's features' configured costs (priors, by name).
func setPriors(ctl *dimmer.Controller, priors map[string]float64) error {
	if len(priors) == 0 {
		return nil
	}
	dc := ctl.Config()
	dc.Features = slices.Clone(dc.Features)
	for name, v := range priors {
		i := slices.IndexFunc(dc.Features, func(f dimmer.Feature) bool { return f.Name == name })
		if i < 0 {
			var names []string
			for _, f := range dc.Features {
				names = append(names, f.Name)
			}
			return fmt.Errorf("testapp: prior for %q: the stack has no such feature (it has %s)", name, strings.Join(names, ", "))
		}
		dc.Features[i].Cost = v
	}
	return ctl.Reconfigure(dc)
}
