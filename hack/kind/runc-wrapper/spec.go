package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
)

// capabilities maps the Linux capability names used in OCI specs to their
// bit numbers (include/uapi/linux/capability.h).
var capabilities = []struct {
	name string
	bit  uint
}{
	{"CAP_CHOWN", 0}, {"CAP_DAC_OVERRIDE", 1}, {"CAP_DAC_READ_SEARCH", 2}, {"CAP_FOWNER", 3},
	{"CAP_FSETID", 4}, {"CAP_KILL", 5}, {"CAP_SETGID", 6}, {"CAP_SETUID", 7}, {"CAP_SETPCAP", 8},
	{"CAP_LINUX_IMMUTABLE", 9}, {"CAP_NET_BIND_SERVICE", 10}, {"CAP_NET_BROADCAST", 11},
	{"CAP_NET_ADMIN", 12}, {"CAP_NET_RAW", 13}, {"CAP_IPC_LOCK", 14}, {"CAP_IPC_OWNER", 15},
	{"CAP_SYS_MODULE", 16}, {"CAP_SYS_RAWIO", 17}, {"CAP_SYS_CHROOT", 18}, {"CAP_SYS_PTRACE", 19},
	{"CAP_SYS_PACCT", 20}, {"CAP_SYS_ADMIN", 21}, {"CAP_SYS_BOOT", 22}, {"CAP_SYS_NICE", 23},
	{"CAP_SYS_RESOURCE", 24}, {"CAP_SYS_TIME", 25}, {"CAP_SYS_TTY_CONFIG", 26}, {"CAP_MKNOD", 27},
	{"CAP_LEASE", 28}, {"CAP_AUDIT_WRITE", 29}, {"CAP_AUDIT_CONTROL", 30}, {"CAP_SETFCAP", 31},
	{"CAP_MAC_OVERRIDE", 32}, {"CAP_MAC_ADMIN", 33}, {"CAP_SYSLOG", 34}, {"CAP_WAKE_ALARM", 35},
	{"CAP_BLOCK_SUSPEND", 36}, {"CAP_AUDIT_READ", 37}, {"CAP_PERFMON", 38}, {"CAP_BPF", 39},
	{"CAP_CHECKPOINT_RESTORE", 40},
}

const capSysResource = 24

// rewriteFile applies adaptProcess to a bundle's config.json (isBundle) or to
// an exec process file, keeping every other field as it was.
func rewriteFile(path string, isBundle bool, l limits) error {
	raw, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	var doc map[string]any
	dec := json.NewDecoder(bytes.NewReader(raw))
	// Numbers stay json.Number so that 64-bit values (memory limits, ids)
	// survive the round trip exactly.
	dec.UseNumber()
	if err := dec.Decode(&doc); err != nil {
		return fmt.Errorf("decode %s: %w", path, err)
	}
	process := doc
	if isBundle {
		p, ok := doc["process"].(map[string]any)
		if !ok {
			return nil
		}
		process = p
	}
	if !adaptProcess(process, l) {
		return nil
	}
	out, err := json.Marshal(doc)
	if err != nil {
		return err
	}
	info, err := os.Stat(path)
	if err != nil {
		return err
	}
	return os.WriteFile(path, out, info.Mode().Perm())
}

// adaptProcess removes capabilities the bounding set lacks from every
// capability set, and raises an oomScoreAdj below the current one when
// lowering it is not permitted. It reports whether it changed anything.
func adaptProcess(process map[string]any, l limits) bool {
	changed := false
	if caps, ok := process["capabilities"].(map[string]any); ok {
		for set, v := range caps {
			list, ok := v.([]any)
			if !ok {
				continue
			}
			kept := make([]any, 0, len(list))
			for _, c := range list {
				name, _ := c.(string)
				if bit, known := capabilityBit(name); known && !l.has(bit) {
					changed = true
					continue
				}
				kept = append(kept, c)
			}
			caps[set] = kept
		}
	}
	if adj, ok := process["oomScoreAdj"].(json.Number); ok && !l.has(capSysResource) {
		if v, err := adj.Int64(); err == nil && v < int64(l.oomScoreAdj) {
			process["oomScoreAdj"] = json.Number(fmt.Sprint(l.oomScoreAdj))
			changed = true
		}
	}
	return changed
}

func capabilityBit(name string) (uint, bool) {
	for _, c := range capabilities {
		if c.name == name {
			return c.bit, true
		}
	}
	return 0, false
}
