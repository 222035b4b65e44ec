//go:build cgo

package pendinguploads

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// scheduleOnly are the functions whose statements act for the schedule
// on every workspace, by age alone, never for a caller (the sweep and its
// metrics): they name no caller's condition.
var scheduleOnly = map[string]string{
	"sweepOrphans":        "deletes the objects of rows that never committed",
	"sweepRows":           "deletes acked or expired rows",
	"sweepRowsAndObjects": "deletes acked or expired rows and their objects",
	"sweepPresigned":      "deletes expired presigned uploads",
	"deleteBatch":         "sweepRows's batch: acked or expired rows after the pass's cursor",
	"selectBatch":         "sweepRowsAndObjects's batch: acked or expired rows after the pass's cursor",
	"deleteByID":          "sweepRowsAndObjects's delete of a batch's rows whose objects are gone",
	"Backlog":             "counts what waits, for the sweep's metrics",
	"ExpireBucketFiles":   "expires the files of a dev server's earlier local bucket",
	"Recount":             "recounts a workspace's running total, for the operator (pendingctl recount)",
	"RecountAll":          "walks the workspaces to recount, for the operator (pendingctl recount --all)",
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
// fragment, a constant that statement names), binds its values by name
// (@name), never $n, and, read by Postgres's own parser, names at each of
// its levels both who acts and on which rows: workspace_id = @workspace
// AND callerMayAct (guardProblems). Only the schedule's functions
// (scheduleOnly) act without a caller. The checker is shown each way a
// statement once slipped past a check by patterns (testdata/guard).
func TestEveryStatementNamesCallerMayAct(t *testing.T) {
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, name := range files {
		if !strings.HasSuffix(name, "_test.go") {
			names = append(names, name)
		}
	}
	statements, problems := checkStatements(t, names, true)
	for _, p := range problems {
		t.Error(p)
	}
	if statements < 13 {
		t.Fatalf("found %d statements on a workspace's files: the test no longer sees them", statements)
	}

	t.Run("Dodges", func(t *testing.T) {
		for _, name := range []string{"schema_qualified", "quoted", "using", "or"} {
			t.Run(name, func(t *testing.T) {
				n, problems := checkStatements(t, []string{filepath.Join("testdata", "guard", name+".go.txt")}, false)
				if n != 1 || len(problems) == 0 {
					t.Fatalf("%d statements, problems %q: want the statement seen and refused", n, problems)
				}
				t.Log(problems)
			})
		}
	})
}

// checkStatements reads the Go files names and returns how many
// statements on a workspace's files they send, and what is wrong: a
// statement the guard's checker refuses (guardProblems), SQL on those
// tables outside the statement that sends it, a numbered placeholder,
// and (with whole, the package) a fragment no statement names or a
// function of scheduleOnly that is gone.
func checkStatements(t *testing.T, names []string, whole bool) (int, []string) {
	t.Helper()
	fset := token.NewFileSet()
	var parsed []*ast.File
	for _, name := range names {
		f, err := parser.ParseFile(fset, name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		parsed = append(parsed, f)
	}
	var problems []string
	report := func(pos token.Pos, format string, args ...any) {
		problems = append(problems, fmt.Sprintf("%s: ", fset.Position(pos))+fmt.Sprintf(format, args...))
	}
	// The package's string constants: fragments a statement may name.
	consts := map[string]ast.Expr{}
	fragments := map[string]ast.Expr{}
	for _, f := range parsed {
		for _, decl := range f.Decls {
			if gd, ok := decl.(*ast.GenDecl); ok && gd.Tok == token.CONST {
				for _, spec := range gd.Specs {
					vs := spec.(*ast.ValueSpec)
					for i, v := range vs.Values {
						consts[vs.Names[i].Name] = v
					}
				}
			}
		}
	}
	// A fragment may be built of others (quotaFits of pendingFiles).
	for name, v := range consts {
		if sql, err := goSQL(fset, v, consts); err == nil && mentionsFiles(sql) {
			fragments[name] = v
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
			inStatement := map[*ast.BasicLit]bool{}
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
				lits, idents := literalsAndNames(arg)
				touches := false
				for _, l := range lits {
					if v, err := strconv.Unquote(l.Value); err == nil && mentionsFiles(v) {
						touches = true
					}
				}
				for name := range fragments {
					if idents[name] {
						touches, used[name] = true, true
					}
				}
				sql, err := goSQL(fset, arg, consts)
				if err == nil && mentionsFiles(sql) {
					touches = true
				}
				if !touches {
					return true
				}
				statements++
				for _, l := range lits {
					inStatement[l] = true
					if regexp.MustCompile(`\$[0-9]`).MatchString(l.Value) {
						report(call.Pos(), "a numbered placeholder ($n) in a statement on a workspace's files: bind by name")
					}
				}
				if err != nil {
					report(call.Pos(), "a statement on a workspace's files the checker cannot read: %v", err)
					return true
				}
				for _, p := range guardProblems(sql) {
					report(call.Pos(), "%s", p)
				}
				return true
			})
			ast.Inspect(decl, func(n ast.Node) bool {
				if l, ok := n.(*ast.BasicLit); ok && l.Kind == token.STRING && !inStatement[l] {
					if v, err := strconv.Unquote(l.Value); err == nil && mentionsFiles(v) {
						report(l.Pos(), "SQL on a workspace's files outside the statement that sends it: write it there, beside callerMayAct")
					}
				}
				return true
			})
		}
	}
	if whole {
		// A fragment named inside a used one (quotaFits names
		// pendingFiles) is used: the statement's checked SQL holds it.
		for grew := true; grew; {
			grew = false
			for name, v := range fragments {
				if !used[name] {
					continue
				}
				_, idents := literalsAndNames(v)
				for inner := range fragments {
					if idents[inner] && !used[inner] {
						used[inner], grew = true, true
					}
				}
			}
		}
		for name, v := range fragments {
			if !used[name] {
				report(v.Pos(), "fragment %s is named by no statement beside callerMayAct", name)
			}
		}
		for name := range scheduleOnly {
			if !seen[name] {
				problems = append(problems, fmt.Sprintf("scheduleOnly names %s, which is not in the package any more", name))
			}
		}
	}
	return statements, problems
}

// mentionsFiles reports whether text names a table of a workspace's
// files: as a word, or, read by Postgres's parser, however it is spelt.
func mentionsFiles(text string) bool {
	return filesWord.MatchString(text) || len(filesTablesIn(text)) > 0
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
