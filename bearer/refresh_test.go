package bearer_test

import (
	"errors"
	"net/http"
	"path/filepath"
	"testing"
	"testing/synctest"
	"time"

	"github.com/mrtr-go/mrtr/bearer"
	"github.com/mrtr-go/mrtr/internal/testing/testissuer"
)

// The background refresh picks up a changed file with no token asking for
// it: a withdrawn key stops verifying after one check interval.
func TestFileJWKSBackgroundReload(t *testing.T) {
	a, b := testissuer.NewKey(t, "a", "EdDSA"), testissuer.NewKey(t, "b", "ES256")
	path := filepath.Join(t.TempDir(), "jwks.json")
	synctest.Test(t, func(t *testing.T) {
		writeJWKS(t, path, time.Now(), a, b)
		v, err := bearer.New(t.Context(), &bearer.Options{Issuer: "https://id.example", Audience: audience, JWKS: path})
		if err != nil {
			t.Fatal(err)
		}
		defer v.Close()
		claims := testissuer.Claims{Issuer: "https://id.example", Subject: "alice", Audience: []string{audience}, Expiry: time.Now().Add(time.Hour)}
		tokA := testissuer.Mint(t, a, claims)
		if _, err := v.Verify(t.Context(), tokA); err != nil {
			t.Fatal(err)
		}
		writeJWKS(t, path, time.Now().Add(time.Second), b) // a withdrawn
		time.Sleep(bearer.DefaultFileCheckInterval - time.Millisecond)
		synctest.Wait()
		if _, err := v.Verify(t.Context(), tokA); err != nil {
			t.Fatalf("before the check interval: %v", err)
		}
		time.Sleep(time.Millisecond)
		synctest.Wait()
		if _, err := v.Verify(t.Context(), tokA); !errors.Is(err, bearer.ErrInvalidToken) {
			t.Fatalf("after the check interval: %v", err)
		}
	})
}

// A JWKS URL is fetched again every RefreshInterval, and after a failure
// again after RefetchInterval.
func TestURLJWKSBackgroundRefresh(t *testing.T) {
	iss := testissuer.New(t) // outside the bubble: its goroutines wait on the network
	client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	synctest.Test(t, func(t *testing.T) {
		v, err := bearer.New(t.Context(), &bearer.Options{
			Issuer: iss.URL, Audience: audience, JWKS: iss.JWKSURL(), HTTPClient: client,
			RefreshInterval: time.Hour, RefetchInterval: time.Minute,
		})
		if err != nil {
			t.Fatal(err)
		}
		defer v.Close()
		hits := iss.JWKSHits()
		iss.SetDown(true)
		fetch := iss.NextFetch()
		time.Sleep(time.Hour)
		<-fetch // the refresh reached the issuer
		synctest.Wait()
		if got := iss.JWKSHits() - hits; got != 1 {
			t.Fatalf("after an hour: %d fetches, want 1", got)
		}
		tok := testissuer.Mint(t, iss.Key("ed-1"), iss.Claims("alice", audience, time.Now()))
		if _, err := v.Verify(t.Context(), tok); err != nil {
			t.Fatalf("after a failed refresh: %v", err)
		}
		iss.SetDown(false)
		fetch = iss.NextFetch()
		time.Sleep(time.Minute) // retried after RefetchInterval, not an hour
		<-fetch
		synctest.Wait()
		if got := iss.JWKSHits() - hits; got != 2 {
			t.Fatalf("a minute after the failure: %d fetches, want 2", got)
		}
	})
}
