package patch

import (
	"context"
	"strconv"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Get reads the object at key into obj from cache, the informer-backed
// reader a reconcile works from, unless the cache still holds a version
// that this process has since replaced with a write of its own through a
// Helper. Then it reads the object from live, the API server.
//
// Without that check a reconcile can start from its own past: the previous
// reconcile wrote status (Ready=False, say), and an event of a child (its
// pod became ready) starts the next one before the cache has seen that
// write. That reconcile computes Ready=True, finds it equal to the stale
// cached status and writes nothing, and no further event comes to correct
// it, since the operator's own status writes do not start reconciles. The
// object stays wrong until a periodic requeue. Reading the stale object
// live costs one GET, and only in that window.
func Get(ctx context.Context, cache, live client.Reader, key client.ObjectKey, obj client.Object) error {
	if err := cache.Get(ctx, key, obj); err != nil {
		return err
	}
	if !ownWrites.stale(obj.GetUID(), obj.GetResourceVersion()) {
		return nil
	}
	return live.Get(ctx, key, obj)
}

// ownWrites is this process's record of its own writes. It is process-wide
// on purpose: every Helper of an object, the finalizer's and the status
// writer's, replaces versions any reader of that object may still hold,
// and UIDs never repeat.
var ownWrites = &writeLog{entries: map[types.UID]*written{}}

// forgetAfter bounds how long a write is remembered when no read ever shows
// the cache catching up (the object was deleted, say).
const forgetAfter = 10 * time.Minute

type writeLog struct {
	mu      sync.Mutex
	entries map[types.UID]*written
}

// written is what the process knows of an object's versions: the last one
// it wrote, and the versions that write and earlier ones replaced.
type written struct {
	latest   string
	replaced map[string]bool
	at       time.Time
}

// record notes that a write replaced the versions in from with version to.
func (l *writeLog) record(uid types.UID, from []string, to string) {
	if uid == "" || to == "" {
		return
	}
	now := time.Now()
	l.mu.Lock()
	defer l.mu.Unlock()
	for k, w := range l.entries {
		if now.Sub(w.at) > forgetAfter {
			delete(l.entries, k)
		}
	}
	w := l.entries[uid]
	if w == nil {
		w = &written{replaced: map[string]bool{}}
		l.entries[uid] = w
	}
	if w.latest != "" {
		w.replaced[w.latest] = true
	}
	for _, rv := range from {
		w.replaced[rv] = true
	}
	delete(w.replaced, to)
	w.latest, w.at = to, now
}

// stale reports whether version rv of the object is older than the last
// version this process wrote. The etcd-backed API server's
// resourceVersions are increasing integers (Kubernetes 1.35 documents them
// as comparable); for any other kind of resourceVersion only the versions
// the process itself saw replaced count as older. A read that is not stale
// shows the cache has caught up, and the entry is dropped.
func (l *writeLog) stale(uid types.UID, rv string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	w := l.entries[uid]
	if w == nil {
		return false
	}
	older := w.replaced[rv]
	if have, err := strconv.ParseUint(rv, 10, 64); err == nil {
		if latest, err := strconv.ParseUint(w.latest, 10, 64); err == nil {
			older = have < latest
		}
	}
	if !older {
		delete(l.entries, uid)
	}
	return older
}
