package feastconfig

import (
	"net/url"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestRenderDecodesStrictly(t *testing.T) {
	in := Inputs{
		Project:  "sales",
		Registry: Postgres{Host: "db", Port: 5432, Database: "reg", User: "u_a", Password: "p1", SSLMode: "require"},
		Offline:  Postgres{Host: "db", Port: 5432, Database: "off", User: "o_a", Password: "p2", SSLMode: "require"},
		Online:   Redis{Host: "redis", Port: 6379, User: "mlp-fs-x", Password: "p3", TLS: true},
	}
	data, err := Render(Build(in))
	if err != nil {
		t.Fatal(err)
	}
	got, err := Decode(data)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(Build(in), got); diff != "" {
		t.Errorf("round trip (-want +got):\n%s", diff)
	}
	u, err := url.Parse(got.Registry.Path)
	if err != nil {
		t.Fatal(err)
	}
	if pw, _ := u.User.Password(); pw != "p1" || u.Query().Get("sslmode") != "require" || u.Path != "/reg" {
		t.Errorf("registry path %s", got.Registry.Path)
	}
	addr, params, err := ParseRedisConnectionString(got.OnlineStore.ConnectionString)
	if err != nil || addr != "redis:6379" || params["username"] != "mlp-fs-x" || params["password"] != "p3" || params["ssl"] != "true" {
		t.Errorf("connection string %q: %s %v %v", got.OnlineStore.ConnectionString, addr, params, err)
	}
}

func TestDecodeRejectsUnknownKeys(t *testing.T) {
	data, err := Render(Build(Inputs{Project: "p"}))
	if err != nil {
		t.Fatal(err)
	}
	bad := strings.Replace(string(data), "project: p", "project: p\nflavour: x", 1)
	if _, err := Decode([]byte(bad)); err == nil || !strings.Contains(err.Error(), "flavour") {
		t.Fatalf("unknown key accepted: %v", err)
	}
}
