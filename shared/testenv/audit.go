package testenv

import (
	"bufio"
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// auditPolicy records every write request with its user, and nothing else:
// what each controller wrote is what tests count.
const auditPolicy = `apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: ["RequestReceived"]
rules:
- level: Metadata
  verbs: ["create", "update", "patch", "delete", "deletecollection"]
- level: None
`

// AuditedWrite is one write request the API server answered, from its audit
// log: who wrote what, whichever process it came from.
type AuditedWrite struct {
	// User is who the write acted as: the impersonated user, if any.
	User      string
	UserAgent string
	Verb      string
	// Resource is the plural resource name, with "/"+subresource if any.
	Resource  string
	Namespace string
	Name      string
	Code      int
}

// auditArgs adds the audit log flags to args and returns the log's path.
func auditArgs(workDir string, args map[string][]string) (string, map[string][]string, error) {
	policy := filepath.Join(workDir, "audit-policy.yaml")
	if err := os.WriteFile(policy, []byte(auditPolicy), 0o600); err != nil {
		return "", nil, err
	}
	path := filepath.Join(workDir, "audit.log")
	out := map[string][]string{"audit-policy-file": {policy}, "audit-log-path": {path}, "audit-log-mode": {"blocking"}}
	for k, v := range args {
		out[k] = v
	}
	return path, out, nil
}

// AuditedWrites returns the writes the API server answered so far, oldest
// first; it needs Options.AuditWrites. With the log in blocking mode, a
// write is in the log before its response reaches the writer.
func (e *Env) AuditedWrites() ([]AuditedWrite, error) {
	if e.auditLog == "" {
		return nil, errors.New("testenv: the control plane runs without Options.AuditWrites")
	}
	f, err := os.Open(e.auditLog)
	if err != nil {
		return nil, err
	}
	defer func() { _ = f.Close() }()
	return readAuditedWrites(f)
}

// readAuditedWrites parses an audit log's complete lines. A last line
// without its newline is an event the API server is still writing, for a
// write whose response has not reached its writer yet: it is left out, as
// the next read will have it whole.
func readAuditedWrites(r io.Reader) ([]AuditedWrite, error) {
	var out []AuditedWrite
	br := bufio.NewReaderSize(r, 64*1024)
	for {
		line, err := br.ReadBytes('\n')
		if err == io.EOF {
			return out, nil
		}
		if err != nil {
			return nil, err
		}
		var ev struct {
			Stage     string `json:"stage"`
			Verb      string `json:"verb"`
			UserAgent string `json:"userAgent"`
			User      struct {
				Username string `json:"username"`
			} `json:"user"`
			ImpersonatedUser *struct {
				Username string `json:"username"`
			} `json:"impersonatedUser"`
			ObjectRef *struct {
				Resource    string `json:"resource"`
				Subresource string `json:"subresource"`
				Namespace   string `json:"namespace"`
				Name        string `json:"name"`
			} `json:"objectRef"`
			ResponseStatus *struct {
				Code int `json:"code"`
			} `json:"responseStatus"`
		}
		if err := json.Unmarshal(line, &ev); err != nil {
			return nil, err
		}
		if ev.Stage != "ResponseComplete" || ev.ObjectRef == nil {
			continue
		}
		w := AuditedWrite{
			User: ev.User.Username, UserAgent: ev.UserAgent, Verb: ev.Verb,
			Resource: ev.ObjectRef.Resource, Namespace: ev.ObjectRef.Namespace, Name: ev.ObjectRef.Name,
		}
		if ev.ImpersonatedUser != nil {
			w.User = ev.ImpersonatedUser.Username
		}
		if ev.ObjectRef.Subresource != "" {
			w.Resource += "/" + ev.ObjectRef.Subresource
		}
		if ev.ResponseStatus != nil {
			w.Code = ev.ResponseStatus.Code
		}
		out = append(out, w)
	}
}

// Succeeded is true for a write the API server carried out.
func (w AuditedWrite) Succeeded() bool { return w.Code >= 200 && w.Code < 300 }

// String is "user verb resource namespace/name code".
func (w AuditedWrite) String() string {
	return strings.Join([]string{w.User, w.Verb, w.Resource, w.Namespace + "/" + w.Name, strconv.Itoa(w.Code)}, " ")
}
