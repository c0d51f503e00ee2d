package call

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"reflect"
	"slices"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mrtr-go/mrtr/cmd/mrtr/internal/base"
	"github.com/mrtr-go/mrtr/internal/termtext"
)

// list prints the server's tools, prompts, resources and resource
// templates, each with its inputs.
func list(ctx context.Context, a *base.App, cs *mcp.ClientSession) error {
	caps := &mcp.ServerCapabilities{}
	if ir := cs.InitializeResult(); ir != nil && ir.Capabilities != nil {
		caps = ir.Capabilities
	}
	w := a.Stdout
	if caps.Tools != nil {
		fmt.Fprintln(w, "Tools (mrtr call URL TOOL --arg k=v):")
		for t, err := range cs.Tools(ctx, nil) {
			if err != nil {
				return fmt.Errorf("list tools: %w", err)
			}
			fmt.Fprintf(w, "  %s%s\n", termtext.Line(t.Name), summary(t.Description))
			fields := parseElicitSchema(t.InputSchema)
			for _, f := range fields {
				fmt.Fprintf(w, "    %s (%s)%s\n", f.name, strings.Join(f.listFacts(), ", "), summary(f.title+" "+f.desc))
			}
		}
	}
	if caps.Prompts != nil {
		fmt.Fprintln(w, "Prompts (mrtr call URL --prompt NAME --arg k=v):")
		for p, err := range cs.Prompts(ctx, nil) {
			if err != nil {
				return fmt.Errorf("list prompts: %w", err)
			}
			fmt.Fprintf(w, "  %s%s\n", termtext.Line(p.Name), summary(p.Description))
			for _, arg := range p.Arguments {
				req := "optional"
				if arg.Required {
					req = "required"
				}
				fmt.Fprintf(w, "    %s (%s)%s\n", termtext.Line(arg.Name), req, summary(arg.Description))
			}
		}
	}
	if caps.Resources != nil {
		fmt.Fprintln(w, "Resources (mrtr call URL --resource URI):")
		for r, err := range cs.Resources(ctx, nil) {
			if err != nil {
				return fmt.Errorf("list resources: %w", err)
			}
			fmt.Fprintf(w, "  %s (%s)%s\n", termtext.Line(r.URI), strings.Join(nonEmpty(termtext.Line(r.Name), termtext.Line(r.MIMEType)), ", "), summary(r.Description))
		}
		for r, err := range cs.ResourceTemplates(ctx, nil) {
			if err != nil {
				return fmt.Errorf("list resource templates: %w", err)
			}
			fmt.Fprintf(w, "  %s (template: %s)%s\n", termtext.Line(r.URITemplate), strings.Join(nonEmpty(termtext.Line(r.Name), termtext.Line(r.MIMEType)), ", "), summary(r.Description))
		}
	}
	return nil
}

// summary is ": " and a description on one line, or "".
func summary(s string) string {
	if s = termtext.Line(s); s == "" {
		return ""
	}
	return ": " + s
}

func nonEmpty(ss ...string) []string {
	return slices.DeleteFunc(ss, func(s string) bool { return s == "" })
}

// printPrompt prints a prompt's description and its messages.
func printPrompt(a *base.App, res *mcp.GetPromptResult) {
	if res.Description != "" {
		fmt.Fprintf(a.Stdout, "%s\n", termtext.Clean(res.Description))
	}
	for _, m := range res.Messages {
		s := termtext.Clean(contentString(m.Content))
		fmt.Fprintf(a.Stdout, "%s: %s\n", termtext.Line(string(m.Role)), strings.TrimSuffix(s, "\n"))
	}
}

// printResource prints a resource's text as itself (cleaned of terminal
// controls), a blob as a summary.
func printResource(a *base.App, c *mcp.ResourceContents) {
	if c.Blob != nil || c.Text == "" {
		fmt.Fprintln(a.Stdout, contentString(&mcp.EmbeddedResource{Resource: c}))
		return
	}
	s := termtext.Clean(c.Text)
	if !strings.HasSuffix(s, "\n") {
		s += "\n"
	}
	io.WriteString(a.Stdout, s)
}

// printResult prints a tool result: to stdout, or to stderr with an
// error to exit 1 if it is a tool error. Text is cleaned of terminal
// controls; structured content is JSON with the same values.
func printResult(a *base.App, tool string, res *mcp.CallToolResult) error {
	w := a.Stdout
	if res.IsError {
		w = a.Stderr
	}
	content, structured := res.Content, res.StructuredContent
	if structured != nil && len(content) == 1 {
		// Tools with structured output also send it as JSON text: show it once.
		if t, ok := content[0].(*mcp.TextContent); ok && sameJSON(t.Text, structured) {
			content = nil
		}
	}
	var text strings.Builder
	for _, c := range content {
		if t, ok := c.(*mcp.TextContent); ok {
			text.WriteString(t.Text)
		}
	}
	if structured != nil && content != nil && repeatsContent(content, text.String(), structured) {
		structured = nil // everything in it is shown already
	}
	for _, c := range content {
		s := termtext.Clean(contentString(c))
		if !strings.HasSuffix(s, "\n") {
			s += "\n"
		}
		io.WriteString(w, s)
	}
	if structured != nil {
		if b, err := json.MarshalIndent(res.StructuredContent, "", "  "); err == nil {
			fmt.Fprintf(w, "%s\n", termtext.JSON(b))
		}
	}
	if res.IsError {
		return fmt.Errorf("tool %s reported an error", tool)
	}
	return nil
}

// repeatsContent reports whether structured content adds nothing to the
// content shown: every value in it is a string the text holds, or the
// content list or one of its items again (server-filesystem's results
// carry their text as {"content": text}, a media file's block as
// {"content": [block]}). A number, a boolean or a string the text lacks
// is something more.
func repeatsContent(content []mcp.Content, text string, structured any) bool {
	v, ok := plainJSON(structured)
	if !ok {
		return false
	}
	shown := []any{}
	if all, ok := plainJSON(content); ok {
		shown = append(shown, all)
	}
	for _, c := range content {
		if item, ok := plainJSON(c); ok {
			shown = append(shown, item)
		}
	}
	var walk func(any) bool
	walk = func(v any) bool {
		switch v.(type) {
		case []any, map[string]any:
			for _, s := range shown {
				if reflect.DeepEqual(v, s) {
					return true
				}
			}
		}
		switch v := v.(type) {
		case string:
			return strings.Contains(text, v)
		case nil:
			return true
		case []any:
			for _, x := range v {
				if !walk(x) {
					return false
				}
			}
			return true
		case map[string]any:
			for _, x := range v {
				if !walk(x) {
					return false
				}
			}
			return true
		}
		return false
	}
	return walk(v)
}

// plainJSON is v as encoding/json decodes its JSON into an any.
func plainJSON(v any) (any, bool) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, false
	}
	var out any
	if json.Unmarshal(b, &out) != nil {
		return nil, false
	}
	return out, true
}

// printJSON prints a result as the JSON the server sent (its fields as
// go-sdk decodes them), indented, its strings free of terminal controls.
func printJSON(a *base.App, res any) error {
	b, err := json.MarshalIndent(res, "", "  ")
	if err != nil {
		return fmt.Errorf("encode the result: %w", err)
	}
	fmt.Fprintf(a.Stdout, "%s\n", termtext.JSON(b))
	return nil
}

// contentString shows text as itself and summarizes everything else,
// the server's names, URIs and types in a summary on one line, cleaned
// of terminal controls. Text is left as the server sent it: the caller
// cleans it.
func contentString(c mcp.Content) string {
	switch c := c.(type) {
	case *mcp.TextContent:
		return c.Text
	case *mcp.ImageContent:
		return fmt.Sprintf("[image %s, %d bytes]", termtext.Line(c.MIMEType), len(c.Data))
	case *mcp.AudioContent:
		return fmt.Sprintf("[audio %s, %d bytes]", termtext.Line(c.MIMEType), len(c.Data))
	case *mcp.ResourceLink:
		s := "[resource link " + termtext.Line(c.URI)
		if name := termtext.Line(c.Name); name != "" {
			s += " (" + name + ")"
		}
		return s + "]"
	case *mcp.EmbeddedResource:
		r := c.Resource
		if r == nil {
			return "[resource]"
		}
		s := "[resource " + termtext.Line(r.URI)
		if mt := termtext.Line(r.MIMEType); mt != "" {
			s += ", " + mt
		}
		if r.Blob != nil {
			s += fmt.Sprintf(", %d bytes", len(r.Blob))
		} else {
			s += fmt.Sprintf(", %d bytes of text", len(r.Text))
		}
		return s + "]"
	}
	var kind struct {
		Type string `json:"type"`
	}
	if b, err := json.Marshal(c); err == nil {
		json.Unmarshal(b, &kind)
	}
	return fmt.Sprintf("[%s content]", termtext.Line(kind.Type))
}

// sameJSON reports whether text is JSON for the same value as v.
func sameJSON(text string, v any) bool {
	var t any
	if json.Unmarshal([]byte(text), &t) != nil {
		return false
	}
	a, err1 := json.Marshal(t)
	b, err2 := json.Marshal(v)
	return err1 == nil && err2 == nil && string(a) == string(b)
}
