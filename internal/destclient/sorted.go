package destclient

import "slices"

// MergeSorted returns cur with add merged in. Both are sorted by cmp and hold no two elements
// that compare equal; an element of add replaces the one of cur it compares equal to. It
// modifies neither, and the result's capacity is its length. The relay's held sets and the
// proxy's endpoint sets merge an Add into what they hold with it.
func MergeSorted[E any](cur, add []E, cmp func(a, b E) int) []E {
	out := make([]E, 0, len(cur)+len(add))
	i, j := 0, 0
	for i < len(cur) && j < len(add) {
		switch c := cmp(cur[i], add[j]); {
		case c < 0:
			out = append(out, cur[i])
			i++
		case c > 0:
			out = append(out, add[j])
			j++
		default:
			out = append(out, add[j])
			i++
			j++
		}
	}
	return slices.Clip(append(append(out, cur[i:]...), add[j:]...))
}

// DedupeLast removes from s, sorted by cmp (stably: the order of an Add's entries kept among
// equal ones), all but the last of each run of elements that compare equal, in place, and
// returns what is left; the elements past it are zeroed. The last of an Add's entries for one
// address is the one that counts, as Linkerd's proxy reads an Add.
func DedupeLast[E any](s []E, cmp func(a, b E) int) []E {
	if len(s) < 2 {
		return s
	}
	n := 0
	for i := range s {
		if i+1 < len(s) && cmp(s[i+1], s[i]) == 0 {
			continue
		}
		s[n] = s[i]
		n++
	}
	clear(s[n:])
	return s[:n]
}
