package proxyinit

import (
	"bytes"
	"context"
	"fmt"
	"os/exec"
	"strings"
)

// Runner runs one command with stdin and returns its standard output. An error carries the
// command's standard error.
type Runner interface {
	Run(ctx context.Context, stdin []byte, name string, args ...string) ([]byte, error)
}

// ExecRunner runs commands with os/exec, each prefixed by Prefix (for example
// ["ip", "netns", "exec", "ns1"] to act inside a network namespace).
type ExecRunner struct {
	Prefix []string
}

var _ Runner = ExecRunner{}

// Run implements Runner.
func (e ExecRunner) Run(ctx context.Context, stdin []byte, name string, args ...string) ([]byte, error) {
	argv := append(append(append([]string(nil), e.Prefix...), name), args...)
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	if stdin != nil {
		cmd.Stdin = bytes.NewReader(stdin)
	}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return stdout.Bytes(), fmt.Errorf("%s: %w: %s", strings.Join(argv, " "), err, strings.TrimSpace(stderr.String()))
	}
	return stdout.Bytes(), nil
}

// Binaries names the iptables programs: "iptables" picks the system default backend,
// "iptables-legacy" or "iptables-nft" a specific one.
type Binaries struct {
	Save, Restore string
}

// BinariesFor returns the save/restore programs for a mode: "" or "default", "legacy" or
// "nft".
func BinariesFor(mode string) (Binaries, error) {
	switch mode {
	case "", "default":
		return Binaries{Save: "iptables-save", Restore: "iptables-restore"}, nil
	case "legacy":
		return Binaries{Save: "iptables-legacy-save", Restore: "iptables-legacy-restore"}, nil
	case "nft":
		return Binaries{Save: "iptables-nft-save", Restore: "iptables-nft-restore"}, nil
	}
	return Binaries{}, fmt.Errorf("iptables mode %q: want default, legacy or nft", mode)
}

// Result says what Apply did.
type Result struct {
	// AlreadyConfigured is true when the chains existed and nothing was changed (a restarted
	// init container must not add the rules twice).
	AlreadyConfigured bool
	// Rules is the iptables-restore input that was applied.
	Rules string
	// After is iptables-save -t nat after applying.
	After string
}

// Apply installs c's rules with bins through r, unless they are already present.
func Apply(ctx context.Context, c Config, bins Binaries, r Runner) (Result, error) {
	rules, err := Rules(c)
	if err != nil {
		return Result{}, err
	}
	before, err := r.Run(ctx, nil, bins.Save, "-t", "nat")
	if err != nil {
		return Result{}, fmt.Errorf("read current rules: %w", err)
	}
	if hasChain(string(before), ChainRedirect) || hasChain(string(before), ChainOutput) {
		return Result{AlreadyConfigured: true, Rules: rules, After: string(before)}, nil
	}
	if _, err := r.Run(ctx, []byte(rules), bins.Restore, "--noflush"); err != nil {
		return Result{}, fmt.Errorf("apply rules: %w", err)
	}
	after, err := r.Run(ctx, nil, bins.Save, "-t", "nat")
	if err != nil {
		return Result{}, fmt.Errorf("read applied rules: %w", err)
	}
	return Result{Rules: rules, After: string(after)}, nil
}

func hasChain(save, chain string) bool {
	for _, line := range strings.Split(save, "\n") {
		if strings.HasPrefix(line, ":"+chain+" ") {
			return true
		}
	}
	return false
}
