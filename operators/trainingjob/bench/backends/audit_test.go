package backends

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
	"time"
)

// write is one write request the API server answered, from its audit log.
type write struct {
	at        time.Time
	answered  time.Time
	user      string
	key       string // "verb resource[/subresource]"
	namespace string
	name      string
	failed    bool
}

// auditEntry holds the fields of an audit.k8s.io/v1 Event the benchmark
// reads.
type auditEntry struct {
	Verb string `json:"verb"`
	User struct {
		Username string `json:"username"`
	} `json:"user"`
	ObjectRef *struct {
		Resource    string `json:"resource"`
		Subresource string `json:"subresource"`
		Namespace   string `json:"namespace"`
		Name        string `json:"name"`
	} `json:"objectRef"`
	ResponseStatus *struct {
		Code int `json:"code"`
	} `json:"responseStatus"`
	RequestReceivedTimestamp time.Time `json:"requestReceivedTimestamp"`
	StageTimestamp           time.Time `json:"stageTimestamp"`
}

// auditReader reads the audit log as it grows.
type auditReader struct {
	path   string
	offset int64
	writes []write
}

// readAll appends the writes logged since the last call. A line the API
// server is still writing is left for the next call.
func (r *auditReader) readAll() error {
	f, err := os.Open(r.path)
	if err != nil {
		return err
	}
	defer func() { _ = f.Close() }()
	if info, err := f.Stat(); err != nil {
		return err
	} else if info.Size() < r.offset {
		return fmt.Errorf("audit log %s shrank below the %d bytes already read: rotated, its figures would be short", r.path, r.offset)
	}
	if _, err := f.Seek(r.offset, io.SeekStart); err != nil {
		return err
	}
	br := bufio.NewReaderSize(f, 1<<20)
	for {
		line, err := br.ReadBytes('\n')
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
		r.offset += int64(len(line))
		var e auditEntry
		if err := json.Unmarshal(line, &e); err != nil {
			return fmt.Errorf("audit log %s at offset %d: %w", r.path, r.offset, err)
		}
		if e.ObjectRef == nil {
			continue
		}
		key := e.Verb + " " + e.ObjectRef.Resource
		if e.ObjectRef.Subresource != "" {
			key += "/" + e.ObjectRef.Subresource
		}
		r.writes = append(r.writes, write{
			at: e.RequestReceivedTimestamp, answered: e.StageTimestamp, user: e.User.Username, key: key,
			namespace: e.ObjectRef.Namespace, name: e.ObjectRef.Name, failed: e.ResponseStatus != nil && e.ResponseStatus.Code >= 400,
		})
	}
}

// tally counts writes by user and by "verb resource".
type tally struct {
	total, failed int
	byUser        map[string]int
	byUserKey     map[string]map[string]int
	byKey         map[string]int
}

// count tallies the writes received in [from, to) whose namespace passes
// inNamespace.
func (r *auditReader) count(from, to time.Time, inNamespace func(string) bool) tally {
	t := tally{byUser: map[string]int{}, byUserKey: map[string]map[string]int{}, byKey: map[string]int{}}
	for _, w := range r.writes {
		if w.at.Before(from) || !w.at.Before(to) || !inNamespace(w.namespace) {
			continue
		}
		t.total++
		if w.failed {
			t.failed++
		}
		t.byUser[w.user]++
		t.byKey[w.key]++
		if t.byUserKey[w.user] == nil {
			t.byUserKey[w.user] = map[string]int{}
		}
		t.byUserKey[w.user][w.key]++
	}
	return t
}

// firstReconcile splits a new TrainingJob's wait for its child, from the
// writes in [from, to) whose namespace passes inNamespace: the
// TrainingJob's create, from its arrival to its answer (created); from
// that answer to our operator's first write for the job, which a watch, a
// queue and the reads before it take (seen); from that write to the
// child's create (toChild); and the child's create itself (childCreate).
// A job's writes are those named after it: name or name-suffix (its run,
// its policy), events aside.
type firstReconcile struct {
	created, seen, toChild, childCreate []time.Duration
}

func (r *auditReader) firstReconcile(from, to time.Time, inNamespace func(string) bool) firstReconcile {
	type job struct {
		created           write
		firstWrite, child *write
	}
	jobs := map[string]*job{}
	key := func(ns, name string) string { return ns + "/" + name }
	var ours []write
	for _, w := range r.writes {
		if w.at.Before(from) || !w.at.Before(to) || !inNamespace(w.namespace) || w.failed {
			continue
		}
		switch {
		case w.user == userBench && w.key == "create trainingjobs":
			jobs[key(w.namespace, w.name)] = &job{created: w}
		case w.user == userOperator && w.key != "create events":
			ours = append(ours, w)
		}
	}
	for i := range ours {
		w := &ours[i]
		name := w.name
		j := jobs[key(w.namespace, name)]
		for j == nil {
			cut := strings.LastIndexByte(name, '-')
			if cut < 0 {
				break
			}
			name = name[:cut]
			j = jobs[key(w.namespace, name)]
		}
		if j == nil {
			continue
		}
		if j.firstWrite == nil || w.at.Before(j.firstWrite.at) {
			j.firstWrite = w
		}
		if (w.key == "create jobs" || w.key == "create pytorchjobs") && (j.child == nil || w.at.Before(j.child.at)) {
			j.child = w
		}
	}
	var f firstReconcile
	for _, j := range jobs {
		if j.firstWrite == nil || j.child == nil {
			continue
		}
		f.created = append(f.created, j.created.answered.Sub(j.created.at))
		f.seen = append(f.seen, j.firstWrite.at.Sub(j.created.answered))
		f.toChild = append(f.toChild, j.child.at.Sub(j.firstWrite.at))
		f.childCreate = append(f.childCreate, j.child.answered.Sub(j.child.at))
	}
	return f
}

// podsBound splits the wait after a child's create, from the writes in
// [from, to) whose namespace passes inNamespace: from the answer to a
// Job's or a PyTorchJob's create (whoever made it: the benchmark for the
// bare Job, an operator otherwise) to the answer to the scheduler's first
// and last binding of its pods. Our operator is not on that path: a
// growing wait here is the control plane (and, for a PyTorchJob, Kubeflow)
// falling behind. early and late are the first
// bindings of the children created in the first and the last quarter,
// in the order of their creates. A pod is its child's when its name is
// the child's with two more dash-separated parts: "<job>-<index>-<random>"
// for a Job, "<job>-<role>-<index>" for Kubeflow.
type podsBound struct {
	first, last, early, late []time.Duration
}

func (r *auditReader) podsBound(from, to time.Time, inNamespace func(string) bool) podsBound {
	type child struct {
		created, first, last time.Time
	}
	children := map[string]*child{}
	var created []*child
	var bindings []write
	for _, w := range r.writes {
		if w.at.Before(from) || !w.at.Before(to) || !inNamespace(w.namespace) || w.failed {
			continue
		}
		switch w.key {
		case "create jobs", "create pytorchjobs":
			c := &child{created: w.answered}
			children[w.namespace+"/"+w.name] = c
			created = append(created, c)
		case "create pods/binding":
			bindings = append(bindings, w)
		}
	}
	for _, b := range bindings {
		name := b.name
		for range 2 {
			if cut := strings.LastIndexByte(name, '-'); cut > 0 {
				name = name[:cut]
			}
		}
		c := children[b.namespace+"/"+name]
		if c == nil || name == b.name {
			continue
		}
		if c.first.IsZero() || b.answered.Before(c.first) {
			c.first = b.answered
		}
		if b.answered.After(c.last) {
			c.last = b.answered
		}
	}
	sort.SliceStable(created, func(i, j int) bool { return created[i].created.Before(created[j].created) })
	var p podsBound
	for i, c := range created {
		if c.first.IsZero() {
			continue
		}
		first := c.first.Sub(c.created)
		p.first = append(p.first, first)
		p.last = append(p.last, c.last.Sub(c.created))
		switch {
		case i < len(created)/4:
			p.early = append(p.early, first)
		case i >= len(created)-len(created)/4:
			p.late = append(p.late, first)
		}
	}
	return p
}

// perJob formats counts divided by jobs, largest first.
func perJob(counts map[string]int, jobs int) string {
	keys := make([]string, 0, len(counts))
	for k := range counts {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		if counts[keys[i]] != counts[keys[j]] {
			return counts[keys[i]] > counts[keys[j]]
		}
		return keys[i] < keys[j]
	})
	parts := make([]string, 0, len(keys))
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%s %.2f", k, float64(counts[k])/float64(jobs)))
	}
	return strings.Join(parts, ", ")
}
