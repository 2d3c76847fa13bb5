package main

import (
	"fmt"
	"path/filepath"
	"regexp"

	"github.com/brownout/brownout/internal/service"
)

// maxServices bounds services:. Each service costs its controller, its
// source (a push source keeps up to its max_instances instances) and 15
// minutes of per-tick history (about 1 MB at a 1 s tick); the scale
// benchmark runs 20 (BenchmarkServicesScale).
const maxServices = 100

// promSelector is what sources.promql.selector takes: label matchers,
// comma-separated, each a label name, an operator and a double-quoted
// value, as PromQL writes them inside braces.
var promSelector = regexp.MustCompile(`^\s*[A-Za-z_][A-Za-z0-9_]*\s*(=|!=|=~|!~)\s*"(?:[^"\\\n]|\\.)*"\s*(,\s*[A-Za-z_][A-Za-z0-9_]*\s*(=|!=|=~|!~)\s*"(?:[^"\\\n]|\\.)*"\s*)*,?\s*$`)

// resolveServices resolves a file with services:. At its top level only
// the daemon's settings are taken (listen, max_conns_per_client,
// max_conns, max_streams — the daemon's cap of streams, every service's
// counted together —, state_dir, tls, cors_origins) and tick and auth,
// which a service
// inherits when it leaves them out; a service's controller, source and
// features are its own, so that the top level's are errors there.
func resolveServices(fc *fileConfig, c *config, at func(path, format string, a ...any)) {
	for field, set := range map[string]bool{
		"law": fc.Law != (lawConfig{}), "targets": len(fc.Targets) > 0, "features": len(fc.Features) > 0,
		"segments": len(fc.Segments) > 0, "schedule": len(fc.Schedule) > 0,
		"sources": fc.Sources.Push != nil || fc.Sources.Scrape != nil || fc.Sources.PromQL != nil,
	} {
		if set {
			at(field, "with services:, each service has its own (services[].%s); the top level takes only the daemon's settings, tick and auth", field)
		}
	}
	top := resolveService("", &serviceFields{Tick: fc.Tick, Auth: fc.Auth}, "", at)
	top.Push = nil // the top level has no source of its own
	c.serviceConfig = *top
	if len(fc.Services) > maxServices {
		at("services", "%d services: at most %d", len(fc.Services), maxServices)
	}
	seen := map[string]bool{}
	for i, sc := range fc.Services {
		p := fmt.Sprintf("services[%d].", i)
		if err := service.Check(sc.Name); err != nil {
			at(p+"name", "%v", err)
		} else if seen[sc.Name] {
			at(p+"name", "%q: declared twice", sc.Name)
		}
		seen[sc.Name] = true
		c.Services = append(c.Services, resolveService(sc.Name, &sc.serviceFields, p, at))
	}
}

// inherit gives each service what it left out of the top level's: the
// tick and each kind of token file. Settings calls it after the flags
// and the environment set the top level's.
func (c *config) inherit() {
	for _, s := range c.Services {
		if s.Dimmer.Tick == 0 {
			s.Dimmer.Tick = c.Dimmer.Tick
		}
		for _, f := range []struct{ dst, src *string }{
			{&s.Auth.OperatorTokensFile, &c.Auth.OperatorTokensFile},
			{&s.Auth.EvalTokensFile, &c.Auth.EvalTokensFile},
			{&s.Auth.PushTokensFile, &c.Auth.PushTokensFile},
		} {
			if *f.dst == "" {
				*f.dst = *f.src
			}
		}
	}
}

// stateDir is where a service keeps its operators' state: the daemon's
// own for the one service of a file without services:, else a directory
// of its own under it, locked by it alone; none without the daemon's.
func (c *config) stateDir(s *serviceConfig) string {
	if s.Name == "" || c.StateDir == "" {
		return c.StateDir
	}
	return filepath.Join(c.StateDir, "services", s.Name)
}

// readServiceTokens reads each service's token files, with what it
// inherited.
func (c *config) readServiceTokens() error {
	for _, s := range c.Services {
		var err error
		for _, t := range []struct {
			file string
			dst  *map[string]string
		}{
			{s.Auth.OperatorTokensFile, &s.OperatorTokens},
			{s.Auth.EvalTokensFile, &s.EvalTokens},
			{s.Auth.PushTokensFile, &s.PushTokens},
		} {
			if *t.dst, err = readTokens(t.file); err != nil {
				return fmt.Errorf("service %s: %w", s.Name, err)
			}
		}
	}
	return nil
}

// units lists the services to run: the file's services:, or the one.
func (c *config) units() []*serviceConfig {
	if len(c.Services) > 0 {
		return c.Services
	}
	return []*serviceConfig{&c.serviceConfig}
}

// serviceNote names a service in a message: "" for the one service.
func serviceNote(s *serviceConfig) string {
	if s.Name == "" {
		return ""
	}
	return " of service " + s.Name
}

// serviceTag prefixes an error of a service with its name: "" for the
// one service.
func serviceTag(s *serviceConfig) string {
	if s.Name == "" {
		return ""
	}
	return "service " + s.Name + ": "
}
