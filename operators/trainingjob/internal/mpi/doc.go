// Package mpi is what both backends share to run framework mpi: the SSH
// key pair Secret, the hostfile, and the launcher and worker pod shape.
package mpi
