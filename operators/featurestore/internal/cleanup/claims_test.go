package cleanup

import (
	"testing"
	"time"
)

func TestClaimedAheadPicksTheOldestCollidingClaim(t *testing.T) {
	t0 := time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)
	self := Claim{Owner: "b/second", UID: "uid-b", Project: "sales", Created: t0.Add(time.Minute)}
	cases := map[string]struct {
		others      []Claim
		selfGranted bool
		wantAhead   string // UID of the claim ahead, "" for none
	}{
		"alone": {others: []Claim{self}},
		"older store, same project": {
			others: []Claim{self, {UID: "uid-a", Project: "sales", Created: t0}}, wantAhead: "uid-a",
		},
		"older store whose project ends with ours": {
			others: []Claim{{UID: "uid-a", Project: "presales", Created: t0}}, wantAhead: "uid-a",
		},
		"older store whose project ours ends with": {
			others: []Claim{{UID: "uid-a", Project: "les", Created: t0}}, wantAhead: "uid-a",
		},
		"older store, unrelated project": {
			others: []Claim{{UID: "uid-a", Project: "marketing", Created: t0}},
		},
		"younger store, same project": {
			others: []Claim{{UID: "uid-c", Project: "sales", Created: t0.Add(time.Hour)}},
		},
		"same second: the smaller UID first": {
			others:    []Claim{{UID: "uid-a", Project: "sales", Created: self.Created}, {UID: "uid-c", Project: "sales", Created: self.Created}},
			wantAhead: "uid-a",
		},
		"same second: a store that already serves first, whatever its UID": {
			others:    []Claim{{UID: "uid-z", Project: "sales", Created: self.Created, Granted: true}},
			wantAhead: "uid-z",
		},
		"same second: both serving, the smaller UID first": {
			others: []Claim{{UID: "uid-z", Project: "sales", Created: self.Created, Granted: true}}, selfGranted: true,
		},
		"same second: self serves, a smaller UID that does not comes after": {
			others: []Claim{{UID: "uid-a", Project: "sales", Created: self.Created}}, selfGranted: true,
		},
		"older handed-off cleanup": {
			others: []Claim{{UID: "uid-gone", Project: "sales", Created: t0, Pending: true}}, wantAhead: "uid-gone",
		},
		"a record written without a creation time counts as oldest": {
			others: []Claim{{UID: "uid-z", Project: "sales", Pending: true}}, wantAhead: "uid-z",
		},
		"the oldest of several": {
			others:    []Claim{{UID: "uid-2", Project: "sales", Created: t0.Add(time.Second)}, {UID: "uid-1", Project: "presales", Created: t0}},
			wantAhead: "uid-1",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			self := self
			self.Granted = tc.selfGranted
			got, ahead := ClaimedAhead(self, tc.others)
			if (tc.wantAhead != "") != ahead || (ahead && got.UID != tc.wantAhead) {
				t.Errorf("ClaimedAhead() = %+v, %v; want %q", got, ahead, tc.wantAhead)
			}
		})
	}
	// Both sides agree: exactly one of two colliding stores is ahead.
	other := Claim{UID: "uid-a", Project: "sales", Created: self.Created}
	_, selfBlocked := ClaimedAhead(self, []Claim{other})
	_, otherBlocked := ClaimedAhead(other, []Claim{self})
	if selfBlocked == otherBlocked {
		t.Errorf("self blocked %v, other blocked %v: want exactly one winner", selfBlocked, otherBlocked)
	}
}
