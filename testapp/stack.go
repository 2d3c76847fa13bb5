package testapp

import (
	"context"
	"fmt"
	"net/http"
	"time"

	"github.com/failsafe-go/failsafe-go/adaptivelimiter"
	"github.com/failsafe-go/failsafe-go/failsafehttp"
	"github.com/open-feature/go-sdk/openfeature"

	"github.com/brownout/brownout/dimmer"
	"github.com/brownout/brownout/provider"
	"github.com/brownout/brownout/shed"
	"github.com/brownout/brownout/signals"
)

// Embedded is the README's embedded stack around app: the snippet under
// "Embedded mode, end to end", verbatim between the markers below
// (TestReadmeSnippet keeps the two equal), with the package defaults — what
// a new user gets.
func Embedded(ctx context.Context, app http.Handler) (http.Handler, *dimmer.Controller, *shed.Shedder) {
	// README:embedded
	rec := signals.NewRecorder(signals.Config{Latency: signals.WindowConfig{Slices: 5}})
	ctl, _ := dimmer.New(dimmer.Config{
		Targets: []dimmer.Target{
			{Signal: signals.LatencyP99, Target: 0.3},
			{Signal: signals.RejectRatio, Target: 0.01, DimOnly: true},
		},
		Features: []dimmer.Feature{{Name: "recommendations"}, {Name: "reviews", Rank: 1}},
	})
	go ctl.Run(ctx, dimmer.Local(rec))
	p, _ := provider.New(ctl, provider.Options{})
	openfeature.SetProviderAndWait(p)
	// TrustPriority believes the callers' X-Priority: only where they are your own services.
	s, _ := shed.New(shed.Config{Recorder: rec, ShedLevel: ctl.ShedLevel, TrustPriority: true})
	handler := s.Middleware(app) // app asks flags per user; http.ListenAndServe(addr, handler)
	// README:end
	return handler, ctl, s
}

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
		h, ctl, s := Embedded(ctx, app)
		if stack == ShedOnly {
			ctl.Freeze("shedding alone: the control run")
		}
		return &Protected{Handler: h, App: app, Controller: ctl, Shedder: s}, nil
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
