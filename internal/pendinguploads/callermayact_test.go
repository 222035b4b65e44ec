package pendinguploads

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// tableRef is a statement's reference to a workspace's files.
var tableRef = regexp.MustCompile(`(?i)\b(FROM|INTO|UPDATE|JOIN)\s+(pending_uploads|presigned_uploads|scanned_uploads)\b`)

// scheduleOnly are the functions whose statements act for the schedule
// on every workspace, by age alone, never for a caller (the sweep and its
// metrics): they name no caller's condition.
var scheduleOnly = map[string]string{
	"sweepOrphans":        "deletes the objects of rows that never committed",
	"sweepRows":           "deletes acked or expired rows",
	"sweepRowsAndObjects": "deletes acked or expired rows and their objects",
	"sweepPresigned":      "deletes expired presigned uploads",
	"Backlog":             "counts what waits, for the sweep's metrics",
	"ExpireBucketFiles":   "expires the files of a dev server's earlier local bucket",
	"decideDeliver":       "delivers the file a malware scan's result names by its object key: the scanner's event, no caller",
	"decideRefuse":        "blocks or holds the file a malware scan's result names by its object key",
	"DecideOverdue":       "applies the scan policy to files whose scan never answered, by age",
	"HeldScans":           "lists the files held for an operator, on every workspace (pendingctl, the metric)",
	"sweepScanned":        "deletes expired rows of files held back for a scan, and their objects",
	"WaitingScans":        "lists the objects still to scan, for a scanner the bucket does not trigger (the dev server's clamd)",
}

// sqlMethods are the calls that send a statement, and which argument is
// its SQL.
var sqlMethods = map[string]int{"queue": 0, "Queue": 0, "Exec": 1, "Query": 1, "QueryRow": 1}

// TestEveryStatementNamesCallerMayAct reads the package's source: every
// statement that reads or writes pending_uploads or presigned_uploads is
// written in the argument of the call that sends it (or in a named
// fragment, a constant that statement names), names callerMayAct there
// (the condition that the call's caller may act on the workspace), and
// binds its values by name (@name), never $n; only the schedule's
// functions (scheduleOnly) act without a caller.
func TestEveryStatementNamesCallerMayAct(t *testing.T) {
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	var parsed []*ast.File
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		parsed = append(parsed, f)
	}
	// Named fragments: constants of SQL on the files, each a condition a
	// statement names beside callerMayAct.
	fragments := map[string]*ast.BasicLit{}
	for _, f := range parsed {
		for _, decl := range f.Decls {
			if gd, ok := decl.(*ast.GenDecl); ok && gd.Tok == token.CONST {
				for _, spec := range gd.Specs {
					vs := spec.(*ast.ValueSpec)
					for i, v := range vs.Values {
						if l, ok := v.(*ast.BasicLit); ok && l.Kind == token.STRING && tableRef.MatchString(l.Value) {
							fragments[vs.Names[i].Name] = l
						}
					}
				}
			}
		}
	}
	seen, used := map[string]bool{}, map[string]bool{}
	statements := 0
	for _, f := range parsed {
		for _, decl := range f.Decls {
			if gd, ok := decl.(*ast.GenDecl); ok && gd.Tok == token.CONST {
				continue // the fragments
			}
			fn, ok := decl.(*ast.FuncDecl)
			if ok && scheduleOnly[fn.Name.Name] != "" {
				seen[fn.Name.Name] = true
				continue
			}
			guarded := map[*ast.BasicLit]bool{}
			ast.Inspect(decl, func(n ast.Node) bool {
				call, ok := n.(*ast.CallExpr)
				if !ok {
					return true
				}
				sel, ok := call.Fun.(*ast.SelectorExpr)
				if !ok {
					return true
				}
				i, isSQL := sqlMethods[sel.Sel.Name]
				if !isSQL || len(call.Args) <= i {
					return true
				}
				arg := call.Args[i]
				lits, names := literalsAndNames(arg)
				touches := false
				for _, l := range lits {
					if tableRef.MatchString(l.Value) {
						touches = true
						guarded[l] = true
					}
				}
				for name := range fragments {
					if names[name] {
						touches = true
						used[name] = true
					}
				}
				if !touches {
					return true
				}
				statements++
				pos := fset.Position(call.Pos())
				if !names["callerMayAct"] {
					t.Errorf("%s: a statement on a workspace's files without callerMayAct", pos)
				}
				for _, l := range lits {
					if regexp.MustCompile(`\$[0-9]`).MatchString(l.Value) {
						t.Errorf("%s: a numbered placeholder ($n) in a statement on a workspace's files: bind by name", pos)
					}
				}
				return true
			})
			ast.Inspect(decl, func(n ast.Node) bool {
				if l, ok := n.(*ast.BasicLit); ok && l.Kind == token.STRING && tableRef.MatchString(l.Value) && !guarded[l] {
					t.Errorf("%s: SQL on a workspace's files outside the statement that sends it: write it there, beside callerMayAct",
						fset.Position(l.Pos()))
				}
				return true
			})
		}
	}
	for name, l := range fragments {
		if !used[name] {
			t.Errorf("%s: fragment %s is named by no statement beside callerMayAct", fset.Position(l.Pos()), name)
		}
	}
	for name := range scheduleOnly {
		if !seen[name] {
			t.Errorf("scheduleOnly names %s, which is not in the package any more", name)
		}
	}
	if statements < 10 {
		t.Fatalf("found %d statements on a workspace's files: the test no longer sees them", statements)
	}
}

// literalsAndNames returns the string literals of expression e and the
// names it uses (identifiers and the fields of selectors).
func literalsAndNames(e ast.Expr) ([]*ast.BasicLit, map[string]bool) {
	var lits []*ast.BasicLit
	names := map[string]bool{}
	ast.Inspect(e, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.BasicLit:
			if n.Kind == token.STRING {
				lits = append(lits, n)
			}
		case *ast.Ident:
			names[n.Name] = true
		}
		return true
	})
	return lits, names
}
