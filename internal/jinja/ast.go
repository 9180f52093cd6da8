package jinja

// node is a statement of the template body.
type node interface{ nodePos() int }

// expr is an expression.
type expr interface{ exprPos() int }

type (
	textNode struct {
		pos  int
		text string
	}
	outputNode struct {
		pos int
		x   expr
	}
	ifNode struct {
		pos   int
		conds []expr
		bodys [][]node
		els   []node
	}
	forNode struct {
		pos       int
		targets   []string // one name, or several to unpack
		iter      expr
		filter    expr // nil when none
		body, els []node
		recursive bool
	}
	setNode struct {
		pos     int
		targets []string // one name, or several to unpack
		attr    string   // set ns.attr = ...: targets[0] is ns
		x       expr
	}
	setBlockNode struct {
		pos     int
		name    string
		filters []*filterExpr // applied to the body, x unused
		body    []node
	}
	macroNode struct {
		pos    int
		name   string
		params []param
		body   []node
	}
	callBlockNode struct {
		pos    int
		params []param
		call   *callExpr
		body   []node
	}
	filterBlockNode struct {
		pos     int
		filters []*filterExpr
		body    []node
	}
	withNode struct {
		pos   int
		names []string
		vals  []expr
		body  []node
	}
	doNode struct {
		pos int
		x   expr
	}
	breakNode    struct{ pos int }
	continueNode struct{ pos int }
)

// param is a macro parameter with its default (nil: required).
type param struct {
	name string
	def  expr
}

func (n *textNode) nodePos() int        { return n.pos }
func (n *outputNode) nodePos() int      { return n.pos }
func (n *ifNode) nodePos() int          { return n.pos }
func (n *forNode) nodePos() int         { return n.pos }
func (n *setNode) nodePos() int         { return n.pos }
func (n *setBlockNode) nodePos() int    { return n.pos }
func (n *macroNode) nodePos() int       { return n.pos }
func (n *callBlockNode) nodePos() int   { return n.pos }
func (n *filterBlockNode) nodePos() int { return n.pos }
func (n *withNode) nodePos() int        { return n.pos }
func (n *doNode) nodePos() int          { return n.pos }
func (n *breakNode) nodePos() int       { return n.pos }
func (n *continueNode) nodePos() int    { return n.pos }

type (
	constExpr struct {
		pos int
		v   any
	}
	nameExpr struct {
		pos  int
		name string
	}
	listExpr struct {
		pos   int
		items []expr
		tuple bool
	}
	dictExpr struct {
		pos        int
		keys, vals []expr
	}
	attrExpr struct {
		pos  int
		x    expr
		name string
	}
	indexExpr struct {
		pos   int
		x     expr
		index expr
	}
	sliceExpr struct {
		pos               int
		x                 expr
		start, stop, step expr // nil when absent
	}
	callExpr struct {
		pos    int
		fn     expr
		args   []expr
		kwargs []kwarg
	}
	filterExpr struct {
		pos    int
		x      expr // nil inside filter blocks and set blocks
		name   string
		args   []expr
		kwargs []kwarg
	}
	testExpr struct {
		pos    int
		x      expr
		name   string
		args   []expr
		negate bool
	}
	unaryExpr struct {
		pos int
		op  string
		x   expr
	}
	binaryExpr struct {
		pos  int
		op   string
		l, r expr
	}
	condExpr struct {
		pos             int
		cond, then, els expr // els nil: undefined
	}
)

// kwarg is a keyword argument of a call or filter.
type kwarg struct {
	name string
	x    expr
}

func (e *constExpr) exprPos() int  { return e.pos }
func (e *nameExpr) exprPos() int   { return e.pos }
func (e *listExpr) exprPos() int   { return e.pos }
func (e *dictExpr) exprPos() int   { return e.pos }
func (e *attrExpr) exprPos() int   { return e.pos }
func (e *indexExpr) exprPos() int  { return e.pos }
func (e *sliceExpr) exprPos() int  { return e.pos }
func (e *callExpr) exprPos() int   { return e.pos }
func (e *filterExpr) exprPos() int { return e.pos }
func (e *testExpr) exprPos() int   { return e.pos }
func (e *unaryExpr) exprPos() int  { return e.pos }
func (e *binaryExpr) exprPos() int { return e.pos }
func (e *condExpr) exprPos() int   { return e.pos }
