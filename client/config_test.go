package client

import (
	"errors"
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
