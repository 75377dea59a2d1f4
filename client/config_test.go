package client

import (
	"errors"
	"strings"
	"testing"
	"time"
)

func TestNewRefusesInvalidConfig(t *testing.T) {
	for name, cfg := range map[string]Config{
		"negative per-route":            {MaxConnsPerRoute: -1},
		"negative total":                {MaxConnsTotal: -1},
		"negative concurrency":          {MaxConcurrentRequests: -5},
		"negative lease timeout":        {LeaseTimeout: -time.Second},
		"negative idle time":            {MaxIdleTime: -1},
		"negative lifetime":             {MaxLifetime: -1},
		"negative dial timeout":         {DialTimeout: -1},
		"negative header limit":         {MaxResponseHeaderBytes: -1},
		"per-route above total":         {MaxConnsPerRoute: 10, MaxConnsTotal: 5},
		"per-route above default total": {MaxConnsPerRoute: 100},
		"DNSRefresh below -1":           {DNSRefresh: -2},
	} {
		c, err := New(cfg)
		if err == nil {
			c.Close()
			t.Errorf("%s: accepted", name)
			continue
		}
		if !errors.Is(err, ErrInvalidConfig) {
			t.Errorf("%s: %v does not wrap ErrInvalidConfig", name, err)
		}
	}
	c, err := New(Config{MaxConnsTotal: 4})
	if err != nil {
		t.Fatalf("small total: %v", err)
	}
	defer c.Close()
	if c.cfg.MaxConnsPerRoute != 4 || c.cfg.MaxConcurrentRequests != DefaultMaxConcurrentRequests ||
		c.cfg.DNSRefresh != DefaultDNSRefresh {
		t.Fatalf("defaults: %+v", c.cfg)
	}
}

// Config.Outlier refuses values out of range, naming the field, and fills
// its defaults in a copy: the caller's policy is left as it was.
func TestOutlierPolicyIsValidatedAndFilledInACopy(t *testing.T) {
	for name, p := range map[string]OutlierPolicy{
		"ConsecutiveFailures": {ConsecutiveFailures: -1},
		"MaxEjectedPercent":   {MaxEjectedPercent: 101},
	} {
		_, err := Config{Outlier: &p}.withDefaults()
		if !errors.Is(err, ErrInvalidConfig) || !strings.Contains(err.Error(), name) {
			t.Errorf("%+v: %v, want ErrInvalidConfig naming %s", p, err, name)
		}
	}
	mine := &OutlierPolicy{MaxEjectedPercent: 20}
	cfg, err := Config{Outlier: mine}.withDefaults()
	if err != nil {
		t.Fatal(err)
	}
	if *cfg.Outlier != (OutlierPolicy{ConsecutiveFailures: 5, MaxEjectedPercent: 20}) || *mine != (OutlierPolicy{MaxEjectedPercent: 20}) {
		t.Fatalf("filled %+v, caller's %+v: want the default run of 5 in a copy", *cfg.Outlier, *mine)
	}
}
