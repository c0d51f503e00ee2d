package gosdk_test

import (
	"go/ast"
	"go/doc"
	"go/parser"
	"go/token"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/mrtr-go/mrtr/gosdk"
)

// TestFlowDocumentsItsMethods: `go doc gosdk Flow` shows State, Resumed,
// Round, ID and Asked, which it does only when they are declared on Flow
// itself (go doc does not follow an embedded type of an internal
// package), and Flow exports no field of an internal package's type.
func TestFlowDocumentsItsMethods(t *testing.T) {
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
	p, err := doc.NewFromFiles(fset, files, "github.com/mrtr-go/mrtr/gosdk")
	if err != nil {
		t.Fatal(err)
	}
	var flow *doc.Type
	for _, typ := range p.Types {
		if typ.Name == "Flow" {
			flow = typ
		}
	}
	if flow == nil {
		t.Fatal("no type Flow")
	}
	for _, want := range []string{"State", "Resumed", "Round", "ID", "Asked"} {
		i := slices.IndexFunc(flow.Methods, func(m *doc.Func) bool { return m.Name == want })
		if i < 0 {
			t.Errorf("go doc gosdk Flow does not show %s", want)
		} else if flow.Methods[i].Doc == "" {
			t.Errorf("Flow.%s has no doc comment", want)
		}
	}
	ft := reflect.TypeFor[gosdk.Flow[struct{}]]()
	for i := range ft.NumField() {
		if f := ft.Field(i); f.IsExported() {
			t.Errorf("Flow exports the field %s %s", f.Name, f.Type)
		}
	}
}
