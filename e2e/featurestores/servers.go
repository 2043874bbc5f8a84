package featurestores

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	featuresv1alpha1 "github.com/ml-platform/ml-platform/apis/features/v1alpha1"
	"github.com/ml-platform/ml-platform/e2e/quickstart"
	"github.com/ml-platform/ml-platform/e2e/steps"
)

const serverTimeout = 5 * time.Minute

// servers are the shared PostgreSQL and Redis of one test run, and the
// Secret (in their namespace) holding the admin credentials, for the
// suite's own inspection pods.
type servers struct {
	ns          string
	pgHost      string
	redisHost   string
	adminSecret string
}

// password is a fresh random password: the suite's credentials are never
// written into a pod spec or the test output.
func password(t *testing.T) string {
	b := make([]byte, 18)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b)
}

// startServers runs PostgreSQL and Redis from the platform's images in a
// namespace of their own, creates the non-superuser PostgreSQL admin the
// operator needs (LOGIN CREATEDB CREATEROLE) and the Redis admin, and puts
// the admin credentials in the operator's namespace, where backends read
// them.
func startServers(t *testing.T, e *steps.Env) *servers {
	t.Helper()
	ns := e.Namespace(t, "e2e-shared-stores")
	s := &servers{ns: ns, pgHost: "postgres." + ns + ".svc.cluster.local", redisHost: "redis." + ns + ".svc.cluster.local", adminSecret: "admin"}
	superPass, adminPass := password(t), password(t)
	createSecret(t, e, ns, s.adminSecret, map[string]string{
		"superuser": superPass, "username": "mlpadmin", "password": adminPass,
		"users.acl": "user default off resetpass nocommands\nuser mlpadmin on >" + adminPass + " ~* &* +@all\n",
	})
	for _, name := range []string{"postgres", "redis"} {
		port := map[string]int32{"postgres": 5432, "redis": 6379}[name]
		svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}, Spec: corev1.ServiceSpec{
			Selector: map[string]string{"e2e-server": name},
			Ports:    []corev1.ServicePort{{Port: port, TargetPort: intstr.FromInt32(port)}},
		}}
		if err := e.C.Create(t.Context(), svc); err != nil {
			t.Fatal(err)
		}
	}
	createServer(t, e, ns, postgresServer(t, s.adminSecret))
	createServer(t, e, ns, redisServer(t, s.adminSecret))
	// The image's POSTGRES_USER is a superuser, which the operator refuses
	// to work with: the admin is a role with only what it needs.
	create := steps.ClientPod("create-admin", steps.Image(t, "postgres"),
		"psql -h postgres -U postgres -d postgres -v ON_ERROR_STOP=1 -v pass=\"$ADMIN_PASSWORD\" <<'SQL'\n"+
			"CREATE ROLE mlpadmin LOGIN CREATEDB CREATEROLE PASSWORD :'pass';\nSQL\n")
	steps.SecretEnv(create, "PGPASSWORD", s.adminSecret, "superuser")
	steps.SecretEnv(create, "ADMIN_PASSWORD", s.adminSecret, "password")
	e.MustRun(t, ns, create)
	opSecret := "e2e-admin-" + ns
	for _, kind := range []string{"pg", "redis"} {
		createSecret(t, e, quickstart.Namespace, opSecret+"-"+kind, map[string]string{"username": "mlpadmin", "password": adminPass})
		name := opSecret + "-" + kind
		t.Cleanup(func() {
			_ = e.CS.CoreV1().Secrets(quickstart.Namespace).Delete(context.Background(), name, metav1.DeleteOptions{})
		})
	}
	return s
}

// postgresServer is PostgreSQL as the images suite runs it, on an emptyDir:
// the suite needs no persistence across server restarts.
func postgresServer(t *testing.T, secret string) *corev1.Pod {
	p := server("postgres", steps.Image(t, "postgres"), "/var/lib/postgresql/data", "/var/run/postgresql")
	c := &p.Spec.Containers[0]
	c.Env = []corev1.EnvVar{
		{Name: "POSTGRES_USER", Value: "postgres"},
		{Name: "POSTGRES_DB", Value: "postgres"},
		{Name: "POSTGRES_PASSWORD_FILE", Value: "/etc/mlplatform/server/superuser"},
		{Name: "PGDATA", Value: "/var/lib/postgresql/data/pgdata"},
	}
	c.Ports = []corev1.ContainerPort{{ContainerPort: 5432}}
	c.ReadinessProbe = &corev1.Probe{ProbeHandler: corev1.ProbeHandler{Exec: &corev1.ExecAction{
		Command: []string{"pg_isready", "-h", "127.0.0.1", "-U", "postgres", "-d", "postgres"},
	}}, PeriodSeconds: 2}
	serverSecret(p, secret)
	return p
}

// redisServer loads its users from a read-only aclfile: the backend says
// aclFile: false, so the operator does not try ACL SAVE.
func redisServer(t *testing.T, secret string) *corev1.Pod {
	p := server("redis", steps.Image(t, "redis"), "/data")
	c := &p.Spec.Containers[0]
	c.Command = []string{"redis-server"}
	c.Args = []string{"--aclfile", "/etc/mlplatform/server/users.acl", "--dir", "/data", "--protected-mode", "no"}
	c.Ports = []corev1.ContainerPort{{ContainerPort: 6379}}
	c.ReadinessProbe = &corev1.Probe{ProbeHandler: corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{Port: intstr.FromInt32(6379)}}, PeriodSeconds: 2}
	serverSecret(p, secret)
	return p
}

func server(name, image string, dirs ...string) *corev1.Pod {
	p := steps.ClientPod(name, image, "")
	p.Labels["e2e-server"] = name
	p.Spec.RestartPolicy = corev1.RestartPolicyAlways
	p.Spec.SecurityContext.RunAsUser = ptr.To[int64](999)
	p.Spec.SecurityContext.RunAsGroup = ptr.To[int64](999)
	p.Spec.SecurityContext.FSGroup = ptr.To[int64](999)
	c := &p.Spec.Containers[0]
	c.Command = nil
	c.Env = nil
	for _, d := range dirs {
		vol := strings.ReplaceAll(strings.Trim(d, "/"), "/", "-")
		p.Spec.Volumes = append(p.Spec.Volumes, corev1.Volume{Name: vol, VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}})
		c.VolumeMounts = append(c.VolumeMounts, corev1.VolumeMount{Name: vol, MountPath: d})
	}
	return p
}

func serverSecret(p *corev1.Pod, secret string) {
	p.Spec.Volumes = append(p.Spec.Volumes, corev1.Volume{Name: "server", VolumeSource: corev1.VolumeSource{
		Secret: &corev1.SecretVolumeSource{SecretName: secret, DefaultMode: ptr.To[int32](0o440)},
	}})
	c := &p.Spec.Containers[0]
	c.VolumeMounts = append(c.VolumeMounts, corev1.VolumeMount{Name: "server", MountPath: "/etc/mlplatform/server", ReadOnly: true})
}

func createServer(t *testing.T, e *steps.Env, ns string, p *corev1.Pod) {
	t.Helper()
	p.Namespace = ns
	if err := e.C.Create(t.Context(), p); err != nil {
		t.Fatal(err)
	}
	steps.Until(t, "server "+p.Name+" to be ready", serverTimeout, func(ctx context.Context) (bool, error) {
		got, err := e.CS.CoreV1().Pods(ns).Get(ctx, p.Name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		for _, c := range got.Status.Conditions {
			if c.Type == corev1.PodReady {
				return c.Status == corev1.ConditionTrue, nil
			}
		}
		return false, nil
	})
}

func createSecret(t *testing.T, e *steps.Env, ns, name string, data map[string]string) {
	t.Helper()
	s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}, StringData: data}
	if err := e.C.Create(t.Context(), s); err != nil {
		t.Fatalf("create Secret %s/%s: %v", ns, name, err)
	}
}

// backends registers the shared servers as two FeatureStoreBackends named
// after the servers' namespace, deleted at the end of the test.
func (s *servers) backends(t *testing.T, e *steps.Env) (pg, redis string) {
	t.Helper()
	pg, redis = s.ns+"-pg", s.ns+"-redis"
	opSecret := "e2e-admin-" + s.ns
	objs := []*featuresv1alpha1.FeatureStoreBackend{
		{ObjectMeta: metav1.ObjectMeta{Name: pg}, Spec: featuresv1alpha1.FeatureStoreBackendSpec{PostgreSQL: &featuresv1alpha1.PostgreSQLBackend{
			Host: s.pgHost, Port: 5432, AdminDatabase: "postgres", SSLMode: "disable",
			AdminSecret: featuresv1alpha1.AdminSecretReference{Name: opSecret + "-pg"},
		}}},
		{ObjectMeta: metav1.ObjectMeta{Name: redis}, Spec: featuresv1alpha1.FeatureStoreBackendSpec{Redis: &featuresv1alpha1.RedisBackend{
			Host: s.redisHost, Port: 6379, ACLFile: ptr.To(false),
			AdminSecret: featuresv1alpha1.AdminSecretReference{Name: opSecret + "-redis"},
		}}},
	}
	for _, b := range objs {
		if err := e.C.Create(t.Context(), b); err != nil {
			t.Fatalf("create FeatureStoreBackend %s: %v", b.Name, err)
		}
		t.Cleanup(func() { _ = e.C.Delete(context.Background(), b) })
	}
	for _, b := range objs {
		e.WaitCondition(t, b, "Ready", metav1.ConditionTrue, "Stalled", serverTimeout)
	}
	return pg, redis
}
