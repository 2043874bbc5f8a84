package featurestore_test

import (
	"context"
	"regexp"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/ml-platform/ml-platform/operators/featurestore/internal/controller/featurestore"
	"github.com/ml-platform/ml-platform/shared/panics"
	"github.com/ml-platform/ml-platform/shared/testenv"
)

// generatedPassword is what the operator issues: 32 alphanumeric
// characters.
var generatedPassword = regexp.MustCompile(`^[a-zA-Z0-9]{32}$`)

// A tenant may edit the credentials Secret of its FeatureStore. Whatever
// it removes or empties, the operator never panics and never uses a
// missing, empty or malformed password: it issues new ones for the damaged
// stores, keeps nothing damaged as a previous password, says so in a
// Warning event, and the stores work again with the new client
// configuration.
func TestDamagedCredentialsAreRepaired(t *testing.T) {
	c := adminClient()
	startOperator(t, nil)
	for name, tc := range map[string]struct {
		damage func(*corev1.Secret)
		// repaired are the stores whose passwords must be new; the
		// others keep theirs.
		repaired   []string
		wantReason string
	}{
		"annotations removed": {
			damage: func(s *corev1.Secret) { s.Annotations = nil },
			// Not knowing what the credentials were issued for is a
			// reason to rotate, with the usual grace period.
			repaired: []string{"online", "offline", "registry"}, wantReason: "CredentialsRotated",
		},
		"data removed": {
			damage:   func(s *corev1.Secret) { s.Data = nil },
			repaired: []string{"online", "offline", "registry"}, wantReason: "CredentialsRepaired",
		},
		"password emptied": {
			damage:   func(s *corev1.Secret) { s.Data["online"] = []byte{} },
			repaired: []string{"online"}, wantReason: "CredentialsRepaired",
		},
		"password missing": {
			damage:   func(s *corev1.Secret) { delete(s.Data, "registry") },
			repaired: []string{"registry"}, wantReason: "CredentialsRepaired",
		},
		"empty previous password added": {
			// Without the repair it would be a second password of the
			// store's Redis user, and of its idle PostgreSQL login.
			damage:     func(s *corev1.Secret) { s.Data["previous-online"] = []byte{} },
			wantReason: "CredentialsRepaired",
		},
		"password malformed": {
			damage:   func(s *corev1.Secret) { s.Data["offline"] = []byte("chosen by the tenant") },
			repaired: []string{"offline"}, wantReason: "CredentialsRepaired",
		},
	} {
		t.Run(name, func(t *testing.T) {
			ctx := t.Context()
			ns := testenv.CreateNamespace(t, c, "fs")
			slug := strings.ReplaceAll(name, " ", "")
			fs := waitReady(t, c, createStore(t, c, newStore(ns, "damaged", "damaged"+slug).obj()))
			key := client.ObjectKey{Namespace: ns, Name: featurestore.CredentialsSecretName(fs.Name)}
			before := &corev1.Secret{}
			if err := c.Get(ctx, key, before); err != nil {
				t.Fatal(err)
			}
			err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
				secret := &corev1.Secret{}
				if err := c.Get(ctx, key, secret); err != nil {
					return err
				}
				tc.damage(secret)
				return c.Update(ctx, secret)
			})
			if err != nil {
				t.Fatal(err)
			}

			// The controller's panic guard turns a panic into an
			// InternalError event.
			testenv.Eventually(t, "a "+tc.wantReason+" event", func(context.Context) (bool, error) {
				if hasEvent(t, c, fs, panics.EventInternalError) {
					t.Fatal("reconciling the damaged Secret panicked")
				}
				return hasEvent(t, c, fs, tc.wantReason), nil
			})
			ev := testenv.WaitForEvent(t, c, fs, tc.wantReason)
			if tc.wantReason == "CredentialsRepaired" && (ev.Type != corev1.EventTypeWarning || !strings.Contains(ev.Message, key.Name)) {
				t.Errorf("the %s event is not a Warning naming the Secret: %s %q", ev.Reason, ev.Type, ev.Message)
			}
			got := waitReady(t, c, fs)

			after := &corev1.Secret{}
			if err := c.Get(ctx, key, after); err != nil {
				t.Fatal(err)
			}
			for _, k := range []string{"online", "offline", "registry"} {
				if !generatedPassword.Match(after.Data[k]) {
					t.Errorf("the %s password %q is not one the operator issues", k, after.Data[k])
				}
				repaired := slices.Contains(tc.repaired, k)
				if changed := string(after.Data[k]) != string(before.Data[k]); changed != repaired {
					t.Errorf("the %s password changed: %v, want %v", k, changed, repaired)
				}
				// A damaged password is never kept for a grace period.
				if p, ok := after.Data["previous-"+k]; ok && (!generatedPassword.Match(p) || repaired && tc.wantReason == "CredentialsRepaired") {
					t.Errorf("the damaged %s password %q is kept as the previous one", k, p)
				}
			}
			requireLogins(t, "the credentials after the repair", clientConfig(t, c, got))
			deleteAndWait(t, c, fs)
		})
	}
}
