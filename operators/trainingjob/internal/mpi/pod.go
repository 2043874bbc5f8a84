package mpi

import (
	_ "embed"
	"fmt"
	"strings"

	kubeflowv1 "github.com/kubeflow/training-operator/pkg/apis/kubeflow.org/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"
)

// Port is the workers' SSH port: above 1023, so that sshd binds it as the
// pods' non-root user without any capability.
const Port = 2222

// ContainerName is the training container's name, Kubeflow's default for
// MPIJob, so that images and tools written for Kubeflow keep working.
const ContainerName = kubeflowv1.MPIJobDefaultContainerName

// ContainerPort is the workers' SSH server.
func ContainerPort() corev1.ContainerPort {
	return corev1.ContainerPort{Name: "ssh", ContainerPort: Port, Protocol: corev1.ProtocolTCP}
}

// The environment the operator gives MPI pods.
const (
	// EnvRole is launcher or worker on the kubeflow backend, whose roles
	// have their own templates. The native backend runs one template and
	// makes completion index 0 the launcher instead.
	EnvRole = "MLPLATFORM_MPI_ROLE"
	// EnvHostfile is the hostfile's content, which the launcher writes to
	// the file Open MPI reads by default (OMPI_MCA_orte_default_hostfile).
	EnvHostfile = "MLPLATFORM_MPI_HOSTFILE"
)

// The roles of EnvRole.
const (
	RoleLauncher = "launcher"
	RoleWorker   = "worker"
)

// The operator's volumes and mount paths in MPI pods, within the names and
// paths the CRD reserves (trainingv1alpha1.PodTemplatePatch), so no
// template volume or mount collides with them; the validation tests check
// them against the CRD.
const (
	KeysVolume = "mlplatform-mpi-ssh"
	KeysPath   = "/etc/mlplatform/mpi-ssh"
	RunVolume  = "mlplatform-mpi-run"
	// RunPath holds the copies of the keys with the modes ssh and sshd
	// demand (a Secret volume's files are root's, readable by the pod's
	// group), the generated configurations, the hostfile and the workers'
	// environment for remote ranks.
	RunPath = "/var/lib/mlplatform-mpi"
)

// Hostfile lists the launcher itself (localhost, whose ranks Open MPI
// starts without SSH) and then the other pods' host names, each with slots
// ranks, in Open MPI's hostfile format.
func Hostfile(hosts []string, slots int32) string {
	var b strings.Builder
	fmt.Fprintf(&b, "localhost slots=%d\n", slots)
	for _, h := range hosts {
		fmt.Fprintf(&b, "%s slots=%d\n", h, slots)
	}
	return b.String()
}

// Apply makes the training container of spec an MPI pod: the operator's
// script runs first and ends in the user's command on the launcher and in
// an SSH server on the workers. role is EnvRole's value, empty when the
// pod decides by its completion index; hostfile is empty on pods that are
// never the launcher. The Secret secret holds the key pair.
func Apply(spec *corev1.PodSpec, secret, role, hostfile string) {
	c := &spec.Containers[0]
	// The user's command becomes the script's positional parameters, which
	// the launcher executes once the workers answer.
	c.Args = append(append([]string(nil), c.Command...), c.Args...)
	c.Command = []string{"/bin/sh", "-c", script, "mlplatform-mpi"}
	if role != "" {
		c.Env = append(c.Env, corev1.EnvVar{Name: EnvRole, Value: role})
	}
	if hostfile != "" {
		c.Env = append(c.Env, corev1.EnvVar{Name: EnvHostfile, Value: hostfile})
	}
	spec.Volumes = append(spec.Volumes,
		corev1.Volume{Name: KeysVolume, VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{
			SecretName: secret,
			// Readable by the pod's group (fsGroup), never by others; the
			// script copies the keys before any SSH program reads them.
			DefaultMode: ptr.To[int32](0o440),
		}}},
		corev1.Volume{Name: RunVolume, VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{Medium: corev1.StorageMediumMemory}}},
	)
	c.VolumeMounts = append(c.VolumeMounts,
		corev1.VolumeMount{Name: KeysVolume, MountPath: KeysPath, ReadOnly: true},
		corev1.VolumeMount{Name: RunVolume, MountPath: RunPath},
	)
}

// script is the pod's entrypoint (entrypoint.sh). Every pod prepares the
// SSH client and server configuration from the Secret. The launcher
// (EnvRole launcher, or completion index 0 on the native backend) writes
// the hostfile, waits until every worker's SSH server answers (pods start
// in any order), and executes the user's command with Open MPI pointed at
// the hostfile and at SSH. A worker saves its environment, which every SSH
// session sources (sshd's ForceCommand), so remote ranks see their own
// pod's variables as the launcher's ranks do; then it runs sshd in the
// foreground as the pod's non-root user on an unprivileged port.
//
// The comments of entrypoint.sh stay out of the pods: editing them must
// not change the generated jobs.
var script = withoutComments(entrypoint)

//go:embed entrypoint.sh
var entrypoint string

// withoutComments drops the script's comment lines.
func withoutComments(s string) string {
	var out []string
	for _, line := range strings.Split(s, "\n") {
		if !strings.HasPrefix(strings.TrimSpace(line), "#") {
			out = append(out, line)
		}
	}
	return strings.Join(out, "\n")
}
