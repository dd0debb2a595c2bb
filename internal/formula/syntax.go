package formula

import (
	"go/ast"
	"go/scanner"
	"go/token"
	"strings"
)

// The limits of a formula's text. A formula longer than MaxLen bytes, or
// nested deeper than MaxDepth (parentheses, function calls and signs
// inside one another), is refused with one line before anything is built.
// Chains of operators (a+b+c+…, a*b*c*…, a^b^c^…) are not nesting: a sum
// of 100,000 terms is fine.
const (
	MaxLen   = 1 << 20
	MaxDepth = 1000
)

// syntax reads a formula into a Go expression tree, the tree go/parser
// would make for the same text (Go's operators and their precedence; ^
// is given its place in the language afterwards, by reassociate). Unlike
// go/parser it reads a chain of operators of any length without
// recursing per operator, and it limits nesting to MaxDepth.
type syntax struct {
	f     *Formula
	file  *token.File
	sc    scanner.Scanner
	pos   token.Pos
	tok   token.Token
	lit   string
	depth int
	names map[string]bool // every name the formula uses
	err   *Error          // the first scanning error
	half  token.Token     // the second sign of a -- or ++ read as two (0: none)
	hpos  token.Pos
}

// syntaxBail carries a syntax error out of the parser's recursion.
type syntaxBail struct{ err error }

// parseSyntax reads src (already checked against MaxLen) into f.expr and
// f.names.
func (f *Formula) parseSyntax(src string) (err error) {
	p := &syntax{f: f, names: map[string]bool{}}
	p.file = f.fset.AddFile("", -1, len(src))
	p.sc.Init(p.file, []byte(src), func(pos token.Position, msg string) {
		if p.err == nil {
			p.err = f.errorf(pos.Column, "%s", msg).(*Error)
		}
	}, scanner.ScanComments) // a comment is refused, not skipped (next)
	defer func() {
		if r := recover(); r != nil {
			b, ok := r.(syntaxBail)
			if !ok {
				panic(r)
			}
			err = b.err
		}
	}()
	p.next()
	// Statements separated by ;: each but the last assigns a name,
	// name = expression; the last is the formula's value.
	var lets []*let
	for {
		x := p.expr()
		switch p.tok {
		case token.ASSIGN, token.DEFINE:
			id, ok := x.(*ast.Ident)
			if !ok {
				p.fail(x.Pos(), "only a name can be assigned: name = expression")
			}
			if p.tok == token.DEFINE {
				p.fail(p.pos, "write %s = expression, not :=", id.Name)
			}
			p.next()
			if p.tok == token.SEMICOLON || p.tok == token.EOF {
				p.fail(p.pos, "unexpected %s: expected the expression %s stands for", p.what(), id.Name)
			}
			lets = append(lets, &let{name: id, expr: p.expr()})
			switch {
			case p.tok == token.EOF:
				p.fail(p.pos, "the formula ends with the assignment of %s: its last statement must be the expression it gives", id.Name)
			case p.tok != token.SEMICOLON:
				p.fail(p.pos, "unexpected %s: expected an operator or ; here", p.what())
			}
			p.next()
			if p.tok == token.EOF {
				p.fail(p.pos, "the formula ends with the assignment of %s: its last statement must be the expression it gives", id.Name)
			}
			continue
		case token.SEMICOLON:
			pos := p.pos
			p.next()
			if p.tok != token.EOF { // a ; at the end is allowed
				p.fail(pos, "unexpected ;: only the last statement is an expression, the others assign a name (name = expression)")
			}
		}
		if p.tok != token.EOF {
			p.fail(p.pos, "unexpected %s: expected an operator here", p.what())
		}
		f.expr, f.lets, f.names = x, lets, p.names
		return nil
	}
}

func (p *syntax) next() {
	if p.half != 0 {
		p.pos, p.tok, p.lit, p.half = p.hpos, p.half, "", 0
		return
	}
	for {
		p.pos, p.tok, p.lit = p.sc.Scan()
		if p.err != nil {
			panic(syntaxBail{p.err})
		}
		// Go scans --, ++ and <- as one token; in a formula, as in Python
		// and NumPy, a--b is a - (-b), a++b is a + (+b) and a<-b is
		// a < (-b).
		switch p.tok {
		case token.DEC:
			p.tok, p.half, p.hpos = token.SUB, token.SUB, p.pos+1
		case token.INC:
			p.tok, p.half, p.hpos = token.ADD, token.ADD, p.pos+1
		case token.ARROW:
			p.tok, p.half, p.hpos = token.LSS, token.SUB, p.pos+1
		case token.COMMENT:
			// Go's comments would drop the rest of the formula without a
			// word; a // is most likely Python's floor division.
			if strings.HasPrefix(p.lit, "//") {
				p.fail(p.pos, "// is not an operator here: for Python's floor division write floor(a/b)")
			}
			p.fail(p.pos, "/* is not allowed in a formula: it has no comments")
		}
		// The scanner ends a line that could end a statement with a
		// semicolon; in a formula a line break is a space.
		if p.tok != token.SEMICOLON || p.lit != "\n" {
			return
		}
	}
}

func (p *syntax) fail(pos token.Pos, format string, args ...any) {
	panic(syntaxBail{p.f.errorf(p.file.Position(pos).Column, format, args...)})
}

// what names the current token for a message.
func (p *syntax) what() string {
	switch {
	case p.tok == token.EOF:
		return "end of formula"
	case p.lit != "" && p.tok != token.SEMICOLON:
		return p.lit
	}
	return p.tok.String()
}

// enter and leave count nesting.
func (p *syntax) enter() {
	p.depth++
	if p.depth > MaxDepth {
		p.fail(p.pos, "nested too deeply: more than %d parentheses, function calls and signs inside one another", MaxDepth)
	}
}

func (p *syntax) leave() { p.depth-- }

func (p *syntax) expr() ast.Expr { return p.binary(token.LowestPrec + 1) }

// binary reads operands joined by operators of precedence prec1 or more,
// left to right, as go/parser does: the loop, not recursion, carries a
// chain of operators of one precedence.
func (p *syntax) binary(prec1 int) ast.Expr {
	x := p.unary()
	for {
		prec := p.tok.Precedence()
		if prec < prec1 {
			return x
		}
		op, pos := p.tok, p.pos
		p.next()
		y := p.binary(prec + 1)
		x = &ast.BinaryExpr{X: x, OpPos: pos, Op: op, Y: y}
	}
}

func (p *syntax) unary() ast.Expr {
	switch p.tok {
	case token.ADD, token.SUB, token.NOT, token.XOR, token.AND, token.TILDE, token.ARROW:
		op, pos := p.tok, p.pos
		p.enter()
		p.next()
		x := p.unary()
		p.leave()
		return &ast.UnaryExpr{OpPos: pos, Op: op, X: x}
	case token.MUL:
		pos := p.pos
		p.enter()
		p.next()
		x := p.unary()
		p.leave()
		return &ast.StarExpr{Star: pos, X: x}
	}
	return p.primary()
}

func (p *syntax) primary() ast.Expr {
	var x ast.Expr
	switch p.tok {
	case token.IDENT:
		x = &ast.Ident{NamePos: p.pos, Name: p.lit}
		p.names[p.lit] = true
		p.next()
	case token.INT, token.FLOAT, token.IMAG, token.CHAR, token.STRING:
		x = &ast.BasicLit{ValuePos: p.pos, Kind: p.tok, Value: p.lit}
		p.next()
	case token.LPAREN:
		lp := p.pos
		p.enter()
		p.next()
		e := p.expr()
		rp := p.close("an operator or )")
		p.leave()
		x = &ast.ParenExpr{Lparen: lp, X: e, Rparen: rp}
	default:
		if p.tok.IsKeyword() {
			p.fail(p.pos, "%s is not part of the language (numbers, names, operators and function calls)", p.lit)
		}
		p.fail(p.pos, "expected a number, a name or ( here")
	}
	for {
		switch p.tok {
		case token.LPAREN:
			x = p.call(x)
		case token.LBRACK, token.PERIOD, token.LBRACE:
			p.fail(x.Pos(), "this is not part of the language (numbers, names, operators and function calls)")
		default:
			return x
		}
	}
}

// call reads the arguments of a call of fun, at its (.
func (p *syntax) call(fun ast.Expr) ast.Expr {
	c := &ast.CallExpr{Fun: fun, Lparen: p.pos}
	p.enter()
	p.next()
	for p.tok != token.RPAREN && p.tok != token.EOF {
		c.Args = append(c.Args, p.expr())
		if p.tok == token.ELLIPSIS {
			c.Ellipsis = p.pos
			p.next()
		}
		if p.tok != token.COMMA {
			break
		}
		p.next()
	}
	c.Rparen = p.close("an operator, a comma or )")
	p.leave()
	return c
}

// close reads the ) of a parenthesis or a call.
func (p *syntax) close(expected string) token.Pos {
	if p.tok == token.EOF {
		p.fail(p.pos, "a parenthesis is not closed: missing )")
	}
	if p.tok != token.RPAREN {
		p.fail(p.pos, "unexpected %s: expected %s here", p.what(), expected)
	}
	pos := p.pos
	p.next()
	return pos
}

// tooLong is the error of a formula over MaxLen bytes.
func (f *Formula) tooLong() error {
	return f.errorf(0, "the formula is %d bytes long; at most %d (1 MiB)", len(f.Src), MaxLen)
}
