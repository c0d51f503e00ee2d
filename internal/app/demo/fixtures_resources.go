package demo

import (
	"context"
	"encoding/json"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Resource fixtures of the conformance suite.
const (
	staticTextURI   = "test://static-text"
	staticBinaryURI = "test://static-binary"
	watchedURI      = "test://watched-resource"
	templateURI     = "test://template/{id}/data"
	staticText      = "This is the content of the static text resource."
)

// addResourceFixtures registers the static, templated and watched
// resources. A URI that matches none of them gets go-sdk's own answer,
// JSON-RPC -32602 "Resource not found" with data.uri (SEP-2164).
func addResourceFixtures(s *mcp.Server) {
	s.AddResource(&mcp.Resource{URI: staticTextURI, Name: "static-text", Description: "A static text resource.", MIMEType: "text/plain"},
		func(ctx context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
			return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: req.Params.URI, MIMEType: "text/plain", Text: staticText}}}, nil
		})
	s.AddResource(&mcp.Resource{URI: staticBinaryURI, Name: "static-binary", Description: "A static binary resource (a 1x1 PNG).", MIMEType: "image/png"},
		func(ctx context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
			return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: req.Params.URI, MIMEType: "image/png", Blob: pixelPNG()}}}, nil
		})
	s.AddResource(&mcp.Resource{URI: watchedURI, Name: "watched-resource", Description: "A resource clients may subscribe to (2025-11-25).", MIMEType: "text/plain"},
		func(ctx context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
			return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: req.Params.URI, MIMEType: "text/plain", Text: "Watched resource content."}}}, nil
		})
	s.AddResourceTemplate(&mcp.ResourceTemplate{URITemplate: templateURI, Name: "template-data", Description: "Data for an id, read from the URI.", MIMEType: "application/json"},
		func(ctx context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
			uri := req.Params.URI
			id, ok := strings.CutPrefix(uri, "test://template/")
			if ok {
				id, ok = strings.CutSuffix(id, "/data")
			}
			if !ok || id == "" || strings.Contains(id, "/") {
				return nil, mcp.ResourceNotFoundError(uri)
			}
			body, err := json.Marshal(map[string]any{"id": id, "templateTest": true, "data": "Data for ID: " + id})
			if err != nil {
				return nil, err
			}
			return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: uri, MIMEType: "application/json", Text: string(body)}}}, nil
		})
}

// subscribe accepts resources/subscribe (2025-11-25 wire; go-sdk keeps
// the per-session subscription and delivers ResourceUpdated to it) for
// the resources this server has.
func subscribe(ctx context.Context, req *mcp.SubscribeRequest) error {
	return knownResource(req.Params.URI)
}

// unsubscribe accepts resources/unsubscribe.
func unsubscribe(ctx context.Context, req *mcp.UnsubscribeRequest) error {
	return knownResource(req.Params.URI)
}

func knownResource(uri string) error {
	switch uri {
	case staticTextURI, staticBinaryURI, watchedURI:
		return nil
	}
	if rest, ok := strings.CutPrefix(uri, "test://template/"); ok && strings.HasSuffix(rest, "/data") {
		return nil
	}
	return mcp.ResourceNotFoundError(uri)
}
