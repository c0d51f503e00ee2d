// Package apidoc checks, in the tests of the adapters, that `go doc`
// shows what a user of their Flow type needs.
package apidoc

import (
	"go/ast"
	"go/doc"
	"go/parser"
	"go/token"
	"path"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
)

// FlowMethods fails t unless the package in the current directory, whose
// import path is pkg, declares each of methods, with a doc comment, on its
// type Flow itself (go doc does not follow an embedded type of an
// internal package), and flow (a Flow value's type) exports no field.
func FlowMethods(t *testing.T, pkg string, flow reflect.Type, methods ...string) {
	t.Helper()
	fset := token.NewFileSet()
	names, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	var files []*ast.File
	for _, name := range names {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, parser.ParseComments)
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, f)
	}
	p, err := doc.NewFromFiles(fset, files, pkg)
	if err != nil {
		t.Fatal(err)
	}
	i := slices.IndexFunc(p.Types, func(typ *doc.Type) bool { return typ.Name == "Flow" })
	if i < 0 {
		t.Fatal("no type Flow")
	}
	typ := p.Types[i]
	for _, want := range methods {
		j := slices.IndexFunc(typ.Methods, func(m *doc.Func) bool { return m.Name == want })
		if j < 0 {
			t.Errorf("go doc %s Flow does not show %s", path.Base(pkg), want)
		} else if typ.Methods[j].Doc == "" {
			t.Errorf("Flow.%s has no doc comment", want)
		}
	}
	for i := range flow.NumField() {
		if f := flow.Field(i); f.IsExported() {
			t.Errorf("Flow exports the field %s %s", f.Name, f.Type)
		}
	}
}
