// Package provisioner holds what the PostgreSQL and Redis provisioners
// share: the errors that tell a misconfigured admin account apart from a
// server that does not answer, and the bound that keeps a server from
// holding the operator.
package provisioner
