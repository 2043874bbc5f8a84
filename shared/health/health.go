package health

import (
	"embed"
	"fmt"
	"path"
	"sort"
	"strings"

	lua "github.com/yuin/gopher-lua"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/cli-utils/pkg/kstatus/status"
)

// scripts are the Argo CD health checks: common.lua, the part every kind
// shares (observed generation, conditions by type, deletion), and one file
// per kind with its own rules, named <group>_<Kind>.lua as Argo CD names the
// resource customization keys. Argo CD runs one script per kind, so each
// check it gets is common.lua followed by the kind's file.
//
//go:embed argocd/*.lua
var scripts embed.FS

// commonScript is the file every kind's check starts with.
const commonScript = "common.lua"

// Argo CD health statuses (argoproj/gitops-engine pkg/health).
const (
	Healthy     = "Healthy"
	Progressing = "Progressing"
	Degraded    = "Degraded"
	Suspended   = "Suspended"
)

// ArgoCDHealth is what an Argo CD health check returns.
type ArgoCDHealth struct {
	Status  string
	Message string
}

// ArgoCDScripts returns every health check by its resource customization
// key, <group>_<Kind>.
func ArgoCDScripts() (map[string]string, error) {
	entries, err := scripts.ReadDir("argocd")
	if err != nil {
		return nil, err
	}
	common, err := scripts.ReadFile(path.Join("argocd", commonScript))
	if err != nil {
		return nil, err
	}
	out := map[string]string{}
	for _, e := range entries {
		if e.Name() == commonScript {
			continue
		}
		b, err := scripts.ReadFile(path.Join("argocd", e.Name()))
		if err != nil {
			return nil, err
		}
		out[strings.TrimSuffix(e.Name(), ".lua")] = string(common) + string(b)
	}
	return out, nil
}

// Keys lists the customization keys in order.
func Keys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// toUnstructured converts a typed object, which must carry its apiVersion
// and kind, as the API server serves it.
func toUnstructured(obj runtime.Object) (*unstructured.Unstructured, error) {
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		return nil, err
	}
	u := &unstructured.Unstructured{Object: m}
	if u.GetAPIVersion() == "" || u.GetKind() == "" {
		return nil, fmt.Errorf("%T has no apiVersion and kind: set its TypeMeta", obj)
	}
	return u, nil
}

// Kstatus computes the object's kstatus with the real library.
func Kstatus(obj runtime.Object) (*status.Result, error) {
	u, err := toUnstructured(obj)
	if err != nil {
		return nil, err
	}
	return status.Compute(u)
}

// ArgoCD runs the kind's health check on the object.
func ArgoCD(obj runtime.Object) (ArgoCDHealth, error) {
	u, err := toUnstructured(obj)
	if err != nil {
		return ArgoCDHealth{}, err
	}
	all, err := ArgoCDScripts()
	if err != nil {
		return ArgoCDHealth{}, err
	}
	key := u.GroupVersionKind().Group + "_" + u.GetKind()
	script, ok := all[key]
	if !ok {
		return ArgoCDHealth{}, fmt.Errorf("no Argo CD health check for %s", key)
	}
	return RunLua(script, u.Object)
}

// RunLua runs an Argo CD health script on an object as Argo CD does: the
// object is the global obj, and the script returns a table with status and
// message. Only the base, table and string libraries are open, as in Argo
// CD's sandbox.
func RunLua(script string, obj map[string]any) (ArgoCDHealth, error) {
	ls := lua.NewState(lua.Options{SkipOpenLibs: true})
	defer ls.Close()
	for _, lib := range []struct {
		name string
		fn   lua.LGFunction
	}{{lua.BaseLibName, lua.OpenBase}, {lua.TabLibName, lua.OpenTable}, {lua.StringLibName, lua.OpenString}} {
		ls.Push(ls.NewFunction(lib.fn))
		ls.Push(lua.LString(lib.name))
		ls.Call(1, 0)
	}
	ls.SetGlobal("obj", toLua(ls, obj))
	if err := ls.DoString(script); err != nil {
		return ArgoCDHealth{}, err
	}
	ret, ok := ls.Get(-1).(*lua.LTable)
	if !ok {
		return ArgoCDHealth{}, fmt.Errorf("the health check returned %s, not a table", ls.Get(-1).Type())
	}
	h := ArgoCDHealth{Status: lua.LVAsString(ret.RawGetString("status")), Message: lua.LVAsString(ret.RawGetString("message"))}
	switch h.Status {
	case Healthy, Progressing, Degraded, Suspended, "Missing", "Unknown":
		return h, nil
	}
	return h, fmt.Errorf("the health check returned status %q, which Argo CD does not know", h.Status)
}

// toLua converts decoded JSON (maps, slices, strings, numbers, booleans) to
// Lua values the way Argo CD does: objects and arrays become tables, arrays
// indexed from 1.
func toLua(ls *lua.LState, v any) lua.LValue {
	switch v := v.(type) {
	case map[string]any:
		t := ls.NewTable()
		for k, x := range v {
			t.RawSetString(k, toLua(ls, x))
		}
		return t
	case []any:
		t := ls.NewTable()
		for _, x := range v {
			t.Append(toLua(ls, x))
		}
		return t
	case string:
		return lua.LString(v)
	case bool:
		return lua.LBool(v)
	case int64:
		return lua.LNumber(v)
	case float64:
		return lua.LNumber(v)
	case nil:
		return lua.LNil
	default:
		return lua.LString(fmt.Sprint(v))
	}
}
