package cleanup

import (
	"strings"
	"time"
)

// Claim is one FeatureStore's hold on a key space of a Redis backend:
// Feast appends the project to every online key, so the store's ACL user
// may read and write every key ending in its project. Claims are taken
// from the cluster's own records (the FeatureStores that exist and the
// cleanups handed off by deleted ones), never from the users a Redis
// server happens to hold: a server restarted without its ACL file, or a
// user removed by hand, must not hand a key space to another tenant.
type Claim struct {
	// Owner is "namespace/name" of the FeatureStore, for messages.
	Owner   string
	UID     string
	Project string
	Created time.Time
	// Pending marks a cleanup handed off by a deleted FeatureStore: its
	// keys are still on the server until that cleanup finishes.
	Pending bool
	// Retained marks the keys a FeatureStore deleted with deletionPolicy
	// Retain kept on the server: they stay claimed until an administrator
	// deletes the record (Record names it).
	Retained bool
	// Record is "namespace/name" of the ConfigMap that holds a pending or
	// retained claim; empty for a FeatureStore's own.
	Record string
	// Granted marks a claim whose key space was handed over: a FeatureStore
	// that serves its online store or published its client configuration,
	// and every handed-off or retained record. Creation times have seconds
	// only; of two claims of the same second the granted one comes first,
	// so a store created in the same second as an older one that already
	// serves cannot take its keys.
	Granted bool
}

// ClaimOf is the claim a plan (a FeatureStore's or a handed-off one)
// holds on its Redis backend.
func ClaimOf(p Plan, pending bool) Claim {
	c := Claim{Owner: p.Namespace + "/" + p.Name, UID: p.UID, Project: p.Project, Pending: pending}
	if p.Created != nil {
		c.Created = p.Created.Time
	}
	return c
}

// Collide reports whether two projects share keys: a key of project q
// matches the pattern *p whenever p is a suffix of q.
func Collide(p, q string) bool {
	return strings.HasSuffix(p, q) || strings.HasSuffix(q, p)
}

// before orders claims: the older FeatureStore first; within one second
// the granted claim, then the UID, so every reconcile, in every replica,
// picks the same winner whatever order it sees the stores in.
func (c Claim) before(o Claim) bool {
	if !c.Created.Equal(o.Created) {
		return c.Created.Before(o.Created)
	}
	if c.Granted != o.Granted {
		return c.Granted
	}
	return c.UID < o.UID
}

// ClaimedAhead returns the claim that keeps self from the key space: the
// first of others (same backend) that collides with self's project and
// comes before it. A handed-off cleanup keeps its FeatureStore's place, so
// a younger store waits until the older one's keys are gone.
func ClaimedAhead(self Claim, others []Claim) (Claim, bool) {
	var first Claim
	found := false
	for _, o := range others {
		if o.UID == self.UID || !Collide(self.Project, o.Project) || !o.before(self) {
			continue
		}
		if !found || o.before(first) {
			first, found = o, true
		}
	}
	return first, found
}
