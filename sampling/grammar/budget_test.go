package grammar

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
)

// TestBudget: a compile stops with ErrBudget past its steps and with the
// context's error once its context is done, for GBNF, schemas and tool
// grammars alike; within the budget the same input compiles.
func TestBudget(t *testing.T) {
	// 2,000 rules in sequence, two alternatives each.
	var refs, rules []string
	for i := range 2000 {
		refs = append(refs, fmt.Sprint("r", i))
		rules = append(rules, fmt.Sprintf("r%d ::= \"a\" | \"b\"", i))
	}
	gbnf := "root ::= " + strings.Join(refs, " ") + "\n" + strings.Join(rules, "\n") + "\n"
	var props []string
	for i := range 500 {
		props = append(props, fmt.Sprintf(`"k%d":{"type":"string"}`, i))
	}
	schema := []byte(`{"type":"object","properties":{` + strings.Join(props, ",") + `}}`)
	tool := []ToolFunction{{Name: "f", Parameters: schema}}
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	compile := map[string]func(Budget) error{
		"gbnf":   func(b Budget) error { _, err := ParseBudget(gbnf, "", b); return err },
		"schema": func(b Budget) error { _, err := SchemaToGrammarBudget(schema, b); return err },
		"tools": func(b Budget) error {
			_, err := ToolCallGrammar(tool, ToolCallOptions{Format: ToolFormatHermes, Budget: b})
			return err
		},
	}
	for name, f := range compile {
		t.Run(name, func(t *testing.T) {
			if err := f(Budget{}); err != nil {
				t.Fatalf("default budget: %v", err)
			}
			if err := f(Budget{Steps: 1000}); !errors.Is(err, ErrBudget) {
				t.Errorf("1000 steps: %v, want ErrBudget", err)
			}
			if err := f(Budget{Ctx: cancelled}); !errors.Is(err, context.Canceled) {
				t.Errorf("cancelled context: %v, want context.Canceled", err)
			}
		})
	}
}
