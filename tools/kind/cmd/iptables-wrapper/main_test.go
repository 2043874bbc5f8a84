package main

import "testing"

func TestDetectMode(t *testing.T) {
	tests := map[string]struct {
		outputs map[string]string // "mode name args" -> output
		want    string
	}{
		"kubelet hint chain in nft": {
			outputs: map[string]string{"nft iptables-nft-save -t mangle": ":KUBE-IPTABLES-HINT - [0:0]\n"},
			want:    "nft",
		},
		"kubelet canary in legacy ip6tables": {
			outputs: map[string]string{"legacy ip6tables-legacy-save -t mangle": ":KUBE-KUBELET-CANARY - [0:0]\n"},
			want:    "legacy",
		},
		"more nft rules": {
			outputs: map[string]string{
				"nft iptables-nft-save":       "-A OUTPUT -j DOCKER_OUTPUT\n-A POSTROUTING -j DOCKER_POSTROUTING\n",
				"legacy iptables-legacy-save": "-A INPUT -j ACCEPT\n",
			},
			want: "nft",
		},
		"nothing anywhere falls back to legacy": {
			outputs: map[string]string{},
			want:    "legacy",
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			r := func(mode, cmd string, args ...string) []byte {
				key := mode + " " + cmd
				for _, a := range args {
					key += " " + a
				}
				return []byte(tc.outputs[key])
			}
			if got := detectMode(r); got != tc.want {
				t.Errorf("detectMode() = %q, want %q", got, tc.want)
			}
		})
	}
}
