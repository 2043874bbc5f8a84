package ha

import "testing"

func TestHolderIsThePodName(t *testing.T) {
	for identity, want := range map[string]string{
		"ml-platform-notebook-operator-7d9f-abcde_0f8e1c2a-1111-2222-3333-444455556666": "ml-platform-notebook-operator-7d9f-abcde",
		"pod-without-uuid": "pod-without-uuid",
		"":                 "",
	} {
		if got := Holder(identity); got != want {
			t.Errorf("Holder(%q) = %q, want %q", identity, got, want)
		}
	}
}
