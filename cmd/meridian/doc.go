// Command meridian is the single binary of the Meridian mesh: one subcommand per process
// (destination, identity, policy, injector, proxy, demo, bench) and the CLI tools.
//
// This package only parses flags, handles signals and wires packages together. Each
// subcommand lives in its own file and registers itself with register in an init func.
//
// It may import every package of the module (it is the top of the import graph); nothing
// imports it.
package main
