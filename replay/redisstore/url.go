package redisstore

import (
	"errors"
	"net/url"
	"regexp"
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
// An error names the kind of problem and never any text of the URL: a
// password written without percent-encoding ends up anywhere (a '/' starts
// the path, a '?' the query, a '#' a fragment), and net/url and go-redis
// quote what they could not parse.
func parseClient(rawURL string) (redis.UniversalClient, error) {
	o, err := parseOptions(rawURL)
	if err != nil {
		return nil, err
	}
	return construct(func() redis.UniversalClient {
		switch {
		case o.cluster != nil:
			return redis.NewClusterClient(o.cluster)
		case o.failover != nil:
			return redis.NewFailoverClient(o.failover)
		}
		return redis.NewClient(o.single)
	})
}

// urlOptions are the options of one of the three kinds of client.
type urlOptions struct {
	single   *redis.Options
	failover *redis.FailoverOptions
	cluster  *redis.ClusterOptions
}

// parseOptions is parseClient's parser: the options of the client rawURL
// names, with ContextTimeoutEnabled.
func parseOptions(rawURL string) (urlOptions, error) {
	u, err := url.Parse(rawURL)
	if err != nil {
		return urlOptions{}, parseError(err)
	}
	switch {
	case u.Fragment != "" || strings.Contains(rawURL, "#"):
		// go-redis ignores a fragment: what follows a '#' in a password
		// would be dropped, and the rest taken for the host.
		return urlOptions{}, errors.New("redisstore: parse URL: a Redis URL has no fragment; write a '#' in a password as %23")
	case u.Scheme == "unix" && u.Port() != "":
		// go-redis ignores a unix URL's host. A port there is what is
		// left of user information cut short by a '/' in a password.
		return urlOptions{}, errors.New("redisstore: parse URL: a unix:// URL has no host:port; percent-encode a password's '/', '?', '#', '@' and '%'")
	case u.Opaque != "":
		return urlOptions{}, errors.New("redisstore: parse URL: the URL has no //host part")
	}
	if _, err := url.ParseQuery(u.RawQuery); err != nil {
		// u.Query() drops the pairs it cannot decode, a password among
		// them, without a word.
		return urlOptions{}, errors.New("redisstore: parse URL: malformed query; percent-encode a value's '%', '&' and ';'")
	}
	switch u.Scheme {
	case clusterScheme, clusterTLSScheme:
		if u.Host == "" || u.Hostname() == "" {
			return urlOptions{}, errors.New("redisstore: parse URL: a " + u.Scheme + ":// URL needs a seed node, host:port")
		}
		if u.Path != "" && u.Path != "/" {
			return urlOptions{}, errors.New("redisstore: parse URL: a Redis Cluster has only database 0; the URL must have no path")
		}
		t := *u
		t.Scheme = strings.TrimSuffix(u.Scheme, "-cluster")
		o, err := redis.ParseClusterURL(t.String())
		if err != nil {
			return urlOptions{}, parseError(err)
		}
		o.ContextTimeoutEnabled = true
		return urlOptions{cluster: o}, nil
	case "redis", "rediss":
		if q := u.Query(); q.Has("master_name") {
			if q.Get("master_name") == "" {
				return urlOptions{}, errors.New("redisstore: parse URL: master_name is empty; Sentinel needs the name of the monitored primary")
			}
			if u.Hostname() == "" {
				return urlOptions{}, errors.New("redisstore: parse URL: a Sentinel URL needs a sentinel address, host:port")
			}
			o, err := redis.ParseFailoverURL(rawURL)
			if err != nil {
				return urlOptions{}, parseError(err)
			}
			o.ContextTimeoutEnabled = true
			return urlOptions{failover: o}, nil
		}
	}
	o, err := redis.ParseURL(rawURL)
	if err != nil {
		return urlOptions{}, parseError(err)
	}
	o.ContextTimeoutEnabled = true
	return urlOptions{single: o}, nil
}

// goRedisOption matches go-redis's errors about one query option, whose
// name comes from go-redis's own list of options (never from the URL):
// "redis: invalid NAME number|duration|boolean: ...".
var goRedisOption = regexp.MustCompile(`^redis: invalid ([a-z_A-Z]+) (number|duration|boolean)\b`)

// parseError describes err, from net/url or go-redis's URL parsers, by its
// kind alone. Both quote the part of the URL they refused, which can be
// all or part of a password.
func parseError(err error) error {
	const prefix = "redisstore: parse URL: "
	if _, ok := errors.AsType[url.EscapeError](err); ok {
		return errors.New(prefix + "invalid %-escape; write a '%' in a password as %25")
	}
	if _, ok := errors.AsType[url.InvalidHostError](err); ok {
		return errors.New(prefix + "invalid character in the host; percent-encode a password's '/', '?', '#', '@' and '%'")
	}
	msg := err.Error()
	if ue, ok := errors.AsType[*url.Error](err); ok {
		msg = ue.Err.Error()
	}
	var kind string
	switch {
	case strings.HasPrefix(msg, "invalid port"):
		kind = "invalid port after the host; percent-encode a password's '/', '?', '#', '@' and '%'"
	case strings.Contains(msg, "invalid userinfo"):
		kind = "invalid character in the user information; percent-encode it"
	case strings.Contains(msg, "missing protocol scheme"), strings.HasPrefix(msg, "redis: invalid URL scheme"):
		kind = "unsupported scheme; want redis, rediss, unix, redis-cluster or rediss-cluster"
	case strings.HasPrefix(msg, "redis: invalid database number"):
		kind = "invalid database number; want /N, a number"
	case strings.HasPrefix(msg, "redis: invalid URL path"):
		kind = "invalid path; want /N, a database number (percent-encode a password's '/')"
	case strings.HasPrefix(msg, "redis: empty unix socket path"):
		kind = "empty unix socket path"
	case strings.HasPrefix(msg, "redis: unable to parse addr param"):
		kind = "invalid addr parameter; want host:port"
	case strings.HasPrefix(msg, "redis: unexpected option"):
		// The names are the URL's: a misplaced password could be one.
		kind = "unknown query option"
	default:
		if m := goRedisOption.FindStringSubmatch(msg); m != nil {
			kind = "invalid value of option " + m[1] + "; want a " + m[2]
		} else {
			kind = "malformed URL"
		}
	}
	return errors.New(prefix + kind)
}

// construct calls a go-redis constructor, which panics on some options that
// a URL can set (pool_size=-1): a bad URL is bad runtime data, so it becomes
// an error. The constructors release what they allocated before they panic.
func construct(f func() redis.UniversalClient) (c redis.UniversalClient, err error) {
	defer func() {
		if r := recover(); r != nil {
			c, err = nil, errors.New("redisstore: URL options: go-redis cannot make a client of them (a size or count out of range)")
		}
	}()
	return f(), nil
}
