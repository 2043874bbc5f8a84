package postgres

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"
)

// MaxIdentifierLength is PostgreSQL's NAMEDATALEN-1: longer names are
// silently truncated, which could make two stores share a name.
const MaxIdentifierLength = 63

// Store names what one store (an offline store or a registry) owns on a
// server: a database owned by a NOLOGIN role, and two login roles that act
// as that owner. Two login roles let credentials rotate without downtime:
// the new password goes to the idle role while the old role keeps working
// through the grace period.
type Store struct {
	// UID of the owning FeatureStore; the ownership marker carries it.
	UID string
	// Owner is a human-readable description for the marker, "ns/name".
	Owner string
	// Database, and the NOLOGIN role that owns it, share this name.
	Database string
	// Logins are the two login roles.
	Logins [2]string
}

// Names derives a store's identifiers from its FeatureStore. They start
// with a readable part (namespace and name) and end with a hash of the UID,
// so a re-created FeatureStore of the same name never meets the objects of
// its predecessor, and every name stays within MaxIdentifierLength.
func Names(namespace, name, uid, kind string) Store {
	sum := sha256.Sum256([]byte(uid))
	base := "mlp_" + sanitize(namespace, 14) + "_" + sanitize(name, 14) + "_" + hex.EncodeToString(sum[:])[:10] + "_" + sanitize(kind, 3)
	return Store{
		UID:      uid,
		Owner:    namespace + "/" + name,
		Database: base,
		Logins:   [2]string{base + "_a", base + "_b"},
	}
}

func sanitize(s string, limit int) string {
	var b strings.Builder
	for _, r := range strings.ToLower(s) {
		switch {
		case r >= 'a' && r <= 'z', r >= '0' && r <= '9':
			b.WriteRune(r)
		default:
			b.WriteRune('_')
		}
		if b.Len() == limit {
			break
		}
	}
	return b.String()
}

// markerPrefix starts every ownership comment; the UID follows.
const markerPrefix = "features.mlplatform.dev/owner-uid="

func (s Store) marker() string {
	return markerPrefix + s.UID + " FeatureStore " + s.Owner
}

// ownedBy reports whether a COMMENT carries this store's marker.
func (s Store) ownedBy(comment string) bool {
	return comment == markerPrefix+s.UID || strings.HasPrefix(comment, markerPrefix+s.UID+" ")
}
