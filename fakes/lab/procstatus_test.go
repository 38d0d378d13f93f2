package lab

import (
	"fmt"
	"os"
	"strings"
)

// readProcStatus reads /proc/pid/status into its fields, values trimmed.
func readProcStatus(pid int) (map[string]string, error) {
	if pid <= 0 {
		return nil, fmt.Errorf("no process (pid %d)", pid)
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return nil, err
	}
	fields := map[string]string{}
	for _, line := range strings.Split(string(b), "\n") {
		if key, value, ok := strings.Cut(line, ":"); ok {
			fields[key] = strings.TrimSpace(value)
		}
	}
	return fields, nil
}
