// Command kind-default-image prints the node image the pinned kind release
// uses by default, read from kind's own package rather than from its
// source text.
package main

import (
	"fmt"

	"sigs.k8s.io/kind/pkg/apis/config/defaults"
)

func main() {
	fmt.Println(defaults.Image)
}
