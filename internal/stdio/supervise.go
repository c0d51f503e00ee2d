package stdio

import (
	"fmt"
	"os"
	"os/exec"
	"strconv"
)

// SupervisorParentVar names the variable by which Start tells a supervisor
// (Config.Supervisor) the pid of the process that started it, so the
// supervisor can tell whether that process died before it could learn of
// it. The supervisor must remove it before it starts the command: the
// command never sees it.
const SupervisorParentVar = ReservedPrefix + "SUPERVISOR_PARENT"

// supervisorParentEntry is SupervisorParentVar=<this process's pid>.
func supervisorParentEntry() string {
	return SupervisorParentVar + "=" + strconv.Itoa(os.Getpid())
}

// command builds the exec.Cmd of cfg with the environment env: the
// command itself, or, with cfg.Supervisor, the supervisor given the
// command's resolved path, then its argv (argv[0] as given in Path).
func command(cfg Config, env []string) (*exec.Cmd, error) {
	cmd := exec.Command(cfg.Path, cfg.Args...)
	if cmd.Err != nil {
		return nil, cmd.Err
	}
	if !supervised(cfg) {
		cmd.Env = env
		return cmd, nil
	}
	args := append(append([]string(nil), cfg.Supervisor[1:]...), cmd.Path, cfg.Path)
	args = append(args, cfg.Args...)
	sup := exec.Command(cfg.Supervisor[0], args...)
	if sup.Err != nil {
		return nil, fmt.Errorf("supervisor: %w", sup.Err)
	}
	sup.Env = append(append(make([]string, 0, len(env)+1), env...), supervisorParentEntry())
	return sup, nil
}

// supervised reports whether cfg's command runs under a supervisor: only
// where the supervisor can learn of the proxy's death (Linux).
func supervised(cfg Config) bool { return len(cfg.Supervisor) > 0 && supervisorSupported }
