package featurestore

import (
	"context"
	"fmt"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	commonv1alpha1 "github.com/ml-platform/ml-platform/apis/common/v1alpha1"
	featuresv1alpha1 "github.com/ml-platform/ml-platform/apis/features/v1alpha1"
	"github.com/ml-platform/ml-platform/operators/featurestore/internal/feastconfig"
	"github.com/ml-platform/ml-platform/operators/featurestore/internal/provisioner/postgres"
	"github.com/ml-platform/ml-platform/operators/featurestore/internal/provisioner/redis"
	"github.com/ml-platform/ml-platform/shared/apply"
	"github.com/ml-platform/ml-platform/shared/podsecurity"
)

// Managed servers run as this uid, the one the official postgres and redis
// images create for their servers.
const managedUID = 999

// The user and database of managed servers: the server is dedicated to one
// FeatureStore, so no per-store names are needed.
const managedUser = "feast"

// Ports of the managed servers.
const (
	managedPostgresPort int32 = 5432
	managedRedisPort    int32 = 6379
)

// managedServerComponent is the app.kubernetes.io/component label of the
// managed servers' pods.
const managedServerComponent = "featurestore-server"

// Managed server names.
func managedPostgresName(fs string) string { return fs + "-postgres" }
func managedRedisName(fs string) string    { return fs + "-redis" }

// ensureManagedPostgres runs the one PostgreSQL that the offline store and
// the registry share when managed, and checks it as the store's user.
func (r *Reconciler) ensureManagedPostgres(ctx context.Context, s *scope) (storeResult, error) {
	if s.managedPostgres != nil {
		return *s.managedPostgres, nil
	}
	res, err := r.ensureManagedServer(ctx, s, r.managedPostgres(s.fs), func(ctx context.Context, host, password string) error {
		srv := postgres.Server{Host: host, Port: 5432, SSLMode: "disable"}
		conn, err := postgres.Connect(ctx, srv, managedUser, password, managedUser)
		if err != nil {
			return err
		}
		return conn.Close(ctx)
	}, func(host, password string, res *storeResult) {
		res.postgres = feastconfig.Postgres{Host: host, Port: 5432, Database: managedUser, User: managedUser, Password: password, SSLMode: "disable"}
		res.provisioned.Database = managedUser
	})
	s.managedPostgres = &res
	return res, err
}

// managedPostgres describes the FeatureStore's managed PostgreSQL.
func (r *Reconciler) managedPostgres(fs *featuresv1alpha1.FeatureStore) managedServer {
	return managedServer{
		name:  managedPostgresName(fs.Name),
		image: r.Images.Postgres,
		port:  managedPostgresPort,
		files: func(password string) map[string][]byte { return map[string][]byte{"password": []byte(password)} },
		container: func(c *corev1.Container) {
			c.Env = []corev1.EnvVar{
				{Name: "POSTGRES_USER", Value: managedUser},
				{Name: "POSTGRES_DB", Value: managedUser},
				// The image reads the password from this file; the
				// password itself never appears in the pod spec.
				{Name: "POSTGRES_PASSWORD_FILE", Value: "/etc/mlplatform/server/password"},
				{Name: "PGDATA", Value: "/var/lib/postgresql/data/pgdata"},
			}
			c.ReadinessProbe = &corev1.Probe{ProbeHandler: corev1.ProbeHandler{Exec: &corev1.ExecAction{
				Command: []string{"pg_isready", "-h", "127.0.0.1", "-U", managedUser, "-d", managedUser},
			}}, PeriodSeconds: 10}
		},
		dataPath: "/var/lib/postgresql/data",
		scratch:  []string{"/var/run/postgresql", "/tmp"},
		source:   managedPostgresSource(fs),
	}
}

// managedPostgresSource sizes the one PostgreSQL the offline store and the
// registry share: the managed settings of whichever is managed, and when
// both are, the offline store's. Those of the registry then count only if
// they are the same (registrySettingsIgnored says when not): choosing the
// offline store's keeps the servers of existing FeatureStores as they
// were, whose volume claims cannot change.
func managedPostgresSource(fs *featuresv1alpha1.FeatureStore) *featuresv1alpha1.ManagedServer {
	if fs.Spec.OfflineStore.Managed != nil {
		return fs.Spec.OfflineStore.Managed
	}
	return fs.Spec.Registry.Managed
}

// registrySettingsIgnored reports whether both PostgreSQL stores are
// managed with different settings, of which the registry's are ignored.
func registrySettingsIgnored(fs *featuresv1alpha1.FeatureStore) bool {
	offline, registry := fs.Spec.OfflineStore.Managed, fs.Spec.Registry.Managed
	return offline != nil && registry != nil && !equality.Semantic.DeepEqual(offline, registry)
}

func (r *Reconciler) ensureManagedRedis(ctx context.Context, s *scope) (storeResult, error) {
	return r.ensureManagedServer(ctx, s, managedServer{
		name:  managedRedisName(s.fs.Name),
		image: r.Images.Redis,
		port:  managedRedisPort,
		files: func(password string) map[string][]byte {
			return map[string][]byte{"users.acl": []byte("user default off resetpass nocommands\nuser " + managedUser + " on >" + password + " ~* &* +@all -@admin -@dangerous\n")}
		},
		container: func(c *corev1.Container) {
			c.Command = []string{"redis-server"}
			c.Args = []string{"--aclfile", "/etc/mlplatform/server/users.acl", "--dir", "/data", "--appendonly", "yes", "--protected-mode", "no"}
			c.ReadinessProbe = &corev1.Probe{ProbeHandler: corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{Port: intstr.FromInt32(6379)}}, PeriodSeconds: 10}
		},
		dataPath: "/data",
		scratch:  []string{"/tmp"},
		source:   s.fs.Spec.OnlineStore.Managed,
	}, func(ctx context.Context, host, password string) error {
		return redis.Verify(ctx, redis.Server{Host: host, Port: 6379}, redis.Store{User: managedUser, Project: s.fs.Spec.Project}, password)
	}, func(host, password string, res *storeResult) {
		res.redis = feastconfig.Redis{Host: host, Port: 6379, User: managedUser, Password: password}
	})
}

// managedServer describes one dedicated server.
type managedServer struct {
	name      string
	image     string
	port      int32
	files     func(password string) map[string][]byte
	container func(*corev1.Container)
	dataPath  string
	scratch   []string
	source    *featuresv1alpha1.ManagedServer
}

// managedLoginRetry is how soon a ready managed server that refused the
// store's login is tried again.
const managedLoginRetry = 5 * time.Second

func (r *Reconciler) ensureManagedServer(ctx context.Context, s *scope, m managedServer,
	verify func(ctx context.Context, host, password string) error, fill func(host, password string, res *storeResult)) (storeResult, error) {
	fs := s.fs
	what := "managed server " + m.name
	password, err := r.ensureServerSecret(ctx, s, m)
	if err != nil {
		return failed(err, what)
	}
	if err := r.applyChild(ctx, fs, serverService(fs, m)); err != nil {
		return failed(err, what)
	}
	sts := serverStatefulSet(fs, m)
	live := &appsv1.StatefulSet{}
	var note string
	switch err := r.Client.Get(ctx, client.ObjectKeyFromObject(sts), live); {
	case err == nil && metav1.IsControlledBy(live, fs):
		note = keepVolumes(sts, live)
	case err != nil && !apierrors.IsNotFound(err):
		return failed(err, what)
	}
	if err := r.applyChild(ctx, fs, sts); err != nil {
		return failed(err, what)
	}
	if err := r.Client.Get(ctx, client.ObjectKeyFromObject(sts), live); err != nil {
		return storeResult{outcome: outcomeWaiting, message: what + ": " + err.Error()}, client.IgnoreNotFound(err)
	}
	if live.Status.ReadyReplicas < 1 {
		return storeResult{outcome: outcomeWaiting, message: fmt.Sprintf("Waiting for StatefulSet %s to become ready%s", m.name, note)}, nil
	}
	host := fmt.Sprintf("%s.%s.svc", m.name, fs.Namespace)
	if err := verify(ctx, host, password); err != nil {
		// The pod is ready, yet the connection can still fail for a
		// while (kube-proxy has not programmed the new Service on every
		// node, say) and no watched object changes when it starts to
		// work: look again soon.
		return storeResult{
			outcome:    outcomeWaiting,
			message:    fmt.Sprintf("%s is ready but the store cannot log in to it yet: %v", m.name, err),
			retryAfter: managedLoginRetry,
		}, nil
	}
	res := storeResult{
		outcome:     outcomeReady,
		message:     fmt.Sprintf("Connected to the managed server %s:%d as %s%s", host, m.port, managedUser, note),
		provisioned: &featuresv1alpha1.ProvisionedStore{Endpoint: fmt.Sprintf("%s:%d", host, m.port), User: managedUser},
	}
	fill(host, password, &res)
	return res, nil
}

// keepVolumes keeps the data volume's claim template of an existing
// server in desired when the spec asks for another size or storage class:
// the API server refuses any change of a StatefulSet's
// volumeClaimTemplates, and the claims made from them would not follow
// anyway. Applying the change would stall a working store instead. It
// returns a note for the store's condition saying what the volume keeps.
func keepVolumes(desired, live *appsv1.StatefulSet) string {
	if len(live.Spec.VolumeClaimTemplates) != 1 || len(desired.Spec.VolumeClaimTemplates) != 1 {
		return ""
	}
	want, have := desired.Spec.VolumeClaimTemplates[0].Spec, live.Spec.VolumeClaimTemplates[0].Spec
	if want.Resources.Requests.Storage().Equal(*have.Resources.Requests.Storage()) && ptr.Equal(want.StorageClassName, have.StorageClassName) {
		return ""
	}
	desired.Spec.VolumeClaimTemplates = live.Spec.VolumeClaimTemplates
	class := "the cluster's default storage class"
	if have.StorageClassName != nil {
		class = "storage class " + *have.StorageClassName
	}
	return fmt.Sprintf("; its data volume keeps the %s on %s it was created with, since the volumes of an existing server cannot change",
		have.Resources.Requests.Storage(), class)
}

// ensureServerSecret creates the managed server's Secret once; its
// password is the server's and is not rotated. A Secret that an earlier
// FeatureStore of this name kept under deletionPolicy Retain is adopted:
// its password is the one the kept data knows.
func (r *Reconciler) ensureServerSecret(ctx context.Context, s *scope, m managedServer) (string, error) {
	fs := s.fs
	secret := &corev1.Secret{}
	err := r.Client.Get(ctx, client.ObjectKey{Namespace: fs.Namespace, Name: m.name}, secret)
	if err == nil {
		if keptFor(fs, secret) && issued(secret.Data["server-password"]) {
			return r.adoptServerSecret(ctx, s, m, secret)
		}
		// A Secret of that name that is not ours would set the server's
		// password: never read it.
		if err := checkControlled(fs, secret, "Secret"); err != nil {
			return "", err
		}
		return string(secret.Data["server-password"]), nil
	}
	if !apierrors.IsNotFound(err) {
		return "", err
	}
	password := newPassword()
	data := m.files(password)
	data["server-password"] = []byte(password)
	secret = &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: fs.Namespace, Name: m.name, Labels: childLabels(fs)},
		Type:       corev1.SecretTypeOpaque,
		Data:       data,
	}
	if err := controllerutil.SetControllerReference(fs, secret, r.Client.Scheme()); err != nil {
		return "", err
	}
	if err := r.applier().Create(ctx, secret, ownedBy(fs)); err != nil {
		return "", fmt.Errorf("creating Secret %s: %w", m.name, err)
	}
	return password, nil
}

// keptFor reports whether obj is what retainManagedVolumes leaves of a
// deleted FeatureStore of fs's name: without a controller, labelled as the
// operator's and as that FeatureStore's, and not being deleted. Anything
// else of a child's name is somebody else's and is never adopted.
func keptFor(fs *featuresv1alpha1.FeatureStore, obj client.Object) bool {
	labels := obj.GetLabels()
	return metav1.GetControllerOf(obj) == nil && obj.GetDeletionTimestamp().IsZero() &&
		labels[commonv1alpha1.LabelManagedBy] == OperatorName && labels[LabelFeatureStore] == fs.Name
}

// adoptServerSecret makes a kept server Secret fs's. Only its password is
// taken over: the server's files are written again from it, as
// ensureServerSecret writes them for a new server.
func (r *Reconciler) adoptServerSecret(ctx context.Context, s *scope, m managedServer, kept *corev1.Secret) (string, error) {
	password := string(kept.Data["server-password"])
	adopted := kept.DeepCopy()
	adopted.Labels = childLabels(s.fs)
	adopted.Data = m.files(password)
	adopted.Data["server-password"] = []byte(password)
	if err := controllerutil.SetControllerReference(s.fs, adopted, r.Client.Scheme()); err != nil {
		return "", err
	}
	if err := r.Client.Patch(ctx, adopted, client.MergeFromWithOptions(kept, client.MergeFromWithOptimisticLock{})); err != nil {
		return "", fmt.Errorf("adopting Secret %s: %w", m.name, err)
	}
	s.events = append(s.events, event{Type: corev1.EventTypeNormal, Reason: EventRetainedDataAdopted, Message: fmt.Sprintf(
		"Secret %s, kept with the data of server %s when a FeatureStore of this name was deleted with deletionPolicy Retain, is used again; the server gets the kept volume",
		m.name, m.name)})
	return password, nil
}

// EventRetainedDataAdopted says a new FeatureStore took over what a
// deleted one of its name kept.
const EventRetainedDataAdopted = "RetainedDataAdopted"

func serverLabels(fs *featuresv1alpha1.FeatureStore, m managedServer) map[string]string {
	l := childLabels(fs)
	l["app.kubernetes.io/name"] = m.name
	l["app.kubernetes.io/component"] = managedServerComponent
	return l
}

func selectorLabels(m managedServer) map[string]string {
	return map[string]string{"app.kubernetes.io/name": m.name, "app.kubernetes.io/component": managedServerComponent}
}

func serverService(fs *featuresv1alpha1.FeatureStore, m managedServer) *corev1.Service {
	return &corev1.Service{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Service"},
		ObjectMeta: metav1.ObjectMeta{Namespace: fs.Namespace, Name: m.name, Labels: serverLabels(fs, m)},
		Spec: corev1.ServiceSpec{
			Selector: selectorLabels(m),
			Ports:    []corev1.ServicePort{{Name: "server", Port: m.port, TargetPort: intstr.FromInt32(m.port)}},
		},
	}
}

func serverStatefulSet(fs *featuresv1alpha1.FeatureStore, m managedServer) *appsv1.StatefulSet {
	container, volumes := serverContainer(m)
	retention := appsv1.DeletePersistentVolumeClaimRetentionPolicyType
	if fs.Spec.DeletionPolicy == commonv1alpha1.DeletionPolicyRetain {
		retention = appsv1.RetainPersistentVolumeClaimRetentionPolicyType
	}
	return &appsv1.StatefulSet{
		TypeMeta:   metav1.TypeMeta{APIVersion: "apps/v1", Kind: "StatefulSet"},
		ObjectMeta: metav1.ObjectMeta{Namespace: fs.Namespace, Name: m.name, Labels: serverLabels(fs, m)},
		Spec: appsv1.StatefulSetSpec{
			Replicas:    ptr.To[int32](1),
			ServiceName: m.name,
			Selector:    &metav1.LabelSelector{MatchLabels: selectorLabels(m)},
			PersistentVolumeClaimRetentionPolicy: &appsv1.StatefulSetPersistentVolumeClaimRetentionPolicy{
				WhenDeleted: retention, WhenScaled: appsv1.RetainPersistentVolumeClaimRetentionPolicyType,
			},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: serverLabels(fs, m)},
				Spec: corev1.PodSpec{
					AutomountServiceAccountToken: ptr.To(false),
					SecurityContext:              podsecurity.PodSecurityContext(managedUID),
					Containers:                   []corev1.Container{container},
					Volumes:                      volumes,
				},
			},
			VolumeClaimTemplates: []corev1.PersistentVolumeClaim{dataClaimTemplate(fs, m)},
		},
	}
}

// serverContainer is the server's container and the volumes it mounts
// besides its data.
func serverContainer(m managedServer) (corev1.Container, []corev1.Volume) {
	container := corev1.Container{
		Name:            "server",
		Image:           m.image,
		Ports:           []corev1.ContainerPort{{Name: "server", ContainerPort: m.port}},
		SecurityContext: podsecurity.ContainerSecurityContext(),
		VolumeMounts: []corev1.VolumeMount{
			{Name: "data", MountPath: m.dataPath},
			{Name: "server-config", MountPath: "/etc/mlplatform/server", ReadOnly: true},
		},
	}
	if m.source != nil && m.source.Resources != nil {
		container.Resources = *m.source.Resources
	}
	m.container(&container)
	volumes := []corev1.Volume{{Name: "server-config", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{
		SecretName: m.name, DefaultMode: ptr.To[int32](0o400),
		// Only the server's own files: the raw password stays out of
		// the container.
		Items: itemsOf(m.files("")),
	}}}}
	for i, path := range m.scratch {
		name := fmt.Sprintf("scratch-%d", i)
		volumes = append(volumes, corev1.Volume{Name: name, VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}})
		container.VolumeMounts = append(container.VolumeMounts, corev1.VolumeMount{Name: name, MountPath: path})
	}
	return container, volumes
}

// dataClaimTemplate is the claim of the server's data volume.
func dataClaimTemplate(fs *featuresv1alpha1.FeatureStore, m managedServer) corev1.PersistentVolumeClaim {
	storage := resource.MustParse("1Gi")
	var class *string
	if m.source != nil {
		class = m.source.StorageClassName
		if m.source.Storage != nil {
			storage = *m.source.Storage
		}
	}
	return corev1.PersistentVolumeClaim{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "PersistentVolumeClaim"},
		ObjectMeta: metav1.ObjectMeta{Name: "data", Labels: serverLabels(fs, m)},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes:      []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			StorageClassName: class,
			Resources:        corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: storage}},
		},
	}
}

func itemsOf(files map[string][]byte) []corev1.KeyToPath {
	var out []corev1.KeyToPath
	for k := range files {
		out = append(out, corev1.KeyToPath{Key: k, Path: k})
	}
	return out
}

// applyChild writes a child controlled by fs with the applier: only when
// a field the operator sets drifted, never over a foreign object.
func (r *Reconciler) applyChild(ctx context.Context, fs *featuresv1alpha1.FeatureStore, obj client.Object) error {
	if err := controllerutil.SetControllerReference(fs, obj, r.Client.Scheme()); err != nil {
		return err
	}
	_, err := r.applier().Apply(ctx, obj, ownedBy(fs))
	if err != nil && !apply.IsForeign(err) {
		return fmt.Errorf("applying %s %s: %w", obj.GetObjectKind().GroupVersionKind().Kind, obj.GetName(), err)
	}
	return err
}
