package accelerator

import (
	"flag"
	"fmt"
)

// FlagName is the one name of the command-line flag that points an
// operator at its accelerator catalog file.
const FlagName = "accelerator-config"

// deprecatedFlagName is the Notebook operator's former name for FlagName,
// still accepted with a warning.
const deprecatedFlagName = "accelerators"

// BindFlag registers --accelerator-config on fs, and --accelerators as a
// deprecated alias that warns on fs's output, and returns the path the
// command line gives (empty means Default).
func BindFlag(fs *flag.FlagSet) *string {
	path := new(string)
	fs.StringVar(path, FlagName, "", "A YAML file with the accelerator catalog (shared/accelerator). Empty means one type, \"gpu\", for nvidia.com/gpu.")
	fs.Func(deprecatedFlagName, "Deprecated: use --"+FlagName+".", func(v string) error {
		_, _ = fmt.Fprintf(fs.Output(), "warning: --%s is deprecated; use --%s\n", deprecatedFlagName, FlagName)
		*path = v
		return nil
	})
	return path
}
