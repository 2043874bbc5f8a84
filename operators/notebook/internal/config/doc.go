// Package config is the platform team's configuration of the notebook
// operator, read from a YAML file the chart mounts.
package config
