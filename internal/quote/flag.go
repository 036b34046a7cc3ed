package quote

import (
	"regexp"
	"strconv"
)

// flagValue matches the flag package's error for a value that does not parse: the value as
// %q wrote it, the flag's name, and the reason.
var flagValue = regexp.MustCompile(`(?s)^invalid value (".*") for flag (-[^ :]+): (.*)$`)

// FlagError is a command-line parse error of the flag package (which quotes a bad value
// whole) cut short: for a value that does not parse, the value as a prefix of 64 bytes, then
// the flag's name and the reason, so that a long value does not push the name out; any
// other error (an unknown flag, bad syntax) as Message shows it.
func FlagError(err error) string {
	m := flagValue.FindStringSubmatch(err.Error())
	if m == nil {
		return Message(err.Error())
	}
	v, uerr := strconv.Unquote(m[1])
	if uerr != nil {
		v = m[1]
	}
	return "invalid value " + Prefix(v, 64) + " for flag " + MessagePrefix(m[2], 64) + ": " + Message(m[3])
}
