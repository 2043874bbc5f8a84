package images

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/ml-platform/ml-platform/e2e/cluster"
)

const storePassword = "e2e-password-42"

// storeServer is a server pod as the FeatureStore operator's managed mode
// runs it (operators/featurestore/internal/controller/featurestore/managed.go):
// uid 999, data on the claim "data", server files from the Secret "server".
func storeServer(img, name, dataPath string, scratch ...string) *corev1.Pod {
	pod := restrictedPod(name, img, 999, 999)
	pod.Labels["service"] = name
	mount(pod, "data", dataPath, claim("data-"+name))
	c := &pod.Spec.Containers[0]
	c.VolumeMounts = append(c.VolumeMounts, corev1.VolumeMount{Name: "server", MountPath: "/etc/mlplatform/server", ReadOnly: true})
	pod.Spec.Volumes = append(pod.Spec.Volumes, corev1.Volume{Name: "server", VolumeSource: corev1.VolumeSource{
		Secret: &corev1.SecretVolumeSource{SecretName: "server-" + name, DefaultMode: ptr.To[int32](0o440)},
	}})
	for _, s := range scratch {
		mount(pod, strings.ReplaceAll(strings.Trim(s, "/"), "/", "-"), s, corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}})
	}
	return pod
}

// client runs script with bash in a pod of img and returns its logs.
func client(t *testing.T, cs kubernetes.Interface, ns, name, img, script string) string {
	t.Helper()
	pod := restrictedPod(name, img, 999, 999)
	pod.Spec.Containers[0].Command = []string{"bash", "-c", script}
	createPod(t, cs, ns, pod)
	ok, logs := waitFinished(t, cs, ns, name)
	if !ok {
		t.Fatalf("client %s failed:\n%s", name, logs)
	}
	return logs
}

func createSecret(t *testing.T, cs kubernetes.Interface, ns, name string, data map[string]string) {
	t.Helper()
	if _, err := cs.CoreV1().Secrets(ns).Create(t.Context(), &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name}, StringData: data}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// TestRedisAuthenticatesAndPersists: an ACL user can write, an anonymous
// client cannot read, and the data survives a restart of the server pod.
func TestRedisAuthenticatesAndPersists(t *testing.T) {
	cs := cluster.Client(t)
	ns := restrictedNamespace(t, cs)
	img := image(t, "redis")
	createSecret(t, cs, ns, "server-redis", map[string]string{
		"users.acl": "user default off resetpass nocommands\nuser mlp on >" + storePassword + " ~* &* +@all -@admin -@dangerous\n",
	})
	createClaim(t, cs, ns, "data-redis")
	createService(t, cs, ns, "redis", 6379, false)
	server := func() *corev1.Pod {
		p := storeServer(img, "redis", "/data")
		c := &p.Spec.Containers[0]
		c.Command = []string{"redis-server"}
		c.Args = []string{"--aclfile", "/etc/mlplatform/server/users.acl", "--dir", "/data", "--appendonly", "yes", "--protected-mode", "no"}
		c.Ports = []corev1.ContainerPort{{ContainerPort: 6379}}
		c.ReadinessProbe = &corev1.Probe{ProbeHandler: corev1.ProbeHandler{Exec: &corev1.ExecAction{
			Command: []string{"redis-cli", "--user", "mlp", "--pass", storePassword, "--no-auth-warning", "ping"},
		}}, PeriodSeconds: 2}
		return p
	}
	createPod(t, cs, ns, server())
	waitReady(t, cs, ns, "redis")
	cli := "redis-cli -h redis --user mlp --pass " + storePassword + " --no-auth-warning "
	if out := client(t, cs, ns, "write", img, cli+"SET greeting persisted && "+cli+"GET greeting"); !strings.Contains(out, "persisted") {
		t.Fatalf("authenticated SET/GET: %q", out)
	}
	if out := client(t, cs, ns, "anonymous", img, "redis-cli -h redis GET greeting 2>&1 || true"); strings.Contains(out, "persisted") || !strings.Contains(out, "NOAUTH") {
		t.Errorf("anonymous GET: %q, want a NOAUTH error", out)
	}

	deletePod(t, cs, ns, "redis")
	createPod(t, cs, ns, server())
	waitReady(t, cs, ns, "redis")
	if out := client(t, cs, ns, "read", img, cli+"GET greeting"); strings.TrimSpace(out) != "persisted" {
		t.Errorf("GET after restart: %q, want persisted", out)
	}
}

// TestPostgresAuthenticatesAndPersists: the user from POSTGRES_USER with
// the password from POSTGRES_PASSWORD_FILE can write, a wrong password is
// refused, and the data survives a restart of the server pod.
func TestPostgresAuthenticatesAndPersists(t *testing.T) {
	cs := cluster.Client(t)
	ns := restrictedNamespace(t, cs)
	img := image(t, "postgres")
	createSecret(t, cs, ns, "server-postgres", map[string]string{"password": storePassword})
	createClaim(t, cs, ns, "data-postgres")
	createService(t, cs, ns, "postgres", 5432, false)
	server := func() *corev1.Pod {
		p := storeServer(img, "postgres", "/var/lib/postgresql/data", "/var/run/postgresql")
		c := &p.Spec.Containers[0]
		c.Env = []corev1.EnvVar{
			{Name: "POSTGRES_USER", Value: "mlp"},
			{Name: "POSTGRES_DB", Value: "mlp"},
			{Name: "POSTGRES_PASSWORD_FILE", Value: "/etc/mlplatform/server/password"},
			{Name: "PGDATA", Value: "/var/lib/postgresql/data/pgdata"},
		}
		c.Ports = []corev1.ContainerPort{{ContainerPort: 5432}}
		c.ReadinessProbe = &corev1.Probe{ProbeHandler: corev1.ProbeHandler{Exec: &corev1.ExecAction{
			Command: []string{"pg_isready", "-h", "127.0.0.1", "-U", "mlp", "-d", "mlp"},
		}}, PeriodSeconds: 2}
		return p
	}
	createPod(t, cs, ns, server())
	waitReady(t, cs, ns, "postgres")
	psql := "PGPASSWORD=" + storePassword + " psql -h postgres -U mlp -d mlp -v ON_ERROR_STOP=1 -tA -c "
	if out := client(t, cs, ns, "write", img, psql+"'CREATE TABLE t (v text)' && "+psql+`"INSERT INTO t VALUES ('persisted')" && `+psql+"'SELECT v FROM t'"); !strings.Contains(out, "persisted") {
		t.Fatalf("authenticated write: %q", out)
	}
	if out := client(t, cs, ns, "wrong", img, "PGPASSWORD=wrong psql -h postgres -U mlp -d mlp -tA -c 'SELECT v FROM t' 2>&1 || true"); strings.Contains(out, "persisted") || !strings.Contains(out, "password authentication failed") {
		t.Errorf("wrong password: %q, want password authentication failed", out)
	}

	deletePod(t, cs, ns, "postgres")
	createPod(t, cs, ns, server())
	waitReady(t, cs, ns, "postgres")
	if out := client(t, cs, ns, "read", img, psql+"'SELECT v FROM t'"); strings.TrimSpace(out) != "persisted" {
		t.Errorf("SELECT after restart: %q, want persisted", out)
	}
}
