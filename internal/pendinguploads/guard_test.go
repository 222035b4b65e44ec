//go:build cgo

package pendinguploads

import (
	"context"
	"fmt"
	"go/ast"
	"go/printer"
	"go/token"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"
	pg_query "github.com/pganalyze/pg_query_go/v6"
	"google.golang.org/protobuf/reflect/protoreflect"
)

// The guard's checker: a statement on a workspace's files, read by
// Postgres's own parser (libpg_query), names at each level that reads or
// writes pending_uploads or presigned_uploads both who acts and on which
// rows. TestEveryStatementNamesCallerMayAct holds the package's statements
// to it, TestNoStatementOnFilesElsewhere the rest of the repository.

// filesTables are the tables of a workspace's files.
var filesTables = map[string]bool{"pending_uploads": true, "presigned_uploads": true, "scanned_uploads": true}

// filesWord finds a mention of those tables in any text: what a stray
// piece of SQL, or a statement the checker did not see, would hold.
var filesWord = regexp.MustCompile(`\b(pending_uploads|presigned_uploads|scanned_uploads)\b`)

// callerMayActSQL stands, in a statement the checker reads, for the
// condition callerMayAct (tokenSchema.mayActSQL): a call the checker
// recognizes, over the same arguments.
const callerMayActSQL = `caller_may_act(@caller_trusted, @caller_hash, @workspace)`

// goSubstitutes are what the statements' Go expressions that are neither
// literals, constants nor callerMayAct put into the SQL, as the checker
// reads them (the expression, printed, to what it may produce). An
// expression not here stops the checker: add it, with what it makes.
var goSubstitutes = map[string]string{
	// list.go: the next page's condition, or none.
	`andEach(page)`: ` AND (created_at, file_id) > (@after_at::timestamptz, @after_file::uuid)`,
	// stage.go, queueInsert: one VALUES row a file.
	`strings.Join(rows, ", ")`: `(@file_id_0::uuid, @content_0::bytea, @s3_key_0::text, @size_0::bigint, @sha256_0::bytea,
		@filename_0::text, @mimetype_0::text)`,
}

// goSQL evaluates e, a statement's SQL as Go writes it: string literals,
// +, the package's constants (consts), callerMayAct (callerMayActSQL),
// and goSubstitutes. It returns an error for anything else.
func goSQL(fset *token.FileSet, e ast.Expr, consts map[string]ast.Expr) (string, error) {
	switch e := e.(type) {
	case *ast.BasicLit:
		if e.Kind == token.STRING {
			return strconv.Unquote(e.Value)
		}
	case *ast.ParenExpr:
		return goSQL(fset, e.X, consts)
	case *ast.BinaryExpr:
		if e.Op == token.ADD {
			x, err := goSQL(fset, e.X, consts)
			if err != nil {
				return "", err
			}
			y, err := goSQL(fset, e.Y, consts)
			return x + y, err
		}
	case *ast.Ident:
		if e.Name == "callerMayAct" {
			return callerMayActSQL, nil
		}
		if c, ok := consts[e.Name]; ok {
			return goSQL(fset, c, consts)
		}
	case *ast.SelectorExpr:
		if e.Sel.Name == "callerMayAct" {
			return callerMayActSQL, nil
		}
	}
	var b strings.Builder
	_ = printer.Fprint(&b, fset, e)
	if s, ok := goSubstitutes[b.String()]; ok {
		return s, nil
	}
	return "", fmt.Errorf("an expression the guard's checker cannot read: %s", b.String())
}

// guardProblems returns what is wrong with sql, a statement on a
// workspace's files with its values bound by name (@name), read by
// Postgres's parser: at every level (SELECT, UPDATE, DELETE, INSERT,
// each CTE and subquery its own) that names pending_uploads or
// presigned_uploads,
//   - the rows are bound to the checked workspace: the level's WHERE (or
//     the ON of an inner join there) has, AND-ed at its top,
//     <table or alias>.workspace_id = @workspace (unqualified only when the
//     table is the level's one range); an INSERT writes @workspace as
//     workspace_id;
//   - and callerMayAct is AND-ed at the top of that same WHERE (an
//     INSERT: of its SELECT's), or of the level a subquery sits in (a
//     subquery of an expression is read only where that level's
//     condition holds; a CTE is a level of its own).
//
// Any other statement on those tables (TRUNCATE, COPY, MERGE, ALTER, …),
// an INSERT from VALUES or with ON CONFLICT, is refused.
func guardProblems(sql string) []string {
	names, parsedSQL, err := positional(sql)
	if err != nil {
		return []string{fmt.Sprintf("named arguments: %v", err)}
	}
	tree, err := pg_query.Parse(parsedSQL)
	if err != nil {
		return []string{fmt.Sprintf("does not parse: %v", err)}
	}
	g := &guardWalk{names: names}
	for _, raw := range tree.GetStmts() {
		g.walk(raw.ProtoReflect(), nil, false)
	}
	var problems []string
	for _, r := range g.refs {
		for _, p := range g.check(r) {
			problems = append(problems, fmt.Sprintf("%s (at %d): %s", r.rv.Relname, r.rv.Location, p))
		}
	}
	return problems
}

// filesTablesIn returns the tables of a workspace's files that sql, when
// it parses as SQL, names (nil when it does not parse).
func filesTablesIn(sql string) []string {
	tree, err := pg_query.Parse(sql)
	if err != nil {
		return nil
	}
	g := &guardWalk{}
	for _, raw := range tree.GetStmts() {
		g.walk(raw.ProtoReflect(), nil, false)
	}
	var out []string
	for _, r := range g.refs {
		out = append(out, r.rv.Relname)
	}
	return out
}

// positional returns sql with each @name bound by position ($n), as pgx
// rewrites it (strings, comments and casts left alone), and the names in
// their order.
func positional(sql string) ([]string, string, error) {
	byName := pgx.NamedArgs{}
	for _, m := range regexp.MustCompile(`@([A-Za-z_][A-Za-z0-9_]*)`).FindAllStringSubmatch(sql, -1) {
		byName[m[1]] = m[1]
	}
	out, args, err := byName.RewriteQuery(context.Background(), nil, sql, nil)
	if err != nil {
		return nil, "", err
	}
	names := make([]string, len(args))
	for i, a := range args {
		names[i], _ = a.(string)
	}
	return names, out, nil
}

// level is one statement of a parse tree: a SELECT, UPDATE, DELETE,
// INSERT or any other *Stmt, with the level it sits in.
type level struct {
	msg       protoreflect.ProtoMessage
	kind      string
	parent    *level
	inSubLink bool // a subquery of an expression of parent
}

// tableRef is a level's reference to a table of a workspace's files.
type tableRef struct {
	rv *pg_query.RangeVar
	at *level
}

type guardWalk struct {
	names  []string // the statement's arguments, by position
	levels []*level
	refs   []tableRef
}

func (g *guardWalk) walk(m protoreflect.Message, cur *level, subLink bool) {
	name := string(m.Descriptor().Name())
	switch {
	case name == "SubLink":
		s := m.Interface().(*pg_query.SubLink)
		if s.Testexpr != nil {
			g.walk(s.Testexpr.ProtoReflect(), cur, false)
		}
		if s.Subselect != nil {
			g.walk(s.Subselect.ProtoReflect(), cur, true)
		}
		return
	case name == "RangeVar":
		if rv := m.Interface().(*pg_query.RangeVar); filesTables[rv.Relname] {
			g.refs = append(g.refs, tableRef{rv, cur})
		}
	case strings.HasSuffix(name, "Stmt") && name != "RawStmt":
		cur = &level{msg: m.Interface(), kind: name, parent: cur, inSubLink: subLink}
		g.levels = append(g.levels, cur)
	}
	if name != "Node" && name != "RawStmt" {
		subLink = false // only the node a SubLink's subselect holds is its query
	}
	m.Range(func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
		switch {
		case fd.Kind() != protoreflect.MessageKind:
		case fd.IsList():
			for i := 0; i < v.List().Len(); i++ {
				g.walk(v.List().Get(i).Message(), cur, subLink)
			}
		case !fd.IsMap():
			g.walk(v.Message(), cur, subLink)
		}
		return true
	})
}

// check returns what is wrong with r's level.
func (g *guardWalk) check(r tableRef) []string {
	lv := r.at
	if lv == nil {
		return []string{"outside any statement"}
	}
	if lv.kind == "InsertStmt" {
		return g.checkInsert(r)
	}
	conj, ranges, ok := g.conditions(lv)
	if !ok {
		return []string{fmt.Sprintf("a %s on a workspace's files: only SELECT, UPDATE, DELETE and INSERT … SELECT can name the guard", lv.kind)}
	}
	var problems []string
	if !g.rowsBound(r.rv, conj, ranges == 1) {
		problems = append(problems, "its rows are not bound to the checked workspace: no workspace_id = @workspace AND-ed at this level")
	}
	if !g.guarded(lv) {
		problems = append(problems, "no callerMayAct AND-ed at this level")
	}
	return problems
}

// conditions returns lv's conditions AND-ed at its top (WHERE, and the ON
// of its inner joins) and how many ranges it reads; ok is false for a
// level that has none of these (not a SELECT, UPDATE or DELETE).
func (g *guardWalk) conditions(lv *level) (conj []*pg_query.Node, ranges int, ok bool) {
	switch s := lv.msg.(type) {
	case *pg_query.SelectStmt:
		conj, ranges = conjuncts(s.WhereClause), 0
		c, n := innerJoins(s.FromClause)
		return append(conj, c...), ranges + n, true
	case *pg_query.UpdateStmt:
		c, n := innerJoins(s.FromClause)
		return append(conjuncts(s.WhereClause), c...), 1 + n, true
	case *pg_query.DeleteStmt:
		c, n := innerJoins(s.UsingClause)
		return append(conjuncts(s.WhereClause), c...), 1 + n, true
	}
	return nil, 0, false
}

// guarded reports whether callerMayAct is AND-ed at lv's top, or lv is a
// subquery of an expression of a guarded level.
func (g *guardWalk) guarded(lv *level) bool {
	if conj, _, ok := g.conditions(lv); ok && slices.ContainsFunc(conj, isCallerMayAct) {
		return true
	}
	return lv.inSubLink && lv.parent != nil && g.guarded(lv.parent)
}

func (g *guardWalk) checkInsert(r tableRef) []string {
	ins := r.at.msg.(*pg_query.InsertStmt)
	if ins.Relation != r.rv {
		return []string{"named inside an INSERT, not as its table"}
	}
	var problems []string
	if ins.OnConflictClause != nil {
		problems = append(problems, "an INSERT with ON CONFLICT may change rows the guard does not name")
	}
	col := slices.IndexFunc(ins.Cols, func(n *pg_query.Node) bool { return n.GetResTarget().GetName() == "workspace_id" })
	sel := ins.SelectStmt.GetSelectStmt()
	switch {
	case col < 0:
		return append(problems, "an INSERT that does not write workspace_id")
	case sel == nil || len(sel.ValuesLists) > 0 || sel.Op != pg_query.SetOperation_SETOP_NONE:
		return append(problems, "an INSERT not from one SELECT, where callerMayAct can be AND-ed")
	case col >= len(sel.TargetList) || !g.isParam(sel.TargetList[col].GetResTarget().GetVal(), "workspace"):
		problems = append(problems, "an INSERT that writes workspace_id from something other than @workspace")
	}
	for _, lv := range g.levels {
		if lv.msg == protoreflect.ProtoMessage(sel) && !g.guarded(lv) {
			problems = append(problems, "an INSERT whose SELECT has no callerMayAct AND-ed")
		}
	}
	return problems
}

// rowsBound reports whether conj binds rv's rows to @workspace:
// <rv's alias or name>.workspace_id = @workspace, or the column alone
// when rv is the level's one range.
func (g *guardWalk) rowsBound(rv *pg_query.RangeVar, conj []*pg_query.Node, alone bool) bool {
	qualifier := rv.Relname
	if rv.Alias != nil {
		qualifier = rv.Alias.Aliasname
	}
	isColumn := func(n *pg_query.Node) bool {
		var f []string
		for _, x := range n.GetColumnRef().GetFields() {
			f = append(f, x.GetString_().GetSval())
		}
		return (len(f) == 1 && alone && f[0] == "workspace_id") || (len(f) == 2 && f[0] == qualifier && f[1] == "workspace_id")
	}
	for _, c := range conj {
		e := c.GetAExpr()
		if e == nil || e.Kind != pg_query.A_Expr_Kind_AEXPR_OP || len(e.Name) != 1 || e.Name[0].GetString_().GetSval() != "=" {
			continue
		}
		if (isColumn(e.Lexpr) && g.isParam(e.Rexpr, "workspace")) || (isColumn(e.Rexpr) && g.isParam(e.Lexpr, "workspace")) {
			return true
		}
	}
	return false
}

// isParam reports whether n is the argument @name (cast or not).
func (g *guardWalk) isParam(n *pg_query.Node, name string) bool {
	for n.GetTypeCast() != nil {
		n = n.GetTypeCast().Arg
	}
	p := n.GetParamRef()
	return p != nil && int(p.Number) >= 1 && int(p.Number) <= len(g.names) && g.names[p.Number-1] == name
}

// isCallerMayAct reports whether n is callerMayAct (callerMayActSQL), or
// (SELECT callerMayAct): a scalar subquery of it alone, with no range and
// no condition, which Postgres runs once for the statement (an InitPlan)
// where the bare condition, volatile, is evaluated for every row.
func isCallerMayAct(n *pg_query.Node) bool {
	if s := n.GetSubLink(); s != nil {
		sel := s.Subselect.GetSelectStmt()
		return s.SubLinkType == pg_query.SubLinkType_EXPR_SUBLINK && sel != nil &&
			len(sel.FromClause) == 0 && sel.WhereClause == nil && len(sel.TargetList) == 1 &&
			isCallerMayAct(sel.TargetList[0].GetResTarget().GetVal())
	}
	f := n.GetFuncCall()
	return f != nil && len(f.Funcname) == 1 && f.Funcname[0].GetString_().GetSval() == "caller_may_act"
}

// conjuncts returns the conditions AND-ed at the top of n.
func conjuncts(n *pg_query.Node) []*pg_query.Node {
	if n == nil {
		return nil
	}
	if b := n.GetBoolExpr(); b != nil && b.Boolop == pg_query.BoolExprType_AND_EXPR {
		var out []*pg_query.Node
		for _, a := range b.Args {
			out = append(out, conjuncts(a)...)
		}
		return out
	}
	return []*pg_query.Node{n}
}

// innerJoins returns the conditions AND-ed at the top of the ON of the
// inner joins of from (those that filter the level's rows as its WHERE
// does), and how many ranges from reads.
func innerJoins(from []*pg_query.Node) ([]*pg_query.Node, int) {
	var conj []*pg_query.Node
	ranges := 0
	for _, n := range from {
		j := n.GetJoinExpr()
		if j == nil {
			ranges++
			continue
		}
		c, r := innerJoins([]*pg_query.Node{j.Larg, j.Rarg})
		ranges += r
		if j.Jointype == pg_query.JoinType_JOIN_INNER {
			conj = append(append(conj, conjuncts(j.Quals)...), c...)
		}
	}
	return conj, ranges
}
