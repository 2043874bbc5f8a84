package featurestore_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"os"
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

// scanObjectsForPasswords searches everything the package's tests produced
// outside Secrets (events, FeatureStore statuses and annotations, backends,
// ConfigMaps, StatefulSets, pods) for any password they saw. TestMain runs
// it after m.Run, so it checks whatever tests ran, in any order; the
// operators' logs are scanned by testenv's Env.VerifyLogs.
func scanObjectsForPasswords(ctx context.Context) error {
	c := adminClient()
	passwords := map[string]string{pg.AdminPassword: "the PostgreSQL admin", rs.AdminPassword: "the Redis admin"}
	seenPasswords.Range(func(k, v any) bool {
		passwords[k.(string)] = v.(string)
		return true
	})

	haystacks := map[string]string{}
	var errs []error
	add := func(kind string, list client.ObjectList, pick func() []any) {
		if err := c.List(ctx, list); err != nil {
			errs = append(errs, err)
			return
		}
		for i, item := range pick() {
			raw, err := json.Marshal(item)
			if err != nil {
				errs = append(errs, err)
				continue
			}
			haystacks[fmt.Sprintf("%s #%d", kind, i)] = string(raw)
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

	// The scanner itself must find a password where one is.
	secrets := &corev1.SecretList{}
	if err := c.List(ctx, secrets, client.MatchingLabels{"app.kubernetes.io/managed-by": "featurestore-operator"}); err != nil {
		errs = append(errs, err)
	}
	raw, _ := json.Marshal(secrets.Items)
	if len(secrets.Items) > 0 && scan(string(raw), passwords) == "" {
		errs = append(errs, errors.New("the password scan finds no password even in the operator's Secrets"))
	}

	for where, text := range haystacks {
		if found := scan(text, passwords); found != "" {
			errs = append(errs, fmt.Errorf("%s contains the password of %s", where, found))
		}
	}
	if testing.Verbose() {
		fmt.Fprintf(os.Stderr, "scanned %d passwords in %d events, %d FeatureStores, %d ConfigMaps, %d StatefulSets and %d pods\n",
			len(passwords), len(events.Items), len(stores.Items), len(configMaps.Items), len(statefulSets.Items), len(pods.Items))
	}
	return errors.Join(errs...)
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
