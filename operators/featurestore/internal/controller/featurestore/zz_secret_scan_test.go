package featurestore_test

import (
	"encoding/base64"
	"encoding/json"
	"net/url"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	featuresv1alpha1 "github.com/ml-platform/ml-platform/apis/features/v1alpha1"
)

// passwordForms are the ways a password could leak: as is, URL-encoded
// (connection strings) and base64-encoded (Secret data copied elsewhere).
func passwordForms(p string) []string {
	return []string{
		p,
		url.QueryEscape(p),
		url.PathEscape(p),
		base64.StdEncoding.EncodeToString([]byte(p)),
		base64.RawStdEncoding.EncodeToString([]byte(p)),
		base64.URLEncoding.EncodeToString([]byte(p)),
	}
}

// TestZZSecretScan runs after every other test of the package (files and
// tests run in order) and searches everything they produced outside
// Secrets for any password they saw.
func TestZZSecretScan(t *testing.T) {
	c := adminClient()
	ctx := t.Context()
	passwords := map[string]string{pg.AdminPassword: "the PostgreSQL admin", rs.AdminPassword: "the Redis admin"}
	seenPasswords.Range(func(k, v any) bool {
		passwords[k.(string)] = v.(string)
		return true
	})
	if len(passwords) < 10 {
		t.Fatalf("only %d passwords were recorded; the scan would prove little", len(passwords))
	}

	// The operators' logs are scanned for every credential after the tests
	// of the package, whichever ran (testenv's Env.VerifyLogs in TestMain).
	haystacks := map[string]string{}
	add := func(kind string, list client.ObjectList, pick func() []any) {
		if err := c.List(ctx, list); err != nil {
			t.Fatal(err)
		}
		for i, item := range pick() {
			raw, err := json.Marshal(item)
			if err != nil {
				t.Fatal(err)
			}
			haystacks[kind+"#"+string(rune('0'+i%10))+strings.Repeat("'", i/10)] = string(raw)
		}
	}
	events := &corev1.EventList{}
	add("event", events, func() []any { return anySlice(events.Items) })
	stores := &featuresv1alpha1.FeatureStoreList{}
	add("FeatureStore status", stores, func() []any {
		var out []any
		for _, s := range stores.Items {
			out = append(out, s.Status, s.Annotations)
		}
		return out
	})
	backends := &featuresv1alpha1.FeatureStoreBackendList{}
	add("FeatureStoreBackend", backends, func() []any { return anySlice(backends.Items) })
	configMaps := &corev1.ConfigMapList{}
	add("ConfigMap", configMaps, func() []any { return anySlice(configMaps.Items) })
	statefulSets := &appsv1.StatefulSetList{}
	add("StatefulSet", statefulSets, func() []any { return anySlice(statefulSets.Items) })
	pods := &corev1.PodList{}
	add("Pod", pods, func() []any { return anySlice(pods.Items) })
	if len(events.Items) == 0 || len(stores.Items) == 0 || len(statefulSets.Items) == 0 {
		t.Fatalf("nothing to scan: %d events, %d stores, %d StatefulSets",
			len(events.Items), len(stores.Items), len(statefulSets.Items))
	}

	// The scanner itself must find a password where one is.
	secrets := &corev1.SecretList{}
	if err := c.List(ctx, secrets, client.MatchingLabels{"app.kubernetes.io/managed-by": "featurestore-operator"}); err != nil {
		t.Fatal(err)
	}
	raw, _ := json.Marshal(secrets.Items)
	if found := scan(string(raw), passwords); found == "" {
		t.Fatal("the scan finds no password even in the operator's Secrets")
	}

	for where, text := range haystacks {
		if found := scan(text, passwords); found != "" {
			t.Errorf("%s contains the password of %s", where, found)
		}
	}
	t.Logf("scanned %d passwords in %d events, %d FeatureStores, %d ConfigMaps, %d StatefulSets and %d pods",
		len(passwords), len(events.Items), len(stores.Items), len(configMaps.Items), len(statefulSets.Items), len(pods.Items))
}

func scan(text string, passwords map[string]string) string {
	for p, owner := range passwords {
		for _, form := range passwordForms(p) {
			if strings.Contains(text, form) {
				return owner
			}
		}
	}
	return ""
}

func anySlice[T any](items []T) []any {
	out := make([]any, len(items))
	for i := range items {
		out[i] = items[i]
	}
	return out
}
