package testenv

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/url"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/serializer/protobuf"
	"k8s.io/client-go/kubernetes/scheme"
)

// The password has characters that JSON, URLs and base64 each treat
// differently, so that every form differs from the plain one.
const planted = `s3cr3t/P@ss+w<o>rd&"x"`

// zapLine is a log line as the JSON encoder writes it, with the value
// escaped the way zap escapes strings.
func zapLine(msg, value string) string {
	line, _ := json.Marshal(map[string]string{"level": "debug", "msg": msg, "body": value})
	return string(line)
}

func protobufSecret(t *testing.T, password string) []byte {
	t.Helper()
	secret := &corev1.Secret{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Secret"},
		ObjectMeta: metav1.ObjectMeta{Name: "store-credentials", Namespace: "tenant"},
		Data:       map[string][]byte{"password": []byte(password)},
	}
	var buf bytes.Buffer
	if err := protobuf.NewSerializer(scheme.Scheme, scheme.Scheme).Encode(secret, &buf); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func TestScanFindsCredentialsInEveryForm(t *testing.T) {
	jsonSecret, _ := json.Marshal(&corev1.Secret{Data: map[string][]byte{"password": []byte(planted)}})
	testCases := map[string]struct {
		text     func(t *testing.T) string
		wantForm string
	}{
		"plain in a message": {
			text:     func(*testing.T) string { return "connecting with password pw=" + planted + " now" },
			wantForm: "plain",
		},
		"JSON-escaped in a zap line": {
			text:     func(*testing.T) string { return zapLine("Request Body", "password: "+planted) },
			wantForm: "JSON-escaped",
		},
		"base64 in a JSON Secret body": {
			text:     func(*testing.T) string { return zapLine("Response Body", string(jsonSecret)) },
			wantForm: "base64 at offset 0",
		},
		"base64 inside a longer value, offset 1": {
			text: func(*testing.T) string {
				return base64.StdEncoding.EncodeToString([]byte("x" + planted + "tail"))
			},
			wantForm: "base64 at offset 1",
		},
		"base64 inside a longer value, offset 2": {
			text: func(*testing.T) string {
				return base64.StdEncoding.EncodeToString([]byte("config: " + planted))
			},
			wantForm: "base64 at offset 2",
		},
		"base64url": {
			text:     func(*testing.T) string { return base64.RawURLEncoding.EncodeToString([]byte(planted)) },
			wantForm: "base64url at offset 0",
		},
		"URL-encoded in a connection string": {
			text: func(*testing.T) string {
				return "postgres://admin:" + url.QueryEscape(planted) + "@db:5432/features"
			},
			wantForm: "URL query-escaped",
		},
		"URL path-escaped": {
			text:     func(*testing.T) string { return "/store/" + url.PathEscape(planted) },
			wantForm: "URL path-escaped",
		},
		"hex": {
			text:     func(*testing.T) string { return "key=" + hex.EncodeToString([]byte(planted)) },
			wantForm: "hex",
		},
		"upper-case hex": {
			text:     func(*testing.T) string { return strings.ToUpper(hex.EncodeToString([]byte(planted))) },
			wantForm: "HEX",
		},
		"hex dump of a protobuf Secret, as client-go logs it": {
			text: func(t *testing.T) string {
				return zapLine("Response Body", hex.Dump(protobufSecret(t, planted)))
			},
			wantForm: "plain in a hex dump",
		},
		"hex dump after another dump": {
			text: func(t *testing.T) string {
				return zapLine("Request Body", hex.Dump([]byte("an unrelated body of some length"))) + "\n" +
					zapLine("Response Body", hex.Dump(protobufSecret(t, planted)))
			},
			wantForm: "plain in a hex dump",
		},
	}
	for name, tc := range testCases {
		t.Run(name, func(t *testing.T) {
			creds := &Credentials{}
			creds.Add(planted, "the planted password")
			creds.Add("an-0ther-password-nobody-logged", "another password")
			text := tc.text(t)
			leaks := creds.Scan(text)
			want := Leak{Owner: "the planted password", Form: tc.wantForm}
			found := false
			for _, l := range leaks {
				if l.Owner != want.Owner {
					t.Errorf("found %v, which the text does not hold", l)
				}
				found = found || l == want
			}
			if !found {
				t.Errorf("Scan(%q) = %v, want it to include %v", text, leaks, want)
			}
		})
	}
}

func TestScanFindsNothingInCleanLogs(t *testing.T) {
	creds := &Credentials{}
	creds.Add(planted, "the planted password")
	if creds.Add("short", "a short value") {
		t.Error("Add accepted a 5-byte value; it would match unrelated log text")
	}
	clean := zapLine("Response Body", hex.Dump(protobufSecret(t, "a-different-password"))) +
		zapLine("Reconciling", `{"namespace":"tenant","name":"store"}`) +
		base64.StdEncoding.EncodeToString([]byte("a-different-password"))
	if leaks := creds.Scan(clean); len(leaks) != 0 {
		t.Errorf("Scan found %v in logs that hold no recorded credential", leaks)
	}
}

func TestBase64FragmentIsInEveryLongerEncoding(t *testing.T) {
	for prefix := range 7 {
		for suffix := range 4 {
			input := strings.Repeat("p", prefix) + planted + strings.Repeat("s", suffix)
			encoded := base64.StdEncoding.EncodeToString([]byte(input))
			fragment := base64Fragment(base64.StdEncoding, []byte(planted), prefix%3)
			if !strings.Contains(encoded, fragment) {
				t.Errorf("prefix %d, suffix %d: %q does not contain the fragment %q", prefix, suffix, encoded, fragment)
			}
		}
	}
}

// TestSecretsAreRecorded checks that a Secret created on the test API
// server becomes a credential the scan looks for, without any test
// registering it, and that identifiers are left out.
func TestSecretsAreRecorded(t *testing.T) {
	cs := clientset(t, env.Config)
	created, err := cs.CoreV1().Namespaces().Create(t.Context(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "creds-"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ns := created.Name
	password := fmt.Sprintf("recorded-%d-password", len(ns))
	_, err = cs.CoreV1().Secrets(ns).Create(t.Context(), &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "admin"},
		StringData: map[string]string{"username": "administrator", "password": password},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, "the Secret's password is recorded", func(_ context.Context) (bool, error) {
		return len(credentials.Scan(password)) > 0, nil
	})
	if leaks := credentials.Scan("user administrator"); len(leaks) != 0 {
		t.Errorf("the username key was recorded as a credential: %v", leaks)
	}
}
