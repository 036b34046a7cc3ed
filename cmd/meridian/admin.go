package main

import "flag"

// pprofFlag registers --enable-pprof, which every server command has: /debug/pprof/ is
// served on the admin port only when it is given (as in Linkerd), since a profile shows the
// process's memory and command line to whoever reaches the port.
func pprofFlag(fs *flag.FlagSet, enable *bool) {
	fs.BoolVar(enable, "enable-pprof", false, "serve /debug/pprof/ on the admin port (off by default: profiles expose memory contents and the command line)")
}

// adminUsage is the help text of every server command's --admin-addr.
const adminUsage = "admin address (/metrics, /live, /ready; /debug/pprof/ with --enable-pprof)"
