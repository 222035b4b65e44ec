// Command walk measures how far a reader travels to follow one request
// through the code: issue 35's "walk" of an upload, made mechanical so
// that it can be run again after any change.
//
// From a start function (by default httpapi's (*API).upload), it reads
// each function of this repository's modules once, in the order a reader
// meets their calls: depth first, calls in source order, a function
// already read not read again. Calls through an interface declared here
// are followed to the methods of the repository's (non-test) types that
// implement it by name; calls through a func value are not followed (a
// reader cannot see where they go either). Calls into the standard
// library and other modules are not followed.
//
// The functions read, in order, make a sequence of files. Each step from
// one function to the next is one of:
//
//	stay    the same file;
//	enter   a file not seen before;
//	return  a file already left (the reader goes back to it);
//
// and a step is also a climb when it goes from a lower package back up to
// one that imports it (directly or not): the reader, deep in auth or the
// store, has to come back to the handler to see what happens next.
//
// Usage (from the repository root):
//
//	go run ./internal/tools/walk [-v] [-start 'pkg.(*T).method']
//
// -v prints the sequence, one line a function. -order run reads a call's
// arguments before the call, as they run, instead of as the source reads
// (writeJSON(w, 200, a.staged(...)): staged, then writeJSON); the two
// orders can differ by a climb or a return. It exits non-zero only
// when it cannot load the code.
package main

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"go/ast"
	"go/importer"
	"go/parser"
	"go/token"
	"go/types"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
)

const module = "github.com/pendinguploads/pendinguploads"

// listed is what `go list -json -export -deps` says of a package.
type listed struct {
	ImportPath string
	Dir        string
	GoFiles    []string
	Export     string
	Imports    []string
	Standard   bool
}

// fn is one function or method declared in the repository.
type fn struct {
	key  string // pkgpath.Name or pkgpath.Recv.Name
	pkg  *source
	decl *ast.FuncDecl
	file string // relative to the repository root
}

// source is one of the repository's packages, parsed and type-checked.
type source struct {
	path  string
	files []*ast.File
	info  *types.Info
	pkg   *types.Package
}

func main() {
	start := flag.String("start", module+"/internal/httpapi.API.upload", "the function to start from: pkgpath.Name or pkgpath.Recv.Name")
	verbose := flag.Bool("v", false, "print the sequence of functions read")
	follow := flag.String("packages", "internal/httpapi,internal/pendinguploads,internal/auth",
		"the packages a reader opens (comma-separated, without the module path): a call into any other package is read by its doc comment, not followed")
	skip := flag.String("skip", "", "functions not to read (comma-separated, as -start names them, without the module path): a branch the request does not take")
	order := flag.String("order", "reading", "reading: a call before its arguments, as the source reads (f(g(x)): f, g); run: its arguments first, as they run (g, f)")
	flag.Parse()
	if *order != "reading" && *order != "run" {
		fmt.Fprintln(os.Stderr, "walk: -order is reading or run")
		os.Exit(2)
	}
	if err := run(*start, strings.Split(*follow, ","), strings.Split(*skip, ","), *order == "run", *verbose, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "walk:", err)
		os.Exit(1)
	}
}

func run(start string, follow, skip []string, runOrder, verbose bool, out io.Writer) error {
	slash := strings.LastIndex(start, "/")
	dot := strings.Index(start[slash+1:], ".")
	if slash < 0 || dot < 0 || !strings.HasPrefix(start, module) {
		return fmt.Errorf("-start %q: want %s/pkg.Name or %s/pkg.Recv.Name", start, module, module)
	}
	startPkg := start[:slash+1+dot]
	pkgs, err := golist("./" + strings.TrimPrefix(startPkg, module+"/"))
	if err != nil {
		return err
	}
	root, err := os.Getwd()
	if err != nil {
		return err
	}
	w, err := load(pkgs, root)
	if err != nil {
		return err
	}
	if w.funcs[start] == nil {
		return fmt.Errorf("no function %s", start)
	}
	w.runOrder = runOrder
	w.follow = map[string]bool{}
	for _, p := range follow {
		w.follow[module+"/"+strings.TrimSpace(p)] = true
	}
	for _, k := range skip {
		if k = strings.TrimSpace(k); k != "" {
			if w.funcs[module+"/"+k] == nil {
				return fmt.Errorf("-skip: no function %s", k)
			}
			w.seen[module+"/"+k] = true
		}
	}
	seq := w.read(start)
	report(out, seq, w.imports, verbose)
	return nil
}

// golist lists pattern's package and its dependencies with their export
// data (building what is not in the build cache).
func golist(pattern string) (map[string]*listed, error) {
	cmd := exec.Command("go", "list", "-json", "-export", "-deps", pattern)
	cmd.Stderr = os.Stderr
	raw, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("go list %s: %w", pattern, err)
	}
	out := map[string]*listed{}
	dec := json.NewDecoder(bytes.NewReader(raw))
	for dec.More() {
		var p listed
		if err := dec.Decode(&p); err != nil {
			return nil, fmt.Errorf("go list output: %w", err)
		}
		out[p.ImportPath] = &p
	}
	return out, nil
}

// walker holds the repository's functions and the import graph.
type walker struct {
	fset    *token.FileSet
	funcs   map[string]*fn
	byObj   map[string]*fn  // posKey of a declaration
	imports map[string]bool // "a b": package a imports b, transitively
	methods map[string][]*fn
	seen    map[string]bool
	follow  map[string]bool // the packages opened
	// runOrder reads a call's arguments before the call (-order run).
	runOrder bool
}

// load parses and type-checks every repository package of pkgs, each
// against its imports' export data.
func load(pkgs map[string]*listed, root string) (*walker, error) {
	w := &walker{fset: token.NewFileSet(), funcs: map[string]*fn{}, byObj: map[string]*fn{},
		imports: map[string]bool{}, methods: map[string][]*fn{}, seen: map[string]bool{}}
	imp := importer.ForCompiler(w.fset, "gc", func(path string) (io.ReadCloser, error) {
		p := pkgs[path]
		if p == nil || p.Export == "" {
			return nil, fmt.Errorf("no export data for %s", path)
		}
		return os.Open(p.Export)
	})
	var paths []string
	for path, p := range pkgs {
		if strings.HasPrefix(path, module) && !p.Standard {
			paths = append(paths, path)
		}
	}
	sort.Strings(paths)
	for _, path := range paths {
		p := pkgs[path]
		src := &source{path: path, info: &types.Info{
			Uses: map[*ast.Ident]types.Object{}, Defs: map[*ast.Ident]types.Object{},
			Selections: map[*ast.SelectorExpr]*types.Selection{}, Types: map[ast.Expr]types.TypeAndValue{},
		}}
		for _, name := range p.GoFiles {
			f, err := parser.ParseFile(w.fset, filepath.Join(p.Dir, name), nil, 0)
			if err != nil {
				return nil, err
			}
			src.files = append(src.files, f)
		}
		conf := types.Config{Importer: imp}
		tp, err := conf.Check(path, w.fset, src.files, src.info)
		if err != nil {
			return nil, fmt.Errorf("type-check %s: %w", path, err)
		}
		src.pkg = tp
		for _, f := range src.files {
			rel, _ := filepath.Rel(root, w.fset.File(f.Pos()).Name())
			for _, d := range f.Decls {
				fd, ok := d.(*ast.FuncDecl)
				if !ok || fd.Body == nil {
					continue
				}
				k := path + "." + recvName(fd) + fd.Name.Name
				f := &fn{key: k, pkg: src, decl: fd, file: rel}
				w.funcs[k] = f
				w.byObj[posKey(w.fset.Position(fd.Name.Pos()), fd.Name.Name)] = f
				if fd.Recv != nil {
					w.methods[fd.Name.Name] = append(w.methods[fd.Name.Name], f)
				}
			}
		}
	}
	var closure func(from, at string)
	closure = func(from, at string) {
		for _, i := range pkgs[at].Imports {
			if pkgs[i] != nil && strings.HasPrefix(i, module) && !w.imports[from+" "+i] {
				w.imports[from+" "+i] = true
				closure(from, i)
			}
		}
	}
	for _, path := range paths {
		closure(path, path)
	}
	return w, nil
}

func recvName(fd *ast.FuncDecl) string {
	if fd.Recv == nil || len(fd.Recv.List) == 0 {
		return ""
	}
	t := fd.Recv.List[0].Type
	for {
		switch x := t.(type) {
		case *ast.StarExpr:
			t = x.X
		case *ast.IndexExpr:
			t = x.X
		case *ast.IndexListExpr:
			t = x.X
		case *ast.Ident:
			return x.Name + "."
		default:
			return ""
		}
	}
}

// posKey names a declaration by file, line and name: export data keeps
// no columns.
func posKey(p token.Position, name string) string {
	return fmt.Sprintf("%s:%d:%s", p.Filename, p.Line, name)
}

// read returns the functions read from start, in order.
func (w *walker) read(start string) []*fn {
	var seq []*fn
	var visit func(f *fn)
	visit = func(f *fn) {
		if w.seen[f.key] || !w.follow[f.pkg.path] {
			return
		}
		w.seen[f.key] = true
		seq = append(seq, f)
		// Reading order: a call before its arguments, as the source
		// reads (f(g(x)): f, then g). Run order: the arguments first, as
		// they run (g, then f).
		var stack []ast.Node
		ast.Inspect(f.decl.Body, func(n ast.Node) bool {
			if n != nil {
				stack = append(stack, n)
				if call, ok := n.(*ast.CallExpr); ok && !w.runOrder {
					for _, g := range w.callees(f.pkg, call) {
						visit(g)
					}
				}
				return true
			}
			top := stack[len(stack)-1]
			stack = stack[:len(stack)-1]
			if call, ok := top.(*ast.CallExpr); ok && w.runOrder {
				for _, g := range w.callees(f.pkg, call) {
					visit(g)
				}
			}
			return true
		})
	}
	visit(w.funcs[start])
	return seq
}

// callees are the repository functions a call may run: the one it names,
// or, through an interface of the repository, its implementations here.
func (w *walker) callees(src *source, call *ast.CallExpr) []*fn {
	var id *ast.Ident
	switch x := ast.Unparen(call.Fun).(type) {
	case *ast.Ident:
		id = x
	case *ast.SelectorExpr:
		id = x.Sel
	case *ast.IndexExpr: // a generic function instantiated explicitly
		if s, ok := x.X.(*ast.SelectorExpr); ok {
			id = s.Sel
		} else if i, ok := x.X.(*ast.Ident); ok {
			id = i
		}
	}
	if id == nil {
		return nil
	}
	obj, ok := src.info.Uses[id].(*types.Func)
	if !ok || obj.Pkg() == nil || !strings.HasPrefix(obj.Pkg().Path(), module) {
		return nil
	}
	obj = obj.Origin()
	if f := w.byObj[posKey(w.fset.Position(obj.Pos()), obj.Name())]; f != nil {
		return []*fn{f}
	}
	sig := obj.Type().(*types.Signature)
	if sig.Recv() == nil {
		return nil
	}
	iface, ok := sig.Recv().Type().Underlying().(*types.Interface)
	if !ok {
		return nil
	}
	return w.implementations(iface, obj.Name())
}

// implementations are the repository's methods called name whose type has
// every method of iface (by name: the packages are checked apart).
func (w *walker) implementations(iface *types.Interface, name string) []*fn {
	var out []*fn
	for _, m := range w.methods[name] {
		recv := m.pkg.path + "." + recvName(m.decl)
		all := true
		for i := range iface.NumMethods() {
			if w.funcs[recv+iface.Method(i).Name()] == nil {
				all = false
				break
			}
		}
		if all {
			out = append(out, m)
		}
	}
	return out
}

// report prints the counts (and with verbose the sequence).
func report(out io.Writer, seq []*fn, imports map[string]bool, verbose bool) {
	files := map[string]bool{}
	var stays, enters, returns, climbs int
	for i, f := range seq {
		step := "start"
		if i > 0 {
			prev := seq[i-1]
			switch {
			case f.file == prev.file:
				step, stays = "stay", stays+1
			case files[f.file]:
				step, returns = "return", returns+1
			default:
				step, enters = "enter", enters+1
			}
			if imports[f.pkg.path+" "+prev.pkg.path] {
				step += " climb"
				climbs++
			}
		}
		files[f.file] = true
		if verbose {
			fmt.Fprintf(out, "%-13s %-44s %s\n", step, f.file, strings.TrimPrefix(f.key, module+"/"))
		}
	}
	fmt.Fprintf(out, "%d functions in %d files: %d stays, %d files entered, %d returns to a file already left, %d climbs from a lower package back up\n",
		len(seq), len(files), stays, enters, returns, climbs)
}
