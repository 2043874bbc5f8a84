// Package lifecycle decides, without client calls, whether a Notebook's
// server runs and what the StatefulSet records about why: start, suspend,
// cull, restart after a cull, and when a template change may restart it.
package lifecycle
