package redisstore

import (
	"errors"
	"fmt"
	"net/url"
	"strings"

	"github.com/redis/go-redis/v9"
)

// URL schemes of a Redis Cluster. go-redis's ParseClusterURL takes redis://
// and rediss://; the store gives the cluster a scheme of its own so that a
// URL says which kind of deployment it names.
const (
	clusterScheme    = "redis-cluster"
	clusterTLSScheme = "rediss-cluster"
)

// parseClient turns rawURL into a client that honours context deadlines
// (ContextTimeoutEnabled). It recognizes:
//
//	redis-cluster://[[user]:password@]host:port[?addr=host:port&addr=...]   Redis Cluster seed nodes
//	rediss-cluster://...                                                   the same over TLS
//	redis://[[user]:password@]host:port[/db]?master_name=NAME[&addr=host:port...]
//	                                                                         Sentinel (go-redis's failover form)
//	redis://, rediss://, unix://                                            one server
//
// Errors never contain the URL or any password in it.
func parseClient(rawURL string) (redis.UniversalClient, error) {
	u, err := url.Parse(rawURL)
	if err != nil {
		// url.Parse's errors quote the whole URL, password included.
		if ue, ok := errors.AsType[*url.Error](err); ok {
			err = ue.Err
		}
		return nil, fmt.Errorf("redisstore: parse URL: %w", err)
	}
	secrets := urlSecrets(u)
	scrub := func(err error) error {
		return scrubbed(fmt.Errorf("redisstore: parse URL: %w", unwrapURLError(err)), secrets)
	}
	switch u.Scheme {
	case clusterScheme, clusterTLSScheme:
		if u.Host == "" || u.Hostname() == "" {
			return nil, errors.New("redisstore: parse URL: a " + u.Scheme + ":// URL needs a seed node, host:port")
		}
		if u.Path != "" && u.Path != "/" {
			return nil, errors.New("redisstore: parse URL: a Redis Cluster has only database 0; the URL must have no path")
		}
		t := *u
		t.Scheme = strings.TrimSuffix(u.Scheme, "-cluster")
		o, err := redis.ParseClusterURL(t.String())
		if err != nil {
			return nil, scrub(err)
		}
		o.ContextTimeoutEnabled = true
		return construct(func() redis.UniversalClient { return redis.NewClusterClient(o) })
	case "redis", "rediss":
		if q := u.Query(); q.Has("master_name") {
			if q.Get("master_name") == "" {
				return nil, errors.New("redisstore: parse URL: master_name is empty; Sentinel needs the name of the monitored primary")
			}
			if u.Hostname() == "" {
				return nil, errors.New("redisstore: parse URL: a Sentinel URL needs a sentinel address, host:port")
			}
			o, err := redis.ParseFailoverURL(rawURL)
			if err != nil {
				return nil, scrub(err)
			}
			o.ContextTimeoutEnabled = true
			return construct(func() redis.UniversalClient { return redis.NewFailoverClient(o) })
		}
	}
	o, err := redis.ParseURL(rawURL)
	if err != nil {
		return nil, scrub(err)
	}
	o.ContextTimeoutEnabled = true
	return construct(func() redis.UniversalClient { return redis.NewClient(o) })
}

// construct calls a go-redis constructor, which panics on some options that
// a URL can set (pool_size=-1): a bad URL is bad runtime data, so it becomes
// an error. The constructors release what they allocated before they panic.
func construct(f func() redis.UniversalClient) (c redis.UniversalClient, err error) {
	defer func() {
		if r := recover(); r != nil {
			c, err = nil, fmt.Errorf("redisstore: URL options: %v", r)
		}
	}()
	return f(), nil
}

// urlSecrets are the passwords a URL carries, in its user information or in
// a password query parameter (the primary's password in the Sentinel form).
func urlSecrets(u *url.URL) []string {
	var s []string
	if u.User != nil {
		if pw, ok := u.User.Password(); ok && pw != "" {
			s = append(s, pw, url.QueryEscape(pw), url.PathEscape(pw))
		}
	}
	for k, vs := range u.Query() {
		if strings.Contains(strings.ToLower(k), "password") {
			for _, v := range vs {
				if v != "" {
					s = append(s, v, url.QueryEscape(v))
				}
			}
		}
	}
	return s
}

func unwrapURLError(err error) error {
	if ue, ok := errors.AsType[*url.Error](err); ok {
		return ue.Err
	}
	return err
}

// scrubbed replaces every secret in err's message with "xxxxx". go-redis
// quotes option values in some of its errors; none should ever be a
// password, but a URL written wrongly can put one anywhere.
func scrubbed(err error, secrets []string) error {
	msg := err.Error()
	clean := msg
	for _, s := range secrets {
		clean = strings.ReplaceAll(clean, s, "xxxxx")
	}
	if clean == msg {
		return err
	}
	return errors.New(clean)
}
