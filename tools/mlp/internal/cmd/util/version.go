package util

import "runtime/debug"

// version is set at build time: -ldflags "-X .../internal/cmd/util.version=v1.2.3".
var version = ""

// ClientVersion is the version the binary was built as.
func ClientVersion() string {
	if version != "" {
		return version
	}
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
		return bi.Main.Version
	}
	return "devel"
}
