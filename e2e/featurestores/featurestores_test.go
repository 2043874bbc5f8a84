package featurestores

import (
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	commonv1alpha1 "github.com/ml-platform/ml-platform/apis/common/v1alpha1"
	featuresv1alpha1 "github.com/ml-platform/ml-platform/apis/features/v1alpha1"
	"github.com/ml-platform/ml-platform/e2e/steps"
)

const (
	readyTimeout  = 10 * time.Minute
	deleteTimeout = 5 * time.Minute
)

// tenant is one tenant's FeatureStore on the shared backends, and the
// Secret in the tenant's namespace holding its credentials as the suite's
// probe pods read them (from the published feature_store.yaml).
type tenant struct {
	ns, project string
	fs          *featuresv1alpha1.FeatureStore
	creds       string
}

// feastConfig is the part of feature_store.yaml the probes use.
type feastConfig struct {
	OnlineStore struct {
		ConnectionString string `json:"connection_string"`
	} `json:"online_store"`
	OfflineStore struct {
		Host     string `json:"host"`
		Port     int    `json:"port"`
		Database string `json:"database"`
		User     string `json:"user"`
		Password string `json:"password"`
	} `json:"offline_store"`
}

func newTenant(t *testing.T, e *steps.Env, name, pg, redis string, policy commonv1alpha1.DeletionPolicy) *tenant {
	t.Helper()
	ns := e.Namespace(t, "e2e-tenant-"+name)
	// Project names are unique per run: the shared Redis keys end in them.
	project := strings.ReplaceAll(ns, "-", "_")
	fs := &featuresv1alpha1.FeatureStore{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "store"},
		Spec: featuresv1alpha1.FeatureStoreSpec{
			Project:        project,
			OnlineStore:    featuresv1alpha1.StoreSource{Backend: redis},
			OfflineStore:   featuresv1alpha1.StoreSource{Backend: pg},
			Registry:       featuresv1alpha1.StoreSource{Backend: pg},
			DeletionPolicy: policy,
		},
	}
	if err := e.C.Create(t.Context(), fs); err != nil {
		t.Fatalf("create FeatureStore in %s: %v", ns, err)
	}
	return &tenant{ns: ns, project: project, fs: fs, creds: "probe-credentials"}
}

// ready waits for the tenant's FeatureStore and copies the credentials of
// its feature_store.yaml into a Secret of the tenant's namespace, as
// environment variables for the probes (psql and redis-cli read them).
func (tn *tenant) ready(t *testing.T, e *steps.Env) {
	t.Helper()
	e.WaitCondition(t, tn.fs, "Ready", metav1.ConditionTrue, "Stalled", readyTimeout)
	ref := tn.fs.Status.ClientConfig
	if ref == nil || tn.fs.Status.OfflineStore == nil || tn.fs.Status.OnlineStore == nil || tn.fs.Status.Registry == nil {
		t.Fatalf("Ready FeatureStore %s without client configuration or provisioned stores: %+v", tn.ns, tn.fs.Status)
	}
	var secret corev1.Secret
	if err := e.C.Get(t.Context(), client.ObjectKey{Namespace: tn.ns, Name: ref.SecretName}, &secret); err != nil {
		t.Fatal(err)
	}
	var cfg feastConfig
	if err := yaml.Unmarshal(secret.Data[ref.Key], &cfg); err != nil {
		t.Fatalf("feature_store.yaml of %s does not parse", tn.ns) // never the content: it holds passwords
	}
	env := map[string]string{
		"PGHOST": cfg.OfflineStore.Host, "PGPORT": strconv.Itoa(cfg.OfflineStore.Port),
		"PGUSER": cfg.OfflineStore.User, "PGPASSWORD": cfg.OfflineStore.Password, "PGSSLMODE": "disable",
	}
	parts := strings.Split(cfg.OnlineStore.ConnectionString, ",")
	if hostPort := strings.SplitN(parts[0], ":", 2); len(hostPort) == 2 {
		env["REDIS_HOST"], env["REDIS_PORT"] = hostPort[0], hostPort[1]
	}
	for _, p := range parts[1:] {
		if k, v, ok := strings.Cut(p, "="); ok {
			env["REDIS_"+strings.ToUpper(k)] = v
		}
	}
	for _, k := range []string{"PGHOST", "PGUSER", "PGPASSWORD", "REDIS_HOST", "REDIS_USERNAME", "REDIS_PASSWORD"} {
		if env[k] == "" {
			t.Fatalf("feature_store.yaml of %s lacks %s", tn.ns, k)
		}
	}
	createSecret(t, e, tn.ns, tn.creds, env)
}

// probe runs script in the tenant's namespace with the tenant's credentials
// in the environment, and returns its output; the script's own exit status
// is printed as "exit=N" so that refusals can be asserted.
func (tn *tenant) probe(t *testing.T, e *steps.Env, name, image, script string) string {
	t.Helper()
	p := steps.ClientPod(name, image, script+"\necho \"exit=$?\"")
	p.Spec.Containers[0].EnvFrom = []corev1.EnvFromSource{{SecretRef: &corev1.SecretEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: tn.creds}}}}
	return e.MustRun(t, tn.ns, p)
}

func (tn *tenant) psql(t *testing.T, e *steps.Env, name, db string) string {
	return tn.probe(t, e, name, steps.Image(t, "postgres"),
		fmt.Sprintf(`psql -d %q -v ON_ERROR_STOP=1 -tA -c "SELECT 'connected'" 2>&1`, db))
}

func (tn *tenant) redis(t *testing.T, e *steps.Env, name, args string) string {
	return tn.probe(t, e, name, steps.Image(t, "redis"),
		`redis-cli -h "$REDIS_HOST" -p "$REDIS_PORT" --user "$REDIS_USERNAME" --pass "$REDIS_PASSWORD" --no-auth-warning `+args+` 2>&1`)
}

// TestSharedBackendsIsolateTenants: two tenants' FeatureStores on the same
// PostgreSQL and Redis each reach their own database and keys, and neither
// can read the other's; Delete removes a store's databases and users,
// Retain keeps them.
func TestSharedBackendsIsolateTenants(t *testing.T) {
	e := steps.Connect(t)
	srv := startServers(t, e)
	pg, redis := srv.backends(t, e)
	a := newTenant(t, e, "a", pg, redis, commonv1alpha1.DeletionPolicyDelete)
	b := newTenant(t, e, "b", pg, redis, commonv1alpha1.DeletionPolicyRetain)
	a.ready(t, e)
	b.ready(t, e)

	for _, pair := range [][2]*tenant{{a, b}, {b, a}} {
		own, other := pair[0], pair[1]
		out := own.psql(t, e, "pg-own", own.fs.Status.OfflineStore.Database)
		if !strings.Contains(out, "connected") || !strings.Contains(out, "exit=0") {
			t.Fatalf("%s cannot use its own database: %q", own.ns, out)
		}
		out = own.psql(t, e, "pg-other", other.fs.Status.OfflineStore.Database)
		if strings.Contains(out, "exit=0") || !strings.Contains(out, "permission denied") {
			t.Errorf("%s's credentials on %s's database: %q, want permission denied", own.ns, other.ns, out)
		}
		out = own.psql(t, e, "pg-registry", other.fs.Status.Registry.Database)
		if strings.Contains(out, "exit=0") || !strings.Contains(out, "permission denied") {
			t.Errorf("%s's credentials on %s's registry: %q, want permission denied", own.ns, other.ns, out)
		}
		key := "e2e_key_" + own.project
		if out := own.redis(t, e, "redis-own", "HSET "+key+" f written && echo; "+redisCLI+"HMGET "+key+" f"); !strings.Contains(out, "written") {
			t.Fatalf("%s cannot use its own keys: %q", own.ns, out)
		}
		otherKey := "e2e_key_" + other.project
		if out := own.redis(t, e, "redis-other", "HMGET "+otherKey+" f"); strings.Contains(out, "written") || !strings.Contains(out, "NOPERM") {
			t.Errorf("%s's credentials on %s's keys: %q, want NOPERM", own.ns, other.ns, out)
		}
	}

	deleteStore(t, e, a)
	deleteStore(t, e, b)
	if out := srv.inspect(t, e, "after-delete", a, b); !strings.Contains(out, "a-database=0 a-role=0 a-user=0") || !strings.Contains(out, "b-database=1 b-role=1 b-user=1") {
		t.Errorf("after deleting the Delete and the Retain stores: %q; want a's gone, b's kept", out)
	}
}

// redisCLI is the probes' redis-cli with the tenant's credentials, for
// scripts that run more than one command.
const redisCLI = `redis-cli -h "$REDIS_HOST" -p "$REDIS_PORT" --user "$REDIS_USERNAME" --pass "$REDIS_PASSWORD" --no-auth-warning `

func deleteStore(t *testing.T, e *steps.Env, tn *tenant) {
	t.Helper()
	if err := e.C.Delete(t.Context(), tn.fs); err != nil {
		t.Fatal(err)
	}
	e.Gone(t, tn.fs, deleteTimeout)
}

// inspect counts, as the servers' admin, each tenant's database, login role
// and Redis user: "a-database=N a-role=N a-user=N ..." on one line.
func (s *servers) inspect(t *testing.T, e *steps.Env, name string, tenants ...*tenant) string {
	t.Helper()
	var pgScript, redisScript strings.Builder
	for i, tn := range tenants {
		id := string(rune('a' + i))
		fmt.Fprintf(&pgScript, `printf '%s-database=%%s %s-role=%%s ' "$(psql -h postgres -U mlpadmin -d postgres -tA -c "SELECT count(*) FROM pg_database WHERE datname = '%s'")" "$(psql -h postgres -U mlpadmin -d postgres -tA -c "SELECT count(*) FROM pg_roles WHERE rolname = '%s'")"
`, id, id, tn.fs.Status.OfflineStore.Database, tn.fs.Status.OfflineStore.User)
		fmt.Fprintf(&redisScript, `printf '%s-user=%%s ' "$(redis-cli -h redis --user mlpadmin --pass "$ADMIN_PASSWORD" --no-auth-warning ACL USERS | grep -cx '%s')"
`, id, tn.fs.Status.OnlineStore.User)
	}
	pgPod := steps.ClientPod(name+"-pg", steps.Image(t, "postgres"), pgScript.String())
	steps.SecretEnv(pgPod, "PGPASSWORD", s.adminSecret, "password")
	redisPod := steps.ClientPod(name+"-redis", steps.Image(t, "redis"), redisScript.String())
	steps.SecretEnv(redisPod, "ADMIN_PASSWORD", s.adminSecret, "password")
	pgOut, redisOut := e.MustRun(t, s.ns, pgPod), e.MustRun(t, s.ns, redisPod)
	// One line per tenant: "a-database=N a-role=N a-user=N".
	var lines []string
	pgFields, redisFields := strings.Fields(pgOut), strings.Fields(redisOut)
	for i := range tenants {
		if 2*i+1 < len(pgFields) && i < len(redisFields) {
			lines = append(lines, strings.Join([]string{pgFields[2*i], pgFields[2*i+1], redisFields[i]}, " "))
		}
	}
	return strings.Join(lines, "\n")
}
