package feastconfig

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net"
	"net/url"
	"strconv"
	"strings"

	"sigs.k8s.io/yaml"
)

// FeastVersion is the Feast release whose RepoConfig (feast/repo_config.py,
// RedisOnlineStoreConfig, PostgreSQLOfflineStoreConfig and the SQL
// registry's RegistryConfig) the types below mirror. Feast rejects unknown
// keys (its config models forbid extras), so the mirror holds only keys that
// release knows.
const FeastVersion = "0.40.1"

// RepoConfig mirrors the subset of Feast's RepoConfig the operator writes.
type RepoConfig struct {
	Project                       string         `json:"project"`
	Provider                      string         `json:"provider"`
	Registry                      RegistryConfig `json:"registry"`
	OnlineStore                   OnlineStore    `json:"online_store"`
	OfflineStore                  OfflineStore   `json:"offline_store"`
	EntityKeySerializationVersion int            `json:"entity_key_serialization_version"`
}

// RegistryConfig mirrors Feast's RegistryConfig for registry_type sql.
type RegistryConfig struct {
	RegistryType    string `json:"registry_type"`
	Path            string `json:"path"`
	CacheTTLSeconds int    `json:"cache_ttl_seconds"`
}

// OnlineStore mirrors RedisOnlineStoreConfig.
type OnlineStore struct {
	Type             string `json:"type"`
	RedisType        string `json:"redis_type"`
	ConnectionString string `json:"connection_string"`
}

// OfflineStore mirrors PostgreSQLOfflineStoreConfig.
type OfflineStore struct {
	Type     string `json:"type"`
	Host     string `json:"host"`
	Port     int    `json:"port"`
	Database string `json:"database"`
	DBSchema string `json:"db_schema"`
	User     string `json:"user"`
	Password string `json:"password"`
	SSLMode  string `json:"sslmode"`
}

// Postgres is how a client reaches one PostgreSQL store.
type Postgres struct {
	Host, Database, User, Password, SSLMode string
	Port                                    int
}

// Redis is how a client reaches the online store.
type Redis struct {
	Host, User, Password string
	Port                 int
	TLS                  bool
}

// Inputs are everything feature_store.yaml depends on.
type Inputs struct {
	Project  string
	Registry Postgres
	Offline  Postgres
	Online   Redis
}

// Build returns the configuration for in.
func Build(in Inputs) RepoConfig {
	return RepoConfig{
		Project:  in.Project,
		Provider: "local",
		Registry: RegistryConfig{
			RegistryType:    "sql",
			Path:            RegistryPath(in.Registry),
			CacheTTLSeconds: 60,
		},
		OnlineStore: OnlineStore{
			Type:             "redis",
			RedisType:        "redis",
			ConnectionString: RedisConnectionString(in.Online),
		},
		OfflineStore: OfflineStore{
			Type:     "postgres",
			Host:     in.Offline.Host,
			Port:     in.Offline.Port,
			Database: in.Offline.Database,
			DBSchema: "public",
			User:     in.Offline.User,
			Password: in.Offline.Password,
			SSLMode:  in.Offline.SSLMode,
		},
		EntityKeySerializationVersion: 2,
	}
}

// Render writes feature_store.yaml.
func Render(c RepoConfig) ([]byte, error) {
	return yaml.Marshal(c)
}

// Decode reads feature_store.yaml strictly: unknown keys are errors, as
// they are for Feast.
func Decode(data []byte) (RepoConfig, error) {
	var c RepoConfig
	j, err := yaml.YAMLToJSON(data)
	if err != nil {
		return c, err
	}
	dec := json.NewDecoder(bytes.NewReader(j))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&c); err != nil {
		return c, fmt.Errorf("feature_store.yaml does not match Feast %s: %w", FeastVersion, err)
	}
	return c, nil
}

// RegistryPath is the SQLAlchemy URL of the SQL registry (psycopg 3
// driver, as Feast uses).
func RegistryPath(p Postgres) string {
	u := url.URL{
		Scheme:   "postgresql+psycopg",
		User:     url.UserPassword(p.User, p.Password),
		Host:     net.JoinHostPort(p.Host, strconv.Itoa(p.Port)),
		Path:     "/" + p.Database,
		RawQuery: url.Values{"sslmode": {p.SSLMode}}.Encode(),
	}
	return u.String()
}

// RedisConnectionString is Feast's "host:port,key=value,..." format, whose
// parameters become redis-py keyword arguments. Values cannot contain
// commas, which generated passwords never do.
func RedisConnectionString(r Redis) string {
	parts := []string{net.JoinHostPort(r.Host, strconv.Itoa(r.Port)), "username=" + r.User, "password=" + r.Password}
	if r.TLS {
		parts = append(parts, "ssl=true")
	}
	return strings.Join(parts, ",")
}

// ParseRedisConnectionString reads a connection string the way Feast's
// RedisOnlineStore._parse_connection_string does: entries without "=" are
// host:port, the rest are parameters.
func ParseRedisConnectionString(s string) (addr string, params map[string]string, err error) {
	params = map[string]string{}
	for _, part := range strings.Split(s, ",") {
		k, v, ok := strings.Cut(part, "=")
		if !ok {
			if addr == "" {
				addr = part
			}
			continue
		}
		params[k] = v
	}
	if addr == "" {
		return "", nil, fmt.Errorf("no host:port in the Redis connection string")
	}
	return addr, params, nil
}
