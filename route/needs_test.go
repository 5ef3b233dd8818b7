package route

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// blockProbe is a policy that says it reads blocks and records what its
// picks got. It is not built in, so dispatch calls it through the interface
// with copies of the request.
type blockProbe struct{ got *[][]uint64 }

func (blockProbe) readsBlocks() {}

func (p blockProbe) pick(e *pickEnv, req *Request) result {
	*p.got = append(*p.got, slices.Clone(req.Blocks), []uint64{uint64(req.PromptTokens)})
	return consistentHash{}.pick(e, req)
}

// TestPolicyThatReadsBlocksGetsThem registers a policy that declares it
// reads blocks and checks that the router says so and hands every pick,
// real or dry, the request's blocks and prompt length.
func TestPolicyThatReadsBlocksGetsThem(t *testing.T) {
	const name = "test-block-probe"
	var got [][]uint64
	register(name, policyEntry{build: func(Config) policy { return blockProbe{got: &got} }})
	t.Cleanup(func() { delete(policies, name) })
	r, err := New(Config{Policy: name}, []Member{{Name: "a"}, {Name: "b"}})
	if err != nil {
		t.Fatal(err)
	}
	if !r.NeedsBlocks() {
		t.Fatalf("NeedsBlocks() = false for a policy that reads blocks")
	}
	req := Request{Key: 7, Blocks: []uint64{11, 12, 13}, PromptTokens: 300}
	d, err := r.TryPick(req)
	if err != nil {
		t.Fatal(err)
	}
	d.Done()
	if x := r.Explain(req); x.Err != nil {
		t.Fatal(x.Err)
	}
	want := [][]uint64{req.Blocks, {300}, req.Blocks, {300}}
	if !slices.EqualFunc(got, want, slices.Equal) {
		t.Errorf("the policy got %v, want %v (TryPick, then Explain)", got, want)
	}
}

// TestOnlyDeclaredPoliciesNeedBlocks checks each built-in policy: one that
// declares it reads blocks makes NeedsBlocks true, and one that does not
// routes the same requests the same way with blocks and without, so no
// caller that skips hashing for it changes its choices.
func TestOnlyDeclaredPoliciesNeedBlocks(t *testing.T) {
	members := []Member{{Name: "a", Threshold: 3}, {Name: "b", Threshold: 3}, {Name: "c", Threshold: 3}}
	for _, name := range Policies() {
		t.Run(name, func(t *testing.T) {
			cfg := Config{Policy: name, Seed: 9, QueueDepth: -1}
			with, err := New(cfg, members)
			if err != nil {
				t.Fatal(err)
			}
			_, declares := policies[name].build(with.Config()).(blockReader)
			if with.NeedsBlocks() != declares {
				t.Fatalf("NeedsBlocks() = %v, policy declares blockReader: %v", with.NeedsBlocks(), declares)
			}
			if declares {
				return
			}
			without, _ := New(cfg, members)
			var held []Decision
			for i := range 40 {
				req := Request{Key: uint64(i%5) * 0x9e3779b97f4a7c15, SpillKeys: []uint64{uint64(i % 3)}}
				blocked := req
				blocked.Blocks, blocked.PromptTokens = []uint64{uint64(i % 2), uint64(i)}, 100+i
				dw, errW := with.TryPick(blocked)
				dn, errN := without.TryPick(req)
				if dw.Backend != dn.Backend || dw.Reason != dn.Reason || (errW == nil) != (errN == nil) {
					t.Fatalf("request %d: with blocks %s %v %v, without %s %v %v", i, dw.Backend, dw.Reason, errW, dn.Backend, dn.Reason, errN)
				}
				held = append(held, dw, dn)
				if i%4 == 3 { // release the older half of the pairs, so loads vary
					k := len(held) / 4 * 2
					for _, d := range held[:k] {
						d.Done()
					}
					held = held[k:]
				}
			}
		})
	}
}

// moduleRoot is the directory holding go.mod, above the package.
func moduleRoot(t *testing.T) string {
	dir, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "go.mod")); err != nil {
		t.Fatalf("no go.mod above route: %v", err)
	}
	return dir
}

// sourceFiles parses every hand-written non-test Go file of the module
// (testdata and dependency folders aside) and calls fn with its path
// relative to the module root.
func sourceFiles(t *testing.T, fn func(rel string, fset *token.FileSet, f *ast.File)) {
	root := moduleRoot(t)
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			switch d.Name() {
			case "testdata", "node_modules", "vendor":
				return filepath.SkipDir
			}
			if strings.HasPrefix(d.Name(), ".") && path != root {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		fset := token.NewFileSet()
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		fn(filepath.ToSlash(rel), fset, f)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// policyName reports whether x is a string literal naming a policy.
func policyName(x ast.Expr) bool {
	lit, ok := x.(*ast.BasicLit)
	if !ok || lit.Kind != token.STRING {
		return false
	}
	s, err := strconv.Unquote(lit.Value)
	return err == nil && slices.Contains(Policies(), s)
}

// configPolicy reports whether x reads a Config's Policy (x.Policy on a
// Config() call or on a value named cfg or c).
func configPolicy(x ast.Expr) bool {
	sel, ok := x.(*ast.SelectorExpr)
	if !ok || sel.Sel.Name != "Policy" {
		return false
	}
	switch v := sel.X.(type) {
	case *ast.CallExpr:
		if f, ok := v.Fun.(*ast.SelectorExpr); ok {
			return f.Sel.Name == "Config"
		}
	case *ast.Ident:
		return v.Name == "cfg" || v.Name == "c"
	}
	return false
}

// stringsCall reports whether x calls a function of package strings
// (EqualFold, HasPrefix and the like), the other way to compare a name.
func stringsCall(x *ast.CallExpr) bool {
	sel, ok := x.Fun.(*ast.SelectorExpr)
	if !ok {
		return false
	}
	pkg, ok := sel.X.(*ast.Ident)
	return ok && pkg.Name == "strings"
}

// TestNoPolicyNameCompared fails when code decides by a policy's name: a
// comparison, strings call or switch case with a policy's name, a
// comparison of a Config's Policy, or a constant outside route holding a
// policy's name (which a comparison could then use unseen). What a policy
// needs it says through the interfaces in policy.go, and callers ask the
// Router (NeedsBlocks and the like).
func TestNoPolicyNameCompared(t *testing.T) {
	sourceFiles(t, func(rel string, fset *token.FileSet, f *ast.File) {
		ast.Inspect(f, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.CallExpr:
				if stringsCall(n) && (slices.ContainsFunc(n.Args, policyName) || slices.ContainsFunc(n.Args, configPolicy)) {
					t.Errorf("%s:%d: compares a policy name with a strings function", rel, fset.Position(n.Pos()).Line)
				}
			case *ast.GenDecl:
				if n.Tok != token.CONST || path.Dir(rel) == "route" {
					return true
				}
				for _, spec := range n.Specs {
					if slices.ContainsFunc(spec.(*ast.ValueSpec).Values, policyName) {
						t.Errorf("%s:%d: a constant holds a policy name", rel, fset.Position(spec.Pos()).Line)
					}
				}
			case *ast.BinaryExpr:
				if n.Op != token.EQL && n.Op != token.NEQ {
					return true
				}
				if policyName(n.X) || policyName(n.Y) || configPolicy(n.X) || configPolicy(n.Y) {
					t.Errorf("%s:%d: compares a policy name", rel, fset.Position(n.Pos()).Line)
				}
			case *ast.SwitchStmt:
				if n.Tag != nil && configPolicy(n.Tag) {
					t.Errorf("%s:%d: switches on a policy name", rel, fset.Position(n.Pos()).Line)
				}
			case *ast.CaseClause:
				if slices.ContainsFunc(n.List, policyName) {
					t.Errorf("%s:%d: a case names a policy", rel, fset.Position(n.Pos()).Line)
				}
			}
			return true
		})
	})
}

// TestNoPolicyTypeAsserted fails when route's code asserts or switches on
// a policy's concrete type outside the policy's own file and dispatch.
func TestNoPolicyTypeAsserted(t *testing.T) {
	type source struct {
		rel  string
		fset *token.FileSet
		f    *ast.File
	}
	var route []source
	types := map[string]string{} // policy type -> file declaring its pick
	sourceFiles(t, func(rel string, fset *token.FileSet, f *ast.File) {
		if path.Dir(rel) != "route" {
			return
		}
		route = append(route, source{rel, fset, f})
		for _, d := range f.Decls {
			if fd, ok := d.(*ast.FuncDecl); ok && fd.Recv != nil && fd.Name.Name == "pick" {
				types[typeName(fd.Recv.List[0].Type)] = rel
			}
		}
	})
	if types["prefixIndexPolicy"] == "" || len(types) < len(Policies()) {
		t.Fatalf("found the pick methods of %v, want one per policy of %v", types, Policies())
	}
	for _, src := range route {
		for _, d := range src.f.Decls {
			fd, ok := d.(*ast.FuncDecl)
			if !ok || fd.Name.Name == "dispatch" {
				continue
			}
			ast.Inspect(fd, func(n ast.Node) bool {
				var ts []ast.Expr
				switch n := n.(type) {
				case *ast.TypeAssertExpr:
					ts = append(ts, n.Type)
				case *ast.CaseClause:
					ts = n.List
				}
				for _, x := range ts {
					if home, ok := types[typeName(x)]; ok && home != src.rel {
						t.Errorf("%s:%d: %s asserts policy type %s, declared in %s", src.rel, src.fset.Position(x.Pos()).Line, fd.Name.Name, typeName(x), home)
					}
				}
				return true
			})
		}
	}
}

// typeName is the name of a type expression T or *T, else "".
func typeName(x ast.Expr) string {
	if s, ok := x.(*ast.StarExpr); ok {
		x = s.X
	}
	if id, ok := x.(*ast.Ident); ok {
		return id.Name
	}
	return ""
}
