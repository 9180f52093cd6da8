package grammar

import (
	"context"
	"errors"
	"fmt"
)

// Budget bounds one compile (ParseBudget, SchemaToGrammarBudget): at most
// Steps units of work, and Ctx, when set, cancels it. A unit is a grammar
// element parsed or a subschema converted; a compile's time is linear in
// them. The zero Budget is DefaultSteps and no cancellation.
type Budget struct {
	Ctx   context.Context
	Steps int
}

// DefaultSteps is the work a Budget with Steps 0 allows: a grammar of a
// few hundred thousand elements, well beyond any schema or GBNF a client
// needs, compiled in well under a second.
const DefaultSteps = 400000

// ErrBudget is wrapped by the error of a compile that ran out of its
// Budget's steps.
var ErrBudget = errors.New("grammar: too much work to compile")

// work follows a Budget during one compile.
type work struct {
	ctx   context.Context
	limit int
	spent int
	err   error
}

func (b Budget) start() *work {
	w := &work{ctx: b.Ctx, limit: b.Steps}
	if w.limit <= 0 {
		w.limit = DefaultSteps
	}
	return w
}

// spend records n units of work and returns an error once the budget is
// exhausted or its context is done (checked every 1024 units and at the
// end of each phase through done).
func (w *work) spend(n int) error {
	if w.err != nil {
		return w.err
	}
	before := w.spent
	w.spent += n
	if w.spent > w.limit {
		w.err = fmt.Errorf("%w: more than %d steps (elements and subschemas); simplify it", ErrBudget, w.limit)
		return w.err
	}
	if before>>10 != w.spent>>10 {
		return w.done()
	}
	return nil
}

// done returns the context's error, if any, as the compile's.
func (w *work) done() error {
	if w.err == nil && w.ctx != nil {
		if err := w.ctx.Err(); err != nil {
			w.err = fmt.Errorf("grammar: compile cancelled: %w", err)
		}
	}
	return w.err
}
