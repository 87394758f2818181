package natsqueue

import (
	"testing"

	"github.com/genq/genq/internal/genq"
)

func TestParseTenantSubject(t *testing.T) {
	tests := []struct {
		name    string
		subject string
		variant genq.Variant
		token   string
		ok      bool
	}{
		{"interactive", TenantSubject(Interactive, "A", "acme"), "A", workerToken("acme"), true},
		{"batch", TenantSubject(Batch, "B", "acme"), "B", workerToken("acme"), true},
		{"a worker's subject", Interactive.Subject("A") + ".w1", "", "", false},
		{"the shared subject", Interactive.Subject("A"), "", "", false},
		{"another token", Interactive.Subject("A") + ".x.acme", "", "", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v, token, ok := parseTenantSubject(tt.subject)
			if v != tt.variant || token != tt.token || ok != tt.ok {
				t.Errorf("parseTenantSubject(%q) = %q, %q, %v; want %q, %q, %v", tt.subject, v, token, ok, tt.variant, tt.token, tt.ok)
			}
		})
	}
}
